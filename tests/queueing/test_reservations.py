"""No ask starves: reservations (issue 13, docs/queueing.md "Reservations").

The starvation scenario of the issue: a queue with max 100 full of 10-unit allocations, a 60-unit ask
waiting; each round one small allocation is released and a new small ask arrives. Without reservations
the small ask takes the freed 10 every time; with them the large ask is allocated after a bounded
number of rounds.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.partition import Partition
from quotaplane.scheduler import Scheduler
from quotaplane.scheduling.reservations import DEFAULT_OVERTAKES
from tests.partition.helpers import Clock

ALICE = UserGroup("alice", ["dev"])
BOB = UserGroup("bob", ["ops"])


def _config(props: str = "", leaf_props: str = "") -> str:
    return f"""
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: team
      resources: {{max: {{vcore: 100}}}}
      properties: {{{props}}}
      queues:
      - name: big
        properties: {{{leaf_props}}}
      - name: small
    - name: other
"""


def _v(n: int) -> Resource:
    return Resource({"vcore": n * 1000})


def _world(config: str, store: Any = None, clock: Clock | None = None) -> tuple[Scheduler, Partition, Clock]:
    clock = clock or Clock()
    s = Scheduler.from_yaml(config, store=store, clock=clock, snapshot_every=0)
    p = s.partition("default")
    p.add_node("n", _v(1000))
    return s, p, clock


def _full_team(p: Partition) -> None:
    """root.team full of ten 10-unit allocations of ``small-app``, and a 60-unit ask of ``big-app``."""
    p.add_application("big-app", ALICE, queue="root.team.big")
    p.add_application("small-app", BOB, queue="root.team.small")
    for i in range(10):
        assert p.allocate("small-app", f"fill{i}", _v(10)).allocated
    p.add_ask("big-app", "large", _v(60))


def _starve(p: Partition, clock: Clock, big_app: str, small_apps: list[str], rounds: int) -> int | None:
    """Fill the queue with 10-unit allocations of ``small_apps``, queue a 60-unit ask of ``big_app``,
    then each round release the oldest small allocation and add a new small ask (round-robin over
    ``small_apps``). Return the round in which the large ask was allocated (None: never)."""
    for i in range(10):
        assert p.allocate(small_apps[i % len(small_apps)], f"fill{i}", _v(10)).allocated
    p.add_ask(big_app, "large", _v(60))
    small = [f"fill{i}" for i in range(10)]
    for r in range(rounds):
        clock.advance(1)
        if p.allocation("large") is not None:
            return r
        victim = small.pop(0)
        p.release(victim)
        key = f"s{r}"
        p.add_ask(small_apps[r % len(small_apps)], key, _v(10))
        if p.allocation(key) is not None:
            small.append(key)
    return r if p.allocation("large") is not None else None


@pytest.mark.parametrize("shape", ["one application", "two applications", "two queues"])
def test_the_large_ask_is_allocated_after_a_bounded_number_of_rounds(shape: str) -> None:
    """The issue's scenario, with the large and the small asks in one application, in two, and in two
    sibling queues under the parent whose max is full."""
    _, p, clock = _world(_config())
    p.add_application("big-app", ALICE, queue="root.team.big" if shape == "two queues" else "root.team.small")
    if shape == "one application":
        small_apps = ["big-app"]
    else:
        p.add_application("small-app", BOB, queue="root.team.small")
        small_apps = ["small-app"]
    done = _starve(p, clock, "big-app", small_apps, rounds=40)
    # at most DEFAULT_OVERTAKES small asks overtake it, then the next 6 releases free 60
    assert done is not None and done <= DEFAULT_OVERTAKES + 6 + 1


def test_without_reservations_the_large_ask_starves() -> None:
    """``reservation.policy: disabled``: pure best-effort backfill — the small asks win every round
    (the behaviour the issue measured)."""
    _, p, clock = _world(_config(props="reservation.policy: disabled"))
    p.add_application("big-app", ALICE, queue="root.team.big")
    p.add_application("small-app", BOB, queue="root.team.small")
    assert _starve(p, clock, "big-app", ["small-app"], rounds=40) is None
    assert [v.code for v in p.pending_reasons("large") or []] == ["queue.max"]


def test_a_held_back_ask_says_which_ask_holds_the_quota_and_where() -> None:
    """The held-back ask's reason is ``queue.reserved`` naming the reserving ask and the queue, in
    ``pending()`` and in the REST shape; the reserving ask shows how often it was overtaken."""
    _, p, _clock = _world(_config())
    _full_team(p)
    for r in range(DEFAULT_OVERTAKES):
        p.release(f"fill{r}")
        p.add_ask("small-app", f"s{r}", _v(10))
        assert p.allocation(f"s{r}") is not None            # still overtaking
    p.release(f"fill{DEFAULT_OVERTAKES}")
    p.add_ask("small-app", "held", _v(10))
    assert p.allocation("held") is None
    (reason,) = p.pending_reasons("held") or []
    assert (reason.policy, reason.code, reason.path) == ("queue", "queue.reserved", "root.team")
    assert "'large'" in reason.message
    view = {a["allocationKey"]: a for a in (ask.to_dict() for ask in p.pending())}
    assert view["held"]["reasons"][0]["code"] == "queue.reserved"
    assert view["large"]["overtaken"] == DEFAULT_OVERTAKES
    assert view["large"]["reservedQueues"] == ["root.team"]
    assert p.what_if("small-app", _v(10)).reasons[0].code == "queue.reserved"


def test_asks_that_do_not_touch_the_reserved_quota_go_on() -> None:
    _, p, _clock = _world(_config())
    p.add_application("big-app", ALICE, queue="root.team.big")
    p.add_application("small-app", BOB, queue="root.team.small")
    p.add_application("elsewhere", BOB, queue="root.other")
    for i in range(10):
        p.allocate("small-app", f"fill{i}", _v(10))
    p.add_ask("big-app", "large", _v(60))
    for r in range(DEFAULT_OVERTAKES):
        p.release(f"fill{r}")
        p.add_ask("small-app", f"s{r}", _v(10))
    p.add_ask("elsewhere", "free", _v(10))          # root.other: not under root.team
    assert p.allocation("free") is not None
    p.add_ask("small-app", "memory-only", Resource({"memory": 1}))   # shares no resource type with it
    assert p.allocation("memory-only") is None      # the cluster has no memory: but not held back
    assert [v.code for v in p.pending_reasons("memory-only") or []] == ["root.capacity"]


def test_a_higher_priority_ask_is_not_held_back_by_a_lower_priority_reservation() -> None:
    _, p, _clock = _world(_config())
    _full_team(p)
    for r in range(DEFAULT_OVERTAKES + 1):
        p.release(f"fill{r}")
        p.add_ask("small-app", f"s{r}", _v(10), priority=5 if r == DEFAULT_OVERTAKES else 0)
    assert p.allocation(f"s{DEFAULT_OVERTAKES}") is not None


def test_the_reservation_ends_when_the_ask_is_withdrawn_and_the_held_asks_go() -> None:
    _, p, _clock = _world(_config())
    _full_team(p)
    for r in range(DEFAULT_OVERTAKES):
        p.release(f"fill{r}")
        p.add_ask("small-app", f"s{r}", _v(10))
    p.release(f"fill{DEFAULT_OVERTAKES}")
    p.add_ask("small-app", "held", _v(10))
    assert p.allocation("held") is None
    p.remove_ask("large")
    assert p.allocation("held") is not None


def test_the_overtake_bound_and_the_delay_are_queue_properties() -> None:
    """``reservation.overtakes: 1`` reserves after the first overtake; ``reservation.delay: 30s``
    reserves after 30 s of waiting even without overtakes."""
    _, p, clock = _world(_config(leaf_props="reservation.overtakes: '1'"))
    _full_team(p)
    p.release("fill0")
    p.add_ask("small-app", "s0", _v(10))
    assert p.allocation("s0") is not None                 # the one overtake
    p.release("fill1")
    p.add_ask("small-app", "s1", _v(10))
    assert p.allocation("s1") is None

    _, p, clock = _world(_config(leaf_props="reservation.delay: 30s, reservation.overtakes: '10'"))
    _full_team(p)
    p.release("fill0")
    clock.advance(29)
    p.add_ask("small-app", "early", _v(10))
    assert p.allocation("early") is not None
    p.release("fill1")
    clock.advance(1)
    p.add_ask("small-app", "late", _v(10))
    assert p.allocation("late") is None
    assert [v.code for v in p.pending_reasons("late") or []] == ["queue.reserved"]


def test_replay_and_snapshot_restore_keep_the_reservations() -> None:
    """Overtake counts and reservations follow journalled events: a restart from the journal, and
    from a snapshot, holds back the same asks."""
    j = MemoryJournal()
    clock = Clock()
    s, p, _ = _world(_config(), store=j, clock=clock)
    _full_team(p)
    for r in range(DEFAULT_OVERTAKES):
        p.release(f"fill{r}")
        p.add_ask("small-app", f"s{r}", _v(10))
    state = json.dumps(s.dump_state(), sort_keys=True)
    again = Scheduler.from_yaml(_config(), store=j, clock=clock, snapshot_every=0)
    assert json.dumps(again.dump_state(), sort_keys=True) == state
    q = again.partition("default")
    assert "queue.reserved" in [v.code for v in q.what_if("small-app", _v(10)).reasons]
    p.take_snapshot()
    restored = Scheduler.from_yaml(_config(), store=j, clock=clock, snapshot_every=0)
    assert restored.restored_from["default"] == "snapshot"
    assert json.dumps(restored.dump_state(), sort_keys=True) == state
    reasons = restored.partition("default").what_if("small-app", _v(10)).reasons
    assert "queue.reserved" in [v.code for v in reasons]


def _churn(config: str, large: list[int], seed: int, rounds: int = 300) -> dict[str, int | None]:
    """Small asks of mixed sizes keep arriving and leaving: each round the oldest small allocation is
    released and zero to two small asks (1-10 units, random applications) arrive; a large ask arrives
    every 7 rounds and, once allocated, runs 5 rounds. Return how many rounds each large ask waited
    (None: never allocated)."""
    rng = random.Random(seed)
    _, p, clock = _world(config)
    apps = ["a0", "a1", "a2"]
    for i, app in enumerate(apps):
        p.add_application(app, [ALICE, BOB][i % 2], queue=f"root.team.{['big', 'small'][i % 2]}")
    n = 0
    while sum(a.resource.get("vcore", 0) for a in p.allocations()) < 90_000:
        n += 1
        p.allocate(rng.choice(apps), f"f{n}", _v(rng.randint(1, 10)))
    waited: dict[str, int | None] = {}
    arrived: dict[str, int] = {}
    todo = list(large)
    for r in range(rounds):
        clock.advance(1)
        if todo and r % 7 == 0:
            key = f"L{r}"
            p.add_ask(rng.choice(apps), key, _v(40 + todo.pop() * 2))   # 42..100: fits the max alone
            arrived[key] = r
            waited[key] = None
        for key, since in list(arrived.items()):
            if p.allocation(key) is not None:
                waited[key] = r - since
                del arrived[key]
        for key, w in waited.items():
            if w is not None and r - int(key[1:]) - w == 5 and p.allocation(key) is not None:
                p.release(key)
        smalls = sorted((a for a in p.allocations() if not a.allocation_key.startswith("L")),
                        key=lambda a: a.time)
        if smalls:
            p.release(smalls[0].allocation_key)
        for _ in range(rng.randint(0, 2)):
            n += 1
            p.add_ask(rng.choice(apps), f"s{n}", _v(rng.randint(1, 10)))
    return waited


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 30), min_size=1, max_size=3), st.integers(0, 2**32 - 1))
def test_every_large_ask_that_fits_its_queue_is_allocated_within_a_bounded_number_of_releases(
        large: list[int], seed: int) -> None:
    """With small asks arriving and leaving all the time, every large ask that fits the queue's max
    (100) is allocated within a bounded number of releases after it arrives: at most
    DEFAULT_OVERTAKES overtakes, then each release frees at least one unit of the quota it holds,
    behind at most the large asks that arrived before it (each at most 100 units, running 5 rounds)."""
    waited = _churn(_config(), large, seed, rounds=7 * len(large) + 110 * len(large))
    bound = DEFAULT_OVERTAKES + 105 * len(large)
    assert all(w is not None and w <= bound for w in waited.values()), waited


#: the reservation tree with guaranteed at two levels and preemption on (issue 39)
DEEP = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: team
      resources: {max: {vcore: 100}, guaranteed: {vcore: 80}}
      queues:
      - name: big
        resources: {guaranteed: {vcore: 60}}
        properties: {preemption.delay: 3s}
      - name: small
        resources: {guaranteed: {vcore: 20}}
        properties: {preemption.delay: 3s}
    - name: other
      resources: {guaranteed: {vcore: 10}}
"""


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 30), min_size=1, max_size=3), st.integers(0, 2**32 - 1))
def test_the_large_asks_bound_holds_with_guarantees_at_several_levels(large: list[int], seed: int) -> None:
    """The same bound on a tree with guaranteed at two levels and YuniKorn preemption on (issue 39):
    preemption may only bring a large ask in sooner."""
    waited = _churn(DEEP, large, seed, rounds=7 * len(large) + 110 * len(large))
    bound = DEFAULT_OVERTAKES + 105 * len(large)
    assert all(w is not None and w <= bound for w in waited.values()), waited


