"""Config reload under load (quality.md): allocations and releases run on 4 threads while reloads
(valid and invalid) run on another. A failed reload changes nothing; a successful one is applied in
one step: at every sampled instant the queue tree, the user/group limits and the partition config
all come from the same configuration text, and no admitted allocation exceeds what that config
allowed at the time it was admitted."""

from __future__ import annotations

import random
import threading
import time

from quotaplane import ConfigError, Resource
from quotaplane.config.identity import UserGroup
from quotaplane.ugm.limits import LimitTable
from tests.partition.helpers import CONFIG, scheduler

CONFIG_B = CONFIG.replace("max: {vcore: 10, memory: 100}", "max: {vcore: 20, memory: 100}").replace(
    "maxresources: {vcore: 4}", "maxresources: {vcore: 8}").replace(
    "maxresources: {vcore: 6}", "maxresources: {vcore: 12}")
DURATION = 1.5


def test_reload_is_atomic_under_load() -> None:
    s = scheduler()
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100000, "memory": 10000}))
    alice = UserGroup("alice", ["dev"])
    for i in range(4):
        p.add_application(f"app{i}", alice, queue="root.a")
    stop = time.monotonic() + DURATION
    errors: list[BaseException] = []
    seen = {"A": 0, "B": 0, "bad": 0}

    def worker(i: int) -> None:
        rnd = random.Random(i)
        mine: list[str] = []
        n = 0
        try:
            while time.monotonic() < stop:
                if mine and rnd.random() < 0.5:
                    p.release(mine.pop())
                    continue
                n += 1
                key = f"w{i}-{n}"
                with p.lock:       # the decision and the config it was made under, together
                    d = p.allocate(f"app{i}", key, Resource({"vcore": rnd.randrange(100, 2500)}))
                    if d.allocated:
                        q = p.queues.queue("root.a")
                        assert q.allocated["vcore"] <= q.max["vcore"]
                        user = p.ugm.get_user_resources(alice)
                        limit = 4000 if p.config.queue("root.a").max["vcore"] == 10000 else 8000
                        assert user is not None and user["vcore"] <= limit
                if d.allocated:
                    mine.append(key)
        except BaseException as exc:
            errors.append(exc)

    def reloader() -> None:
        rnd = random.Random(99)
        try:
            while time.monotonic() < stop:
                if rnd.random() < 0.3:
                    try:
                        s.update_config(CONFIG.replace("vcore: 10,", "vcore: -1,"))
                    except ConfigError:
                        seen["bad"] += 1
                    continue
                s.update_config(CONFIG_B if rnd.random() < 0.5 else CONFIG)
                time.sleep(0.01)
        except BaseException as exc:
            errors.append(exc)

    def sampler() -> None:
        try:
            while time.monotonic() < stop:
                with p.lock:
                    cfg = p.config
                    assert p.queues.queue("root.a").max == cfg.queue("root.a").max
                    assert p.ugm.limit_table.describe() == LimitTable.from_partition(cfg).describe()
                    seen["A" if cfg.queue("root.a").max["vcore"] == 10000 else "B"] += 1
                time.sleep(0.002)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=reloader), threading.Thread(target=sampler)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors[:3]
    assert seen["bad"] > 0 and seen["A"] + seen["B"] > 0
    assert s.config_text in (CONFIG, CONFIG_B)
