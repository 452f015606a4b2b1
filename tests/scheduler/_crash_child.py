"""Child process of the crash tests: writes allocations and releases to a store until it is killed.

Prints ``ACK <op> <key>`` after each call returned (the answer a client would have received), so the
parent knows exactly what was acknowledged when it sends SIGKILL.
"""

from __future__ import annotations

import random
import sys

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from tests.partition.helpers import CONFIG


def main(url: str, seed: int) -> None:
    rnd = random.Random(seed)
    s = Scheduler.from_yaml(CONFIG, store=url, snapshot_every=25)
    p = s.partition("default")
    if not p.nodes():
        p.add_node("n1", Resource({"vcore": 1_000_000, "memory": 100_000}))
    for app, user, queue in (("c1", UserGroup("carol", ["ops"]), "root.default"),
                             ("c2", UserGroup("bob", ["ops"]), "root.b")):
        if p.application(app) is None:
            p.add_application(app, user, queue=queue)
    print("READY", flush=True)
    live = sorted(a.allocation_key for a in p.allocations())
    n = 0
    while True:
        if live and rnd.random() < 0.4:
            key = live.pop(rnd.randrange(len(live)))
            print(f"TRY release {key}", flush=True)
            p.release(key)
            print(f"ACK release {key}", flush=True)
        else:
            n += 1
            key = f"s{seed}-{n}"
            print(f"TRY allocate {key}", flush=True)
            d = p.allocate(rnd.choice(["c1", "c2"]), key, Resource({"vcore": rnd.randrange(1, 500)}))
            if d.allocated:
                live.append(key)
                print(f"ACK allocate {key}", flush=True)
            else:
                print(f"REFUSED allocate {key}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
