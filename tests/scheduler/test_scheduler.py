"""Scheduler: config reload (all-or-nothing, draining, new partitions) and journal recovery (S1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from quotaplane import ConfigError, NotFoundError, RejectedError, Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from tests.partition.helpers import CONFIG, Clock, scheduler

ALICE = UserGroup("alice", ["dev"])
BOB = UserGroup("bob", ["ops"])


def _canon(state: Any) -> str:
    return json.dumps(state, sort_keys=True)


def _load(s: Scheduler) -> None:
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 50000, "memory": 1000}))
    p.add_application("app1", ALICE, queue="root.a")
    p.add_application("app2", BOB, queue="root.b")
    p.allocate("app1", "k1", Resource({"vcore": 1000}))
    p.allocate("app1", "k2", Resource({"vcore": 2000, "memory": 5}))
    p.allocate("app2", "k3", Resource({"vcore": 3000}))
    p.allocate("app2", "ph1", Resource({"vcore": 1000}), placeholder=True, task_group="tg")
    p.replace_placeholder("ph1", "r1", Resource({"vcore": 500}))
    p.release("k1")


def test_partition_lookup() -> None:
    s = scheduler()
    assert s.partition("DEFAULT") is s.partition("default")
    assert [p.name for p in s.partitions()] == ["default"]
    with pytest.raises(NotFoundError):
        s.partition("nope")


def test_invalid_config_changes_nothing() -> None:
    """All-or-nothing: a reload that fails validation leaves config and usage untouched."""
    s = scheduler()
    _load(s)
    before = _canon(s.dump_state())
    seq = s.journal.last_seq("scheduler")
    with pytest.raises(ConfigError):
        s.update_config("partitions: [")
    with pytest.raises(ConfigError):
        s.update_config(CONFIG.replace("vcore: 10,", "vcore: -10,"))
    assert _canon(s.dump_state()) == before and s.config_text == CONFIG
    assert s.journal.last_seq("scheduler") == seq


def test_reload_lowering_max_below_usage_blocks_new_allocations_q3() -> None:
    """Q3: a max lowered below usage is accepted; nothing is evicted; new allocations refused."""
    s = scheduler()
    p = s.partition("default")
    _load(s)
    s.update_config(CONFIG.replace("max: {vcore: 20}", "max: {vcore: 1}"))
    assert p.queues.queue("root.b").max == Resource({"vcore": 1000})
    assert p.queues.queue("root.b").allocated == Resource({"vcore": 3500})
    d = p.allocate("app2", "k9", Resource({"vcore": 1}))
    assert [(v.code, v.path) for v in d.reasons] == [("queue.max", "root.b")]


def test_reload_limits_apply_to_earlier_partition_objects() -> None:
    s = scheduler()
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 50000}))
    p.add_application("app1", ALICE, queue="root.a")
    assert not p.allocate("app1", "k1", Resource({"vcore": 5000})).allocated    # user limit 4
    s.update_config(CONFIG.replace("maxresources: {vcore: 4}", "maxresources: {vcore: 8}")
                    .replace("maxresources: {vcore: 6}", "maxresources: {vcore: 9}"))
    assert p.allocate("app1", "k1", Resource({"vcore": 5000})).allocated
    assert s.partition("default") is p


def test_removed_queue_drains_while_it_has_applications() -> None:
    s = scheduler()
    p = s.partition("default")
    _load(s)
    without_b = CONFIG.replace("""    - name: b
      submitacl: bob
      resources:
        max: {vcore: 20}
""", "")
    s.update_config(without_b)
    q = p.queues.queue("root.b")
    assert q is not None and q.status == "Draining"
    # a draining queue is not placeable (P-6): the request falls back to root.default
    assert p.add_application("app3", BOB, queue="root.b") == "root.default"
    p.remove_application("app2")
    assert p.queues.queue("root.b") is None


def test_new_partition_created_by_reload() -> None:
    s = scheduler()
    text = CONFIG + """- name: gpu
  queues:
  - name: root
    submitacl: '*'
