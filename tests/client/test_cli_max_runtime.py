"""``whatif --max-runtime`` and ``Client.what_if(max_runtime=…)``: the declared runtime a budget counts
(docs/budgets.md "Committed"). Found trying the budgets as a new user: the REST whatif took
``maxRuntime`` but neither the client's ``what_if`` nor the CLI could send it, so a request that a
budget admits for 30 minutes and refuses for 2 hours could not be asked about from the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import quotaplane as qp
from quotaplane.client import Client
from tests.client.test_client import _Server

ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).with_name("quotaplane"))
BUDGET = """    budgets:
      - queue: root.engineering.sandbox
        resourcehours: {vcore: 1}
        period: day
"""
CONFIG = (ROOT / "examples" / "queues.yaml").read_text().replace("    placementrules:\n",
                                                                  BUDGET + "    placementrules:\n", 1)


@pytest.fixture(scope="module")
def service() -> Iterator[_Server]:
    s = qp.Scheduler.from_yaml(CONFIG)
    srv = _Server(s)
    p = s.partition("default")
    p.add_node("node-1", {"vcore": 16000, "memory": 68719476736, "pods": 110})
    p.add_application("app-1", qp.UserGroup("sue", ("engineering",)), queue="root.engineering.sandbox")
    yield srv
    srv.stop()
    s.close()


def _run(srv: _Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUOTAPLANE_SERVER": srv.url, "COLUMNS": "200"}
    return subprocess.run([EXE, *args], env=env, capture_output=True, text=True, timeout=60)


def _codes(out: subprocess.CompletedProcess[str]) -> list[str]:
    assert out.returncode == 0, out.stderr
    return [r["code"] for r in json.loads(out.stdout)["reasons"]]


def test_whatif_counts_the_declared_runtime(service: _Server) -> None:
    assert _codes(_run(service, "whatif", "app-1", "cpu=1", "--max-runtime", "2h", "-o", "json")) == [
        "budget.exhausted"]
    assert _codes(_run(service, "whatif", "app-1", "cpu=1", "--max-runtime", "30m", "-o", "json")) == []
    assert _codes(_run(service, "whatif", "app-1", "cpu=1", "--max-runtime", "1800", "-o", "json")) == []
    assert _codes(_run(service, "whatif", "app-1", "cpu=1", "-o", "json")) == []
    table = _run(service, "whatif", "app-1", "cpu=1", "--max-runtime", "2h")
    assert "budget.exhausted" in table.stdout and "root.engineering.sandbox" in table.stdout
    explained = _run(service, "whatif", "app-1", "cpu=1", "--max-runtime", "2h", "--explain", "-o", "json")
    assert explained.returncode == 0 and "budget.exhausted" in explained.stdout, explained.stderr


@pytest.mark.parametrize("bad", ["soon", "0", "-5", "2x"])
def test_whatif_refuses_a_runtime_that_is_not_one(service: _Server, bad: str) -> None:
    out = _run(service, "whatif", "app-1", "cpu=1", "--max-runtime", bad)
    assert out.returncode == 2 and "--max-runtime" in out.stderr and repr(bad) in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_the_client_sends_the_declared_runtime(service: _Server) -> None:
    with Client(service.url) as c:
        assert [v.code for v in c.what_if("app-1", {"vcore": 1000}, max_runtime=7200).reasons] == [
            "budget.exhausted"]
        assert c.what_if("app-1", {"vcore": 1000}, max_runtime=1800).allocated