def test_without_reservations_large_asks_starve_under_churn() -> None:
    """The same churn with ``reservation.policy: disabled``: some large ask waits far longer than the
    bound above, or for ever; with reservations the same history keeps it."""
    large = [30, 1, 15]
    bound = DEFAULT_OVERTAKES + 105 * len(large)
    rounds = 7 * len(large) + 110 * len(large)
    off = _churn(_config(props="reservation.policy: disabled"), large, seed=3, rounds=rounds)
    assert any(w is None or w > bound for w in off.values()), off
    on = _churn(_config(), large, seed=3, rounds=rounds)
    assert all(w is not None and w <= bound for w in on.values()), on


# ------------------------------------------------------------------------------------------------------
# a reserving ask whose application cannot start holds nothing back (no deadlock)
# ------------------------------------------------------------------------------------------------------
CAROL = UserGroup("carol", ["dev"])


def _limited_config(leaf_props: str = "") -> str:
    """``root.team`` (max 100) where the group ``dev`` may run one application."""
    return f"""
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: team
      resources: {{max: {{vcore: 100}}}}
      limits:
      - limit: one dev application
        groups: [dev]
        maxapplications: 1
      queues:
      - name: big
        properties: {{{leaf_props}}}
      - name: small
"""


def _reserve_for(p: Partition, waiter: str, runner: str) -> None:
    """``runner`` fills root.team with ten 10-unit allocations; ``waiter`` asks 60; the runner overtakes
    it DEFAULT_OVERTAKES times, so its reservation is in force."""
    for i in range(10):
        assert p.allocate(runner, f"fill{i}", _v(10)).allocated
    p.add_ask(waiter, "large", _v(60))
    for r in range(DEFAULT_OVERTAKES):
        p.release(f"fill{r}")
        p.add_ask(runner, f"s{r}", _v(10))
        assert p.allocation(f"s{r}") is not None


