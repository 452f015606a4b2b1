"""Pending asks and the scheduling cycle (seed 004: quotas are enforced on consumption, not submission).

A request that does not fit is **queued**, not rejected: it waits as a pending *ask* that counts
towards no quota, and a later scheduling cycle allocates it through the one admission path once it
fits. The client needs no retry loop.

Order, as YuniKorn documents it:

* **queues** by fair share, hierarchically from the root: at each level the child whose usage is
  lowest relative to its ``guaranteed`` resource goes first (YuniKorn ``getShares``: per resource the
  share is ``allocated / guaranteed``, or the raw amount when nothing is guaranteed for it; shares
  sorted descending and compared lexicographically), then relative to its ``max``, then by name;
* **applications** within a leaf queue by the queue's ``application.sort.policy``: ``fifo`` (the
  default: submission order), ``fair`` (lowest usage share first, then submission order) or
  ``stateaware`` (fifo, but only one application may be starting at a time: while an application is
  Starting, Accepted/New applications wait);
* **asks** within an application by priority (highest first), then age (oldest first).

The cycle re-sorts after every allocation, like YuniKorn's one-allocation-per-attempt loop, with one
heap per parent queue so an attempt costs ``O(depth · log fanout)`` rather than a full sort. Every
pending ask is tried at most once per cycle; an ask that fits at its turn is always allocated, so no
ask that fits is skipped by later ones (no starvation of fitting asks). A cycle only consumes, never
frees, so an ask refused in a cycle still does not fit at its end: after a cycle no pending ask fits.
(A quota forest may preempt to admit, and a smaller real allocation replacing a gang placeholder
gives quota back: then another cycle is due.) Two consequences keep cycles cheap: within a cycle an
ask that needs at least what a refused ask of its application needed is refused without an attempt,
and an ask over a queue max (M-2, which never preempts) is refused without the full check; and when
nothing freed quota since the last cycle, adding an ask tries only that ask.

Allocations a cycle makes are journalled in chunks (:data:`CYCLE_FLUSH_EVERY`) and only then
announced to subscribers.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from quotaplane.application import ACTIVE_STATES
from quotaplane.policy import Decision, Violation
from quotaplane.resources import Resource

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Application
    from quotaplane.queues.tree import Queue

__all__ = ["CYCLE_FLUSH_EVERY", "SORT_POLICIES", "Ask", "AskQueue", "PendingAsksMixin", "run_cycle",
           "usage_shares"]

#: The values of the ``application.sort.policy`` queue property.
SORT_POLICIES = ("fifo", "fair", "stateaware")
SORT_POLICY_PROPERTY = "application.sort.policy"

#: A long cycle journals its allocations in transactions of this many (then tells subscribers):
#: few commits, bounded undo state, and the first allocation events leave early.
CYCLE_FLUSH_EVERY = 1000

_WAITING_STATES = ("New", "Accepted")
_STARTING = "Starting"


class Ask:
    """One pending request of an application: it waits until it fits, counting towards no quota.

    ``seq`` is the arrival order within the partition (journalled, so a restart keeps the order);
    ``reasons`` are the violations that kept it waiting at the last attempt, exactly the
    ``what_if`` answer for the same request (refreshed each cycle; ``None`` before the first).
    ``reasons_at`` is the partition's journal position the reasons were computed at (``-1``: during
    the running cycle); reading them later recomputes them when anything was journalled since.
    """

    __slots__ = ("allocation_key", "application_id", "created", "placeholder", "preemptible", "priority",
                 "reasons", "reasons_at", "resource", "seq", "task_group")

    def __init__(self, allocation_key: str, application_id: str, resource: Resource, *, priority: int = 0,
                 preemptible: bool = True, placeholder: bool = False, task_group: str | None = None,
                 seq: int = 0, created: float = 0.0) -> None:
        self.allocation_key = allocation_key
        self.application_id = application_id
        self.resource = resource
        self.priority = priority
        self.preemptible = preemptible
        self.placeholder = placeholder
        self.task_group = task_group
        self.seq = seq
        self.created = created
        self.reasons: list[Violation] | None = None
        self.reasons_at = -2

    def sort_key(self) -> tuple[int, int]:
        """Priority first (highest), then age (oldest)."""
        return (-self.priority, self.seq)

    def to_dict(self) -> dict[str, Any]:
        """The REST shape of a pending ask, with the reasons it waits."""
        out: dict[str, Any] = {
            "allocationKey": self.allocation_key,
            "applicationID": self.application_id,
            "resource": self.resource.to_dict(),
            "priority": self.priority,
            "preemptible": self.preemptible,
            "createTime": self.created,
            "reasons": [v.to_dict() for v in (self.reasons or [])],
        }
        if self.placeholder:
            out["placeholder"] = True
        if self.task_group is not None:
            out["taskGroupName"] = self.task_group
        return out

    def event(self) -> dict[str, Any]:
        """The journal event that adds this ask."""
        ev: dict[str, Any] = {"type": "ask_added", "key": self.allocation_key, "app": self.application_id,
                              "resource": self.resource.to_dict(), "priority": self.priority,
                              "preemptible": self.preemptible, "seq": self.seq, "t": self.created}
        if self.placeholder:
            ev["placeholder"] = True
        if self.task_group is not None:
            ev["task_group"] = self.task_group
        return ev

    @classmethod
    def from_event(cls, ev: Mapping[str, Any]) -> Ask:
        """Rebuild an ask from its ``ask_added`` event."""
        return cls(str(ev["key"]), str(ev["app"]), Resource(ev.get("resource") or {}),
                   priority=int(ev.get("priority", 0)), preemptible=bool(ev.get("preemptible", True)),
                   placeholder=bool(ev.get("placeholder", False)), task_group=ev.get("task_group"),
                   seq=int(ev.get("seq", 0)), created=float(ev.get("t", 0.0)))

    def __repr__(self) -> str:
        return f"Ask({self.allocation_key!r}, app={self.application_id!r}, {self.resource!r})"


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


def _queue_key(q: Queue) -> tuple[tuple[float, ...], tuple[float, ...], str]:
    """Fair-share order of sibling queues: usage relative to guaranteed, then to max, then name."""
    alloc = q._alloc
    if not alloc:
        return ((), (), q.name)
    g = q.guaranteed
    m = q.max
    return (_shares(alloc, g._values if g is not None else _NO_LIMIT),
            _shares(alloc, m._values if m is not None else _NO_LIMIT), q.name)


class AskQueue:
    """The pending asks of one partition, in arrival order, indexed by key and by application."""

    __slots__ = ("_by_app", "_by_key", "_next_seq", "cycle_freed", "dirty")

    def __init__(self) -> None:
        self._by_key: dict[str, Ask] = {}
        self._by_app: dict[str, dict[str, Ask]] = {}
        self._next_seq = 1
        #: Something freed capacity or quota since the last cycle (or an ask was added).
        self.dirty = False
        #: Set by the consumer when an attempt of the running cycle freed quota (another cycle runs).
        self.cycle_freed = False

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def get(self, key: str) -> Ask | None:
        """The pending ask with ``key``, or None."""
        return self._by_key.get(key)

    def next_seq(self) -> int:
        """The arrival number the next ask gets."""
        return self._next_seq

    def add(self, ask: Ask) -> None:
        """Queue ``ask`` (its ``seq`` is kept; later asks get a higher one)."""
        self._by_key[ask.allocation_key] = ask
        self._by_app.setdefault(ask.application_id, {})[ask.allocation_key] = ask
        if ask.seq >= self._next_seq:
            self._next_seq = ask.seq + 1
        self.dirty = True

    def remove(self, key: str) -> Ask | None:
        """Drop the ask with ``key``; return it (None when unknown)."""
        ask = self._by_key.pop(key, None)
        if ask is not None:
            app_asks = self._by_app.get(ask.application_id)
            if app_asks is not None:
                app_asks.pop(key, None)
                if not app_asks:
                    del self._by_app[ask.application_id]
        return ask

    def remove_application(self, application_id: str) -> list[Ask]:
        """Drop every ask of an application; return them in arrival order."""
        asks = self._by_app.pop(application_id, {})
        for key in asks:
            self._by_key.pop(key, None)
        return sorted(asks.values(), key=lambda a: a.seq)

    def of_application(self, application_id: str) -> list[Ask]:
        """The pending asks of one application, in scheduling order."""
        return sorted(self._by_app.get(application_id, {}).values(), key=Ask.sort_key)

    def applications(self) -> list[str]:
        """The applications with pending asks (sorted)."""
        return sorted(self._by_app)

    def all(self) -> list[Ask]:
        """Every pending ask in arrival order."""
        return sorted(self._by_key.values(), key=lambda a: a.seq)

    def pending_of(self, application_id: str) -> Resource:
        """The sum of an application's pending asks (YuniKorn's pending resource)."""
        total: dict[str, int] = {}
        for ask in self._by_app.get(application_id, {}).values():
            for k, v in ask.resource.items():
                total[k] = total.get(k, 0) + v
        return Resource._wrap(total)

    def dump(self) -> list[dict[str, Any]]:
        """Deterministic plain data (arrival order) for ``dump_state``."""
        return [a.event() for a in self.all()]

    # -- ordering -----------------------------------------------------------------------------------
    def order_applications(self, leaf: Queue, apps: Mapping[str, Application], *,
                           stateaware_filter: bool = True) -> list[Application]:
        """The applications of ``leaf`` with pending asks, in the leaf's sort policy order.

        Only applications that can take allocations (an active state) are listed. Submission order
        is the submit time, ties broken by the order the applications were placed in the leaf. For
        ``stateaware`` the list is filtered as it stands now (``stateaware_filter``).
        """
        policy = leaf.properties.get(SORT_POLICY_PROPERTY, "fifo").lower()
        candidates: list[tuple[float, int, Application]] = []
        for i, a in enumerate(leaf.applications):
            if a in self._by_app:
                app = apps.get(a)
                if app is not None and app.state in ACTIVE_STATES:
                    candidates.append((app.submit_time, i, app))
        if policy == "fair":
            fair = [(usage_shares(app.allocated, leaf.guaranteed), t, i, app) for t, i, app in candidates]
            fair.sort(key=lambda e: e[:3])
            return [e[3] for e in fair]
        candidates.sort(key=lambda e: e[:2])
        ordered = [e[2] for e in candidates]
        if policy == "stateaware" and stateaware_filter:
            # Only one application may be starting at a time: while one is Starting, waiting
            # applications stay back; otherwise only the oldest waiting one may start.
            starting = any(apps[a].state == _STARTING for a in leaf.applications if a in apps)
            out: list[Application] = []
            admitted_waiting = starting
            for app in ordered:
                if app.state in _WAITING_STATES:
                    if admitted_waiting:
                        continue
                    admitted_waiting = True
                out.append(app)
            return out
        return ordered

    def leaf_asks(self, leaf: Queue, apps: Mapping[str, Application]) -> Iterator[Ask]:
        """The pending asks of ``leaf`` in scheduling order, for one cycle.

        The consumer tries each ask before asking for the next. With the ``fair`` policy the
        applications are re-sorted after every attempt (YuniKorn sorts them at each attempt): an
        allocation raises its application's usage, so another application may come first next.
        """
        policy = leaf.properties.get(SORT_POLICY_PROPERTY, "fifo").lower()
        if policy == "stateaware":
            yield from self._stateaware_asks(leaf, apps)
            return
        ordered = self.order_applications(leaf, apps)
        if policy != "fair":
            for app in ordered:
                yield from self.of_application(app.application_id)
            return
        by_key = self._by_key
        guaranteed = leaf.guaranteed._values if leaf.guaranteed is not None else _NO_LIMIT
        # entries: (shares, position in the initial order, app index); usage tracked incrementally
        usage: list[dict[str, int]] = []
        lists: list[list[Ask]] = []
        heap: list[tuple[tuple[float, ...], int, int]] = []
        for pos, app in enumerate(ordered):
            used = dict(app.allocated._values)
            usage.append(used)
            lists.append(self.of_application(app.application_id))
            heap.append((_shares(used, guaranteed), pos, pos))
        heapq.heapify(heap)
        nexts = [0] * len(ordered)
        while heap:
            _, pos, idx = heapq.heappop(heap)
            asks = lists[idx]
            ask = asks[nexts[idx]]
            nexts[idx] += 1
            yield ask
            if ask.allocation_key not in by_key:        # allocated by the consumer: usage grew
                used = usage[idx]
                for name, amount in ask.resource._values.items():
                    used[name] = used.get(name, 0) + amount
            if nexts[idx] < len(asks):
                heapq.heappush(heap, (_shares(usage[idx], guaranteed), pos, idx))

    def _stateaware_asks(self, leaf: Queue, apps: Mapping[str, Application]) -> Iterator[Ask]:
        """``stateaware``: fifo, but a New/Accepted application may start only while no application
        of the leaf is Starting and no older waiting one is still waiting — re-checked after every
        attempt (YuniKorn filters at each attempt), so an application that becomes Running within
        the cycle lets the next one start in the same cycle."""
        ordered = self.order_applications(leaf, apps, stateaware_filter=False)
        starting = {a for a in leaf.applications if a in apps and apps[a].state == _STARTING}
        admitted: Application | None = None           # the waiting application let through
        held: list[Application] = []

        def blocked() -> bool:
            return bool(starting) or (admitted is not None and admitted.state in _WAITING_STATES)

        def asks_of(app: Application) -> Iterator[Ask]:
            for ask in self.of_application(app.application_id):
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

    def candidates(self, root: Queue, apps: Mapping[str, Application],
                   skip: Callable[[Queue, Ask], bool] | None = None) -> Iterator[tuple[Queue, Ask]]:
        """Yield ``(leaf, ask)`` in scheduling order, re-sorting queues after every yielded ask.

        The consumer tries the ask (which may change the queues' usage) before asking for the next;
        each pending ask is yielded at most once. An ask for which ``skip`` (evaluated at its turn)
        is true is passed over without being yielded — it costs no queue re-sorting — and its
        reasons are reset (explained when read).
        """
        by_app = self._by_app
        leaf_iters: dict[str, Iterator[Ask]] = {}

        def has_work(q: Queue) -> bool:
            if q.is_leaf:
                return any(a in by_app for a in q.applications)
            return any(has_work(c) for c in q.children.values())

        # One heap per parent of children that still have work: entries (key, name).
        heaps: dict[str, list[tuple[Any, str]]] = {}

        def heap_of(q: Queue) -> list[tuple[Any, str]]:
            h = heaps.get(q.path)
            if h is None:
                h = [(_queue_key(c), c.name) for c in q.children.values() if has_work(c)]
                heapq.heapify(h)
                heaps[q.path] = h
            return h

        def next_from(q: Queue) -> tuple[Queue, Ask] | None:
            if q.is_leaf:
                it = leaf_iters.get(q.path)
                if it is None:
                    it = self.leaf_asks(q, apps)
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
        by_key = self._by_key
        if not root.is_leaf and not has_work(root):
            return
        while True:
            pending_children.clear()
            found = next_from(root)
            if found is None:
                return
            yield found
            # The ask has been tried: re-insert the chosen path. Only an allocation changes usage
            # (the ask left the queue); a refusal changes nothing, so the old keys still hold.
            if found[1].allocation_key in by_key:
                for h, key, child in pending_children:
                    heapq.heappush(h, (key, child.name))
            else:
                for h, _key, child in pending_children:
                    heapq.heappush(h, (_queue_key(child), child.name))


def run_cycle(asks: AskQueue, root: Queue, apps: Mapping[str, Application],
              try_ask: Callable[[Ask], Decision],
              surely_refused: Callable[[Ask], bool] | None = None) -> list[Ask]:
    """One scheduling cycle: try every pending ask once in order; return the asks allocated.

    ``try_ask`` runs the partition's admission for the ask (allocating it when it fits) and returns
    the decision; a refused ask keeps waiting with the decision's reasons. An allocation that
    preempted others (a quota forest) freed quota: the queue stays ``dirty`` so another cycle runs
    (no ask refused earlier in this cycle is left behind). ``surely_refused`` is an optional cheap
    test (e.g. the queue maxima alone) that answers True only for asks the admission would refuse:
    those are not tried, and their reasons are explained when read.
    """
    allocated: list[Ask] = []
    refused: list[Ask] = []
    stale = 0                      # refused[:stale] were refused before the cycle's last allocation
    seen: set[str] = set()
    freed = False
    asks.cycle_freed = False
    # The last refused ask of each application: a later ask of it that asks for at least as much
    # (same priority and preemptibility) is refused too, since a cycle only consumes quota; it is
    # not tried again (its reasons are explained lazily). Preemption frees quota: see ``freed``.
    last_refused: dict[str, Ask] = {}
    # The cheap refusal test runs only in leaves where an attempt of this cycle was refused: where
    # asks fit, it would only repeat what the admission checks anyway.
    refused_in: set[str] = set()
    skip: Callable[[Queue, Ask], bool] | None = None
    if surely_refused is not None:
        test = surely_refused

        def skip(leaf: Queue, ask: Ask) -> bool:
            return leaf.path in refused_in and test(ask)

    for leaf, ask in asks.candidates(root, apps, skip):
        key = ask.allocation_key
        if key in seen or key not in asks:
            continue
        seen.add(key)
        worse = last_refused.get(ask.application_id)
        if worse is not None and not freed and not asks.cycle_freed and _dominates(ask, worse):
            ask.reasons = None
            refused.append(ask)
            continue
        decision = try_ask(ask)
        if decision.allocated:
            allocated.append(ask)
            stale = len(refused)
            if decision.preempted:
                freed = True
        else:
            ask.reasons = list(decision.reasons)
            ask.reasons_at = -1
            refused.append(ask)
            last_refused[ask.application_id] = ask
            refused_in.add(leaf.path)
    # Reasons must equal what_if at the end of the cycle: those given before a later allocation
    # changed the usage are recomputed lazily (pending() explains an ask whose reasons are None).
    for ask in refused[:stale]:
        ask.reasons = None
    asks.dirty = freed or asks.cycle_freed
    return allocated


def _dominates(ask: Ask, refused: Ask) -> bool:
    """``ask`` needs at least what ``refused`` needed, per resource, with the same priority and
    preemptibility (so every quota check that refused ``refused`` refuses ``ask`` as well)."""
    if ask.priority != refused.priority or ask.preemptible != refused.preemptible:
        return False
    if ask.placeholder != refused.placeholder or (ask.task_group is not None and not ask.placeholder):
        return False                    # a real task-group ask may replace a placeholder instead
    mine = ask.resource._values
    return all(mine.get(name, 0) >= amount for name, amount in refused.resource._values.items())


class _CycleBatch:
    """The allocations of a cycle not yet journalled: their events, undo records and asks."""

    __slots__ = ("asks", "events", "undos")

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.undos: list[tuple[Any, ...]] = []
        self.asks: list[Ask] = []

    def clear(self) -> None:
        """Forget the batch (after it was journalled or undone)."""
        self.events = []
        self.undos = []
        self.asks = []


def _placeholder_of(app: Application, task_group: str) -> str | None:
    """The oldest allocated placeholder of ``task_group`` in ``app`` (admission order), or None."""
    for key, alloc in app.allocations.items():
        if alloc.placeholder and alloc.task_group == task_group:
            return key
    return None


class PendingAsksMixin:
    """The ask side of :class:`~quotaplane.partition.Partition` (issue "Queueing").

    Kept apart from the admission path so the partition module stays about admission; it relies on
    the partition's lock, journal (``_record``), applications and ``allocate``. Asks and their
    removals are journalled events; an allocation made for an ask removes the ask in the same
    ``allocated`` event (so a crash can never leave both).
    """

    # provided by Partition
    name: str
    lock: Any
    clock: Callable[[], float]
    queues: Any
    _apps: dict[str, Application]
    _allocs: dict[str, Any]
    _replaying: bool
    _last_seq: int

    _asks: AskQueue
    _subscribers: list[Callable[[dict[str, Any]], None]]
    #: Run a cycle right after anything that frees capacity or quota (and after add_ask).
    auto_schedule: bool
    #: The error of the last automatic cycle that failed (None: none failed).
    schedule_error: Exception | None

    if TYPE_CHECKING:  # pragma: no cover - the partition's methods this mixin relies on
        def _validate_alloc(self, application_id: Any, allocation_key: Any, resource: Any, priority: Any,
                            preemptible: Any, placeholder: Any, task_group: Any
                            ) -> tuple[dict[str, Any], Resource]: ...
        def _usable(self) -> None: ...
        def _active_app(self, application_id: str) -> Application: ...
        def _record(self, events: list[dict[str, Any]], *, recoverable: bool = False) -> None: ...
        def _leave(self, app: Application) -> None: ...
        def _allocate_locked(self, ev: dict[str, Any], res: Resource
                             ) -> tuple[Decision, dict[str, Any] | None, tuple[Any, ...]]: ...
        def _undo_allocated(self, ev: Mapping[str, Any], undo: tuple[Any, ...]) -> None: ...
        def replace_placeholder(self, placeholder_key: str, allocation_key: str,
                                resource: Mapping[str, int] | Resource) -> Decision: ...
        def what_if(self, application_id: str, resource: Mapping[str, int] | Resource, *, priority: int = 0,
                    preemptible: bool = True) -> Decision: ...
        def allocate(self, application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource,
                     *, priority: int = 0, preemptible: bool = True, placeholder: bool = False,
                     task_group: str | None = None) -> Decision: ...

    def _init_asks(self, auto_schedule: bool = True) -> None:
        self._asks = AskQueue()
        self._subscribers = []
        self.auto_schedule = auto_schedule
        self.schedule_error = None

    # -- public API -----------------------------------------------------------------------------------
    def add_ask(self, application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource, *,
                priority: int = 0, preemptible: bool = True, placeholder: bool = False,
                task_group: str | None = None) -> Ask:
        """Queue a request: it counts towards no quota and is allocated by a later cycle once it fits.

        Unknown application: NotFoundError; a key already pending or allocated: ConflictError. With
        :attr:`auto_schedule` on, a cycle runs at once (so an ask that fits is allocated now).
        """
        from quotaplane.errors import ConflictError

        ev, res = self._validate_alloc(application_id, allocation_key, resource, priority, preemptible,
                                       placeholder, task_group)
        with self.lock:
            self._usable()
            self._active_app(application_id)
            if allocation_key in self._allocs or allocation_key in self._asks:
                raise ConflictError(f"allocation {allocation_key!r} already exists in partition "
                                    f"{self.name!r}")
            add = {"type": "ask_added", "key": allocation_key, "app": application_id,
                   "resource": res.to_dict(), "priority": ev["priority"], "preemptible": ev["preemptible"],
                   "seq": self._asks.next_seq(), "t": self.clock()}
            if placeholder:
                add["placeholder"] = True
            if task_group:
                add["task_group"] = task_group
            app = self._apps[application_id]
            prev_state, prev_since = app.state, app.state_since
            was_dirty = self._asks.dirty
            self._ev_ask_added(add)
            try:
                self._record([add], recoverable=True)
            except BaseException:
                self._asks.remove(allocation_key)
                self._asks.dirty = was_dirty
                app.state, app.state_since = prev_state, prev_since
                raise
            ask = self._asks.get(allocation_key)
            assert ask is not None
            if was_dirty or not self.auto_schedule or self._replaying:
                self._schedule_if_needed()
            else:
                self._asks.dirty = False
                try:
                    self._try_new(ask)
                except Exception as exc:    # the ask is journalled: it waits, the timer retries
                    self.schedule_error = exc
                    self._asks.dirty = True
            return ask

    def remove_ask(self, allocation_key: str) -> None:
        """Withdraw a pending ask. Unknown key: NotFoundError."""
        from quotaplane.errors import NotFoundError

        with self.lock:
            if allocation_key not in self._asks:
                raise NotFoundError(f"ask {allocation_key!r} not found in partition {self.name!r}")
            self._usable()
            ev = {"type": "ask_removed", "key": allocation_key, "t": self.clock()}
            ask = self._asks.get(allocation_key)
            app = self._apps.get(ask.application_id) if ask is not None else None
            counted = app is not None and app.counted
            self._ev_ask_removed(ev)
            self._record([ev])
            if counted and app is not None and not app.counted:
                self._freed()       # the application left the running count: maxapplications freed

    def pending(self, application_id: str | None = None) -> list[Ask]:
        """The pending asks (of one application, or all), each with the reasons it waits.

        Reasons are those of the last attempt when nothing was journalled since; otherwise (or for
        an ask not yet tried) they are explained now with the same checks as :meth:`what_if`.
        """
        with self.lock:
            asks = (self._asks.of_application(application_id) if application_id is not None
                    else self._asks.all())
            for ask in asks:
                self._reasons_of(ask)
            return asks

    def get_ask(self, allocation_key: str) -> Ask | None:
        """The pending ask with ``allocation_key``, or None."""
        return self._asks.get(allocation_key)

    def pending_reasons(self, allocation_key: str) -> list[Violation] | None:
        """Why the pending ask waits (None when no such ask is pending)."""
        with self.lock:
            ask = self._asks.get(allocation_key)
            if ask is None:
                return None
            return list(self._reasons_of(ask))

    def schedule(self) -> list[Any]:
        """One scheduling cycle: allocate the pending asks that fit, in fair order; return the
        allocations made (:class:`~quotaplane.application.Allocation`).

        Every allocation goes through the one admission path (all policies, nothing half applied).
        The cycle's allocations are journalled together, one transaction per
        :data:`CYCLE_FLUSH_EVERY` and one at the end (a durable store pays a commit per chunk, not
        per allocation); if a write fails, that chunk's allocations are undone, their asks wait
        again, earlier chunks stand, and the error is raised. Subscribers hear of an allocation
        only once it is journalled.
        """
        with self.lock:
            if not len(self._asks):
                self._asks.dirty = False
                return []
            self._usable()
            root = self.queues.queue("root")
            batch = _CycleBatch()
            try:
                made = run_cycle(self._asks, root, self._apps, lambda ask: self._try_ask(ask, batch),
                                 self._over_queue_max)
            except BaseException:
                self._rollback(batch)
                raise
            self._flush(batch)
            self._stamp_reasons()
            return [self._allocs[a.allocation_key] for a in made if a.allocation_key in self._allocs]

    def subscribe(self, callback: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every allocation a cycle makes for a pending ask.

        The event is ``{"type": "allocated", "partition", "applicationID", "allocationKey",
        "queueName", "resource"}``. Callbacks run under the partition lock and must be quick (the
        service hands them to its event streams). Returns a function that unsubscribes.
        """
        with self.lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self.lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)
        return unsubscribe

    @property
    def schedule_needed(self) -> bool:
        """True when asks are pending and something changed since the last cycle."""
        return self._asks.dirty and len(self._asks) > 0

    # -- internals ------------------------------------------------------------------------------------
    def _over_queue_max(self, ask: Ask) -> bool:
        """M-2 alone: the ask would put a queue of its chain over its max (or the root over the
        cluster). The queue policy is always part of admission and never preempts, so this refusal
        is certain; checking it first spares the full check and its messages."""
        app = self._apps.get(ask.application_id)
        if app is None or ask.placeholder or ask.task_group is not None:
            return False                # (a task-group ask may replace a placeholder instead)
        return bool(self.queues.check_allocation(app.queue_path, ask.resource))

    def _try_new(self, ask: Ask) -> None:
        """The automatic cycle after an ask is added, when nothing freed quota since the last cycle.

        Then no other pending ask fits (a cycle leaves none that fits, and since then quota was only
        consumed), and trying the new ask cannot change that: a full cycle would allocate the new
        ask or nothing. So only the new ask is tried — O(1) instead of O(pending) per submission —
        unless its queue's ``stateaware`` policy holds its application back.
        """
        app = self._apps[ask.application_id]
        leaf = self.queues.queue(app.queue_path)
        if leaf is None:
            return
        if leaf.properties.get(SORT_POLICY_PROPERTY, "fifo").lower() == "stateaware" and all(
                a is not app for a in self._asks.order_applications(leaf, self._apps)):
            return
        batch = _CycleBatch()
        self._asks.cycle_freed = False
        try:
            decision = self._try_ask(ask, batch)
        except BaseException:
            self._rollback(batch)
            raise
        self._flush(batch)
        if not decision.allocated and ask.allocation_key in self._asks:
            ask.reasons, ask.reasons_at = list(decision.reasons), self._last_seq
        if decision.preempted or self._asks.cycle_freed:
            self._freed()                       # quota was given back: the others get a cycle

    def _stamp_reasons(self) -> None:
        """The reasons given during the cycle hold at its end: stamp them with the journal position."""
        at = self._last_seq
        for ask in self._asks._by_key.values():
            if ask.reasons_at == -1:
                ask.reasons_at = at

    def _reasons_of(self, ask: Ask) -> list[Violation]:
        """The ask's reasons, recomputed (``what_if``) when anything was journalled since."""
        if ask.reasons is None or ask.reasons_at != self._last_seq:
            ask.reasons = self._explain(ask)
            ask.reasons_at = self._last_seq
        return ask.reasons

    def _explain(self, ask: Ask) -> list[Violation]:
        app = self._apps.get(ask.application_id)
        if app is None or app.state not in ACTIVE_STATES or self.queues.queue(app.queue_path) is None:
            return []            # the application takes no allocations now: nothing to explain
        decision = self.what_if(
            ask.application_id, ask.resource, priority=ask.priority, preemptible=ask.preemptible)
        return list(decision.reasons)

    def _try_ask(self, ask: Ask, batch: _CycleBatch) -> Decision:
        """Admit ``ask`` in memory (journalled when the cycle's batch is flushed)."""
        app = self._apps.get(ask.application_id)
        if app is None or app.state not in ACTIVE_STATES or self.queues.queue(app.queue_path) is None:
            return Decision(False, [])           # cannot take allocations now: keeps waiting
        if ask.task_group is not None and not ask.placeholder:
            placeholder = _placeholder_of(app, ask.task_group)
            if placeholder is not None:
                return self._replace_for(ask, placeholder, batch)
        ev = {"type": "allocated", "app": ask.application_id, "key": ask.allocation_key,
              "resource": ask.resource.to_dict(), "priority": ask.priority, "preemptible": ask.preemptible,
              "placeholder": ask.placeholder, "task_group": ask.task_group}
        decision, done, undo = self._allocate_locked(ev, ask.resource)
        if done is not None:
            batch.events.append(done)
            batch.undos.append(undo)
            batch.asks.append(ask)
            if len(batch.events) >= CYCLE_FLUSH_EVERY:
                self._flush(batch)
        return decision

    def _replace_for(self, ask: Ask, placeholder: str, batch: _CycleBatch) -> Decision:
        """Gang scheduling (seed 001, YUNIKORN-982): a real ask of a task group that holds an
        allocated placeholder replaces that placeholder instead of allocating anew."""
        self._flush(batch)                      # keep the journal (and the events) in cycle order
        before = self._allocs[placeholder].resource
        decision = self.replace_placeholder(placeholder, ask.allocation_key, ask.resource)
        if decision.allocated:
            if any(ask.resource.get(name, 0) < amount for name, amount in before.items()):
                self._asks.cycle_freed = True   # a smaller real allocation gave quota back
            self._asks.remove(ask.allocation_key)   # (the replaced event removes it on replay too)
            self._notify(ask, placeholder)
        return decision

    def _flush(self, batch: _CycleBatch) -> None:
        """Journal the batch's allocations in one transaction, then tell the subscribers."""
        if not batch.events:
            return
        try:
            self._record(batch.events, recoverable=True)
        except BaseException:
            self._rollback(batch)
            raise
        asks = batch.asks
        batch.clear()
        if self._subscribers:
            for ask in asks:
                self._notify(ask)

    def _rollback(self, batch: _CycleBatch) -> None:
        """Undo the batch's (unjournalled) allocations, newest first; their asks wait again."""
        for done, undo, ask in zip(reversed(batch.events), reversed(batch.undos), reversed(batch.asks),
                                   strict=True):
            self._undo_allocated(done, undo)
            if ask.allocation_key not in self._allocs and ask.allocation_key not in self._asks:
                ask.reasons = None
                self._asks.add(ask)
        batch.clear()

    def _notify(self, ask: Ask, placeholder: str | None = None) -> None:
        if not self._subscribers:
            return
        app = self._apps.get(ask.application_id)
        event: dict[str, Any] = {"type": "allocated", "partition": self.name,
                                 "applicationID": ask.application_id, "allocationKey": ask.allocation_key,
                                 "queueName": app.queue_path if app is not None else "",
                                 "resource": ask.resource.to_dict()}
        if placeholder is not None:
            event["placeholderKey"] = placeholder
        for cb in list(self._subscribers):
            try:
                cb(event)
            except Exception:  # a broken subscriber must not break scheduling
                if cb in self._subscribers:
                    self._subscribers.remove(cb)

    def _freed(self) -> None:
        """Capacity or quota may have been freed: mark for a cycle and run one when automatic."""
        self._asks.dirty = True
        self._schedule_if_needed()

    def _schedule_if_needed(self) -> None:
        """The automatic cycle after a change. It runs again (at most twice more) when a cycle freed
        quota itself (preemption, a smaller placeholder replacement). It never makes the change that
        triggered it look failed: the change is journalled already, so a failing cycle is kept in
        :attr:`schedule_error` and left due (the service's timer retries it)."""
        for _ in range(3):
            if not (self.auto_schedule and not self._replaying and self.schedule_needed):
                return
            try:
                self.schedule()
            except Exception as exc:
                self.schedule_error = exc
                self._asks.dirty = True
                return

    def _ev_ask_added(self, ev: Mapping[str, Any]) -> None:
        ask = Ask.from_event(ev)
        self._asks.add(ask)
        app = self._apps[ask.application_id]
        if app.state == "New":
            app.state = "Accepted"          # seed 001: a request moves the application to Accepted
            app.state_since = ask.created
        elif app.state == "Completing":
            # seed 001 / YuniKorn RunApplication: a new request brings a completing application
            # back to Running (it is not Completed away while the request waits); it counts again
            # as running from its next allocation
            app.state = "Running"
            app.state_since = ask.created

    def _ev_ask_removed(self, ev: Mapping[str, Any]) -> None:
        ask = self._asks.remove(ev["key"])
        if ask is None:
            return
        app = self._apps.get(ask.application_id)
        if app is not None and self._pending_done(app):
            self._app_idle(app, float(ev.get("t", 0.0)))

    def _pending_done(self, app: Application) -> bool:
        return not app.allocations and app.application_id not in self._asks._by_app

    def _app_idle(self, app: Application, t: float) -> None:
        """The last ask of an application with no allocation went away: it leaves the running count."""
        if app.counted:
            self._leave(app)
            if app.state in ("Starting", "Running", "Resuming"):
                app.state, app.state_since = "Completing", t
        elif app.state == "Accepted":
            app.state, app.state_since = "New", t
        elif app.state == "Running" and not app.allocations:
            app.state, app.state_since = "Completing", t     # back from a withdrawn request

    def _has_pending(self, application_id: str) -> bool:
        return application_id in self._asks._by_app
