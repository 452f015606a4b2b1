"""Seed 002's "Min Guarantee and Preemption" end to end through the real service: the SSE stream shows
the reclaim (``preempted``) and then the waiting asks' allocations, and a client that reconnects with
``Last-Event-ID`` after a kill -9 gets exactly what followed, read back from the journal."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.conftest import ServerProcess
from tests.preemption.helpers import seed_002_config

BASE = "/ws/v1/partition/default"


def _messages(lines: Iterator[str], until: Any, deadline: float) -> list[dict[str, Any]]:
    """Read SSE messages (``id``, ``event``, data) until ``until(messages)`` holds."""
    out: list[dict[str, Any]] = []
    fields: dict[str, str] = {}
    for line in lines:
        if time.monotonic() > deadline:
            break
        if line.startswith(":"):
            continue
        if not line:
            if fields:
                out.append({"id": int(fields["id"]), "event": fields["event"],
                            "data": json.loads(fields["data"])})
                fields = {}
                if until(out):
                    return out
            continue
        name, _, value = line.partition(": ")
        fields[name] = value
    return out


def _start(tmp_path: Path, servers: list[ServerProcess]) -> ServerProcess:
    cfg = tmp_path / "seed002.yaml"
    cfg.write_text(seed_002_config(revoke_delay=3))
    s = ServerProcess(config=cfg, store="sqlite:///state.db", cwd=tmp_path)
    servers.append(s.start())
    return s


def test_seed_002_reclaim_through_the_service_and_resume_after_kill_9(
        tmp_path: Path, servers: list[ServerProcess]) -> None:
    s = _start(tmp_path, servers)
    with s.client() as c:
        assert c.put(f"{BASE}/node/n1", json={"capacity": {"vcore": 8000}}).status_code == 201
        for app, ns in (("a", "team-a"), ("b", "team-b")):
            r = c.post(f"{BASE}/applications", json={"applicationID": app, "user": "sue", "queue": "root.q",
                                                     "tags": {"namespace": ns}})
            assert r.status_code == 201, r.text
        for i in range(7):
            r = c.post(f"{BASE}/allocations", json={"applicationID": "a", "allocationKey": f"a{i}",
                                                    "resource": {"vcore": 1000}})
            assert r.status_code == 201, r.text
        assert c.post(f"{BASE}/allocations", json={"applicationID": "b", "allocationKey": "b0",
                                                   "resource": {"vcore": 1000}}).status_code == 201
        with httpx.Client(base_url=s.url, timeout=30.0) as listener, listener.stream(
                "GET", f"{BASE}/events/stream",
                params={"types": "preempted,allocated", "timeout": 40}) as stream:
            lines = stream.iter_lines()
            assert next(lines).startswith(":")
            for i in range(1, 5):
                r = c.post(f"{BASE}/application/b/asks", json={"allocationKey": f"b{i}",
                                                              "resource": {"vcore": 1000}})
                assert r.status_code == 201 and r.json()["allocated"] is False
            got = _messages(lines, lambda m: sum(x["event"] == "allocated" for x in m) >= 4,
                            time.monotonic() + 30)
    kinds = [m["event"] for m in got]
    assert kinds == ["preempted", "allocated", "allocated", "allocated", "allocated"], got
    taken = got[0]["data"]
    assert taken["reason"]["code"] == "elastic.revoked" and taken["reason"]["path"] == "team-a"
    assert len(taken["allocations"]) == 4
    assert sorted(m["data"]["allocationKey"] for m in got[1:]) == ["b1", "b2", "b3", "b4"]
    ids = [m["id"] for m in got]
    assert ids == sorted(set(ids))

    s.kill9()
    s2 = ServerProcess(config=s.config, store=s.store, cwd=tmp_path)
    servers.append(s2.start())
    with httpx.Client(base_url=s2.url, timeout=30.0) as listener, listener.stream(
            "GET", f"{BASE}/events/stream", params={"types": "preempted,allocated", "timeout": 5},
            headers={"Last-Event-ID": str(ids[0])}) as stream:
        resumed = _messages(stream.iter_lines(), lambda m: len(m) >= 4, time.monotonic() + 20)
    # exactly what followed the preemption, with the same ids: no gap, no duplicate
    assert [(m["id"], m["event"], m["data"]["allocationKey"]) for m in resumed] == \
        [(m["id"], m["event"], m["data"]["allocationKey"]) for m in got[1:]]
    with s2.client() as c:
        assert c.get(f"{BASE}/asks").json() == []
    assert s2.stop() == 0
