"""YuniKorn preemption to restore guaranteed resources (PR-Y1…PR-Y9, the quota side only).

An ask refused by a queue max (or the cluster size) whose queue is below its guaranteed resources may
take allocations from queues above theirs. :func:`guarantee_victims` answers which, changing nothing;
the partition then checks that the ask is admitted by every policy once they are gone (PR-Y9) and
journals the victims and the allocation as one decision.

The rules, in the order they apply:

- the ask's queue chain must hold a guaranteed somewhere (PR-Y2), and after preemption every queue of
  the chain with a guaranteed must still be at or below it in the ask's resource types (law 4, PR-S1);
- victims are searched below the *fence root* (PR-Y5): the first queue up from the ask's leaf that is
  fenced, or whose max the ask would exceed, or the root;
- a leaf gives victims only if it is not the ask's leaf, its ``preemption.policy`` is not
  ``disabled``, and it is over its guaranteed in a type the ask uses (PR-Y4; no guaranteed anywhere
  on its chain counts as over);
- a victim's priority plus the priority offsets below the fence root is at most the ask's priority
  plus the offsets of the ask's path up to the fence root (PR-Y6, ``priority.policy: fence`` resets);
- only preemptible allocations (PR-Y8), sharing a resource type with the ask, newest first (PR-Y7);
- a victim is taken only if no queue of its chain with a guaranteed goes below it (law 2), and only
  while it reduces what the ask still misses at some queue of the ask's chain (PR-Y7 "put back").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from quotaplane.policies.protocol import Eviction, Violation
from quotaplane.queues.properties import (
    PROP_PREEMPTION_DELAY,
    PROP_PREEMPTION_POLICY,
    PROP_PRIORITY_OFFSET,
    PROP_PRIORITY_POLICY,
    parse_duration,
    parsed_once,
)
from quotaplane.resources import Resource

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Allocation
    from quotaplane.queues.limits import Limits
    from quotaplane.queues.queue import Queue
    from quotaplane.scheduling.asks import Ask

__all__ = [
    "PREEMPTION_DELAY_DEFAULT",
    "PREEMPT_ATTEMPT_EVERY",
    "QUEUE_CODES",
    "below_guaranteed",
    "below_guaranteed_with",
    "guarantee_blockers",
    "guarantee_victims",
    "may_preempt_for_guarantee",
    "preemption_delay",
]

#: refusals that YuniKorn preemption may lift (PR-Y2: queue headroom, node capacity; and a queue's
#: headroom that another queue's lending limit keeps: victims above their guaranteed free it too)
QUEUE_CODES = frozenset({"queue.max", "root.capacity", "queue.lendinglimit"})

#: ``preemption.delay`` when unset or invalid (PR-Y3: YuniKorn's 30 s)
PREEMPTION_DELAY_DEFAULT = 30.0
#: an ask tries preemption at most once per this many seconds (PR-Y3 ``preemptAttemptFrequency``)
PREEMPT_ATTEMPT_EVERY = 15.0

Dims = dict[str, int]


_DELAYS: dict[int, tuple[Mapping[str, str], float]] = {}


def preemption_delay(leaf: Queue) -> float:
    """The leaf's ``preemption.delay`` in seconds (PR-Y3: default 30 s; not positive or invalid: 30 s)."""
    return parsed_once(leaf.properties, _DELAYS, _read_delay)


def _read_delay(props: Mapping[str, str]) -> float:
    delay = parse_duration(props.get(PROP_PREEMPTION_DELAY), PREEMPTION_DELAY_DEFAULT)
    return delay if delay > 0 else PREEMPTION_DELAY_DEFAULT


def _policy(q: Queue, prop: str) -> str:
    return str(q.properties.get(prop, "default")).strip().lower()


def _offset(q: Queue) -> int:
    try:
        return int(str(q.properties.get(PROP_PRIORITY_OFFSET, "0")).strip())
    except ValueError:
        return 0


def _used(q: Queue, taken: Mapping[str, Dims]) -> Dims:
    """The queue's allocated minus what the chosen victims in its subtree hold."""
    out = dict(q._alloc)
    for name, amount in taken.get(q.path, {}).items():
        out[name] = out.get(name, 0) - amount
    return out


def _over_guaranteed(leaf: Queue, names: Iterable[str], taken: Mapping[str, Dims]) -> bool:
    """PR-Y4: some queue of the leaf's chain is above its guaranteed in a type the ask uses (no
    guaranteed anywhere on the chain counts as over)."""
    found = False
    for q in leaf.chain:
        g = q.guaranteed
        if g is None or q.is_root:
            continue
        found = True
        used = _used(q, taken)
        if any(name in g._values and used.get(name, 0) > g._values[name] for name in names):
            return True
    return not found