@pytest.mark.parametrize("incremental", [True, False])
def test_a_reservation_of_an_application_kept_out_by_maxapplications_holds_nothing_back(
        incremental: bool) -> None:
    """The found deadlock: the waiting application is kept out by group maxapplications while the
    running one is in the count; holding the running one's next ask would keep it running (an
    application with waiting asks stays in the count) and the waiter out, for ever. The held-back
    ask goes; once the runner finishes, the large ask is allocated."""
    _, p, _clock = _world(_limited_config())
    p.incremental = incremental
    p.add_application("waiter", ALICE, queue="root.team.big")
    p.add_application("runner", CAROL, queue="root.team.small")
    _reserve_for(p, "waiter", "runner")
    assert [v.code for v in p.pending_reasons("large") or []] == ["queue.max", "group.maxapplications"]
    p.release(f"fill{DEFAULT_OVERTAKES}")
    p.add_ask("runner", "next", _v(10))
    assert p.allocation("next") is not None
    p.release_batch([a.allocation_key for a in p.allocations()])
    assert p.allocation("large") is not None


@pytest.mark.parametrize("incremental", [True, False])
def test_held_back_asks_go_when_another_application_start_keeps_the_reserving_one_out(
        incremental: bool) -> None:
    """The reservation holds while its application may start; an application of the same group
    starting (a higher-priority allocation, never held back) keeps the waiter out, and the asks the
    reservation held are retried at once — in incremental and full cycles alike."""
    _, p, _clock = _world(_limited_config())
    p.incremental = incremental
    p.add_application("waiter", ALICE, queue="root.team.big")
    p.add_application("runner", BOB, queue="root.team.small")
    p.add_application("urgent", CAROL, queue="root.team.small")
    _reserve_for(p, "waiter", "runner")
    p.release(f"fill{DEFAULT_OVERTAKES}")
    p.release(f"fill{DEFAULT_OVERTAKES + 1}")
    p.add_ask("runner", "held", _v(10))
    assert p.allocation("held") is None
    assert [v.code for v in p.pending_reasons("held") or []] == ["queue.reserved"]
    assert p.allocate("urgent", "hi", _v(5), priority=5).allocated
    assert p.allocation("held") is not None


