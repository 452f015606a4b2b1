"""Timeouts of a partition's applications, and the elastic reclaim tick (seed 001, seed 002).

- placeholders unreplaced for their ``placeholder_timeout``: released; with real allocations the
  application continues; without, gang style ``soft`` → Resuming (still counted), style ``hard`` →
  Failing → Failed (its running count ends);
- Completing for ``completing_timeout`` → Completed; Starting for ``starting_timeout`` → Running;
- Completed / Failed for ``terminated_timeout`` → Expired and removed;
- reclaim (decision E5): every over-use monitor ticks (:func:`reclaim_tick`); what it names is
  released by the partition as a ``preempted`` event.

A tick costs what is due (issue 39): :class:`DueTimes` keeps the applications in a heap by the time
their next timeout may fall due, so a tick with nothing due looks at no application, whatever the
number running or waiting. It fires exactly what a scan of every application in order would
(:func:`scan_due`, its slow twin, pinned to it by tests/partition/test_due_times.py).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from quotaplane.application import (
    COMPLETED,
    COMPLETING,
    COMPLETING_TIMEOUT,
    FAILED,
    FAILED_OUT,
    GANG_HARD,
    GANG_HARD_TIMEOUT,
    GANG_SOFT_TIMEOUT,
    STARTING,
    STARTING_TIMEOUT,
    TERMINATED_TIMEOUT,
    Application,
)
from quotaplane.policies.protocol import Eviction, QuotaPolicy

__all__ = ["DueTimes", "PartitionOptions", "TimeoutActions", "apply_timeouts", "due_at", "is_due",
           "reclaim_tick", "scan_due"]


@dataclass(frozen=True, slots=True)
class PartitionOptions:
    """Timeouts (seconds) and the snapshot interval of a partition (YuniKorn's defaults)."""

    #: unreplaced gang placeholders time out (YuniKorn ``placeholderTimeoutInSeconds``)
    placeholder_timeout: float = 900.0
    #: Completing → Completed (YuniKorn ``completingTimeout``)
    completing_timeout: float = 30.0
    #: Starting without a second allocation → Running
    starting_timeout: float = 300.0
    #: Completed / Failed applications are kept this long before they expire (YuniKorn: 3 days)
    terminated_timeout: float = 3 * 86400.0
    #: take a snapshot of the partition after this many events (bounded restart time); 0: never
    snapshot_every: int = 50_000


@dataclass(frozen=True, slots=True)
class TimeoutActions:
    """What the timeouts may do to the partition."""

    release: Callable[..., None]            # release(key, t, *, terminal, keep_counted)
    leave: Callable[[Application], None]    # the application leaves the running count
    drop: Callable[[Application], None]     # the application is removed
    allocated: Callable[[str], bool]        # the allocation still exists


def _placeholders_due(app: Application, t: float) -> bool:
    return app.placeholder_since is not None and t - app.placeholder_since >= app.placeholder_timeout


def _state_due(app: Application, t: float, options: PartitionOptions) -> str | None:
    """The lifecycle timeout trigger due for ``app`` at ``t``, or None."""
    age = t - app.state_since
    if app.state == COMPLETING and age >= options.completing_timeout:
        return COMPLETING_TIMEOUT
    if app.state == STARTING and age >= options.starting_timeout:
        return STARTING_TIMEOUT
    if app.state in (COMPLETED, FAILED) and age >= options.terminated_timeout:
        return TERMINATED_TIMEOUT
    return None


def due_at(app: Application, options: PartitionOptions) -> float:
    """The earliest time any timeout of ``app`` may fall due as it stands now (``inf``: none). A lower
    bound only: the predicates above decide (``t - since >= timeout`` may hold a rounding error
    before ``since + timeout``), so it is taken a little early."""
    due = math.inf
    if app.placeholder_since is not None:
        due = app.placeholder_since + app.placeholder_timeout
    state = app.state
    if state == COMPLETING:
        due = min(due, app.state_since + options.completing_timeout)
    elif state == STARTING:
        due = min(due, app.state_since + options.starting_timeout)
    elif state in (COMPLETED, FAILED):
        due = min(due, app.state_since + options.terminated_timeout)
    return due - (abs(due) * 1e-12 + 1e-9) if due != math.inf else due


def is_due(app: Application, t: float, options: PartitionOptions) -> bool:
    """True when some timeout of ``app`` is due at ``t`` (what :func:`apply_timeouts` acts on)."""
    return _placeholders_due(app, t) or _state_due(app, t, options) is not None


class DueTimes:
    """The partition's applications by the time their next timeout falls due: a heap with lazy deletion
    (issue 39), so that a tick costs what is due, not one look at every application.

    Invariant: every application whose :func:`due_at` is finite has an entry no later than it, and
    ``_best`` names that entry. :meth:`note` is told of every change that may bring a timeout
    earlier (a state change, a first placeholder, a restored lifecycle); a change that puts it later
    needs nothing — the early entry is checked against the application when it comes up and pushed
    again at the new time. Entries of applications gone or superseded are dropped as they come up
    (and all at once when they outnumber the live ones). The applications are returned in the order
    they were added to the partition: the order of ``apps``, which :func:`apply_timeouts` follows
    (the slow twin, a scan of every application, is :func:`scan_due`)."""

    __slots__ = ("_apps", "_best", "_heap", "_next", "_options", "_rank")

    def __init__(self, apps: Mapping[str, Application], options: PartitionOptions) -> None:
        self._apps = apps
        self._options = options
        self._heap: list[tuple[float, int, str]] = []
        #: application id → the key of its live entry (the earliest pushed and not popped)
        self._best: dict[str, float] = {}
        #: application id → its rank in the order the applications were added (``apps``' order)
        self._rank: dict[str, int] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._best)

    def enter(self, app: Application) -> None:
        """``app`` was added to the partition (last in ``apps``' order)."""
        self._rank[app.application_id] = self._next
        self._next += 1
        self.note(app)

    def leave(self, application_id: str) -> None:
        """The application left the partition: its entries are dropped as they come up."""
        self._rank.pop(application_id, None)
        self._best.pop(application_id, None)

    def note(self, app: Application) -> None:
        """``app``'s lifecycle changed: push an entry when its next timeout is now earlier than its
        live entry."""
        aid = app.application_id
        due = due_at(app, self._options)
        if due < self._best.get(aid, math.inf) and aid in self._rank:
            self._best[aid] = due
            heap = self._heap
            heapq.heappush(heap, (due, self._rank[aid], aid))
            if len(heap) > 2 * len(self._best) + 64:
                self._compact()

    def _compact(self) -> None:
        rank = self._rank
        self._heap = [(due, rank[aid], aid) for aid, due in self._best.items()]
        heapq.heapify(self._heap)

    def _pop_live(self, t: float) -> Iterator[Application]:
        """Pop the live entries up to ``t``; yield their applications (each has no entry any more)."""
        heap, best, apps = self._heap, self._best, self._apps
        while heap and heap[0][0] <= t:
            due, _, aid = heapq.heappop(heap)
            if best.get(aid) != due:
                continue                    # superseded, or the application left
            del best[aid]
            app = apps.get(aid)
            if app is not None:
                yield app

    def earliest(self) -> float:
        """A time no later than the next timeout (inf: none): the heap's first entry, which may be stale
        (superseded or its application gone) and so only ever earlier than the real one."""
        return self._heap[0][0] if self._heap else math.inf

    def any_due(self, t: float) -> bool:
        """True when some application has a timeout due at ``t``; drops what turned out not due."""
        found: Application | None = None
        later: list[Application] = []
        for app in self._pop_live(t):
            if is_due(app, t, self._options):
                found = app
                break
            later.append(app)
        for app in ([found] if found is not None else []) + later:
            self.note(app)
        return found is not None

    def take(self, t: float) -> list[Application]:
        """The applications with a timeout due at ``t``, in ``apps``' order; the others met on the way
        get their entry back. Call :meth:`settle` with the result once they have been acted on."""
        due: list[Application] = []
        later: list[Application] = []
        options = self._options
        for app in self._pop_live(t):
            (due if is_due(app, t, options) else later).append(app)
        for app in later:
            self.note(app)
        rank = self._rank
        due.sort(key=lambda app: rank[app.application_id])
        return due

    def settle(self, apps: Iterable[Application]) -> None:
        """``apps`` (from :meth:`take`) were acted on: those still in the partition get their entry."""
        for app in apps:
            if app.application_id in self._rank:
                self.note(app)


