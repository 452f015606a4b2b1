"""Kueue's fair-sharing preemption on the queue tree (KQ-S5 … KQ-S9; docs/fair-sharing.md).

With fair sharing on, an ask refused by queue maxima (``queue.max``, ``root.capacity``,
``queue.lendinglimit``) that may preempt (partition ``preemption.enabled``, its ``preemption.delay``
waited, PR-Y1/PR-Y3) plans with :func:`fair_victims` instead of YuniKorn's preemption to restore
guaranteed resources. The plan follows Kueue's ``fairPreemptions``:

1. **Candidates** (KQ-S5): allocations of the ask's own leaf allowed by its
   ``preemption.withinclusterqueue`` (``LowerPriority``, ``LowerOrNewerEqualPriority``), and of every
   other leaf of the tree that *borrows* on a resource the ask needs (its usage above its guaranteed)
   allowed by ``preemption.reclaimwithincohort`` (``LowerPriority``: lower priority; ``Any``) — each
   preemptible and using a resource the ask needs; ordered other queues first, lower priority first,
   newest first, then by key (KQ-P5).
2. **The ask is added** to its leaf's usage (the shares below include it).
3. **Targets** (KQ-S6): from the root, down into the child with the highest share, skipping queues that
   do not borrow (but the ask's own leaf, and parents on its path) or have no candidates left.
   - the ask's own leaf: its next candidate goes (``InClusterQueue``);
   - another leaf, while the ask's leaf stays within its guaranteed on what it needs: its next
     candidate goes (``InCohortReclamation``);
   - another leaf otherwise: the first strategy decides, comparing the shares of the two queues just
     below their lowest common ancestor — the ask's side with the ask, the target's side without the
     candidate (``LessThanOrEqualToFinalShare``: ask's ≤ target's after) or as it is
     (``LessThanInitialShare``: ask's < target's now). The first candidate that passes goes
     (``InCohortFairSharing``) and the target is chosen again; those that fail are kept for the second
     strategy.
4. After each victim: does the ask fit (every queue max and limit, without the ask)? Then stop.
5. **Second strategy** (``LessThanInitialShare`` after ``LessThanOrEqualToFinalShare``): over the kept
   candidates, once per target queue, its first candidate goes when the ask's side is below the
   target's side now.
6. **Fewest victims** (KQ-P7): victims are put back from the second-to-last to the first while the
   ask still fits.

Before step 3, the candidates running on best-effort terms (an exhausted ``besteffort`` budget, issue
34: "the first preempted") are tried in the candidate order, each only if step 3 would let it go as it
stands (its own leaf; reclamation; else the first strategy, its queue still borrowing); the others,
and those refused, then go through steps 3–6 as before.

Everything is simulated on the tree's usage and put back before returning: nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from quotaplane.policies.protocol import Eviction, Violation
from quotaplane.queues.fair import FairShares, Share
from quotaplane.queues.properties import PROP_PREEMPTION_POLICY

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Allocation
    from quotaplane.queues import QueueTree
    from quotaplane.queues.queue import Queue

__all__ = ["PROP_RECLAIM_WITHIN_COHORT", "PROP_WITHIN_CLUSTER_QUEUE", "STRATEGIES", "fair_victims",
           "needed_names"]

#: Kueue's ``preemption.withinClusterQueue`` of a leaf (Never, LowerPriority, LowerOrNewerEqualPriority)
PROP_WITHIN_CLUSTER_QUEUE = "preemption.withinclusterqueue"
#: Kueue's ``preemption.reclaimWithinCohort`` of a leaf (Never, LowerPriority, Any)
PROP_RECLAIM_WITHIN_COHORT = "preemption.reclaimwithincohort"

#: KQ-S7: the strategies, as ``(preemptor's new share, target's old share, target's new share) → take``
STRATEGIES: dict[str, Callable[[Share, Share, Share], bool]] = {
    "LessThanOrEqualToFinalShare": lambda p_new, _t_old, t_new: p_new.key() <= t_new.key(),
    "LessThanInitialShare": lambda p_new, t_old, _t_new: p_new.key() < t_old.key(),
}

_IN_QUEUE = "InClusterQueue"
_RECLAIM = "InCohortReclamation"
_FAIR = "InCohortFairSharing"


def _policy(q: Queue, prop: str) -> str:
    return str(q.properties.get(prop, "Never")).strip().lower()


class _Candidate:
    __slots__ = ("alloc", "leaf", "order")

    def __init__(self, alloc: Allocation, leaf: Queue, own: bool) -> None:
        self.alloc = alloc
        self.leaf = leaf
        # KQ-P5: other queues first, lower priority first, newest first, then the key (replayable)
        self.order = (own, alloc.priority, -alloc.time, alloc.allocation_key)


class _Planner:
    """One fair-sharing preemption plan: the candidates, the simulation and the victims taken."""

    def __init__(self, tree: QueueTree, fair: FairShares, leaf: Queue, request: dict[str, int],
                 needed: frozenset[str]) -> None:
        self.tree = tree
        self.fair = fair
        self.leaf = leaf
        self.request = request
        self.needed = needed
        self.taken: list[tuple[_Candidate, str]] = []
        self.path = {q.path for q in leaf.chain}
        #: the ask's own usage is in the simulation (the shares of steps 2–5 include it)
        self.added = False

    # -- the simulation on the tree's usage ---------------------------------------------------------
    def remove(self, c: _Candidate) -> None:
        self.tree.decrease_allocated(c.leaf.path, c.alloc.resource)

    def put_back(self, c: _Candidate) -> None:
        self.tree.increase_allocated(c.leaf.path, c.alloc.resource)

    def fits(self) -> bool:
        """The ask fits every queue max and limit now (KQ-L8), its own simulated usage taken out."""
        if not self.added:
            return not self.tree.check_allocation(self.leaf.path, self.request)
        self.tree.decrease_allocated(self.leaf.path, self.request)
        try:
            return not self.tree.check_allocation(self.leaf.path, self.request)
        finally:
            self.tree.increase_allocated(self.leaf.path, self.request)

    def take(self, c: _Candidate, why: str) -> bool:
        """``c`` goes; True when the ask then fits."""
        self.remove(c)
        self.taken.append((c, why))
        return self.fits()

    def within_guaranteed(self) -> bool:
        """The ask's leaf, with the ask, stays within its guaranteed on every name it needs."""
        for name in self.needed:
            sq, _, used = self.fair.node(self.leaf, name)
            if used > sq:
                return False
        return True

    # -- shares at the lowest common ancestor (KQ-S7) -----------------------------------------------
    def sides(self, target: Queue) -> tuple[Queue, Queue]:
        """The ask's and the target's ancestors (or themselves) just below their lowest common one."""
        mine = self.leaf.chain
        theirs = target.chain
        common = {q.path for q in mine} & {q.path for q in theirs}
        p_side = next(q for q in mine if q.parent is not None and q.parent.path in common)
        t_side = next(q for q in theirs if q.parent is not None and q.parent.path in common)
        return p_side, t_side

    def shares(self, target: Queue) -> tuple[Share, Share]:
        p_side, t_side = self.sides(target)
        return self.fair.share(p_side), self.fair.share(t_side)

    def share_without(self, target: Queue, c: _Candidate) -> Share:
        self.remove(c)
        try:
            return self.fair.share(self.sides(target)[1])
        finally:
            self.put_back(c)


