"""A snapshot state taken now and read later is the state at its instant (quotaplane.state.snapshot).

Under group commit a snapshot is captured when it falls due and written later, on a worker thread,
while the partition keeps changing: binding an allocation to another node, releasing it, admitting
more. What is written must be exactly what writing it at once would have written.
"""

from __future__ import annotations

import json
from pathlib import Path

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.journal.base import canonical_json
from quotaplane.state.restore_check import dump_of
from tests.partition.helpers import CONFIG, Clock

BOB = UserGroup("bob", ["ops"])


def test_a_snapshot_read_later_is_the_state_at_its_instant() -> None:
    s = Scheduler.from_yaml(CONFIG, store=MemoryJournal(), clock=Clock())
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100}))
    p.add_node("n2", Resource({"vcore": 100}))
    p.add_application("app1", BOB, queue="root.b")
    for i in range(6):
        p.allocate("app1", f"k{i}", Resource({"vcore": 1}), node="n1")
    later = p._core.log.snapshot_state()                          # read after the changes below
    now = json.loads(canonical_json(dict(p._core.log.snapshot_state())))   # read at once
    p.bind("k0", "n2")                                       # the one field that changes in place
    p.release("k1")
    p.allocate("app1", "k9", Resource({"vcore": 2}))
    p.add_application("app2", BOB, queue="root.b")
    assert json.loads(canonical_json(dict(later))) == now
    dump = dump_of(now)
    assert dump is not None
    assert dump["allocations"]["k0"]["nodeID"] == "n1"
    assert "k1" in dump["allocations"] and "k9" not in dump["allocations"]
    s.close()


def test_the_snapshot_state_restores_the_partition_it_was_taken_from(tmp_path: Path) -> None:
    j = f"sqlite:///{tmp_path / 's.db'}"
    s = Scheduler.from_yaml(CONFIG, store=j, clock=Clock(), snapshot_every=0)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100}))
    p.add_application("app1", BOB, queue="root.b")
    for i in range(5):
        p.allocate("app1", f"k{i}", Resource({"vcore": 1}), node="n1")
    p.release("k2")
    p.take_snapshot()
    state = p.dump_state()
    s.close(snapshot=False)
    again = Scheduler.from_yaml(CONFIG, store=j, clock=Clock())
    assert again.restored_from["default"] == "snapshot"
    assert again.partition("default").dump_state() == state
    again.close()
