"""YuniKorn quota preemption (PR-Q1…PR-Q5, decisions Q3 and P5): a queue over its lowered max is cut back.

Opt-in twice (PR-Q1): the partition's ``preemption.quotapreemptionenabled`` and the queue's own
``quota.preemption.delay`` (> 0, not inherited by children). A managed queue whose usage is above its
max is *due* ``delay`` seconds after it was first seen over (PR-Q2: a reload that lowers the max, or an
allocation admitted under an older, higher max); if it is back within its max by then, nothing
happens. The trigger times live in memory only (PR-Q2: a restart restarts the delay); what is preempted
is journalled, so replay does not decide again.

Victims (PR-Q3, PR-Q4, P5): preemptible allocations of the queue's subtree, lowest priority first, then
newest first (exact times, P8), then allocation key; taken until usage is within the max, skipping one
that does not get there when a later one alone does, and never taking a queue of the victim's path
below its guaranteed resources in a type the victim holds. A parent's excess is first split among its
children in proportion to their usage above guaranteed (``floor``, down to the leaves), each leaf
taking victims within its share as upstream; what that leaves above the max is then taken from the
whole subtree in the same order. When the allowed victims cannot reach the
max, those are taken and the queue stays above it (best effort, as upstream). Before all that, the
allocations of the subtree running on best-effort terms (an exhausted ``besteffort`` budget, issue 34:
"the first preempted") are taken in the same order and by the same rules, as far as they help.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from quotaplane.policies.protocol import Eviction, Violation
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


def _keeps_guaranteed(leaf: Queue, res: Dims, taken: dict[str, Dims]) -> bool:
    """PR-Q3: taking ``res`` from ``leaf`` leaves every queue of its chain at or above its guaranteed."""
    for node in leaf.chain:
        g = node.guaranteed
        if g is None or node.is_root:
            continue
        gone = taken.get(node.path, {})
        for name, amount in res.items():
            if amount > 0 and name in g._values and \
                    node._alloc.get(name, 0) - gone.get(name, 0) - amount < g._values[name]:
                return False
    return True


def _covers(res: Dims, need: Dims) -> bool:
    return all(res.get(name, 0) >= amount for name, amount in need.items() if amount > 0)


def _leaves(q: Queue) -> list[Queue]:
    if q.is_leaf:
        return [q]
    return [leaf for c in q.sorted_children() for leaf in _leaves(c)]


def _shares(q: Queue, amount: Dims) -> dict[str, Dims]:
    """PR-Q3: a parent's amount split among its children in proportion to their usage above their
    guaranteed (all of it without one), ``floor`` per type, down to the leaves."""
    if q.is_leaf:
        return {q.path: amount}
    children = q.sorted_children()
    over = {c.path: _above_guaranteed(c, amount) for c in children}
    totals = {n: sum(over[c.path][n] for c in children) for n in amount}
    out: dict[str, Dims] = {}
    for c in children:
        share = {n: over[c.path][n] * total_amount // totals[n] if totals[n] > 0 else 0
                 for n, total_amount in amount.items()}
        if any(v > 0 for v in share.values()):
            out.update(_shares(c, share))
    return out


def _above_guaranteed(q: Queue, names: Dims) -> Dims:
    """What ``q`` uses above its guaranteed (all of it without one), for the resource names of ``names``."""
    g = q.guaranteed._values if q.guaranteed is not None else {}
    return {n: max(0, q._alloc.get(n, 0) - g.get(n, 0)) for n in names}


def _take(alloc: Allocation, leaf: Queue, taken: dict[str, Dims], chosen: list[str]) -> None:
    """Choose ``alloc`` (of ``leaf``): every queue of its path loses what it holds."""
    chosen.append(alloc.allocation_key)
    for node in leaf.chain:
        gone = taken.setdefault(node.path, {})
        for name, amount in alloc.resource._values.items():
            gone[name] = gone.get(name, 0) + amount


def _pick(candidates: list[tuple[Allocation, Queue]], need: Dims, taken: dict[str, Dims],
          chosen: list[str]) -> None:
    """Walk ``candidates`` in order, taking victims until ``need`` is covered (P5), never below a
    guaranteed (PR-Q3); ``need``, ``taken`` and ``chosen`` are updated."""
    for i, (alloc, leaf) in enumerate(candidates):
        if not any(v > 0 for v in need.values()):
            return
        if alloc.allocation_key in chosen:
            continue
        res = alloc.resource._values
        if not any(res.get(n, 0) > 0 and v > 0 for n, v in need.items()):
            continue
        if not _keeps_guaranteed(leaf, res, taken):
            continue
        # P5: one that does not cover what is needed is skipped when a later one alone does
        if not _covers(res, need) and any(
                _covers(later.resource._values, need)
                and _keeps_guaranteed(later_leaf, later.resource._values, taken)
                for later, later_leaf in candidates[i + 1:] if later.allocation_key not in chosen):
            continue
        _take(alloc, leaf, taken, chosen)
        for name in need:
            need[name] -= res.get(name, 0)


def _pick_within(candidates: list[tuple[Allocation, Queue]], share: Dims, taken: dict[str, Dims],
                 chosen: list[str]) -> None:
    """PR-Q5 within a child's share: victims in order while their total stays within ``share`` in every
    type (one that would overshoot is skipped), never below a guaranteed."""
    left = dict(share)
    for alloc, leaf in candidates:
        res = alloc.resource._values
        if alloc.allocation_key in chosen or not any(res.get(n, 0) > 0 for n in left):
            continue
        if any(res.get(n, 0) > v for n, v in left.items()) or not _keeps_guaranteed(leaf, res, taken):
            continue
        _take(alloc, leaf, taken, chosen)
        for name in left:
            left[name] -= res.get(name, 0)


def _order(pairs: Iterable[tuple[Allocation, Queue]]) -> list[tuple[Allocation, Queue]]:
    """PR-Q4: the preemptible ones, lowest priority first, then newest first, then key."""
    return sorted(((a, leaf) for a, leaf in pairs if a.preemptible),
                  key=lambda p: (p[0].priority, -p[0].time, p[0].allocation_key))


def _left(excess: Dims, taken: dict[str, Dims], path: str) -> Dims:
    """What of ``excess`` the victims taken so far have not covered at queue ``path``."""
    gone = taken.get(path, {})
    return {n: v - gone.get(n, 0) for n, v in excess.items()}


def _pick_shares(q: Queue, excess: Dims, by_leaf: dict[str, list[tuple[Allocation, Queue]]],
                 taken: dict[str, Dims], chosen: list[str]) -> None:
    """PR-Q3: what of a parent's excess is not covered yet, split among its leaves, each choosing
    within its share."""
    left = {n: v for n, v in _left(excess, taken, q.path).items() if v > 0}
    if left and not q.is_leaf:
        for path, share in sorted(_shares(q, left).items()):
            _pick_within(by_leaf.get(path, []), share, taken, chosen)


def quota_victims(q: Queue, allocations_of: Callable[[Queue], Iterable[Allocation]],
                  first: Callable[[str], bool] | None = None) -> Eviction | None:
    """The allocations to preempt so that ``q`` is within its max again (None: nothing may go).

    ``allocations_of(leaf)`` lists a leaf's allocations. ``first(key)``: the allocations on
    best-effort terms, taken first (issue 34) in the order below. A parent's excess is first split
    among its leaves in proportion to their usage above guaranteed (PR-Q3), each leaf choosing in the
    PR-Q4 order; what that leaves above the max is then taken from the whole subtree in the same order (P5).
    """
    excess = _excess(q)
    if not excess:
        return None
    by_leaf = {leaf.path: _order((a, leaf) for a in allocations_of(leaf)) for leaf in _leaves(q)}
    every = _order(pair for pairs in by_leaf.values() for pair in pairs)
    taken: dict[str, Dims] = {}
    chosen: list[str] = []
    if first is not None:
        _pick([pair for pair in every if first(pair[0].allocation_key)], dict(excess), taken, chosen)
    _pick_shares(q, excess, by_leaf, taken, chosen)
    _pick(every, _left(excess, taken, q.path), taken, chosen)
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

    def _due(self, q: Queue, now: float, seen: set[str]) -> bool:
        """``q`` is over its max and its delay passed at ``now`` (then its trigger ends); a queue over
        its max is ``seen`` (its trigger is kept)."""
        delay = _delay(q)
        if delay <= 0 or not _excess(q):
            return False
        seen.add(q.path)
        due = self.due_at.setdefault(q.path, now + delay)
        if now < due:
            return False
        del self.due_at[q.path]
        return True

    def tick(self, queues: Iterable[Queue], now: float,
             allocations_of: Callable[[Queue], Iterable[Allocation]],
             first: Callable[[str], bool] | None = None) -> list[Eviction]:
        """One check at ``now`` of every queue (parents before children, PR-Q2): the evictions due.

        ``allocations_of(leaf)`` lists the allocations of a leaf queue; ``first(key)`` those on
        best-effort terms (issue 34). A queue preempts once per trigger; if still above its max
        afterwards (best effort), a new delay starts.
        """
        out: list[Eviction] = []
        seen: set[str] = set()
        running: list[Queue] = []          # queues preempting in this tick: their subtrees wait
        for q in queues:
            if not _enforced(q):
                continue
            if any(r in q.chain for r in running):
                seen.update(self.due_at.keys() & {q.path})
                continue
            if not self._due(q, now, seen):
                continue
            found = quota_victims(q, allocations_of, first)
            if found is not None:
                out.append(found)
                running.append(q)
        for path in [p for p in self.due_at if p not in seen]:
            del self.due_at[path]          # back within its max (or the delay was removed): cleared
        return out


def _enforced(q: Queue) -> bool:
    """A queue whose max quota preemption enforces: configured (managed), not the root, with a max."""
    return not q.is_root and q.managed and q.max is not None
