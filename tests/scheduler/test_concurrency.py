"""8 threads hammering one partition (quality.md "Concurrency"), bounded to ~2 seconds.

No exception, no limit exceeded at any sampled instant, final usage = admitted − released.
"""

from __future__ import annotations

import random
import threading
import time

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from tests.partition.helpers import scheduler

DURATION = 2.0


def test_eight_threads_allocate_release() -> None:
    s = scheduler()
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100000, "memory": 10000}))
    users = [UserGroup("alice", ["dev"]), UserGroup("bob", ["dev"]), UserGroup("carol", ["ops"])]
    for i in range(8):
        for j in range(2):
            queue = ["root.a", "root.b", "root.default"][(i + j) % 3]
            user = users[i % 3] if queue != "root.b" else UserGroup("bob", ["ops"])
            p.add_application(f"t{i}-{j}", user, queue=queue)
    errors: list[BaseException] = []
    live: dict[str, Resource] = {}
    live_lock = threading.Lock()
    stop = time.monotonic() + DURATION
    counts = {"admitted": 0, "refused": 0, "released": 0, "samples": 0}

    def worker(i: int) -> None:
        rnd = random.Random(i)
        mine: list[str] = []
        n = 0
        try:
            while time.monotonic() < stop:
                if mine and rnd.random() < 0.45:
                    key = mine.pop(rnd.randrange(len(mine)))
                    p.release(key)
                    with live_lock:
                        del live[key]
                        counts["released"] += 1
                    continue
                n += 1
                key = f"t{i}-k{n}"
                res = Resource({"vcore": rnd.randrange(0, 3000), "memory": rnd.randrange(0, 20)})
                d = p.allocate(f"t{i}-{rnd.randrange(2)}", key, res)
                with live_lock:
                    if d.allocated:
                        live[key] = res
                        counts["admitted"] += 1
                    else:
                        counts["refused"] += 1
                if d.allocated:
                    mine.append(key)
        except BaseException as exc:  # reported below
            errors.append(exc)

    def sampler() -> None:
        try:
            while time.monotonic() < stop:
                with p.lock:
                    for path in ("root.a", "root.b"):
                        q = p.queues.queue(path)
                        for name, limit in q.max.items():
                            assert q.allocated.get(name, 0) <= limit, (path, name)
                    for u in users:
                        head = p.ugm.headroom("root.a", "probe", u)
                        assert head is None or all(v >= 0 for v in head.values()), (u, head)
                    counts["samples"] += 1
                time.sleep(0.005)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    threads.append(threading.Thread(target=sampler))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors[:3]
    assert counts["admitted"] > 0 and counts["refused"] > 0 and counts["samples"] > 0
    total: dict[str, int] = {}
    for res in live.values():
        for k, v in res.items():
            total[k] = total.get(k, 0) + v
    assert p.queues.queue("root").allocated == Resource(total)
    assert {a.allocation_key for a in p.allocations()} == set(live)
    assert counts["admitted"] - counts["released"] == len(live)
