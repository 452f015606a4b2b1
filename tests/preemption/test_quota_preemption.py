"""YuniKorn quota preemption after a lowered max (PR-Q1…PR-Q5, decisions Q3, P5) through the partition."""

from __future__ import annotations

import json

from quotaplane.cluster import Scheduler
from quotaplane.journal import MemoryJournal
from tests.partition.helpers import Clock
from tests.preemption.helpers import ALICE, Recorder, cpu

CONFIG = """
partitions:
- name: default
  preemption: {{quotapreemptionenabled: {enabled}}}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: leaf
      resources: {{max: {{vcore: {max}}}{guaranteed}}}
      properties: {{quota.preemption.delay: 10s}}
"""


def config(max_cpu: int, *, enabled: bool = True, guaranteed: int | None = None) -> str:
    g = "" if guaranteed is None else f", guaranteed: {{vcore: {guaranteed}}}"
    return CONFIG.format(enabled=str(enabled).lower(), max=max_cpu, guaranteed=g)


def _world(text: str, journal: MemoryJournal) -> tuple[Scheduler, Clock]:
    clock = Clock()
    s = Scheduler.from_yaml(text, store=journal, clock=clock)
    p = s.partition("default")
    p.add_node("n1", cpu(100))
    p.add_application("app", ALICE, queue="root.leaf")
    return s, clock


def test_worked_example_the_lowest_priority_go_until_usage_is_within_the_new_max() -> None:
    """PR-Q2, PR-Q4, P5: max 10 → 5 at t=20 with 8 × 1 cpu of priorities (old→new) 0,5,0,5,0,9,9,5: at
    t=30 the three priority-0 allocations go in one preempted event (reason queue.quota)."""
    j = MemoryJournal()
    s, clock = _world(config(10), j)
    p = s.partition("default")
    rec = Recorder(p)
    for i, prio in enumerate([0, 5, 0, 5, 0, 9, 9, 5]):
        clock.advance(1)
        assert p.allocate("app", f"k{i}", cpu(1), priority=prio)
    clock.now = 1020.0
    s.update_config(config(5))
    p.check_timeouts()                                  # t=20: first seen over its max: due at 30
    clock.now = 1029.0
    p.check_timeouts()
    assert p.queues.queue("root.leaf").allocated == cpu(8)
    clock.now = 1030.0
    out = p.check_timeouts()
    assert out == ["k4: preempted by queue (root.leaf)", "k2: preempted by queue (root.leaf)",
                   "k0: preempted by queue (root.leaf)"]
    assert p.queues.queue("root.leaf").allocated == cpu(5)
    (taken,) = rec.of("preempted")
    assert taken["reason"]["code"] == "queue.quota" and "preemptor" not in taken
    replayed = Scheduler.from_yaml(config(5), store=j, clock=clock)
    assert json.dumps(replayed.dump_state(), sort_keys=True) == json.dumps(s.dump_state(), sort_keys=True)


def test_never_below_guaranteed() -> None:
    """PR-Q3: guaranteed 7, allocations of 2 (usage 8), max lowered to 7: at most 1 may go, no victim
    fits in 1: nothing is preempted."""
    s, clock = _world(config(10, guaranteed=7), MemoryJournal())
    p = s.partition("default")
    for i in range(4):
        assert p.allocate("app", f"k{i}", cpu(2))
    s.update_config(config(7, guaranteed=7))
    for _ in range(3):
        p.check_timeouts()
        clock.advance(10)
    assert p.queues.queue("root.leaf").allocated == cpu(8)


def test_back_within_max_before_the_delay_clears_the_trigger() -> None:
    """PR-Q2: usage that dropped to ≤ max meanwhile preempts nothing."""
    s, clock = _world(config(10), MemoryJournal())
    p = s.partition("default")
    for i in range(8):
        assert p.allocate("app", f"k{i}", cpu(1))
    s.update_config(config(5))
    p.check_timeouts()
    p.release_batch([f"k{i}" for i in range(3)])
    clock.advance(10)
    assert p.check_timeouts() == []
    assert p.queues.queue("root.leaf").allocated == cpu(5)


def test_off_unless_the_partition_switch_is_on() -> None:
    """PR-Q1 / Q3: quotapreemptionenabled false: nothing is ever evicted."""
    s, clock = _world(config(10, enabled=False), MemoryJournal())
    p = s.partition("default")
    for i in range(8):
        assert p.allocate("app", f"k{i}", cpu(1))
    s.update_config(config(5, enabled=False))
    for _ in range(3):
        p.check_timeouts()
        clock.advance(10)
    assert p.queues.queue("root.leaf").allocated == cpu(8)


