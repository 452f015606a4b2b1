"""YuniKorn preemption to restore guaranteed resources (PR-Y1…PR-Y9) through the partition: the worked
examples of the preemption reference (ports of yunikorn-core's ``TestTryPreemptionOnQueue`` and the
user guide's cases)."""

from __future__ import annotations

import json
from typing import Any

from quotaplane.cluster import Scheduler
from quotaplane.journal import MemoryJournal
from tests.partition.helpers import Clock
from tests.preemption.helpers import ALICE, Recorder, cpu

ON_QUEUE = """
partitions:
- name: default
{preemption}  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: parent
      resources: {{max: {{vcore: 10}}}}
      queues:
      - name: child1
        resources: {{guaranteed: {{vcore: 5}}}}
      - name: child2
        resources: {{guaranteed: {{vcore: 5}}}}
{child2_props}
"""


def _on_queue(preemption: str = "", child2_props: str = "") -> str:
    return ON_QUEUE.format(preemption=preemption, child2_props=child2_props)


def _world(config: str, journal: MemoryJournal | None = None, capacity: int = 100) -> tuple[Scheduler, Clock]:
    clock = Clock()
    s = Scheduler.from_yaml(config, store=journal or MemoryJournal(), clock=clock)
    s.partition("default").add_node("n1", cpu(capacity))
    return s, clock


def _example_1(config: str, journal: MemoryJournal | None = None) -> tuple[Scheduler, Clock]:
    s, clock = _world(config, journal)
    p = s.partition("default")
    p.add_application("app1", ALICE, queue="root.parent.child1")
    p.add_application("app2", ALICE, queue="root.parent.child2")
    assert p.allocate("app1", "c1-0", cpu(5))
    clock.advance(1)
    assert p.allocate("app1", "c1-1", cpu(5))                    # the newer of the two
    p.add_ask("app2", "ask", cpu(5))
    return s, clock


def test_worked_example_1_the_newest_allocation_of_the_queue_over_guaranteed_goes() -> None:
    """PR-Y2/Y4/Y5/Y7: the ask is refused by root.parent's max (fence root); child2 may take 5 within its
    guaranteed; child1 is over (10 > 5); newest first: c1-1 goes, child1 stays at its guaranteed."""
    j = MemoryJournal()
    s, clock = _example_1(_on_queue(), j)
    p = s.partition("default")
    rec = Recorder(p)
    assert p.allocation("ask") is None
    clock.advance(29)                                               # preemption.delay 30 s not yet
    p.schedule()
    assert p.allocation("ask") is None
    clock.advance(1)
    p.check_timeouts()                                              # the timer's cycle (PR-Y3)
    assert p.allocation("ask") is not None and p.allocation("c1-1") is None
    assert p.queues.queue("root.parent.child1").allocated == cpu(5)
    assert p.queues.queue("root.parent.child2").allocated == cpu(5)
    (taken,) = rec.of("preempted")
    assert taken["preemptor"] == "ask" and taken["reason"]["code"] == "queue.guaranteed"
    assert taken["reason"]["path"] == "root.parent.child2"
    replayed = Scheduler.from_yaml(_on_queue(), store=j, clock=clock)
    assert json.dumps(replayed.dump_state(), sort_keys=True) == json.dumps(s.dump_state(), sort_keys=True)


def test_preemption_enabled_false_turns_it_off() -> None:
    """PR-Y1: the partition switch."""
    s, clock = _example_1(_on_queue(preemption="  preemption: {enabled: false}\n"))
    p = s.partition("default")
    clock.advance(60)
    p.schedule()
    assert p.allocation("ask") is None and p.allocation("c1-1") is not None


def test_the_queue_delay_property_is_the_leafs() -> None:
    """PR-Y3: ``preemption.delay`` of the ask's leaf."""
    s, clock = _example_1(_on_queue(child2_props="        properties: {preemption.delay: 5s}\n"))
    p = s.partition("default")
    clock.advance(4)
    p.schedule()
    assert p.allocation("ask") is None
    clock.advance(1)
    p.schedule()
    assert p.allocation("ask") is not None


def test_a_disabled_queue_gives_no_victims() -> None:
    """PR-Y5 / P4: ``preemption.policy: disabled`` on the victim leaf."""
    config = _on_queue().replace("""      - name: child1
        resources: {guaranteed: {vcore: 5}}""", """      - name: child1
        resources: {guaranteed: {vcore: 5}}
        properties: {preemption.policy: disabled}""")
    s, clock = _example_1(config)
    p = s.partition("default")
    clock.advance(30)
    p.schedule()
    assert p.allocation("ask") is None


