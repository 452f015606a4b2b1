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
from collections.abc import Iterable

from quotaplane.scheduling.asks import Ask, AskQueue
from quotaplane.scheduling.wake import WakeIndex

__all__ = ["Waiting"]


class Waiting:
    """The pending asks of one partition and the notes the next cycle reads (see the module docstring)."""

    __slots__ = ("asks", "due", "full_due", "index", "timed", "woken")

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

    @property
    def schedule_needed(self) -> bool:
        """True when asks are pending and something changed since the last cycle."""
        return self.asks.dirty and len(self.asks) > 0

    def wake(self, keys: Iterable[str]) -> None:
        """``keys`` were freed (a release): the applications waiting on them are retried next cycle."""
        if len(self.asks):
            self.woken.update(keys)

    def touch(self, application_id: str) -> None:
        """Retry ``application_id`` in the next cycle (its state changed, or it has untried asks)."""
        self.due[application_id] = None

    def entered(self, ask: Ask, preempt_at: float | None) -> None:
        """``ask`` now waits (added, replayed, or put back): its application is retried next cycle, and
        again at ``preempt_at``, when the ask may first preempt (PR-Y3; None: it never may)."""
        self.due[ask.application_id] = None
        if preempt_at is not None:
            heapq.heappush(self.timed, (preempt_at, ask.seq, ask.allocation_key))
