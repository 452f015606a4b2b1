"""The write path tells the usage history (issue 33) of every journalled batch while it is on, and of
a configuration marker while it is off (the only event that can switch it on): partition/txn.py."""

from __future__ import annotations

from quotaplane.config.identity import UserGroup
from quotaplane.resources import Resource
from tests.partition.helpers import CONFIG, Clock, scheduler

OFF = CONFIG.replace("- name: default\n", "- name: default\n  history: {enabled: false}\n", 1)
ALICE = UserGroup("alice", ["dev"])


def test_a_configuration_switches_the_history_on_and_off_between_writes() -> None:
    clock = Clock()
    s = scheduler(OFF, clock=clock)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100, "memory": 1000}))
    p.add_application("app", ALICE, queue="root.a")
    assert p.allocate("app", "before", Resource({"vcore": 1})).allocated
    assert p.history.engine is None

    clock.advance(60)
    s.update_config(CONFIG)                    # on: history starts now
    engine = p.history.engine
    assert engine is not None and "before" not in engine.allocs
    p.add_application("later", ALICE, queue="root.a")   # the history knows what came since
    assert p.allocate("later", "after", Resource({"vcore": 1})).allocated
    assert "after" in engine.allocs            # the commit told the engine

    s.update_config(OFF)
    assert p.history.engine is None
    p.release("after")                         # nothing told, nothing raised
    assert "after" in engine.allocs
