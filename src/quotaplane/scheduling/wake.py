"""Which waiting asks a change could have unblocked: the incremental cycle's index (issue 13).

A full cycle tries every waiting ask. Most of those attempts are certain refusals that change nothing:
an ask refused because queue ``root.a`` is at its max stays refused while nothing is released below
``root.a``. The incremental cycle therefore keeps, per application with waiting asks, the **wake keys**
of the limits that hold its asks back, and after a change retries only the applications one of whose
keys the change freed. Its contract, which the property test in ``tests/queueing/test_incremental.py``
checks step by step against the full cycle:

    every ask the incremental cycle does not retry would, at its turn in a full cycle, be refused
    without changing anything (no allocation, no preemption attempt).

Then the two cycles make the same allocations in the same order: the full cycle's other attempts change
no usage, so the queue, application and ask order among the retried ones is the same.

Keys (strings, so that the index is deterministic and cheap):

``q:<path>``
    headroom under the ``max`` of queue ``path`` (``queue.max``; ``root.capacity`` is ``q:root``). A
    release frees ``q:`` of every queue from its leaf to the root. The index keeps, per application,
    the least its asks on the key need there (:data:`Need`): a freed ``q:`` retries only the
    applications whose need may fit under the queue's max now (issue 38: in a full cohort a small
    release retried every application waiting for the cluster, those waiting with large asks too).
``u:<user>:<path>`` / ``g:<path>``
    a user's / any group's ``maxresources`` set at ``path`` (a release frees them along its chain).
``gq:<path>``
    the ``guaranteed`` of queue ``path`` (YuniKorn preemption, PR-Y2): an ask held back by queue
    maxima alone, whose preemption delay passed, may preempt only once every queue of its chain
    with a guaranteed stays at or below it with the ask added. It waits on the queues that do not
    (:func:`~quotaplane.scheduling.guarantees.guarantee_blockers`); a release frees ``gq:`` of a
    queue of its chain only when that queue is then below its guaranteed in some type — a queue at
    or above its guaranteed keeps every such ask above it, so nothing is retried. Before its delay
    passes an ask needs no ``gq:`` key: the timer (:attr:`~quotaplane.scheduling.waiting.Waiting.timed`)
    retries it when the delay passes (issue 39: a release used to retry every ask below the nearest
    guaranteed).
``r:<path>``
    a reservation in force at ``path`` (``queue.reserved``): freed when the reserving ask is allocated
    or withdrawn (:mod:`quotaplane.scheduling.reservations`).
``apps``
    a ``maxapplications`` limit (queue, user or group): freed when an application leaves the running
    count.
``*``
    retried after every change: asks another policy holds back (an elastic quota's runtime moves with
    every quota's demand; a quota forest's borrowing likewise), asks that may preempt now (their
    attempt is not a no-op), real asks of a task group (a placeholder may have arrived), applications of
    a ``stateaware`` queue (which one may start depends on the others' states) and applications that
    cannot take allocations now.

Anything the keys cannot describe — a configuration applied, a recovery — runs a full cycle instead
(:meth:`~quotaplane.scheduling.runner.PendingAsks.freed` with ``full``). A node added frees ``q:root``;
a timeout frees what its releases and running-count exits free, and retries the applications it moved
(issue 39).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from sys import intern
from typing import TYPE_CHECKING, Any, cast

from quotaplane.scheduling.guarantees import (
    QUEUE_CODES,
    below_guaranteed,
    guarantee_blockers,
    preemption_delay,
)
from quotaplane.scheduling.needs import (
    Band,
    Bands,
    HeldSummary,
    Need,
    band_fit,
    bands_of,
    fits_at,
    held_summary,
    merge_bands,
    merge_held,
    need_of,
    refusal,
    summary_of_bands,
)
from quotaplane.scheduling.order import SORT_POLICY_PROPERTY

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.policies.protocol import Violation
    from quotaplane.queues.queue import Queue
    from quotaplane.scheduling.asks import Ask

__all__ = [
    "ANY",
    "ROOT_KEY",
    "RUNNING_COUNT",
    "Band",
    "Bands",
    "HeldSummary",
    "Need",
    "WakeIndex",
    "ask_keys",
    "band_fit",
    "bands_of",
    "chain_places",
    "fits_at",
    "held_summary",
    "merge_bands",
    "merge_held",
    "need_of",
    "refusal",
    "release_keys",
    "reserved_keys",
    "summary_of_bands",
]

#: the key of asks retried after every change
ANY = "*"
#: the key of asks held back by a ``maxapplications`` limit
RUNNING_COUNT = "apps"
#: the key of the cluster's room (the root's ``q:`` key)
ROOT_KEY = "q:root"


def chain_places(leaf: Queue, user: str) -> list[tuple[str, str]]:
    """The places a request of ``user`` in ``leaf`` consumes at: (key, queue path) for every queue of
    its chain — the queue itself, ``user``'s limits there, any group's limits there."""
    out: list[tuple[str, str]] = []
    for q in leaf.chain:
        path = q.path
        out += (("q:" + path, path), (f"u:{user}:{path}", path), ("g:" + path, path))
    return out


def release_keys(user: str, leaf: Queue, *, last: bool) -> list[str]:
    """The keys a release by ``user`` in ``leaf`` frees (``last``: its application left the running
    count)."""
    keys: list[str] = []
    for q in leaf.chain:            # chain_places' keys, without their paths (a release's hot path)
        path = q.path
        keys += ("q:" + path, f"u:{user}:{path}", "g:" + path)
        # called after the release: a queue still at or above its guaranteed keeps its asks above it
        if q.guaranteed is not None and q.parent is not None and below_guaranteed(q):
            keys.append("gq:" + path)
    if last:
        keys.append(RUNNING_COUNT)
    return keys


def ask_keys(ask: Ask, user: str, leaf: Queue, *, active: bool, preemption: bool, now: float,
             over_max: Iterable[str]) -> list[str]:
    """The keys a refused ``ask`` waits on, from the reasons of its last attempt.

    ``over_max``: the queues whose max the ask exceeds, for an ask passed over without an attempt
    (its reasons are None: an ask dominated by a refused one of its application needs no keys of
    its own, since that one's keys are its application's too). ``preemption``: YuniKorn preemption
    is on; an ask held back by queue maxima alone also waits for its chain to fall below its
    guaranteed, and once it may preempt (its delay passed, its chain below guaranteed with it) it is
    retried every time, since what it could take changes with every allocation anywhere — until
    its next attempt, after which it may not preempt for 15 s (the timer wakes it then).
    """
    if _always_retried(ask, leaf, active):
        return [ANY]
    reasons = ask.reasons
    if reasons is None:
        keys = ["q:" + path for path in over_max]
        queue_only = bool(keys)
    elif not reasons:
        return [ANY]
    else:
        keys = [_key_of(v, user) for v in reasons]
        if ANY in keys:
            return [ANY]
        queue_only = all(v.code in QUEUE_CODES for v in reasons)
    if queue_only and preemption:
        return _with_guarantees(keys, ask, leaf, now)
    return keys


def _always_retried(ask: Ask, leaf: Queue, active: bool) -> bool:
    """An ask retried after every change: its application takes no allocation now, it is a real ask of
    a task group (a placeholder may have arrived), or its queue orders by ``stateaware``."""
    return not active or (ask.task_group is not None and not ask.placeholder) or \
        str(leaf.properties.get(SORT_POLICY_PROPERTY, "fifo")).lower() == "stateaware"


def _with_guarantees(keys: list[str], ask: Ask, leaf: Queue, now: float) -> list[str]:
    """An ask held back by queue maxima alone, YuniKorn preemption on (PR-Y2, PR-Y3): before its
    delay passes, and within 15 s of its last preemption attempt, it waits on its keys alone (the
    timer retries it when it may preempt again); after, it also waits for
    the queues of its chain that keep it above their guaranteed, and once none does it may preempt
    and is retried every time. O(depth · types)."""
    if now < ask.created + preemption_delay(leaf) or now < ask.preempt_after:
        return keys         # it may not preempt yet (PR-Y3): the timer retries it when it may
    if leaf.fair is not None:           # fair-sharing preemption: what it may take moves with any change
        return [ANY]
    blockers = guarantee_blockers(leaf, ask.resource)
    if blockers is None:                # no guaranteed on its chain: it never may preempt
        return keys
    if not blockers:
        return [ANY]
    keys += ["gq:" + path for path in blockers]
    return keys


def reserved_keys(held: Iterable[Violation]) -> list[str]:
    """The keys of an ask held back by the reservations ``held`` (``queue.reserved``) alone: while
    none of them ends, it stays refused (issue 38: the cycle passes it over without an attempt)."""
    return ["r:" + v.path for v in held]


def _key_of(v: Violation, user: str) -> str:
    """The wake key of one reason an ask was refused for (:data:`ANY` when no key names it)."""
    code = v.code
    if code in QUEUE_CODES:
        return "q:" + v.path
    if code.endswith(".maxapplications") and v.policy in ("queue", "user", "group"):
        return RUNNING_COUNT
    if code == "user.maxresources":
        return f"u:{user}:{v.path}"
    if code == "group.maxresources":
        return "g:" + v.path
    if code == "queue.reserved":            # until the reservation ends
        return "r:" + v.path
    return ANY              # another policy: its quota moves with changes the keys cannot name


class WakeIndex:
    """Wake key → the applications waiting on it, and back; insertion-ordered, so deterministic.

    For a ``q:`` key each application also has its :data:`Need` there (issue 38): a release frees the
    key, but an application whose asks on it all still exceed the queue's max is not retried — in a
    full cohort a release of one small allocation used to retry every application waiting for the
    cluster, their large asks included."""

    __slots__ = ("_apps", "_bounded", "_keys", "_modes", "_names", "_needs", "_parked", "_sums")

    def __init__(self) -> None:
        #: key -> application -> its Need (q:) or HeldSummary (r:) there, or None
        self._apps: dict[str, dict[str, Need | HeldSummary]] = {}
        self._keys: dict[str, tuple[str, ...]] = {}
        self._needs: dict[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]] = {}
        #: application -> the HeldSummary of all its waiting asks (missing: unknown); a ``q:`` key
        #: freed under a reservation in force that holds them all back does not wake it (issue 38)
        self._sums: dict[str, Bands] = {}
        #: the applications each of whose waiting asks waits on some ``q:`` key: refused while none
        #: of their ``q:`` needs fits (what a woken one is gated by, scheduling/gates.py)
        self._bounded: set[str] = set()
        self._names: dict[tuple[str, ...], tuple[str, ...]] = {}
        #: application -> its q: keys and needs there, while a reservation in force holds back all
        #: its asks: it waits on that reservation's r: key alone until it ends (:meth:`park`), so a
        #: release does not look at it again and again (issue 38); its keys still name the q: keys
        self._parked: dict[str, tuple[tuple[str, Need], ...]] = {}
        #: a parked application -> how (kept on its q: keys, with what need there)
        self._modes: dict[str, tuple[bool, Need]] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def keys_of(self, application_id: str) -> tuple[str, ...]:
        """The keys ``application_id`` waits on (``()``: not indexed)."""
        return self._keys.get(application_id, ())

    def need_of(self, application_id: str, key: str) -> Need | HeldSummary:
        """What ``application_id`` needs at ``key`` (None: unknown, or not waiting on it)."""
        for parked, need in self._parked.get(application_id, ()):
            if parked == key:
                return need
        return self._apps.get(key, {}).get(application_id)

    def _shared(self, need: Need) -> Need:
        if need is None:
            return None
        found = self._needs.get(need)
        if found is None:
            if len(self._needs) >= 4096:        # bounded: distinct sizes are few in practice
                self._needs.clear()
            found = self._needs[need] = need
        return found

    def summary_of(self, application_id: str) -> HeldSummary:
        """The :data:`HeldSummary` of all of ``application_id``'s waiting asks (None: unknown)."""
        return summary_of_bands(self._sums.get(application_id))     # (made when read: memory)

    def bands_of(self, application_id: str) -> Bands:
        """The :data:`Bands` of ``application_id``'s waiting asks (None: unknown)."""
        return self._sums.get(application_id)

    def _store(self, application_id: str, bands: Bands) -> None:
        self._sums[application_id] = self._shared_summary(bands)

    def _shared_summary(self, bands: Bands) -> Bands:
        if bands is None:
            return None
        out: list[Band] = []
        for priority, seq, names, need in bands:
            shared = self._names.get(names)
            if shared is None:
                if len(self._names) >= 4096:        # bounded: distinct sets of resource types are few
                    self._names.clear()
                shared = self._names[names] = names
            out.append((priority, seq, shared, cast(tuple[tuple[str, int], ...], self._shared(need))))
        return tuple(out)

    def set(self, application_id: str, keys: Iterable[str],
            needs: Mapping[str, Need | HeldSummary] | None = None, summary: Bands = None, *,
            bounded: bool = False) -> None:
        """``application_id`` now waits on exactly ``keys`` (none: it is dropped); ``needs``: what it
        needs at its ``q:`` keys (a key missing: unknown); ``summary``: the :data:`Bands` of all its
        waiting asks (None: unknown); ``bounded``: each of its asks waits on some ``q:`` key."""
        self.drop(application_id)
        # interned: the many applications waiting on one key hold one string, not a copy each
        found = tuple(dict.fromkeys(map(intern, keys)))
        if not found:
            return
        self._keys[application_id] = found
        if summary is not None:
            self._store(application_id, summary)
        if bounded:
            self._bounded.add(application_id)
        get = needs.get if needs else None
        for key in found:
            need = get(key) if get is not None else None
            if key[0] == "q":
                need = self._shared(cast(Need, need))
            self._apps.setdefault(key, {})[application_id] = need

    def add(self, application_id: str, keys: Iterable[str],
            resource: Mapping[str, int] | None = None, summary: Bands = None, *,
            known: bool = False) -> None:
        """``application_id`` also waits on ``keys`` (a new ask of it, requesting ``resource``, was
        refused; None: unknown; ``summary``: that ask's :data:`Bands`, None: unknown). ``known``: the
        application's other waiting asks, if any, are indexed — else what it needs at reservations
        and whether each of its asks waits on a ``q:`` key become unknown."""
        self._unpark(application_id)        # a new ask: the reservation may not hold it back
        old = self._keys.get(application_id, ())
        fresh = list(dict.fromkeys(map(intern, keys)))
        self._note_new(application_id, bool(old), fresh, summary, known)
        new = [k for k in fresh if k not in old]
        for key in fresh:
            if key in old and key[0] == "q":
                self._narrow(application_id, key, resource)
        if not new:
            return
        self._keys[application_id] = (*old, *new)
        need = self._shared(need_of((resource,))) if resource is not None else None
        for key in new:
            self._apps.setdefault(key, {})[application_id] = need if key[0] == "q" else None

    def _note_new(self, application_id: str, indexed: bool, keys: list[str], summary: Bands,
                  known: bool) -> None:
        """:meth:`add`'s summary and bound: merged into the application's when it is ``indexed``,
        the new ask's alone when its other asks are ``known`` (it has none), else unknown."""
        was = self._sums.pop(application_id, None)
        merged = merge_bands(was, summary) if indexed else summary if known else None
        if merged is not None:
            self._store(application_id, merged)
        if (application_id in self._bounded if indexed else known) and any(k[0] == "q" for k in keys):
            self._bounded.add(application_id)
        else:
            self._bounded.discard(application_id)

    def _narrow(self, application_id: str, key: str, resource: Mapping[str, int] | None) -> None:
        """Another ask of ``application_id`` waits on ``key`` with ``resource``: it needs at least the
        least of both there now."""
        apps = self._apps[key]
        was = cast(Need, apps[application_id])
        apps[application_id] = None if was is None or resource is None else \
            self._shared(need_of((dict(was), resource)))

    def drop(self, application_id: str) -> None:
        """Forget ``application_id`` (its asks are gone, or it is being re-indexed)."""
        self._sums.pop(application_id, None)
        self._bounded.discard(application_id)
        self._parked.pop(application_id, None)
        self._modes.pop(application_id, None)
        for key in self._keys.pop(application_id, ()):
            apps = self._apps.get(key)
            if apps is not None:
                apps.pop(application_id, None)
                if not apps:
                    del self._apps[key]

    def clear(self) -> None:
        """Forget everything (a full cycle re-indexes every application)."""
        self._apps.clear()
        self._keys.clear()
        self._sums.clear()
        self._bounded.clear()
        self._parked.clear()
        self._modes.clear()

    def woken(self, keys: Iterable[str], queue: Callable[[str], Queue | None] | None = None,
              held: Callable[[Any], Callable[[str, HeldSummary], bool] | None] | None = None,
              view: Any = None, gates: dict[str, list[tuple[Queue, Need]] | None] | None = None,
              holds: Callable[[Any], Callable[[Queue, HeldSummary], str | None] | None] | None = None
              ) -> dict[str, None]:
        """The applications waiting on any of ``keys`` or on :data:`ANY` (an ordered set).

        ``queue`` (path → queue): an application is woken by a ``q:`` key only when its need there
        may fit under the queue's max now (:func:`fits_at`); the others would be refused by it.
        ``held(view)``: a test ``(path, summary)``, made when an ``r:`` key has applications: one is
        woken by the key only when a reservation in force at that queue does not hold back every
        one of its asks on the key (one ended, another may hold them all); the others stay on the key
        (None: none is held).

        ``holds(view)``: a test ``(queue, summary)`` → the path of a reservation in force on the
        queue's chain that holds back every waiting ask of an application (its :meth:`summary_of`),
        or None (made only when a ``q:`` key has applications to wake). An application so
        held is not woken by the queue's ``q:`` key — each of its asks would be refused by that
        reservation — and waits on it as well (``r:<path>``; issue 38: the room a release frees under
        a reservation passed every small application's ``q:`` test, so each release retried them all).

        ``gates`` (filled when given): per woken application, the (queue, need) pairs of the ``q:``
        keys that woke it, or None when something else did (:data:`ANY`, another key) — what
        :class:`~quotaplane.scheduling.gates.Gates` re-tests at its turn in the cycle."""
        out: dict[str, None] = dict.fromkeys(self._apps.get(ANY, ()))
        gates = {} if gates is None else gates
        if out:
            gates.update(dict.fromkeys(out))
        get = self._apps.get
        for key in keys:
            apps = get(key)
            if apps:
                self._woken_by(key, apps, out, gates, queue, held, view, holds)
        return out

    def _woken_by(self, key: str, apps: Mapping[str, Need | HeldSummary], out: dict[str, None],
                  gates: dict[str, list[tuple[Queue, Need]] | None],
                  queue: Callable[[str], Queue | None] | None,
                  held: Callable[[Any], Callable[[str, HeldSummary], bool] | None] | None, view: Any,
                  holds: Callable[[Any], Callable[[Queue, HeldSummary], str | None] | None] | None) -> None:
        """:meth:`woken` for one freed ``key`` and the applications waiting on it."""
        if key[0] == "r":
            self._woken_unless_held(out, apps, key[2:], held(view) if held is not None else None, gates,
                                    queue, holds(view) if holds is not None else None)
            return
        q = queue(key[2:]) if queue is not None and key[0] == "q" else None
        if q is None:
            out.update(dict.fromkeys(apps))
            gates.update(dict.fromkeys(apps))
        else:
            self._woken_if_fits(out, apps, q, gates, holds(view) if holds is not None else None)

    def park(self, application_id: str, paths: Sequence[str], others: Sequence[Need] = ()) -> None:
        """A reservation in force holds back the asks of ``application_id`` but those needing at
        least one of ``others`` (none: all of them): it waits on the reservations at ``paths``
        (their ``r:`` keys, with its summary there) until one ends — off its ``q:`` keys, or there
        with the least of ``others`` as its need; the needs are kept for then (issue 38)."""
        keys = self._keys.get(application_id)
        if keys is None:
            return
        summary = self.summary_of(application_id)
        for key in ["r:" + path for path in paths]:
            if key not in keys:
                keys = self._keys[application_id] = (*keys, intern(key))
            self._apps.setdefault(key, {})[application_id] = summary
        known = [dict(n) for n in others if n is not None]
        least = self._shared(need_of(known)) if others and len(known) == len(others) else None
        mode = (bool(others), least)
        if application_id in self._parked:
            if self._modes.get(application_id) == mode:
                return
            self._unpark(application_id)        # other bands are held now: parked anew
        self._modes[application_id] = mode
        self._parked[application_id] = tuple(
            self._lift(application_id, k, bool(others), least)
            for k in keys if k[0] == "q" and application_id in self._apps.get(k, ()))

    def _lift(self, application_id: str, key: str, keep: bool, least: Need) -> tuple[str, Need]:
        """:meth:`park` at one ``q:`` key: off it, or (``keep``) there with ``least`` as its need
        (unknown: as it was); its need there before."""
        apps = self._apps[key]
        was = cast(Need, apps[application_id])
        if keep:                    # its asks the reservation does not hold need that
            if least is not None:
                apps[application_id] = least
            return key, was
        del apps[application_id]
        if not apps:
            del self._apps[key]
        return key, was

    def _unpark(self, application_id: str) -> None:
        """``application_id`` waits on its ``q:`` keys again (:meth:`park`)."""
        pairs = self._parked.pop(application_id, None)
        self._modes.pop(application_id, None)
        if pairs:
            for k, need in pairs:
                self._apps.setdefault(k, {})[application_id] = need

    def _woken_if_fits(self, out: dict[str, None], apps: Mapping[str, Need | HeldSummary], q: Queue,
                       gates: dict[str, list[tuple[Queue, Need]] | None],
                       holds: Callable[[Queue, HeldSummary], str | None] | None) -> None:
        verdict: dict[Need | HeldSummary, bool] = {}
        carried: dict[str, tuple[tuple[str, ...], list[Need] | None]] = {}
        sums = self._sums
        for app, need in apps.items():
            ok = verdict.get(need)
            if ok is None:
                ok = verdict[need] = fits_at(q, cast(Need, need))
            if not ok:
                continue
            if holds is not None:
                paths, others = refusal(q, sums.get(app), holds)
                if paths:
                    carried[app] = (paths, others)
                    continue
                if others is not None:
                    continue            # its asks the reservations do not hold exceed the queue
            out[app] = None
            _gate(gates, app, [(q, cast(Need, need))])
        # held ones wait on the reservation alone (one woken all the same by another key is re-indexed)
        for app, (paths, others) in carried.items():
            if app not in out:
                self.park(app, paths, others or ())

    def _woken_unless_held(self, out: dict[str, None], apps: Mapping[str, Need | HeldSummary], path: str,
                           held: Callable[[str, HeldSummary], bool] | None,
                           gates: dict[str, list[tuple[Queue, Need]] | None],
                           queue: Callable[[str], Queue | None] | None,
                           holds: Callable[[Queue, HeldSummary], str | None] | None) -> None:
        woken = [app for app, summary in apps.items()
                 if held is None or not held(path, cast(HeldSummary, summary))]
        for app in woken:
            # the reservation ended, but each of its asks also waits on a queue's room (issue 38: an
            # ending reservation woke every application it had held) or on another reservation: then
            # it stays parked, without a move off and back onto its q: keys
            pairs = self._pairs_of(app, queue) if app in self._bounded else None
            if pairs is not None and holds is not None:
                fits, at, others = band_fit(pairs, self._sums.get(app), holds)
                if not fits:
                    if at:
                        self.park(app, at, others)
                    else:
                        self._unpark(app)       # it waits on its queues' room alone
                    continue
            self._unpark(app)
            out[app] = None
            _gate(gates, app, pairs)

    def may_fit(self, application_id: str, pairs: list[tuple[Queue, Need]],
                 holds: Callable[[Queue, HeldSummary], str | None]) -> bool:
        """Some band of ``application_id``'s asks is held back whole by no reservation in force and
        may fit one of ``pairs``' queues (:func:`band_fit`); else it waits on the reservation holding
        one (parked; none: on its queues' room alone)."""
        fits, at, others = band_fit(pairs, self._sums.get(application_id), holds)
        if not fits and at:
            self.park(application_id, at, others)
        return fits

    def _pairs_of(self, application_id: str, queue: Callable[[str], Queue | None] | None
                  ) -> list[tuple[Queue, Need]] | None:
        """(queue, need) of every ``q:`` key ``application_id`` waits on, parked or not (None: a queue
        unknown)."""
        if queue is None:
            return None
        parked = self._parked.get(application_id)
        found = parked if parked is not None else \
            [(key, cast(Need, self._apps[key][application_id]))
             for key in self._keys.get(application_id, ()) if key[0] == "q"]
        out: list[tuple[Queue, Need]] = []
        for key, need in found:
            q = queue(key[2:])
            if q is None:
                return None
            out.append((q, need))
        return out or None


#: not in the gates yet
_UNSEEN: Any = object()


def _gate(gates: dict[str, list[tuple[Queue, Need]] | None], application_id: str,
          pairs: list[tuple[Queue, Need]] | None) -> None:
    """``application_id`` was woken by the room of ``pairs`` (None: by something else)."""
    if pairs is None:
        gates[application_id] = None
        return
    was = gates.get(application_id, _UNSEEN)
    if was is _UNSEEN:
        gates[application_id] = pairs
    elif was is not None:
        was.extend(pairs)
