"""S1 when the journal fails: an answer is only given after the event is durable. A failed append
rolls back what can be rolled back (allocations, nodes, applications) and otherwise rebuilds the
partition from the journal (stopping it until the store can be read), so memory is never silently ahead
of the journal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.journal.base import JournalError
from tests.partition.helpers import CONFIG, Clock

BOB = UserGroup("bob", ["ops"])


class FlakyJournal(MemoryJournal):
    """A memory journal whose appends fail while ``fail`` is set."""

    fail = False

    def append(self, stream: str, events: Sequence[Mapping[str, Any]], *, holder: str | None = None) -> int:
        if self.fail:
            raise JournalError("disk full")
        return super().append(stream, events, holder=holder)


def _setup() -> tuple[Scheduler, FlakyJournal]:
    j = FlakyJournal()
    s = Scheduler.from_yaml(CONFIG, store=j, clock=Clock())
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 50000}))
    p.add_application("app1", BOB, queue="root.b")
    p.allocate("app1", "k1", Resource({"vcore": 1000}))
    return s, j


def test_failed_append_rolls_back_allocation_node_and_application() -> None:
    s, j = _setup()
    p = s.partition("default")
    before = p.dump_state()
    j.fail = True
    with pytest.raises(JournalError):
        p.allocate("app1", "k2", Resource({"vcore": 1000}))
    with pytest.raises(JournalError):
        p.allocate_batch([{"applicationID": "app1", "allocationKey": "k3", "resource": {"vcore": 5}}])
    with pytest.raises(JournalError):
        p.add_node("n2", Resource({"vcore": 1}))
    with pytest.raises(JournalError):
        p.remove_node("n1")
    with pytest.raises(JournalError):
        p.add_application("app2", BOB, queue="root.b")
    assert p.dump_state() == before
    j.fail = False
    assert p.allocate("app1", "k2", Resource({"vcore": 1000})).allocated     # still usable
    assert Scheduler.from_yaml(CONFIG, store=j).dump_state() == s.dump_state()


def test_failed_append_of_a_release_changes_nothing_and_the_partition_recovers() -> None:
    """Issue 14 #2: a release cannot be rolled back step by step, so the partition is rebuilt from
    the journal at once; it takes changes again as soon as the store does."""
    s, j = _setup()
    p = s.partition("default")
    before = p.dump_state()
    j.fail = True
    with pytest.raises(JournalError):
        p.release("k1")
    assert p.dump_state() == before
    assert p.allocation("k1") is not None
    assert not p.healthy
    j.fail = False
    assert p.allocate("app1", "k9", Resource({"vcore": 1})).allocated
    assert p.healthy
    # the journal holds exactly the acknowledged state: a restore serves it
    again = Scheduler.from_yaml(CONFIG, store=j)
    assert again.dump_state() == s.dump_state()


def test_lost_lease_fences_writes_and_changes_nothing() -> None:
    """PostgreSQL fail-over semantics on the memory store: a partition writing as ``holder`` whose
    lease was taken over gets NotLeaderError and its allocation is rolled back."""
    from quotaplane import NotLeaderError

    now = [0.0]
    j = MemoryJournal(clock=lambda: now[0])
    assert j.acquire_lease("default", "instance-a", ttl=10)
    assert j.acquire_lease("scheduler", "instance-a", ttl=10)      # config writes are fenced too
    s = Scheduler.from_yaml(CONFIG, store=j, clock=Clock(), holder="instance-a")
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 50000}))
    p.add_application("app1", BOB, queue="root.b")
    assert p.allocate("app1", "k1", Resource({"vcore": 1000})).allocated
    now[0] = 11.0
    assert j.acquire_lease("default", "instance-b", ttl=10)
    before = p.dump_state()
    with pytest.raises(NotLeaderError):
        p.allocate("app1", "k2", Resource({"vcore": 1000}))
    assert p.dump_state() == before


def test_lost_scheduler_lease_fences_config_writes() -> None:
    """A config reload by an instance that lost the scheduler stream's lease is refused and changes
    nothing (the lease fences config writes like partition writes)."""
    from quotaplane import NotLeaderError

    now = [0.0]
    j = MemoryJournal(clock=lambda: now[0])
    assert j.acquire_lease("default", "instance-a", ttl=10)
    assert j.acquire_lease("scheduler", "instance-a", ttl=10)
    s = Scheduler.from_yaml(CONFIG, store=j, clock=Clock(), holder="instance-a")
    now[0] = 11.0
    assert j.acquire_lease("scheduler", "instance-b", ttl=10)
    n = j.last_seq("scheduler")
    with pytest.raises(NotLeaderError):
        s.update_config(CONFIG.replace("max: {vcore: 20}", "max: {vcore: 30}"))
    assert j.last_seq("scheduler") == n
    assert s.partition("default").queues.queue("root.b").max == Resource({"vcore": 20000})


def test_follower_restore_between_config_event_and_marker_does_not_write() -> None:
    """A follower restoring while the leader has written a config event but not yet the partition
    marker keeps the new config in memory (fenced: it may not write) and follows the leader later."""
    now = [0.0]
    j = MemoryJournal(clock=lambda: now[0])
    assert j.acquire_lease("default", "leader", ttl=100)
    assert j.acquire_lease("scheduler", "leader", ttl=100)
    s = Scheduler.from_yaml(CONFIG, store=j, clock=Clock(), holder="leader")
    changed = CONFIG.replace("max: {vcore: 20}", "max: {vcore: 30}")
    j.append("scheduler", [{"type": "config", "text": changed}])        # the leader, interrupted
    n = j.last_seq("default")
    follower = Scheduler.from_yaml(changed, store=j, holder="follower")
    assert j.last_seq("default") == n                                     # the follower wrote nothing
    assert follower.partition("default").queues.queue("root.b").max == Resource({"vcore": 30000})
    s.partition("default").record_config(j.last_seq("scheduler"))       # the leader catches up
    follower.catch_up()
    assert follower.partition("default").config_seq == j.last_seq("scheduler")


def test_failed_append_of_an_ask_takes_its_demand_back() -> None:
    """An ask the journal refused is not demand: its queue's pending resource, its reservation watch
    and an elastic quota's request are as before (the undo used to drop the ask alone)."""
    s, j = _setup()
    p = s.partition("default")
    p.auto_schedule = False
    before = p.dump_state()
    j.fail = True
    with pytest.raises(JournalError):
        p.add_ask("app1", "q1", Resource({"vcore": 70000}))
    assert p.dump_state() == before
    assert p.queues.queue("root.b").pending == Resource()
    j.fail = False
    assert p.add_ask("app1", "q1", Resource({"vcore": 70000})).allocation_key == "q1"
    assert Scheduler.from_yaml(CONFIG, store=j).dump_state() == s.dump_state()
