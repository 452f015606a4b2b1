"""Benchmark of the user group manager's hot path (quality.md, issue 3).

Measures, in one process:

1. ``increase_tracked_resource`` + ``decrease_tracked_resource`` with enforcement — a user and a
   group tracked, queue depth 4, 3 resource types, user and group limits at 2 levels (root and
   leaf) — against a bare nested-dict baseline doing the same counter updates (user and group,
   every level, every resource, up and down). Target ≤ 4×, goal ≤ 2×.
2. Per-operation cost as the number of tracked users grows (10 → 100,000) and as the number of
   queues grows (10 → 10,000). Target: grows ≤ 1.5×, goal ≤ 1.2×.

Steady state is measured: every (user, queue) pair used has a long-running application, so the
increase/decrease pair updates existing trackers (the common case: allocations come and go while
applications run). The full life cycle of a short application (first increase creates, the last
decrease with ``remove_app`` cleans up) is reported as well, for information.

Run: ``.venv/bin/python benchmarks/ugm.py`` (≈ 1 minute). Writes ``benchmarks/results/ugm.json``.
"""

from __future__ import annotations

import gc
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from _bench import write_results
from quotaplane.config.identity import UserGroup
from quotaplane.config.model import LimitConfig, PartitionConfig, QueueConfig
from quotaplane.resources import Resource
from quotaplane.ugm import Manager

BIG = 10**15
LIMIT = Resource({"vcore": BIG, "memory": BIG, "pods": BIG})
USAGE = Resource({"vcore": 100, "memory": 1 << 20, "pods": 1})
OPS = 20_000


def leaf_paths(n_queues: int) -> list[str]:
    """``n_queues`` leaf queues at depth 4: root.p{i%10}.q{i%100}.l{i}."""
    return [f"root.p{i % 10}.q{i % 100}.l{i}" for i in range(n_queues)]


def limits() -> tuple[LimitConfig, ...]:
    return (
        LimitConfig(limit="dev", groups=("dev",), max_resources=LIMIT, max_applications=10**9),
        LimitConfig(limit="users", users=("*",), max_resources=LIMIT, max_applications=10**9),
        LimitConfig(limit="others", groups=("*",), max_resources=LIMIT),
    )


def build_config(paths: list[str]) -> PartitionConfig:
    """A partition whose leaves are ``paths``, with user and group limits at root and every leaf."""
    tree: dict[str, Any] = {}
    for p in paths:
        node = tree
        for part in p.split(".")[1:]:
            node = node.setdefault(part, {})

    def make(name: str, path: str, children: dict[str, Any]) -> QueueConfig:
        kids = tuple(make(k, f"{path}.{k}", v) for k, v in sorted(children.items()))
        lim = limits() if (not kids or path == "root") else ()
        return QueueConfig(name=name, path=path, parent=bool(kids), limits=lim, queues=kids)

    return PartitionConfig(name="default", root=make("root", "root", tree))


def setup(n_users: int, n_queues: int, seed: int = 1) -> tuple[Manager, list[tuple[str, str, UserGroup]]]:
    """A manager with ``n_users`` users spread over ``n_queues`` leaves, and the op list."""
    rng = random.Random(seed)
    paths = leaf_paths(n_queues)
    m = Manager()
    m.update_config(build_config(paths))
    users = [UserGroup(f"user{i}", ("dev",)) for i in range(n_users)]
    pairs: dict[tuple[int, int], None] = {}
    for i in range(n_users):              # every user runs something
        pairs[(i, i % n_queues)] = None
    for i in range(n_queues):             # every queue has someone
        pairs[(i % n_users, i)] = None
    base = list(pairs)
    for u, q in base:
        ok = m.increase_tracked_resource(paths[q], f"long-{u}-{q}", USAGE, users[u])
        assert ok
    ops = []
    for _ in range(OPS):
        u, q = base[rng.randrange(len(base))]
        ops.append((paths[q], f"long-{u}-{q}", users[u]))
    return m, ops


def run_ugm(m: Manager, ops: list[tuple[str, str, UserGroup]]) -> float:
    inc = m.increase_tracked_resource
    dec = m.decrease_tracked_resource
    usage = USAGE
    start = time.perf_counter()
    for path, app, user in ops:
        inc(path, app, usage, user)
        dec(path, app, usage, False, user)
    return time.perf_counter() - start


