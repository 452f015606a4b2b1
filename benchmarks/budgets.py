"""Budgets benchmark (issue 34): what budgets cost the admission path.

Measured (ratios against a baseline measured in the same process, quality.md): allocate + release
pairs per second through ``Partition.allocate`` / ``release``, in memory and on SQLite, with three
levels of budgets on the allocation's chain (``root``, the department, the team — calendar month,
ISO week, and a rolling 30-day period — plus a wildcard user budget, every allocation declaring a
runtime so each charge also commits) against the same partition without a ``budgets`` key.
``ratio`` = budgets cost / no-budgets cost (the issue's aim: at most 1.2). Runs alternate on/off and
the best of five of each is kept. ``refused``: refusals per second of an exhausted budget (the check
alone, nothing charged), against the same allocation refused by a queue max.

Run: ``.venv/bin/python benchmarks/budgets.py`` (about a minute).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import write_results
from quotaplane.config.identity import UserGroup
from quotaplane.scheduler import Scheduler

CONFIG = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: dept
      resources:
        guaranteed: {vcore: 1000, memory: 1Ti, nvidia.com/gpu: 100}
      queues:
      - name: a
        resources:
          guaranteed: {vcore: 500, memory: 500Gi, nvidia.com/gpu: 50}
        queues:
        - name: jobs
      - name: b
        queues:
        - name: jobs
"""

BUDGETS = """
  budgets:
  - {queue: root, resourcehours: {nvidia.com/gpu: 10000000, vcore: 100000000}, period: month}
  - {queue: root.dept, resourcehours: {nvidia.com/gpu: 1000000}, period: week}
  - {queue: root.dept.a, resourcehours: {nvidia.com/gpu: 100000}, period: 30d}
  - {queue: root.dept.b, resourcehours: {nvidia.com/gpu: 100000}, period: 30d}
  - {queue: root.dept, user: '*', resourcehours: {nvidia.com/gpu: 500000}, period: month}
"""

PAIRS = int(__import__("os").environ.get("BUDGET_PAIRS", "4000"))
_R = {"vcore": 100, "memory": 2**30, "nvidia.com/gpu": 1}


def _admission(store: str | None, on: bool) -> float:
    """allocate + release pairs per second."""
    now = [1_764_000_000.0]
    s = Scheduler.from_yaml(CONFIG + (BUDGETS if on else ""), store=store, clock=lambda: now[0],
                            snapshot_every=0)
    try:
        p = s.partition("default")
        p.add_node("n", {"vcore": 10**9, "memory": 10**15, "nvidia.com/gpu": 10**6})
        user = UserGroup("alice", ("dev",))
        p.add_application("a", user, queue="root.dept.a.jobs")
        p.add_application("b", user, queue="root.dept.b.jobs")
        p.allocate_batch([{"application_id": "a", "allocation_key": f"held{i}", "resource": _R}
                          for i in range(20)])
        start = time.perf_counter()
        for i in range(PAIRS):
            now[0] += 0.05
            app = "a" if i % 2 else "b"
            assert p.allocate(app, f"k{i}", _R, max_runtime=3600.0).allocated
            p.release(f"k{i}")
        return PAIRS / (time.perf_counter() - start)
    finally:
        s.close(snapshot=False)


def _refusals(by_budget: bool) -> float:
    """Refused allocations per second: by an exhausted budget, or by a queue max (the baseline)."""
    now = [1_764_000_000.0]
    capped = "        - name: jobs\n          resources: {max: {nvidia.com/gpu: 1}}\n      - name: b"
    text = CONFIG.replace("        - name: jobs\n      - name: b", capped)
    if by_budget:
        text = CONFIG + "\n  budgets:\n  - {queue: root.dept.a, resourcehours: {nvidia.com/gpu: 1}}\n"
    s = Scheduler.from_yaml(text, clock=lambda: now[0], snapshot_every=0)
    try:
        p = s.partition("default")
        p.add_node("n", {"vcore": 10**9, "memory": 10**15, "nvidia.com/gpu": 10**6})
        p.add_application("a", UserGroup("alice", ()), queue="root.dept.a.jobs")
        p.allocate("a", "held", {"nvidia.com/gpu": 1})
        now[0] += 7200                                       # the budget is spent
        start = time.perf_counter()
        for i in range(PAIRS):
            assert not p.allocate("a", f"k{i}", _R).allocated
        return PAIRS / (time.perf_counter() - start)
    finally:
        s.close(snapshot=False)


def _best(fn: Callable[[], float]) -> float:
    return max(fn() for _ in range(5))


def _compare(store: Callable[[], str | None]) -> dict[str, float]:
    on_best = off_best = 0.0
    for _ in range(5):
        off_best = max(off_best, _admission(store(), False))
        on_best = max(on_best, _admission(store(), True))
    return {"on_pairs_per_s": round(on_best), "off_pairs_per_s": round(off_best),
            "ratio": round(off_best / on_best, 3)}


def main() -> dict[str, Any]:
    out: dict[str, Any] = {"memory": _compare(lambda: None)}
    with tempfile.TemporaryDirectory() as tmp:
        n = [0]

        def sqlite() -> str:
            n[0] += 1
            return f"sqlite:///{tmp}/b{n[0]}.db"

        out["sqlite"] = _compare(sqlite)
    budget, queue = _best(lambda: _refusals(True)), _best(lambda: _refusals(False))
    out["refused"] = {"by_budget_per_s": round(budget), "by_queue_max_per_s": round(queue),
                      "ratio": round(queue / budget, 3)}
    return out


if __name__ == "__main__":
    write_results("budgets", main())
