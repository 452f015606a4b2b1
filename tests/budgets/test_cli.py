"""``quotaplane budgets`` against a real service (docs/budgets.md): the table of what is left, the
service's JSON, and one scope's budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quotaplane as qp
from tests.budgets.test_admission import NOV1, H, config
from tests.client.test_client import _Server
from tests.partition.helpers import Clock

EXE = str(Path(sys.executable).with_name("quotaplane"))


@pytest.fixture
def server() -> Iterator[_Server]:
    clock = Clock(NOV1)
    s = qp.Scheduler.from_yaml(config(), clock=clock)
    p = s.partition("default")
    p.add_node("n", {"nvidia.com/gpu": 8})
    p.add_application("t", qp.UserGroup("alice", ["ml"]), queue="root.teams.a")
    p.allocate("t", "k1", {"nvidia.com/gpu": 4})
    clock.advance(20 * H)
    srv = _Server(s)
    yield srv
    srv.stop()
    s.close()


def _run(srv: _Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUOTAPLANE_SERVER": srv.url, "COLUMNS": "200"}
    return subprocess.run([EXE, "budgets", *args], env=env, capture_output=True, text=True, timeout=60)


def test_the_table_shows_what_is_left_the_rate_and_the_reset(server: _Server) -> None:
    out = _run(server, "-o", "wide")
    assert out.returncode == 0, out.stderr
    [line] = [ln for ln in out.stdout.splitlines() if "root.teams.a" in ln]
    assert "100.0 GPU-h" in line and "80.0" in line and "20.0" in line and "80 %" in line
    assert "4 GPU" in line and "2026-11-02T01:00" in line and "2026-12-01T00:00" in line


def test_json_is_the_service_answer_and_one_scope_can_be_asked(server: _Server) -> None:
    out = _run(server, "-o", "json", "--queue", "root.teams.a")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["scope"] == "root.teams.a" and data["resources"]["nvidia.com/gpu"]["left"] == 20
    bad = _run(server, "--queue", "root.teams.b")
    assert bad.returncode != 0 and "no budget on queue 'root.teams.b'" in bad.stderr
    assert _run(server, "--user", "alice").returncode == 2


def test_the_reset_and_the_run_out_times_keep_their_offset() -> None:
    """Found as a new user: a Zurich-midnight reset showed as ``2026-11-30T00:00`` beside UTC rows,
    an hour off with nothing to say so; each time keeps the offset of its budget's zone."""
    from quotaplane.cli_budgets import budget_rows

    def status(scope: str, resets: str | None, runs_out: str | None) -> dict[str, Any]:
        return {"scope": scope, "resetsAt": resets, "resources": {"vcore": {
            "unit": "core-hours", "limit": 100, "consumed": 1, "committed": 0, "left": 99,
            "usedPercent": 1, "burnRate": 2, "runsOutAt": runs_out}}}

    zurich, utc, decays = budget_rows([
        status("root.a", "2026-11-30T00:00:00+01:00", "2026-11-29T18:30:00.250+01:00"),
        status("root.b", "2026-12-01T00:00:00+00:00", None),
        status("root.c", None, None)])
    assert zurich[-2:] == ["2026-11-29T18:30+01:00", "2026-11-30T00:00+01:00"]
    assert utc[-2:] == ["-", "2026-12-01T00:00+00:00"]
    assert decays[-2:] == ["-", "decays"]
