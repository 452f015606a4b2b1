"""Writes examples/gpu-trace.jsonl, the workload of docs/capacity-planning.md (seeded: always the same).

Three nodes of 8 GPUs. Over 8 hours team-a submits training jobs (2-8 GPUs, about 1 h), team-b
serving jobs (1-2 GPUs, long-lived) and research experiments (1-4 GPUs, about 30 min). Every job asks
and waits until it fits.

    python examples/gpu_trace.py > examples/gpu-trace.jsonl
"""

from __future__ import annotations

import json
import random
import sys

GPU = "nvidia.com/gpu"
HOURS = 8
TEAMS = {
    # queue: (jobs per hour, GPU choices, mean duration in s, users)
    "root.team-a": (2.5, [2, 4, 4, 8], 3600.0, ["ana", "arun"]),
    "root.team-b": (1.0, [1, 1, 2], 7200.0, ["bo", "bea"]),
    "root.research": (3.0, [1, 2, 2, 4], 1800.0, ["rai", "rosa", "ravi"]),
}


def trace(seed: int = 36) -> list[dict[str, object]]:
    """The events, in time order."""
    rng = random.Random(seed)
    out: list[tuple[float, int, dict[str, object]]] = []
    for i in range(3):
        out.append((0.0, len(out), {"t": 0, "op": "node", "node": f"gpu-{i}", "capacity": {GPU: 8}}))
    for queue, (rate, sizes, mean, users) in TEAMS.items():
        t, n = 0.0, 0
        while True:
            t += rng.expovariate(rate / 3600)
            if t >= HOURS * 3600:
                break
            n += 1
            app = f"{queue.split('.')[1]}-{n:03d}"
            at = round(t, 1)
            out.append((at, len(out), {"t": at, "op": "submit", "app": app, "user": rng.choice(users),
                                       "queue": queue}))
            duration = round(max(60.0, rng.expovariate(1 / mean)), 1)
            out.append((at, len(out), {"t": at, "op": "ask", "app": app, "key": f"{app}-0",
                                       "resource": {GPU: rng.choice(sizes)}, "duration": duration}))
    out.sort(key=lambda e: (e[0], e[1]))
    return [e[2] for e in out]


if __name__ == "__main__":
    for ev in trace():
        sys.stdout.write(json.dumps(ev, separators=(",", ":")) + "\n")
