"""Queueing (seed 004: quotas are enforced on consumption): pending asks, the cycle and its order."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane import ConflictError, NotFoundError, Resource
from quotaplane.config.identity import UserGroup
from quotaplane.partition import Partition
from quotaplane.scheduler import Scheduler
from quotaplane.scheduling import usage_shares
from tests.partition.helpers import Clock

ALICE = UserGroup("alice", ["dev"])
BOB = UserGroup("bob", ["ops"])

CONFIG = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: default
    - name: a
      resources:
        guaranteed: {vcore: 4}
        max: {vcore: 10}
    - name: b
      resources:
        guaranteed: {vcore: 2}
        max: {vcore: 10}
    - name: fifoq
      resources: {max: {vcore: 2}}
    - name: fairq
      resources: {guaranteed: {vcore: 2}, max: {vcore: 3}}
      properties: {application.sort.policy: fair}
    - name: sa
      resources: {max: {vcore: 10}}
      properties: {application.sort.policy: stateaware}
    - name: capped
      maxapplications: 1
    - name: limited
      limits:
      - limit: one app per user
        users: ['*']
        maxapplications: 1
"""


def _part(config: str = CONFIG, vcore: int = 100_000, **kw: Any) -> Partition:
    s = Scheduler.from_yaml(config, clock=Clock(), **kw)
    p = s.partition("default")
    p.auto_schedule = False
    p.add_node("n1", Resource({"vcore": vcore, "memory": 10**12}))
    return p


def _v(n: int) -> Resource:
    return Resource({"vcore": n * 1000})


def test_pending_ask_counts_towards_nothing_and_is_allocated_after_release() -> None:
    """Seed 004: a request that does not fit waits (not rejected) and is allocated once quota frees."""
    p = _part()
    p.add_application("app1", ALICE, queue="root.fifoq")
    assert p.allocate("app1", "k1", _v(2)).allocated
    ask = p.add_ask("app1", "k2", _v(1))
    assert p.schedule() == []
    assert p.queues.queue("root.fifoq").allocated == _v(2)          # the ask counts nowhere
    (waiting,) = p.pending("app1")
    assert waiting is ask and [r.code for r in waiting.reasons or []] == ["queue.max"]
    p.release("k1")
    made = p.schedule()
    assert [a.allocation_key for a in made] == ["k2"]
    assert p.pending() == [] and p.allocation("k2") is not None


def test_auto_schedule_runs_on_release() -> None:
    """Whenever quota frees up (a release) the partition tries the pending asks by itself."""
    p = _part()
    p.auto_schedule = True
    p.add_application("app1", ALICE, queue="root.fifoq")
    p.allocate("app1", "k1", _v(2))
    p.add_ask("app1", "k2", _v(2))
    assert p.allocation("k2") is None
    p.release("k1")
    assert p.allocation("k2") is not None and p.pending() == []


def test_auto_schedule_runs_on_node_added_and_add_ask() -> None:
    s = Scheduler.from_yaml(CONFIG, clock=Clock())
    p = s.partition("default")
    p.add_application("app1", ALICE, queue="root.a")
    p.add_ask("app1", "k1", _v(1))
    assert [r.code for r in p.pending()[0].reasons or []] == ["root.capacity"]
    p.add_node("n1", _v(8))
    assert p.allocation("k1") is not None
    p.add_ask("app1", "k2", _v(1))                       # fits at once: allocated by the add
    assert p.allocation("k2") is not None


def test_ask_errors() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.a")
    p.add_ask("app1", "k1", _v(100))
    with pytest.raises(ConflictError):
        p.add_ask("app1", "k1", _v(1))
    with pytest.raises(ConflictError):
        p.allocate("app1", "k1", _v(1)) if False else p.add_ask("app1", "k1", _v(1))
    with pytest.raises(NotFoundError):
        p.add_ask("nope", "k9", _v(1))
    with pytest.raises(ValueError):
        p.add_ask("app1", "k9", {"vcore": -1})
    with pytest.raises(NotFoundError):
        p.remove_ask("k9")
    p.remove_ask("k1")
    assert p.pending() == []


def test_application_states_follow_asks() -> None:
    """Seed 001: a request moves New → Accepted; withdrawing the last one moves it back."""
    p = _part()
    p.add_application("app1", ALICE, queue="root.a")
    assert p.application("app1").state == "New"
    p.add_ask("app1", "k1", _v(100))
    assert p.application("app1").state == "Accepted"
    p.remove_ask("k1")
    assert p.application("app1").state == "New"