def _keeps_guaranteed(leaf: Queue, res: Mapping[str, int], taken: Mapping[str, Dims]) -> bool:
    """Law 2: taking ``res`` from ``leaf`` leaves every queue of its chain at or above its guaranteed."""
    for q in leaf.chain:
        g = q.guaranteed
        if g is None or q.is_root:
            continue
        used = _used(q, taken)
        for name, amount in res.items():
            if amount > 0 and name in g._values and used.get(name, 0) - amount < g._values[name]:
                return False
    return True


def _fence_root(leaf: Queue, request: Mapping[str, int]) -> Queue:
    """PR-Y5: the first queue up from the leaf that is fenced, would exceed its max with the ask, or the
    root."""
    for q in leaf.chain:
        if q.is_root or _policy(q, PROP_PREEMPTION_POLICY) == "fence":
            return q
        mx = q.max
        if mx is not None and any(q._alloc.get(name, 0) + amount > mx._values[name]
                                  for name, amount in request.items() if name in mx._values):
            return q
    return leaf.chain[-1]


def _ask_priority(leaf: Queue, fence: Queue, priority: int) -> int:
    """PR-Y6 up: the ask's priority with the offsets of its path, up to and including the fence root."""
    p = priority
    for q in leaf.chain:
        if _policy(q, PROP_PRIORITY_POLICY) == "fence":
            p = _offset(q)
        else:
            p += _offset(q)
        if q is fence:
            break
    return p


def _leaves(fence: Queue, p: float, ask_leaf: Queue) -> list[tuple[Queue, float]]:
    """PR-Y6 down: every victim leaf below the fence root with the highest priority a task of it may
    have to be a victim (``inf``: any)."""
    out: list[tuple[Queue, float]] = []
    stack: list[tuple[Queue, float]] = [(c, p) for c in reversed(fence.sorted_children())]
    while stack:
        q, limit = stack.pop()
        if _policy(q, PROP_PRIORITY_POLICY) == "fence":
            if _offset(q) > limit:
                continue
            limit = math.inf
        elif not math.isinf(limit):
            limit -= _offset(q)
        if q.is_leaf:
            if q is not ask_leaf and _policy(q, PROP_PREEMPTION_POLICY) != "disabled":
                out.append((q, limit))
        else:
            stack.extend((c, limit) for c in reversed(q.sorted_children()))
    return out


def _held_off(limits: Limits | None, leaf: Queue, q: Queue, name: str) -> int:
    """What other queues' lending limits keep of ``name`` under ``q``'s max, as seen from ``leaf``."""
    return 0 if limits is None or q is leaf else limits.held_off(leaf, q, name)


def _short(leaf: Queue, request: Mapping[str, int], limits: Limits | None = None) -> dict[str, Dims]:
    """What the ask misses at each queue of its chain (by path): ``allocated + ask − max`` > 0, with what
    other queues' lending limits keep under that max counted as used (docs/config.md)."""
    need: dict[str, Dims] = {}
    kept = limits if limits is not None and limits.lending else None
    for q in leaf.chain:
        mx = q.max
        if mx is None:
            continue
        miss = {name: q._alloc.get(name, 0) + amount - mx._values[name] + _held_off(kept, leaf, q, name)
                for name, amount in request.items() if name in mx._values}
        miss = {k: v for k, v in miss.items() if v > 0}
        if miss:
            need[q.path] = miss
    return need


def _under_guaranteed_after(leaf: Queue, request: Mapping[str, int], taken: Mapping[str, Dims]) -> bool:
    """Law 4 / PR-S1: with the ask and without the victims, every queue of the ask's chain that has a
    guaranteed stays at or below it in the ask's types; and some queue of the chain has one (PR-Y2)."""
    found = False
    for q in leaf.chain:
        g = q.guaranteed
        if g is None or q.is_root:
            continue
        found = True
        used = _used(q, taken)
        for name, amount in request.items():
            if amount > 0 and name in g._values and used.get(name, 0) + amount > g._values[name]:
                return False
    return found


def below_guaranteed_with(leaf: Queue, request: Resource) -> bool:
    """PR-Y2 / law 4 before any search: with ``request`` added, every queue of the leaf's chain that has
    a guaranteed stays at or below it in the request's types, and some queue has one. When false,
    :func:`guarantee_victims` finds nothing whatever the other queues hold."""
    req = {k: v for k, v in request._values.items() if v > 0}
    return bool(req) and _under_guaranteed_after(leaf, req, {})


