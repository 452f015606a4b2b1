"""The scheduling order of pending asks, as YuniKorn documents it (seed 004, docs/queueing.md).

* **queues** by fair share, hierarchically from the root: at each level the child whose usage is
  lowest relative to its ``guaranteed`` resource goes first (YuniKorn ``getShares``: per resource the
  share is ``allocated / guaranteed``, or the raw amount when nothing is guaranteed for it; shares
  sorted descending and compared lexicographically), then relative to its ``max``, then by name;
* **applications** within a leaf queue by the queue's ``application.sort.policy``: ``fifo`` (the
  default: submission order), ``fair`` (lowest usage share first, then submission order) or
  ``stateaware`` (fifo, but only one application may be starting at a time: while an application is
  Starting, Accepted/New applications wait);
* **asks** within an application by priority (highest first), then age (oldest first).

With fair share with memory (``history.fairshare``, docs/history.md) a ``rank`` comes first: sibling
queues by their usage decayed with a half-life, divided by their weight, lowest first (Kueue's
Admission Fair Sharing order); applications of a leaf by their user's decayed usage, lowest first
(then the policy's own order). It changes the order only.

:func:`candidates` re-sorts after every allocation, like YuniKorn's one-allocation-per-attempt loop,
with one heap per parent queue so an attempt costs ``O(depth · log fanout)`` rather than a full sort.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from quotaplane.application import ACCEPTED, ACTIVE_STATES, NEW, STARTING
from quotaplane.resources import Resource
from quotaplane.scheduling.asks import Ask, AskQueue
from quotaplane.scheduling.nomination import head_charger

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Application
    from quotaplane.queues.queue import FairOrder, Queue

__all__ = ["SORT_POLICIES", "SORT_POLICY_PROPERTY", "Rank", "candidates", "leaf_asks", "order_applications",
           "stateaware_holds_back", "usage_shares"]

#: The values of the ``application.sort.policy`` queue property.
SORT_POLICIES = ("fifo", "fair", "stateaware")
SORT_POLICY_PROPERTY = "application.sort.policy"

_WAITING_STATES = (NEW, ACCEPTED)
_STARTING = STARTING


def usage_shares(allocated: Mapping[str, int], base: Mapping[str, int] | None) -> tuple[float, ...]:
    """YuniKorn ``getShares``: per used resource ``used / base`` (raw ``used`` when the base lacks it),
    sorted descending; compared lexicographically, lower first."""
    if type(base) is Resource:
        base = base._values
    if type(allocated) is Resource:
        allocated = allocated._values
    return _shares(allocated, base)


def _shares(allocated: Mapping[str, int], base: Mapping[str, int] | None) -> tuple[float, ...]:
    # plain dicts only: the hot path (every attempt that allocates re-keys the chosen queues)
    if base:
        get = base.get
        shares = [used / total if (total := get(name, 0)) > 0 else float(used)
                  for name, used in allocated.items() if used]
    else:
        shares = [float(used) for used in allocated.values() if used]
    if len(shares) > 1:
        shares.sort(reverse=True)
    return tuple(shares)


_NO_LIMIT: dict[str, int] = {}


class Rank(Protocol):
    """Fair share with memory: what comes before the fair-share order (lower first)."""

    def queue(self, q: Queue) -> float:
        """A queue's decayed usage over its weight."""

    def user(self, app: Application) -> float:
        """An application's user's decayed usage."""


def _queue_key(q: Queue) -> tuple[Any, ...]:
    """Fair-share order of sibling queues: usage relative to guaranteed, then to max, then name; with
    Kueue's fair sharing on, queues that do not borrow first, then the lower share (KQ-S4)."""
    if q.fair is not None:
        return (*q.fair.order_key(q), *_yunikorn_key(q))
    return _yunikorn_key(q)


def _yunikorn_key(q: Queue) -> tuple[tuple[float, ...], tuple[float, ...], str]:
    alloc = q._alloc
    if not alloc:
        return ((), (), q.name)
    g = q.guaranteed
    m = q.max
    return (_shares(alloc, g._values if g is not None else _NO_LIMIT),
            _shares(alloc, m._values if m is not None else _NO_LIMIT), q.name)