def test_pending_asks_keep_the_application_running() -> None:
    """A-3: with asks still pending, releasing the last allocation keeps the application counted."""
    p = _part()
    p.add_application("app1", ALICE, queue="root.fifoq")
    p.allocate("app1", "k1", _v(2))
    p.add_ask("app1", "k2", _v(5))                      # can never fit in fifoq (max 2)
    p.release("k1")
    app = p.application("app1")
    assert app.counted and app.state != "Completing"
    p.remove_ask("k2")
    assert not app.counted and app.state == "Completing"


def test_priority_then_age_within_an_application() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.fifoq")
    p.allocate("app1", "blocker", _v(2))
    p.add_ask("app1", "old-low", _v(1), priority=0)
    p.add_ask("app1", "high", _v(1), priority=5)
    p.add_ask("app1", "new-low", _v(1), priority=0)
    assert [a.allocation_key for a in p.pending("app1")] == ["high", "old-low", "new-low"]
    p.release("blocker")
    assert [a.allocation_key for a in p.schedule()] == ["high", "old-low"]
    assert [a.allocation_key for a in p.pending()] == ["new-low"]


def test_fifo_orders_applications_by_submission() -> None:
    p = _part()
    p.add_application("first", ALICE, queue="root.fifoq")
    p.add_application("second", BOB, queue="root.fifoq")
    p.add_ask("second", "s1", _v(1))
    p.add_ask("first", "f1", _v(1))
    p.add_ask("first", "f2", _v(1))
    p.add_ask("second", "s2", _v(1))
    assert [a.allocation_key for a in p.schedule()] == ["f1", "f2"]


def test_fair_orders_applications_by_usage() -> None:
    p = _part()
    p.add_application("rich", ALICE, queue="root.fairq")
    p.add_application("poor", BOB, queue="root.fairq")
    p.allocate("rich", "r0", _v(2))
    p.add_ask("rich", "r1", _v(1))
    p.add_ask("poor", "p1", _v(1))
    assert [a.allocation_key for a in p.schedule()] == ["p1"]        # max 3: one more fits


def test_stateaware_lets_one_application_start_at_a_time() -> None:
    p = _part()
    p.add_application("one", ALICE, queue="root.sa")
    p.add_application("two", BOB, queue="root.sa")
    p.add_ask("one", "o1", _v(1))
    p.add_ask("two", "t1", _v(1))
    assert [a.allocation_key for a in p.schedule()] == ["o1"]        # "one" is now Starting
    assert p.application("one").state == "Starting"
    assert [a.allocation_key for a in p.schedule()] == []            # "two" waits for "one"
    p.add_ask("one", "o2", _v(1))
    # "one" is Running after o2, and the filter is re-checked at every attempt (as YuniKorn's):
    # "two" may start within the same cycle
    assert [a.allocation_key for a in p.schedule()] == ["o2", "t1"]
    assert p.application("one").state == "Running"
    assert p.application("two").state == "Starting"


def test_fair_share_across_queues() -> None:
    """Queues by usage relative to guaranteed: a (g 4) and b (g 2) share 6 vcores 4:2."""
    p = _part(vcore=6000)
    p.add_application("appa", ALICE, queue="root.a")
    p.add_application("appb", BOB, queue="root.b")
    for i in range(6):
        p.add_ask("appa", f"a{i}", _v(1))
        p.add_ask("appb", f"b{i}", _v(1))
    made = [a.allocation_key for a in p.schedule()]
    assert sorted(made) == ["a0", "a1", "a2", "a3", "b0", "b1"]
    # interleaved by share: a (0/4) and b (0/2) tie on 0 → name order; then the lower share first
    assert made[:3] == ["a0", "b0", "a1"]


def test_usage_shares_match_yunikorn() -> None:
    assert usage_shares({"vcore": 2, "memory": 50}, {"vcore": 4, "memory": 100}) == (0.5, 0.5)
    assert usage_shares({"vcore": 2, "gpu": 3}, {"vcore": 4}) == (3.0, 0.5)   # raw amount without a base
    assert usage_shares({"vcore": 0}, {"vcore": 4}) == ()


def test_queue_maxapplications_makes_an_accepted_application_wait() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.capped")
    p.add_application("app2", BOB, queue="root.capped")
    p.add_ask("app1", "k1", _v(1))
    p.add_ask("app2", "k2", _v(1))
    assert [a.allocation_key for a in p.schedule()] == ["k1"]
    (waiting,) = p.pending()
    assert [r.code for r in waiting.reasons or []] == ["queue.maxapplications"]
    p.release("k1")                                     # app1 leaves the running count
    assert [a.allocation_key for a in p.schedule()] == ["k2"]


def test_user_maxapplications_makes_an_application_wait() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.limited")
    p.add_application("app2", ALICE, queue="root.limited")
    p.add_application("app3", BOB, queue="root.limited")
    for app in ("app1", "app2", "app3"):
        p.add_ask(app, f"{app}-k", _v(1))
    assert sorted(a.allocation_key for a in p.schedule()) == ["app1-k", "app3-k"]
    (waiting,) = p.pending()
    assert waiting.application_id == "app2"
    assert [r.code for r in waiting.reasons or []] == ["user.maxapplications"]


