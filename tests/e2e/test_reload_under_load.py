"""Config reload under load (quality.md "Reliability"): while clients allocate and release, failing
reloads change nothing and succeeding ones apply in one step; usage always equals what was admitted."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from tests.e2e.conftest import CONFIG, ServerProcess


def _worker(url: str, prefix: str, stop: threading.Event, live: dict[str, int], errors: list[str],
            lock: threading.Lock, admitted: list[str]) -> None:
    i = 0
    with httpx.Client(base_url=url, timeout=10.0) as c:
        while not stop.is_set():
            key = f"{prefix}-{i}"
            i += 1
            r = c.post("/ws/v1/partition/default/allocations",
                       json={"applicationID": "app", "allocationKey": key, "resource": {"vcore": 100}})
            if r.status_code == 201:
                with lock:
                    live[key] = 100
                    admitted.append(key)
            elif r.status_code != 409:
                errors.append(f"allocate {r.status_code}: {r.text}")
            if i % 3 == 0:
                with lock:
                    victim = next(iter(live), None)
                    if victim is not None:
                        del live[victim]
                if victim is not None:
                    d = c.delete(f"/ws/v1/partition/default/allocation/{victim}")
                    if d.status_code != 200:
                        errors.append(f"release {d.status_code}: {d.text}")


def test_reload_under_load_is_all_or_nothing(tmp_path: Path, servers: list[ServerProcess],
                                             config_file: Path) -> None:
    s = ServerProcess(config=config_file, store="sqlite:///reload.db", cwd=tmp_path)
    servers.append(s.start())
    with s.client() as c:
        r = c.put("/ws/v1/partition/default/node/n1", json={"capacity": {"vcore": 10**9}})
        assert r.status_code == 201
        r = c.post("/ws/v1/partition/default/applications",
                   json={"applicationID": "app", "user": "sue", "queue": "root.default"})
        assert r.status_code == 201
        stop = threading.Event()
        live: dict[str, int] = {}
        errors: list[str] = []
        lock = threading.Lock()
        admitted: list[str] = []
        workers = [threading.Thread(target=_worker, args=(s.url, f"w{n}", stop, live, errors, lock, admitted))
                   for n in range(3)]
        for w in workers:
            w.start()
        try:
            current = CONFIG
            for round_ in range(20):
                # interleave: each reload comes after at least one more admission (a busy machine
                # must not let the 20 reloads finish before the load got going)
                deadline = time.monotonic() + 10
                while len(admitted) <= round_ and time.monotonic() < deadline and not errors:
                    time.sleep(0.005)
                if round_ % 2:
                    bad = current.replace("name: restricted", "name: re stricted")
                    r = c.put("/ws/v1/config", content=bad)
                    assert r.status_code == 400, r.text
                    assert c.get("/ws/v1/config").text == current
                else:
                    # alternate root.default's max between two values, both far above the load
                    limit = 10**6 + round_
                    new = CONFIG.replace("          - name: default\n",
                                         f"          - name: default\n            resources:\n"
                                         f"              max:\n                vcore: {limit}\n")
                    r = c.put("/ws/v1/config", content=new)
                    assert r.status_code == 200, r.text
                    current = new
                    q = c.get("/ws/v1/partition/default/queue/root.default").json()
                    assert q["maxResource"]["vcore"] == limit * 1000
        finally:
            stop.set()
            for w in workers:
                w.join(30)
        assert not errors, errors[:3]
        assert len(admitted) >= 20            # the reloads really happened under load
        used = c.get("/ws/v1/partitions").json()[0]["capacity"]["usedCapacity"].get("vcore", 0)
        assert used == sum(live.values())
        app = c.get("/ws/v1/partition/default/application/app").json()
        assert {a["allocationKey"] for a in app.get("allocations", [])} == set(live)
    assert s.stop() == 0
