"""PostgreSQL specifics (issue 7 fail-over, store side): several instances on one database, leases on
the database clock, fencing, schema per URL, reconnection. Skipped unless QUOTAPLANE_PG_URL is set."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from quotaplane.errors import NotLeaderError
from quotaplane.journal import SCHEMA_VERSION, JournalError, open_journal
from quotaplane.journal.postgres import PostgresJournal

from .conftest import pg_base_url


@pytest.fixture
def two(pg_url: str) -> Iterator[tuple[PostgresJournal, PostgresJournal]]:
    """Two journals (two connections, like two service instances) on the same schema."""
    a = open_journal(pg_url)
    b = open_journal(pg_url)
    assert isinstance(a, PostgresJournal) and isinstance(b, PostgresJournal)
    yield a, b
    a.close()
    b.close()


def test_two_instances_see_each_others_appends(two: tuple[PostgresJournal, PostgresJournal]) -> None:
    a, b = two
    assert a.append("p", [{"i": 1}]) == 1
    assert b.append("p", [{"i": 2}, {"i": 3}]) == 3
    assert [e["i"] for _, e in a.read("p")] == [1, 2, 3]
    assert b.last_seq("p") == 3


def test_two_instances_appending_concurrently_never_share_a_seq(
        two: tuple[PostgresJournal, PostgresJournal]) -> None:
    """Seq assignment is safe under real database concurrency (two connections, 4 threads each)."""
    a, b = two
    got: list[tuple[int, int, str]] = []
    lock = threading.Lock()

    def worker(j: PostgresJournal, name: str) -> None:
        for k in range(25):
            n = 1 + k % 2
            last = j.append("p", [{"w": name, "k": k, "m": m} for m in range(n)])
            with lock:
                got.append((last, n, f"{name}/{k}"))

    threads = [threading.Thread(target=worker, args=(j, f"{jn}{t}"))
               for jn, j in (("a", a), ("b", b)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(n for _, n, _ in got)
    stored = list(a.read("p"))
    assert [s for s, _ in stored] == list(range(1, total + 1))
    owner: dict[int, str] = {}
    for last, n, tag in got:
        for s in range(last - n + 1, last + 1):
            assert s not in owner, f"seq {s} given to {owner.get(s)} and {tag}"
            owner[s] = tag
    assert sorted(owner) == list(range(1, total + 1))


def test_lease_between_two_holders(two: tuple[PostgresJournal, PostgresJournal]) -> None:
    a, b = two
    assert a.acquire_lease("p", "node-a", 30)
    assert not b.acquire_lease("p", "node-b", 30)
    assert b.lease_holder("p") == "node-a"
    assert a.acquire_lease("p", "node-a", 30)  # renew
    a.release_lease("p", "node-a")
    assert b.acquire_lease("p", "node-b", 30)
    assert a.lease_holder("p") == "node-b"


def test_lease_expires_on_the_database_clock(two: tuple[PostgresJournal, PostgresJournal]) -> None:
    a, b = two
    assert a.acquire_lease("p", "node-a", 0.3)
    assert not b.acquire_lease("p", "node-b", 5)
    time.sleep(0.45)
    assert b.lease_holder("p") is None
    assert b.acquire_lease("p", "node-b", 5)
    assert not a.acquire_lease("p", "node-a", 5)  # the old holder cannot take it back while it is live


def test_fencing_old_leader_cannot_append_after_losing_the_lease(
        two: tuple[PostgresJournal, PostgresJournal]) -> None:
    """An append by a holder whose lease is lost fails with NotLeaderError and writes nothing."""
    a, b = two
    assert a.acquire_lease("p", "node-a", 0.3)
    assert a.append("p", [{"by": "a"}], holder="node-a") == 1
    time.sleep(0.45)
    with pytest.raises(NotLeaderError):  # expired, nobody else yet: still refused
        a.append("p", [{"by": "a", "late": True}], holder="node-a")
    assert b.acquire_lease("p", "node-b", 30)
    with pytest.raises(NotLeaderError) as err:
        a.append("p", [{"by": "a", "late": True}], holder="node-a")
    assert err.value.leader == "node-b"
    assert b.append("p", [{"by": "b"}], holder="node-b") == 2
    assert [e["by"] for _, e in a.read("p")] == ["a", "b"]


def test_lease_takeover_waits_for_an_in_flight_fenced_append(pg_url: str) -> None:
    """The fencing append holds the lease row FOR SHARE until it commits, so a new leader's
    acquire_lease (and therefore its catch-up read) happens after the old leader's last append."""
    import psycopg

    a = open_journal(pg_url)
    b = open_journal(pg_url)
    assert isinstance(a, PostgresJournal)
    try:
        assert a.acquire_lease("p", "node-a", 0.3)
        schema = a.schema
        with psycopg.connect(pg_base_url(), autocommit=False) as raw:
            # what an in-flight append by node-a does first
            raw.execute(f'SELECT holder FROM "{schema}".leases WHERE stream = %s FOR SHARE', ("p",))
            time.sleep(0.45)  # the lease expires while the append is in flight
            result: list[bool] = []
            t = threading.Thread(target=lambda: result.append(b.acquire_lease("p", "node-b", 30)))
            t.start()
            t.join(0.5)
            assert t.is_alive() and not result  # blocked behind the in-flight append
            raw.commit()
        t.join(10)
        assert result == [True]
        assert b.lease_holder("p") == "node-b"
    finally:
        a.close()
        b.close()


