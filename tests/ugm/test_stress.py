"""Concurrency (issue 3, quality.md): 8 threads of random increases and decreases against limits.

No exception, no limit exceeded at any sampled instant, and the final usage equals what was accepted
minus what was released — for every user and group node. Bounded to about two seconds.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from quotaplane.resources import Resource
from quotaplane.ugm import Manager, split_queue_path

from .helpers import lim, partition, ug

THREADS = 8
SECONDS = 1.5
PATHS = ("root.a", "root.a.x", "root.b", "root.b.y")
USERS = {"u0": ("dev",), "u1": ("dev",), "u2": ("qa",), "u3": ("qa",), "u4": ()}
GROUP_OF = {"u0": "dev", "u1": "dev", "u2": "*", "u3": "*", "u4": None}
CONFIG = partition({
    "root": [lim(users=["*"], res={"vcore": 40, "mem": 60}, apps=6),
             lim(groups=["dev"], res={"vcore": 60}, apps=8), lim(groups=["*"], res={"vcore": 50})],
    "root.a": [lim(users=["u0"], res={"vcore": 15}, apps=3), lim(users=["*"], res={"vcore": 20}),
               lim(groups=["dev"], res={"mem": 40})],
}, PATHS)


def check_limits(state: dict[str, Any]) -> list[str]:
    """Every node with a limit is within it (usage and running applications)."""
    problems = []
    for kind in ("users", "groups"):
        for name, tracker in state[kind].items():
            for path, node in tracker["queues"].items():
                mx = node["maxResources"]
                if mx is not None:
                    for k, v in mx.items():
                        if node["usage"].get(k, 0) > v:
                            problems.append(f"{kind} {name} {path} {k}: {node['usage']} > {mx}")
                if node["maxApplications"] and len(node["running"]) > node["maxApplications"]:
                    problems.append(f"{kind} {name} {path}: {node['running']} > {node['maxApplications']}")
    return problems


def test_eight_threads_random_increase_decrease_never_exceed_and_never_lose_usage() -> None:
    m = Manager()
    m.update_config(CONFIG)
    deadline = time.monotonic() + SECONDS
    errors: list[BaseException] = []
    ledgers: list[dict[str, dict[str, Any]]] = []
    accepted = [0] * THREADS
    refused = [0] * THREADS

    def worker(index: int) -> None:
        rng = random.Random(index)
        ledger: dict[str, dict[str, Any]] = {}      # app -> user, path, usage (accepted - released)
        ledgers.append(ledger)
        try:
            n = 0
            while time.monotonic() < deadline:
                n += 1
                op = rng.random()
                if op < 0.55 or not ledger:
                    app = f"t{index}-app{rng.randrange(6)}"
                    entry = ledger.get(app)
                    if entry is None:
                        user = rng.choice(sorted(USERS))
                        entry = {"user": user, "path": rng.choice(PATHS), "usage": {}}
                    usage = {"vcore": rng.randrange(0, 6), "mem": rng.randrange(0, 8)}
                    ok = m.increase_tracked_resource(entry["path"], app, Resource(usage),
                                                     ug(entry["user"], *USERS[entry["user"]]))
                    if ok:
                        accepted[index] += 1
                        ledger[app] = entry
                        for k, v in usage.items():
                            entry["usage"][k] = entry["usage"].get(k, 0) + v
                    else:
                        refused[index] += 1
                else:
                    app = rng.choice(sorted(ledger))
                    entry = ledger[app]
                    remove = op > 0.85
                    if remove:
                        part = dict(entry["usage"])
                        del ledger[app]
                    else:
                        part = {k: rng.randrange(0, v + 1) for k, v in entry["usage"].items()}
                        for k, v in part.items():
                            entry["usage"][k] -= v
                    m.decrease_tracked_resource(entry["path"], app, Resource(part), remove,
                                                ug(entry["user"], *USERS[entry["user"]]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    samples: list[list[str]] = []

    def sampler() -> None:
        while time.monotonic() < deadline or len(samples) < 6:
            samples.append(check_limits(m.dump_state()))
            time.sleep(0.01)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    threads.append(threading.Thread(target=sampler))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    assert len(samples) > 5
    assert all(s == [] for s in samples), [s for s in samples if s][:3]
    assert sum(accepted) > 50 and sum(refused) > 5        # the limits were really hit

    # final usage = accepted - released, at every node of every user and group
    expected: dict[str, dict[str, dict[str, dict[str, Any]]]] = {"users": {}, "groups": {}}
    for ledger in ledgers:
        for app, entry in ledger.items():
            for kind, name in (("users", entry["user"]), ("groups", GROUP_OF[entry["user"]])):
                if name is None:
                    continue
                nodes = expected[kind].setdefault(name, {})
                for level in split_queue_path(entry["path"]):
                    n = nodes.setdefault(level, {"usage": {}, "running": []})
                    n["running"].append(app)
                    for k, v in entry["usage"].items():
                        n["usage"][k] = n["usage"].get(k, 0) + v
    state = m.dump_state()
    assert check_limits(state) == []
    for kind in ("users", "groups"):
        got = {name: {p: {"usage": n["usage"], "running": n["running"]} for p, n in t["queues"].items()}
               for name, t in state[kind].items()}
        want = {name: {p: {"usage": {k: v for k, v in sorted(n["usage"].items()) if v},
                           "running": sorted(n["running"])} for p, n in nodes.items()}
                for name, nodes in expected[kind].items()}
        assert got == want


def test_u9_cleanup_racing_an_increase_never_loses_usage() -> None:
    """Seed 001 "Update consistency": one thread empties and removes the tracker over and over while
    others add usage for the same user and group; nothing added may be lost."""
    m = Manager()
    m.update_config(partition({"root": [lim(groups=["dev"], res={"vcore": 10**9})]}, PATHS))
    user = ug("sue", "dev")
    rounds = 3000

    def churn() -> None:
        for i in range(rounds):
            m.increase_tracked_resource("root.a.x", f"short-{i}", Resource({"vcore": 1}), user)
            m.decrease_tracked_resource("root.a.x", f"short-{i}", Resource({"vcore": 1}), True, user)

    def add(index: int) -> None:
        for i in range(rounds):
            m.increase_tracked_resource("root.b", f"long-{index}-{i % 3}", Resource({"vcore": 1}), user)

    threads = [threading.Thread(target=churn)] + [threading.Thread(target=add, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert m.get_user_resources(user) == {"vcore": 3 * rounds}
    assert m.get_group_resources("dev") == {"vcore": 3 * rounds}
    state = m.dump_state()
    assert sorted(state["users"]["sue"]["queues"]) == ["root", "root.b"]
    assert len(state["groups"]["dev"]["applications"]) == 9
