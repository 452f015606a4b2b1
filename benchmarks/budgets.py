"""Budgets benchmark (issue 34): what budgets cost the admission path.

Measured (ratios against a baseline measured in the same process, quality.md): allocate + release
pairs per second through ``Partition.allocate`` / ``release``, in memory and on SQLite, with three
levels of budgets on the allocation's chain (``root``, the department, the team — calendar month,
ISO week, and a rolling 30-day period — plus a wildcard user budget, every allocation declaring a
runtime so each charge also commits) against the same partition without a ``budgets`` key.
``ratio`` = budgets cost / no-budgets cost (the issue's aim: at most 1.2). Runs alternate on/off and
the best of five of each is kept. Rates are per second of the process's CPU time (``process_time``):
on a machine shared with other work, wall time measured the neighbours more than the budgets (two
runs a minute apart read 1.12 and 1.66); on SQLite this leaves out the wait for the disk, which only
makes the ratio larger. ``refused``: refusals per second of an exhausted budget (the check
alone, nothing charged), against the same allocation refused by a queue max. ``elastic``: the same
three levels with the teams' budgets ``besteffort`` (so the partition's holdings are followed) and
budgets on an elastic quota and its parent quota (the request's quota chain resolved through
Koordinator's pod rules), against the same partition with the elastic quotas and no budgets (memory).

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

def _elastic_quota(name: str, parent: str = "", is_parent: bool = False) -> str:
    small = 1 if parent else 2            # the children's min sum to their parent's
    labels = ""
    if parent or is_parent:
        labels = "\n          labels:"
        labels += f"\n            quota.scheduling.koordinator.sh/parent: {parent}" if parent else ""
        labels += '\n            quota.scheduling.koordinator.sh/is-parent: "true"' if is_parent else ""
    return f"""        ---
        apiVersion: scheduling.sigs.k8s.io/v1alpha1
        kind: ElasticQuota
        metadata:
          name: {name}
          namespace: {name}{labels}
        spec:
          min: {{cpu: {small}000, nvidia.com/gpu: {small}00}}
          max: {{cpu: 100000, nvidia.com/gpu: 100000}}
"""


ELASTIC = f"""
  elasticquotas:
    quotas: |
{_elastic_quota("org", is_parent=True)}{_elastic_quota("team-a", "org")}{_elastic_quota("team-b", "org")}"""

ELASTIC_BUDGETS = BUDGETS.replace("period: 30d}", "period: 30d, exhausted: besteffort}") + """\
  - {elasticquota: team-a, resourcehours: {nvidia.com/gpu: 100000}, period: month}
  - {elasticquota: team-b, resourcehours: {nvidia.com/gpu: 100000}, period: month}
  - {elasticquota: org, resourcehours: {nvidia.com/gpu: 1000000}, period: month}
""".replace("\\\n", "")

PAIRS = int(__import__("os").environ.get("BUDGET_PAIRS", "4000"))
_R = {"vcore": 100, "memory": 2**30, "nvidia.com/gpu": 1}


def _admission(store: str | None, on: bool, elastic: bool = False) -> float:
    """allocate + release pairs per second."""
    now = [1_764_000_000.0]
    text = CONFIG + (ELASTIC if elastic else "") + ((ELASTIC_BUDGETS if elastic else BUDGETS) if on else "")
    s = Scheduler.from_yaml(text, store=store, clock=lambda: now[0], snapshot_every=0)
    try:
        p = s.partition("default")
        p.add_node("n", {"vcore": 10**9, "memory": 10**15, "nvidia.com/gpu": 10**6})
        user = UserGroup("alice", ("dev",))
        p.add_application("a", user, queue="root.dept.a.jobs", tags={"namespace": "team-a"})
        p.add_application("b", user, queue="root.dept.b.jobs", tags={"namespace": "team-b"})
        p.allocate_batch([{"application_id": "a", "allocation_key": f"held{i}", "resource": _R}
                          for i in range(20)])
        start = time.process_time()
        for i in range(PAIRS):
            now[0] += 0.05
            app = "a" if i % 2 else "b"
            assert p.allocate(app, f"k{i}", _R, max_runtime=3600.0).allocated
            p.release(f"k{i}")
        return PAIRS / (time.process_time() - start)
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
        start = time.process_time()
        for i in range(PAIRS):
            assert not p.allocate("a", f"k{i}", _R).allocated
        return PAIRS / (time.process_time() - start)
    finally:
        s.close(snapshot=False)


def _best(fn: Callable[[], float]) -> float:
    return max(fn() for _ in range(5))


def _compare(store: Callable[[], str | None], elastic: bool = False) -> dict[str, float]:
    on_best = off_best = 0.0
    for _ in range(5):
        off_best = max(off_best, _admission(store(), False, elastic))
        on_best = max(on_best, _admission(store(), True, elastic))
    return {"on_pairs_per_s": round(on_best), "off_pairs_per_s": round(off_best),
            "ratio": round(off_best / on_best, 3)}


def main() -> dict[str, Any]:
    out: dict[str, Any] = {"memory": _compare(lambda: None), "elastic": _compare(lambda: None, True)}
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
