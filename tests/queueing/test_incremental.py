"""The incremental cycle equals the full cycle (issue 13, docs/queueing.md "Incremental cycles").

Two partitions run the same random history — asks, withdrawals, releases, direct allocations,
applications removed, nodes added, time passing (preemption delays, timeouts), explicit full cycles —
one with incremental automatic cycles, one with full ones. After every step their journals (every
allocation, preemption and release, in order) and their waiting asks with their reasons must be equal,
and each ask's reasons must equal ``what_if``. Unit tests pin the cost contract: a release retries only
the asks it could have unblocked.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.partition import Partition
from quotaplane.scheduler import Scheduler
from tests.partition.helpers import Clock
from tests.queueing.test_cycle import _count_tries

ALICE = UserGroup("alice", ["dev"])
BOB = UserGroup("bob", ["ops"])
CAROL = UserGroup("carol", ["dev"])
USERS = [ALICE, BOB, CAROL]

CONFIG = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      resources: {max: {vcore: 6}}
      limits:
      - {limit: alice, users: [alice], maxresources: {vcore: 4}}
      queues:
      - name: a1
        resources: {guaranteed: {vcore: 3}}
        properties: {preemption.delay: 5s}
      - name: a2
        properties: {application.sort.policy: fair}
    - name: b
      resources: {max: {vcore: 5}}
      limits:
      - {limit: dev apps, groups: [dev], maxapplications: 2}
      - {limit: ops, groups: [ops], maxresources: {vcore: 3}}
      queues:
      - name: b1
      - name: b2
        properties: {application.sort.policy: stateaware}
    - name: c
      resources: {guaranteed: {vcore: 4}}
      properties: {preemption.delay: 10s}
"""

LEAVES = ["a.a1", "a.a2", "b.b1", "b.b2", "c"]


def _v(n: int) -> Resource:
    return Resource({"vcore": n * 1000})


class Twin:
    """One partition with incremental automatic cycles and one with full ones, fed the same steps."""

    def __init__(self, config: str = CONFIG) -> None:
        self.clock = Clock()
        self.journals = [MemoryJournal(), MemoryJournal()]
        self.parts: list[Partition] = []
        for j, incremental in zip(self.journals, (True, False), strict=True):
            p = Scheduler.from_yaml(config, store=j, clock=self.clock, snapshot_every=0).partition("default")
            p.incremental = incremental
            self.parts.append(p)

    def each(self, fn: Any) -> list[Any]:
        """Run ``fn(partition)`` on both; both must raise the same error or return equal answers."""
        out: list[Any] = []
        for p in self.parts:
            try:
                out.append(("ok", fn(p)))
            except Exception as exc:        # a refusal must be the same refusal on both
                out.append(("error", type(exc).__name__, str(exc)))
        assert out[0] == out[1]
        return out

    def assert_same(self) -> None:
        inc = self.parts[0]
        events = [[ev for _, ev in j.read("default")] for j in self.journals]
        assert json.dumps(events[0], sort_keys=True) == json.dumps(events[1], sort_keys=True)
        waiting = [[(a.allocation_key, [v.to_dict() for v in a.reasons or []]) for a in p.pending()]
                   for p in self.parts]
        assert waiting[0] == waiting[1]
        for ask in inc.pending():
            # what_if asks for a new request, which every reservation in force holds back; the ask
            # itself is held back only by older reservations
            mine = [v for v in ask.reasons or [] if v.code != "queue.reserved"]
            new = inc.what_if(ask.application_id, ask.resource, priority=ask.priority,
                              preemptible=ask.preemptible).reasons
            assert mine == [v for v in new if v.code != "queue.reserved"]


_STEP = st.tuples(
    st.sampled_from(["ask", "ask", "ask", "release", "release", "withdraw", "allocate", "remove_app",
                     "node", "schedule", "tick", "big_ask", "auto"]),
    st.integers(0, len(LEAVES) - 1), st.integers(0, 2), st.integers(1, 4), st.integers(0, 2),
    st.integers(0, 12))