def test_non_preemptible_allocations_are_never_victims() -> None:
    """PR-Y8 (quotaplane): ``preemptible: false`` is never taken."""
    s, clock = _world(_on_queue())
    p = s.partition("default")
    p.add_application("app1", ALICE, queue="root.parent.child1")
    p.add_application("app2", ALICE, queue="root.parent.child2")
    assert p.allocate("app1", "c1-0", cpu(5))
    assert p.allocate("app1", "c1-1", cpu(5), preemptible=False)
    p.add_ask("app2", "ask", cpu(5))
    clock.advance(30)
    p.schedule()
    assert p.allocation("c1-1") is not None
    # the older, preemptible one does not help alone: child1 would go below its guaranteed? no —
    # child1 holds 10, guaranteed 5: c1-0 may go
    assert p.allocation("c1-0") is None and p.allocation("ask") is not None


def test_a_higher_priority_allocation_is_never_a_victim_of_a_lower_priority_ask() -> None:
    """PR-Y6 (``TestTryPreemption_OnQueue_VictimsAvailable_LowerPriority``)."""
    s, clock = _world(_on_queue())
    p = s.partition("default")
    p.add_application("app1", ALICE, queue="root.parent.child1")
    p.add_application("app2", ALICE, queue="root.parent.child2")
    assert p.allocate("app1", "c1-0", cpu(5), priority=1000)
    assert p.allocate("app1", "c1-1", cpu(5), priority=1000)
    p.add_ask("app2", "ask", cpu(5), priority=0)
    clock.advance(30)
    p.schedule()
    assert p.allocation("ask") is None


GENERAL = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: normal
      resources: {max: {vcore: 12}}
      queues:
      - name: queue-1
        resources: {max: {vcore: 10}, guaranteed: {vcore: 5}}
      - name: queue-2
        resources: {max: {vcore: 10}, guaranteed: {vcore: 5}}
"""


def _general_case(p: Any, clock: Clock) -> None:
    """The user guide's general case: queue-1 runs 10 × 1 (one per second), queue-2 runs 2 × 1 and asks
    8 × 1; then the preemption delay passes."""
    p.add_application("q1", ALICE, queue="root.normal.queue-1")
    p.add_application("q2", ALICE, queue="root.normal.queue-2")
    for i in range(10):
        clock.advance(1)
        assert p.allocate("q1", f"q1-{i}", cpu(1))
    for i in range(2):
        assert p.allocate("q2", f"q2-{i}", cpu(1))
    for i in range(8):
        p.add_ask("q2", f"ask-{i}", cpu(1))
    clock.advance(30)


def test_worked_example_2_asks_preempt_only_up_to_their_guaranteed() -> None:
    """Law 4 (user guide "General Preemption Case"): queue-2 runs 2 and asks 8 × 1; three asks preempt
    queue-1's three newest, the fourth would take queue-2 above its guaranteed: queue-1 7, queue-2 5."""
    s, clock = _world(GENERAL)
    p = s.partition("default")
    _general_case(p, clock)
    for _ in range(3):
        p.schedule()
    assert p.queues.queue("root.normal.queue-1").allocated == cpu(7)
    assert p.queues.queue("root.normal.queue-2").allocated == cpu(5)
    assert sorted(k for k in (f"q1-{i}" for i in range(10)) if p.allocation(k) is None) == \
        ["q1-7", "q1-8", "q1-9"]
    assert len(p.pending()) == 5


PRIORITY = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: high-pri
      resources: {guaranteed: {vcore: 6}}
      properties: {priority.offset: "100"}
    - name: norm-pri
      resources: {guaranteed: {vcore: 6}}
      properties: {priority.offset: "0"}
    - name: low-pri
      resources: {guaranteed: {vcore: 6}}
      properties: {priority.offset: "-100"}
"""


def test_worked_example_3_priority_offsets() -> None:
    """PR-Y6 (user guide "Priority Queue"): a high-pri ask preempts norm-pri tasks up to its guaranteed;
    a low-pri ask finds no victim."""
    s, clock = _world(PRIORITY, capacity=18)                       # the root is the cluster: 18
    p = s.partition("default")
    p.add_application("n", ALICE, queue="root.norm-pri")
    p.add_application("h", ALICE, queue="root.high-pri")
    p.add_application("lo", ALICE, queue="root.low-pri")
    for i in range(6):
        clock.advance(1)
        assert p.allocate("n", f"n{i}", cpu(3))
    p.add_ask("lo", "lo-ask", cpu(3))
    for i in range(3):
        p.add_ask("h", f"h{i}", cpu(3))
    clock.advance(30)
    for _ in range(3):
        p.schedule()
    assert p.queues.queue("root.high-pri").allocated == cpu(6)
    assert p.queues.queue("root.norm-pri").allocated == cpu(12)
    assert p.allocation("lo-ask") is None


def test_at_most_ten_preemptions_per_leaf_queue_in_one_cycle(monkeypatch: Any) -> None:
    """PR-Y3 / PR-S2: a cycle preempts for at most MAX_PREEMPTIONS_PER_QUEUE asks of one leaf queue."""
    import quotaplane.scheduling.runner as runner

    monkeypatch.setattr(runner, "MAX_PREEMPTIONS_PER_QUEUE", 2)
    s, clock = _world(GENERAL)
    p = s.partition("default")
    p.auto_schedule = False
    _general_case(p, clock)
    p.schedule()
    assert p.queues.queue("root.normal.queue-2").allocated == cpu(4)    # two, not three
    p.schedule()
    assert p.queues.queue("root.normal.queue-2").allocated == cpu(5)


FENCED = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: ten-a
      resources: {max: {vcore: 10}}
      properties: {preemption.policy: fence}
      queues:
      - name: a1
        resources: {guaranteed: {vcore: 2}}
      - name: a2
        resources: {guaranteed: {vcore: 5}}
    - name: sys
      resources: {guaranteed: {vcore: 5}}
"""


