"""YuniKorn quota preemption (PR-Q1…PR-Q5, decisions Q3 and P5): a queue over its lowered max is cut back.

Opt-in twice (PR-Q1): the partition's ``preemption.quotapreemptionenabled`` and the queue's own
``quota.preemption.delay`` (> 0, not inherited by children). A managed queue whose usage is above its
max is *due* ``delay`` seconds after it was first seen over (PR-Q2: a reload that lowers the max, or an
allocation admitted under an older, higher max); if it is back within its max by then, nothing
happens. The trigger times live in memory only (PR-Q2: a restart restarts the delay); what is preempted
is journalled, so replay does not decide again.

Victims (PR-Q3, PR-Q4, P5): preemptible allocations of the queue's subtree, lowest priority first, then
newest first (exact times, P8), then allocation key; taken until usage is within the max, skipping one
only when a later one alone brings the usage within the max, and never taking the queue or an ancestor
below its guaranteed resources in a type the victim holds. When the allowed victims cannot reach the
max, those are taken and the queue stays above it (best effort, as upstream).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from quotaplane.policy import Eviction, Violation
from quotaplane.queues.properties import PROP_QUOTA_PREEMPTION_DELAY, parse_duration

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Allocation
    from quotaplane.queues.queue import Queue

__all__ = ["QuotaPreemption", "quota_victims"]

Dims = dict[str, int]


def _delay(q: Queue) -> float:
    """The queue's own ``quota.preemption.delay`` in seconds (0: off; not inherited, PR-Q1)."""
    return parse_duration(q.own_properties.get(PROP_QUOTA_PREEMPTION_DELAY), 0.0)


def _excess(q: Queue) -> Dims:
    mx = q.max
    if mx is None:
        return {}
    used = q._alloc
    return {name: used.get(name, 0) - limit for name, limit in mx._values.items()
            if used.get(name, 0) > limit}


def _cap(q: Queue) -> Dims | None:
    """PR-Q3: how much may go per type without taking ``q`` or an ancestor below its guaranteed
    (None: no guaranteed on the chain, no cap)."""
    cap: Dims | None = None
    for node in q.chain:
        g = node.guaranteed
        if g is None or node.is_root:
            continue
        cap = {} if cap is None else cap
        for name, floor in g._values.items():
            room = max(0, node._alloc.get(name, 0) - floor)
            cap[name] = min(cap.get(name, room), room)
    return cap


def _fits_cap(res: Dims, cap: Dims | None) -> bool:
    return cap is None or all(amount <= cap.get(name, math.inf) for name, amount in res.items() if amount > 0)


def _covers(res: Dims, excess: Dims) -> bool:
    return all(res.get(name, 0) >= amount for name, amount in excess.items() if amount > 0)


def quota_victims(q: Queue, allocations: Iterable[Allocation]) -> Eviction | None:
    """The allocations to preempt so that ``q`` is within its max again (None: nothing may go)."""
    excess = _excess(q)
    if not excess:
        return None
    cap = _cap(q)
    candidates = sorted((a for a in allocations if a.preemptible
                         and any(a.resource._values.get(name, 0) > 0 for name in excess)),
                        key=lambda a: (a.priority, -a.time, a.allocation_key))
    chosen: list[str] = []
    for i, alloc in enumerate(candidates):
        if not any(v > 0 for v in excess.values()):
            break
        res = alloc.resource._values
        if not _fits_cap(res, cap):
            continue
        # P5: one that does not bring the usage within the max is skipped when a later one alone does
        if not _covers(res, excess) and any(
                _covers(later.resource._values, excess) and _fits_cap(later.resource._values, cap)
                for later in candidates[i + 1:]):
            continue
        chosen.append(alloc.allocation_key)
        for name, amount in res.items():
            if name in excess:
                excess[name] -= amount
            if cap is not None and name in cap:
                cap[name] -= amount
    if not chosen:
        return None
    return Eviction(Violation(policy="queue", code="queue.quota", path=q.path,
                              message=f"queue {q.path!r} stayed above its max for its quota.preemption.delay "
                                      f"({_delay(q):g}s)"), tuple(chosen))


class QuotaPreemption:
    """The trigger times of one partition's queues over their max (in memory, PR-Q2)."""

    __slots__ = ("due_at",)

    def __init__(self) -> None:
        #: queue path -> when its quota preemption runs (first seen over its max + its delay)
        self.due_at: dict[str, float] = {}

    def tick(self, queues: Iterable[Queue], now: float,
             allocations_of: Callable[[Queue], Iterable[Allocation]]) -> list[Eviction]:
        """One check at ``now`` of every queue (parents before children, PR-Q2): the evictions due.

        ``allocations_of(queue)`` lists the allocations of a queue's subtree. A queue preempts once
        per trigger; if still above its max afterwards (best effort), a new delay starts.
        """
        out: list[Eviction] = []
        seen: set[str] = set()
        running: list[Queue] = []          # queues preempting in this tick: their subtrees wait
        for q in queues:
            if q.is_root or not q.managed or q.max is None:
                continue
            if any(r in q.chain for r in running):
                seen.update(self.due_at.keys() & {q.path})
                continue
            delay = _delay(q)
            if delay <= 0 or not _excess(q):
                continue
            seen.add(q.path)
            due = self.due_at.setdefault(q.path, now + delay)
            if now < due:
                continue
            del self.due_at[q.path]
            found = quota_victims(q, allocations_of(q))
            if found is not None:
                out.append(found)
                running.append(q)
        for path in [p for p in self.due_at if p not in seen]:
            del self.due_at[path]          # back within its max (or the delay was removed): cleared
        return out