def _run(twin: Twin, steps: list[tuple[str, int, int, int, int, int]], leaves: list[str] = LEAVES) -> None:
    for i, (op, leaf, user, size, prio, wait) in enumerate(steps):
        twin.clock.advance(wait)
        u = USERS[user]
        app = f"{leaves[leaf]}-{u.user}"
        key = f"k{i}"

        def ensure(p: Partition, app: str = app, u: UserGroup = u, leaf: int = leaf) -> None:
            if p.application(app) is None:
                p.add_application(app, u, queue=f"root.{leaves[leaf]}")

        if op in ("ask", "big_ask"):
            amount = size * 2 if op == "big_ask" else size
            twin.each(lambda p, app=app, key=key, amount=amount, prio=prio, ensure=ensure:
                      (ensure(p), p.add_ask(app, key, _v(amount), priority=prio,
                                            preemptible=prio < 2).allocation_key)[1])
        elif op == "allocate":
            twin.each(lambda p, app=app, key=key, size=size, ensure=ensure:
                      (ensure(p), p.allocate(app, key, _v(size)).allocated)[1])
        elif op == "release":
            allocs = twin.parts[0].allocations()
            if allocs:
                target = allocs[size * 7 % len(allocs)].allocation_key
                twin.each(lambda p, target=target: p.release(target))
        elif op == "withdraw":
            asks = twin.parts[0].pending()
            if asks:
                target = asks[size * 5 % len(asks)].allocation_key
                twin.each(lambda p, target=target: p.remove_ask(target))
        elif op == "remove_app":
            if twin.parts[0].application(app) is not None:
                twin.each(lambda p, app=app: p.remove_application(app))
        elif op == "node":
            twin.each(lambda p, i=i, size=size: p.add_node(f"n{i}", _v(size * 2)))
        elif op == "schedule":
            twin.each(lambda p: [a.allocation_key for a in p.schedule()])
        elif op == "tick":
            twin.each(lambda p: p.check_timeouts())
        elif op == "auto":
            twin.each(lambda p: setattr(p, "auto_schedule", not p.auto_schedule))
        twin.assert_same()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_STEP, min_size=1, max_size=40), st.integers(4, 12))
def test_incremental_cycles_equal_full_cycles(steps: list[tuple[str, int, int, int, int, int]],
                                             cluster: int) -> None:
    """Same allocations, preemptions and releases in the same order, same waiting asks and reasons,
    after every step of a random history (queue maxima at two levels, user and group limits,
    maxapplications, fifo / fair / stateaware, YuniKorn preemption after its delay, direct
    allocations outside cycles, timers)."""
    twin = Twin()
    twin.each(lambda p: p.add_node("n0", _v(cluster)))
    _run(twin, steps)


#: guaranteed at three levels (division, department, leaf), preemption on with short delays, full leaves
#: under maxima: the wide tree of benchmarks/scale.py in small (issue 39)
DEEP = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: d
      resources: {guaranteed: {vcore: 8}}
      properties: {preemption.delay: 4s}
      queues:
      - name: p
        resources: {guaranteed: {vcore: 5}, max: {vcore: 7}}
        queues:
        - name: l1
          resources: {guaranteed: {vcore: 2}, max: {vcore: 3}}
          properties: {preemption.delay: 3s}
        - name: l2
          resources: {max: {vcore: 3}}
          properties: {application.sort.policy: fair}
      - name: q
        resources: {guaranteed: {vcore: 2}}
        queues:
        - name: l3
          resources: {max: {vcore: 2}}
    - name: e
      resources: {guaranteed: {vcore: 3}, max: {vcore: 5}}
      limits:
      - {limit: alice, users: [alice], maxresources: {vcore: 2}}
      queues:
      - name: l4
        properties: {preemption.delay: 6s}