def scan_due(apps: Iterable[Application], t: float, options: PartitionOptions) -> list[Application]:
    """The slow twin of :meth:`DueTimes.take`: one look at every application, in order."""
    return [app for app in apps if is_due(app, t, options)]


def _gang_timeout(app: Application, t: float, act: TimeoutActions) -> list[str]:
    aid = app.application_id
    phs = [k for k, a in app.allocations.items() if a.placeholder]
    real = app.has_real_allocations()
    hard = not real and app.gang_style == GANG_HARD
    if hard:
        app.move(GANG_HARD_TIMEOUT, t)
    for k in phs:
        act.release(k, t, terminal=True, keep_counted=not hard)
    out = [f"{aid}: {len(phs)} placeholder(s) timed out"]
    if hard:
        if app.counted:
            act.leave(app)
        app.move(FAILED_OUT, t)
        out.append(f"{aid}: Failed (gang style hard)")
    elif not real:
        app.move(GANG_SOFT_TIMEOUT, t)
        out.append(f"{aid}: Resuming (gang style soft)")
    return out


def apply_timeouts(apps: Iterable[Application], t: float, options: PartitionOptions, act: TimeoutActions
                   ) -> list[str]:
    """Apply every timeout due at ``t``; return what happened, in order."""
    out: list[str] = []
    expired: list[Application] = []
    for app in list(apps):
        if _placeholders_due(app, t):
            out.extend(_gang_timeout(app, t, act))
            continue
        trigger = _state_due(app, t, options)
        if trigger == TERMINATED_TIMEOUT:
            expired.append(app)
        elif trigger is not None:
            app.move(trigger, t)
            out.append(f"{app.application_id}: {app.state}")
    for app in expired:
        app.move(TERMINATED_TIMEOUT, t)
        act.drop(app)
        out.append(f"{app.application_id}: Expired")
    return out


def reclaim_tick(reclaiming: Iterable[QuotaPolicy], t: float) -> list[Eviction]:
    """One tick of every over-use monitor (E5) at ``t``: what each takes back now. The over-use clock
    lives in the policy, so every tick is part of the journalled ``timeouts`` event; the releases are
    journalled as ``preempted`` events of their own (decided once, PR-S3)."""
    return [found for policy in reclaiming for found in policy.revoke(t)]
