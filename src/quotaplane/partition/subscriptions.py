"""A partition's notices (:mod:`quotaplane.notices`): subscribers told of every change once it is
journalled, typed-event listeners, and the notices after a sequence number read back from the
journal (resuming a stream, also after a restart). Mixed into :class:`~quotaplane.partition.Partition`
(its lock, notifier and journal) so the partition module keeps one concern per part."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.journal.log import PartitionLog
    from quotaplane.notices import EventListener, Notifier
    from quotaplane.state.handlers import PartitionState

__all__ = ["PartitionNotices"]


class _Host(Protocol):
    """What the notices use of their partition."""

    name: str
    lock: threading.RLock
    _s: PartitionState
    _log: PartitionLog
    _notifier: Notifier

    @property
    def stream(self) -> str: ...

    def _queue_of(self, application_id: str) -> str: ...


class PartitionNotices:
    """The notice operations of a partition (see the module docstring)."""

    def _queue_of(self: _Host, application_id: str) -> str:
        app = self._s.apps.get(application_id)
        return app.queue_path if app is not None else ""

    def subscribe(self: _Host, callback: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """Call ``callback(notice)`` for every change, once it is journalled (:mod:`quotaplane.notices`).

        A notice is ``{"type", "partition", "seq", …}``: ``allocated``, ``released``, ``preempted``,
        ``ask_added``, ``ask_removed``, ``application`` (state changes), ``application_removed``,
        ``config_applied``, ``node_added``, ``node_removed``; ``seq`` is the journal sequence number
        the change was written under. Callbacks run under the partition lock and must be quick; one
        that raises is unsubscribed. Returns a function that unsubscribes.
        """
        with self.lock:
            self._notifier.subscribe(callback)

        def unsubscribe() -> None:
            with self.lock:
                self._notifier.unsubscribe(callback)
        return unsubscribe

    def listen(self: _Host, listener: EventListener) -> Callable[[], None]:
        """Call ``listener(events, time)`` with the events of every change once it is journalled (the
        typed :mod:`quotaplane.events`; :func:`quotaplane.notices.notice_of` turns one into its notice).
        Cheaper than :meth:`subscribe` for a listener that keeps the events to look at later; it runs
        under the partition lock and must be quick. Returns a function that stops it."""
        with self.lock:
            self._notifier.listeners.append(listener)

        def stop() -> None:
            with self.lock:
                if listener in self._notifier.listeners:
                    self._notifier.listeners.remove(listener)
        return stop

    def subscriber_count(self: _Host) -> int:
        """How many subscribers are listening."""
        return len(self._notifier.subscribers)

    def notices_after(self: _Host, after: int) -> list[dict[str, Any]]:
        """The notices of the changes journalled after sequence number ``after`` (resuming a stream).

        Read back from the journal (also after a restart). ``ValueError`` when the journal no longer
        holds events from ``after`` on (compacted) or when this partition has no journal.
        """
        from quotaplane.journal.base import JournalCompactedError
        from quotaplane.notices import notices_after

        with self.lock:
            journal = self._log.journal
            if journal is None:
                raise ValueError(f"partition {self.name!r} keeps no journal: there is nothing to resume from")
            try:
                return list(notices_after(journal.read(self.stream, after=after), self.name, self._queue_of))
            except JournalCompactedError as exc:
                raise ValueError(f"the journal of partition {self.name!r} holds events only after "
                                 f"seq {exc.compacted_seq}; cannot resume after {after}") from None