"""

DEEP_LEAVES = ["d.p.l1", "d.p.l2", "d.q.l3", "e.l4"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_STEP, min_size=1, max_size=40), st.integers(4, 16))
def test_incremental_cycles_equal_full_cycles_with_guarantees_at_several_levels(
        steps: list[tuple[str, int, int, int, int, int]], cluster: int) -> None:
    """The same, on a tree with guaranteed at three levels, maxima at three levels and preemption on
    (issue 39: a release wakes only the asks its chain's guarantees can unblock)."""
    twin = Twin(DEEP)
    twin.each(lambda p: p.add_node("n0", _v(cluster)))
    _run(twin, [(op, leaf % len(DEEP_LEAVES), *rest) for op, leaf, *rest in steps], DEEP_LEAVES)


WIDE = """
partitions:
- name: default
  preemption: {enabled: false}
  queues:
  - name: root
    submitacl: '*'
    queues:
""" + "".join(f"""    - name: q{i}
      resources: {{max: {{vcore: 2}}}}
""" for i in range(20))


def test_a_release_retries_only_the_asks_of_the_queue_it_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Asks waiting in 19 other full queues are not tried when one queue releases."""
    p = Scheduler.from_yaml(WIDE, clock=Clock()).partition("default")
    p.add_node("n", _v(1000))
    for i in range(20):
        p.add_application(f"app{i}", ALICE, queue=f"root.q{i}")
        assert p.allocate(f"app{i}", f"fill{i}", _v(2)).allocated
        for j in range(3):
            p.add_ask(f"app{i}", f"k{i}-{j}", _v(1))
    tried = _count_tries(p, monkeypatch)
    p.release("fill7")
    # two fit; then q7's room is used up, so the third is not tried either (issue 38); no other queue
    assert tried == ["k7-0", "k7-1"]
    assert [a.allocation_key for a in p.pending()][:3] == ["k0-0", "k0-1", "k0-2"]


@pytest.mark.parametrize("style", ["soft", "hard"])
def test_a_timeout_retries_only_the_asks_it_can_unblock(monkeypatch: pytest.MonkeyPatch, style: str) -> None:
    """Issue 39: a timer that fires runs the cycle for what it changed, not a full one. An application
    going Completing -> Completed frees nothing: no ask is tried. A gang's placeholder timing out in
    q7 frees q7 (and, hard, the running count): its asks are retried only when they may fit there,
    none of the 19 other full queues' (a full cycle tried one ask of each)."""
    clock = Clock()
    p = Scheduler.from_yaml(WIDE, clock=clock).partition("default")
    p.add_node("n", _v(1000))
    for i in range(20):
        p.add_application(f"app{i}", ALICE, queue=f"root.q{i}")
        assert p.allocate(f"app{i}", f"fill{i}", _v(1)).allocated
        for j in range(3):
            p.add_ask(f"app{i}", f"k{i}-{j}", _v(2))         # cannot fit beside the fill: all wait
    p.add_application("done", BOB, queue="root.q5")
    p.add_application("gang", BOB, queue="root.q7", gang_style=style, placeholder_timeout=100)
    assert p.allocate("gang", "ph", _v(1), placeholder=True, task_group="tg").allocated
    assert p.allocate("done", "d1", _v(0)).allocated
    p.release("d1")                                    # done: Completing
    clock.advance(30)
    tried = _count_tries(p, monkeypatch)
    assert p.check_timeouts() == ["done: Completed"]
    assert tried == []
    clock.advance(70)
    assert p.check_timeouts()[0] == "gang: 1 placeholder(s) timed out"
    # q7 is freed, but by 1 vcore: its asks of 2 still exceed its max, so none is tried (issue 38)
    assert tried == []
    assert len(p.pending()) == 60
    p.release("fill7")                                 # now 2 are free in q7: its first ask fits
    assert tried == ["k7-0"]                           # and uses them up: the others wait (issue 38)


GUARANTEED_TREE = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
""" + "".join(f"""    - name: d{d}
      resources: {{guaranteed: {{vcore: 8}}}}
      queues:
""" + "".join(f"""      - name: p{p}
        resources: {{guaranteed: {{vcore: 4}}}}
        queues:
""" + "".join(f"""        - name: l{leaf}
          resources: {{max: {{vcore: 2}}}}
""" for leaf in range(3)) for p in range(2)) for d in range(2))


@pytest.mark.parametrize("delay_passed", [False, True])
def test_a_release_retries_only_the_asks_it_can_unblock_below_guarantees(
        monkeypatch: pytest.MonkeyPatch, delay_passed: bool) -> None:
    """Issue 39: with guaranteed on the divisions and departments and preemption on, asks held back by
    their own leaf's max wait on that leaf alone — a release in one leaf tries its asks, none of the
    other leaves' (before, every ask below the nearest guaranteed was retried). Also once their
    preemption delay passed: the departments are above their guaranteed, so nothing may preempt."""
    clock = Clock()
    p = Scheduler.from_yaml(GUARANTEED_TREE, clock=clock).partition("default")
    p.add_node("n", _v(1000))
    leaves = [f"root.d{d}.p{q}.l{leaf}" for d in range(2) for q in range(2) for leaf in range(3)]
    for i, leaf in enumerate(leaves):
        p.add_application(f"app{i}", ALICE, queue=leaf)
        assert p.allocate(f"app{i}", f"fill{i}", _v(2)).allocated
        for j in range(2):
            p.add_ask(f"app{i}", f"k{i}-{j}", _v(1))
    if delay_passed:
        clock.advance(60)
        p.check_timeouts()                  # the asks' preemption delay passed: each tries once
    tried = _count_tries(p, monkeypatch)
    p.release("fill4")
    assert tried == ["k4-0", "k4-1"]
    assert p.allocation("k4-0") is not None and p.allocation("k4-1") is not None


#: Kueue's shape in small (issue 38): cohorts of leaves that borrow above their guaranteed up to their
#: max, one cohort with a max of its own (a borrowing limit), reservations that come into force after one
#: overtake, a user limit, preemption after a short delay
COHORTS = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: c0
      properties: {preemption.delay: 6s, reservation.overtakes: 1}
      queues:
      - {name: q0, resources: {guaranteed: {vcore: 2}, max: {vcore: 5}}}
      - {name: q1, resources: {guaranteed: {vcore: 2}, max: {vcore: 5}}}
      - name: q2
        resources: {guaranteed: {vcore: 1}, max: {vcore: 4}}
        properties: {application.sort.policy: fair}
    - name: c1
      resources: {max: {vcore: 6}}
      limits:
      - {limit: bob, users: [bob], maxresources: {vcore: 3}}
      queues:
      - {name: q0, resources: {guaranteed: {vcore: 2}, max: {vcore: 4}}}
      - name: q1
        resources: {guaranteed: {vcore: 2}, max: {vcore: 4}}
        properties: {reservation.policy: disabled}
"""

COHORT_LEAVES = ["c0.q0", "c0.q1", "c0.q2", "c1.q0", "c1.q1"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_STEP, min_size=1, max_size=40), st.integers(4, 16))
def test_incremental_cycles_equal_full_cycles_in_cohorts_that_borrow(
        steps: list[tuple[str, int, int, int, int, int]], cluster: int) -> None:
    """The same, in Kueue's shape: leaves borrowing in their cohort up to their max, a cohort's max,
    reservations in force after one overtake (issue 38: a cycle passes over the asks a queue max or a
    reservation certainly refuses, whatever their leaf)."""
    twin = Twin(COHORTS)
    twin.each(lambda p: p.add_node("n0", _v(cluster)))
    _run(twin, steps, COHORT_LEAVES)


