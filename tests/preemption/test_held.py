"""A preemption that holds its victims until they are gone (``Partition.hold_preempted``, issue 31 #3):
the Kubernetes front evicts a victim through the Eviction API, which a PodDisruptionBudget may refuse;
until the pod is really gone its quota stays charged, so the preemptor waits and the cluster's admitted
pods never exceed what it holds."""

from __future__ import annotations

import pytest

from quotaplane.cluster import Scheduler
from quotaplane.journal import MemoryJournal
from tests.partition.helpers import Clock
from tests.preemption.helpers import ALICE, Recorder, cpu, seed_002_config


def _world() -> tuple[Scheduler, Clock, MemoryJournal]:
    clock, journal = Clock(), MemoryJournal()
    s = Scheduler.from_yaml(seed_002_config(revoke_delay=1), store=journal, clock=clock)
    p = s.partition("default")
    p.hold_preempted = True
    p.add_node("n1", cpu(8))
    p.add_application("a", ALICE, queue="root.q", tags={"namespace": "team-a"})
    p.add_application("b", ALICE, queue="root.q", tags={"namespace": "team-b"})
    return s, clock, journal


def _used(s: Scheduler) -> int:
    return int(s.partition("default").queues.queue("root").allocated.get("vcore"))


def test_a_held_reclaim_keeps_the_victims_charged_until_they_are_released() -> None:
    s, clock, journal = _world()
    p = s.partition("default")
    rec = Recorder(p)
    p.check_timeouts()
    for i in range(7):
        assert p.allocate("a", f"a{i}", cpu(1))
    assert p.allocate("b", "b0", cpu(1))
    for i in range(1, 5):
        p.add_ask("b", f"b{i}", cpu(1))
    for _ in range(3):
        clock.advance(1)
        p.check_timeouts()
    (taken,) = rec.of("preempted")
    victims = [a["allocationKey"] for a in taken["allocations"]]
    assert victims == ["a0", "a1", "a2", "a3"] and taken["held"] is True
    assert taken["reason"]["code"] == "elastic.revoked"
    # nothing was freed: the victims still count, the waiting asks still wait, the cluster is not over
    assert all(p.allocation(k) is not None for k in victims)
    assert sorted(p.preempting()) == victims
    assert len(p.pending()) == 4 and _used(s) == 8000
    for _ in range(5):                      # later rounds take nothing more while the victims go
        clock.advance(1)
        p.check_timeouts()
    assert len(rec.of("preempted")) == 1 and _used(s) == 8000
    p.release("a0")                          # the first victim is gone: one waiting ask takes its room
    assert p.allocation("b1") is not None and len(p.pending()) == 3 and _used(s) == 8000
    assert sorted(p.preempting()) == victims[1:]
    p.release_batch(victims[1:])
    assert p.pending() == [] and _used(s) == 8000 and p.preempting() == {}
    # the decision is journalled (a noted event) and replay frees nothing on its own
    types = [ev["type"] for _, ev in journal.read(p.stream, after=0)]
    assert "preempted" not in types and types.count("noted") >= 1
    again = Scheduler.from_yaml(seed_002_config(revoke_delay=1), store=journal, clock=clock)
    assert again.dump_state() == s.dump_state()


def test_a_held_preemption_given_up_never_takes_the_same_victims_again() -> None:
    """Given up (their eviction kept being refused), the victims stay and are never chosen again while
    they live (YuniKorn's victim stays marked preempted): the over-use monitor's next round picks
    others in their place — as many as the quota still needs — and holds no more after that."""
    s, clock, _ = _world()
    p = s.partition("default")
    p.check_timeouts()
    for i in range(7):
        assert p.allocate("a", f"a{i}", cpu(1))
    assert p.allocate("b", "b0", cpu(1))
    p.add_ask("b", "b1", cpu(1))
    for _ in range(3):
        clock.advance(1)
        p.check_timeouts()
    held = sorted(p.preempting())
    assert len(held) == 1 and all(p.allocation(k) is not None for k in held)
    p.cancel_preemption(held)
    assert p.preempting() == {} and all(p.allocation(k) is not None for k in held)
    assert p.spared() == held
    for _ in range(5):
        clock.advance(1)
        p.check_timeouts()
    others = sorted(p.preempting())
    assert len(others) == 1 and not set(others) & set(held)
    assert all(p.allocation(k) is not None for k in held + others)