"""
    s.update_config(text)
    g = s.partition("gpu")
    g.add_node("g1", Resource({"nvidia.com/gpu": 8}))
    with pytest.raises(RejectedError):            # no root.default in the new partition
        g.add_application("x", BOB)
    assert sorted(p.name for p in s.partitions()) == ["default", "gpu"]


def _replay_equal(store: Any, tmp_path: Path, **kw: Any) -> None:
    s = scheduler(store=store, **kw)
    _load(s)
    s.update_config(CONFIG.replace("max: {vcore: 20}", "max: {vcore: 30}"))
    p = s.partition("default")
    p.allocate("app2", "k4", Resource({"vcore": 100}))
    p.check_timeouts(p.clock() + 10_000)
    want = _canon(s.dump_state())
    if isinstance(store, str):
        s.close()                  # takes a snapshot: the restart reads no tail
        again = Scheduler.from_yaml(CONFIG.replace("max: {vcore: 20}", "max: {vcore: 30}"), store=store)
        assert again.restored_from == {"default": "snapshot"}
        assert again.partition("default").last_seq == again.journal.load_snapshot("default")[0]
    else:
        again = Scheduler.from_yaml(CONFIG.replace("max: {vcore: 20}", "max: {vcore: 30}"), store=store)
    assert _canon(again.dump_state()) == want
    # and the restored scheduler keeps working and journalling
    q = again.partition("default")
    assert q.allocate("app2", "k5", Resource({"vcore": 100})).allocated
    again.close()


def test_replay_memory_journal_reproduces_dump_state(tmp_path: Path) -> None:
    _replay_equal(MemoryJournal(), tmp_path)


def test_replay_sqlite_journal_reproduces_dump_state(tmp_path: Path) -> None:
    _replay_equal(f"sqlite:///{tmp_path}/state.db", tmp_path)


def test_replay_with_snapshots_every_few_events(tmp_path: Path) -> None:
    """Snapshots (every 3 events here) + tail replay give the same state as the live scheduler."""
    _replay_equal(f"sqlite:///{tmp_path}/snap.db", tmp_path, snapshot_every=3)


def test_snapshot_restore_uses_rebuild_not_full_replay() -> None:
    """After a snapshot, restore does not need the events before it (bounded restart time)."""
    j = MemoryJournal()
    s = scheduler(store=j, snapshot_every=4)
    _load(s)
    want = _canon(s.dump_state())
    snap = j.load_snapshot("default")
    assert snap is not None and snap[0] >= 4
    j.compact("default")                       # events before the snapshot are gone
    again = Scheduler.from_yaml(CONFIG, store=j)
    assert _canon(again.dump_state()) == want


def test_restart_with_a_different_config_applies_it_as_an_update(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/c.db"
    s = scheduler(store=url)
    _load(s)
    s.close()
    changed = CONFIG.replace("max: {vcore: 20}", "max: {vcore: 1}")
    again = Scheduler.from_yaml(changed, store=url)
    assert again.config_text == changed
    p = again.partition("default")
    assert p.queues.queue("root.b").max == Resource({"vcore": 1000})
    assert p.queues.queue("root.b").allocated == Resource({"vcore": 3500})
    again.close()
    with pytest.raises(ConfigError):
        Scheduler.from_yaml("partitions: [", store=url)
    third = Scheduler.from_yaml(changed, store=url)
    assert third.journal.last_seq("scheduler") == 2            # same text: no new config event
    third.close()


def test_config_reload_position_is_kept_in_replay() -> None:
    """A config applied between two allocations is replayed at the same point (group link, U4)."""
    j = MemoryJournal()
    text1 = CONFIG
    s = scheduler(text1, store=j)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 50000}))
    p.add_application("app1", ALICE, queue="root.a")
    p.allocate("app1", "k1", Resource({"vcore": 100}))            # linked to group dev
    s.update_config(text1.replace("groups: [dev]", "groups: [qa]"))
    p.add_application("app2", ALICE, queue="root.a")
    p.allocate("app2", "k2", Resource({"vcore": 100}))            # no group now
    assert p.ugm.app_group("app1", ALICE) == "dev" and p.ugm.app_group("app2", ALICE) is None
    want = _canon(s.dump_state())
    again = Scheduler.from_yaml(s.config_text, store=j)
    assert _canon(again.dump_state()) == want
    s.snapshot()
    j.compact("default")
    third = Scheduler.from_yaml(s.config_text, store=j)
    assert _canon(third.dump_state()) == want


def test_clock_drives_replayed_timeouts_identically() -> None:
    j = MemoryJournal()
    clock = Clock()
    s = scheduler(store=j, clock=clock)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 50000}))
    p.add_application("g", BOB, queue="root.a", gang_style="hard", placeholder_timeout=10)
    p.allocate("g", "ph", Resource({"vcore": 100}), placeholder=True, task_group="t")
    clock.advance(11)
    p.check_timeouts()
    again = Scheduler.from_yaml(CONFIG, store=j, clock=Clock(0))
    assert again.partition("default").application("g").state == "Failed"
    assert _canon(again.dump_state()) == _canon(s.dump_state())


DYNAMIC = """
partitions:
- name: default
  placementrules:
  - name: tag
    value: namespace
    create: true
  queues:
  - name: root
    submitacl: '*'
    childtemplate:
      maxapplications: 4
      resources:
        max: {vcore: 6}
    queues:
    - name: default
