"""The fail-over defects of issue 32, each pinned by the interleaving that caused it, injected at the
library level (no processes, no timing): the orderings a paused leader, a PostgreSQL restart or a
dropped connection produce in the service, made to happen on purpose.

The whole-service counterparts run several ``quotaplane serve`` instances under real faults
(:mod:`tests.faults.test_fault_suite`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.journal.base import JournalError
from quotaplane.journal.group_commit import CommitFailedError
from quotaplane.server.ha_partitions import PartitionLeadership
from quotaplane.server.main import journalled_config
from tests.partition.helpers import CONFIG, Clock

TWO = """
partitions:
- name: default
  queues: [{name: root, submitacl: '*', queues: [{name: a}]}]
- name: second
  queues: [{name: root, submitacl: '*', queues: [{name: a}]}]
"""
BOB = UserGroup("bob", ["ops"])
VCORE = Resource({"vcore": 1})


class GatedJournal(MemoryJournal):
    """A memory journal shared by several schedulers (instances); appends fail while ``fail`` is
    set, reads while ``unreadable`` is."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = False
        self.unreadable = False

    def append(self, stream: str, events: Sequence[Mapping[str, Any]], *, holder: str | None = None) -> int:
        if self.fail:
            raise JournalError("connection reset")
        return super().append(stream, events, holder=holder)

    def read(self, stream: str, after: int = 0) -> Any:
        if self.unreadable:
            raise JournalError("connection refused")
        return super().read(stream, after)

    def last_seq(self, stream: str) -> int:
        if self.unreadable:
            raise JournalError("connection refused")
        return super().last_seq(stream)


def _instance(journal: GatedJournal) -> Scheduler:
    return Scheduler.from_yaml(CONFIG, store=journal, clock=Clock())


def _keys(s: Scheduler) -> set[str]:
    return {a.allocation_key for a in s.partition("default").allocations()}


def _poisoned_ex_leader(j: GatedJournal) -> Scheduler:
    """An instance that led ``default`` and decided "ghost", whose commit failed (its lease was lost
    or the store went away): memory is ahead of the journal. Another instance then leads the
    partition and writes "ghost" and "real" for good."""
    a = _instance(j)
    p = a.partition("default")
    p.add_node("n1", Resource({"vcore": 100}))
    p.add_application("app1", BOB, queue="root.b")
    group = p.start_group_commit(owner=threading.get_ident())
    assert group is not None
    j.fail = True
    p.allocate("app1", "ghost", VCORE)
    with pytest.raises(CommitFailedError):
        p.flush()
    assert p.recovering
    j.unreadable = True                   # the store is away (a PostgreSQL restart) …
    p.stop_group_commit()                 # … when it stops leading: it cannot rebuild yet
    assert p.recovering
    j.fail = j.unreadable = False
    b = _instance(j)
    q = b.partition("default")
    q.allocate("app1", "ghost", VCORE)
    q.allocate("app1", "real", VCORE)
    return a


def test_a_poisoned_partition_is_rebuilt_from_the_journal_when_a_read_catches_it_up() -> None:
    # issue 32 #2: the events of the new leader were replayed onto memory still holding the undone
    # change ("ghost" again: a replay error, a 500 on every read of that partition)
    j = GatedJournal()
    a = _poisoned_ex_leader(j)
    a.refresh("default")
    p = a.partition("default")
    assert not p.recovering
    assert _keys(a) == {"ghost", "real"}
    assert p.dump_state() == _instance(j).partition("default").dump_state()


def test_a_poisoned_partition_is_rebuilt_from_the_journal_when_its_instance_takes_it_again() -> None:
    # issue 32 #2: taking the partition back replayed onto the poisoned memory and failed every round,
    # so the instance held the lease and nobody led the partition until a restart
    j = GatedJournal()
    a = _poisoned_ex_leader(j)
    a.adopt("default")
    p = a.partition("default")
    assert not p.recovering
    p.allocate("app1", "after", VCORE)
    assert _keys(_instance(j)) == {"ghost", "real", "after"}


def test_a_poisoned_partition_that_cannot_read_its_journal_yet_is_unavailable_not_replayed() -> None:
    j = GatedJournal()
    a = _poisoned_ex_leader(j)
    j.unreadable = True
    with pytest.raises(JournalError):
        a.refresh("default")
    assert a.partition("default").recovering
    j.unreadable = False
    a.refresh("default")
    assert _keys(a) == {"ghost", "real"}


def _leadership(journal: MemoryJournal, url: str, partitions: list[str]) -> tuple[PartitionLeadership,
                                                                                   Scheduler]:
    def build(holder: str, leads: Callable[[str], bool], config_leader: bool) -> Scheduler:
        text = TWO if config_leader else journalled_config(journal)
        assert text is not None
        return Scheduler.from_yaml(text, store=journal, holder=holder, leads=leads)

    lead = PartitionLeadership(journal, advertise=url, partitions=partitions, build=build, ttl=5.0,
                               interval=1.0)
    return lead, lead.initial()


def test_a_partition_that_cannot_be_taken_is_not_held_and_the_others_are() -> None:
    # issue 32 #2: a take-over whose catch-up raised failed the whole round with the lease held, so
    # nobody led the partition — round after round
    journal = MemoryJournal(clock=lambda: 1000.0)
    lead, sched = _leadership(journal, "http://a:1", [])
    assert lead.led() == frozenset()      # initial() leads nothing it has not adopted yet …

    def broken(name: str) -> None:
        if name == "second":
            raise JournalError("the stream cannot be read")

    sched.adopt = broken                  # type: ignore[method-assign]
    lead.step(sched)
    assert lead.led() == {"default"}
    assert journal.lease_holder("second") is None      # free for another instance (or the next round)
    del sched.adopt
    lead.step(sched)
    assert lead.led() == {"default", "second"}


class _SlowLeases(MemoryJournal):
    """A memory journal whose lease calls wait at ``gate`` once ``hold`` is set (a slow store)."""

    def __init__(self) -> None:
        super().__init__(clock=lambda: 1000.0)
        self.hold = False
        self.entered = threading.Event()
        self.gate = threading.Event()

    def acquire_lease(self, stream: str, holder: str, ttl: float) -> bool:
        if self.hold and not stream.startswith("want:"):
            self.entered.set()
            self.gate.wait(30)
        return super().acquire_lease(stream, holder, ttl)


def test_a_round_still_running_when_the_leases_are_released_does_not_take_them_again() -> None:
    # found by the fault suite: stopping cancels the rounds' task, but its round goes on in its
    # worker thread; finishing after release() it took the leases again and "served" a partition
    # after the instance let it go (another instance took it meanwhile: two served it at once)
    journal = _SlowLeases()
    lead, sched = _leadership(journal, "http://a:1", [])
    lead.step(sched)
    assert lead.led() == {"default", "second"}
    journal.hold = True
    rounds = threading.Thread(target=lead.step, args=(sched,))
    rounds.start()
    assert journal.entered.wait(30)           # the round is in the store …
    stopping = threading.Thread(target=lead.release)
    stopping.start()                          # … when the instance stops
    journal.gate.set()
    rounds.join(30)
    stopping.join(30)
    assert lead.led() == frozenset() and not lead.is_leader(None)
    assert journal.lease_holder("default") is None and journal.lease_holder("second") is None
    lead.step(sched)                          # a released leadership takes nothing any more
    assert lead.led() == frozenset() and journal.lease_holder("default") is None
