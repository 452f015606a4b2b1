"""The waiting work of a partition as data: the pending asks and what the next cycle must retry.

:class:`Waiting` belongs to the partition's state (:mod:`quotaplane.state`): the state's handlers put
asks in and take them out, and note which wake keys a change freed (:meth:`Waiting.wake`), which
applications must be retried whatever their keys (:meth:`Waiting.touch`), and when an ask may first
preempt (:meth:`Waiting.entered`). The scheduler (:class:`~quotaplane.scheduling.runner.PendingAsks`)
reads and consumes these notes in its cycles; it owns no state of its own that a recovery would have to
rebuild. The wake keys and the contract of the incremental cycle are in
:mod:`quotaplane.scheduling.wake`.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from quotaplane.application import ACTIVE_STATES
from quotaplane.scheduling.asks import Ask, AskQueue

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Application
from quotaplane.scheduling.wake import WakeIndex

__all__ = ["AppTimers", "Waiting"]


class AppTimers:
    """When waiting applications must be retried because an ask of theirs may preempt from then on
    (PR-Y3: first after the queue's preemption delay, again 15 s after each try).

    A heap of (time, application): one entry per application and time, however many of its asks fall
    due at that time — what a timer does is retry the application (:meth:`due`), so one entry per ask
    held the same retry many times over (issue 38: ~75 bytes per pending ask, a tuple and its heap
    slot; the asks of a job submitted together share their time). An entry whose asks are gone retries
    the application once more if it still waits, which a cycle allows (retrying more applications
    than were woken never changes what it allocates, :mod:`quotaplane.scheduling.wake`).
    """

    __slots__ = ("_heap", "_last")

    def __init__(self) -> None:
        self._heap: list[tuple[float, str]] = []
        #: application → the time of its latest entry while that entry is in the heap
        self._last: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[tuple[float, str]]:
        """The entries, earliest first."""
        return iter(sorted(self._heap))

    def add(self, at: float, application_id: str) -> float:
        """Retry ``application_id`` at ``at``; the time as filed (the one float its asks due then share)."""
        last = self._last.get(application_id)
        if last == at:
            return last
        self._last[application_id] = at
        heapq.heappush(self._heap, (at, application_id))
        return at

    def due_by(self, now: float) -> bool:
        """Some application's time came (``<= now``)."""
        heap = self._heap
        return bool(heap) and heap[0][0] <= now

    def due(self, now: float) -> Iterator[str]:
        """The applications whose time came (``<= now``), their entries consumed, earliest first."""
        heap, last = self._heap, self._last
        while heap and heap[0][0] <= now:
            at, app = heapq.heappop(heap)
            if last.get(app) == at:
                del last[app]
            yield app


class Waiting:
    """The pending asks of one partition and the notes the next cycle reads (see the module docstring)."""

    __slots__ = ("asks", "due", "full_due", "index", "quiet", "timed", "woken")

    def __init__(self) -> None:
        self.asks = AskQueue()
        #: wake key → applications waiting on it (:mod:`quotaplane.scheduling.wake`)
        self.index = WakeIndex()
        #: keys freed since the last cycle
        self.woken: set[str] = set()
        #: applications to retry in the next cycle whatever their keys (new asks, state changes)
        self.due: dict[str, None] = {}
        #: the next automatic cycle must be a full one (a config, a recovery)
        self.full_due = False
        #: when applications get an ask that becomes able to preempt (PR-Y3)
        self.timed = AppTimers()
        #: applications seen entering a state that takes no allocation (a superset of those that still
        #: have asks waiting: a gang's hard timeout fails one with its asks): the cycle yields none of
        #: their asks, so a position must not count them (:meth:`quiet_asks`)
        self.quiet: dict[str, None] = {}

    @property
    def schedule_needed(self) -> bool:
        """True when asks are pending and something changed since the last cycle."""
        return self.asks.dirty and len(self.asks) > 0

    def wake(self, keys: Iterable[str]) -> None:
        """``keys`` were freed (a release): the applications waiting on them are retried next cycle."""
        if len(self.asks):
            self.woken.update(keys)

    def moved(self, app: Application, *, restored: bool = False) -> None:
        """``app``'s state changed: note it when it now takes no allocation and still has asks (a
        completed one has none and gets none: not noted, so the notes do not grow with the applications
        that complete). ``restored``: its state was set by a snapshot, maybe before its asks were put
        back — noted whatever it has."""
        if app.state not in ACTIVE_STATES and (restored or self.asks.has_application(app.application_id)):
            self.quiet[app.application_id] = None

    def left(self, application_id: str) -> None:
        """The application left the partition."""
        self.quiet.pop(application_id, None)

    def quiet_asks(self, apps: Mapping[str, Application]) -> list[str]:
        """The applications of ``apps`` that take no allocation now and still have asks waiting.

        O(the applications noted since the last call): the others are forgotten here — gone, active
        again, or without asks (an application that takes no allocation gets none: a new ask needs an
        active one, and a restored one is noted again by its restore)."""
        out: list[str] = []
        quiet = self.quiet
        for aid in list(quiet):
            app = apps.get(aid)
            if app is None or app.state in ACTIVE_STATES or not self.asks.has_application(aid):
                del quiet[aid]
            else:
                out.append(aid)
        return out

    def touch(self, application_id: str) -> None:
        """Retry ``application_id`` in the next cycle (its state changed, or it has untried asks)."""
        self.due[application_id] = None

    def entered(self, ask: Ask, preempt_at: float | None) -> None:
        """``ask`` now waits (added, replayed, or put back): its application is retried next cycle, and
        again at ``preempt_at``, when the ask may first preempt (PR-Y3; None: it never may)."""
        self.due[ask.application_id] = None
        if preempt_at is not None:
            self.timed.add(preempt_at, ask.application_id)
