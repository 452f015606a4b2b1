"""Group commit: the journal appends of many changes of one partition in one transaction (issue 18).

Decisions are still taken one at a time, in order, under the partition lock, exactly as without group
commit; what changes is *when* their events reach the store. A change is applied in memory and its
events are handed to this partition's committer (:meth:`GroupCommit.submit`), which returns at once.
A committer thread takes everything submitted so far and appends it in **one** transaction; while that
commit is in flight the next changes gather, and the next commit takes them all. The window is
adaptive: an idle partition commits a lone change at once (no sleep), a busy one commits as many
changes per transaction as arrived during the previous commit.

What S1 ("a change is acknowledged only once it is durable") needs from the caller: every change
gets a *mark* (its submission number). The caller answers only after :meth:`GroupCommit.wait` (or the
asynchronous :meth:`GroupCommit.notify`) says the mark is durable. Marks are committed in order, so a
change that depends on an earlier one is never durable before it, and an answer that waits for the
newest mark at its time (a read, a refusal) never reveals a change the store does not hold.

When a commit fails, the committer stops: every change of that group *and every change submitted
after it* (they may depend on it) is failed — their waiters get :class:`CommitFailedError`, a
:class:`~quotaplane.journal.base.StoreUnavailableError` answered 503 — and the partition log is
marked poisoned, so the partition rebuilds its memory from the journal before it serves anything
again (:meth:`quotaplane.partition.Partition.recover`, the path of issue 14 #2). The journal holds
exactly the groups that committed, so the rebuild undoes precisely the refused changes: nothing
refused is ever visible. :attr:`GroupCommit.epoch` counts those failures, so an answer computed
before a failure and sent after it can tell (the service answers it 503 too).

Snapshots need memory to equal the journal at one sequence number. With group commit memory runs
ahead of the store, so the snapshot state is taken at submit time — when memory holds exactly the
changes submitted so far — and saved by the committer right after the commit that makes those changes
durable (dropped if that commit fails).

Deliveries — the partition's ``on_recorded`` (subscribers' notices, event listeners) — run after
the commit, in commit order, through ``post``: the service passes its event loop's
``call_soon_threadsafe``; the default is one delivery thread per committer. Either way they run
under the partition lock, as without group commit. Waiters are woken straight from the committer
thread, so a caller may wait while it holds the partition lock.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from quotaplane.errors import NotLeaderError, QuotaplaneError
from quotaplane.journal.base import JournalError, StoreUnavailableError

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.events import Event
    from quotaplane.journalling import PartitionLog

_log = logging.getLogger("quotaplane.group_commit")

__all__ = ["DEFAULT_MAX_EVENTS", "CommitFailedError", "GroupCommit", "marks_in_context", "reset_marks"]

#: At most this many events per transaction (one statement; bounds a group's latency and size).
DEFAULT_MAX_EVENTS = 10_000

#: told ``None`` when its mark is durable, or the failure that undid it
Waiter = Callable[[BaseException | None], None]

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


class CommitFailedError(JournalError):
    """The group commit that held a change failed: the change was undone (answered 503)."""


def _call(waiters: list[tuple[int, Waiter]], outcome: BaseException | None) -> None:
    # straight from the committer thread: a waiter must be thread safe and quick (an Event.set, a
    # loop.call_soon_threadsafe); a caller that holds the partition lock while it waits is woken
    # without needing anything that lock guards
    for _, waiter in waiters:
        with contextlib.suppress(Exception):
            waiter(outcome)


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

    ``lock`` is the partition lock (deliveries run under it); ``post`` runs a delivery callable in
    commit order (default: a delivery thread of its own). ``max_events`` caps one transaction.
    ``owner``: the thread (ident) whose calls return without waiting — the service's event loop,
    which waits for the marks itself before it answers; a call from any other thread waits for its
    commit (and raises if it failed), so the library's contract — durable when the call returns —
    holds, while concurrent callers still share transactions.
    """

    __slots__ = ("_buffer", "_cv", "_deliver_pool", "_failed_upto", "_lock", "_log", "_post", "_stopping",
                 "_thread", "_waiters", "durable", "epoch", "failure", "groups", "head", "max_events",
                 "name", "owner", "submitted")

    def __init__(self, log: PartitionLog, name: str, lock: threading.RLock, *,
                 post: Callable[[Callable[[], None]], object] | None = None,
                 max_events: int = DEFAULT_MAX_EVENTS, owner: int | None = None) -> None:
        if max_events < 1:
            raise ValueError("max_events must be at least 1")
        self._log = log
        self.name = name
        self._lock = lock
        self.max_events = max_events
        self.owner = owner
        self._cv = threading.Condition(threading.Lock())
        self._buffer: list[_Entry] = []
        self._waiters: list[tuple[int, Waiter]] = []
        #: marks: the last change submitted, the last one durable; failed marks end at ``_failed_upto``
        self.submitted = 0
        self.durable = 0
        self._failed_upto = 0
        #: the sequence number the last submitted event will have once committed
        self.head = log.last_seq
        #: how many group commits failed (an answer computed before a failure is not sent after it)
        self.epoch = 0
        #: the failure that stopped the committer until the partition is rebuilt, or None
        self.failure: BaseException | None = None
        #: how many transactions committed (groups), for metrics and tests
        self.groups = 0
        self._stopping = False
        self._deliver_pool: concurrent.futures.ThreadPoolExecutor | None = None
        if post is None:
            self._deliver_pool = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix=f"quotaplane-deliver-{name}")
            post = self._deliver_pool.submit
        self._post = post
        self._thread = threading.Thread(target=self._run, name=f"quotaplane-commit-{name}", daemon=True)
        self._thread.start()

    # -- the deciding side (caller holds the partition lock) ------------------------------------------
    def submit(self, events: Sequence[Event]) -> int:
        """Queue one change's events for the next group; return its mark. Raises
        :class:`~quotaplane.journal.base.StoreUnavailableError` while a failed group awaits the
        partition's rebuild."""
        log = self._log
        with self._cv:
            if self.failure is not None:
                raise StoreUnavailableError(f"partition {self.name!r} is recovering from a failed journal "
                                            f"commit ({self.failure}); it is rebuilt from the journal")
            self.submitted += 1
            self.head += len(events)
            snapshot = None
            every = log.snapshot_every
            if every > 0 and self.head - log.snapshot_seq >= every and not self._snapshot_queued():
                # memory holds exactly the submitted changes now: this is the state at ``head``
                snapshot = (self.head, dict(log.snapshot_state()))
            self._buffer.append(_Entry(self.submitted, events, snapshot))
            self._cv.notify()
            mark = self.submitted
        marks = _MARKS.get()
        _MARKS.set({self: mark} if marks is None else {**marks, self: mark})
        return mark

    def record(self, events: Sequence[Event]) -> None:
        """:meth:`submit`, then — outside the :attr:`owner` thread — :meth:`wait` for it."""
        mark = self.submit(events)
        if self.owner is None or threading.get_ident() != self.owner:
            self.wait(mark)

    def _snapshot_queued(self) -> bool:
        return any(e.snapshot is not None for e in self._buffer)

    # -- waiting ------------------------------------------------------------------------------------
    def notify(self, mark: int, waiter: Waiter) -> bool:
        """Call ``waiter(None)`` once ``mark`` is durable, or ``waiter(error)`` if its group failed;
        from the committer thread (so it must be thread safe and quick), or at once when already
        decided (then True is returned)."""
        with self._cv:
            if mark <= self.durable:
                outcome: BaseException | None = None
            elif mark <= self._failed_upto:
                outcome = self._failed_error()
            else:
                self._waiters.append((mark, waiter))
                return False
        waiter(outcome)
        return True

    def wait(self, mark: int | None = None, timeout: float | None = None) -> None:
        """Block until ``mark`` (default: everything submitted so far) is durable; raise
        :class:`CommitFailedError` if its group failed (:class:`~quotaplane.errors.NotLeaderError`
        when the lease was lost), TimeoutError after ``timeout`` seconds.
        """
        done = threading.Event()
        box: list[BaseException | None] = []

        def waiter(outcome: BaseException | None) -> None:
            box.append(outcome)
            done.set()

        self.notify(self.submitted if mark is None else mark, waiter)
        if not done.wait(timeout):
            raise TimeoutError(f"partition {self.name!r}: the journal commit did not finish in {timeout} s")
        if box[0] is not None:
            raise box[0]

    @property
    def idle(self) -> bool:
        """True when every submitted change is durable (or failed): memory equals the journal."""
        return self.durable >= self.submitted or self._failed_upto >= self.submitted

    def _failed_error(self) -> QuotaplaneError:
        message = (f"partition {self.name!r}: the journal commit of this change failed ({self.failure}); "
                   "the change was undone")
        if isinstance(self.failure, NotLeaderError):      # fenced: tell where the leader is now
            return NotLeaderError(message, leader=self.failure.leader)
        return CommitFailedError(message)

    # -- after a rebuild --------------------------------------------------------------------------------
    def resume(self) -> None:
        """The partition was rebuilt from the journal: accept changes again (at its last sequence)."""
        with self._cv:
            self.failure = None
            self.head = self._log.last_seq

    # -- the committer thread -------------------------------------------------------------------------
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

    def _run(self) -> None:
        log = self._log
        while True:
            with self._cv:
                while not self._buffer and not self._stopping:
                    self._cv.wait()
                if not self._buffer:
                    return
                group = self._take()
            events = [ev for entry in group for ev in entry.events]
            try:
                journal = log.journal
                if journal is None:       # pragma: no cover - a committer needs a journal
                    raise StoreUnavailableError("the partition's journal is gone")
                payload = [ev.to_json() for ev in events]
                if not payload:
                    seq = log.last_seq
                elif log.holder is not None:
                    seq = journal.append(log.stream, payload, holder=log.holder)
                else:
                    seq = journal.append(log.stream, payload)
            except BaseException as exc:
                self._fail(exc)
                continue
            self._committed(group, seq)

    def _committed(self, group: list[_Entry], seq: int) -> None:
        log = self._log
        last = group[-1]
        if last.snapshot is not None:
            snap_seq, state = last.snapshot
            if snap_seq == seq and log.journal is not None:
                try:
                    log.journal.save_snapshot(log.stream, seq, state)
                    log.snapshot_seq = seq
                except Exception as exc:     # optional: the events are durable
                    log.snapshot_error = exc
            else:          # another writer moved the stream (cannot happen under a held lease)
                log.snapshot_error = RuntimeError(f"snapshot at {snap_seq} skipped: the commit ended "
                                                  f"at {seq}")
        with self._cv:
            self.durable = last.mark
            self.groups += 1
            log.last_seq = seq
            log.store_error = None
            log.wrote = log.snapshot_seq < seq
            due = [w for w in self._waiters if w[0] <= last.mark]
            if due:
                self._waiters = [w for w in self._waiters if w[0] > last.mark]
        # each change's notices carry the seq of its own events
        batches: list[tuple[Sequence[Event], int]] = []
        end = seq - sum(len(e.events) for e in group)
        for entry in group:
            end += len(entry.events)
            if entry.events:
                batches.append((entry.events, end))
        _call(due, None)
        if batches:
            try:
                self._post(lambda: self._deliver(batches))
            except RuntimeError:          # the service's event loop is closed: nobody listens any more
                _log.warning("partition %s: notices of seq %d dropped (the event loop is closed)",
                             self.name, seq)

    def _fail(self, exc: BaseException) -> None:
        log = self._log
        with self._cv:
            self.failure = exc
            self.epoch += 1
            self._failed_upto = self.submitted
            self._buffer.clear()           # decided after the failed group: they may depend on it
            self.head = log.last_seq
            log.store_error = exc
            log.poisoned = exc             # memory is ahead of the journal: rebuild before serving
            due, self._waiters = self._waiters, []
        _call(due, self._failed_error())

    def _deliver(self, batches: list[tuple[Sequence[Event], int]]) -> None:
        recorded = self._log.on_recorded
        if recorded is not None:
            with self._lock:
                for events, seq in batches:
                    recorded(events, seq)

    # -- shutting down -------------------------------------------------------------------------------
    def stop(self, timeout: float | None = 30.0) -> None:
        """Commit what was submitted, then stop the committer thread (idempotent). The caller may
        hold the partition lock (nothing new is submitted then)."""
        with self._cv:
            self._stopping = True
            self._cv.notify()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def close(self) -> None:
        """After :meth:`stop`: let the pending deliveries run and stop the delivery thread (do not
        hold the partition lock: deliveries take it)."""
        self.stop()
        if self._deliver_pool is not None:
            self._deliver_pool.shutdown(wait=True)
