"""Trace parsing and whole-trace validation: every error names the line and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quotaplane.resources import Resource
from quotaplane.sim import TraceError, parse_csv, parse_jsonl, run_simulation

ROOT = Path(__file__).resolve().parents[2]
NODE = '{"t": 0, "op": "node", "node": "n1", "capacity": {"vcore": 8, "memory": "32Gi"}}'
SUBMIT = '{"t": 1, "op": "submit", "app": "a", "user": "u", "queue": "root.dev"}'


def _err(text: str) -> TraceError:
    with pytest.raises(TraceError) as info:
        parse_jsonl(text)
    return info.value


def test_valid_trace_parses_to_internal_units() -> None:
    evs = parse_jsonl("\n".join([
        "# a comment", NODE, "", SUBMIT,
        '{"t": 2, "op": "allocate", "app": "a", "resource": {"vcore": "500m"}, "duration": 3.5,'
        ' "priority": 2, "preemptible": false}',
        '{"t": 2, "op": "release", "key": "a@5"}',
    ]))
    assert [e.op for e in evs] == ["node", "submit", "allocate", "release"]
    assert evs[0].capacity == Resource({"vcore": 8000, "memory": 32 * 1024 ** 3})
    alloc = evs[2]
    assert alloc.key == "a@5"            # generated from the app and the line
    assert alloc.resource == Resource({"vcore": 500})
    assert (alloc.duration, alloc.priority, alloc.preemptible, alloc.line) == (3.5, 2, False, 5)


@pytest.mark.parametrize(("line", "field", "needle"), [
    ('{"t": 2, "op": "allocate", "app": "a", "resource": {"vcore": 1}', "(json)", "not valid JSON"),
    ('[1, 2]', "(event)", "JSON object"),
    ('{"op": "finish", "app": "a"}', "t", "missing"),
    ('{"t": -1, "op": "finish", "app": "a"}', "t", "non-negative"),
    ('{"t": true, "op": "finish", "app": "a"}', "t", "non-negative"),
    ('{"t": 2, "op": "explode"}', "op", "must be one of"),
    ('{"t": 2, "op": "finish"}', "app", "missing"),
    ('{"t": 2, "op": "finish", "app": "a", "colour": "red"}', "colour", "unknown field"),
    ('{"t": 2, "op": "allocate", "app": "a", "resource": {"vcore": -2}}', "resource", "invalid quantity"),
    ('{"t": 2, "op": "allocate", "app": "a", "resource": {"vcore": 1}, "duration": 0}', "duration",
     "positive"),
    ('{"t": 2, "op": "allocate", "app": "a", "resource": {"vcore": 1}, "priority": 1.5}', "priority",
     "integer"),
    ('{"t": 2, "op": "allocate", "app": "a", "resource": {"vcore": 1}, "preemptible": "no"}',
     "preemptible", "true or false"),
    ('{"t": 2, "op": "submit", "app": "b", "user": ""}', "user", "non-empty"),
    ('{"t": 2, "op": "submit", "app": "b", "user": "u", "groups": "g"}', "groups", "list"),
    ('{"t": 2, "op": "submit", "app": "b", "user": "u", "tags": {"k": 1}}', "tags", "strings"),
    ('{"t": 0.5, "op": "finish", "app": "a"}', "t", "time goes back"),
    ('{"t": 2, "op": "node", "node": "n1", "capacity": {"vcore": 1}}', "node", "already registered"),
    ('{"t": 2, "op": "remove_node", "node": "n9"}', "node", "not registered"),
    ('{"t": 2, "op": "submit", "app": "a", "user": "u"}', "app", "already submitted at line 2"),
    ('{"t": 2, "op": "allocate", "app": "zz", "resource": {"vcore": 1}}', "app", "not been submitted"),
    ('{"t": 2, "op": "release", "key": "nope"}', "key", "not defined"),
])
def test_each_error_names_line_and_field(line: str, field: str, needle: str) -> None:
    err = _err("\n".join([NODE, SUBMIT, line]))
    assert err.line == 3
    assert len(err.problems) == 1
    assert err.problems[0].startswith(f"line 3: field {field!r}: ")
    assert needle in err.problems[0]


def test_semantic_errors_across_lines() -> None:
    text = "\n".join([
        NODE, SUBMIT,
        '{"t": 2, "op": "ask", "app": "a", "key": "k", "resource": {"vcore": 1}}',
        '{"t": 3, "op": "allocate", "app": "a", "key": "k", "resource": {"vcore": 1}}',
        '{"t": 4, "op": "release", "key": "k"}',
        '{"t": 5, "op": "release", "key": "k"}',
        '{"t": 6, "op": "finish", "app": "a"}',
        '{"t": 7, "op": "allocate", "app": "a", "resource": {"vcore": 1}}',
    ])
    err = _err(text)
    assert err.problems == [
        "line 4: field 'key': allocation key 'k' was already used at line 3",
        "line 6: field 'key': allocation key 'k' was already released at line 5",
        "line 8: field 'app': application 'a' finished at line 7",
    ]
    assert err.line == 4


def test_release_after_finish_is_an_error() -> None:
    err = _err("\n".join([
        NODE, SUBMIT, '{"t": 2, "op": "allocate", "app": "a", "key": "k", "resource": {"vcore": 1}}',
        '{"t": 3, "op": "finish", "app": "a"}', '{"t": 4, "op": "release", "key": "k"}']))
    assert err.problems == ["line 5: field 'key': allocation key 'k' belongs to application 'a', "
                            "which finished at line 4"]


def test_every_problem_is_reported_not_just_the_first() -> None:
    err = _err("\n".join([NODE, '{"t": 1, "op": "submit"}', '{"t": 2, "op": "finish", "app": "q"}']))
    assert [p.split(":")[0] for p in err.problems] == ["line 2", "line 2", "line 3"]
    assert "field 'app'" in err.problems[0] and "field 'user'" in err.problems[1]


def test_csv_trace_matches_jsonl(tmp_path: Path) -> None:
    text = ("t,op,node,capacity,app,user,groups,queue,key,resource,duration,priority,preemptible\n"
            "0,node,n1,vcore=8;memory=32Gi,,,,,,,,,\n"
            "1,submit,,,a,u,g1;g2,root.dev,,,,,\n"
            "2,allocate,,,a,,,,k1,vcore=2;memory=1Gi,30,3,false\n"
            "3,release,,,,,,,k1,,,,\n")
    csv_evs = parse_csv(text)
    json_evs = parse_jsonl("\n".join([
        NODE,
        '{"t": 1, "op": "submit", "app": "a", "user": "u", "groups": ["g1", "g2"], "queue": "root.dev"}',
        '{"t": 2, "op": "allocate", "app": "a", "key": "k1", "resource": {"vcore": 2, "memory": "1Gi"},'
        ' "duration": 30, "priority": 3, "preemptible": false}',
        '{"t": 3, "op": "release", "key": "k1"}']))
    fields = ("t", "op", "node", "capacity", "app", "user", "groups", "queue", "key", "resource", "duration",
              "priority", "preemptible")
    assert [[getattr(e, f) for f in fields] for e in csv_evs] == [[getattr(e, f) for f in fields]
                                                                  for e in json_evs]


def test_csv_errors_name_line_and_field() -> None:
    with pytest.raises(TraceError) as info:
        parse_csv("t,op,app,user,colour\n")
    assert info.value.problems == [
        "line 1: field 'colour': unknown column (columns: t, op, node, capacity, app, user, groups, queue, "
        "tags, key, resource, priority, preemptible, duration)"]
    with pytest.raises(TraceError) as info:
        parse_csv("t,op,app,user\n0,submit,a,u\nsoon,finish,a,\n1,finish,a,,extra\n")
    assert info.value.problems == ["line 3: field 't': must be a number, got 'soon'",
                                   "line 4: field '(row)': 5 cells but the header names 4 columns"]
    with pytest.raises(TraceError) as info:
        parse_csv("t,op,node,capacity\n0,node,n1,vcore:8\n")
    assert info.value.problems[0].startswith("line 2: field 'capacity': expected name=value")


def test_invalid_trace_changes_nothing(tmp_path: Path) -> None:
    """The whole trace is validated first: a late error means no run and no output at all."""
    trace = tmp_path / "t.jsonl"
    good = (ROOT / "examples" / "trace.jsonl").read_text()
    trace.write_text(good + json.dumps({"t": 500, "op": "release", "key": "missing"}) + "\n")
    out = tmp_path / "out"
    with pytest.raises(TraceError) as info:
        run_simulation(ROOT / "examples" / "trace-queues.yaml", trace, out)
    assert info.value.line == len(good.splitlines()) + 1
    assert str(trace) in str(info.value)
    assert not out.exists()


def test_equal_but_differently_typed_amounts_are_parsed_each_on_their_own() -> None:
    """The parse cache must not let 1.0 or true through because 1 was seen before."""
    ok = '{"t": 2, "op": "allocate", "app": "a", "resource": {"vcore": 1}}'
    for bad in ('{"t": 3, "op": "allocate", "app": "a", "resource": {"vcore": 1.0}}',
                '{"t": 3, "op": "allocate", "app": "a", "resource": {"vcore": true}}'):
        err = _err("\n".join([NODE, SUBMIT, ok, bad]))
        assert err.problems[0].startswith("line 4: field 'resource': ")