def test_a_reservation_of_an_application_stateaware_keeps_waiting_holds_nothing_back() -> None:
    """``stateaware``: while one application is Starting the others wait; a waiting one's reservation
    must not hold back the Starting one's next ask (the one that lets it run and the others start)."""
    config = _config(leaf_props="application.sort.policy: stateaware")
    _, p, _clock = _world(config)
    p.add_application("small-app", BOB, queue="root.team.small")
    p.add_application("first", ALICE, queue="root.team.big")
    for i in range(9):
        assert p.allocate("small-app", f"fill{i}", _v(10)).allocated
    p.add_ask("first", "f0", _v(10))
    assert p.application("first").state == "Starting"
    p.add_application("second", ALICE, queue="root.team.big")
    p.add_ask("second", "large", _v(60))
    for r in range(DEFAULT_OVERTAKES):
        p.release(f"fill{r}")
        p.add_ask("small-app", f"s{r}", _v(10))
        assert p.allocation(f"s{r}") is not None
    p.release(f"fill{DEFAULT_OVERTAKES}")
    p.add_ask("first", "f1", _v(10))
    assert p.allocation("f1") is not None


def test_a_direct_allocation_of_the_reserving_ask_lets_the_held_asks_go() -> None:
    """The reserving ask allocated directly (``allocate`` with its key, as a client that placed it
    itself does) ends its reservation like a cycle would: the asks it held back get their cycle."""
    _, p, _clock = _world(_config())
    _full_team(p)
    for r in range(DEFAULT_OVERTAKES):
        p.release(f"fill{r}")
        p.add_ask("small-app", f"s{r}", _v(10))
    p.auto_schedule = False                     # quota frees while no cycle runs
    for r in range(DEFAULT_OVERTAKES, 10):
        p.release(f"fill{r}")
    p.add_ask("small-app", "held", _v(10))
    p.auto_schedule = True
    assert [v.code for v in p.what_if("small-app", _v(10)).reasons] == ["queue.reserved"]
    assert p.allocate("big-app", "large", _v(60)).allocated
    assert p.allocation("held") is not None