def order_applications(asks: AskQueue, leaf: Queue, apps: Mapping[str, Application], *,
                       stateaware_filter: bool = True, only: Collection[str] | None = None,
                       rank: Rank | None = None) -> list[Application]:
    """The applications of ``leaf`` with pending asks, in the leaf's sort policy order.

    Only applications that can take allocations (an active state) are listed. Submission order
    is the submit time, ties broken by the order the applications were placed in the leaf. For
    ``stateaware`` the list is filtered as it stands now (``stateaware_filter``). ``only``: just
    these applications (an incremental cycle), in the same relative order.
    """
    policy = leaf.properties.get(SORT_POLICY_PROPERTY, "fifo").lower()
    candidates = _candidates(asks, leaf, apps, only)
    if policy == "fair":
        fair = [(usage_shares(app.allocated, leaf.guaranteed), t, i, app) for t, i, app in candidates]
        if rank is not None:
            fair.sort(key=lambda e: (rank.user(e[3]), *e[:3]))
        else:
            fair.sort(key=lambda e: e[:3])
        return [e[3] for e in fair]
    if rank is not None and policy != "stateaware":
        candidates.sort(key=lambda e: (rank.user(e[2]), e[0], e[1]))
    else:
        candidates.sort(key=lambda e: e[:2])
    ordered = [e[2] for e in candidates]
    if policy == "stateaware" and stateaware_filter:
        return _one_starting(ordered, leaf, apps)
    return ordered


def _candidates(asks: AskQueue, leaf: Queue, apps: Mapping[str, Application],
                only: Collection[str] | None = None) -> list[tuple[float, int, Application]]:
    """(submit time, placement order, application) of the leaf's active applications with asks."""
    out: list[tuple[float, int, Application]] = []
    for i, a in enumerate(leaf.applications):
        # the few retried applications first: the index of every application with asks is a table
        # as large as the waiting population, a lookup there a cache miss the incremental cycle skips
        if (only is None or a in only) and asks.has_application(a):
            app = apps.get(a)
            if app is not None and app.state in ACTIVE_STATES:
                out.append((app.submit_time, i, app))
    return out


def _one_starting(ordered: list[Application], leaf: Queue, apps: Mapping[str, Application]
                  ) -> list[Application]:
    """``stateaware``: only one application may be starting at a time. While one is Starting,
    waiting applications stay back; otherwise only the oldest waiting one may start."""
    admitted_waiting = any(apps[a].state == _STARTING for a in leaf.applications if a in apps)
    out: list[Application] = []
    for app in ordered:
        if app.state in _WAITING_STATES:
            if admitted_waiting:
                continue
            admitted_waiting = True
        out.append(app)
    return out


def stateaware_holds_back(asks: AskQueue, leaf: Queue, apps: Mapping[str, Application],
                          app: Application) -> bool:
    """``app`` (with waiting asks in ``leaf``) is kept from starting by ``stateaware`` now: another
    application is Starting, or an older one waits first. O(applications of the leaf)."""
    if app.state not in _WAITING_STATES or \
            leaf.properties.get(SORT_POLICY_PROPERTY, "fifo").lower() != "stateaware":
        return False
    return app not in order_applications(asks, leaf, apps)