def test_schema_is_created_and_versioned(pg_url: str) -> None:
    import psycopg

    j = open_journal(pg_url)
    assert isinstance(j, PostgresJournal)
    schema = j.schema
    j.close()
    with psycopg.connect(pg_base_url(), autocommit=True) as raw:
        tables = sorted(r[0] for r in raw.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)))
        assert tables == ["events", "leases", "meta", "snapshots", "streams"]
        (version,) = raw.execute(f'SELECT value FROM "{schema}".meta WHERE key = %s',
                                 ("schema_version",)).fetchone() or (None,)
        assert version == str(SCHEMA_VERSION)
        raw.execute(f'UPDATE "{schema}".meta SET value = %s WHERE key = %s',
                    (str(SCHEMA_VERSION + 1), "schema_version"))
    with pytest.raises(JournalError, match="newer"):
        open_journal(pg_url)
    with psycopg.connect(pg_base_url(), autocommit=True) as raw:       # issue 32 item 12
        raw.execute(f'UPDATE "{schema}".meta SET value = %s WHERE key = %s', ("abc", "schema_version"))
    with pytest.raises(JournalError, match=r"schema_version 'abc'.*not a number"):
        open_journal(pg_url)


def test_schemas_isolate_stores(pg_url: str) -> None:
    other = pg_url.replace("schema=", "schema=o")
    a = open_journal(pg_url)
    b = open_journal(other)
    try:
        a.append("p", [{"x": 1}])
        assert b.last_seq("p") == 0 and b.streams() == []
    finally:
        a.close()
        if isinstance(b, PostgresJournal):
            b.drop_schema()


def _kill_backend(j: PostgresJournal) -> None:
    import psycopg

    assert j._conn is not None
    pid = j._conn.info.backend_pid
    with psycopg.connect(pg_base_url(), autocommit=True) as raw:
        raw.execute("SELECT pg_terminate_backend(%s)", (pid,))
    time.sleep(0.1)


def test_reads_and_leases_reconnect_transparently(pg_url: str) -> None:
    """Idempotent calls survive a killed connection (reconnect + one retry)."""
    j = open_journal(pg_url)
    assert isinstance(j, PostgresJournal)
    try:
        j.append("p", [{"i": 1}])
        _kill_backend(j)
        assert j.last_seq("p") == 1
        _kill_backend(j)
        assert j.acquire_lease("p", "a", 30)
        _kill_backend(j)
        assert j.lease_holder("p") == "a"
        _kill_backend(j)
        assert [s for s, _ in j.read("p")] == [1]
        _kill_backend(j)
        assert j.streams() == ["p"]
    finally:
        j.close()


def test_append_on_a_killed_connection_fails_then_reconnects(pg_url: str) -> None:
    """A broken connection fails an append with JournalError (never retried: ambiguous); the next
    call reconnects."""
    j = open_journal(pg_url)
    assert isinstance(j, PostgresJournal)
    try:
        j.append("p", [{"i": 1}])
        _kill_backend(j)
        with pytest.raises(JournalError):
            j.append("p", [{"i": 2}])
        assert j.append("p", [{"i": 3}]) >= 2  # reconnected (the failed one may or may not be stored)
        seqs = [s for s, _ in j.read("p")]
        assert seqs == list(range(1, seqs[-1] + 1))
    finally:
        j.close()


def test_unreachable_server_is_a_journal_error() -> None:
    with pytest.raises(JournalError, match="cannot connect") as err:
        open_journal("postgresql://nobody:pw@127.0.0.1:1/nodb?connect_timeout=2")
    assert "pw@" not in str(err.value)


def test_a_missing_or_corrupted_event_is_reported(pg_url: str) -> None:
    import psycopg

    j = open_journal(pg_url)
    assert isinstance(j, PostgresJournal)
    try:
        j.append("p", [{"i": i} for i in range(6)])
        with psycopg.connect(pg_base_url(), autocommit=True) as raw:
            raw.execute(f'DELETE FROM "{j.schema}".events WHERE seq = 2')
            raw.execute(f"UPDATE \"{j.schema}\".events SET data = '{{oops' WHERE seq = 5")
        with pytest.raises(JournalError, match="gap"):
            list(j.read("p"))
        with pytest.raises(JournalError, match="not JSON"):
            list(j.read("p", 2))
        assert [s for s, _ in j.read("p", 5)] == [6]
    finally:
        j.close()