class _Targets:
    """KQ-S6: the target queues, highest share first, recomputed after every victim (Kueue's
    ``TargetClusterQueueOrdering``)."""

    def __init__(self, planner: _Planner, candidates: Iterable[_Candidate]) -> None:
        self.p = planner
        self.by_leaf: dict[str, list[_Candidate]] = {}
        for c in sorted(candidates, key=lambda c: c.order):
            self.by_leaf.setdefault(c.leaf.path, []).append(c)
        self.pruned: set[str] = set()

    def __iter__(self) -> Iterator[Queue]:
        root = self.p.tree.root
        while root.path not in self.pruned:
            target = self.next_target(root)
            if target is not None:
                yield target

    def drop(self, q: Queue) -> None:
        self.pruned.add(q.path)

    def _score(self, q: Queue) -> Share | None:
        """``q``'s share when it may still give victims, None when it is pruned now."""
        if q.path in self.pruned:
            return None
        share = self.p.fair.share(q)
        zero = share.weighted == 0
        if q.is_leaf:
            keep = bool(self.by_leaf.get(q.path)) and (not zero or q is self.p.leaf)
        else:
            keep = not zero or q.path in self.p.path
        if not keep:
            self.pruned.add(q.path)
            return None
        return share

    def next_target(self, q: Queue) -> Queue | None:
        """The next target below ``q``: its child with the highest share, entered when a parent (a tie
        goes to the parent: Kueue finds it "slightly more fair"); None when it only pruned."""
        scored = [(child, share) for child in q.sorted_children()
                  if (share := self._score(child)) is not None]
        leaf = self._best_leaf([(c, s) for c, s in scored if c.is_leaf])
        parent = _best_parent([(c, s) for c, s in scored if not c.is_leaf])
        if parent is not None and (leaf is None or parent[0] >= leaf[0]):
            return self.next_target(parent[1])
        if leaf is None:
            self.pruned.add(q.path)
            return None
        return leaf[1]

    def _best_leaf(self, scored: list[tuple[Queue, Share]]) -> tuple[tuple[int, float], Queue] | None:
        """The leaf with the highest share; equal shares: the one whose first candidate comes first."""
        best: tuple[tuple[int, float], tuple[object, ...], Queue] | None = None
        for child, share in scored:
            key, first = share.key(), self.by_leaf[child.path][0].order
            if best is None or key > best[0] or (key == best[0] and first < best[1]):
                best = (key, first, child)
        return None if best is None else (best[0], best[2])

    def pop(self, q: Queue) -> _Candidate:
        return self.by_leaf[q.path].pop(0)

    def left(self, q: Queue) -> list[_Candidate]:
        return self.by_leaf.get(q.path, [])


