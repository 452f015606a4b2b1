"""``quotaplane eta`` and ``whatif --explain`` against a real service, and the Python client's ``eta``,
``eta_of`` and ``explain`` (docs/eta.md, docs/cli.md)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import pytest

from quotaplane import Resource
from quotaplane.client import AsyncClient, Client
from quotaplane.config.identity import UserGroup
from quotaplane.scheduler import Scheduler
from tests.client.test_cli_remote import EXE
from tests.client.test_client import _Server
from tests.partition.helpers import CONFIG, Clock

BOB = UserGroup("bob", ["ops"])


@pytest.fixture(scope="module")
def service() -> Iterator[_Server]:
    s = Scheduler.from_yaml(CONFIG, clock=Clock(1000.0))
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100_000}))
    p.add_application("app1", BOB, queue="root.b")          # root.b: max 20 cores
    assert p.allocate("app1", "r1", Resource({"vcore": 10_000}), max_runtime=100)
    assert p.allocate("app1", "r2", Resource({"vcore": 10_000}), max_runtime=4000, priority=3)
    p.add_ask("app1", "w1", Resource({"vcore": 15_000}), max_runtime=50)
    p.add_ask("app1", "w2", Resource({"vcore": 10_000}), max_runtime=60)
    srv = _Server(s)
    yield srv
    srv.stop()
    s.close()


def _cli(srv: _Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUOTAPLANE_SERVER": srv.url, "COLUMNS": "100"}
    return subprocess.run([EXE, *args], env=env, capture_output=True, text=True, timeout=60)


def test_eta_lists_every_waiting_ask_with_when_and_why(service: _Server) -> None:
    out = _cli(service, "eta", "-o", "wide")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["ASK", "APPLICATION", "QUEUE", "STARTS", "RANGE", "BASIS"]
    w1 = next(line for line in lines if line.startswith("w1"))
    w2 = next(line for line in lines if line.startswith("w2"))
    assert "in 1h 6m" in w1 and "declared runtime of r2" in w1        # r2 ends at 1000 + 4000 s
    assert "in 1m 40s" in w2 and "declared runtime of r1" in w2
    data = json.loads(_cli(service, "eta", "--queue", "root.b", "-o", "json").stdout)
    assert [a["allocationKey"] for a in data["asks"]] == ["w1", "w2"]
    unknown = _cli(service, "eta", "--application", "nope", "-o", "json")    # a 404, as standing's
    assert unknown.returncode == 1 and "nope" in unknown.stderr and not unknown.stdout, unknown


def test_eta_of_one_ask_says_what_would_have_to_change(service: _Server) -> None:
    out = _cli(service, "eta", "w1")
    assert out.returncode == 0, out.stderr
    assert "what would have to change:" in out.stdout
    assert "r1" in out.stdout and "queue.max" in out.stdout
    missing = _cli(service, "eta", "nope")
    assert missing.returncode == 1 and "nope" in missing.stderr


def test_whatif_explain(service: _Server) -> None:
    out = _cli(service, "whatif", "app1", "vcore=5", "--explain")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("not admitted")
    assert "running allocation(s) ending" in out.stdout and "queue.max" in out.stdout
    plain = _cli(service, "whatif", "app1", "vcore=5")
    assert "what would have to change" not in plain.stdout
    data = json.loads(_cli(service, "whatif", "app1", "vcore=5", "--explain", "-o", "json").stdout)
    assert data["admitted"] is False and data["limits"][0]["by"] == {"vcore": 5000}
    assert _cli(service, "whatif", "app1", "vcore", "--explain").returncode == 2


def test_the_client_and_its_async_twin(service: _Server) -> None:
    import asyncio

    with Client(service.url) as c:
        assert [a["allocationKey"] for a in c.eta()["asks"]] == ["w1", "w2"]
        assert c.eta_of("w2")["eta"]["start"]["p50"] == 1100.0
        assert c.explain("app1", {"vcore": 5000})["releases"][0]["allocationKey"] == "r1"
        timed = c.explain("app1", {"vcore": 5000}, max_runtime=60)      # no budget, no window here
        assert timed["releases"][0]["allocationKey"] == "r1"
        assert timed["resets"] is None and timed["windows"] is None

    async def run() -> dict[str, object]:
        async with AsyncClient(service.url) as ac:
            return await ac.eta(queue="root.b")

    assert len(asyncio.run(run())["asks"]) == 2   # type: ignore[arg-type]


def test_the_clients_ask_lists_and_standing_carry_the_eta(service: _Server) -> None:
    """``pending(eta=True)`` and ``standing(eta=True)``: each waiting ask with its forecast start; by
    default neither computes a forecast."""
    import asyncio

    with Client(service.url) as c:
        asks = {a["allocationKey"]: a for a in c.pending(eta=True)}
        assert asks["w2"]["eta"]["start"]["p50"] == 1100.0 and asks["w2"]["eta"]["known"] is True
        assert [a["eta"]["inSeconds"]["p50"] for a in c.pending("app1", eta=True)] == [4000.0, 100.0]
        assert "eta" not in c.pending()[0]
        waiting = c.standing(queue="root.b", eta=True)["waiting"]
        assert {w["allocationKey"]: w["eta"]["basis"] for w in waiting} == \
            {"w1": ["declared runtime of r2"], "w2": ["declared runtime of r1"]}
        assert all("eta" not in w for w in c.standing(user="bob")["waiting"])

    async def run() -> tuple[list[dict[str, object]], dict[str, object]]:
        async with AsyncClient(service.url) as ac:
            return await ac.pending(eta=True), await ac.standing(user="bob", eta=True)

    listed, standing = asyncio.run(run())
    assert all(a["eta"] is not None for a in listed)
    assert all(w["eta"] is not None for w in standing["waiting"])     # type: ignore[union-attr]


def test_the_first_change_offered_is_not_an_alternative() -> None:
    """Defect: with no release to wait for, the first option read "- or these limits rising" (and
    "- or waiting: …" when a reset was the only one)."""
    from quotaplane.cli_eta import explain_text

    reason = {"policy": "queue", "code": "queue.max", "path": "root.a", "resource": {"vcore": 1000}}
    limits = {"admitted": False, "reasons": [reason],
              "limits": [{"code": "queue.max", "path": "root.a", "by": {"vcore": 1000}}]}
    text = explain_text(limits, False)
    assert "- these limits rising:" in text and "- or these limits rising" not in text
    waiting = {"admitted": False, "reasons": [reason],
               "resets": [{"message": "admitted when the budget of root.a resets at 2026-12-01"}]}
    text = explain_text(waiting, False)
    assert "- waiting: admitted when the budget" in text and "- or waiting" not in text
    both = dict(limits, releases=[{"allocationKey": "r", "applicationID": "x", "queue": "root.a",
                                   "user": "u", "priority": 0, "resource": {"vcore": 1000}}])
    text = explain_text(both, False)
    assert "- 1 running allocation(s) ending:" in text and "- or these limits rising:" in text


def test_an_ask_that_never_fits_reads_never_not_unknown() -> None:
    from quotaplane.cli_eta import eta_table

    data = {"asks": [{"allocationKey": "huge", "applicationID": "x", "queue": "root.a",
                      "inSeconds": {"p10": None, "p50": None, "p90": None},
                      "basis": ["never fits: huge asks 9 GPUs over 8 GPUs, the cluster's capacity now"]},
                     {"allocationKey": "w", "applicationID": "x", "queue": "root.a",
                      "inSeconds": {"p10": None, "p50": None, "p90": None},
                      "basis": ["unknown: no end of running work that is known lets w start"]}]}
    t = eta_table(data, wide=False)
    assert [row[3] for row in t.rows] == ["never", "unknown"]
