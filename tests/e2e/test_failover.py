"""Fail-over (quality.md "Reliability"): two instances on one PostgreSQL store; the leader is killed;
the follower serves writes within 10 s with nothing acknowledged lost.

Skips with a message when ``QUOTAPLANE_PG_URL`` is not set (CI sets it)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.e2e.conftest import ServerProcess

ENV = {"QUOTAPLANE_LEASE_TTL": "3"}


def _wait_leader(s: ServerProcess, timeout: float) -> float:
    """Seconds until ``s`` accepts a write (a node PUT)."""
    start = time.monotonic()
    i = 0
    with s.client() as c:
        while time.monotonic() - start < timeout:
            i += 1
            try:
                r = c.put(f"/ws/v1/partition/default/node/probe-{i}", json={"capacity": {"vcore": 10**9}})
                if r.status_code == 201:
                    return time.monotonic() - start
                assert r.status_code == 503, r.text
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
    raise AssertionError(f"{s.url} did not take over in {timeout}s:\n{s.output()}")


def test_two_instances_follower_takes_over_with_nothing_lost(
        tmp_path: Path, servers: list[ServerProcess], config_file: Path, pg_url: str) -> None:
    a = ServerProcess(config=config_file, store=pg_url, cwd=tmp_path, env=ENV)
    servers.append(a.start())
    _wait_leader(a, 10)
    b = ServerProcess(config=config_file, store=pg_url, cwd=tmp_path, env=ENV)
    servers.append(b.start())
    acked: list[str] = []
    with a.client() as ca, b.client() as cb:
        r = ca.post("/ws/v1/partition/default/applications",
                    json={"applicationID": "app", "user": "sue", "queue": "root.default"})
        assert r.status_code == 201
        # 16 concurrent clients (group commit shares transactions among them)
        def allocate(i: int) -> str | None:
            with httpx.Client(base_url=a.url, timeout=10.0) as c:
                r = c.post("/ws/v1/partition/default/allocations",
                           json={"applicationID": "app", "allocationKey": f"k{i}", "resource": {"vcore": 1}})
            return f"k{i}" if r.status_code == 201 else None

        with ThreadPoolExecutor(16) as pool:
            acked = [k for k in pool.map(allocate, range(50)) if k is not None]
        assert len(acked) == 50
        # the follower refuses writes with the leader's address …
        r = cb.post("/ws/v1/partition/default/allocations",
                    json={"applicationID": "app", "allocationKey": "x", "resource": {"vcore": 1}})
        assert r.status_code == 503
        body = r.json()
        assert body["leader"] == a.url
        assert set(body) >= {"status_code", "message", "description"}
        # … and serves reads from the journal it follows
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            got = cb.get("/ws/v1/partition/default/application/app")
            if got.status_code == 200 and len(got.json().get("allocations", [])) == 50:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"follower did not catch up: {got.text}")
    a.kill9()
    took = _wait_leader(b, 10)
    print(f"fail-over: the follower accepted writes {took:.2f}s after the leader was killed")
    assert took <= 10
    with b.client() as cb:
        got = cb.get("/ws/v1/partition/default/application/app").json()
        keys = {x["allocationKey"] for x in got.get("allocations", [])}
        assert set(acked) <= keys
        r = cb.post("/ws/v1/partition/default/allocations",
                    json={"applicationID": "app", "allocationKey": "after", "resource": {"vcore": 1}})
        assert r.status_code == 201
        health = cb.get("/ws/v1/scheduler/healthcheck").json()
        assert health["Healthy"] is True
    assert b.stop() == 0