def test_the_oldest_reservation_in_force_holds_whatever_order_they_came_into_force() -> None:
    """Several reservations in force at one place: a request is held by the oldest eligible one (by
    arrival) that is not idle, however they came into force — held() walks them oldest first and stops
    at the first that holds (issue 38: it filtered and sorted all of them for every check)."""
    from quotaplane.scheduling.asks import Ask
    from quotaplane.scheduling.reservations import Reservations

    res = Reservations()
    place = [("q:root", "root")]
    asks = {seq: Ask(f"r{seq}", "a", Resource({"vcore": 1000}), priority=prio, seq=seq)
            for seq, prio in ((5, 1), (3, 0), (9, 2), (1, 0))}
    for seq in (5, 3, 9, 1):            # into force out of arrival order
        asks[seq].overtaken = 1
        res.enter(asks[seq], place, 1, 0.0)

    def holder(priority: int, seq: float, idle: frozenset[str] = frozenset()) -> list[str]:
        found = res.held(place, priority, seq, Resource({"vcore": 1}), 0.0,
                         lambda a: a.allocation_key in idle)
        return [v.message.split("'")[3] for v in found]

    assert holder(0, 10) == ["r1"]
    assert holder(1, 10) == ["r5"]                       # r1 and r3 are of a lower priority
    assert holder(0, 10, frozenset({"r1"})) == ["r3"]     # an idle reserver holds nothing
    assert holder(2, 10) == ["r9"]
    assert holder(0, 1) == []                            # nothing older than the request itself
    assert holder(3, 10) == []
    assert res.held(place, 0, 10, Resource({"memory": 1}), 0.0, lambda a: False) == []  # no shared type


