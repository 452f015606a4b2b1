"""Issue 14 #1: absurdly nested YAML or JSON bodies are refused as bad input; nothing crashes.

The elastic-quota routes once fed the body to the C YAML parser, which recurses without a bound and
ended the whole process with SIGSEGV; the quota-tree route raised RecursionError. Each request runs
in a child process, so a crash fails the test instead of the test run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from quotaplane.config.bodies import MAX_NESTING, json_depth, load_json, load_yaml_documents
from quotaplane.errors import ConfigError

_SERVER = textwrap.dedent("""
    import json, sys
    from fastapi.testclient import TestClient
    import quotaplane as qp
    from quotaplane.server.app import create_app
    CONFIG = '''
    partitions:
      - name: default
        queues:
          - name: root
            submitacl: "*"
    '''
    method, path, body, ctype = json.loads(sys.stdin.read())
    s = qp.Scheduler.from_yaml(CONFIG)
    with TestClient(create_app(s), raise_server_exceptions=False) as c:
        r = c.request(method, path, content=body.encode(), headers={"Content-Type": ctype})
        print(json.dumps({"status": r.status_code, "body": r.json()}))
""")


def _request(method: str, path: str, body: str, ctype: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", _SERVER], input=json.dumps([method, path, body, ctype]),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"the server process died ({done.returncode}): {done.stderr[-2000:]}"
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("method", ["PUT", "POST"])
def test_deep_yaml_to_elastic_quotas_is_a_400(method: str) -> None:
    got = _request(method, "/ws/v1/partition/default/elasticquotas", "a: " + "[" * 100_000,
                   "application/x-yaml")
    assert got["status"] == 400
    assert "nested too deeply" in str(got["body"])


def test_deep_json_to_a_quota_tree_is_a_400() -> None:
    got = _request("PUT", "/ws/v1/quotatrees/t", '{"metadata": ' + "[" * 100_000 + "]" * 100_000 + "}",
                   "application/json")
    assert got["status"] == 400
    body = got["body"]
    assert isinstance(body, dict) and "nested too deeply" in str(body["message"])
    assert "RecursionError" not in json.dumps(body)


def test_json_depth_ignores_brackets_inside_strings() -> None:
    assert json_depth('{"a": "[[[[{{{{"}') == 1
    assert json_depth('[[1], {"b": [2]}]') == 3
    assert json_depth('"\\"[["') == 0


def test_load_json_bounds_and_names_the_body() -> None:
    assert load_json("[" * MAX_NESTING + "]" * MAX_NESTING, "body") is not None
    with pytest.raises(ConfigError, match="the tree body is nested too deeply"):
        load_json("[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1), "the tree body")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_json("{", "body")


def test_load_yaml_documents_bounds_and_reads_every_document() -> None:
    assert load_yaml_documents("a: 1\n---\nb: [2]\n") == [{"a": 1}, {"b": [2]}]
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_yaml_documents("a: " + "{b: " * (MAX_NESTING + 1))
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_yaml_documents("a: [1\n")


def test_the_problem_lists_the_line_once() -> None:
    with pytest.raises(ConfigError) as err:
        load_yaml_documents("a: 1\nb: " + "[" * (MAX_NESTING + 1))
    assert err.value.line == 2
    reason = f"invalid YAML: body is nested too deeply (more than {MAX_NESTING} levels)"
    assert err.value.problems == [(2, reason)]
