"""Crash (quality.md "Reliability"): kill -9 during a load of allocations; restart with exactly the
acknowledged state (decision S1). Repeated 10 times on the same SQLite store."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from tests.e2e.conftest import ServerProcess

REPETITIONS = 10
CLIENTS = 16


def _load(url: str, prefix: str, acked: set[str], sent: set[str], refused: set[str],
          stop: threading.Event) -> None:
    """Sequential allocations until the server dies; record what was acknowledged."""
    i = 0
    with httpx.Client(base_url=url, timeout=5.0) as c:
        while not stop.is_set():
            key = f"{prefix}-{i}"
            i += 1
            sent.add(key)
            try:
                r = c.post("/ws/v1/partition/default/allocations",
                           json={"applicationID": "app", "allocationKey": key, "resource": {"vcore": 1}})
            except httpx.HTTPError:
                return  # the server died: this one may or may not be journalled
            if r.status_code == 201:
                acked.add(key)
            elif r.status_code == 409:
                refused.add(key)
            else:
                raise AssertionError(f"unexpected {r.status_code}: {r.text}")


def _restored_keys(c: httpx.Client) -> set[str]:
    r = c.get("/ws/v1/partition/default/application/app")
    assert r.status_code == 200, r.text
    return {a["allocationKey"] for a in r.json().get("allocations", [])}


def test_kill9_during_allocations_restores_exactly_the_acknowledged_state(
        tmp_path: Path, servers: list[ServerProcess], config_file: Path) -> None:
    store = "sqlite:///crash.db"
    all_acked: set[str] = set()
    all_sent: set[str] = set()
    all_refused: set[str] = set()
    port = None
    for rep in range(REPETITIONS):
        s = ServerProcess(config=config_file, store=store, cwd=tmp_path, port=port)
        port = s.port
        servers.append(s.start())
        with s.client() as c:
            restored = _restored_keys(c) if rep else set()
            if rep:
                # S1: everything acknowledged before the kill is there; nothing refused is; anything
                # else present was in flight (sent, journalled, the answer lost with the process).
                assert all_acked <= restored, sorted(all_acked - restored)[:5]
                assert not (restored & all_refused)
                assert restored <= all_sent
                used = c.get("/ws/v1/partitions").json()[0]["capacity"]["usedCapacity"]
                assert used.get("vcore", 0) == len(restored)
                all_acked |= restored  # in-flight ones that made it are now part of the state
            else:
                assert c.put("/ws/v1/partition/default/node/n1",
                             json={"capacity": {"vcore": 10**9}}).status_code == 201
                assert c.post("/ws/v1/partition/default/applications",
                              json={"applicationID": "app", "user": "sue",
                                    "queue": "root.default"}).status_code == 201
        stop = threading.Event()
        acked: set[str] = set()
        sent: set[str] = set()
        refused: set[str] = set()
        threads = [threading.Thread(target=_load, args=(s.url, f"r{rep}c{i}", acked, sent, refused, stop))
                   for i in range(CLIENTS)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 5
        while len(acked) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05 * (rep % 3))
        s.kill9()
        stop.set()
        for t in threads:
            t.join(10)
        assert len(acked) >= 20, s.output()
        all_acked |= acked
        all_sent |= sent
        all_refused |= refused
    # a last clean start checks the final repetition
    s = ServerProcess(config=config_file, store=store, cwd=tmp_path, port=port)
    servers.append(s.start())
    with s.client() as c:
        restored = _restored_keys(c)
        assert all_acked <= restored
        assert restored <= all_sent
    assert s.stop() == 0
