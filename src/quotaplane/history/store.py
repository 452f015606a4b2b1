"""Where the rollups live: the same store as the journal (memory, SQLite, PostgreSQL), own tables.

One row per partition, resolution, scope and period end (:class:`~quotaplane.history.engine.Row`)::

    history_meta(key PRIMARY KEY, value)                          -- history_schema_version
    history_rows(partition, res, kind, name, t, data,             -- data = canonical JSON
                 PRIMARY KEY (partition, res, kind, name, t))     -- + index (partition, res, t)

The tables sit beside the journal's (in the SQLite file, in the PostgreSQL schema of the store URL)
and are created when the store is first opened for history, with their own schema version. Writing
a row is an upsert: a row is a function of the journal (the same events give the same row on every
instance and every replay), so writing it again — after a restart, or by a new leader catching up,
or by an old leader that has not noticed yet — writes the same value. That is why rows need no
fencing: the journal's fencing already decides which events exist.

**Retention.** Each resolution keeps its rows for a configured time; pruning keeps, per scope, the
newest row older than the cutoff (an idle scope's integral at any later boundary is read from it).
"""

from __future__ import annotations

import bisect
import contextlib
import json
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from quotaplane.history.engine import Row

__all__ = ["SCHEMA_VERSION", "HistoryStore", "MemoryHistoryStore", "PostgresHistoryStore",
           "SQLiteHistoryStore", "open_history_store"]

#: the version of the history tables (``history_meta.history_schema_version``)
SCHEMA_VERSION = 1