def _best_parent(scored: list[tuple[Queue, Share]]) -> tuple[tuple[int, float], Queue] | None:
    """The parent with the highest share (the first of equals)."""
    best: tuple[tuple[int, float], Queue] | None = None
    for child, share in scored:
        if best is None or share.key() > best[0]:
            best = (share.key(), child)
    return best


def _first_strategy(p: _Planner, candidates: list[_Candidate],
                    strategy: Callable[[Share, Share, Share], bool]) -> tuple[bool, list[_Candidate]]:
    """KQ-S8 steps 2–4: (fits, the candidates the strategy refused)."""
    retry: list[_Candidate] = []
    targets = _Targets(p, candidates)
    for target in targets:
        if target is p.leaf or p.within_guaranteed():
            if p.take(targets.pop(target), _IN_QUEUE if target is p.leaf else _RECLAIM):
                return True, []
        elif _by_strategy(p, targets, target, strategy, retry):
            return True, []
    return False, retry


def _by_strategy(p: _Planner, targets: _Targets, target: Queue,
                 strategy: Callable[[Share, Share, Share], bool], retry: list[_Candidate]) -> bool:
    """The first candidate of ``target`` the strategy lets go goes (the others wait in ``retry``); True
    when the ask then fits."""
    left = targets.left(target)
    p_new, t_old = p.shares(target)
    if p_new.infinite and not t_old.infinite:
        retry.extend(left)
        left.clear()
        return False
    while left:
        c = targets.pop(target)
        if strategy(p_new, t_old, p.share_without(target, c)):
            return p.take(c, _FAIR)     # then the target is chosen again: the shares moved
        retry.append(c)
    return False


def _best_effort_first(p: _Planner, candidates: list[_Candidate], first: Callable[[str], bool] | None,
                       strategy: Callable[[Share, Share, Share], bool]) -> tuple[bool, list[_Candidate]]:
    """Issue 34: the candidates on best-effort terms go first, each that step 3 lets go as it stands;
    (fits, the candidates left for steps 3–5)."""
    if first is None:
        return False, candidates
    rest: list[_Candidate] = []
    for c in sorted(candidates, key=lambda c: c.order):
        why = _allowed(p, c, strategy) if first(c.alloc.allocation_key) else None
        if why is None:
            rest.append(c)
        elif p.take(c, why):
            return True, []
    return False, rest


def _allowed(p: _Planner, c: _Candidate, strategy: Callable[[Share, Share, Share], bool]) -> str | None:
    """Why step 3 would let ``c`` go now (None: it would not): its own leaf, reclamation while the
    ask's leaf stays within its guaranteed, else the strategy on a queue that still borrows."""
    if c.leaf is p.leaf:
        return _IN_QUEUE
    if p.fair.share(c.leaf).weighted == 0:
        return None         # no longer borrowing: KQ-S6 prunes it
    if p.within_guaranteed():
        return _RECLAIM
    p_new, t_old = p.shares(c.leaf)
    if p_new.infinite and not t_old.infinite:
        return None
    return _FAIR if strategy(p_new, t_old, p.share_without(c.leaf, c)) else None


def _second_strategy(p: _Planner, retry: list[_Candidate]) -> bool:
    """KQ-S8 step 5 (Kueue's rule S2-b): ``LessThanInitialShare`` once per target queue."""
    targets = _Targets(p, retry)
    for target in targets:
        p_new, t_old = p.shares(target)
        if p_new.key() < t_old.key() and p.take(targets.pop(target), _FAIR):
            return True
        targets.drop(target)
    return False


def _fill_back(p: _Planner) -> None:
    """KQ-P7: put victims back, from the second-to-last to the first, while the ask still fits."""
    i = len(p.taken) - 2
    while i >= 0:
        c, _ = p.taken[i]
        p.put_back(c)
        if p.fits():
            p.taken.pop(i)
        else:
            p.remove(c)
        i -= 1