def _cohort(leaves: int, reserve: bool) -> str:
    return f"""
partitions:
- name: default
  preemption: {{enabled: false}}
  queues:
  - name: root
    submitacl: '*'
    properties: {{reservation.policy: {'default' if reserve else 'disabled'}}}
    queues:
    - name: cohort
      queues:
""" + "".join(f"""      - {{name: q{i}, resources: {{guaranteed: {{vcore: 2}}, max: {{vcore: 12}}}}}}
""" for i in range(leaves))


def _full_cohort(leaves: int, reserve: bool) -> tuple[Any, Clock]:
    """A full cohort of ``leaves`` queues, each with an application holding 2 vcores and waiting for a
    4-vcore ask (priority 2) and three of 1 vcore; the partition and its clock."""
    clock = Clock()
    p = Scheduler.from_yaml(_cohort(leaves, reserve), clock=clock).partition("default")
    p.add_node("n", _v(2 * leaves))
    for i in range(leaves):
        p.add_application(f"a{i}", UserGroup(f"u{i}"), queue=f"root.cohort.q{i}")
        assert p.allocate(f"a{i}", f"fill{i}", _v(2)).allocated
    for i in range(leaves):
        clock.advance(1)
        p.add_ask(f"a{i}", f"big{i}", _v(4), priority=2)
        for j in range(3):
            p.add_ask(f"a{i}", f"s{i}-{j}", _v(1))
    return p, clock


