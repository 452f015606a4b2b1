"""SQLite specifics: WAL, synchronous, the writer lock, schema version, canonical JSON on disk."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from quotaplane.journal import (
    SCHEMA_VERSION,
    JournalError,
    JournalLockedError,
    SQLiteJournal,
    open_journal,
)


def test_wal_mode_and_synchronous_setting(tmp_path: Path) -> None:
    j = SQLiteJournal(tmp_path / "j.db", synchronous="full")
    try:
        conn = j._conn
        assert conn is not None
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        j.close()
    j = SQLiteJournal(tmp_path / "j.db")
    try:
        assert j._conn is not None
        assert j._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL (default)
    finally:
        j.close()
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteJournal(tmp_path / "k.db", synchronous="sometimes")


def test_events_are_stored_as_canonical_json(tmp_path: Path) -> None:
    """Sorted keys, compact separators, UTF-8 (not \\u escapes)."""
    with SQLiteJournal(tmp_path / "j.db") as j:
        j.append("p", [{"b": 1, "a": {"d": [1, 2], "c": "é"}}])
    conn = sqlite3.connect(tmp_path / "j.db")
    try:
        (data,) = conn.execute("SELECT data FROM events").fetchone()
        assert data == '{"a":{"c":"é","d":[1,2]},"b":1}'
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(
            SCHEMA_VERSION)
    finally:
        conn.close()


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    SQLiteJournal(tmp_path / "j.db").close()
    conn = sqlite3.connect(tmp_path / "j.db")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    with pytest.raises(JournalError, match="schema version"):
        SQLiteJournal(tmp_path / "j.db")
    # the failed open released the writer lock
    conn = sqlite3.connect(tmp_path / "j.db")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
    conn.commit()
    conn.close()
    SQLiteJournal(tmp_path / "j.db").close()


def test_second_writer_in_the_same_process_is_refused(tmp_path: Path) -> None:
    j = SQLiteJournal(tmp_path / "j.db")
    try:
        with pytest.raises(JournalLockedError, match="already in use"):
            SQLiteJournal(tmp_path / "j.db")
    finally:
        j.close()
    SQLiteJournal(tmp_path / "j.db").close()  # free again after close


def test_second_writer_process_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    """SQLite allows one writer process: a live holder makes another process's open fail at once."""
    db = tmp_path / "j.db"
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from quotaplane.journal import open_journal
            j = open_journal("sqlite:///{db}")
            j.append("p", [{{"x": 1}}])
            print("ready", flush=True)
            sys.stdin.readline()
            j.close()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        with pytest.raises(JournalLockedError) as err:
            open_journal(f"sqlite:///{db}")
        assert str(child.pid) in str(err.value)
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(timeout=20) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    with open_journal(f"sqlite:///{db}") as j:  # type: ignore[attr-defined]
        assert j.last_seq("p") == 1


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="does not exist"):
        SQLiteJournal(tmp_path / "nope" / "j.db")


def test_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "j.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(JournalError, match="cannot"):
        SQLiteJournal(tmp_path / "j.db")
    (tmp_path / "j.db").unlink()
    SQLiteJournal(tmp_path / "j.db").close()  # the lock was released by the failed open


def test_leases_expire_with_the_injected_clock(tmp_path: Path) -> None:
    now = [100.0]
    with SQLiteJournal(tmp_path / "j.db", clock=lambda: now[0]) as j:
        assert j.acquire_lease("p", "a", 10)
        now[0] = 109.9
        assert j.lease_holder("p") == "a"
        assert not j.acquire_lease("p", "b", 10)
        now[0] = 110.0
        assert j.lease_holder("p") is None
        assert j.acquire_lease("p", "b", 10)
        assert j.lease_holder("p") == "b"


def test_checkpoint_keeps_the_data(tmp_path: Path) -> None:
    with SQLiteJournal(tmp_path / "j.db") as j:
        j.append("p", [{"i": i} for i in range(100)])
        j.checkpoint()
        assert j.last_seq("p") == 100
    with SQLiteJournal(tmp_path / "j.db") as j:
        assert [s for s, _ in j.read("p")] == list(range(1, 101))


def test_corrupted_event_is_a_journal_error_naming_it(tmp_path: Path) -> None:
    with SQLiteJournal(tmp_path / "j.db") as j:
        j.append("p", [{"i": i} for i in range(5)])
    conn = sqlite3.connect(tmp_path / "j.db")
    conn.execute("UPDATE events SET data = '{not json' WHERE seq = 3")
    conn.commit()
    conn.close()
    with SQLiteJournal(tmp_path / "j.db") as j:
        with pytest.raises(JournalError, match="not JSON"):
            list(j.read("p"))
        assert [s for s, _ in j.read("p", 3)] == [4, 5]


def test_a_missing_event_is_detected_as_a_gap(tmp_path: Path) -> None:
    """Seqs are contiguous by construction; a store damaged from outside is reported, not skipped."""
    with SQLiteJournal(tmp_path / "j.db") as j:
        j.append("p", [{"i": i} for i in range(5)])
    conn = sqlite3.connect(tmp_path / "j.db")
    conn.execute("DELETE FROM events WHERE seq = 2")
    conn.commit()
    conn.close()
    with SQLiteJournal(tmp_path / "j.db") as j, pytest.raises(JournalError, match="gap"):
        list(j.read("p"))


def test_a_schema_version_that_is_not_a_number_is_a_journal_error(tmp_path: Path) -> None:
    """``schema_version = 'abc'`` raised a bare ValueError from int() (issue 32 item 12)."""
    SQLiteJournal(tmp_path / "j.db").close()
    conn = sqlite3.connect(tmp_path / "j.db")
    conn.execute("UPDATE meta SET value = 'abc' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(JournalError, match=r"schema_version 'abc'.*not a number"):
        SQLiteJournal(tmp_path / "j.db")
