"""End-to-end queueing through the real ``quotaplane serve`` process: submit more than fits, release,
and receive the allocation events on the server-sent event stream (seed 004: no retry loop)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.conftest import ServerProcess

BASE = "/ws/v1/partition/default"


def _events(lines: Iterator[str], count: int) -> list[dict[str, Any]]:
    """Read ``count`` server-sent events (comments skipped)."""
    out: list[dict[str, Any]] = []
    name = None
    for line in lines:
        if line.startswith("event: "):
            name = line[len("event: "):]
        elif line.startswith("data: "):
            assert name == "allocated"
            out.append(json.loads(line[len("data: "):]))
            if len(out) == count:
                break
    return out


def _ask(c: httpx.Client, key: str, vcore: int) -> dict[str, Any]:
    r = c.post(f"{BASE}/application/job/asks", json={"allocationKey": key, "resource": {"vcore": vcore}})
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


def test_submit_more_than_fits_release_and_receive_the_events(
        tmp_path: Path, servers: list[ServerProcess], config_file: Path) -> None:
    s = ServerProcess(config=config_file, store="sqlite:///state.db", cwd=tmp_path)
    servers.append(s.start())
    timeout = httpx.Timeout(10.0)
    with s.client() as c:
        assert c.put(f"{BASE}/node/n1", json={"capacity": {"vcore": 64000}}).status_code == 201
        r = c.post(f"{BASE}/applications",
                   json={"applicationID": "job", "user": "sue", "queue": "root.small"})
        assert r.status_code == 201, r.text
        # root.small has max vcore 4: the first two asks fit, the other three wait
        answers = [_ask(c, f"t{i}", 2000) for i in range(5)]
        assert [a["allocated"] for a in answers] == [True, True, False, False, False]
        assert answers[2]["reasons"][0]["code"] == "queue.max"
        waiting = c.get(f"{BASE}/asks").json()
        assert [a["allocationKey"] for a in waiting] == ["t2", "t3", "t4"]
        assert all(a["reasons"][0]["path"] == "root.small" for a in waiting)

        with httpx.Client(base_url=s.url, timeout=timeout) as listener, listener.stream(
                "GET", f"{BASE}/events/stream",
                params={"max_events": 2, "timeout": 30, "types": "allocated"}) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            lines = stream.iter_lines()
            assert next(lines).startswith(":")          # the stream is open (and subscribed)
            # the running work finishes: the freed quota goes to the oldest waiting asks, no retry
            assert c.delete(f"{BASE}/allocation/t0").status_code == 200
            assert c.delete(f"{BASE}/allocation/t1").status_code == 200
            events = _events(lines, 2)
        assert [e["allocationKey"] for e in events] == ["t2", "t3"]
        assert all(e["applicationID"] == "job" and e["queueName"] == "root.small"
                   and e["resource"] == {"vcore": 2000} for e in events)
        assert c.get(f"{BASE}/allocation/t2").status_code == 200
        assert [a["allocationKey"] for a in c.get(f"{BASE}/asks").json()] == ["t4"]
    assert s.stop() == 0

    # a restart keeps the pending queue; a release then allocates the ask that waited across it
    s2 = ServerProcess(config=config_file, store="sqlite:///state.db", cwd=tmp_path)
    servers.append(s2.start())
    with s2.client() as c:
        assert [a["allocationKey"] for a in c.get(f"{BASE}/asks").json()] == ["t4"]
        with httpx.Client(base_url=s2.url, timeout=timeout) as listener, listener.stream(
                "GET", f"{BASE}/events/stream",
                params={"max_events": 1, "timeout": 30, "applicationID": "job",
                        "types": "allocated"}) as stream:
            lines = stream.iter_lines()
            assert next(lines).startswith(":")
            assert c.delete(f"{BASE}/allocation/t2").status_code == 200
            (event,) = _events(lines, 1)
        assert event["allocationKey"] == "t4"
        assert c.get(f"{BASE}/asks").json() == []
    assert s2.stop() == 0