def leaf_asks(asks: AskQueue, leaf: Queue, apps: Mapping[str, Application],
              only: Collection[str] | None = None, rank: Rank | None = None,
              gate: Callable[[str], bool] | None = None) -> Iterator[Ask]:
    """The pending asks of ``leaf`` in scheduling order, for one cycle.

    The consumer tries each ask before asking for the next. With the ``fair`` policy the
    applications are re-sorted after every attempt (YuniKorn sorts them at each attempt): an
    allocation raises its application's usage, so another application may come first next.
    ``only``: the asks of just these applications (an incremental cycle; a ``stateaware`` leaf
    is always taken whole, since which application may start depends on all of them). ``gate``
    (application id → take it): asked at an application's turn, before its first ask; False passes
    over all its asks (an incremental cycle's :class:`~quotaplane.scheduling.gates.Gates`; never for
    a ``stateaware`` leaf).
    """
    policy = leaf.properties.get(SORT_POLICY_PROPERTY, "fifo").lower()
    if policy == "stateaware":
        yield from _stateaware_asks(asks, leaf, apps)
        return
    ordered = order_applications(asks, leaf, apps, only=only, rank=rank)
    if policy != "fair" or rank is not None:
        for app in ordered:
            if gate is None or gate(app.application_id):
                yield from asks.of_application(app.application_id)
        return
    guaranteed = leaf.guaranteed._values if leaf.guaranteed is not None else _NO_LIMIT
    # entries: (shares, position in the initial order, app index); usage tracked incrementally
    usage: list[dict[str, int]] = []
    lists: list[list[Ask]] = []
    heap: list[tuple[tuple[float, ...], int, int]] = []
    if gate is not None:
        # each application's turn is when it first comes up; asked once (a closed gate stays closed
        # within a cycle, which only consumes)
        ordered = _gated(ordered, gate)
    for pos, app in enumerate(ordered):
        used = dict(app.allocated._values)
        usage.append(used)
        lists.append(asks.of_application(app.application_id))
        heap.append((_shares(used, guaranteed), pos, pos))
    heapq.heapify(heap)
    nexts = [0] * len(ordered)
    while heap:
        _, pos, idx = heapq.heappop(heap)
        app_asks = lists[idx]
        ask = app_asks[nexts[idx]]
        nexts[idx] += 1
        yield ask
        if ask.allocation_key not in asks:        # allocated by the consumer: usage grew
            used = usage[idx]
            for name, amount in ask.resource._values.items():
                used[name] = used.get(name, 0) + amount
        if nexts[idx] < len(app_asks):
            heapq.heappush(heap, (_shares(usage[idx], guaranteed), pos, idx))

def _gated(ordered: list[Application], gate: Callable[[str], bool]) -> list[Application]:
    """``fair``: the applications whose gate is open (asked in order, before any attempt — the first
    turn of each)."""
    return [app for app in ordered if gate(app.application_id)]


def _stateaware_asks(asks: AskQueue, leaf: Queue, apps: Mapping[str, Application]) -> Iterator[Ask]:
    """``stateaware``: fifo, but a New/Accepted application may start only while no application
    of the leaf is Starting and no older waiting one is still waiting — re-checked after every
    attempt (YuniKorn filters at each attempt), so an application that becomes Running within
    the cycle lets the next one start in the same cycle."""
    ordered = order_applications(asks, leaf, apps, stateaware_filter=False)
    starting = {a for a in leaf.applications if a in apps and apps[a].state == _STARTING}
    admitted: Application | None = None           # the waiting application let through
    held: list[Application] = []

    def blocked() -> bool:
        return bool(starting) or (admitted is not None and admitted.state in _WAITING_STATES)

    def asks_of(app: Application) -> Iterator[Ask]:
        for ask in asks.of_application(app.application_id):
            yield ask
            if app.state == _STARTING:
                starting.add(app.application_id)
            else:
                starting.discard(app.application_id)

    for app in ordered:
        if app.state in _WAITING_STATES:
            if blocked():
                held.append(app)
                continue
            admitted = app
        yield from asks_of(app)
    while held and not blocked():
        admitted = held.pop(0)
        yield from asks_of(admitted)

