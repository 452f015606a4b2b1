"""The simulator's defects of issue 36 item 4, each pinned by a test written before its fix.

- progress lines when stderr is not a terminal (the bar showed only on a terminal: a 5-minute run
  redirected to a file printed nothing);
- applications that placement moved elsewhere (e.g. the ``root.default`` fallback) counted apart from
  the ones accepted where they asked, and the refusals they cause counted apart too;
- utilisation weighted by time, the same whatever the sample interval (it was a mean over samples:
  96.6 % against 88.8 % on one trace);
- a missing trace (or configuration) file reported in one clear line naming it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quotaplane.cli import app
from quotaplane.sim import generate_trace, simulate, trace_to_jsonl

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "examples" / "trace-queues.yaml")
TRACE = str(ROOT / "examples" / "trace.jsonl")

SMALL = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              max: {vcore: 2}
          - name: default
"""


def test_progress_lines_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(trace_to_jsonl(generate_trace(3, 300, queues=["root.default"], nodes=2)))
    res = CliRunner().invoke(app, ["simulate", "--config", CONFIG, "--trace", str(trace), "--no-plot"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("replaying")]
    pcts = [int(m.group(1)) for ln in lines if (m := re.search(r" (\d+)% ", ln))]
    # every 10 %: 10, 20, ..., 100, each once and in order
    assert pcts == list(range(10, 101, 10)), lines
    assert re.fullmatch(r"replaying \S+: 100% \(\d+/\d+ trace events\)", lines[-1]), lines[-1]


def _fallback_trace() -> list[dict[str, Any]]:
    return [
        {"t": 0, "op": "node", "node": "n1", "capacity": {"vcore": 3}},
        {"t": 1, "op": "submit", "app": "ok", "user": "u", "queue": "root.a"},
        # root.gone does not exist: placement falls back to root.default (P-6) without a word
        {"t": 1, "op": "submit", "app": "moved", "user": "u", "queue": "root.gone"},
        {"t": 2, "op": "allocate", "app": "ok", "key": "ok-1", "resource": {"vcore": 2}},
        {"t": 3, "op": "allocate", "app": "moved", "key": "mv-1", "resource": {"vcore": 1}},
        {"t": 4, "op": "allocate", "app": "moved", "key": "mv-2", "resource": {"vcore": 1}},   # root full
        {"t": 5, "op": "allocate", "app": "ok", "key": "ok-2", "resource": {"vcore": 1}},      # root full
    ]


def test_placement_fallbacks_are_counted_apart_from_admissions() -> None:
    s = simulate(SMALL, _fallback_trace()).summary
    apps = s["applications"]
    assert (apps["submitted"], apps["accepted"], apps["rejected"]) == (2, 1, 0)
    assert apps["moved_by_placement"] == {
        "count": 1, "to_default": 1,
        "moves": [{"line": 3, "app": "moved", "user": "u", "requested": "root.gone",
                   "placed": "root.default"}]}
    a = s["allocations"]
    assert (a["admitted"], a["refused"]) == (2, 2)
    # of the admissions and refusals, those of applications placement moved, apart
    assert a["of_moved_applications"] == {"admitted": 1, "refused": 1}


def test_a_bare_queue_name_placed_where_it_asked_is_not_a_move() -> None:
    events = [{"t": 0, "op": "submit", "app": "x", "user": "u", "queue": "A"},
              {"t": 0, "op": "submit", "app": "y", "user": "u"}]
    apps = simulate(SMALL, events).summary["applications"]
    assert apps["accepted"] == 2 and apps["moved_by_placement"]["count"] == 0


def _util_trace() -> list[dict[str, Any]]:
    # 4 cores; 2 used over [0, 10), 4 used over [10, 15): busy 2*10 + 4*5 = 40 of 4*15 = 60 core-seconds
    return [
        {"t": 0, "op": "node", "node": "n1", "capacity": {"vcore": 4}},
        {"t": 0, "op": "submit", "app": "x", "user": "u", "queue": "root.default"},
        {"t": 0, "op": "allocate", "app": "x", "key": "k1", "resource": {"vcore": 2}, "duration": 10},
        {"t": 10, "op": "allocate", "app": "x", "key": "k2", "resource": {"vcore": 4}, "duration": 5},
    ]


@pytest.mark.parametrize("interval", [None, 0.5, 1, 4, 7.3, 10, 100])
def test_utilisation_is_weighted_by_time_whatever_the_sample_interval(interval: float | None) -> None:
    s = simulate(SMALL, _util_trace(), sample_interval=interval).summary
    assert s["utilisation"]["resources"]["vcore"] == {"mean": round(40 / 60, 6), "peak": 1.0}


def test_utilisation_of_the_example_does_not_move_with_the_interval() -> None:
    from quotaplane.sim import run_simulation

    runs = [run_simulation(CONFIG, TRACE, sample_interval=i).summary for i in (None, 1, 10, 0.1)]
    means = {s["utilisation"]["resources"]["vcore"]["mean"] for s in runs}
    assert len(means) == 1, means


def test_a_missing_trace_file_is_one_clear_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    res = CliRunner().invoke(app, ["simulate", "--config", CONFIG, "--trace", str(missing)])
    assert res.exit_code == 1
    assert res.output.splitlines() == [f"{missing}: no such trace file"]


def test_a_missing_config_file_is_one_clear_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    res = CliRunner().invoke(app, ["simulate", "--config", str(missing), "--trace", TRACE])
    assert res.exit_code == 1
    assert res.output.splitlines() == [f"{missing}: no such configuration file"]


def test_a_trace_that_is_a_directory_or_not_text_is_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["simulate", "--config", CONFIG, "--trace", str(tmp_path)])
    assert res.exit_code == 1
    assert res.output.splitlines() == [f"{tmp_path}: the trace file is a directory"]
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    res = CliRunner().invoke(app, ["simulate", "--config", CONFIG, "--trace", str(binary)])
    assert res.exit_code == 1
    assert res.output.splitlines() == [f"{binary}: the trace file is not UTF-8 text"]
