"""The SQLite journal (``sqlite:///path.db``): the embedded default store (decision S1).

Durability. The database runs in WAL mode and every :meth:`SQLiteJournal.append` is one transaction
that is committed before the call returns. With ``synchronous=NORMAL`` (the default) a commit is written
to the WAL file by the time ``COMMIT`` returns, so a **process crash (kill -9) loses nothing that was
acknowledged**; a power loss or kernel crash may lose the last transactions committed before the last
checkpoint/fsync (never corrupts the file). ``synchronous=FULL`` (or ``EXTRA``) fsyncs the WAL on every
commit, so acknowledged appends also survive a power loss, at a much higher cost per append.

One writer. SQLite allows one writing process. The journal takes an exclusive advisory lock
(``fcntl.flock``) on the side file ``<db>.lock`` for its whole life, so a second process (or a second
journal object) opening the same store fails at once with :class:`JournalLockedError` naming the pid
holding it. The lock dies with the process, so a crashed service never leaves a stale lock behind.

High-water mark (issue 14 #6). After every commit the total number of events ever appended is written
to the side file ``<db>.hwm`` (a fixed-width number, no fsync: it can lag the database after a power
loss, never lead it). On open, a database that holds fewer events than its high-water mark lost
acknowledged events — its ``-wal`` file was damaged (SQLite silently drops the frames after the damage)
or deleted — and is refused with :class:`JournalError` naming how many are missing, unless it is
opened with ``accept_loss`` (URL ``?accept_loss=true``): then it starts with what is there, after a
warning in the log, and the mark is reset. A database file that does not exist yet starts afresh.

Threads. One connection guarded by a lock: every call is atomic with respect to the others. Because this
process is the only writer, the per-stream counters are cached in memory.

Layout (schema version in ``meta``)::

    meta(key PRIMARY KEY, value)                         -- schema_version, created_by
    streams(stream PRIMARY KEY, last_seq, compacted_seq) -- last_seq as of the last compaction; the live
                                                         -- counter is max(last_seq, max(events.seq))
    events(stream, seq, data, PRIMARY KEY(stream, seq))  -- data = canonical JSON; WITHOUT ROWID
    snapshots(stream PRIMARY KEY, seq, state, saved_at)  -- the latest snapshot only
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from quotaplane.errors import InputError
from quotaplane.journal.base import (
    SCHEMA_VERSION,
    JournalCompactedError,
    JournalError,
    JournalLockedError,
    check_append,
    check_seq,
    check_state,
    check_stream,
    decode_page,
    stream_moved,
)
from quotaplane.journal.memory import LocalLeaseCalls, LocalLeases

__all__ = ["SYNCHRONOUS_MODES", "SQLiteJournal"]

#: Accepted values of the ``synchronous`` option (SQLite PRAGMA synchronous).
SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")

_PAGE = 5000  # rows fetched per lock hold while reading

_log = logging.getLogger("quotaplane.journal")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS streams (stream TEXT PRIMARY KEY, last_seq INTEGER NOT NULL,"
    " compacted_seq INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS events (stream TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL,"
    " PRIMARY KEY (stream, seq)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS snapshots (stream TEXT PRIMARY KEY, seq INTEGER NOT NULL,"
    " state TEXT NOT NULL, saved_at REAL NOT NULL)",
)


class _Write:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any failure: every write transaction of the
    store. A class, not a generator context manager: an append runs it (two calls, not five)."""

    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        conn = self._conn
        try:
            if exc_type is None:
                conn.execute("COMMIT")
                return
        except BaseException:
            if conn.in_transaction:     # a COMMIT that failed (SQLITE_BUSY, disk full) left it open
                conn.execute("ROLLBACK")
            raise
        if conn.in_transaction:
            conn.execute("ROLLBACK")


