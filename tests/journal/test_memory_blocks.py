"""The in-memory journal keeps its texts compressed in blocks (issue 38, memory per pending ask): with
blocks of three events every sequence of appends, snapshots, compactions and reads still behaves as the
model of tests/journal/test_state_machine.py, across block edges and partly compacted blocks; and the
texts take a fraction of what they took as strings."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from quotaplane.journal import JournalCompactedError, memory, open_journal
from tests.journal.test_state_machine import MemoryMachine


class SmallBlocksMachine(MemoryMachine):
    """The memory journal's machine with blocks of three events (block edges reached in a few steps)."""

    def __init__(self) -> None:
        self.saved = memory.BLOCK
        memory.BLOCK = 3
        super().__init__()

    def teardown(self) -> None:
        super().teardown()
        memory.BLOCK = self.saved


TestSmallBlocksMachine = SmallBlocksMachine.TestCase
TestSmallBlocksMachine.settings = settings(max_examples=40, stateful_step_count=30, deadline=None,
                                           suppress_health_check=[HealthCheck.too_slow])


def _event(i: int) -> dict[str, Any]:
    return {"type": "ask_added", "app": f"a{i // 5}", "key": f"k{i}", "priority": 0,
            "resource": {"vcore": 1000}, "seq": i, "t": 1000.0 + i}


def test_many_events_read_back_from_every_seq_and_after_compaction() -> None:
    j = open_journal("memory://")
    events = [_event(i) for i in range(1000)]
    for start in range(0, 1000, 7):
        j.append("s", events[start:start + 7])
    assert j.last_seq("s") == 1000
    for after in (0, 1, 63, 64, 65, 500, 959, 960, 999, 1000):
        assert list(j.read("s", after)) == [(i + 1, e) for i, e in enumerate(events)][after:]
    j.save_snapshot("s", 130, {"x": 1})
    assert j.compact("s") == 130
    with pytest.raises(JournalCompactedError):
        j.read("s", 129)
    assert list(j.read("s", 130)) == [(i + 1, e) for i, e in enumerate(events)][130:]
    j.append("s", [_event(1000)])
    assert j.last_seq("s") == 1001 and list(j.read("s", 1000)) == [(1001, _event(1000))]


def test_the_texts_take_a_fraction_of_their_size_as_strings() -> None:
    j = open_journal("memory://")
    assert isinstance(j, memory.MemoryJournal)
    events = [_event(i) for i in range(6400)]
    j.append("s", events)
    plain = sum(sys.getsizeof(t) for t in (memory.json.dumps(e, separators=(",", ":")) for e in events))
    assert j.text_bytes() * 5 < plain