def test_worked_example_4_a_fence_keeps_the_search_in_but_not_others_out() -> None:
    """PR-Y5 (user guide "Preemption Fence"): a task under the fenced ten-a only finds victims under
    ten-a; a task in sys searches from the root and may take victims inside ten-a."""
    s, clock = _world(FENCED, capacity=10)
    p = s.partition("default")
    p.add_application("a1", ALICE, queue="root.ten-a.a1")
    p.add_application("a2", ALICE, queue="root.ten-a.a2")
    p.add_application("sys", ALICE, queue="root.sys")
    for i in range(10):
        clock.advance(1)
        assert p.allocate("a1", f"a1-{i}", cpu(1))                   # a1 holds the whole cluster
    p.add_ask("a2", "in-fence", cpu(3))
    p.add_ask("sys", "outside", cpu(3))
    clock.advance(30)
    p.schedule()
    assert p.allocation("in-fence") is not None                      # victims of a1, inside ten-a
    assert p.allocation("outside") is not None                       # sys reaches into ten-a too
    assert p.queues.queue("root.ten-a.a1").allocated == cpu(4)


def test_a_fenced_ask_never_takes_victims_outside_its_fence() -> None:
    """PR-Y5: sys is above its guaranteed, but an ask under the fenced ten-a searches only ten-a."""
    s, clock = _world(FENCED, capacity=10)
    p = s.partition("default")
    p.add_application("a2", ALICE, queue="root.ten-a.a2")
    p.add_application("sys", ALICE, queue="root.sys")
    for i in range(10):
        clock.advance(1)
        assert p.allocate("sys", f"s-{i}", cpu(1))
    p.add_ask("a2", "in-fence", cpu(3))
    clock.advance(30)
    p.schedule()
    assert p.allocation("in-fence") is None
    assert p.queues.queue("root.sys").allocated == cpu(10)


LIMITED = """
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
        limits:
        - limit: bob
          users: [bob]
          maxresources: {vcore: 3}
"""


def test_an_ask_refused_by_a_user_limit_never_triggers() -> None:
    """PR-Y2: only queue headroom refusals trigger; bob's own limit (3) refuses a 5-cpu ask outright."""
    from quotaplane.config.identity import UserGroup

    s, clock = _world(LIMITED)
    p = s.partition("default")
    p.add_application("app1", ALICE, queue="root.parent.child1")
    p.add_application("app2", UserGroup("bob", []), queue="root.parent.child2")
    assert p.allocate("app1", "c1-0", cpu(5))
    assert p.allocate("app1", "c1-1", cpu(5))
    p.add_ask("app2", "ask", cpu(5))
    clock.advance(30)
    p.schedule()
    assert p.allocation("ask") is None and p.allocation("c1-1") is not None
    assert {v.code for v in (p.pending_reasons("ask") or [])} >= {"user.maxresources"}


def test_the_every_policy_check_with_victims_withdrawn_changes_nothing() -> None:
    """PR-Y9: ``admitted_without`` checks the request against every policy as if the victims were gone
    and puts them back exactly: victims outside the ask's path leave its queue max refusing, victims on
    it let it in, and the state is the same before and after either way."""
    from quotaplane.scheduling.preemption import admitted_without
    from quotaplane.scheduling.questions import victims_of

    s, _ = _example_1(_on_queue())
    p = s.partition("default")
    p.add_application("other", ALICE, queue="root.parent.child1")
    state = p._core.state
    app = state.apps["app2"]
    req = state.request(app, "ask", cpu(5), first=True)
    before = json.dumps(s.dump_state(), sort_keys=True)
    still = admitted_without(state.policies, req, [])
    assert [v.code for v in still] == ["queue.max"]
    assert admitted_without(state.policies, req, victims_of(state, ["c1-1"])) == []
    assert json.dumps(s.dump_state(), sort_keys=True) == before
