"""Koordinator inner-quota preemption (seed 002 PostFilter, E6, PR-K6) through the partition."""

from __future__ import annotations

import json

import pytest

from quotaplane.cluster import Scheduler
from quotaplane.journal import MemoryJournal
from tests.partition.helpers import Clock
from tests.preemption.helpers import ALICE, Recorder, cpu, elastic_quota


def _config(preemption: bool | None = None) -> str:
    option = "" if preemption is None else f"    preemption: {str(preemption).lower()}\n"
    return f"""
partitions:
- name: default
  elasticquotas:
{option}    quotas: |
{elastic_quota("team-a", 3, 3)}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: q
"""


def _world(config: str | None = None, journal: MemoryJournal | None = None) -> Scheduler:
    clock = Clock()
    s = Scheduler.from_yaml(config or _config(), store=journal or MemoryJournal(), clock=clock)
    p = s.partition("default")
    p.add_node("n1", cpu(8))
    p.add_application("a", ALICE, queue="root.q", tags={"namespace": "team-a"})
    for key, prio in (("lo1", 1), ("lo2", 2), ("hi", 9)):
        clock.advance(1)                                     # lo1 oldest, hi newest
        assert p.allocate("a", key, cpu(1), priority=prio)
    return s


def test_the_worked_example_preempts_the_least_important_lower_priority_pod() -> None:
    """PR-K6: candidates lo1, lo2 (hi has a higher priority); both removed, lo2 reprieved (2 + 1 ≤ 3),
    lo1 preempted; the request is allocated and used stays at the runtime."""
    j = MemoryJournal()
    s = _world(journal=j)
    p = s.partition("default")
    rec = Recorder(p)
    w = p.what_if("a", cpu(1), priority=5)
    assert w.allocated and w.preempted == ["lo1"]                    # wouldPreempt, nothing changed
    assert p.allocation("lo1") is not None
    d = p.allocate("a", "new", cpu(1), priority=5)
    assert d.allocated and d.preempted == ["lo1"]
    assert p.allocation("lo1") is None and p.allocation("new") is not None
    assert p.policies()[2].manager.used("team-a") == cpu(3)        # type: ignore[attr-defined]
    (taken,) = rec.of("preempted")
    assert taken["preemptor"] == "new" and taken["reason"]["code"] == "elastic.preempted"
    assert taken["reason"]["path"] == "team-a"
    assert [a["allocationKey"] for a in taken["allocations"]] == ["lo1"]
    made = rec.of("allocated")
    assert made[-1]["allocationKey"] == "new" and made[-1]["seq"] == taken["seq"] + 1
    replayed = Scheduler.from_yaml(_config(), store=j, clock=Clock())
    assert json.dumps(replayed.dump_state(), sort_keys=True) == json.dumps(s.dump_state(), sort_keys=True)


def test_nothing_is_preempted_when_removing_every_candidate_is_not_enough() -> None:
    """PR-K6: a 2-cpu request at priority 2 has one candidate (lo1, 1 cpu): 3 − 1 + 2 > 3."""
    s = _world()
    p = s.partition("default")
    before = s.dump_state()
    d = p.allocate("a", "big", cpu(2), priority=2)
    assert not d.allocated and [v.code for v in d.reasons] == ["elastic.runtime"]
    assert s.dump_state() == before
    assert not p.what_if("a", cpu(2), priority=2).allocated


@pytest.mark.parametrize("priority", [0, 1])
def test_only_strictly_lower_priority_pods_are_candidates(priority: int) -> None:
    """E6: equal priority never preempts (so a victim re-submitted at its priority cannot take back)."""
    s = _world()
    p = s.partition("default")
    d = p.allocate("a", "x", cpu(1), priority=priority)
    assert not d.allocated and d.preempted == []


def test_non_preemptible_pods_are_never_victims() -> None:
    clock = Clock()
    s = Scheduler.from_yaml(_config(), store=MemoryJournal(), clock=clock)
    p = s.partition("default")
    p.add_node("n1", cpu(8))
    p.add_application("a", ALICE, queue="root.q", tags={"namespace": "team-a"})
    for i in range(3):
        assert p.allocate("a", f"k{i}", cpu(1), priority=0, preemptible=False)
    assert not p.allocate("a", "x", cpu(1), priority=9).allocated


def test_preemption_false_turns_inner_quota_preemption_off() -> None:
    s = _world(_config(preemption=False))
    p = s.partition("default")
    d = p.allocate("a", "new", cpu(1), priority=5)
    assert not d.allocated and p.allocation("lo1") is not None
    assert not p.what_if("a", cpu(1), priority=5).allocated


def test_a_waiting_ask_preempts_in_a_cycle() -> None:
    """E6 for a pending ask: the cycle preempts and allocates it in one journalled step."""
    s = _world()
    p = s.partition("default")
    p.add_ask("a", "ask", cpu(1), priority=5)
    assert p.allocation("ask") is not None and p.allocation("lo1") is None
    assert p.pending() == []


def test_the_trial_puts_quota_tree_consumers_back_in_their_places() -> None:
    """PR-Y9's trial withdraws the victims from every policy and restores them exactly — in a quota
    tree too: a consumer released and re-applied would move to the end of its node's list (the order
    quota-tree preemption follows), so ``what_if`` would have changed the state."""
    import quotaplane as qp
    from tests.scenarios.world import ALICE as AL
    from tests.scenarios.world import CONFIG, canon, tags

    s = qp.Scheduler.from_yaml(CONFIG, clock=Clock())
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 10000}))
    p.add_application("al", AL, queue="root.a", tags=tags("team-a", "A"))
    for i, prio in enumerate([0, 0, 1]):
        p.allocate("al", f"h{i}", qp.Resource({"vcore": 1000}), priority=prio)
    policies = {pol.name: pol for pol in p.policies()}
    state = p._core.state
    before = canon(s)
    for key in ("h0", "h1"):
        from quotaplane.scheduling.preemption import admitted_without
        from quotaplane.scheduling.questions import victims_of

        admitted_without(state.policies, state.request(state.apps["al"], "", qp.Resource({"vcore": 1})),
                         victims_of(state, [key]))
        assert canon(s) == before, key
    assert "forest" in policies
