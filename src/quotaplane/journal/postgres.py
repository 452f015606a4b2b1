"""The PostgreSQL journal (``postgresql://…``): the production store and the basis of fail-over (S1, issue 7).

Several service instances may share one database. Correctness does not rely on the instances agreeing
among themselves:

* **Sequence numbers** are assigned by an atomic ``INSERT … ON CONFLICT DO UPDATE SET last_seq = last_seq
  + n RETURNING last_seq`` on the ``streams`` row, in the same single statement that inserts the events.
  The row stays locked until commit, so two instances can never both append the same seq, and commits
  of one stream happen in seq order (a reader never sees seq 7 before 5 and 6 are visible).
* **Leases** live in the ``leases`` table and are timed by the database clock (``clock_timestamp()``),
  never by the instances' clocks. ``acquire_lease`` is one upsert that succeeds only when the lease is
  free, expired, or already held by the caller.
* **Fencing**: ``append(…, holder=h)`` locks the lease row ``FOR SHARE`` and checks that ``h`` holds a
  live lease in the same statement (hence transaction) as the insert. A competing ``acquire_lease`` must
  update that row, so it waits until the append commits or rolls back; a new leader that catches up by
  reading the journal after acquiring the lease therefore sees every append of the old leader, and an old
  leader whose lease was lost gets :class:`~quotaplane.errors.NotLeaderError` and writes nothing.

Durability is the server's: with the default ``synchronous_commit=on`` an append is on disk before it
returns. One connection guarded by a lock serves every thread of the journal object; a connection that
broke is replaced: idempotent calls (reads, leases) reconnect and retry once; an append that fails
raises and is never retried, because a lost COMMIT acknowledgement is ambiguous (the next call
reconnects). It raises :class:`OutcomeUnknownError` when the connection broke after the append was
sent (it may have committed), a plain :class:`JournalError` when the server refused it on a live
connection or it was never sent (nothing was written). After an unknown outcome the next call first
ends the session that ran the append (``pg_terminate_backend``) and waits until it is gone: a frozen
network can leave it running, and it could commit after a read that found nothing (issue 32 #3). So
what the journal reads after an unknown outcome is final.

A call never waits on the network for longer than ``op_timeout`` seconds (default 10, URL option
``?op_timeout=``): a watchdog thread cuts the connection of a call that runs longer — a frozen
network (packets dropped silently) otherwise holds a call for as long as TCP takes to give up, and
with it the service's writes and its leases' renewals (issue 32 #4). The cut call fails like any
broken connection (an append: :class:`OutcomeUnknownError`, read back by the caller). Keep it above
the longest legitimate statement (a large snapshot).

Tables live in one schema (default ``quotaplane``, option ``?schema=name``), created if missing, with the
schema version in ``meta``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import psycopg

from quotaplane.errors import InputError, NotLeaderError
from quotaplane.journal.base import (
    _SCHEMA_RE,
    SCHEMA_VERSION,
    JournalCompactedError,
    JournalError,
    OutcomeUnknownError,
    check_append,
    check_lease_args,
    check_seq,
    check_state,
    check_stream,
    decode_page,
    mask_url,
    stream_moved,
)

__all__ = ["DEFAULT_SCHEMA", "PostgresJournal"]

#: The schema holding the tables unless the URL says ``?schema=…``.
DEFAULT_SCHEMA = "quotaplane"

_PAGE = 5000  # rows per query while reading

#: seconds to wait for the session of an append whose outcome is unknown to end
ORPHAN_TIMEOUT = 10.0

#: the longest a call may wait on the network before its connection is cut (``?op_timeout=``)
DEFAULT_OP_TIMEOUT = 10.0


class _Watchdog:
    """One thread for every journal of the process: cuts the connection of a call that outlived its
    deadline (shutting the socket down wakes the call with an error). It runs while some journal is
    open and ends by itself after."""

    def __init__(self) -> None:
        self._journals: weakref.WeakSet[PostgresJournal] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, journal: PostgresJournal) -> None:
        with self._lock:
            self._journals.add(journal)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="quotaplane-pg-watchdog", daemon=True)
                self._thread.start()

    def forget(self, journal: PostgresJournal) -> None:
        with self._lock:
            self._journals.discard(journal)

    def _run(self) -> None:
        while True:
            time.sleep(0.1)
            with self._lock:
                journals = list(self._journals)
                if not journals:
                    self._thread = None
                    return
            now = time.monotonic()
            for j in journals:
                j._cut_if_overdue(now)


_WATCHDOG = _Watchdog()


class _Guard:
    """The journal's lock; holding it arms the watchdog's deadline for the call."""

    __slots__ = ("_journal", "_lock")

    def __init__(self, journal: PostgresJournal) -> None:
        self._journal = journal
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        self._lock.acquire()
        self._journal._deadline = time.monotonic() + self._journal.op_timeout

    def __exit__(self, *exc: object) -> None:
        self._journal._deadline = None
        self._lock.release()


class PostgresJournal:
    """A journal in PostgreSQL (psycopg 3). Thread safe; safe for several processes on one database.

    ``dsn`` is a libpq URL or key/value string; ``schema`` the schema holding the tables.
    ``compact_on_snapshot`` deletes covered events whenever a snapshot is saved. ``url`` is what
    :attr:`url` reports (defaults to ``dsn``). ``op_timeout``: see the module docstring.
    """

    __slots__ = ("__weakref__", "_append_sql", "_closed", "_compact_on_snapshot", "_conn", "_deadline",
                 "_dsn", "_fenced_after_sql", "_fenced_append_sql", "_lock", "_orphan", "_q", "_session",
                 "op_timeout", "schema", "url")

    def __init__(self, dsn: str, *, schema: str = DEFAULT_SCHEMA, compact_on_snapshot: bool = False,
                 url: str | None = None, op_timeout: float = DEFAULT_OP_TIMEOUT) -> None:
        if not _SCHEMA_RE.match(schema):
            raise InputError(f"schema must be an identifier (letters, digits, _), got {schema!r}")
        if not op_timeout > 0:
            raise InputError(f"op_timeout must be a positive number of seconds, got {op_timeout!r}")
        self.op_timeout = float(op_timeout)
        #: when the call under way must be over (None: no call), watched by the watchdog
        self._deadline: float | None = None
        self._dsn = dsn
        self.url = url if url is not None else dsn
        self.schema = schema
        self._compact_on_snapshot = compact_on_snapshot
        self._lock = _Guard(self)
        self._closed = False
        s = f'"{schema}"'  # validated identifier, quoted: safe to splice into SQL
        self._q = {
            "events": f"{s}.events", "streams": f"{s}.streams", "snapshots": f"{s}.snapshots",
            "leases": f"{s}.leases", "meta": f"{s}.meta",
        }
        # the seq counter is bumped atomically on the streams row, which stays locked until commit: two
        # instances can never get the same seq. The event texts travel as one binary text[] (%b): no
        # array-literal quoting of the JSON, several times faster than a text-format array.
        insert = (
            "s AS (INSERT INTO {streams} AS s (stream, last_seq) {source} "
            "ON CONFLICT (stream) DO UPDATE SET last_seq = s.last_seq + EXCLUDED.last_seq {guard}"
            "RETURNING s.last_seq), "
            "e AS (INSERT INTO {events} (stream, seq, data) "
            "SELECT %(stream)s, s.last_seq - %(n)s + t.ord, t.d "
            "FROM s, unnest(%(data)b::text[]) WITH ORDINALITY AS t(d, ord)) "
            "SELECT last_seq FROM s")
        self._append_sql = "WITH " + insert.format(
            streams=self._q["streams"], events=self._q["events"], source="VALUES (%(stream)s, %(n)s)",
            guard="")
        # fencing: the lease row is locked FOR SHARE first (a competing acquire_lease waits for our
        # commit) and nothing is inserted unless the holder's lease is live on the database clock
        lease = (f"WITH l AS (SELECT 1 FROM {self._q['leases']} WHERE stream = %(stream)s "
                 "AND holder = %(holder)s AND expires_at > clock_timestamp() FOR SHARE), ")
        self._fenced_append_sql = lease + insert.format(
            streams=self._q["streams"], events=self._q["events"],
            source="SELECT %(stream)s, %(n)s WHERE EXISTS (SELECT 1 FROM l)", guard="")
        # and only on top of the state it was decided on (``after``): the row update is skipped, so
        # nothing is inserted, unless the stream ends there (a new stream: only after 0)
        self._fenced_after_sql = lease + insert.format(
            streams=self._q["streams"], events=self._q["events"],
            source=(f"SELECT %(stream)s, %(n)s WHERE EXISTS (SELECT 1 FROM l) AND (%(after)s = 0 OR "
                    f"EXISTS (SELECT 1 FROM {self._q['streams']} WHERE stream = %(stream)s))"),
            guard="WHERE s.last_seq = %(after)s ")
        self._conn: psycopg.Connection[Any] | None = None
        #: the server session of the connection: (backend pid, backend start)
        self._session: tuple[int, Any] | None = None
        #: the session of an append whose outcome is unknown, until it is known to be gone
        self._orphan: tuple[int, Any] | None = None
        _WATCHDOG.watch(self)
        with self._lock:
            self._init_schema(self._connection())

    # -- connection -----------------------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        """The live connection (reconnecting if the previous one broke). Call under the lock."""
        if self._closed:
            raise JournalError(f"journal {mask_url(self.url)!r} is closed")
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in self._dsn:
            # libpq counts whole seconds, 2 at least; a frozen network must not outlast op_timeout
            kwargs["connect_timeout"] = max(2, min(10, math.ceil(self.op_timeout)))
        self._conn = None
        conn = None
        try:
            conn = psycopg.connect(self._dsn, **kwargs)
            row = conn.execute("SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
                               ).fetchone()
            if self._orphan is not None:        # no call is served before that session is gone
                self._end_orphan(conn, self._orphan)
        except (psycopg.Error, JournalError) as exc:
            if conn is not None:
                with contextlib.suppress(psycopg.Error):
                    conn.close()
            if isinstance(exc, JournalError):
                raise
            raise JournalError(f"cannot connect to PostgreSQL store {mask_url(self.url)!r}: {exc}") from exc
        self._orphan = None
        self._session = (int(row[0]), row[1]) if row is not None else None
        self._conn = conn
        return conn

    def _end_orphan(self, conn: psycopg.Connection[Any], session: tuple[int, Any]) -> None:
        """End the server session that ran an append whose outcome is unknown and wait until it is
        gone: until then it may still commit (issue 32 #3). The session is named by its pid *and*
        start time, so a new session that reuses the pid (after a server restart) is left alone."""
        sql = "FROM pg_stat_activity WHERE pid = %s AND backend_start = %s"
        conn.execute(f"SELECT pg_terminate_backend(pid) {sql}", session)
        deadline = time.monotonic() + ORPHAN_TIMEOUT
        while conn.execute(f"SELECT 1 {sql}", session).fetchone() is not None:
            if time.monotonic() > deadline:
                raise JournalError(f"the session {session[0]} of an append whose outcome is unknown "
                                   f"still runs in {mask_url(self.url)!r}")
            time.sleep(0.01)

    def _init_schema(self, conn: psycopg.Connection[Any]) -> None:
        q = self._q
        try:
            with conn.transaction():
                # serialise schema creation between instances starting at the same time
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"quotaplane:{self.schema}",))
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                conn.execute(f"CREATE TABLE IF NOT EXISTS {q['meta']} "
                             "(key text PRIMARY KEY, value text NOT NULL)")
                conn.execute(f"CREATE TABLE IF NOT EXISTS {q['streams']} (stream text PRIMARY KEY, "
                             "last_seq bigint NOT NULL, compacted_seq bigint NOT NULL DEFAULT 0)")
                conn.execute(f"CREATE TABLE IF NOT EXISTS {q['events']} (stream text NOT NULL, "
                             "seq bigint NOT NULL, data text NOT NULL, PRIMARY KEY (stream, seq))")
                conn.execute(f"CREATE TABLE IF NOT EXISTS {q['snapshots']} (stream text PRIMARY KEY, "
                             "seq bigint NOT NULL, state text NOT NULL, "
                             "saved_at timestamptz NOT NULL DEFAULT clock_timestamp())")
                conn.execute(f"CREATE TABLE IF NOT EXISTS {q['leases']} (stream text PRIMARY KEY, "
                             "holder text NOT NULL, expires_at timestamptz NOT NULL)")
                row = conn.execute(f"SELECT value FROM {q['meta']} WHERE key = 'schema_version'").fetchone()
                if row is None:
                    conn.execute(f"INSERT INTO {q['meta']} (key, value) VALUES ('schema_version', %s)",
                                 (str(SCHEMA_VERSION),))
                elif not str(row[0]).strip().isdigit():
                    # a bare int() ValueError said nothing about where (issue 32 item 12)
                    raise JournalError(
                        f"PostgreSQL store {mask_url(self.url)!r} schema {self.schema!r} has schema_version "
                        f"{str(row[0])[:40]!r} in its meta table, which is not a number: it is damaged, "
                        "or not a quotaplane store")
                elif int(row[0]) > SCHEMA_VERSION:
                    raise JournalError(
                        f"PostgreSQL store {mask_url(self.url)!r} schema {self.schema!r} has version "
                        f"{row[0]}, newer than this quotaplane ({SCHEMA_VERSION}); upgrade quotaplane")
        except psycopg.Error as exc:
            raise JournalError(f"cannot initialise PostgreSQL store {mask_url(self.url)!r}: {exc}") from exc

    def __repr__(self) -> str:
        return f"PostgresJournal({mask_url(self.url)!r}, schema={self.schema!r})"

    def __enter__(self) -> PostgresJournal:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _fail(self, what: str, exc: psycopg.Error) -> JournalError:
        return JournalError(f"{what} failed in {mask_url(self.url)!r}: {exc}")

    def _query(self, what: str, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """Run one idempotent statement under the lock held by the caller; return its first row.

        If the connection turns out to be dead (idle timeout, server restart), reconnect and run the
        statement once more: safe because every statement sent here gives the same result when repeated
        (reads, lease renewal by the same holder, lease release). Appends never come here.
        """
        for attempt in (0, 1):
            conn = self._connection()
            try:
                return conn.execute(sql, params).fetchone()
            except psycopg.OperationalError as exc:
                if attempt == 0 and (conn.broken or conn.closed):
                    continue
                raise self._fail(what, exc) from exc
            except psycopg.Error as exc:
                raise self._fail(what, exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    # -- events ---------------------------------------------------------------------------------------

    def append(self, stream: str, events: Sequence[Mapping[str, Any]], *, holder: str | None = None,
               after: int | None = None) -> int:
        """Append events in one transaction; see :meth:`Journal.append` and the module doc (fencing)."""
        texts = check_append(stream, events, holder)
        q = self._q
        with self._lock:
            conn = self._connection()
            try:
                if not texts:
                    with conn.transaction():
                        if holder is not None:
                            self._check_lease_locked(conn, stream, holder)
                        row = conn.execute(f"SELECT last_seq FROM {q['streams']} WHERE stream = %s",
                                           (stream,)).fetchone()
                        return 0 if row is None else int(row[0])
                # one statement = one round trip and one implicit transaction (autocommit): the lease
                # check, the seq increment and the insert commit together or not at all
                params = {"stream": stream, "n": len(texts), "data": texts, "holder": holder, "after": after}
                sql = (self._append_sql if holder is None else
                       self._fenced_append_sql if after is None else self._fenced_after_sql)
                row = conn.execute(sql, params).fetchone()
            except psycopg.Error as exc:
                if conn.broken or conn.closed:
                    # sent, then the connection broke: it may have committed (the next call ends
                    # its session first, so what is read then is final)
                    self._orphan = self._session
                    raise OutcomeUnknownError(f"append to {stream!r} in {mask_url(self.url)!r}: the "
                                              f"connection broke after it was sent, it may or may not "
                                              f"have been committed ({exc})") from exc
                raise self._fail(f"append to {stream!r}", exc) from exc
            if row is None:  # only the fenced statements return no row: the lease or after failed
                live = self._lease_holder_locked(stream)
                if after is not None and live == holder:
                    last = self._query(f"last_seq of {stream!r}",
                                       f"SELECT last_seq FROM {q['streams']} WHERE stream = %s", (stream,))
                    raise stream_moved(stream, 0 if last is None else int(last[0]), after, live)
                raise NotLeaderError(
                    f"{holder!r} does not hold the lease of stream {stream!r}"
                    + (f" (held by {live!r})" if live else " (no live lease)"), leader=live)
            return int(row[0])

    def _check_lease_locked(self, conn: psycopg.Connection[Any], stream: str, holder: str) -> None:
        """In a transaction: lock the lease row (FOR SHARE) and raise NotLeaderError unless held live."""
        row = conn.execute(
            f"SELECT holder, expires_at > clock_timestamp() FROM {self._q['leases']} "
            "WHERE stream = %s FOR SHARE", (stream,)).fetchone()
        live = row[0] if row is not None and row[1] else None
        if live != holder:
            raise NotLeaderError(
                f"{holder!r} does not hold the lease of stream {stream!r}"
                + (f" (held by {live!r})" if live else " (no live lease)"), leader=live)

    def read(self, stream: str, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """Iterate ``(seq, event)`` with ``seq > after`` in pages; see :meth:`Journal.read`."""
        check_stream(stream)
        check_seq(after, "after")
        with self._lock:
            compacted = self._compacted_seq(stream)
        if after < compacted:
            raise JournalCompactedError(
                f"events 1..{compacted} of stream {stream!r} were compacted; cannot read after {after} "
                "(load the snapshot first)", compacted)
        return self._iter(stream, after)

    def _compacted_seq(self, stream: str) -> int:
        row = self._query(f"read of {stream!r}",
                          f"SELECT compacted_seq FROM {self._q['streams']} WHERE stream = %s", (stream,))
        return 0 if row is None else int(row[0])

    def _iter(self, stream: str, after: int) -> Iterator[tuple[int, dict[str, Any]]]:
        # One row per page: the server joins the page's JSON texts (in seq order) into one string, so the
        # client decodes a whole page with one parse instead of building 5,000 rows (restart time, quality.md)
        seq = after
        sql = (f"SELECT count(*), min(seq), max(seq), string_agg(data, ',' ORDER BY seq) "
               f"FROM {self._q['events']} WHERE stream = %s AND seq > %s AND seq <= %s")
        while True:
            with self._lock:
                row = self._query(f"read of {stream!r}", sql, (stream, seq, seq + _PAGE))
                assert row is not None
                count = int(row[0])
                if count == 0 or int(row[1]) != seq + 1:
                    compacted = self._compacted_seq(stream)
                    if seq < compacted:  # another instance compacted while we were reading
                        raise JournalCompactedError(
                            f"stream {stream!r} was compacted past {seq} during the read", compacted)
            if count == 0:
                return
            if int(row[1]) != seq + 1 or int(row[2]) != seq + count:
                # integrity: seqs are contiguous by construction (PRIMARY KEY + locked counter)
                raise JournalError(f"stream {stream!r} in {mask_url(self.url)!r} has a gap after seq {seq}")
            # the comma-joined canonical texts are the body of one JSON array
            for data in decode_page([row[3]], count):
                seq += 1
                yield seq, data
            if count < _PAGE:
                return

    def last_seq(self, stream: str) -> int:
        """The last seq of ``stream`` (0 if none)."""
        check_stream(stream)
        with self._lock:
            row = self._query(f"last_seq of {stream!r}",
                              f"SELECT last_seq FROM {self._q['streams']} WHERE stream = %s", (stream,))
        return 0 if row is None else int(row[0])

    # -- snapshots ------------------------------------------------------------------------------------

    def save_snapshot(self, stream: str, seq: int, state: Mapping[str, Any]) -> None:
        """Replace the snapshot of ``stream`` by ``state`` at ``seq``; see :meth:`Journal.save_snapshot`."""
        check_stream(stream)
        check_seq(seq)
        text = check_state(state)
        q = self._q
        with self._lock:
            conn = self._connection()
            try:
                with conn.transaction():
                    conn.execute(f"INSERT INTO {q['streams']} (stream, last_seq) VALUES (%s, 0) "
                                 "ON CONFLICT (stream) DO NOTHING", (stream,))
                    row = conn.execute(f"SELECT last_seq, compacted_seq FROM {q['streams']} "
                                       "WHERE stream = %s FOR UPDATE", (stream,)).fetchone()
                    assert row is not None
                    last, compacted = int(row[0]), int(row[1])
                    if seq > last:
                        raise InputError(f"snapshot seq {seq} is beyond the last event {last} of stream "
                                         f"{stream!r}")
                    old = conn.execute(f"SELECT seq FROM {q['snapshots']} WHERE stream = %s",
                                       (stream,)).fetchone()
                    if old is not None and seq < int(old[0]):
                        raise InputError(f"snapshot seq {seq} is older than the saved snapshot at "
                                         f"{old[0]} of stream {stream!r}")
                    conn.execute(
                        f"INSERT INTO {q['snapshots']} (stream, seq, state, saved_at) "
                        "VALUES (%s, %s, %s, clock_timestamp()) ON CONFLICT (stream) DO UPDATE SET "
                        "seq = EXCLUDED.seq, state = EXCLUDED.state, saved_at = EXCLUDED.saved_at",
                        (stream, seq, text))
                    if self._compact_on_snapshot and seq > compacted:
                        self._compact_sql(conn, stream, seq)
            except psycopg.Error as exc:
                raise self._fail(f"snapshot of {stream!r}", exc) from exc

    def load_snapshot(self, stream: str) -> tuple[int, dict[str, Any]] | None:
        """The latest snapshot of ``stream`` or ``None``."""
        check_stream(stream)
        with self._lock:
            row = self._query(f"loading the snapshot of {stream!r}",
                              f"SELECT seq, state FROM {self._q['snapshots']} WHERE stream = %s", (stream,))
        return None if row is None else (int(row[0]), json.loads(row[1]))

    def compact(self, stream: str) -> int:
        """Delete the events covered by the snapshot in one transaction; return how many were deleted."""
        check_stream(stream)
        q = self._q
        with self._lock:
            conn = self._connection()
            try:
                with conn.transaction():
                    row = conn.execute(
                        f"SELECT s.compacted_seq, p.seq FROM {q['streams']} s JOIN {q['snapshots']} p "
                        "USING (stream) WHERE stream = %s FOR UPDATE OF s", (stream,)).fetchone()
                    if row is None or int(row[1]) <= int(row[0]):
                        return 0
                    return self._compact_sql(conn, stream, int(row[1]))
            except psycopg.Error as exc:
                raise self._fail(f"compaction of {stream!r}", exc) from exc

    def _compact_sql(self, conn: psycopg.Connection[Any], stream: str, upto: int) -> int:
        """In a transaction holding the streams row: delete events ``<= upto``; return the count."""
        cur = conn.execute(f"DELETE FROM {self._q['events']} WHERE stream = %s AND seq <= %s", (stream, upto))
        conn.execute(f"UPDATE {self._q['streams']} SET compacted_seq = %s WHERE stream = %s", (upto, stream))
        return max(cur.rowcount, 0)

    def streams(self) -> list[str]:
        """Every stream with events or a snapshot, sorted (by code point, like Python)."""
        with self._lock:
            row = self._query("listing streams", f"SELECT array_agg(stream) FROM {self._q['streams']}")
        return sorted(str(x) for x in (row[0] if row is not None and row[0] is not None else []))

    # -- leases (database clock) ----------------------------------------------------------------------

    def acquire_lease(self, stream: str, holder: str, ttl: float) -> bool:
        """Take or renew the lease for ``ttl`` seconds of the database clock; see the module doc."""
        check_lease_args(stream, holder, ttl)
        with self._lock:
            row = self._query(
                f"acquiring the lease of {stream!r}",
                f"INSERT INTO {self._q['leases']} AS l (stream, holder, expires_at) "
                "VALUES (%s, %s, clock_timestamp() + make_interval(secs => %s)) "
                "ON CONFLICT (stream) DO UPDATE SET holder = EXCLUDED.holder, "
                "expires_at = clock_timestamp() + make_interval(secs => %s) "
                "WHERE l.holder = EXCLUDED.holder OR l.expires_at <= clock_timestamp() "
                "RETURNING l.holder", (stream, holder, float(ttl), float(ttl)))
        return row is not None

    def release_lease(self, stream: str, holder: str) -> None:
        """Give up the lease if held by ``holder``."""
        check_lease_args(stream, holder)
        with self._lock:
            self._query(f"releasing the lease of {stream!r}",
                        f"DELETE FROM {self._q['leases']} WHERE stream = %s AND holder = %s RETURNING 1",
                        (stream, holder))

    def lease_holder(self, stream: str) -> str | None:
        """The live lease holder (database clock) or ``None``."""
        check_stream(stream)
        with self._lock:
            return self._lease_holder_locked(stream)

    def _lease_holder_locked(self, stream: str) -> str | None:
        row = self._query(f"reading the lease of {stream!r}",
                          f"SELECT holder FROM {self._q['leases']} WHERE stream = %s "
                          "AND expires_at > clock_timestamp()", (stream,))
        return None if row is None else str(row[0])

    # -- closing --------------------------------------------------------------------------------------

    def drop_schema(self) -> None:
        """Drop the whole schema with every table in it (tests and tear-down only), then close."""
        with self._lock:
            conn = self._connection()
            try:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
            except psycopg.Error as exc:
                raise self._fail(f"dropping schema {self.schema!r}", exc) from exc
        self.close()

    def _cut_if_overdue(self, now: float) -> None:
        """(The watchdog) Shut the connection of a call past its deadline down: the call fails at
        once with a broken connection instead of waiting for a frozen network."""
        deadline, conn = self._deadline, self._conn
        if deadline is None or now < deadline or conn is None or conn.closed:
            return
        self._deadline = None                  # once per call
        try:
            fd = conn.pgconn.socket
            with socket.socket(fileno=os.dup(fd)) as s:
                s.shutdown(socket.SHUT_RDWR)
        except (OSError, psycopg.Error):       # already gone: the call fails by itself
            return

    def close(self) -> None:
        """Close the connection. Idempotent."""
        _WATCHDOG.forget(self)
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(psycopg.Error):
                    conn.close()