RESERVING = """
partitions:
- name: default
  preemption: {enabled: false}
  queues:
  - name: root
    submitacl: '*'
    properties: {reservation.delay: 1s}
    queues:
""" + "".join(f"    - {{name: q{i}}}\n" for i in range(8))


def test_a_reservation_that_ends_retries_only_what_no_other_reservation_holds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38: two large asks reserve the full cluster, six small later asks are held back. When the
    first large ask is allocated its reservation ends, but the second one's still holds every small
    ask: their applications are not retried (before: all of them were, and passed over)."""
    from quotaplane.scheduling.runner import PendingAsks

    clock = Clock()
    p = Scheduler.from_yaml(RESERVING, clock=clock).partition("default")
    p.add_node("n", _v(10))
    for i in range(8):
        p.add_application(f"a{i}", UserGroup(f"u{i}"), queue=f"root.q{i}")
    for i in range(5):
        assert p.allocate(f"a{i}", f"fill{i}", _v(2)).allocated
    p.add_ask("a0", "big0", _v(4), priority=2)
    clock.advance(1)
    p.add_ask("a1", "big1", _v(4), priority=2)
    clock.advance(1)
    for i in range(2, 8):
        p.add_ask(f"a{i}", f"s{i}", _v(1))
    clock.advance(5)
    p.check_timeouts()
    retried: list[str] = []
    real = PendingAsks._reindex

    def spy(state: Any, app_id: str, *rest: Any) -> None:
        retried.append(app_id)
        real(state, app_id, *rest)

    monkeypatch.setattr(PendingAsks, "_reindex", staticmethod(spy))
    # 2 vcores free, reserved: the small asks, which the reservations hold back whole, are not retried
    # (they wait on the reservations too; before they were retried and passed over), nor the large ones
    p.release("fill0")
    assert retried == []
    retried.clear()
    p.release("fill1")          # big0 fits, its reservation ends; big1's holds the small ones
    assert p.allocation("big0") is not None
    assert sorted(set(retried)) == ["a0"]         # big0 used the room up: big1 is not retried either
    assert [v.code for v in p.pending_reasons("s2") or []] == ["root.capacity", "queue.reserved"]
    assert "big1" in (p.pending_reasons("s2") or [])[1].message