def _text(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


class HistoryStore(ABC):
    """The rollup rows of every partition (thread safe)."""

    @abstractmethod
    def write(self, partition: str, rows: Sequence[Row]) -> None:
        """Upsert ``rows`` of ``partition`` in one transaction."""

    @abstractmethod
    def rows(self, partition: str, resolution: int, kind: str, start: int, end: int,
             names: Sequence[str] | None = None) -> list[Row]:
        """The rows of ``kind`` scopes (``names`` only, when given) with ``start < t ≤ end``, by time."""

    @abstractmethod
    def latest(self, partition: str, resolution: int, kind: str, at: int,
               names: Sequence[str] | None = None) -> dict[str, Row]:
        """Per scope of ``kind`` (``names`` only, when given): its newest row with ``t ≤ at``."""

    @abstractmethod
    def prune(self, partition: str, resolution: int, before: int) -> int:
        """Delete the rows older than ``before``, keeping each scope's newest one; how many went."""

    @abstractmethod
    def count(self) -> int:
        """How many rows the store holds."""

    def close(self) -> None:  # noqa: B027 - a no-op for stores without a connection
        """Release the connection (the journal stays open)."""


class MemoryHistoryStore(HistoryStore):
    """Rows in memory (the memory journal's; tests)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: (partition, res, kind) -> name -> sorted times, and the rows by time
        self._by: dict[tuple[str, int, str], dict[str, tuple[list[int], dict[int, Row]]]] = {}

    def write(self, partition: str, rows: Sequence[Row]) -> None:
        with self._lock:
            for r in rows:
                names = self._by.setdefault((partition, r.resolution, r.kind), {})
                times, by_t = names.setdefault(r.name, ([], {}))
                if r.t not in by_t:
                    bisect.insort(times, r.t)
                by_t[r.t] = Row(r.resolution, r.t, r.kind, r.name, json.loads(_text(r.data)))

    def _names(self, partition: str, resolution: int, kind: str, names: Sequence[str] | None
               ) -> Iterable[tuple[str, tuple[list[int], dict[int, Row]]]]:
        table = self._by.get((partition, resolution, kind), {})
        if names is None:
            return list(table.items())
        return [(n, table[n]) for n in names if n in table]

    def rows(self, partition: str, resolution: int, kind: str, start: int, end: int,
             names: Sequence[str] | None = None) -> list[Row]:
        with self._lock:
            out: list[Row] = []
            for _, (times, by_t) in self._names(partition, resolution, kind, names):
                lo, hi = bisect.bisect_right(times, start), bisect.bisect_right(times, end)
                out.extend(by_t[t] for t in times[lo:hi])
        out.sort(key=lambda r: (r.t, r.name))
        return out

    def latest(self, partition: str, resolution: int, kind: str, at: int,
               names: Sequence[str] | None = None) -> dict[str, Row]:
        with self._lock:
            out = {}
            for name, (times, by_t) in self._names(partition, resolution, kind, names):
                i = bisect.bisect_right(times, at)
                if i:
                    out[name] = by_t[times[i - 1]]
            return out

    def prune(self, partition: str, resolution: int, before: int) -> int:
        n = 0
        with self._lock:
            for (part, res, _), table in self._by.items():
                if part != partition or res != resolution:
                    continue
                for times, by_t in table.values():
                    i = bisect.bisect_left(times, before)
                    for t in times[:max(0, i - 1)]:
                        del by_t[t]
                        n += 1
                    del times[:max(0, i - 1)]
        return n

    def count(self) -> int:
        with self._lock:
            return sum(len(times) for table in self._by.values() for times, _ in table.values())


_SQLITE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS history_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS history_rows (partition TEXT NOT NULL, res INTEGER NOT NULL,"
    " kind TEXT NOT NULL, name TEXT NOT NULL, t INTEGER NOT NULL, data TEXT NOT NULL,"
    " PRIMARY KEY (partition, res, kind, name, t)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS history_rows_t ON history_rows (partition, res, t)",
)


def _check_version(found: str | None, where: str) -> None:
    if found is not None and int(found) > SCHEMA_VERSION:
        raise RuntimeError(f"the history tables in {where} are version {found}, newer than this "
                           f"quotaplane reads ({SCHEMA_VERSION})")


class SQLiteHistoryStore(HistoryStore):
    """Rows in the SQLite journal's file, through a connection of their own (WAL mode: the journal's
    appends and these writes take turns; a write waits up to ``busy_timeout``)."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 10.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=busy_timeout, check_same_thread=False,
                                     isolation_level=None)
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for stmt in _SQLITE_SCHEMA:
                    self._conn.execute(stmt)
                found = self._conn.execute(
                    "SELECT value FROM history_meta WHERE key='history_schema_version'").fetchone()
                _check_version(found[0] if found else None, str(self.path))
                self._conn.execute("INSERT OR IGNORE INTO history_meta(key, value) VALUES "
                                   "('history_schema_version', ?)", (str(SCHEMA_VERSION),))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def write(self, partition: str, rows: Sequence[Row]) -> None:
        if not rows:
            return
        params = [(partition, r.resolution, r.kind, r.name, r.t, _text(r.data)) for r in rows]
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany("INSERT OR REPLACE INTO history_rows(partition, res, kind, name, t,"
                                       " data) VALUES (?, ?, ?, ?, ?, ?)", params)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def rows(self, partition: str, resolution: int, kind: str, start: int, end: int,
             names: Sequence[str] | None = None) -> list[Row]:
        sql = ("SELECT res, t, kind, name, data FROM history_rows WHERE partition=? AND res=? AND kind=? "
               "AND t>? AND t<=?")
        args: list[Any] = [partition, resolution, kind, start, end]
        if names is not None:
            if not names:
                return []
            sql += f" AND name IN ({','.join('?' * len(names))})"
            args += list(names)
        with self._lock:
            found = self._conn.execute(sql + " ORDER BY t, name", args).fetchall()
        return [Row(res, t, k, n, json.loads(d)) for res, t, k, n, d in found]

    def latest(self, partition: str, resolution: int, kind: str, at: int,
               names: Sequence[str] | None = None) -> dict[str, Row]:
        # SQLite's bare-column rule: with MAX(t), the other columns come from that row
        sql = ("SELECT res, MAX(t), kind, name, data FROM history_rows WHERE partition=? AND res=? "
               "AND kind=? AND t<=?")
        args: list[Any] = [partition, resolution, kind, at]
        if names is not None:
            if not names:
                return {}
            sql += f" AND name IN ({','.join('?' * len(names))})"
            args += list(names)
        with self._lock:
            found = self._conn.execute(sql + " GROUP BY name", args).fetchall()
        return {n: Row(res, t, k, n, json.loads(d)) for res, t, k, n, d in found}

    def prune(self, partition: str, resolution: int, before: int) -> int:
        with self._lock:
            cur = self._conn.execute(
                "DELETE FROM history_rows WHERE partition=? AND res=? AND t<? AND t < (SELECT MAX(h.t) FROM "
                "history_rows h WHERE h.partition=history_rows.partition AND h.res=history_rows.res AND "
                "h.kind=history_rows.kind AND h.name=history_rows.name AND h.t<?)",
                (partition, resolution, before, before))
            return int(cur.rowcount)

    def count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM history_rows").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class PostgresHistoryStore(HistoryStore):
    """Rows in the PostgreSQL journal's schema, through a connection of their own."""

    def __init__(self, dsn: str, *, schema: str = "quotaplane") -> None:
        import psycopg

        self._psycopg = psycopg
        self.dsn = dsn
        self.schema = schema
        self._lock = threading.Lock()
        self._conn = psycopg.connect(dsn, autocommit=True)
        s = self._s = f'"{schema}"'     # an identifier checked by the URL parser, quoted
        with self._lock, self._conn.transaction():
            self._conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
            self._conn.execute(f"CREATE TABLE IF NOT EXISTS {s}.history_meta (key TEXT PRIMARY KEY, "
                               "value TEXT NOT NULL)")
            self._conn.execute(f"CREATE TABLE IF NOT EXISTS {s}.history_rows (partition TEXT NOT NULL, "
                               "res SMALLINT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, "
                               "t BIGINT NOT NULL, data TEXT NOT NULL, "
                               "PRIMARY KEY (partition, res, kind, name, t))")
            self._conn.execute(f"CREATE INDEX IF NOT EXISTS history_rows_t ON {s}.history_rows "
                               "(partition, res, t)")
            found = self._conn.execute(
                f"SELECT value FROM {s}.history_meta WHERE key='history_schema_version'").fetchone()
            _check_version(found[0] if found else None, f"schema {s}")
            self._conn.execute(f"INSERT INTO {s}.history_meta(key, value) VALUES "
                               "('history_schema_version', %s) ON CONFLICT (key) DO NOTHING",
                               (str(SCHEMA_VERSION),))

    def _run(self, fn: Any) -> Any:
        with self._lock:
            try:
                return fn(self._conn)
            except self._psycopg.OperationalError:
                # a connection that broke (a restarted server): one more try on a new one; every call
                # here is idempotent (reads, upserts, deletes of what is older than a cutoff)
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = self._psycopg.connect(self.dsn, autocommit=True)
                return fn(self._conn)

    def write(self, partition: str, rows: Sequence[Row]) -> None:
        if not rows:
            return
        params = [(partition, r.resolution, r.kind, r.name, r.t, _text(r.data)) for r in rows]
        sql = (f"INSERT INTO {self._s}.history_rows(partition, res, kind, name, t, data) VALUES "
               "(%s, %s, %s, %s, %s, %s) ON CONFLICT (partition, res, kind, name, t) "
               "DO UPDATE SET data=EXCLUDED.data")

        def go(conn: Any) -> None:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(sql, params)
        self._run(go)

    def rows(self, partition: str, resolution: int, kind: str, start: int, end: int,
             names: Sequence[str] | None = None) -> list[Row]:
        if names is not None and not names:
            return []
        sql = (f"SELECT res, t, kind, name, data FROM {self._s}.history_rows WHERE partition=%s "
               "AND res=%s AND kind=%s AND t>%s AND t<=%s")
        args: list[Any] = [partition, resolution, kind, start, end]
        if names is not None:
            sql += " AND name = ANY(%s)"
            args.append(list(names))
        found = self._run(lambda c: c.execute(sql + " ORDER BY t, name", args).fetchall())
        return [Row(res, t, k, n, json.loads(d)) for res, t, k, n, d in found]

    def latest(self, partition: str, resolution: int, kind: str, at: int,
               names: Sequence[str] | None = None) -> dict[str, Row]:
        if names is not None and not names:
            return {}
        sql = (f"SELECT DISTINCT ON (name) res, t, kind, name, data FROM {self._s}.history_rows "
               "WHERE partition=%s AND res=%s AND kind=%s AND t<=%s")
        args: list[Any] = [partition, resolution, kind, at]
        if names is not None:
            sql += " AND name = ANY(%s)"
            args.append(list(names))
        found = self._run(lambda c: c.execute(sql + " ORDER BY name, t DESC", args).fetchall())
        return {n: Row(res, t, k, n, json.loads(d)) for res, t, k, n, d in found}

    def prune(self, partition: str, resolution: int, before: int) -> int:
        sql = (f"DELETE FROM {self._s}.history_rows h WHERE h.partition=%s AND h.res=%s AND h.t<%s AND "
               f"h.t < (SELECT MAX(x.t) FROM {self._s}.history_rows x WHERE x.partition=h.partition AND "
               "x.res=h.res AND x.kind=h.kind AND x.name=h.name AND x.t<%s)")
        return int(self._run(lambda c: c.execute(sql, (partition, resolution, before, before)).rowcount))

    def count(self) -> int:
        sql = f"SELECT COUNT(*) FROM {self._s}.history_rows"
        return int(self._run(lambda c: c.execute(sql).fetchone()[0]))

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def open_history_store(journal: Any) -> HistoryStore:
    """The history store beside ``journal`` (a journal object of :mod:`quotaplane.journal`)."""
    from quotaplane.journal.base import parse_store_url

    url = getattr(journal, "url", None)
    inner = getattr(journal, "inner", None)        # a wrapper (the service's timed journal)
    if url is None and inner is not None:
        return open_history_store(inner)
    parsed = parse_store_url(url if isinstance(url, str) else None)
    if parsed.kind == "sqlite":
        path = getattr(journal, "path", None) or parsed.path
        return SQLiteHistoryStore(path)
    if parsed.kind == "postgresql":
        schema = getattr(journal, "schema", None) or parsed.options.get("schema", "quotaplane")
        return PostgresHistoryStore(parsed.dsn, schema=schema)
    return MemoryHistoryStore()