class SQLiteJournal(LocalLeaseCalls):
    """A journal in one SQLite file (WAL mode). Thread safe; one writer process at a time.

    ``path`` is the database file (relative to the working directory when relative); its directory must
    exist. ``synchronous`` is one of :data:`SYNCHRONOUS_MODES` (see the module doc for what each
    survives). ``compact_on_snapshot`` deletes covered events whenever a snapshot is saved. ``clock``
    (monotonic seconds) drives the in-process leases.
    """

    __slots__ = ("_compact_on_snapshot", "_conn", "_counters", "_hwm_fd", "_leases", "_lock", "_lock_fd",
                 "_total", "path", "synchronous", "url")

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str = "NORMAL",
                 compact_on_snapshot: bool = False, clock: Callable[[], float] = time.monotonic,
                 url: str | None = None, accept_loss: bool = False) -> None:
        sync = str(synchronous).upper()
        if sync not in SYNCHRONOUS_MODES:
            raise InputError(f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}, "
                             f"got {synchronous!r}")
        self.path = Path(path).absolute()
        self.url = url if url is not None else f"sqlite:///{self.path}"
        self.synchronous = sync
        self._compact_on_snapshot = compact_on_snapshot
        self._leases = LocalLeases(clock)
        self._lock = threading.Lock()
        self._counters: dict[str, list[int]] = {}  # stream -> [last_seq, compacted_seq]
        if not self.path.parent.is_dir():
            raise JournalError(f"cannot open SQLite store {self.url!r}: directory {str(self.path.parent)!r} "
                               "does not exist")
        self._lock_fd: int | None = self._take_file_lock()
        self._hwm_fd: int | None = None
        self._total = 0
        existed = self.path.exists()
        try:
            self._conn: sqlite3.Connection | None = self._connect()
            self._check_high_water_mark(fresh=not existed, accept_loss=accept_loss)
        except BaseException:
            if getattr(self, "_conn", None) is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._c().close()
                self._conn = None
            self._release_file_lock()
            raise

    # -- opening --------------------------------------------------------------------------------------

    def _take_file_lock(self) -> int:
        lock_path = f"{self.path}.lock"
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise JournalError(f"cannot create the lock file {lock_path!r}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                owner = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise JournalLockedError(
                f"SQLite store {str(self.path)!r} is already in use by another writer (pid {owner}, "
                f"lock file {lock_path!r}); SQLite allows one writer process — stop it or use another "
                "store") from None
        except OSError as exc:
            os.close(fd)
            raise JournalError(f"cannot lock {lock_path!r}: {exc}") from exc
        # record who holds the lock, for the error message of the next opener (advisory only)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def _check_high_water_mark(self, *, fresh: bool, accept_loss: bool) -> None:
        """Refuse a database that lost acknowledged events (see the module doc), then open the mark."""
        hwm_path = f"{self.path}.hwm"
        try:
            fd = os.open(hwm_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise JournalError(f"cannot open the high-water mark {hwm_path!r}: {exc}") from exc
        self._hwm_fd = fd
        self._total = sum(c[0] for c in self._counters.values())
        raw = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        mark = int(raw) if raw.isdigit() else 0
        if not fresh and mark > self._total:
            missing = mark - self._total
            what = (f"SQLite store {self.url!r} holds {self._total} events, but {mark} were acknowledged: "
                    f"{missing} event{'s are' if missing != 1 else ' is'} missing (its -wal file was "
                    "damaged or deleted)")
            if not accept_loss:
                raise JournalError(f"{what}. Restore the store from a backup, or start with what is there "
                                   "by opening it with ?accept_loss=true (docs/operations.md)")
            _log.warning("%s; starting with what is there (accept_loss)", what)
        self._write_mark()

    def _write_mark(self) -> None:
        if self._hwm_fd is not None:
            os.pwrite(self._hwm_fd, b"%020d\n" % self._total, 0)

    def _release_file_lock(self) -> None:
        hwm, self._hwm_fd = self._hwm_fd, None
        if hwm is not None:
            with contextlib.suppress(OSError):
                os.close(hwm)
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise JournalError(f"cannot open SQLite store {self.url!r}: {exc}") from exc
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise JournalError(f"SQLite store {self.url!r} cannot use WAL mode (got {mode!r})")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute("PRAGMA busy_timeout=10000")  # outside readers may briefly hold the WAL
            conn.execute("BEGIN IMMEDIATE")
            try:
                for stmt in _SCHEMA:
                    conn.execute(stmt)
                row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                if row is None:
                    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?)",
                                 (str(SCHEMA_VERSION),))
                    conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('created_by', 'quotaplane')")
                elif not str(row[0]).strip().isdigit():
                    # a bare int() ValueError said nothing about where (issue 32 item 12)
                    raise JournalError(
                        f"SQLite store {self.url!r} has schema_version "
                        f"{str(row[0])[:40]!r} in its meta table, which is not a number: it is damaged, "
                        "or not a quotaplane store")
                elif int(row[0]) > SCHEMA_VERSION:
                    raise JournalError(
                        f"SQLite store {self.url!r} has schema version {row[0]}, newer than this quotaplane "
                        f"({SCHEMA_VERSION}); upgrade quotaplane")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            for stream, last, compacted in conn.execute(
                    "SELECT stream, last_seq, compacted_seq FROM streams").fetchall():
                (top,) = conn.execute("SELECT max(seq) FROM events WHERE stream = ?", (stream,)).fetchone()
                self._counters[stream] = [max(int(last), int(top or 0)), int(compacted)]
        except sqlite3.Error as exc:
            conn.close()
            raise JournalError(f"cannot initialise SQLite store {self.url!r}: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def __repr__(self) -> str:
        return f"SQLiteJournal({self.url!r})"

    def __enter__(self) -> SQLiteJournal:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _c(self) -> sqlite3.Connection:
        if self._conn is None:
            raise JournalError(f"journal {self.url!r} is closed")
        return self._conn

    # -- events ---------------------------------------------------------------------------------------

    def append(self, stream: str, events: Sequence[Mapping[str, Any]], *, holder: str | None = None,
               after: int | None = None) -> int:
        """Append events in one committed transaction; see :meth:`Journal.append`."""
        texts = check_append(stream, events, holder)
        with self._lock:
            conn = self._c()
            if holder is not None:
                self._leases.check(stream, holder)
            counters = self._counters.get(stream)
            last = 0 if counters is None else counters[0]
            if after is not None and holder is not None and last != after:
                raise stream_moved(stream, last, after, self._leases.holder(stream))
            if not texts:
                return last
            new_last = last + len(texts)
            try:
                if len(texts) == 1 and counters is not None and not conn.in_transaction:
                    # the common case (one change of a known stream): one statement is one transaction
                    # (SQLite's autocommit: committed when it returns, undone whole when it fails) —
                    # BEGIN IMMEDIATE and COMMIT around it were two more statements per decision
                    # (this process is the only writer, so taking the write lock up front waits for
                    # nobody; never inside a transaction left open, which the INSERT would join)
                    conn.execute("INSERT INTO events(stream, seq, data) VALUES (?, ?, ?)",
                                 (stream, new_last, texts[0]))
                else:
                    self._append_many(conn, stream, texts, last, counters is None)
            except sqlite3.Error as exc:
                raise JournalError(f"append to {stream!r} failed in {self.url!r}: {exc}") from exc
            if counters is None:
                self._counters[stream] = [new_last, 0]
            else:
                counters[0] = new_last
            self._total += len(texts)
            try:
                self._write_mark()
            except OSError:       # the events are committed; a stale mark only weakens the check
                _log.warning("cannot update the high-water mark of %s", self.url, exc_info=True)
            return new_last

    def _append_many(self, conn: sqlite3.Connection, stream: str, texts: list[str], last: int,
                     new_stream: bool) -> None:
        """Several events, or the first of a stream (its row in ``streams`` too), in one transaction."""
        with _Write(conn):
            if len(texts) == 1:  # skip executemany's overhead
                conn.execute("INSERT INTO events(stream, seq, data) VALUES (?, ?, ?)",
                             (stream, last + 1, texts[0]))
            else:
                conn.executemany("INSERT INTO events(stream, seq, data) VALUES (?, ?, ?)",
                                 [(stream, last + i, t) for i, t in enumerate(texts, 1)])
            if new_stream:
                conn.execute("INSERT INTO streams(stream, last_seq, compacted_seq) VALUES (?, ?, 0)",
                             (stream, last + len(texts)))
            # no UPDATE of streams.last_seq per append: the live counter is max(events.seq),
            # recomputed at open (halves the cost of a single append; see the module doc)

    def read(self, stream: str, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """Iterate ``(seq, event)`` with ``seq > after`` in pages; see :meth:`Journal.read`."""
        check_stream(stream)
        check_seq(after, "after")
        with self._lock:
            self._c()
            counters = self._counters.get(stream)
            if counters is not None and after < counters[1]:
                raise JournalCompactedError(
                    f"events 1..{counters[1]} of stream {stream!r} were compacted; cannot read after "
                    f"{after} (load the snapshot first)", counters[1])
        return self._iter(stream, after)

    def _iter(self, stream: str, after: int) -> Iterator[tuple[int, dict[str, Any]]]:
        seq = after
        while True:
            with self._lock:
                conn = self._c()
                counters = self._counters.get(stream)
                if counters is not None and seq < counters[1]:
                    raise JournalCompactedError(
                        f"stream {stream!r} was compacted past {seq} during the read", counters[1])
                try:
                    rows = conn.execute(
                        "SELECT seq, data FROM events WHERE stream = ? AND seq > ? ORDER BY seq LIMIT ?",
                        (stream, seq, _PAGE)).fetchall()
                except sqlite3.Error as exc:
                    raise JournalError(f"read of {stream!r} failed in {self.url!r}: {exc}") from exc
            if rows and (rows[0][0] != seq + 1 or rows[-1][0] != seq + len(rows)):
                # integrity: seqs are contiguous by construction (PRIMARY KEY + one writer)
                expected = seq + 1
                for found, _data in rows:
                    if found != expected:
                        break
                    expected += 1
                raise JournalError(f"stream {stream!r} in {self.url!r} has a gap: event #{expected} is "
                                   f"missing (the next stored event is #{found})")
            for data in decode_page([r[1] for r in rows]):
                seq += 1
                yield seq, data
            if len(rows) < _PAGE:
                return

    def last_seq(self, stream: str) -> int:
        """The last seq of ``stream`` (0 if none)."""
        check_stream(stream)
        with self._lock:
            self._c()
            counters = self._counters.get(stream)
            return 0 if counters is None else counters[0]

    # -- snapshots ------------------------------------------------------------------------------------

    def save_snapshot(self, stream: str, seq: int, state: Mapping[str, Any]) -> None:
        """Replace the snapshot of ``stream`` by ``state`` at ``seq``; see :meth:`Journal.save_snapshot`."""
        check_stream(stream)
        check_seq(seq)
        text = check_state(state)
        with self._lock:
            conn = self._c()
            counters = self._counters.get(stream)
            last = 0 if counters is None else counters[0]
            if seq > last:
                raise InputError(f"snapshot seq {seq} is beyond the last event {last} of stream {stream!r}")
            try:
                row = conn.execute("SELECT seq FROM snapshots WHERE stream = ?", (stream,)).fetchone()
                if row is not None and seq < int(row[0]):
                    raise InputError(f"snapshot seq {seq} is older than the saved snapshot at {row[0]} of "
                                     f"stream {stream!r}")
                with _Write(conn):
                    if counters is None:
                        conn.execute("INSERT INTO streams(stream, last_seq, compacted_seq) VALUES (?, 0, 0)",
                                     (stream,))
                    conn.execute(
                        "INSERT INTO snapshots(stream, seq, state, saved_at) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT(stream) DO UPDATE SET seq = excluded.seq, state = excluded.state, "
                        "saved_at = excluded.saved_at", (stream, seq, text, time.time()))
                    compacted = self._compact_sql(conn, stream, seq, counters) \
                        if self._compact_on_snapshot else None
            except sqlite3.Error as exc:
                raise JournalError(f"snapshot of {stream!r} failed in {self.url!r}: {exc}") from exc
            if counters is None:
                counters = self._counters[stream] = [0, 0]
            if compacted is not None:
                counters[1] = compacted

    def load_snapshot(self, stream: str) -> tuple[int, dict[str, Any]] | None:
        """The latest snapshot of ``stream`` or ``None``."""
        check_stream(stream)
        with self._lock:
            try:
                row = self._c().execute("SELECT seq, state FROM snapshots WHERE stream = ?",
                                        (stream,)).fetchone()
            except sqlite3.Error as exc:
                raise JournalError(f"loading the snapshot of {stream!r} failed: {exc}") from exc
        return None if row is None else (int(row[0]), json.loads(row[1]))

    def compact(self, stream: str) -> int:
        """Delete the events covered by the snapshot in one transaction; return how many were deleted."""
        check_stream(stream)
        with self._lock:
            conn = self._c()
            counters = self._counters.get(stream)
            if counters is None:
                return 0
            try:
                row = conn.execute("SELECT seq FROM snapshots WHERE stream = ?", (stream,)).fetchone()
                if row is None or int(row[0]) <= counters[1]:
                    return 0
                upto = int(row[0])
                with _Write(conn):
                    self._compact_sql(conn, stream, upto, counters)
            except sqlite3.Error as exc:
                raise JournalError(f"compaction of {stream!r} failed in {self.url!r}: {exc}") from exc
            removed = upto - counters[1]
            counters[1] = upto
            return removed

    @staticmethod
    def _compact_sql(conn: sqlite3.Connection, stream: str, upto: int, counters: list[int] | None) -> int:
        """Inside a transaction: delete events ``<= upto``; return the new compacted seq."""
        old = 0 if counters is None else counters[1]
        if upto <= old:
            return old
        conn.execute("DELETE FROM events WHERE stream = ? AND seq <= ?", (stream, upto))
        # record the counter too: if every event is deleted, max(events.seq) no longer gives it
        last = 0 if counters is None else counters[0]
        conn.execute("UPDATE streams SET compacted_seq = ?, last_seq = ? WHERE stream = ?",
                     (upto, last, stream))
        return upto

    def streams(self) -> list[str]:
        """Every stream with events or a snapshot, sorted."""
        with self._lock:
            self._c()
            return sorted(self._counters)

    # -- leases: in-process (LocalLeaseCalls); this process is the only writer (file lock) --------------

    def _ensure_open(self) -> None:
        self._c()

    # -- closing --------------------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Fold the WAL into the database file (``PRAGMA wal_checkpoint(TRUNCATE)``); optional upkeep."""
        with self._lock:
            try:
                self._c().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.Error as exc:
                raise JournalError(f"checkpoint of {self.url!r} failed: {exc}") from exc

    def close(self) -> None:
        """Close the connection and release the writer lock. Idempotent."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._release_file_lock()
