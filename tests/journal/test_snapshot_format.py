"""A snapshot stores its dump once (issue 38: the restart of 500,000 waiting asks).

``dump_json`` is the dump without its waiting asks as canonical JSON text, read by a restore as one
string and compared as text; the dump's asks are the rebuild's ``ask_added`` events. Snapshots of the
older format (the whole dump as data under ``dump``) still restore, a damaged dump still sends the
restore to the full replay, and a compacted journal still restarts.
"""

from __future__ import annotations

import json
from typing import Any

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.journal import Journal, MemoryJournal
from quotaplane.state import views
from quotaplane.state.handlers import PartitionState
from quotaplane.state.restore_check import dump_of, rebuilt_matches
from tests.partition.helpers import CONFIG, Clock

BOB = UserGroup("bob", ["ops"])
ALICE = UserGroup("alice", ["dev"])


def _busy(store: Any) -> Scheduler:
    """Allocations on two nodes, waiting asks (one leaf full), an application without either."""
    s = Scheduler.from_yaml(CONFIG, store=store, clock=Clock(), snapshot_every=0)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 8, "memory": 50}))
    p.add_node("n2", Resource({"vcore": 8, "memory": 50}))
    p.add_application("a1", ALICE, queue="root.a")
    p.add_application("b1", BOB, queue="root.b")
    p.add_application("idle", BOB, queue="root.b")
    for i in range(4):
        p.allocate("a1", f"a{i}", Resource({"vcore": 1, "memory": 5}))
    for i in range(6):
        p.add_ask("b1", f"b{i}", Resource({"vcore": 3}), priority=i % 2)
    p.release("a1")
    assert p.pending() and p.allocations()
    return s


def _snapshot(s: Scheduler) -> dict[str, Any]:
    s.partition("default").take_snapshot()
    got = s.journal.load_snapshot("default")
    assert got is not None
    return got[1]


def _restore(journal: Journal) -> Scheduler:
    return Scheduler.from_yaml(CONFIG, store=journal, clock=Clock(), snapshot_every=0)


def test_a_snapshot_holds_its_dump_once_as_text_and_its_asks_in_the_rebuild_only() -> None:
    s = _busy(MemoryJournal())
    want = s.partition("default").dump_state()
    snap = _snapshot(s)
    assert "dump" not in snap and isinstance(snap["dump_json"], str)
    assert "asks" not in json.loads(snap["dump_json"])           # not stored twice
    asks = [ev for ev in snap["rebuild"] if ev["type"] == "ask_added"]
    assert [ev["key"] for ev in asks] == [a["key"] for a in want["asks"]]
    assert dump_of(snap) == want
    s.close(snapshot=False)


def test_the_restore_compares_texts_and_they_are_equal_after_a_rebuild() -> None:
    s = _busy(MemoryJournal())
    want = s.partition("default").dump_state()
    snap = _snapshot(s)
    again = _restore(s.journal)
    assert again.restored_from["default"] == "snapshot"
    p = again.partition("default")
    assert p.dump_state() == want
    # the common case never reads the dump as data: the rebuilt partition's text is the stored one
    assert views.dump_text(p._core.state) == snap["dump_json"]
    again.close(snapshot=False)
    s.close(snapshot=False)


def test_an_older_snapshot_with_the_whole_dump_as_data_still_restores() -> None:
    s = _busy(MemoryJournal())
    want = s.partition("default").dump_state()
    snap = _snapshot(s)
    old = {k: v for k, v in snap.items() if k != "dump_json"}
    old["dump"] = dump_of(snap)
    s.journal.save_snapshot("default", s.partition("default").snapshot_seq, old)
    again = _restore(s.journal)
    assert again.restored_from["default"] == "snapshot"
    assert again.partition("default").dump_state() == want
    again.close(snapshot=False)
    s.close(snapshot=False)


def test_texts_that_differ_only_in_form_are_compared_as_data() -> None:
    s = _busy(MemoryJournal())
    snap = _snapshot(s)
    state = s.partition("default")._core.state
    reformatted = {**snap, "dump_json": json.dumps(json.loads(snap["dump_json"]), indent=1)}
    assert reformatted["dump_json"] != snap["dump_json"]
    assert rebuilt_matches(state, snap) and rebuilt_matches(state, reformatted)
    s.close(snapshot=False)


def _damaged(snap: dict[str, Any], how: str) -> dict[str, Any]:
    snap = json.loads(json.dumps(snap))
    if how == "queue usage":
        dump = json.loads(snap["dump_json"])
        dump["queues"] = {**dump["queues"], "extra": 1}
        snap["dump_json"] = json.dumps(dump)
    elif how == "not json":
        snap["dump_json"] = snap["dump_json"][:-1]
    else:
        dump = dump_of(snap)
        assert dump is not None
        dump["asks"] = dump["asks"][1:]
        del snap["dump_json"]
        snap["dump"] = dump
    return snap


def test_a_dump_that_does_not_match_its_rebuild_sends_the_restore_to_the_full_replay() -> None:
    for how in ("queue usage", "not json", "old dump"):
        s = _busy(MemoryJournal())
        want = s.partition("default").dump_state()
        snap = _snapshot(s)
        assert rebuilt_matches(s.partition("default")._core.state, snap)
        bad = _damaged(snap, how)
        assert not rebuilt_matches(s.partition("default")._core.state, bad), how
        s.journal.save_snapshot("default", s.partition("default").snapshot_seq, bad)
        again = _restore(s.journal)
        assert again.restored_from["default"] == "replay", how
        assert again.partition("default").dump_state() == want, how
        again.close(snapshot=False)
        s.close(snapshot=False)


def test_a_compacted_journal_restarts_from_its_snapshot_and_tail() -> None:
    s = _busy(MemoryJournal())
    p = s.partition("default")
    p.take_snapshot()
    assert s.journal.compact("default") > 0
    p.add_ask("b1", "late", Resource({"vcore": 2}))
    p.release("a0")
    want = p.dump_state()
    again = _restore(s.journal)
    assert again.restored_from["default"] == "snapshot"
    assert again.partition("default").dump_state() == want
    again.close(snapshot=False)
    s.close(snapshot=False)


def test_a_rebuild_that_loses_an_ask_is_not_taken(monkeypatch: Any) -> None:
    # the asks are stored once (the rebuild's events are the dump's asks): what the check verifies of
    # them is that the rebuild puts each back as its event says, in order
    s = _busy(MemoryJournal())
    want = s.partition("default").dump_state()
    s.partition("default").take_snapshot()
    one_pass = PartitionState._asks_restored

    def loses_the_last(state: PartitionState, events: Any, leaves: Any) -> None:
        one_pass(state, events[:-1], leaves)

    monkeypatch.setattr(PartitionState, "_asks_restored", loses_the_last)
    again = _restore(s.journal)
    assert again.restored_from["default"] == "replay"
    assert again.partition("default").dump_state() == want
    again.close(snapshot=False)
    s.close(snapshot=False)
