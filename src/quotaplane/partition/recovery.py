"""A partition's store side: journalling a change (rule S1), its health, the rebuild from the journal
after a failure left memory ahead of it (issue 14 #2), snapshots, and replay. Mixed into
:class:`~quotaplane.partition.Partition` (its lock, state and :class:`~quotaplane.journal.log.PartitionLog`)
so the partition module keeps one concern per part; group commit is beside it
(:mod:`quotaplane.partition.commits`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import quotaplane.events as E
from quotaplane.errors import JournalReplayError, NotFoundError

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.journal.base import Journal
    from quotaplane.journal.log import PartitionLog
    from quotaplane.state.handlers import PartitionState

__all__ = ["PartitionStore"]


def _replay_problem(exc: Exception) -> str:
    """What is wrong with a journalled event, for the message that names it."""
    if isinstance(exc, KeyError) and not isinstance(exc, NotFoundError):
        return (f"it names {exc.args[0] if exc.args else '?'!r}, which does not exist at that point "
                "(the journal is damaged or was edited)")
    return str(exc) or type(exc).__name__


class _Host(Protocol):
    """What the store side uses of its partition."""

    name: str
    lock: threading.RLock
    _s: PartitionState
    _log: PartitionLog

    @property
    def restorer(self) -> Callable[[], _Host | None] | None: ...

    @property
    def stream(self) -> str: ...

    def _bind(self) -> None: ...

    def recover(self) -> bool: ...

    def apply_event(self, event: Mapping[str, Any]) -> None: ...


class PartitionStore:
    """The store side of a partition (see the module docstring)."""

    def _record(self: _Host, events: Sequence[E.Event], *, recoverable: bool = False) -> None:
        """Append ``events`` durably (S1), each followed by the notes of the changes it made
        (:meth:`PartitionState.take_notes`), in one transaction.

        A change that cannot be rolled back (``recoverable`` False) and could not be journalled left
        memory ahead of the journal: the partition is rebuilt from the journal at once, so the
        refused change is not visible (issue 14 #2); the error is raised either way.
        """
        notes = self._s.take_notes()
        try:
            self._log.record([*events, *notes] if notes else events, recoverable=recoverable)
        except BaseException:
            # a failed group commit: the caller holds the lock, so its change is the newest in memory
            # and its own undo is exact; the partition is rebuilt on its next use (it is poisoned)
            if self._log.poisoned is not None and not (recoverable and self._log.group is not None):
                self.recover()
            raise
        if notes:
            self._s.notes_recorded(notes)

    @property
    def healthy(self: _Host) -> bool:
        """False while the store refuses writes (the last append failed) or memory may be ahead of
        the journal (a recovery is due); the healthcheck reports it."""
        return self._log.poisoned is None and self._log.store_error is None

    @property
    def recovering(self: _Host) -> bool:
        """True while memory may be ahead of the journal (a failed append of a change that cannot be
        rolled back, and the store could not be read since): nothing should be served from it."""
        return self._log.poisoned is not None

    @property
    def store_error(self: _Host) -> BaseException | None:
        """The last journal append that failed (None once one succeeds), or the failure that stopped
        the partition while it waits for a recovery."""
        return self._log.poisoned or self._log.store_error

    def recover(self: _Host) -> bool:
        """Rebuild memory from the journal after a failure left it ahead (issue 14 #2); True when the
        partition is consistent with its journal (also when nothing was to be done).

        The rebuilt state replaces the old one in place: subscribers, the journal and settings such as
        :attr:`auto_schedule` stay. When the store cannot be read yet nothing changes and False is
        returned; the next change (or :meth:`recover`) tries again.
        """
        with self.lock:
            failure = self._log.poisoned
            if failure is None:
                return True
            if self.restorer is None:
                return False
            try:
                fresh = self.restorer()
            except Exception:       # the store cannot be read yet: stay stopped, try again later
                return False
            if fresh is None:
                return False
            auto, incremental = self._s.pending.auto_schedule, self._s.pending.incremental
            hold = self._s.hold_preempted
            self._s = fresh._s
            self._s.hold_preempted = hold
            self._bind()
            self._s.pending.auto_schedule = auto
            self._s.pending.incremental = incremental
            self._s.pending.asks.dirty = True       # the timer's next cycle looks at every ask
            self._log.last_seq = fresh._log.last_seq
            self._log.snapshot_seq = fresh._log.snapshot_seq
            self._log.poisoned = None
            self._log.wrote = False
            if self._log.group is not None:
                self._log.group.resume()
            return True

    def _usable(self: _Host) -> None:
        if self._log.poisoned is not None and not self.recover():
            self._log.usable(self.name)

    def _snapshot_state(self: _Host) -> Mapping[str, Any]:
        with self.lock:
            return self._s.snapshot()

    def take_snapshot(self: _Host) -> int:
        """Save a snapshot at the last journalled event; return its sequence number (0: no journal)."""
        with self.lock:
            return self._log.save_snapshot()

    @property
    def journal(self: _Host) -> Journal | None:
        """The journal this partition appends to (None: in memory)."""
        return self._log.journal

    @journal.setter
    def journal(self: _Host, journal: Journal | None) -> None:
        self._log.journal = journal

    @property
    def stream(self: _Host) -> str:
        """The partition's stream name in the journal."""
        return self._log.stream

    @property
    def holder(self: _Host) -> str | None:
        """The lease holder name this instance appends under, or None."""
        return self._log.holder

    @property
    def snapshot_error(self: _Host) -> Exception | None:
        """The last error of an automatic snapshot (the events are durable anyway)."""
        return self._log.snapshot_error

    @snapshot_error.setter
    def snapshot_error(self: _Host, error: Exception | None) -> None:
        self._log.snapshot_error = error

    @property
    def last_seq(self: _Host) -> int:
        """The sequence number of the last event this partition journalled or replayed."""
        return self._log.last_seq

    @property
    def snapshot_seq(self: _Host) -> int:
        """The sequence number of the last snapshot this partition saved or was restored from."""
        return self._log.snapshot_seq

    @property
    def needs_snapshot(self: _Host) -> bool:
        """True when this partition journalled events since its last snapshot and is healthy."""
        return self._log.needs_snapshot

    def restored_at(self: _Host, seq: int) -> None:
        """The partition was rebuilt from the snapshot at ``seq`` (the scheduler's restore)."""
        self._log.last_seq = seq
        self._log.snapshot_seq = seq

    def mark_snapshot(self: _Host, seq: int) -> None:
        """The journal's latest snapshot of this partition is at ``seq`` (after a full replay)."""
        self._log.snapshot_seq = seq

    def apply_event(self: _Host, event: Mapping[str, Any]) -> None:
        """Apply one journalled event (replay): the recorded outcome, through the live handlers."""
        try:
            typed = E.decode(event)
        except E.EventFormatError as exc:
            raise JournalReplayError(str(exc)) from None
        self._s.apply(typed)

    def replay(self: _Host, events: Iterable[tuple[int, Mapping[str, Any]]]) -> int:
        """Apply ``(seq, event)`` pairs in order without journalling them; return how many."""
        n = 0
        with self.lock:
            self._log.replaying = True
            try:
                for seq, ev in events:
                    try:
                        self.apply_event(ev)
                    except Exception as exc:   # issue 14 #6: name the event, never a bare KeyError
                        raise JournalReplayError(f"stream {self.stream!r}, event #{seq}: "
                                                 f"{_replay_problem(exc)}") from exc
                    self._log.last_seq = seq
                    self._s.notes_recorded(self._s.take_notes())   # the journal holds them already
                    n += 1
            finally:
                self._log.replaying = False
        return n