"""


def test_snapshot_rebuild_with_dynamic_queues_tags_and_gang() -> None:
    """Snapshot + compaction with dynamic queues (M-6), namespace tags (N-2), placeholders and a
    soft-timed-out application: the restore uses the snapshot and reproduces dump_state."""
    j = MemoryJournal()
    clock = Clock()
    s = Scheduler.from_yaml(DYNAMIC, store=j, clock=clock, snapshot_every=1000)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 50000}))
    quota = '{"resources":{"vcore":{"value":3000}}}'
    assert p.add_application("a1", BOB, tags={"namespace": "ns1"}) == "root.ns1"
    p.add_application("a2", ALICE, tags={"namespace": "ns1", "namespace.resourcequota": quota})
    p.add_application("a3", ALICE, tags={"namespace": "ns2"}, placeholder_timeout=5)
    assert p.queues.queue("root.ns1").max == Resource({"vcore": 3000})
    p.allocate("a1", "k1", Resource({"vcore": 1000}))
    p.allocate("a2", "k2", Resource({"vcore": 1000}))
    p.allocate("a3", "ph1", Resource({"vcore": 500}), placeholder=True, task_group="g")
    clock.advance(10)
    p.check_timeouts()
    assert p.application("a3").state == "Resuming"
    s.update_config(DYNAMIC.replace("maxapplications: 4", "maxapplications: 3"))
    p.allocate("a1", "k3", Resource({"vcore": 500}))
    want = _canon(s.dump_state())
    s.snapshot()
    j.compact("default")
    again = Scheduler.from_yaml(s.config_text, store=j)
    assert again.restored_from == {"default": "snapshot"}
    assert _canon(again.dump_state()) == want


def test_follower_catches_up_with_the_leader() -> None:
    """A second instance on the same store follows the journal: events and configs of the leader
    are applied in order, new partitions appear; compaction behind it means a snapshot restore."""
    j = MemoryJournal()
    leader = scheduler(store=j)
    _load(leader)
    follower = Scheduler.from_yaml(CONFIG, store=j)
    assert _canon(follower.dump_state()) == _canon(leader.dump_state())
    p = leader.partition("default")
    p.allocate("app2", "k7", Resource({"vcore": 700}))
    leader.update_config(CONFIG.replace("max: {vcore: 20}", "max: {vcore: 25}") + """- name: gpu
  queues:
  - name: root
    submitacl: '*'
""")
    p.release("k2")
    assert follower.catch_up() >= 3
    assert follower.config_text == leader.config_text
    assert _canon(follower.dump_state()) == _canon(leader.dump_state())
    assert follower.catch_up() == 0
    leader.snapshot()
    p.allocate("app2", "k8", Resource({"vcore": 800}))
    leader.snapshot()
    j.compact("default")
    follower.catch_up()
    assert _canon(follower.dump_state()) == _canon(leader.dump_state())
    # a follower only replays: closing it must not write snapshots into the leader's store
    assert not any(fp.needs_snapshot for fp in follower.partitions())
