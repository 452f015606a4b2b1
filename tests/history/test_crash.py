"""kill -9 (quality.md "Reliability"): a service on a compacting SQLite store that snapshots every few
events is killed; after the restart the history of a range that ended before the kill is exactly the
one the service answered before it, and the usage goes on from there."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ServerProcess


def _usage(c: Any, start: float, end: float) -> Any:
    r = c.get("/ws/v1/partition/default/history/usage",
              params={"groupBy": "queue", "step": "total", "start": f"{start:.3f}", "end": f"{end:.3f}"})
    assert r.status_code == 200, r.text
    return {s["name"]: s["points"][0] for s in r.json()["series"]}


@pytest.mark.slow
def test_kill9_keeps_the_history_exactly(tmp_path: Path, servers: list[ServerProcess],
                                        config_file: Path) -> None:
    store = "sqlite:///hist.db?compact=true"
    env = {"QUOTAPLANE_SNAPSHOT_EVERY": "7"}
    s = ServerProcess(config=config_file, store=store, cwd=tmp_path, env=env)
    servers.append(s.start())
    with s.client() as c:
        assert c.put("/ws/v1/partition/default/node/n1",
                     json={"capacity": {"vcore": 10**6}}).status_code == 201
        assert c.post("/ws/v1/partition/default/applications",
                      json={"applicationID": "app", "user": "sue",
                            "queue": "root.default"}).status_code == 201
        start = time.time()
        for i in range(30):
            r = c.post("/ws/v1/partition/default/allocations",
                       json={"applicationID": "app", "allocationKey": f"k{i}",
                             "resource": {"vcore": 100 + i}})
            assert r.status_code == 201, r.text
            if i % 3 == 2:
                assert c.delete(f"/ws/v1/partition/default/allocation/k{i - 1}").status_code == 200
            time.sleep(0.05)
        # a whole minute boundary: the range's ends fall on minutes
        start = (int(start) // 60) * 60.0
        end = (int(time.time()) // 60 + 1) * 60.0
        while time.time() < end + 0.5:
            time.sleep(0.2)
        c.post("/ws/v1/partition/default/allocations",            # an event after the range ends
               json={"applicationID": "app", "allocationKey": "late", "resource": {"vcore": 1}})
        before = _usage(c, start, end)
    assert before["root.default"]["used"]["vcore"] > 0
    s.kill9()
    s2 = ServerProcess(config=config_file, store=store, cwd=tmp_path, env=env, port=s.port)
    servers.append(s2.start())
    with s2.client() as c:
        after = _usage(c, start, end)
    assert after == before