def _tries_per_release(leaves: int, reserve: bool, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A full cohort of ``leaves`` queues, each with an application holding 2 vcores and waiting for a
    4-vcore ask (priority 2) and three of 1 vcore; each application's holding released in turn."""
    p, clock = _full_cohort(leaves, reserve)
    tried = _count_tries(p, monkeypatch)
    out: list[int] = []
    for i in range(leaves):
        clock.advance(1)
        tried.clear()
        p.release(f"fill{i}")
        out.append(len(tried))
    return out


@pytest.mark.parametrize("reserve", [False, True])
def test_a_release_in_a_cohort_tries_as_many_asks_however_many_wait(
        monkeypatch: pytest.MonkeyPatch, reserve: bool) -> None:
    """Issue 38: each release in a full cohort retries every waiting application of the cohort (all wait
    on the cluster), but once the freed quota is used, the asks a queue max or a reservation in force
    certainly refuses are passed over without an attempt, whatever their leaf. The attempts per release
    do not grow with the waiting applications (before: one per waiting application and more — 10 per
    release with 8 applications, 34 with 32; with reservations up to 23 and 147)."""
    few = _tries_per_release(8, reserve, monkeypatch)
    many = _tries_per_release(32, reserve, monkeypatch)
    assert max(few) <= 5 and max(many) <= 5


def _checks_per_release(leaves: int, reserve: bool, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """:func:`_tries_per_release`'s cohort, counting per release the asks the cycle looked at without an
    attempt (the certain-refusal test, ``PendingAsks._surely_refused``) and the applications whose wake
    keys it recomputed (``PendingAsks._reindex``)."""
    from quotaplane.scheduling.runner import PendingAsks

    counts = {"checked": 0, "reindexed": 0}
    surely, reindex = PendingAsks._surely_refused, PendingAsks._reindex

    def checking(self: PendingAsks, state: Any, ask: Any) -> bool:
        counts["checked"] += 1
        return surely(self, state, ask)

    def reindexing(*args: Any, **kwargs: Any) -> None:
        counts["reindexed"] += 1
        reindex(*args, **kwargs)

    monkeypatch.setattr(PendingAsks, "_surely_refused", checking)
    monkeypatch.setattr(PendingAsks, "_reindex", staticmethod(reindexing))
    p, clock = _full_cohort(leaves, reserve)
    out: list[tuple[int, int]] = []
    for i in range(leaves):
        clock.advance(1)
        counts["checked"] = counts["reindexed"] = 0
        p.release(f"fill{i}")
        out.append((counts["checked"], counts["reindexed"]))
    return out


@pytest.mark.parametrize("reserve", [False, True])
def test_a_release_in_a_cohort_looks_at_as_many_applications_however_many_wait(
        monkeypatch: pytest.MonkeyPatch, reserve: bool) -> None:
    """Issue 38: a release in a full cohort frees room at the root that every waiting application's
    small asks fit; the cycle takes them in its own order and stops once the freed room is used up
    (the rest would be refused by the cluster's size), and an application a reservation in force
    holds back whole is not woken at all — it waits on the reservation (``r:``). So the asks looked at
    without an attempt and the applications re-indexed per release do not grow with the applications
    waiting: at most 2 and 1, with reservations 7 and 4, with 8, 32 or 128 applications (before: up
    to 31 and 8 with 8 applications, 127 and 32 with 32, 511 and 128 with 128; with reservations 50 and
    15, 242 and 63, 1,010 and 255)."""
    peaks = {}
    for leaves in (8, 32, 128):
        found = _checks_per_release(leaves, reserve, monkeypatch)
        peaks[leaves] = (max(checked for checked, _ in found), max(reindexed for _, reindexed in found))
    assert peaks[128] == peaks[32] == peaks[8], peaks
    bound = (7, 4) if reserve else (2, 1)
    assert peaks[8][0] <= bound[0] and peaks[8][1] <= bound[1], peaks
