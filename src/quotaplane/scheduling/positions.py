"""Where an ask stands in the scheduling order now, without ordering the other waiting asks (issue 39).

:func:`positions` answers what :func:`~quotaplane.scheduling.order.candidates` over the current usage
would say — each ask's 1-based index in the order the next cycle tries asks in — for a ``standing``
and an ask's position, reading each queue's count of waiting asks rather than listing them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from quotaplane.application import ACTIVE_STATES
from quotaplane.scheduling.asks import Ask, AskQueue
from quotaplane.scheduling.order import SORT_POLICY_PROPERTY, Rank, _queue_key, _tournament, leaf_asks

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Application
    from quotaplane.queues.queue import FairOrder, Queue

__all__ = ["positions"]


def positions(asks: AskQueue, root: Queue, apps: Mapping[str, Application], wanted: Iterable[Ask],
              rank: Rank | None = None, quiet: Iterable[str] | None = None,
              stateaware: Iterable[Queue] | None = None) -> dict[str, int]:
    """Where each of ``wanted`` stands in the scheduling order now: its 1-based index in
    :func:`candidates` over the current usage (no ask allocated), without ordering the others.

    With nothing allocated, :func:`candidates` is a depth-first walk with the children of every queue
    in their fair-share order, so an ask's position is the asks of the siblings ordered before each
    queue of its chain, plus its index in its leaf's order (:func:`leaf_asks`). A queue's asks are
    read from its count (``Queue.asks_waiting``, kept as asks come and go), less those the cycle would
    not yield: the asks of applications that take no allocation now (``quiet``: the applications that
    may be such, :meth:`~quotaplane.scheduling.waiting.Waiting.quiet_asks`; None: every application
    is looked at) and those a ``stateaware`` leaf holds back (``stateaware``: those leaves,
    :meth:`~quotaplane.queues.tree.QueueTree.stateaware_leaves`; None: the tree is walked). The cost
    is O(depth · fanout) plus the ordering of the wanted asks' own leaves and the exact count of those
    exceptional leaves — not of the other waiting asks (issue 39). Asks :func:`candidates` would not
    yield get none. ``tests/queueing/test_positions.py`` pins it to the global order.

    With Kueue's fair sharing on, the order is the tournament (KQ-S4): a queue's place depends on its
    head, which changes with every ask it yields, so the order is not one of the queues' current shares
    and is walked as the cycle walks it, up to the last wanted ask — O(that position · depth · log of
    the fan-out), no sort (``tests/fairsharing/test_positions.py`` pins it to the cycle's order).
    """
    if root.fair is not None and not root.is_leaf:
        return _tournament_positions(asks, root, apps, wanted, rank, root.fair)
    return _depth_first_positions(asks, root, apps, wanted, rank, quiet, stateaware)


def _depth_first_positions(asks: AskQueue, root: Queue, apps: Mapping[str, Application],
                           wanted: Iterable[Ask], rank: Rank | None, quiet: Iterable[str] | None,
                           stateaware: Iterable[Queue] | None) -> dict[str, int]:
    """:func:`positions` without fair sharing: the siblings ordered before each queue of the chain
    read from their counts, the wanted asks' own leaves ordered."""
    key_of: Callable[[Queue], Any] = _queue_key if rank is None else (
        lambda c: (rank.queue(c), *_queue_key(c)))
    offsets: dict[str, int] = {}
    in_leaf: dict[str, dict[str, int]] = {}
    less: dict[str, int] | None = None

    def count(q: Queue) -> int:
        nonlocal less
        if less is None:
            less = _not_yielded(asks, root, apps, rank, quiet, stateaware)
        return q.asks_waiting - less.get(q.path, 0)

    def offset(q: Queue) -> int:
        parent = q.parent
        if parent is None or q is root:
            return 0
        n = offsets.get(q.path)
        if n is None:
            mine = (key_of(q), q.name)
            n = offset(parent) + sum(count(s) for s in parent.children.values()
                                     if s is not q and s.asks_waiting and (key_of(s), s.name) < mine)
            offsets[q.path] = n
        return n

    out: dict[str, int] = {}
    for ask in wanted:
        app = apps.get(ask.application_id)
        if app is None or ask.allocation_key not in asks:
            continue
        leaf = _leaf_of(root, app.queue_path)
        if leaf is None or ask.application_id not in leaf.applications:
            continue
        order = in_leaf.get(leaf.path)
        if order is None:
            order = {a.allocation_key: i for i, a in enumerate(leaf_asks(asks, leaf, apps, rank=rank))}
            in_leaf[leaf.path] = order
        i = order.get(ask.allocation_key)
        if i is not None:
            out[ask.allocation_key] = offset(leaf) + i + 1
    return out


def _tournament_positions(asks: AskQueue, root: Queue, apps: Mapping[str, Application],
                          wanted: Iterable[Ask], rank: Rank | None, fair: FairOrder) -> dict[str, int]:
    """:func:`positions` with fair sharing on: each of ``wanted`` at its index in the tournament over
    the current usage (nothing tried is allocated), walked until every wanted ask still pending has
    been reached."""
    keys = {a.allocation_key for a in wanted if a.allocation_key in asks}
    out: dict[str, int] = {}
    if not keys:
        return out
    for i, (_, ask) in enumerate(_tournament(asks, root, apps, None, rank, fair), 1):
        if ask.allocation_key in keys:
            out[ask.allocation_key] = i
            if len(out) == len(keys):
                break
    return out


def _not_yielded(asks: AskQueue, root: Queue, apps: Mapping[str, Application], rank: Rank | None,
                 quiet: Iterable[str] | None, stateaware: Iterable[Queue] | None) -> dict[str, int]:
    """Per queue path: the waiting asks its count holds that :func:`candidates` would not yield — those
    of applications that take no allocation now, and those a ``stateaware`` leaf holds back. Counted
    exactly in the leaves that have any (:func:`_leaf_count`), then carried up their chains."""
    leaves = _stateaware_leaves(root) if stateaware is None else \
        {q.path: q for q in stateaware if q.asks_waiting}
    leaves.update(_quiet_leaves(asks, root, apps, quiet))
    less: dict[str, int] = {}
    for leaf in leaves.values():
        n = leaf.asks_waiting - _leaf_count(asks, leaf, apps, rank)
        for q in leaf.chain if n else ():
            less[q.path] = less.get(q.path, 0) + n
            if q is root:
                break
    return less


def _quiet_leaves(asks: AskQueue, root: Queue, apps: Mapping[str, Application], quiet: Iterable[str] | None
                  ) -> dict[str, Queue]:
    """The leaves of the applications in ``quiet`` (None: of every application that takes no allocation
    and has asks waiting)."""
    if quiet is None:
        quiet = [a for a, app in apps.items() if app.state not in ACTIVE_STATES and asks.has_application(a)]
    out: dict[str, Queue] = {}
    for a in quiet:
        app = apps.get(a)
        leaf = _leaf_of(root, app.queue_path) if app is not None else None
        if leaf is not None:
            out[leaf.path] = leaf
    return out


def _stateaware_leaves(root: Queue) -> dict[str, Queue]:
    """The ``stateaware`` leaves below ``root`` with asks waiting (subtrees where none wait are skipped)."""
    out: dict[str, Queue] = {}
    stack = [root]
    while stack:
        q = stack.pop()
        if not q.asks_waiting:
            continue
        if not q.is_leaf:
            stack.extend(q.children.values())
        elif q.properties.get(SORT_POLICY_PROPERTY, "fifo").lower() == "stateaware":
            out[q.path] = q
    return out


def _leaf_of(root: Queue, path: str) -> Queue | None:
    """The leaf queue at ``path`` below ``root`` (None: not there, or not a leaf)."""
    names = path.split(".")
    if names[0] != root.name:
        return None
    q: Queue | None = root
    for name in names[1:]:
        q = q.children.get(name) if q is not None else None
    return q if q is not None and q.is_leaf else None


def _leaf_count(asks: AskQueue, leaf: Queue, apps: Mapping[str, Application], rank: Rank | None) -> int:
    """How many asks :func:`leaf_asks` yields for ``leaf``: every ask of its active applications, but
    in a ``stateaware`` leaf, which lets some wait (then counted by walking its order)."""
    if leaf.properties.get(SORT_POLICY_PROPERTY, "fifo").lower() == "stateaware":
        return sum(1 for _ in leaf_asks(asks, leaf, apps, rank=rank))
    n = 0
    for a in leaf.applications:
        k = asks.count_of(a)
        if k:
            app = apps.get(a)
            if app is not None and app.state in ACTIVE_STATES:
                n += k
    return n
