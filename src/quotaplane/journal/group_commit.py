"""Group commit: the journal appends of many changes of one partition in one transaction (issue 18).

Decisions are still taken one at a time, in order, under the partition lock, exactly as without group
commit; what changes is *when* their events reach the store. A change is applied in memory and its
events are queued (:meth:`GroupCommit.submit`). On the committer's ``owner`` thread — the service's
event loop — the call then returns at once and a flush is scheduled (``schedule``, the loop's
``call_soon``): it runs after every request that was ready in the same turn of the loop has been
decided, and appends all their events in **one** transaction. The window is adaptive with no sleep:
a lone request is committed at the next turn, and while the loop is busy (or blocked in a commit)
requests pile up and the next flush takes them all. A call from any other thread flushes at once
(with whatever is queued before it) and returns once its change is durable, as without group commit.

What S1 ("a change is acknowledged only once it is durable") needs from the owner: every change gets
a *mark* (its submission number), noted in the caller's context (:func:`marks_in_context`). The
service answers a request only when :meth:`GroupCommit.notify` says the request's last mark is
durable. Marks are committed in order, so a change that depends on an earlier one is never durable
before it, and an answer that waits for the newest mark at its time (a read, a refusal) never
reveals a change the store does not hold.

When a commit fails, every change of that group *and every change submitted after it* (they may
depend on it) is failed — their waiters get :class:`CommitFailedError`, answered 503 — and the
partition log is marked poisoned, so the partition rebuilds its memory from the journal before it
serves anything again (:meth:`quotaplane.partition.Partition.recover`, the path of issue 14 #2). The
journal holds exactly the groups that committed, so the rebuild undoes precisely the refused changes:
nothing refused is ever visible. :attr:`GroupCommit.epoch` counts those failures, so an answer
computed before a failure and sent after it can tell (the service answers it 503 too).

A group whose append ended with an unknown outcome (the connection broke after it was sent) is read
back first (:meth:`quotaplane.journal.log.PartitionLog.append`): it is durable, or certainly not
written. When even that cannot be known, its own waiters are told so
(:class:`CommitOutcomeUnknownError`, answered 502 "may or may not have been applied", never 503
"nothing was changed"); the changes after it were never sent and fail as above (issue 32 #3).

Snapshots need memory to equal the journal at one sequence number. With group commit memory runs
ahead of the store, so the snapshot state is taken at submit time — when memory holds exactly the
changes submitted so far — and saved right after the commit that makes those changes durable
(dropped if that commit fails).

Everything here runs under the partition lock — submissions, flushes and the deliveries after a
commit (the partition's ``on_recorded``: subscribers' notices, event listeners), in commit order.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from quotaplane.errors import (
    CommitFailedError,
    CommitOutcomeUnknownError,
    InputError,
    NotLeaderError,
    OutcomeUnknownError,
    QuotaplaneError,
    StoreUnavailableError,
)

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.events import Event
    from quotaplane.journal.log import PartitionLog

__all__ = ["DEFAULT_MAX_EVENTS", "Background", "CommitFailedError", "CommitOutcomeUnknownError",
           "GroupCommit", "Offload", "marks_in_context", "reset_marks"]

#: At most this many events per transaction (one statement; bounds a group's latency and size).
DEFAULT_MAX_EVENTS = 10_000

#: told ``None`` when its mark is durable, or the failure that undid it
Waiter = Callable[[BaseException | None], None]

#: ``offload(append, landed)``: run ``append()`` off the owner thread, then ``landed(its seq or its
#: error)`` back on the owner thread
Offload = Callable[[Callable[[], int], Callable[["int | BaseException"], None]], None]

#: ``background(save)``: run ``save()`` on a worker thread (writing a snapshot)
Background = Callable[[Callable[[], None]], object]

#: the mark of the last change each committer took in the current context (a request's task): the
#: service waits for exactly that mark before it answers the request
_MARKS: contextvars.ContextVar[dict[GroupCommit, int] | None] = contextvars.ContextVar(
    "quotaplane_group_commit_marks", default=None)


def marks_in_context() -> dict[GroupCommit, int]:
    """The committers this context submitted changes to, with the mark of its last change."""
    return _MARKS.get() or {}


def reset_marks() -> None:
    """Start a new unit of work in this context (a request): no marks yet."""
    _MARKS.set(None)


def _call(waiters: list[tuple[int, Waiter]], outcome: BaseException | Callable[[int], BaseException] | None
          ) -> None:
    for mark, waiter in waiters:
        with contextlib.suppress(Exception):
            waiter(outcome(mark) if callable(outcome) else outcome)


def _tell_recorded(recorded: Callable[[Sequence[Event], int], object], group: Sequence[_Entry],
                   seq: int) -> None:
    # each change's notices carry the seq of its own events (``seq``: the group's last)
    end = seq - sum(len(e.events) for e in group)
    for entry in group:
        end += len(entry.events)
        if entry.events:
            recorded(entry.events, end)


class _Entry:
    """One submitted change: its mark, its events, and (rarely) a snapshot due after it."""

    __slots__ = ("events", "mark", "snapshot")

    def __init__(self, mark: int, events: Sequence[Event], snapshot: tuple[int, Mapping[str, Any]] | None
                 ) -> None:
        self.mark = mark
        self.events = events
        #: ``(seq, state)``: the partition's snapshot state right after this change (seq = its last event)
        self.snapshot = snapshot


class GroupCommit:
    """The committer of one partition log (see the module docstring).

    ``lock`` is the partition lock. ``owner``: the thread (ident) whose calls return without waiting
    — the service's event loop, which waits for the marks itself before it answers — and
    ``schedule`` how that thread runs a flush after its current burst (``loop.call_soon``). Without
    them every call flushes before it returns. ``offload(append, landed)``: run the append
    elsewhere (a worker thread) and call ``landed(seq or error)`` back on the owner thread, so the
    owner goes on deciding while a commit waits for a remote store (PostgreSQL); at most one commit
    is in flight. ``background(save)``: write a snapshot (encoding it, a third of a second for
    50,000 allocations, piece by piece so the owner keeps running) on a worker thread instead of in
    the commit that made it due; its state was captured at submit time and shares nothing mutable
    with the partition, and no snapshot is captured while one is being written. ``max_events``
    caps one transaction.
    """

    __slots__ = ("_background", "_buffer", "_failed_upto", "_inflight", "_lock", "_log", "_mutex",
                 "_offload", "_outcome", "_saving", "_schedule", "_scheduled", "_unknown", "_waiters",
                 "changes", "durable", "epoch", "failure", "groups", "head", "max_events", "name", "owner",
                 "submitted")

    def __init__(self, log: PartitionLog, name: str, lock: threading.RLock, *,
                 schedule: Callable[[Callable[[], None]], object] | None = None, owner: int | None = None,
                 offload: Offload | None = None, max_events: int = DEFAULT_MAX_EVENTS,
                 background: Background | None = None) -> None:
        if max_events < 1:
            raise InputError("max_events must be at least 1")
        self._log = log
        self.name = name
        self._lock = lock
        self.max_events = max_events
        self.owner = owner
        self._schedule = schedule
        self._scheduled = False
        self._offload = offload
        self._background = background
        #: a snapshot is being written in the background: none is captured meanwhile
        self._saving = False
        #: the group whose append runs off the owner thread, and the last offloaded outcome
        self._inflight: list[_Entry] | None = None
        self._outcome: tuple[list[_Entry], int | BaseException] = ([], 0)
        self._mutex = threading.Lock()
        self._buffer: list[_Entry] = []
        self._waiters: list[tuple[int, Waiter]] = []
        #: marks: the last change submitted, the last one durable; failed marks end at ``_failed_upto``
        self.submitted = 0
        self.durable = 0
        self._failed_upto = 0
        #: the marks of failed groups whose outcome is unknown: ``(first, last)`` ranges
        self._unknown: list[tuple[int, int]] = []
        #: the sequence number the last submitted event will have once committed
        self.head = log.last_seq
        #: how many group commits failed (an answer computed before a failure is not sent after it)
        self.epoch = 0
        #: the failure that stopped the committer until the partition is rebuilt, or None
        self.failure: BaseException | None = None
        #: how many transactions committed (groups) and how many changes they held, for metrics
        self.groups = 0
        self.changes = 0

    def _on_owner(self) -> bool:
        return self.owner is not None and threading.get_ident() == self.owner

    # -- the deciding side (caller holds the partition lock) ------------------------------------------
    def submit(self, events: Sequence[Event]) -> int:
        """Queue one change's events for the next group; return its mark. Raises
        :class:`~quotaplane.journal.base.StoreUnavailableError` while a failed group awaits the
        partition's rebuild."""
        log = self._log
        with self._lock:
            if self.failure is not None:
                raise StoreUnavailableError(f"partition {self.name!r} is recovering from a failed journal "
                                            f"commit ({self.failure}); it is rebuilt from the journal")
            self.submitted += 1
            mark = self.submitted
            self.head += len(events)
            snapshot = None
            every = log.snapshot_every
            if (every > 0 and self.head - log.snapshot_seq >= every and not self._saving
                    and not self._snapshot_queued()):
                # memory holds exactly the submitted changes now: this is the state at ``head``
                snapshot = (self.head, log.snapshot_state())
            self._buffer.append(_Entry(mark, events, snapshot))
            if self._schedule is not None and not self._scheduled and self._on_owner():
                self._scheduled = True
                self._schedule(self._scheduled_flush)
        marks = _MARKS.get()
        _MARKS.set({self: mark} if marks is None else {**marks, self: mark})
        return mark

    def record(self, events: Sequence[Event]) -> None:
        """:meth:`submit`; then, off the :attr:`owner` thread, :meth:`wait` for it (raises if its
        commit failed)."""
        mark = self.submit(events)
        if not self._on_owner():
            self.wait(mark)

    def _snapshot_queued(self) -> bool:
        return any(e.snapshot is not None for e in self._buffer)

    # -- waiting ------------------------------------------------------------------------------------
    def notify(self, mark: int, waiter: Waiter) -> bool:
        """Call ``waiter(None)`` once ``mark`` is durable, or ``waiter(error)`` if its group failed:
        at once when that is decided already (then True is returned), else from the flush that
        decides it (under the partition lock, so it must be quick)."""
        with self._lock:
            if mark <= self.durable:
                outcome: BaseException | None = None
            elif mark <= self._failed_upto:
                outcome = self._failed_error(mark)
            else:
                self._waiters.append((mark, waiter))
                return False
        waiter(outcome)
        return True

    def wait(self, mark: int | None = None) -> None:
        """Flush now, so that ``mark`` (default: everything submitted) is decided; raise
        :class:`CommitFailedError` if its group failed (:class:`~quotaplane.errors.NotLeaderError`
        when the lease was lost)."""
        with self._lock:
            target = self.submitted if mark is None else mark
            if target > self.durable and target > self._failed_upto:
                self.flush()
            if target > self.durable:
                raise self._failed_error(target, through=mark is None)

    def flush_inline(self) -> bool:
        """Commit what is queued now instead of at the scheduled flush, for an owner that knows no
        other change will join the group before that flush runs (the service's lone request: its
        answer then goes out in the same turn of the loop, issue 38). True when done — the queued
        marks are decided (durable, or failed as in :meth:`flush`); False, doing nothing, off the
        :attr:`owner` thread or when commits are offloaded (the owner must not block on a remote
        store): then wait for the scheduled flush. The scheduled flush later finds nothing queued."""
        if self._offload is not None or not self._on_owner():
            return False
        self.flush()
        return True

    def decide_inline(self, mark: int) -> BaseException | Literal[False] | None:
        """:meth:`flush_inline`, then :meth:`notify`'s outcome of ``mark`` in one call, without a
        waiter: None when ``mark`` is durable, the error of its failed group, or False, doing nothing,
        off the :attr:`owner` thread or when commits are offloaded (then wait for the scheduled flush).
        For the same owner as :meth:`flush_inline` (the service's lone request, issue 38): the one
        change queued — the common case — is appended straight away, without the group bookkeeping
        of a flush (a lone allocation's group commit cost ~43 k instructions more than a direct
        commit); anything else is a :meth:`flush`."""
        if self._offload is not None or self.owner is None or threading.get_ident() != self.owner:
            return False
        with self._lock:
            if mark > self.durable and mark > self._failed_upto:
                if len(self._buffer) == 1 and self._inflight is None and self.failure is None:
                    self._commit_lone()
                else:
                    self.flush()
            if mark <= self.durable:
                return None
            return self._failed_error(mark)

    def _commit_lone(self) -> None:
        """:meth:`flush` of the one entry queued with nothing in flight (caller holds the lock)."""
        entry = self._buffer.pop()
        with self._mutex:
            try:
                seq = self._append(entry.events, self._log.last_seq)
            except BaseException as exc:
                self._fail(exc, [entry])
                return
        self._committed((entry,), seq)

    @property
    def idle(self) -> bool:
        """True when every submitted change is durable (or failed): memory equals the journal (a
        commit in flight is not durable yet)."""
        return self.durable >= self.submitted or self._failed_upto >= self.submitted

    def _failed_error(self, mark: int, *, through: bool = False) -> QuotaplaneError:
        """The error of failed mark ``mark`` (``through``: of any failed mark up to it)."""
        low = self.durable + 1 if through else mark
        if any(first <= mark and last >= low for first, last in self._unknown):
            return CommitOutcomeUnknownError(
                f"partition {self.name!r}: the journal commit of this change may or may not have been "
                f"applied ({self.failure}); the partition is rebuilt from what the journal holds")
        message = (f"partition {self.name!r}: the journal commit of this change failed ({self.failure}); "
                   "the change was undone")
        if isinstance(self.failure, NotLeaderError):      # fenced: tell where the leader is now
            return NotLeaderError(message, leader=self.failure.leader)
        return CommitFailedError(message)

    # -- after a rebuild --------------------------------------------------------------------------------
    def resume(self) -> None:
        """The partition was rebuilt from the journal: accept changes again (at its last sequence)."""
        with self._lock:
            self.failure = None
            self.head = self._log.last_seq

    # -- committing ---------------------------------------------------------------------------------
    def _scheduled_flush(self) -> None:
        self._scheduled = False
        if self._offload is None:
            # a failure is told to the waiters and poisons the partition: nothing to raise here
            self.flush()
            return
        with self._lock:
            if self._inflight is not None or not self._buffer or self.failure is not None:
                return            # the commit in flight schedules the next one when it lands
            group = self._take()
            self._inflight = group
            after = self._log.last_seq
        events = [ev for entry in group for ev in entry.events]
        self._offload(lambda: self._append_alone(group, events, after),
                      lambda outcome: self._landed(group, outcome))

    def _append_alone(self, group: list[_Entry], events: list[Event], after: int) -> int:
        # off the owner thread, without the partition lock (deciding goes on meanwhile); the mutex
        # keeps appends in order, and the outcome is kept for a flush that takes the mutex next
        with self._mutex:
            if self._inflight is not group:
                # a flush took the mutex before this append began and committed the group itself
                # (issue 32 #1); ``_inflight`` only leaves this group under the mutex or after this
                # returns, so the test is exact. ``_landed`` ignores what is returned.
                return -1
            try:
                seq = self._append(events, after)
            except BaseException as exc:
                self._outcome = (group, exc)
                raise
            self._outcome = (group, seq)
            return seq

    def _landed(self, group: list[_Entry], outcome: int | BaseException) -> None:
        """The offloaded commit of ``group`` finished (on the owner thread)."""
        with self._lock:
            if self._inflight is not group:
                return            # a flush settled it already
            self._inflight = None
            self._settle(group, outcome)
            if self._buffer and self.failure is None and self._schedule is not None and not self._scheduled:
                self._scheduled = True
                self._schedule(self._scheduled_flush)

    def _settle(self, group: list[_Entry], outcome: int | BaseException) -> None:
        if isinstance(outcome, BaseException):
            self._fail(outcome, group)
        else:
            self._committed(group, outcome)

    def flush(self) -> None:
        """Commit everything queued, in groups of at most :attr:`max_events` events, stopping at a
        failure (which fails everything queued). Settles the commit in flight first: with its
        outcome when its append is over, else by appending its group here (its worker, when it
        runs, then appends nothing)."""
        with self._lock:
            while (self._buffer or self._inflight is not None) and self.failure is None:
                with self._mutex:
                    inflight = self._inflight
                    if inflight is not None:
                        # holding the mutex, the offloaded append of ``inflight`` is either over or
                        # not begun (its worker may not have been scheduled yet): settle it with its
                        # outcome, or claim it — its worker then finds it gone and appends nothing —
                        # and append it here, before anything later (issue 32 #1)
                        self._inflight = None
                        landed, outcome = self._outcome
                        if landed is inflight:
                            self._settle(inflight, outcome)
                            continue
                        group = inflight
                    else:
                        group = self._take()
                    try:
                        seq = self._append([ev for entry in group for ev in entry.events], self._log.last_seq)
                    except BaseException as exc:
                        self._fail(exc, group)
                        return
                self._committed(group, seq)

    def _take(self) -> list[_Entry]:
        """The next group: entries in order, up to ``max_events`` events and up to the first snapshot."""
        group: list[_Entry] = []
        n = 0
        for entry in self._buffer:
            if group and n + len(entry.events) > self.max_events:
                break
            group.append(entry)
            n += len(entry.events)
            if entry.snapshot is not None:
                break
        del self._buffer[:len(group)]
        return group

    def _append(self, events: Sequence[Event], after: int) -> int:
        # ``after``: the stream's end before this group (the last committed group's seq): an
        # unknown outcome is read back there
        log = self._log
        if log.journal is None:   # pragma: no cover - a committer needs a journal
            raise StoreUnavailableError("the partition's journal is gone")
        payload = [ev.to_json() for ev in events]
        if not payload:
            return after
        return log.append(payload, after=after)

    def _committed(self, group: Sequence[_Entry], seq: int) -> None:
        log = self._log
        last = group[-1]
        self.durable = last.mark
        self.groups += 1
        self.changes += len(group)
        log.last_seq = seq
        log.store_error = None
        log.wrote = True
        if last.snapshot is not None:
            snap_seq, state = last.snapshot
            if snap_seq == seq and log.journal is not None:
                if self._background is not None:
                    self._saving = True
                    self._background(functools.partial(self._save_snapshot, seq, state))
                else:
                    self._save_snapshot(seq, state)
            else:          # another writer moved the stream (cannot happen under a held lease)
                log.snapshot_error = RuntimeError(f"snapshot at {snap_seq} skipped: the commit ended "
                                                  f"at {seq}")
        due: list[tuple[int, Waiter]] = []
        if self._waiters:         # none for a lone request committed inline (decide_inline)
            due = [w for w in self._waiters if w[0] <= last.mark]
            if due:
                self._waiters = [w for w in self._waiters if w[0] > last.mark]
        recorded = log.on_recorded
        if recorded is not None:
            if len(group) == 1:
                if last.events:
                    recorded(last.events, seq)
            else:
                _tell_recorded(recorded, group, seq)
        if due:
            _call(due, None)

    def _save_snapshot(self, seq: int, state: Mapping[str, Any]) -> None:
        """Write the snapshot captured at ``seq`` (durable now). A failure is kept, never raised: the
        events are durable, a snapshot only shortens a restart."""
        log = self._log
        try:
            if log.journal is not None:
                log.journal.save_snapshot(log.stream, seq, state)
                log.snapshot_seq = max(log.snapshot_seq, seq)
                if log.last_seq == seq:
                    log.wrote = False
        except Exception as exc:
            log.snapshot_error = exc
        finally:
            self._saving = False

    def _fail(self, exc: BaseException, group: list[_Entry]) -> None:
        log = self._log
        self.failure = exc
        self.epoch += 1
        self._failed_upto = self.submitted
        if isinstance(exc, OutcomeUnknownError) and group:
            # its own waiters may not be told "undone"; the later ones were never sent
            self._unknown = [*self._unknown[-7:], (group[0].mark, group[-1].mark)]
        self._buffer.clear()           # decided after the failed group: they may depend on it
        self.head = log.last_seq
        log.store_error = exc
        log.poisoned = exc             # memory is ahead of the journal: rebuild before serving
        due, self._waiters = self._waiters, []
        _call(due, self._failed_error)

    # -- shutting down -------------------------------------------------------------------------------
    def stop(self) -> None:
        """Commit what was submitted (the committer keeps no thread: nothing else to stop)."""
        self.flush()