def test_a_synchronous_request_no_preemption_can_help_is_refused_and_holds_nothing() -> None:
    """Another elastic quota's allocations are no victims for a synchronous request (inner-quota
    preemption stays within the quota; YuniKorn's preemption is for waiting asks)."""
    s, _, _ = _world()
    p = s.partition("default")
    for i in range(8):
        assert p.allocate("a", f"a{i}", cpu(1), priority=0)
    assert not p.allocate("b", "b0", cpu(1), priority=10)
    assert p.preempting() == {} and _used(s) == 8000


def test_a_held_victim_is_shown_preempted_in_yunikorns_allocation_dao() -> None:
    """The victim's standing: YuniKorn's AllocationDAOInfo says ``preempted`` while it is removed."""
    from quotaplane.server.yunikorn_dao import allocation_dao

    s, clock, _ = _world()
    p = s.partition("default")
    p.check_timeouts()
    for i in range(7):
        assert p.allocate("a", f"a{i}", cpu(1))
    assert p.allocate("b", "b0", cpu(1))
    p.add_ask("b", "b1", cpu(1))
    for _ in range(3):
        clock.advance(1)
        p.check_timeouts()
    held = p.preempting()
    victim = next(iter(held))
    assert allocation_dao(p.allocation(victim), held)["preempted"] is True
    assert "preempted" not in allocation_dao(p.allocation("b0"), held)


_TREE_CONFIG = """
partitions:
- name: default
  quotatrees:
    trees:
    - '{"kind": "QuotaTree", "metadata": {"name": "T"}, "spec": {"resourceNames": ["vcore"], "nodes": {
        "root": {"parent": "nil", "hard": "true", "quota": {"vcore": "8000"}},
        "A": {"parent": "root", "hard": "true", "quota": {"vcore": "5000"}},
        "B": {"parent": "root", "hard": "false", "quota": {"vcore": "3000"}}}}}'
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: q
"""


def test_a_quota_trees_preemption_is_held_until_the_victim_is_released() -> None:
    """MCAD (F1): hi's allocation at hard node A fits only by preempting lo's borrowing beyond soft
    node B. Held: the victim stays allocated on the tree, hi's ask waits with the reason, and takes
    the room once the victim is released; the journal replays to the same state."""
    clock, journal = Clock(), MemoryJournal()
    s = Scheduler.from_yaml(_TREE_CONFIG, store=journal, clock=clock)
    p = s.partition("default")
    p.hold_preempted = True
    p.add_node("n1", cpu(12))
    p.add_application("lo", ALICE, queue="root.q", tags={"quotaplane.io/tree.T": "B"})
    p.add_application("hi", ALICE, queue="root.q", tags={"quotaplane.io/tree.T": "A"})
    rec = Recorder(p)
    assert p.allocate("lo", "l1", cpu(3)) and p.allocate("lo", "l2", cpu(3))
    p.add_ask("hi", "h1", cpu(3.5))
    p.schedule()
    (taken,) = rec.of("preempted")
    assert taken["held"] is True and [a["allocationKey"] for a in taken["allocations"]] == ["l2"]
    assert taken["reason"]["code"] == "forest.preempted"
    forest = p.policies()[-1].manager
    assert p.allocation("l2") is not None and forest.node_allocated("T", "root")["vcore"] == 6000
    (ask,) = p.pending()
    assert [v.code for v in ask.reasons] == ["forest.quota"] and "l2" in ask.reasons[0].message
    for _ in range(3):                      # later cycles preempt nothing more
        clock.advance(1)
        p.schedule()
    assert len(rec.of("preempted")) == 1 and sorted(p.preempting()) == ["l2"]
    p.release("l2")
    assert p.allocation("h1") is not None and p.pending() == [] and p.preempting() == {}
    assert forest.node_allocated("T", "root")["vcore"] == 6500
    again = Scheduler.from_yaml(_TREE_CONFIG, store=journal, clock=clock)
    assert again.dump_state() == s.dump_state()