def candidates(asks: AskQueue, root: Queue, apps: Mapping[str, Application],
               skip: Callable[[Queue, Ask], bool] | None = None,
               only: Mapping[str, Queue] | None = None, rank: Rank | None = None,
               gate: Callable[[str], bool] | None = None) -> Iterator[tuple[Queue, Ask]]:
    """Yield ``(leaf, ask)`` in scheduling order, re-sorting queues after every yielded ask.

    The consumer tries the ask (which may change the queues' usage) before asking for the next;
    each pending ask is yielded at most once. An ask for which ``skip`` (evaluated at its turn)
    is true is passed over without being yielded — it costs no queue re-sorting — and its
    reasons are reset (explained when read).

    ``only`` (application id → its leaf) restricts the cycle to those applications' asks: only
    the queues on their paths are sorted, so the cost does not depend on the other queues. The
    order among them is the full cycle's, since the full cycle's attempts of the others change
    no usage (the incremental cycle's contract, :mod:`quotaplane.scheduling.wake`).

    ``rank`` (fair share with memory) orders siblings and users first; decayed usage is the same at
    every attempt of a cycle (it changes with time, not at an allocation), so the contract holds.
    ``gate``: :func:`leaf_asks`'s, for the incremental cycle (not with Kueue's fair sharing, whose
    tournament takes whole subtrees).
    """
    if root.fair is not None and not root.is_leaf:
        # An incremental cycle retries every ask of the subtree whose order it can change (_scope): with
        # each queue's head in its share, the order among the retried asks depends on the heads of the
        # others below the queue where they meet (as Kueue requeues a cohort, docs/fair-sharing.md).
        if only is not None and not only:
            return
        top, kids = _scope(root, only)
        yield from _tournament(asks, top, apps, skip, rank, root.fair, kids)
        return
    key_of: Callable[[Queue], Any] = _queue_key if rank is None else (
        lambda c: (rank.queue(c), *_queue_key(c)))
    leaf_iters: dict[str, Iterator[Ask]] = {}
    work = _work(only)
    only_apps: Collection[str] | None = only

    def has_work(q: Queue) -> bool:
        if q.is_leaf:
            return any(asks.has_application(a) for a in q.applications)
        return any(has_work(c) for c in q.children.values())

    # One heap per parent of children that still have work: entries (key, name).
    heaps: dict[str, list[tuple[Any, str]]] = {}

    def heap_of(q: Queue) -> list[tuple[Any, str]]:
        h = heaps.get(q.path)
        if h is None:
            if work is not None:
                h = [(key_of(c), c.name) for c in work.get(q.path, {}).values()]
            else:
                h = [(key_of(c), c.name) for c in q.children.values() if has_work(c)]
            heapq.heapify(h)
            heaps[q.path] = h
        return h

    def next_from(q: Queue) -> tuple[Queue, Ask] | None:
        if q.is_leaf:
            it = leaf_iters.get(q.path)
            if it is None:
                it = leaf_asks(asks, q, apps, only_apps, rank, gate)
                leaf_iters[q.path] = it
            ask = next(it, None)
            if skip is not None:
                while ask is not None and skip(q, ask):
                    ask.reasons = None
                    ask = next(it, None)
            return None if ask is None else (q, ask)
        h = heap_of(q)
        while h:
            key, name = heapq.heappop(h)
            child = q.children.get(name)
            if child is None:
                continue
            found = next_from(child)
            if found is not None:
                pending_children.append((h, key, child))
                return found
        return None

    pending_children: list[tuple[list[tuple[Any, str]], Any, Queue]] = []
    if work is not None:
        if not only:
            return
    elif not root.is_leaf and not has_work(root):
        return
    while True:
        pending_children.clear()
        found = next_from(root)
        if found is None:
            return
        yield found
        # The ask has been tried: re-insert the chosen path. Only an allocation changes usage
        # (the ask left the queue); a refusal changes nothing, so the old keys still hold.
        if found[1].allocation_key in asks:
            for h, key, child in pending_children:
                heapq.heappush(h, (key, child.name))
        else:
            for h, _key, child in pending_children:
                heapq.heappush(h, (key_of(child), child.name))



def _work(only: Mapping[str, Queue] | None) -> dict[str, dict[str, Queue]] | None:
    """Per queue path, its children on the paths of ``only``'s leaves (None: every queue)."""
    if only is None:
        return None
    work: dict[str, dict[str, Queue]] = {}
    for leaf in only.values():
        child = leaf
        for q in leaf.chain[1:]:
            kids = work.setdefault(q.path, {})
            if child.name in kids:
                break
            kids[child.name] = child
            child = q
    return work


def _scope(root: Queue, only: Mapping[str, Queue] | None) -> tuple[Queue, frozenset[str] | None]:
    """What an incremental cycle with fair sharing on retries: the queue where the leaves of ``only``
    meet and, of its children, those holding one of them (None: every child; the whole tree when
    ``only`` is None).

    Exact, as the incremental cycle's contract needs (the same allocations in the same order as the full
    cycle): the asks it leaves out would be refused, which changes no usage, and in the tournament
    a refusal re-keys only its own path. Below the meeting queue they stay — a queue's key among its
    siblings comes from its head, which may be an ask that is not retried — but a child of the meeting
    queue without a retried leaf only interleaves its refusals there: the meeting queue's heap picks
    among the other children as it would without it. Above the meeting queue, nothing decides the order
    of the asks below it."""
    if only is None:
        return root, None
    chains = [leaf.chain[::-1] for leaf in {id(leaf): leaf for leaf in only.values()}.values()]
    depth, first, shortest = 0, chains[0], min(len(c) for c in chains)
    while depth + 1 < shortest and all(c[depth + 1] is first[depth + 1] for c in chains):
        depth += 1
    top = first[depth]
    if top.is_leaf:
        return top, None
    return top, frozenset(c[depth + 1].name for c in chains)


