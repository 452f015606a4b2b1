"""Synthetic traces for benchmarks and tests (``generate_trace``).

The generator is seeded (``random.Random(seed)``), so a seed always gives the same trace. It reads
the leaf queues of a configuration to spread applications over them, or uses the given queue list.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

__all__ = ["generate_trace", "leaf_queues", "trace_to_jsonl"]


def leaf_queues(config_text: str, partition: str = "default") -> list[str]:
    """The leaf queue paths of ``partition`` in a queue configuration, sorted."""
    from quotaplane.config import load_config

    pc = load_config(config_text).partition(partition)
    out = [q.path for q in pc.root.walk() if q.is_leaf]
    return sorted(out)


def generate_trace(seed: int, n_apps: int, *, queues: Sequence[str] = ("root.default",),
                   users: int = 20, groups: Sequence[str] = (), nodes: int = 10,
                   node_capacity: dict[str, Any] | None = None, allocs_per_app: int = 5,
                   ask_share: float = 0.3, explicit_release_share: float = 0.2,
                   arrival_rate: float = 2.0, mean_duration: float = 120.0) -> list[dict[str, Any]]:
    """A synthetic trace as a list of event dicts (JSON-lines ready: :func:`trace_to_jsonl`).

    ``nodes`` nodes of ``node_capacity`` (default 64 cores, 256Gi) come up at ``t=0``; ``n_apps``
    applications arrive as a Poisson process of ``arrival_rate`` per second, each by one of ``users``
    users (member of one of ``groups`` when given) into a queue of ``queues``; each makes
    ``allocs_per_app`` requests (a share ``ask_share`` of them as asks that wait, the others as
    allocations that may be refused) of 1–8 cores and 2–16 GiB, lasting an exponential time of
    ``mean_duration`` seconds — released by a ``duration`` or, for ``explicit_release_share`` of them,
    by an explicit ``release`` event; the application finishes after its last request.
    """
    rng = random.Random(seed)
    cap = node_capacity if node_capacity is not None else {"vcore": 64, "memory": "256Gi"}
    events: list[tuple[float, int, dict[str, Any]]] = []
    order = 0

    def put(t: float, ev: dict[str, Any]) -> None:
        nonlocal order
        order += 1
        events.append((t, order, ev))

    for i in range(nodes):
        put(0.0, {"t": 0, "op": "node", "node": f"node-{i:04d}", "capacity": dict(cap)})
    t = 0.0
    for a in range(n_apps):
        t += rng.expovariate(arrival_rate)
        app = f"app-{a:06d}"
        u = rng.randrange(users)
        sub: dict[str, Any] = {"t": round(t, 3), "op": "submit", "app": app, "user": f"user-{u:03d}",
                               "queue": queues[rng.randrange(len(queues))]}
        if groups:
            sub["groups"] = [groups[u % len(groups)]]
        put(t, sub)
        at = t
        last = t
        for j in range(allocs_per_app):
            at += rng.expovariate(1.0)
            dur = max(0.001, round(rng.expovariate(1.0 / mean_duration), 3))
            op = "ask" if rng.random() < ask_share else "allocate"
            res = {"vcore": rng.randint(1, 8), "memory": f"{rng.randint(2, 16)}Gi"}
            ev: dict[str, Any] = {"t": round(at, 3), "op": op, "app": app, "key": f"{app}-{j}",
                                  "resource": res}
            if rng.random() < 0.1:
                ev["priority"] = rng.randint(1, 10)
            if ev["op"] == "allocate" and rng.random() < explicit_release_share:
                put(at, ev)
                end = round(at + dur, 3)
                put(end, {"t": end, "op": "release", "key": ev["key"]})
                last = max(last, end)
            else:
                ev["duration"] = dur
                put(at, ev)
                last = max(last, at + dur)
        fin = round(last + rng.expovariate(0.1), 3)
        put(fin, {"t": fin, "op": "finish", "app": app})
    # a stable sort by (rounded time, creation order): the trace is in time order, releases after
    # their allocation, a finish after every event of its application
    events.sort(key=lambda e: (e[2]["t"], e[1]))
    return [e[2] for e in events]


def trace_to_jsonl(events: Sequence[dict[str, Any]]) -> str:
    """The JSON-lines text of a trace (one compact object per line)."""
    return "".join(json.dumps(ev, separators=(",", ":")) + "\n" for ev in events)
