"""Property-based: any sequence of appends, snapshots, compactions, reads and reopens behaves like a
simple model (a list of events per stream, the latest snapshot, a compacted prefix) — seqs are always
1..last without gaps, reads return exactly the model's tail, compaction never changes last_seq."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from quotaplane.journal import Journal, JournalCompactedError, open_journal

STREAMS = st.sampled_from(["a", "b"])
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=8))
EVENT = st.dictionaries(st.text(max_size=5), JSON_SCALARS, max_size=3)


class JournalMachine(RuleBasedStateMachine):
    """Drives one journal against the model. Subclasses say how to open (and reopen) the store."""

    def __init__(self) -> None:
        super().__init__()
        self.events: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        self.snap: dict[str, tuple[int, dict[str, Any]] | None] = {"a": None, "b": None}
        self.compacted: dict[str, int] = {"a": 0, "b": 0}
        self.prefix = uuid.uuid4().hex[:8] + "/"  # PostgreSQL: one schema shared by all examples
        self.j: Journal = self.open()

    def open(self) -> Journal:
        raise NotImplementedError

    def s(self, name: str) -> str:
        return self.prefix + name

    @rule(stream=STREAMS, batch=st.lists(EVENT, max_size=4))
    def append(self, stream: str, batch: list[dict[str, Any]]) -> None:
        last = self.j.append(self.s(stream), batch)
        self.events[stream].extend(batch)
        assert last == len(self.events[stream])

    @rule(stream=STREAMS, data=st.data())
    def snapshot(self, stream: str, data: st.DataObject) -> None:
        lo = self.snap[stream][0] if self.snap[stream] else 0
        hi = len(self.events[stream])
        seq = data.draw(st.integers(lo, hi), label="seq")
        state = {"upto": seq, "n": data.draw(st.integers(0, 5))}
        self.j.save_snapshot(self.s(stream), seq, state)
        self.snap[stream] = (seq, state)

    @rule(stream=STREAMS)
    def compact(self, stream: str) -> None:
        removed = self.j.compact(self.s(stream))
        snap = self.snap[stream]
        expected = max(0, (snap[0] if snap else 0) - self.compacted[stream])
        assert removed == expected
        self.compacted[stream] += expected

    @rule(stream=STREAMS, data=st.data())
    def read(self, stream: str, data: st.DataObject) -> None:
        n = len(self.events[stream])
        after = data.draw(st.integers(0, n + 2), label="after")
        if after < self.compacted[stream]:
            with pytest.raises(JournalCompactedError):
                self.j.read(self.s(stream), after)
            return
        got = list(self.j.read(self.s(stream), after))
        want = [(i + 1, e) for i, e in enumerate(self.events[stream])][after:]
        assert got == want

    @invariant()
    def counters_and_snapshots_match(self) -> None:
        for name in ("a", "b"):
            assert self.j.last_seq(self.s(name)) == len(self.events[name])
            assert self.j.load_snapshot(self.s(name)) == self.snap[name]

    def teardown(self) -> None:
        self.j.close()


class SQLiteMachine(JournalMachine):
    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        super().__init__()

    def open(self) -> Journal:
        return open_journal(f"sqlite:///{Path(self.dir.name)}/j.db")

    @rule()
    def reopen(self) -> None:
        self.j.close()
        self.j = self.open()

    def teardown(self) -> None:
        super().teardown()
        self.dir.cleanup()


class MemoryMachine(JournalMachine):
    def open(self) -> Journal:
        return open_journal("memory://")


_SETTINGS = settings(max_examples=30, stateful_step_count=20, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])

TestMemoryJournalMachine = MemoryMachine.TestCase
TestMemoryJournalMachine.settings = _SETTINGS
TestSQLiteJournalMachine = SQLiteMachine.TestCase
TestSQLiteJournalMachine.settings = settings(_SETTINGS, max_examples=20)


def test_postgres_journal_machine(pg_url: str) -> None:
    """The same state machine on PostgreSQL (fewer examples; every example uses its own stream names)."""
    class PostgresMachine(JournalMachine):
        def open(self) -> Journal:
            return open_journal(pg_url)

        @rule()
        def reopen(self) -> None:
            self.j.close()
            self.j = self.open()

    run_state_machine_as_test(PostgresMachine, settings=settings(
        max_examples=8, stateful_step_count=15, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]))

