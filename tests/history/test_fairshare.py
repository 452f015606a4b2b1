"""Fair share with memory: decayed usage in closed form (idle one half-life: exactly half), the lighter
historical user and queue go first between equal waiting asks, standing shows it, and the liveness
properties of the queueing tests still hold with it on."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import quotaplane.events as E
from quotaplane.config.identity import UserGroup
from quotaplane.history.engine import QUEUE, USER, Accounting, ms_of
from quotaplane.resources import Resource
from quotaplane.scheduler import Scheduler
from quotaplane.scheduling.reservations import DEFAULT_OVERTAKES
from tests.history.test_scopes import FakeView
from tests.partition.helpers import Clock
from tests.queueing import test_reservations as reservations

HOUR = 3600.0


def _engine(half_life_hours: float) -> Accounting:
    view = FakeView()
    view.half = round(half_life_hours * HOUR * 1000)
    a = Accounting(view)
    a.observe([E.ConfigApplied(seq=1)])
    return a


def test_idle_for_one_half_life_is_exactly_half_and_the_integral_matches_the_closed_form() -> None:
    """TM-F18: 8 GPUs for 4 h with a half-life of 4 h: 8 × 14,400 × 0.5 / ln 2 = 83,099 GPU-seconds;
    four hours after it stopped, exactly half."""
    a = _engine(4)
    gpu = {"nvidia.com/gpu": 8}
    a.observe([E.AppAdded(app="x", user="heavy", groups=(), queue="root.a", t=0.0),
               E.Allocated(app="x", key="k", resource=Resource(gpu), t=0.0),
               E.Released(key="k", t=4 * HOUR)])
    user = a.scope(USER, "heavy")
    assert user is not None
    at_stop = a.decayed(user)["nvidia.com/gpu"]
    assert at_stop / 1000 == pytest.approx(8 * 14_400 * 0.5 / math.log(2), rel=1e-12)
    assert round(at_stop / 1000) == 83_099
    later = a.decayed(user, ms_of(8 * HOUR))["nvidia.com/gpu"]
    assert later == at_stop * 0.5                                  # exactly half, not approximately
    assert a.decayed(user, ms_of(12 * HOUR))["nvidia.com/gpu"] == at_stop * 0.25


def test_decay_survives_many_half_lives_and_a_snapshot() -> None:
    from quotaplane.history.snapshot import restore_into, snapshot_of

    a = _engine(1)
    a.observe([E.AppAdded(app="x", user="u", groups=(), queue="root.a", t=0.0),
               E.Allocated(app="x", key="k", resource=Resource({"cpu": 2}), t=0.0)])
    a.advance(100 * HOUR)                  # rebased on the way: 2 GPUs for ever → 2·T/ln 2
    q = a.scope(QUEUE, "root.a")
    assert q is not None
    assert a.decayed(q)["cpu"] == pytest.approx(2 * HOUR * 1000 / math.log(2), rel=1e-9)
    b = Accounting(a.view)
    restore_into(b, snapshot_of(a), [("k", "x", {"cpu": 2})], [])
    assert b.decayed(b.scopes[(QUEUE, "root.a")]) == a.decayed(q)


FAIR = """
partitions:
- name: default
  history:
    fairshare: {enabled: true, halflife: 2h}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: team
      queues:
      - name: a
      - name: b
"""

HEAVY, LIGHT = UserGroup("heavy", ()), UserGroup("light", ())


def _v(n: int) -> Resource:
    return Resource({"vcore": n * 1000})


def test_between_two_equal_waiting_asks_the_lighter_historical_user_goes_first() -> None:
    clock = Clock(1_000.0)
    s = Scheduler.from_yaml(FAIR, clock=clock)
    p = s.partition("default")
    p.add_node("n", _v(10))
    p.add_application("h", HEAVY, queue="root.team.a")
    p.add_application("l", LIGHT, queue="root.team.a")
    p.allocate("h", "past", _v(10))               # the heavy user held the cluster for three hours
    clock.advance(3 * HOUR)
    p.release("past")
    p.allocate("l", "filler", _v(10))             # full: the next asks wait
    p.add_ask("h", "heavy-ask", _v(10))           # the heavy user asks first
    clock.advance(1)
    p.add_ask("l", "light-ask", _v(10))
    st_ = p.standing("user", "light")
    assert st_["fairShare"]["orderKey"] < p.standing("user", "heavy")["fairShare"]["orderKey"]
    assert [w["allocationKey"] for w in sorted(p.standing("queue", "root.team.a")["waiting"],
                                               key=lambda w: w["position"])] == ["light-ask", "heavy-ask"]
    p.release("filler")
    assert p.allocation("light-ask") is not None and p.allocation("heavy-ask") is None
    s.close()


def test_without_fair_share_the_same_history_is_first_come_first_served() -> None:
    clock = Clock(1_000.0)
    s = Scheduler.from_yaml(FAIR.replace("enabled: true", "enabled: false"), clock=clock)
    p = s.partition("default")
    p.add_node("n", _v(10))
    p.add_application("h", HEAVY, queue="root.team.a")
    p.add_application("l", LIGHT, queue="root.team.a")
    p.allocate("h", "past", _v(10))
    clock.advance(3 * HOUR)
    p.release("past")
    p.allocate("l", "filler", _v(10))
    p.add_ask("h", "heavy-ask", _v(10))
    clock.advance(1)
    p.add_ask("l", "light-ask", _v(10))
    assert "fairShare" not in p.standing("user", "light")
    p.release("filler")
    assert p.allocation("heavy-ask") is not None
    s.close()


def test_the_queue_that_used_less_over_its_weight_goes_first() -> None:
    clock = Clock(1_000.0)
    weighted = FAIR.replace("halflife: 2h}", "halflife: 2h, weights: {root.team.a: 4}}")
    for text, first in ((FAIR, "b-ask"), (weighted, "a-ask")):
        s = Scheduler.from_yaml(text, clock=clock)
        p = s.partition("default")
        p.add_node("n", _v(10))
        p.add_application("x", HEAVY, queue="root.team.a")
        p.add_application("y", HEAVY, queue="root.team.b")
        p.allocate("x", "past-a", _v(6))          # a used 6 for an hour, b 2 for an hour
        p.allocate("y", "past-b", _v(2))
        clock.advance(HOUR)
        p.release("past-a")
        p.release("past-b")
        p.allocate("x", "filler", _v(10))
        p.add_ask("x", "a-ask", _v(10))
        p.add_ask("y", "b-ask", _v(10))
        p.release("filler")
        assert p.allocation(first) is not None, text   # a's weight 4: 6/4 < 2/1
        s.close()


def _fair(text: str) -> str:
    return text.replace("- name: default\n", "- name: default\n  history: {fairshare: {enabled: true, "
                                             "halflife: 30m}}\n", 1)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 30), min_size=1, max_size=3), st.integers(0, 2**32 - 1))
def test_no_large_ask_starves_with_fair_share_on(large: list[int], seed: int) -> None:
    """tests/queueing/test_reservations.py's liveness property, fair share with memory on."""
    waited = reservations._churn(_fair(reservations._config()), large, seed,
                                 rounds=7 * len(large) + 110 * len(large))
    bound = DEFAULT_OVERTAKES + 105 * len(large)
    assert all(w is not None and w <= bound for w in waited.values()), waited