def test_reasons_match_what_if() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.fifoq")
    p.allocate("app1", "k0", _v(2))
    p.add_ask("app1", "k1", _v(3))
    p.schedule()
    (ask,) = p.pending()
    assert ask.reasons == p.what_if("app1", _v(3)).reasons
    assert ask.to_dict()["reasons"][0]["code"] == "queue.max"


def test_subscribers_receive_allocation_events() -> None:
    p = _part()
    seen: list[dict[str, Any]] = []
    unsubscribe = p.subscribe(seen.append)
    p.add_application("app1", ALICE, queue="root.a")
    p.add_ask("app1", "k1", _v(1))
    p.schedule()
    # every change, each with the sequence number it was journalled under
    assert [e["type"] for e in seen] == ["application", "ask_added", "application", "allocated",
                                         "application"]
    assert [e["seq"] for e in seen] == sorted({e["seq"] for e in seen})        # increasing, no repeat
    assert [e["state"] for e in seen if e["type"] == "application"] == ["New", "Accepted", "Starting"]
    assert seen[3] == {"type": "allocated", "partition": "default", "seq": seen[3]["seq"],
                       "applicationID": "app1", "allocationKey": "k1", "queueName": "root.a",
                       "resource": {"vcore": 1000}}
    unsubscribe()
    p.add_ask("app1", "k2", _v(1))
    p.schedule()
    assert len(seen) == 5


def test_removing_an_application_drops_its_asks() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.a")
    p.add_ask("app1", "k1", _v(100))
    p.remove_application("app1")
    assert p.pending() == []


def test_restart_keeps_the_pending_queue_and_its_order(tmp_path: Any) -> None:
    store = f"sqlite:///{tmp_path}/state.db"
    s = Scheduler.from_yaml(CONFIG, store=store, clock=Clock())
    p = s.partition("default")
    p.auto_schedule = False
    p.add_node("n1", _v(2))
    p.add_application("app1", ALICE, queue="root.a")
    p.allocate("app1", "k0", _v(2))
    for key, prio in (("x", 0), ("y", 3), ("z", 0)):
        p.add_ask("app1", key, _v(1), priority=prio)
    p.schedule()                                        # nothing fits
    before = p.dump_state()
    s.close()
    s2 = Scheduler.from_yaml(CONFIG, store=store, clock=Clock())
    p2 = s2.partition("default")
    p2.auto_schedule = False
    assert p2.dump_state() == before
    assert [a.allocation_key for a in p2.pending("app1")] == ["y", "x", "z"]
    p2.release("k0")
    assert [a.allocation_key for a in p2.schedule()] == ["y", "x"]
    after = p2.dump_state()
    s2.close()
    s3 = Scheduler.from_yaml(CONFIG, store=store, clock=Clock())
    assert s3.partition("default").dump_state() == after
    s3.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "fifoq", "fairq", "capped", "limited"]),
                          st.sampled_from([ALICE, BOB]), st.integers(1, 4), st.integers(0, 2),
                          st.booleans()), min_size=1, max_size=25), st.booleans())
def test_no_fitting_ask_is_left_waiting(ops: list[tuple[str, UserGroup, int, int, bool]], auto: bool) -> None:
    """No starvation of fitting asks: after every cycle, no pending ask fits (what_if refuses each),
    and every waiting ask's reasons are exactly the what_if reasons (but for reservations, which
    hold back only requests later than the reserving ask). With ``auto`` the partition's
    own cycles (after add_ask, release, remove_ask) must keep the same promise."""
    p = _part(vcore=9000)
    p.auto_schedule = auto
    for i, (queue, user, size, prio, release) in enumerate(ops):
        app = f"{queue}-{user.user}-{i % 3}"
        if p.application(app) is None:
            p.add_application(app, user, queue=f"root.{queue}")
        p.add_ask(app, f"k{i}", _v(size), priority=prio)
        if release and p.allocations():
            p.release(p.allocations()[0].allocation_key)
        elif release and p.pending():
            p.remove_ask(p.pending()[0].allocation_key)
        if not auto:
            p.schedule()
        for ask in p.pending():
            d = p.what_if(ask.application_id, ask.resource, priority=ask.priority)
            assert not d.allocated, f"{ask} fits but waits"
            assert ask.reasons, f"{ask} fits but waits"          # its own admission refuses it too
            # what_if asks for a new request, which every reservation in force holds back (issue 13)
            assert [v for v in ask.reasons if v.code != "queue.reserved"] == \
                [v for v in d.reasons if v.code != "queue.reserved"]