def run_lifecycle(m: Manager, ops: list[tuple[str, str, UserGroup]]) -> float:
    inc = m.increase_tracked_resource
    dec = m.decrease_tracked_resource
    usage = USAGE
    start = time.perf_counter()
    for i, (path, _app, user) in enumerate(ops):
        app = f"short-{i}"
        inc(path, app, usage, user)
        dec(path, app, usage, True, user)
    return time.perf_counter() - start


def run_baseline(ops: list[tuple[str, str, UserGroup]]) -> float:
    """The same counter updates in bare nested dicts: user and group, every level, up then down."""
    users: dict[str, dict[str, dict[str, int]]] = {}
    groups: dict[str, dict[str, dict[str, int]]] = {}
    split: dict[str, tuple[str, ...]] = {}
    prepared = []
    for path, _app, user in ops:
        levels = split.get(path)
        if levels is None:
            parts = path.split(".")
            levels = tuple(".".join(parts[: i + 1]) for i in range(len(parts)))
            split[path] = levels
        un = users.setdefault(user.user, {})
        gn = groups.setdefault("dev", {})
        for lvl in levels:
            un.setdefault(lvl, {})
            gn.setdefault(lvl, {})
        prepared.append((user.user, "dev", levels))
    items = USAGE._values.items()
    start = time.perf_counter()
    for uname, gname, levels in prepared:
        un = users[uname]
        gn = groups[gname]
        for lvl in levels:
            d = un[lvl]
            for k, v in items:
                d[k] = d.get(k, 0) + v
            d = gn[lvl]
            for k, v in items:
                d[k] = d.get(k, 0) + v
        for lvl in levels:
            d = un[lvl]
            for k, v in items:
                d[k] = d.get(k, 0) - v
            d = gn[lvl]
            for k, v in items:
                d[k] = d.get(k, 0) - v
    return time.perf_counter() - start


def best(fn: Any, *args: Any, repeat: int = 5) -> float:
    gc.collect()
    return min(fn(*args) for _ in range(repeat))


def main() -> None:
    results: dict[str, Any] = {"ops_per_measure": OPS}

    # 1. ratio against the bare-dict baseline (100 users, 100 queues)
    m, ops = setup(100, 100)
    ugm = best(run_ugm, m, ops)
    base = best(run_baseline, ops)
    life = best(run_lifecycle, m, ops)
    results["baseline_us_per_op"] = round(base / OPS * 1e6, 3)
    results["ugm_us_per_op"] = round(ugm / OPS * 1e6, 3)
    results["ugm_lifecycle_us_per_op"] = round(life / OPS * 1e6, 3)
    results["ratio_vs_baseline"] = round(ugm / base, 2)
    results["ratio_target"] = 4.0
    results["ratio_goal"] = 2.0

    # 2. scaling with users (10 queues) and with queues (100 users)
    per_op: dict[str, float] = {}
    for n in (10, 1_000, 100_000):
        m, ops = setup(n, 10)
        per_op[str(n)] = best(run_ugm, m, ops) / OPS * 1e6
        del m
    results["users_us_per_op"] = {k: round(v, 3) for k, v in per_op.items()}
    results["users_growth_10_to_100000"] = round(per_op["100000"] / per_op["10"], 2)
    per_q: dict[str, float] = {}
    for n in (10, 1_000, 10_000):
        m, ops = setup(100, n)
        per_q[str(n)] = best(run_ugm, m, ops) / OPS * 1e6
        del m
    results["queues_us_per_op"] = {k: round(v, 3) for k, v in per_q.items()}
    results["queues_growth_10_to_10000"] = round(per_q["10000"] / per_q["10"], 2)
    results["growth_target"] = 1.5
    results["growth_goal"] = 1.2

    # config reload cost with many tracked users (informational)
    m, _ = setup(100_000, 10)
    cfg = build_config(leaf_paths(10))
    start = time.perf_counter()
    m.update_config(cfg)
    results["reload_100000_users_ms"] = round((time.perf_counter() - start) * 1e3, 1)

    write_results("ugm", results)


if __name__ == "__main__":
    main()
