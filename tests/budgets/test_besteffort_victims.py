"""``exhausted: besteffort`` work "is the first preempted" (issue 34) by every victim search, not only by
the budget's own timer: YuniKorn's preemption to restore guaranteed resources, quota preemption of a
lowered max, Kueue's fair-sharing preemption, and the elastic quotas' inner-quota preemption and
reclaim each take an allocation running on best-effort terms before the ordinary one their own order
would have taken — among the victims their own rules allow (never one more). eve's budget (1
core-hour a month, ``besteffort``) is spent by holding one core for an hour; alice has none."""

from __future__ import annotations

import json
from collections.abc import Callable

from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.elastic._state import Pod, Quota
from quotaplane.elastic.model import QuotaSpec
from quotaplane.elastic.victims import revoke_victims
from quotaplane.journal import MemoryJournal
from quotaplane.policies.budgets import BudgetPolicy
from quotaplane.resources import Resource
from tests.partition.helpers import Clock
from tests.preemption.helpers import ALICE, Recorder, cpu, elastic_quota

EVE = UserGroup("eve", [])
H = 3600.0

#: eve may use 1 core-hour a month, then only as best effort
EVE_BUDGET = """  budgets:
  - queue: root
    user: eve
    resourcehours: {vcore: 1}
    exhausted: besteffort
"""


def _canon(s: Scheduler) -> str:
    return json.dumps(s.dump_state(), sort_keys=True)


def _world(text: str, node: int) -> tuple[Scheduler, Clock, MemoryJournal]:
    clock = Clock()
    j = MemoryJournal()
    s = Scheduler.from_yaml(text, store=j, clock=clock)
    s.partition("default").add_node("n1", cpu(node))
    return s, clock, j


def _keys(rec: Recorder) -> list[list[str]]:
    return [[a["allocationKey"] for a in n["allocations"]] for n in rec.of("preempted")]


def _budgets(s: Scheduler) -> BudgetPolicy:
    found = next(pol for _, pol in s.partition("default").extensions() if isinstance(pol, BudgetPolicy))
    assert isinstance(found, BudgetPolicy)
    return found


GUARANTEED = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: parent
      resources: {max: {vcore: 10}}
      queues:
      - name: child1
        resources: {guaranteed: {vcore: 5}}
      - name: child2
        resources: {guaranteed: {vcore: 5}}
