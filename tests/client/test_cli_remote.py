"""The CLI's client commands against a real service (issue 17 #2): queues, usage, apps, asks,
whatif, events, config show|diff|apply — tables and ``--output json``, server and token from the
environment, errors as one line and exit 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import quotaplane as qp
from quotaplane.server.auth import Tokens
from tests.client.test_client import _Server

ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).with_name("quotaplane"))
CONFIG = (ROOT / "examples" / "queues.yaml").read_text()
SUE = qp.UserGroup("sue", ("engineering", "development"))


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[_Server, qp.Scheduler]]:
    s = qp.Scheduler.from_yaml(CONFIG)
    srv = _Server(s, tokens=Tokens({"admin": "adm"}))
    p = s.partition("default")
    p.add_node("node-1", {"vcore": 16000, "memory": 68719476736, "pods": 110})
    p.add_application("app-1", SUE, queue="root.engineering.sandbox")
    p.allocate("app-1", "a1", {"vcore": 2000, "memory": 1073741824})
    p.add_ask("app-1", "a3", {"vcore": 4000})
    yield srv, s
    srv.stop()
    s.close()


def _run(srv: _Server, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUOTAPLANE_SERVER": srv.url, "QUOTAPLANE_TOKEN": "adm", "COLUMNS": "200"}
    return subprocess.run([EXE, *args], env=env, capture_output=True, text=True, timeout=60, input=stdin)


def test_queues_table_and_json(service: tuple[_Server, qp.Scheduler]) -> None:
    srv, _ = service
    out = _run(srv, "queues")
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if "root.engineering.sandbox" in ln)
    assert "2 cores" in line and "4 cores" in line          # allocated, and the waiting ask
    tree = json.loads(_run(srv, "queues", "--output", "json").stdout)
    assert tree["queuename"] == "root"


def test_usage_apps_asks_and_whatif(service: tuple[_Server, qp.Scheduler]) -> None:
    srv, _ = service
    users = json.loads(_run(srv, "usage", "users", "sue", "-o", "json").stdout)
    assert [u["userName"] for u in users] == ["sue"]
    # a name the service does not track is its 404, not an empty table (as GET …/usage/user/NAME)
    for kind, name, message in (("users", "nobody", "User not found"),
                                ("groups", "nogroup", "Group not found")):
        out = _run(srv, "usage", kind, name)
        assert out.returncode == 1 and out.stderr.strip() == f"quotaplane: 404 {message}", out.stderr
    assert "root.engineering.sandbox" in _run(srv, "usage", "groups").stdout
    assert "app-1" in _run(srv, "apps").stdout
    asks = _run(srv, "asks", "app-1")
    assert "a3" in asks.stdout and "user.maxresources at root.engineering.sandbox" in asks.stdout
    what = json.loads(_run(srv, "whatif", "app-1", "cpu=9", "-o", "json").stdout)
    assert what["allocated"] is False
    assert {r["code"] for r in what["reasons"]} == {"user.maxresources", "group.maxresources"}
    assert _run(srv, "whatif", "app-1", "vcore").returncode == 2


def test_config_show_diff_and_apply(service: tuple[_Server, qp.Scheduler], tmp_path: Path) -> None:
    srv, s = service
    assert _run(srv, "config", "show").stdout == CONFIG
    changed = tmp_path / "q.yaml"
    changed.write_text(CONFIG.replace("maxapplications: 20", "maxapplications: 21", 1))
    diff = _run(srv, "config", "diff", str(changed)).stdout
    assert "-" in diff and "maxapplications: 21" in diff
    refused = _run(srv, "config", "apply", str(changed), stdin="n\n")
    assert refused.returncode == 1 and s.config_text == CONFIG                 # said no
    applied = _run(srv, "config", "apply", str(changed), "--yes")
    assert applied.returncode == 0 and "valid" in applied.stdout and "applied" in applied.stdout
    assert s.config_text == changed.read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text("partitions: [")
    out = _run(srv, "config", "apply", str(bad), "--yes")
    assert out.returncode == 1 and "not valid" in out.stderr
    # every problem, as `validate` lists them (it showed the first of 9)
    invalid = ROOT / "examples" / "invalid-limits.yaml"
    listed = subprocess.run([EXE, "validate", str(invalid)], capture_output=True, text=True, timeout=60)
    problems = listed.stderr.strip().splitlines()
    assert len(problems) > 1
    out = _run(srv, "config", "apply", str(invalid), "--yes")
    assert out.returncode == 1 and out.stderr.strip().splitlines()[:-1] == problems
    assert f"not valid ({len(problems)} problems); nothing applied" in out.stderr
    assert s.config_text == changed.read_text()


def test_errors_are_one_line(service: tuple[_Server, qp.Scheduler]) -> None:
    srv, _ = service
    out = _run(srv, "queues", "-p", "nope")
    assert out.returncode == 1 and out.stderr.strip() == "quotaplane: 404 Partition not found"
    env = {**os.environ, "QUOTAPLANE_SERVER": srv.url, "QUOTAPLANE_TOKEN": "wrong"}
    out = subprocess.run([EXE, "queues"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stderr.startswith("quotaplane: 401")


def test_a_service_that_is_not_there_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """Nothing listens at --server: one line naming the URL, exit 1 (it printed httpx's traceback)."""
    import socket

    with socket.socket() as s:          # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("QUOTAPLANE_SERVER", "QUOTAPLANE_TOKEN")}
    for args in (["apps"], ["queues"], ["config", "show"]):
        out = subprocess.run([EXE, *args, "--server", f"http://127.0.0.1:{port}"], env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1, (args, out.stderr)
        assert out.stderr.startswith(f"quotaplane: cannot reach the service at http://127.0.0.1:{port}"), \
            (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_a_config_file_that_cannot_be_read_is_one_line(service: tuple[_Server, qp.Scheduler],
                                                       tmp_path: Path) -> None:
    """``config diff|apply FILE`` with FILE missing or not text: one line naming it, exit 1, nothing
    applied (a missing file printed a Python traceback)."""
    srv, s = service
    before = s.config_text
    binary = tmp_path / "q.yaml"
    binary.write_bytes(b"\xff\xfe\x00partitions")
    for path, why in ((tmp_path / "nope.yaml", "No such file or directory"), (binary, "not UTF-8 text")):
        for args in (["config", "diff", str(path)], ["config", "apply", "--yes", str(path)]):
            out = _run(srv, *args)
            assert out.returncode == 1, (args, out.stderr)
            assert out.stderr.startswith(f"quotaplane: cannot read {path}: "), out.stderr
            assert why in out.stderr, out.stderr
            assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert s.config_text == before


def test_events_follow_the_stream(service: tuple[_Server, qp.Scheduler]) -> None:
    srv, _ = service
    env = {**os.environ, "QUOTAPLANE_SERVER": srv.url, "QUOTAPLANE_TOKEN": "adm"}
    proc = subprocess.Popen([EXE, "events", "--after", "0", "--types", "allocated"], env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["type"] == "allocated" and first["allocationKey"] == "a1"
    finally:
        proc.terminate()
        proc.wait(10)


def test_standing_answers_why_sues_job_waits(service: tuple[_Server, qp.Scheduler]) -> None:
    """The README tour's question, for its user: her share and why a3 waits."""
    srv, _ = service
    table = _run(srv, "standing", "--user", "sue")
    assert table.returncode == 0, table.stderr
    assert "#1 a3" in table.stdout and "user.maxresources at" in table.stdout
    data = json.loads(_run(srv, "standing", "--user", "sue", "-o", "json").stdout)
    assert data["kind"] == "user" and data["waiting"][0]["position"] == 1
    sandbox = next(q for q in data["queues"] if q["queue"] == "root.engineering.sandbox")
    assert sandbox["used"]["vcore"] == 2000 and sandbox["waiting"] == {"vcore": 4000}
    queue = json.loads(_run(srv, "standing", "--queue", "root.engineering.sandbox", "-o", "json").stdout)
    assert queue["queue"]["guaranteed"]["vcore"] == 10000
    out = _run(srv, "standing")
    assert out.returncode == 2 and "name exactly one of --queue, --user, --group or --quota" in out.stderr
    out = _run(srv, "standing", "--user", "ghost")
    assert out.returncode == 1 and out.stderr.startswith("quotaplane: 404")


def test_top_draws_the_queues_and_the_waiting_work(service: tuple[_Server, qp.Scheduler]) -> None:
    srv, _ = service
    out = _run(srv, "top", "--once")
    assert out.returncode == 0, out.stderr
    assert "root.engineering.sandbox" in out.stdout and "waiting asks" in out.stdout
    assert "a3" in out.stdout and "user.maxresources" in out.stdout
