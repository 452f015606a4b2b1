"""Waiting asks are demand and elastic reclaim acts (seed 002, E5, PR-K1…PR-K4), through the partition."""

from __future__ import annotations

import json
from typing import Any

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.journal import MemoryJournal
from tests.partition.helpers import Clock
from tests.preemption.helpers import ALICE, Recorder, cpu, seed_002_config


def _world(journal: MemoryJournal) -> tuple[Scheduler, Clock]:
    clock = Clock()
    s = Scheduler.from_yaml(seed_002_config(), store=journal, clock=clock)
    p = s.partition("default")
    p.add_node("n1", cpu(8))
    p.add_application("a", ALICE, queue="root.q", tags={"namespace": "team-a"})
    p.add_application("b", ALICE, queue="root.q", tags={"namespace": "team-b"})
    return s, clock


def _elastic(s: Scheduler) -> Any:
    return s.partition("default").policies()[2].manager


def _canon(s: Scheduler) -> str:
    return json.dumps(s.dump_state(), sort_keys=True)


def _seed_002(s: Scheduler) -> None:
    """team-a borrows 7 of 8 cores; team-b runs 1 and submits 4 asks of 1 core."""
    p = s.partition("default")
    for i in range(7):
        assert p.allocate("a", f"a{i}", cpu(1))
    assert p.allocate("b", "b0", cpu(1))
    for i in range(1, 5):
        p.add_ask("b", f"b{i}", cpu(1))


def test_waiting_asks_are_demand_of_their_quota_and_queue_not_usage() -> None:
    """PR-K1/PR-K3: the asks join team-b's request (5), so the runtimes move to A 3, B 5 (before: A 7,
    B 1); YuniKorn's pendingResource shows them on the leaf and the root; used does not change."""
    s, _ = _world(MemoryJournal())
    p, m = s.partition("default"), _elastic(s)
    for i in range(7):
        assert p.allocate("a", f"a{i}", cpu(1))
    assert p.allocate("b", "b0", cpu(1))
    assert (m.runtime("team-a"), m.runtime("team-b")) == (cpu(7), cpu(1))
    for i in range(1, 5):
        p.add_ask("b", f"b{i}", cpu(1))
    assert m.request("team-b") == cpu(5) and m.used("team-b") == cpu(1)
    assert (m.runtime("team-a"), m.runtime("team-b")) == (cpu(3), cpu(5))
    assert p.queues.queue("root.q").pending == cpu(4) and p.queues.queue("root").pending == cpu(4)
    assert p.queues.queue("root.q").allocated == cpu(8)              # demand is not usage
    assert p.queues.dao("root.q")["pendingResource"] == {"vcore": 4000}
    p.remove_ask("b4")                                                  # withdrawn: demand goes
    assert m.request("team-b") == cpu(4) and p.queues.queue("root").pending == cpu(3)


def test_an_allocated_ask_turns_from_demand_into_usage_once() -> None:
    """PR-K2: the ask is checked against a runtime that already counts it (not twice), and its
    allocation assigns the pending pod instead of adding a second one."""
    s, _ = _world(MemoryJournal())
    p, m = s.partition("default"), _elastic(s)
    p.add_ask("b", "b1", cpu(3))                                        # fits at once
    assert p.allocation("b1") is not None
    assert m.request("team-b") == cpu(3) and m.used("team-b") == cpu(3)
    assert p.queues.queue("root").pending == Resource()


def test_seed_002_reclaim_cuts_the_borrower_back_and_gives_the_waiting_asks_their_guarantee() -> None:
    """E5 / PR-K4: after team-a has been over its runtime for more than revokeDelay (10 s), its
    victims go in one journalled preempted event (reason elastic.revoked, path team-a) and team-b's
    asks are allocated in the same call; replay reproduces it without deciding again."""
    j = MemoryJournal()
    s, clock = _world(j)
    p, m = s.partition("default"), _elastic(s)
    rec = Recorder(p)
    assert p.check_timeouts() == []              # t=0: the monitor sees team-a within its runtime
    _seed_002(s)
    assert [a.reasons[0].code for a in p.pending() if a.reasons] == ["root.capacity"] * 4
    for _ in range(10):                                                 # over for exactly 10 s: not yet
        clock.advance(1)
        assert p.check_timeouts() == []
    assert len(p.pending()) == 4
    clock.advance(1)
    out = p.check_timeouts()
    assert out == [f"a{i}: revoked by elastic (team-a)" for i in range(4)]
    assert (m.used("team-a"), m.used("team-b")) == (cpu(3), cpu(5))
    assert p.pending() == [] and all(p.allocation(f"b{i}") for i in range(1, 5))
    (taken,) = rec.of("preempted")
    assert [a["allocationKey"] for a in taken["allocations"]] == ["a0", "a1", "a2", "a3"]
    assert taken["reason"]["code"] == "elastic.revoked" and taken["reason"]["path"] == "team-a"
    assert "preemptor" not in taken
    made = [n for n in rec.of("allocated") if n["allocationKey"].startswith("b") and n["seq"] > taken["seq"]]
    assert [n["allocationKey"] for n in made] == ["b1", "b2", "b3", "b4"]
    types = [ev["type"] for _, ev in j.read(p.stream, after=0)]
    assert types.count("preempted") == 1
    assert _canon(Scheduler.from_yaml(seed_002_config(), store=j, clock=clock)) == _canon(s)


def test_reclaim_never_takes_a_non_preemptible_allocation() -> None:
    """E5: non-preemptible pods are skipped, even if the quota stays over its runtime."""
    s, clock = _world(MemoryJournal())
    p = s.partition("default")
    # a0 is the least important (priority 0) but not preemptible (within team-a's min of 1)
    assert p.allocate("a", "a0", cpu(1), preemptible=False)
    for i in range(1, 7):
        assert p.allocate("a", f"a{i}", cpu(1), priority=5)
    for i in range(1, 5):
        p.add_ask("b", f"b{i}", cpu(1))
    for _ in range(12):
        clock.advance(1)
        p.check_timeouts()
    m = _elastic(s)
    assert p.allocation("a0") is not None
    assert sum(p.allocation(f"a{i}") is None for i in range(1, 7)) > 0
    assert m.runtime("team-a").fit_in(m.used("team-a"))


def test_replay_of_a_reclaim_does_not_decide_again() -> None:
    """PR-S3: the journal holds the victims; replay releases exactly those, even if the rules would
    now choose others (here: the journalled event is edited to name a different victim)."""
    j = MemoryJournal()
    s, clock = _world(j)
    p = s.partition("default")
    p.check_timeouts()
    _seed_002(s)
    clock.advance(11)
    p.check_timeouts()
    events = [(q, ev) for q, ev in j.read(p.stream, after=0)]
    seq = next(q for q, ev in events if ev["type"] == "preempted")
    j2 = MemoryJournal()
    for stream in j.streams():
        for q, ev in j.read(stream, after=0):
            if q == seq and stream == p.stream:
                ev = {**ev, "keys": ["a6", "a1", "a2", "a3"]}
            j2.append(stream, [ev])
    r = Scheduler.from_yaml(seed_002_config(), store=j2, clock=clock).partition("default")
    assert r.allocation("a0") is not None and r.allocation("a6") is None