""" + EVE_BUDGET


def test_guarantee_preemption_takes_best_effort_work_before_the_newest() -> None:
    """PR-Y7 takes the newest allocation of child1 first (alice's); eve's older one runs on best-effort
    terms, so it goes instead. The cluster has idle room (the refusal is root.parent's max), so the
    budget's own timer takes nothing: the guarantee search chose."""
    s, clock, j = _world(GUARANTEED, 100)
    p = s.partition("default")
    p.add_application("eve", EVE, queue="root.parent.child1")
    p.add_application("alice", ALICE, queue="root.parent.child1")
    p.add_application("other", ALICE, queue="root.parent.child2")
    assert p.allocate("eve", "e1", cpu(5))
    clock.advance(H)                                    # eve's core-hour is spent: best effort now
    assert p.allocate("alice", "a1", cpu(5))            # the newest: PR-Y7's first victim
    rec = Recorder(p)
    p.add_ask("other", "ask", cpu(5))
    clock.advance(30)
    p.check_timeouts()
    assert p.allocation("ask") is not None
    assert _keys(rec) == [["e1"]]
    assert rec.of("preempted")[0]["reason"]["code"] == "queue.guaranteed"
    assert p.allocation("a1") is not None
    replayed = Scheduler.from_yaml(GUARANTEED, store=j, clock=clock)
    assert _canon(replayed) == _canon(s)


def _quota(max_cpu: int) -> str:
    return f"""
partitions:
- name: default
  preemption: {{quotapreemptionenabled: true}}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: leaf
      resources: {{max: {{vcore: {max_cpu}}}}}
      properties: {{quota.preemption.delay: 10s}}
""" + EVE_BUDGET


def test_quota_preemption_takes_best_effort_work_before_the_lowest_priority() -> None:
    """PR-Q4 takes the lowest priority first (alice's, 0); eve's (priority 9) runs on best-effort terms,
    so it goes instead when the max is lowered, and alone (it covers the excess)."""
    s, clock, j = _world(_quota(4), 100)
    p = s.partition("default")
    p.add_application("eve", EVE, queue="root.leaf")
    p.add_application("alice", ALICE, queue="root.leaf")
    assert p.allocate("eve", "e1", cpu(1), priority=9)
    assert p.allocate("alice", "a1", cpu(1), priority=0)
    assert p.allocate("alice", "a2", cpu(1), priority=5)
    clock.advance(H)
    s.update_config(_quota(2))
    rec = Recorder(p)
    p.check_timeouts()                                  # first seen over its max: due in 10 s
    clock.advance(10)
    p.check_timeouts()
    assert _keys(rec) == [["e1"]]
    assert rec.of("preempted")[0]["reason"]["code"] == "queue.quota"
    assert p.allocation("a1") is not None and p.allocation("a2") is not None
    assert _canon(Scheduler.from_yaml(_quota(2), store=j, clock=clock)) == _canon(s)


def test_quota_preemption_without_best_effort_work_keeps_its_order() -> None:
    """The same lowered max with eve's budget not spent (no hour passed): PR-Q4's own order."""
    s, clock, _ = _world(_quota(4), 100)
    p = s.partition("default")
    p.add_application("eve", EVE, queue="root.leaf")
    p.add_application("alice", ALICE, queue="root.leaf")
    assert p.allocate("eve", "e1", cpu(1), priority=9)
    assert p.allocate("alice", "a1", cpu(1), priority=0)
    assert p.allocate("alice", "a2", cpu(1), priority=5)
    s.update_config(_quota(2))
    rec = Recorder(p)
    p.check_timeouts()
    clock.advance(10)
    p.check_timeouts()
    assert _keys(rec) == [["a1"]]


FAIR = """
partitions:
- name: default
  fairsharing: {enabled: true}
  preemption: {enabled: true}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: all
      resources: {max: {vcore: 9}}
      queues:
      - name: a
        resources: {guaranteed: {vcore: 3}}
        properties: {preemption.withinclusterqueue: LowerPriority, preemption.reclaimwithincohort: Any}
      - name: b
        resources: {guaranteed: {vcore: 3}}
        properties: {preemption.withinclusterqueue: LowerPriority, preemption.reclaimwithincohort: Any}
      - name: c
        resources: {guaranteed: {vcore: 3}}
        properties: {preemption.withinclusterqueue: LowerPriority, preemption.reclaimwithincohort: Any}
""" + EVE_BUDGET


def test_fair_sharing_preemption_takes_best_effort_work_first() -> None:
    """c reclaims its guarantee: KQ-S6 targets b, the queue using the most (5), and would take its
    newest; eve's best-effort work in a (4, also borrowing) goes instead, by the same reclamation rule
    (c stays within its guarantee)."""
    s, clock, j = _world(FAIR, 100)
    p = s.partition("default")
    for q in "abc":
        p.add_application(q, ALICE, queue=f"root.all.{q}")
    p.add_application("eve", EVE, queue="root.all.a")
    assert p.allocate("eve", "e1", cpu(1))
    clock.advance(H)
    for i in range(3):
        assert p.allocate("a", f"a{i}", cpu(1))
    for i in range(5):
        assert p.allocate("b", f"b{i}", cpu(1))
    rec = Recorder(p)
    p.add_ask("c", "incoming", cpu(1))
    assert p.allocation("incoming") is None
    clock.advance(31)
    p.check_timeouts()
    p.schedule()
    assert p.allocation("incoming") is not None
    assert _keys(rec) == [["e1"]]
    assert rec.of("preempted")[0]["reason"]["code"] == "queue.fairsharing"
    assert all(p.allocation(f"b{i}") is not None for i in range(5))
    assert _canon(Scheduler.from_yaml(FAIR, store=j, clock=clock)) == _canon(s)


ELASTIC = f"""
partitions:
- name: default
  elasticquotas:
    quotas: |
{elastic_quota("team-a", 1, 4)}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: q
""" + EVE_BUDGET


def test_inner_quota_preemption_takes_best_effort_work_before_the_lowest_priority() -> None:
    """E6: a priority-9 request refused by team-a's runtime (its max, 4) preempts lower-priority pods of
    team-a, least important first and reprieved from the most important: alice's priority-0 pod
    before eve's priority-5 one — but eve's runs on best-effort terms, so it goes."""
    s, clock, j = _world(ELASTIC, 16)
    p = s.partition("default")
    tags = {"namespace": "team-a"}
    p.add_application("eve", EVE, queue="root.q", tags=tags)
    p.add_application("alice", ALICE, queue="root.q", tags=tags)
    assert p.allocate("eve", "e1", cpu(1), priority=5)
    clock.advance(H)
    assert p.allocate("alice", "a0", cpu(1), priority=0)
    assert p.allocate("alice", "a1", cpu(2), priority=7)
    rec = Recorder(p)
    assert p.allocate("alice", "big", cpu(1), priority=9).allocated
    assert _keys(rec) == [["e1"]]
    assert rec.of("preempted")[0]["reason"]["code"] == "elastic.preempted"
    assert p.allocation("a0") is not None
    assert _canon(Scheduler.from_yaml(ELASTIC, store=j, clock=clock)) == _canon(s)


def _pod(pod_id: str, priority: int, start: float) -> Pod:
    return Pod(pod_id, "team-a", {"cpu": 1000}, priority, True, True, start)


def test_elastic_reclaim_takes_best_effort_pods_first() -> None:
    """E5: a quota one core over its runtime gives back its least important pod — the lowest priority
    (``low``) — unless a pod runs on best-effort terms (``be``, priority 9): then that one."""
    q = Quota(QuotaSpec("team-a", Resource({"cpu": 1000}), Resource({"cpu": 8000})))
    q.used = {"cpu": 3000}
    pods = [_pod("low", 0, 1.0), _pod("be", 9, 0.0), _pod("mid", 5, 2.0)]
    limit = {"cpu": 2000}
    assert revoke_victims(q, pods, limit) == ["low"]
    first: Callable[[str], bool] = lambda key: key == "be"      # noqa: E731
    assert revoke_victims(q, pods, limit, first) == ["be"]


def test_the_predicate_names_the_work_of_exhausted_besteffort_scopes_only() -> None:
    """eve's allocation is on best-effort terms once her budget is spent, never alice's; without a
    ``besteffort`` budget there is no predicate (the searches keep their own order at no cost)."""
    s, clock, _ = _world(GUARANTEED, 100)
    p = s.partition("default")
    p.add_application("eve", EVE, queue="root.parent.child1")
    p.add_application("alice", ALICE, queue="root.parent.child1")
    assert p.allocate("eve", "e1", cpu(1)) and p.allocate("alice", "a1", cpu(1))
    first = _budgets(s).best_effort_at(clock())
    assert first is not None and not first("e1") and not first("a1")
    clock.advance(H)
    first = _budgets(s).best_effort_at(clock())
    assert first is not None and first("e1") and not first("a1") and not first("unknown")
    s, _, _ = _world(GUARANTEED.replace("besteffort", "hold"), 100)
    assert _budgets(s).best_effort_at(1000.0) is None
