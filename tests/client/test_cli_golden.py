"""What the CLI prints, exactly (issue 30): human units, 80 columns when the output is not a terminal,
cells wrapped and never cut, ``-o wide|json|yaml``; the README tour's state. The expected output is in
``tests/client/golden/`` (``QUOTAPLANE_GOLDEN_UPDATE=1`` rewrites it; review the diff)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import quotaplane as qp
from quotaplane.cli_remote import NOTICE_TYPES, Table
from quotaplane.server.auth import Tokens
from tests.client.test_cli_remote import CONFIG, EXE, SUE
from tests.client.test_client import _Server

GOLDEN = Path(__file__).with_name("golden")

COMMANDS = {
    "queues": ["queues"],
    "queues-wide": ["queues", "-o", "wide"],
    "asks": ["asks"],
    "usage-users": ["usage", "users"],
    "usage-groups": ["usage", "groups"],
    "apps": ["apps"],
    "standing-user": ["standing", "--user", "sue"],
    "standing-queue": ["standing", "--queue", "root.engineering.sandbox"],
    "whatif": ["whatif", "app-1", "cpu=9", "memory=1Gi"],
    "whatif-admitted": ["whatif", "app-1", "cpu=500m"],
}


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[_Server, qp.Scheduler]]:
    """The README tour's state: sue's app-1 holds a1 (2 cores, 1 Gi), her a3 (4 cores) waits."""
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


def _cli(srv: _Server, *args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUOTAPLANE_SERVER": srv.url, "QUOTAPLANE_TOKEN": "adm", "COLUMNS": str(columns)}
    return subprocess.run([EXE, *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_output_is_the_golden_one(service: tuple[_Server, qp.Scheduler], name: str) -> None:
    srv, _ = service
    out = _cli(srv, *COMMANDS[name])
    assert out.returncode == 0, out.stderr
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("QUOTAPLANE_GOLDEN_UPDATE"):
        path.write_text(out.stdout)
    assert out.stdout == path.read_text()
    if not name.endswith("wide"):
        assert max(len(line) for line in out.stdout.splitlines()) <= 80, out.stdout
    assert not re.search(r"\d{7,}", out.stdout)            # no internal units (milli-cores, bytes)


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_tables_fit_the_width_and_never_cut_a_name_or_a_code(service: tuple[_Server, qp.Scheduler],
                                                             columns: int) -> None:
    srv, _ = service
    for args, whole in ((["queues"], ["root.engineering.platform", "root.research.interactive"]),
                        (["asks"], ["user.maxresources", "root.engineering.sandbox"]),
                        (["standing", "--user", "sue"], ["user.maxresources", "root.engineering.sandbox"]),
                        (["top", "--once"], ["user.maxresources", "root.engineering.platform"])):
        text = _cli(srv, *args, columns=columns).stdout
        widest = max(len(line) for line in text.splitlines())
        # narrower than the names that may not be cut, a table is as narrow as they allow
        assert widest <= (columns if columns >= 80 else 80), (args, text)
        for name in whole:
            assert name in text, (args, name)


def test_json_and_yaml_are_the_services_exact_answer(service: tuple[_Server, qp.Scheduler]) -> None:
    srv, _ = service
    tree = json.loads(_cli(srv, "queues", "-o", "json").stdout)
    assert tree["allocatedResource"] == {"memory": 1073741824, "vcore": 2000}
    from ruamel.yaml import YAML

    assert YAML(typ="safe").load(_cli(srv, "queues", "-o", "yaml").stdout) == tree
    bad = _cli(srv, "queues", "-o", "xml")
    assert bad.returncode == 2 and "table, wide, json, yaml" in bad.stderr


def test_whatif_takes_kubernetes_and_configuration_quantities(
        service: tuple[_Server, qp.Scheduler]) -> None:
    srv, _ = service
    for words in (["cpu=9"], ["vcore=9"], ["vcore=9000m"], ["cpu=9", "memory=0.5Gi"]):
        data = json.loads(_cli(srv, "whatif", "app-1", *words, "-o", "json").stdout)
        assert {r["code"] for r in data["reasons"]} == {"user.maxresources", "group.maxresources"}, words
        user = next(r for r in data["reasons"] if r["code"] == "user.maxresources")
        assert user["resource"]["vcore"] == 6000                 # 2 held + 9 asked - 5 allowed
    for bad in ("cpu", "cpu=two", "memory=-1Gi"):
        out = _cli(srv, "whatif", "app-1", bad)
        assert out.returncode == 2 and out.stderr.startswith(f"quotaplane: '{bad}'"), out.stderr


@pytest.mark.parametrize("interval", ["-1", "0", "0.1"])
def test_top_refuses_an_interval_that_would_flood_the_service(interval: str) -> None:
    """Issue 30 #3: -1 printed a traceback, 0 sent ~1,000 requests in 3 s."""
    out = subprocess.run([EXE, "top", "--interval", interval, "--server", "http://127.0.0.1:9"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--interval" in out.stderr and "Traceback" not in out.stderr


def test_events_with_an_unknown_type_is_refused_at_once() -> None:
    """Issue 30 #7: ``events --types bogus`` waited forever."""
    out = subprocess.run([EXE, "events", "--types", "allocated,bogus", "--server", "http://127.0.0.1:9"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unknown event type 'bogus'" in out.stderr and "allocated" in out.stderr


def test_events_takes_every_type_the_stream_sends() -> None:
    """Found as a new user: ``events --types budget_warning`` (docs/budgets.md) exited 2."""
    out = subprocess.run([EXE, "events", "--types", "budget_warning,bound", "--server", "http://127.0.0.1:9"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "cannot reach the service" in out.stderr, out.stderr


def test_the_notice_types_are_those_the_stream_sends() -> None:
    import quotaplane.notices as notices

    assert NOTICE_TYPES == notices.NOTICE_TYPES

    documented = set(re.findall(r"``([a-z_]+)``", (notices.__doc__ or "").split("Notice types:")[1]))
    assert set(NOTICE_TYPES) <= documented
    assert documented - set(NOTICE_TYPES) <= {"allocations", "reason", "preemptor", "state", "seq",
                                               "timeouts", "released"}


def test_a_table_wraps_at_words_and_keeps_amounts_whole() -> None:
    t = Table(["queue", "used~"])
    t.add("root.a.very.long.queue.name", "200 cores, 1,600 Gi, 16 GPUs, 110 pods")
    text = t.render(40)
    assert text.splitlines() == ["QUEUE                        USED",
                                 "root.a.very.long.queue.name  200 cores,",
                                 "                             1,600 Gi,",
                                 "                             16 GPUs,",
                                 "                             110 pods"]
    assert Table(["a", "b~"]).render(10) == "A  B"