#: a tournament heap's entry: (key, child's name, leaf of its head, its head)
_Entry = tuple[Any, str, "Queue", Ask]


def _tournament(asks: AskQueue, root: Queue, apps: Mapping[str, Application],
                skip: Callable[[Queue, Ask], bool] | None, rank: Rank | None,
                fair: FairOrder, kids: frozenset[str] | None = None) -> Iterator[tuple[Queue, Ask]]:
    """:func:`candidates` with Kueue's fair sharing on (KQ-S4, its fair-sharing iterator).

    Every queue's head ask (the next its subtree would yield) is virtually added to it, and each
    parent picks, among its children, the one that (1) does not borrow, with its head, on the
    resources the head requests, (2) has the lower share with its head, (3) whose head has the higher
    priority, (4) whose head's application was submitted earlier — a tournament from the leaves up.
    One heap per parent; after each ask only the chosen path is re-keyed (the others' heads and usage
    did not change), each key one share of one queue: the cost per ask is the queues on its path
    times the log of their fan-out. ``root`` may be any queue of the tree (a leaf too); ``kids``: the
    only children of ``root`` taken part (None: every one).
    """
    leaf_iters: dict[str, Iterator[Ask]] = {}
    # A leaf's head, read only when needed, after the previous ask was tried: a ``stateaware`` leaf
    # decides whom it lets start from the state after that attempt, as in the YuniKorn order.
    heads: dict[str, Ask | None] = {}
    # Each leaf's head as the shares count it: under the flavors it would get when it became the head
    # (Kueue nominates a head, assigning its flavors, before comparing shares with it).
    charge = head_charger(fair)
    requests: dict[str, Mapping[str, int]] = {}
    heaps: dict[str, list[_Entry]] = {}

    def has_work(q: Queue) -> bool:
        if q.is_leaf:
            return any(asks.has_application(a) for a in q.applications)
        return any(has_work(c) for c in q.children.values())

    def head(q: Queue) -> tuple[Queue, Ask] | None:
        if not q.is_leaf:
            h = heap_of(q)
            return (h[0][2], h[0][3]) if h else None
        if q.path not in heads:
            it = leaf_iters.get(q.path)
            if it is None:
                it = leaf_asks(asks, q, apps, None, rank)
                leaf_iters[q.path] = it
            ask = heads[q.path] = next(it, None)
            if ask is not None:
                requests[q.path] = charge(q, ask)
        ask = heads[q.path]
        return None if ask is None else (q, ask)

    def entry(c: Queue) -> _Entry | None:
        found = head(c)
        if found is None:
            return None
        leaf, ask = found
        app = apps.get(ask.application_id)
        key: tuple[Any, ...] = (fair.head_key(c, requests[leaf.path]), -ask.priority,
               app.submit_time if app is not None else 0.0)
        if rank is not None:
            key = (rank.queue(c), *key)
        return key, c.name, leaf, ask

    def heap_of(q: Queue) -> list[_Entry]:
        h = heaps.get(q.path)
        if h is None:
            taken = q.children.values() if kids is None or q is not root else \
                [c for c in q.children.values() if c.name in kids]
            h = [e for e in map(entry, (c for c in taken if has_work(c))) if e is not None]
            heapq.heapify(h)
            heaps[q.path] = h
        return h

    while True:
        found = head(root)
        if found is None:
            return
        leaf, ask = found
        del heads[leaf.path]
        if skip is not None and skip(leaf, ask):
            ask.reasons = None
        else:
            yield leaf, ask
            if ask.allocation_key not in asks:
                charge.forget()         # allocated: usage changed, so may the heads' flavors
        # The ask was tried (or passed over): its leaf has a new head and perhaps a new usage — re-key
        # the chosen child at every level of the path, from the leaf up.
        child = leaf
        for q in leaf.chain[1:] if leaf is not root else ():
            h = heaps[q.path]
            heapq.heappop(h)
            e = entry(child)
            if e is not None:
                heapq.heappush(h, e)
            if q is root:
                break
            child = q
