"""A partition's stream in the journal: durable appends (rule S1), its position, and its snapshots.

Every change is applied in memory and then appended here before the caller is answered. An append
that fails for a change the caller can roll back (``recoverable``) is just an error; one that cannot
be rolled back leaves memory ahead of the journal, so the log refuses every further change
(:meth:`PartitionLog.usable`) until the partition is rebuilt from the journal — at once when the
store can still be read, else on a later call (issue 14 #2). ``store_error`` keeps the last failed
append until one succeeds: the healthcheck reports it.

An append whose outcome is unknown (:class:`~quotaplane.journal.base.OutcomeUnknownError`: the
connection broke after it was sent) is read back where its events would be — the journal makes what
it reads then final — and ends as it did: durable, or certainly not written (issue 32 #3). Only when
the store cannot be read either does the unknown outcome reach the caller; memory is then rebuilt
from the journal, never rolled back by the caller, since the change may be in the journal.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from quotaplane.events import Event
from quotaplane.journal.base import (
    Journal,
    JournalError,
    OutcomeUnknownError,
    StoreUnavailableError,
    canonical_json,
)

__all__ = ["Committer", "PartitionLog"]


class Committer(Protocol):
    """What the stream asks of its group committer (:class:`~quotaplane.journal.group_commit.GroupCommit`)."""

    @property
    def head(self) -> int:
        """The sequence number the last submitted event will have once committed."""
        ...

    def record(self, events: Sequence[Event]) -> None:
        """Queue ``events`` for the next group (and wait for it off the owner thread)."""
        ...

    def wait(self, mark: int | None = None) -> None:
        """Flush now, so that ``mark`` (default: everything submitted) is decided."""
        ...

    def resume(self) -> None:
        """The partition was rebuilt from the journal: accept changes again."""
        ...


class PartitionLog:
    """The journal stream of one partition (``journal`` None: in memory, nothing is written)."""

    __slots__ = ("_snapshot_state", "group", "holder", "journal", "last_seq", "on_recorded", "poisoned",
                 "replaying", "snapshot_error", "snapshot_every", "snapshot_seq", "store_error", "stream",
                 "wrote")

    def __init__(self, journal: Journal | None, stream: str, *, holder: str | None, snapshot_every: int,
                 snapshot_state: Callable[[], Mapping[str, Any]]) -> None:
        self.journal = journal
        self.stream = stream
        #: the lease holder name this instance appends under (fencing), or None
        self.holder = holder
        self.snapshot_every = snapshot_every
        self._snapshot_state = snapshot_state
        #: the sequence number of the last event journalled or replayed
        self.last_seq = 0
        #: the sequence number of the last snapshot saved or restored from
        self.snapshot_seq = 0
        #: events are being replayed (nothing is appended)
        self.replaying = False
        #: the append failure that stopped the partition, or None
        self.poisoned: BaseException | None = None
        #: the last append that failed, until one succeeds (None: the store took the last write)
        self.store_error: BaseException | None = None
        #: journalled events since the last snapshot (a follower, which only replays, has none)
        self.wrote = False
        #: the last error of an automatic snapshot (snapshots are optional; the events are durable)
        self.snapshot_error: Exception | None = None
        #: told of every journalled batch with the seq of its last event (the subscribers' notices)
        self.on_recorded: Callable[[Sequence[Event], int], None] | None = None
        #: the group committer (issue 18), or None: every record is appended before it returns
        self.group: Committer | None = None

    def record(self, events: Sequence[Event], *, recoverable: bool = False) -> None:
        """Append ``events`` durably in one transaction; take a snapshot every ``snapshot_every``.

        Without a journal (in memory) the events are numbered here, so notices carry a ``seq`` too.
        With group commit the events join the next group: this returns once they are durable, except
        on the group's owner thread (the service's event loop), where it returns at once and the
        answer waits for the mark instead. A failed group makes the partition rebuild itself from the
        journal.
        """
        if self.replaying or not events:
            return
        if self.group is not None:
            self.group.record(events)
            return
        if self.journal is None:
            self.last_seq += len(events)
            if self.on_recorded is not None:
                self.on_recorded(events, self.last_seq)
            return
        payload = [ev.to_json() for ev in events]
        try:
            seq = self.append(payload)
        except BaseException as exc:
            self.store_error = exc
            if not recoverable or isinstance(exc, OutcomeUnknownError):
                # the change may be in the journal: rebuild from it, the caller's undo is not enough
                self.poisoned = exc
            raise
        self.store_error = None
        self.last_seq = seq
        self.wrote = True
        if self.on_recorded is not None:
            self.on_recorded(events, seq)
        if self.snapshot_every > 0 and seq - self.snapshot_seq >= self.snapshot_every:
            self._snapshot_quietly()

    def append(self, payload: list[dict[str, Any]], *, after: int | None = None) -> int:
        """Append ``payload`` (journal forms) in one transaction, fenced by :attr:`holder`; return the
        seq of its last event. ``after``: where the stream ends before it (default :attr:`last_seq`):
        the state the change was decided on. A fenced append (with a holder: several instances) is
        written only there (:meth:`Journal.append`'s ``after``: a deposed leader's late append never
        lands on another's writes, issue 32 #4), so an unknown outcome is read back there (see the
        module docstring); raises the :class:`~quotaplane.journal.base.OutcomeUnknownError` when
        that read fails too."""
        journal = self.journal
        if journal is None:       # pragma: no cover - callers check
            raise StoreUnavailableError("the partition's journal is gone")
        prev = self.last_seq if after is None else after
        try:
            if self.holder is not None:
                return journal.append(self.stream, payload, holder=self.holder, after=prev)
            return journal.append(self.stream, payload)
        except OutcomeUnknownError as exc:
            try:
                landed = [canonical_json(ev) for _, ev in
                          itertools.islice(journal.read(self.stream, after=prev), len(payload))]
            except Exception:
                raise exc from None
            if landed == [canonical_json(ev) for ev in payload]:
                return prev + len(payload)
            raise JournalError(f"append to {self.stream!r} was not written (read back after its "
                               f"connection broke: {exc})") from exc

    def _snapshot_quietly(self) -> None:
        try:
            self.save_snapshot()
        except Exception as exc:      # a snapshot is an optimisation: the event is already durable
            self.snapshot_error = exc

    def usable(self, partition: str) -> None:
        """Refuse changes after a journal failure left memory ahead of the journal."""
        if self.poisoned is not None:
            raise StoreUnavailableError(f"partition {partition!r} is recovering from a store failure "
                                        f"({self.poisoned!r}); it is rebuilt from the journal once the "
                                        "store can be read")

    def snapshot_state(self) -> Mapping[str, Any]:
        """The partition's snapshot state now (memory as it is: call it where memory matches a seq)."""
        return self._snapshot_state()

    @property
    def head(self) -> int:
        """The sequence number of the last event recorded: journalled, or queued for a group commit
        (then it is the number it will get). A version stamp of memory for caches."""
        return self.group.head if self.group is not None else self.last_seq

    def save_snapshot(self) -> int:
        """Save a snapshot at the last journalled event; return its sequence number (0: no journal).
        With group commit, first waits until every recorded change is durable (the caller holds the
        partition lock, so none is added meanwhile)."""
        if self.journal is None:
            return 0
        if self.group is not None:
            self.group.wait()
        seq = self.last_seq
        self.journal.save_snapshot(self.stream, seq, self._snapshot_state())
        self.snapshot_seq = seq
        self.wrote = False
        return seq

    @property
    def needs_snapshot(self) -> bool:
        """True when events were journalled since the last snapshot and the log is healthy."""
        return self.wrote and self.last_seq > self.snapshot_seq and self.poisoned is None