def test_a_synchronous_request_that_needs_preemption_holds_its_victims_and_waits_as_an_ask() -> None:
    """Held preemption for a synchronous allocate (issue 31): it cannot be admitted while its victims
    run, so it is refused naming them (``preempted``), they are held, and the request waits as an ask
    that takes their room once they are released. ``preempt=False`` preempts nothing."""
    clock, journal = Clock(), MemoryJournal()
    s = Scheduler.from_yaml(_TREE_CONFIG, store=journal, clock=clock)
    p = s.partition("default")
    p.hold_preempted = True
    p.add_node("n1", cpu(12))
    p.add_application("lo", ALICE, queue="root.q", tags={"quotaplane.io/tree.T": "B"})
    p.add_application("hi", ALICE, queue="root.q", tags={"quotaplane.io/tree.T": "A"})
    assert p.allocate("lo", "l1", cpu(3)) and p.allocate("lo", "l2", cpu(3))
    would = p.what_if("hi", cpu(3.5))          # the same answer allocate gives, changing nothing
    assert not would.allocated and would.preempted == ["l2"] and p.preempting() == {}
    quiet = p.allocate("hi", "h0", cpu(3.5), preempt=False)
    assert not quiet and quiet.preempted == [] and p.preempting() == {} and p.pending() == []
    d = p.allocate("hi", "h1", cpu(3.5))
    assert not d.allocated and d.preempted == ["l2"] and [v.code for v in d.reasons] == ["forest.quota"]
    assert sorted(p.preempting()) == ["l2"] and [a.allocation_key for a in p.pending()] == ["h1"]
    again = p.allocate("hi", "h1", cpu(3.5))            # asked again while it waits: nothing more
    assert not again.allocated and sorted(p.preempting()) == ["l2"] and len(p.pending()) == 1
    p.release("l2")
    assert p.allocation("h1") is not None and p.pending() == [] and p.preempting() == {}
    assert Scheduler.from_yaml(_TREE_CONFIG, store=journal, clock=clock).dump_state() == s.dump_state()


def test_a_front_holds_and_spares_again_what_it_was_doing_before_a_restart() -> None:
    """Partition.hold marks live allocations held for a given reason (the noted held notice, like the
    engine's own decision); Partition.spare marks them never to be chosen again. Unknown keys are
    skipped, held ones are not marked twice."""
    s, _, _ = _world()
    p = s.partition("default")
    rec = Recorder(p)
    for i in range(3):
        assert p.allocate("a", f"a{i}", cpu(1))
    reason = {"policy": "elastic", "code": "elastic.revoked", "path": "team-a", "message": "over its runtime"}
    assert p.hold(["a0", "gone"], reason) == ["a0"]
    assert p.hold(["a0"], reason) == []
    (note,) = rec.of("preempted")
    assert note["held"] is True and note["reason"] == reason
    assert p.preempting()["a0"]["reason"] == reason and _used(s) == 3000
    p.spare(["a1", "gone"])
    assert p.spared() == ["a1"]
    p.release("a1")
    assert p.spared() == []


def test_held_marks_outlive_a_rebuild_after_a_failed_write_but_not_the_failed_writes_own() -> None:
    """A write that fails after an irreversible change rebuilds the partition from its journal. The
    held marks are memory, not journal: those decided before stay (the front is evicting those
    victims; dropped, the engine would preempt more for the same room), and so do the spared ones;
    a hold made by the failed write itself was never heard of and goes."""
    from typing import Any

    class Refusing(MemoryJournal):
        refuse = False

        def append(self, stream: str, events: Any, **kw: Any) -> int:
            if self.refuse:
                self.refuse = False
                raise OSError("the journal refused the append")
            return super().append(stream, events, **kw)

    clock, journal = Clock(), Refusing()
    s = Scheduler.from_yaml(_TREE_CONFIG, store=journal, clock=clock)
    p = s.partition("default")
    p.hold_preempted = True
    p.add_node("n1", cpu(12))
    p.add_application("lo", ALICE, queue="root.q", tags={"quotaplane.io/tree.T": "B"})
    p.add_application("hi", ALICE, queue="root.q", tags={"quotaplane.io/tree.T": "A"})
    for key, n in (("l1", 1), ("l2", 3), ("l3", 3)):
        assert p.allocate("lo", key, cpu(n))
    assert not p.allocate("hi", "h1", cpu(3.5)) and sorted(p.preempting()) == ["l2"]
    p.spare(["l1"])
    journal.refuse = True
    with pytest.raises(OSError):
        p.hold(["l3"], {"policy": "forest", "code": "forest.preempted", "path": "T", "message": "x"})
    assert sorted(p.preempting()) == ["l2"] and p.spared() == ["l1"]
    assert p.allocation("l2") is not None and p.allocation("l3") is not None