def test_non_preemptible_allocations_stay_and_the_queue_stays_above_max() -> None:
    """Item 7: only preemptible allocations; best effort when they cannot reach the max."""
    s, clock = _world(config(10), MemoryJournal())
    p = s.partition("default")
    for i in range(8):
        assert p.allocate("app", f"k{i}", cpu(1), preemptible=i < 1)
    s.update_config(config(5))
    p.check_timeouts()
    clock.advance(10)
    p.check_timeouts()
    assert p.allocation("k0") is None
    assert p.queues.queue("root.leaf").allocated == cpu(7)


def test_p5_reaches_the_max_where_upstream_stops_short() -> None:
    """P5 (``TestQuotaChangeTryPreemption`` "guaranteed not set": max 20 → 10, victims of 5, 6, 9 in
    that order): upstream takes only the 5 and stays above max; quotaplane takes the 5, then the 6
    (alone within max now), and stops at 9 ≤ 10."""
    s, clock = _world(config(20), MemoryJournal())
    p = s.partition("default")
    for key, size in (("v9", 9), ("v6", 6), ("v5", 5)):         # newest first: v5, v6, v9
        clock.advance(1)
        assert p.allocate("app", key, cpu(size))
    s.update_config(config(10))
    p.check_timeouts()
    clock.advance(10)
    p.check_timeouts()
    assert [k for k in ("v5", "v6", "v9") if p.allocation(k) is None] == ["v5", "v6"]
    assert p.queues.queue("root.leaf").allocated == cpu(9)


PARENT = """
partitions:
- name: default
  preemption: {{quotapreemptionenabled: true}}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: p
      resources: {{max: {{vcore: {max}}}}}
      properties: {{quota.preemption.delay: 10s}}
      queues:
      - name: c1
        resources: {{guaranteed: {{vcore: 2}}}}
      - name: c2
"""


def test_a_parent_splits_its_excess_among_children_by_their_usage_above_guaranteed() -> None:
    """PR-Q3 (``TestQuotaChangeGetChildQueuesPreemptableResource``): p max 10 → 4 with c1 using 6
    (guaranteed 2: 4 above) and c2 using 2 (no guaranteed: 2 above): excess 4 splits floor(4·4/6) = 2 to
    c1 and floor(2·4/6) = 1 to c2; the last 1 goes in the global order (c1's priority 0 first). A
    single global order would have taken all four from c1."""
    clock = Clock()
    s = Scheduler.from_yaml(PARENT.format(max=10), store=MemoryJournal(), clock=clock)
    p = s.partition("default")
    p.add_node("n1", cpu(100))
    p.add_application("one", ALICE, queue="root.p.c1")
    p.add_application("two", ALICE, queue="root.p.c2")
    for i in range(6):
        clock.advance(1)
        assert p.allocate("one", f"c1-{i}", cpu(1), priority=0)
    for i in range(2):
        clock.advance(1)
        assert p.allocate("two", f"c2-{i}", cpu(1), priority=9)
    s.update_config(PARENT.format(max=4))
    p.check_timeouts()
    clock.advance(10)
    p.check_timeouts()
    assert p.queues.queue("root.p").allocated == cpu(4)
    assert p.queues.queue("root.p.c1").allocated == cpu(3)
    assert p.queues.queue("root.p.c2").allocated == cpu(1)


def test_held_quota_preemption_takes_no_more_while_its_victims_go() -> None:
    """Held preemption (issue 31, the Kubernetes front): the cut's victims stay charged until released,
    so the queue still looks over its max when the next delay has passed. It preempts nothing more
    while they go (they will make the room); a victim given up is spared and the next cut picks
    others."""
    s, clock = _world(config(10), MemoryJournal())
    p = s.partition("default")
    p.hold_preempted = True
    for i, prio in enumerate([0, 5, 0, 5, 0, 9, 9, 5]):
        clock.advance(1)
        assert p.allocate("app", f"k{i}", cpu(1), priority=prio)
    s.update_config(config(5))
    p.check_timeouts()
    clock.advance(10)
    p.check_timeouts()
    assert sorted(p.preempting()) == ["k0", "k2", "k4"]
    for _ in range(4):                       # the delays pass again and again: nothing more is taken
        clock.advance(10)
        p.check_timeouts()
    assert sorted(p.preempting()) == ["k0", "k2", "k4"]
    assert p.queues.queue("root.leaf").allocated == cpu(8)
    p.cancel_preemption(["k4"])              # its eviction was refused too long: the next cut picks another
    for _ in range(3):
        clock.advance(10)
        p.check_timeouts()
    assert sorted(p.preempting()) == ["k0", "k2", "k7"]       # the next: lowest priority, newest (PR-Q4)
    assert p.spared() == ["k4"]
