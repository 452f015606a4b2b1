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
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from quotaplane.application import ACTIVE_STATES
from quotaplane.scheduling.asks import Ask, AskQueue

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Application
from quotaplane.scheduling.wake import WakeIndex

__all__ = ["Waiting"]


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
        #: (time an ask may first preempt, its seq, its key): asks that become able to preempt (PR-Y3)
        self.timed: list[tuple[float, int, str]] = []
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
            heapq.heappush(self.timed, (preempt_at, ask.seq, ask.allocation_key))