def guarantee_blockers(leaf: Queue, request: Resource) -> list[str] | None:
    """The queues of the leaf's chain that keep :func:`below_guaranteed_with` false now: those with a
    guaranteed that ``request`` would put above it in one of its types. ``[]``: none (the ask is below
    guaranteed with itself); None: no queue of the chain has a guaranteed (PR-Y2: it never may
    preempt for one), or the request is empty. O(depth · types)."""
    req = {k: v for k, v in request._values.items() if v > 0}
    if not req:
        return None
    found = False
    out: list[str] = []
    for q in leaf.chain:
        g = q.guaranteed
        if g is None or q.is_root:
            continue
        found = True
        used = q._alloc
        gv = g._values
        if any(name in gv and used.get(name, 0) + amount > gv[name] for name, amount in req.items()):
            out.append(q.path)
    return out if found else None


def below_guaranteed(q: Queue) -> bool:
    """``q`` uses less than its guaranteed in some type: only then may an ask that ``q`` kept above its
    guaranteed (:func:`guarantee_blockers`) fit below it (a release wakes such asks only then)."""
    g = q.guaranteed
    if g is None:
        return False
    used = q._alloc
    return any(used.get(name, 0) < amount for name, amount in g._values.items())


def guarantee_victims(leaf: Queue, request: Resource, priority: int,
                      allocations_of: Callable[[Queue], Iterable[Allocation]],
                      limits: Limits | None = None,
                      first: Callable[[str], bool] | None = None) -> Eviction | None:
    """The allocations an ask of ``request`` at ``priority`` in ``leaf`` would preempt to restore its
    queue's guaranteed resources (PR-Y), or None. Changes nothing.

    ``allocations_of(leaf)`` lists a leaf's allocations. The caller has checked the switches and the
    delay (PR-Y1, PR-Y3) and that the ask was refused only by queue maxima (PR-Y2). ``first(key)``:
    the allocations running on best-effort terms (issue 34), tried before the others, each still
    under every rule above.
    """
    req = {k: v for k, v in request._values.items() if v > 0}
    if not req or not _under_guaranteed_after(leaf, req, {}):
        return None
    need = _short(leaf, req, limits)
    if not need:
        return None
    fence = _fence_root(leaf, req)
    candidates: list[tuple[bool, float, str, Allocation, Queue]] = []
    for victim_leaf, limit in _leaves(fence, _ask_priority(leaf, fence, priority), leaf):
        if not _over_guaranteed(victim_leaf, req, {}):
            continue
        for alloc in allocations_of(victim_leaf):
            if (alloc.preemptible and alloc.priority <= limit
                    and any(alloc.resource._values.get(name, 0) > 0 for name in req)):
                key = alloc.allocation_key
                candidates.append((first is None or not first(key), -alloc.time, key, alloc, victim_leaf))
    # issue 34: best-effort work first; then PR-Y7: newest first (then key: replayable)
    candidates.sort(key=lambda c: (c[0], c[1], c[2]))
    taken: dict[str, Dims] = {}
    chosen: list[str] = []
    for _, _, key, alloc, victim_leaf in candidates:
        res = alloc.resource._values
        helps = [path for path, miss in need.items()
                 if any(miss.get(name, 0) > 0 and res.get(name, 0) > 0 for name in miss)
                 and any(q.path == path for q in victim_leaf.chain)]
        if not helps or not _over_guaranteed(victim_leaf, req, taken) or \
                not _keeps_guaranteed(victim_leaf, res, taken):
            continue
        trial = dict(taken)
        for q in victim_leaf.chain:
            dims = dict(trial.get(q.path, {}))
            for name, amount in res.items():
                dims[name] = dims.get(name, 0) + amount
            trial[q.path] = dims
        if not _under_guaranteed_after(leaf, req, trial):
            continue
        taken = trial
        chosen.append(key)
        for path in helps:
            miss = need[path]
            for name in list(miss):
                miss[name] -= res.get(name, 0)
                if miss[name] <= 0:
                    del miss[name]
            if not miss:
                del need[path]
        if not need:
            reason = Violation(policy="queue", code="queue.guaranteed", path=leaf.path,
                               message=f"preempted to restore the guaranteed resources of queue "
                                       f"{leaf.path!r} (below its guaranteed, fence root {fence.path!r})")
            return Eviction(reason, tuple(chosen))
    return None


def may_preempt_for_guarantee(ask: Ask, leaf: Queue, now: float, enabled: bool) -> bool:
    """PR-Y1/PR-Y3: preemption is on, the ask has waited its leaf's ``preemption.delay`` and has not
    tried within the last 15 s."""
    return enabled and now >= ask.created + preemption_delay(leaf) and now >= ask.preempt_after
