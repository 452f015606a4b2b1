"""Time windows from the Python client and the CLI (issue 34 item 5): read every window's state, set
a one-off window (a temporary override) and remove it — the same ACLs and validation as a
configuration change; an elastic quota's budget read by name."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import quotaplane as qp
from quotaplane.client import Client
from tests.budgets.test_admission import NOV1, H, config
from tests.budgets.test_cli import EXE
from tests.client.test_client import _Server
from tests.partition.helpers import Clock


@pytest.fixture
def server() -> Iterator[_Server]:
    clock = Clock(NOV1 + 8 * H)
    s = qp.Scheduler.from_yaml(config(), clock=clock)
    srv = _Server(s)
    yield srv
    srv.stop()
    s.close()


ONE_OFF = {"name": "audit", "queue": "root.teams.b", "from": "2026-11-01T06:00", "to": "2026-11-02T00:00",
           "max": {"nvidia.com/gpu": 8}}


def test_the_client_reads_adds_and_removes_a_window(server: _Server) -> None:
    with Client(server.url) as c:
        assert c.windows() == []
        [w] = c.add_window(ONE_OFF)
        assert (w["name"], w["scope"], w["active"], w["due"]) == ("audit", "root.teams.b", True, True)
        assert w["saved"] == {"max": None}
        with pytest.raises(qp.QuotaplaneError, match="a window named 'audit' exists"):
            c.add_window(ONE_OFF)
        with pytest.raises(qp.QuotaplaneError, match=r"no queue root\.nowhere"):
            c.add_window({**ONE_OFF, "name": "x", "queue": "root.nowhere"})
        # found as a new user: "line 165: windows[1] (x): …" — a line of the running configuration the
        # window was added to, not of the body sent
        with pytest.raises(qp.QuotaplaneError) as refused:
            c.add_window({"name": "x", "queue": "root.teams.b", "frm": "2026-11-01T06:00",
                          "to": "2026-11-02T00:00", "max": {"nvidia.com/gpu": 8}})
        assert "unknown key 'frm'" in str(refused.value) and "(x)" in str(refused.value)
        assert "line" not in str(refused.value), str(refused.value)
        assert [w["name"] for w in c.windows()] == ["audit"]
        assert c.remove_window("audit") == []
        with pytest.raises(qp.QuotaplaneError, match="no window 'audit'"):
            c.remove_window("audit")


def _cli(srv: _Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUOTAPLANE_SERVER": srv.url, "COLUMNS": "200"}
    return subprocess.run([EXE, "windows", *args], env=env, capture_output=True, text=True, timeout=60)


def test_the_cli_lists_adds_and_removes_a_window(server: _Server, tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text("name: audit\nqueue: root.teams.b\nfrom: '2026-11-01T06:00'\nto: '2026-11-02T00:00'\n"
                 "max: {nvidia.com/gpu: 8}\n")
    out = _cli(server, "--add", str(f))
    assert out.returncode == 0, out.stderr
    [line] = [ln for ln in out.stdout.splitlines() if "audit" in ln]
    assert "root.teams.b" in line and "open" in line and "max: 8 GPUs" in line
    # as written, in its zone (found as a new user: the seconds since the epoch, 1793512800..1793577600)
    assert "2026-11-01T06:00..2026-11-02T00:00 UTC" in line
    data = json.loads(_cli(server, "-o", "json").stdout)
    assert [w["name"] for w in data["windows"]] == ["audit"]
    out = _cli(server, "--remove", "audit")
    assert out.returncode == 0, out.stderr
    assert "audit" not in out.stdout
    bad = _cli(server, "--remove", "audit")
    assert bad.returncode != 0 and "no window 'audit'" in bad.stderr


def test_the_client_and_the_cli_read_an_elastic_quotas_budget() -> None:
    from tests.budgets.test_elastic import _start
    clock = Clock(NOV1)
    s, p = _start(None, clock)
    p.allocate("a", "a1", {"vcore": 2000})
    clock.advance(H)
    srv = _Server(s)
    try:
        with Client(srv.url) as c:
            assert c.budgets(elastic_quota="team-a")["resources"]["vcore"]["consumed"] == 2
        env = {**os.environ, "QUOTAPLANE_SERVER": srv.url, "COLUMNS": "200"}
        out = subprocess.run([EXE, "budgets", "--elastic-quota", "team-a"], env=env, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "elastic quota team-a" in out.stdout
    finally:
        srv.stop()
        s.close()


def test_a_one_off_windows_times_read_in_its_zone() -> None:
    from quotaplane.cli_budgets import window_rows

    zurich = {"name": "w", "scope": "root.a", "timezone": "Europe/Zurich", "active": False, "due": False,
              "overrides": {}, "schedule": {"from": 1798671600.0, "to": 1798758000.0}}
    assert window_rows([zurich])[0][2] == "2026-12-31T00:00..2027-01-01T00:00 Europe/Zurich"


def test_a_windows_overrides_read_in_units_as_the_rest_of_the_cli() -> None:
    """Found as a new user: ``max: vcore 4000`` — 4,000 cores in the configuration's units, shown
    with no unit beside tables that print cores and Gi; an elastic quota's are Kubernetes quantities,
    a budget's resource-hours."""
    from quotaplane.cli_budgets import window_rows

    base = {"name": "w", "timezone": "UTC", "active": False, "due": False,
            "schedule": {"from": 1798671600.0, "to": 1798758000.0}}
    queue = {**base, "scope": "root.a", "kind": "queue",
             "overrides": {"max": {"vcore": 120, "memory": "480Gi"}, "guaranteed": {"vcore": "500m"},
                           "resourcehours": {"nvidia.com/gpu": 40, "vcore": 100}}}
    assert window_rows([queue])[0][3] == ("guaranteed: 0.5 cores; max: 120 cores, 480 Gi; "
                                          "resourcehours: 40 GPU-hours, 100 core-hours")
    quota = {**base, "scope": "elastic quota team-a", "kind": "elasticquota",
             "overrides": {"max": {"cpu": "8", "nvidia.com/gpu": 16}}}
    assert window_rows([quota])[0][3] == "max: 8 cores, 16 GPUs"
    limit = {**base, "scope": "user alice in root.a", "kind": "user",
             "overrides": {"maxapplications": 10, "maxresources": {"vcore": 64}}}
    assert window_rows([limit])[0][3] == "maxapplications: 10; maxresources: 64 cores"
