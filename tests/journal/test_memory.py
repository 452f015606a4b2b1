"""Memory journal specifics and behaviour of reads that overlap with writes (memory and SQLite)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from quotaplane.journal import Journal, JournalCompactedError, MemoryJournal, SQLiteJournal


def test_memory_leases_expire_with_the_injected_clock() -> None:
    now = [0.0]
    j = MemoryJournal(clock=lambda: now[0])
    assert j.acquire_lease("p", "a", 5)
    now[0] = 4.99
    assert j.lease_holder("p") == "a" and not j.acquire_lease("p", "b", 5)
    j.append("p", [{"x": 1}], holder="a")
    now[0] = 5.0
    assert j.lease_holder("p") is None
    assert j.acquire_lease("p", "b", 5)
    with pytest.raises(Exception, match="does not hold"):
        j.append("p", [{"x": 2}], holder="a")
    assert j.last_seq("p") == 1


@pytest.fixture(params=["memory", "sqlite"])
def local(request: pytest.FixtureRequest, tmp_path: Path) -> Journal:
    j: Journal = MemoryJournal() if request.param == "memory" else SQLiteJournal(tmp_path / "j.db")
    request.addfinalizer(j.close)
    return j


def test_appending_while_iterating_does_not_block_or_break_the_read(local: Journal) -> None:
    """A read holds the lock only per page: another thread can append while a reader iterates."""
    local.append("p", [{"i": i} for i in range(12_000)])
    it = local.read("p")
    first = next(it)
    done = threading.Event()

    def writer() -> None:
        local.append("p", [{"i": -1}])
        done.set()

    t = threading.Thread(target=writer)
    t.start()
    assert done.wait(10), "append blocked by an open read iterator"
    t.join()
    rest = [s for s, _ in it]
    assert first[0] == 1
    assert rest == list(range(2, len(rest) + 2))
    assert rest[-1] in (12_000, 12_001)  # the new event may or may not be seen by the running read


def test_compaction_during_a_read_is_reported(local: Journal) -> None:
    local.append("p", [{"i": i} for i in range(12_000)])
    it = local.read("p")
    next(it)
    local.save_snapshot("p", 11_000, {"v": 1})
    local.compact("p")
    with pytest.raises(JournalCompactedError):
        list(it)