def _candidates(p: _Planner, priority: int, created: float,
                allocations_of: Callable[[Queue], Iterable[Allocation]]) -> list[_Candidate]:
    """KQ-S5: the allocations fair-sharing preemption may take for the ask."""
    out = _own(p, priority, created, allocations_of)
    reclaim = _policy(p.leaf, PROP_RECLAIM_WITHIN_COHORT)
    if reclaim in ("lowerpriority", "any"):
        for other in _lenders(p):
            out.extend(_Candidate(a, other, False) for a in allocations_of(other)
                       if _uses(a, p.needed) and (reclaim == "any" or a.priority < priority))
    return out


def _own(p: _Planner, priority: int, created: float,
         allocations_of: Callable[[Queue], Iterable[Allocation]]) -> list[_Candidate]:
    """The candidates of the ask's own leaf (``preemption.withinclusterqueue``, KQ-P1)."""
    within = _policy(p.leaf, PROP_WITHIN_CLUSTER_QUEUE)
    if within not in ("lowerpriority", "lowerornewerequalpriority"):
        return []
    newer = within == "lowerornewerequalpriority"
    return [_Candidate(a, p.leaf, True) for a in allocations_of(p.leaf)
            if _uses(a, p.needed) and (a.priority < priority or
                                       (newer and a.priority == priority and created < a.time))]


def _lenders(p: _Planner) -> Iterator[Queue]:
    """The other leaves that borrow on a name the ask needs and may give victims (PR-Y5 ``disabled``)."""
    for other in _leaves(p.tree.root):
        if other is p.leaf or str(other.properties.get(PROP_PREEMPTION_POLICY, "")).lower() == "disabled":
            continue
        if p.fair.share(other).borrows_on(p.needed):
            yield other


def _leaves(q: Queue) -> Iterator[Queue]:
    if q.is_leaf:
        yield q
        return
    for c in q.sorted_children():
        yield from _leaves(c)


def _uses(a: Allocation, names: frozenset[str]) -> bool:
    return a.preemptible and any(a.resource._values.get(n, 0) > 0 for n in names)


def needed_names(fair: FairShares, request: dict[str, int], reasons: Iterable[Violation]) -> frozenset[str]:
    """The flavor-resources that need preemption (KQ-P2): those the refusals are short of, as Kueue
    counts them (flavored names, not the plain name of a resource counted per flavor)."""
    short: set[str] = set()
    for v in reasons:
        short.update(v.resource._values if v.resource is not None else request)
    names = {n for n in short if n in request and fair.counted(n)}
    return frozenset(names or (n for n in request if fair.counted(n)))


def fair_victims(tree: QueueTree, leaf: Queue, request: dict[str, int], priority: int, created: float,
                 reasons: Iterable[Violation],
                 allocations_of: Callable[[Queue], Iterable[Allocation]],
                 first: Callable[[str], bool] | None = None) -> Eviction | None:
    """The allocations fair-sharing preemption takes for an ask of ``request`` at ``priority``
    (created at ``created``) in ``leaf``, refused for ``reasons``, in the order taken; None when no set
    of victims lets it fit. ``first(key)``: the allocations on best-effort terms, tried first (issue
    34). Changes nothing (the tree's usage is simulated and put back)."""
    fair = tree.fair
    if fair is None or not request:
        return None
    p = _Planner(tree, fair, leaf, request, needed_names(fair, request, reasons))
    candidates = _candidates(p, priority, created, allocations_of)
    if not candidates:
        return None
    strategies = [STRATEGIES[s] for s in fair.strategies if s in STRATEGIES] or list(STRATEGIES.values())
    try:
        fits = _simulate(p, candidates, strategies, first)
    finally:
        for c, _ in p.taken:
            p.put_back(c)
    if not fits:
        return None
    why = ", ".join(f"{c.alloc.allocation_key} ({reason}, {c.leaf.path})" for c, reason in p.taken)
    reason = Violation(policy="queue", code="queue.fairsharing", path=leaf.path,
                       message=f"preempted by fair sharing for an ask of queue {leaf.path!r}: {why}")
    return Eviction(reason, tuple(c.alloc.allocation_key for c, _ in p.taken))


def _simulate(p: _Planner, candidates: list[_Candidate],
              strategies: list[Callable[[Share, Share, Share], bool]],
              first: Callable[[str], bool] | None = None) -> bool:
    """KQ-S8 with the ask's usage added for the strategies (best-effort work first, issue 34), then
    KQ-P7 without it; the victims taken stay taken (the caller puts them back)."""
    p.tree.increase_allocated(p.leaf.path, p.request)
    p.added = True
    try:
        fits, rest = _best_effort_first(p, candidates, first, strategies[0])
        retry: list[_Candidate] = []
        if not fits:
            fits, retry = _first_strategy(p, rest, strategies[0])
        if not fits and len(strategies) > 1:
            fits = _second_strategy(p, retry)
    finally:
        p.tree.decrease_allocated(p.leaf.path, p.request)
        p.added = False
    if fits:
        _fill_back(p)
    return fits
