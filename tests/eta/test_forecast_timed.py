"""The forecast meets time itself (issue 35, docs/eta.md "Windows, budgets and the timer"): a time
window's edges and a budget's reset are instants of its run, as the service's timer makes them, and
the timer's ticks that cannot change anything are not simulated. Each answer is checked against the
real partition moved to the forecast time (its windows ticked, its timeouts run)."""

from __future__ import annotations

import importlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.eta import HoldTimes, explain_ask, forecast
from quotaplane.scheduler import Scheduler
from quotaplane.windows import tick
from tests.eta.test_explain_timed import DEC1, DECAY, GPU, NOV1, NOV27, WINDOW, H, _over_budget
from tests.eta.test_forecast import GUARANTEED
from tests.partition.helpers import Clock, scheduler

fc = importlib.import_module("quotaplane.eta.forecast")    # the package exports the function


def _windowed(raised: int, runtime: float) -> tuple[Scheduler, Any, Clock]:
    """root.a's max is 2 cores, 4 in the evening window (18:00, 5 h); 2 cores run for ``runtime``."""
    clock = Clock(NOV27 + 12 * H)
    s = Scheduler.from_yaml(WINDOW % raised, clock=clock)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100000}))
    p.add_application("x", UserGroup("u", []), queue="root.a")
    assert p.allocate("x", "r", Resource({"vcore": 2000}), max_runtime=runtime).allocated
    p.add_ask("x", "w", Resource({"vcore": 2000}), max_runtime=H)
    return s, p, clock


def test_an_ask_a_closed_window_holds_starts_when_the_window_opens() -> None:
    s, p, clock = _windowed(raised=4, runtime=100 * H)
    eta = forecast(p, HoldTimes(), clock.now).asks["w"]
    assert eta.p50 == NOV27 + 18 * H
    assert eta.basis == ("window evening opens on root.a",)
    # the explanation tells the same opening
    e = explain_ask(p, "w")
    assert e.windows is not None and e.windows[0].at == eta.p50
    # the check: the real partition, its timer run at 18:00, starts it then and not before
    clock.now = NOV27 + 18 * H - 1
    assert not tick(s.config_text, s.update_config, clock.now)
    p.check_timeouts(clock.now)
    assert p.allocation("w") is None
    clock.now = NOV27 + 18 * H
    assert tick(s.config_text, s.update_config, clock.now)
    assert p.allocation("w") is not None


def test_a_window_that_closes_before_the_room_comes_holds_the_ask_to_its_next_opening() -> None:
    """The window is open now (19:00) but r runs past its closing (23:00): the ask fits only with the
    window's max, so it waits for the next evening, not for r's end."""
    clock = Clock(NOV27 + 19 * H)
    s = Scheduler.from_yaml(WINDOW % 4, clock=clock)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100000}))
    p.add_application("x", UserGroup("u", []), queue="root.a")
    assert tick(s.config_text, s.update_config, clock.now)             # the window opens
    assert p.allocate("x", "r", Resource({"vcore": 2000}), max_runtime=100 * H).allocated
    assert p.allocate("x", "r2", Resource({"vcore": 2000}), max_runtime=30 * H).allocated
    p.add_ask("x", "w", Resource({"vcore": 2000}), max_runtime=H)
    eta = forecast(p, HoldTimes(), clock.now).asks["w"]
    # 23:00 closes the window (max 2: r and r2 hold 4); r2 ends at 19:00 + 30 h = 01:00 on the 29th,
    # with r still running the ask fits in the evening window of the 29th
    assert eta.p50 == NOV27 + (48 + 18) * H
    assert eta.basis == ("window evening opens on root.a",)
    for t in (NOV27 + 23 * H, NOV27 + (24 + 18) * H, NOV27 + (24 + 23) * H, NOV27 + (48 + 1) * H):
        clock.now = t
        tick(s.config_text, s.update_config, t)
        if t >= NOV27 + (48 + 1) * H:
            p.release("r2")
        p.check_timeouts(t)
        assert p.allocation("w") is None, t
    clock.now = NOV27 + (48 + 18) * H
    assert tick(s.config_text, s.update_config, clock.now)
    assert p.allocation("w") is not None


def test_a_spent_budget_holds_the_ask_to_its_reset() -> None:
    _, p, clock = _over_budget(8)
    p.add_ask("train", "w", Resource({GPU: 1}), max_runtime=H)
    eta = forecast(p, HoldTimes(), clock.now).asks["w"]
    assert eta.p50 == DEC1
    assert eta.basis == ("budget of root.teams.a resets",)
    e = explain_ask(p, "w")
    assert e.resets is not None and e.resets[0].at == eta.p50
    clock.now = DEC1 - 1
    p.check_timeouts(clock.now)
    assert p.allocation("w") is None
    clock.now = DEC1
    p.check_timeouts(clock.now)
    assert p.allocation("w") is not None


def test_a_decaying_budget_starts_the_ask_when_it_has_decayed_enough() -> None:
    """A budget with a half-life has no reset: the ask starts when its consumption, decaying toward
    the level the running work holds, leaves room for it — the explanation's time, and the real
    partition's (not a minute before)."""
    clock = Clock(NOV1)
    p = Scheduler.from_yaml(DECAY, clock=clock).partition("default")
    p.add_node("n1", {GPU: 8})
    p.add_application("x", UserGroup("alice", ("ml",)), queue="root.a")
    assert p.allocate("x", "big", Resource({GPU: 6})).allocated
    assert p.allocate("x", "small", Resource({GPU: 2})).allocated
    clock.advance(4 * H)
    p.release("big")
    p.add_ask("x", "w", Resource({GPU: 1}))
    eta = forecast(p, HoldTimes(), clock.now).asks["w"]
    e = explain_ask(p, "w")
    assert e.resets is not None and eta.p50 == e.resets[0].at
    assert eta.basis == ("budget of root.a decays",)
    clock.now = eta.p50 - 60
    p.check_timeouts(clock.now)
    assert p.allocation("w") is None
    clock.now = eta.p50
    p.check_timeouts(clock.now)
    assert p.allocation("w") is not None


HORIZON = """
partitions:
- name: default
  preemption: {enabled: PRE}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      resources: {guaranteed: {vcore: 1}, max: {vcore: 2}}
    - name: b
      resources: {guaranteed: {vcore: 1}}
"""


def test_preemption_ticks_that_cannot_change_anything_do_not_use_up_the_horizon() -> None:
    """Defect: with guaranteed queues and preemption on, the run stepped through the timer's 15 s
    ticks — each a full retry that found nothing — and said "unknown" past 2,000 of them (8.3 h)."""
    for pre in ("true", "false"):
        clock = Clock(1_800_000_000.0)
        p = Scheduler.from_yaml(HORIZON.replace("PRE", pre), clock=clock).partition("default")
        p.add_node("n1", Resource({"vcore": 100000}))
        p.add_application("x", UserGroup("u", []), queue="root.a")
        assert p.allocate("x", "r", Resource({"vcore": 2000}), max_runtime=48 * H).allocated
        p.add_ask("x", "w", Resource({"vcore": 1000}))
        f = forecast(p, HoldTimes(), clock.now)
        assert not f.truncated
        assert f.asks["w"].p50 == clock.now + 48 * H, pre
        assert f.asks["w"].basis == ("declared runtime of r",)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["g", "free"]), st.integers(1, 6), st.integers(1, 30)), max_size=8),
       st.lists(st.tuples(st.sampled_from(["g", "free"]), st.integers(1, 6), st.integers(1, 30),
                          st.integers(0, 1), st.integers(0, 40)), min_size=1, max_size=8),
       st.integers(8, 20))
def test_skipping_the_idle_ticks_moves_no_start(
        running: list[tuple[str, int, int]], waiting: list[tuple[str, int, int, int, int]],
        node_cores: int) -> None:
    """The run that skips the ticks after one that changed nothing gives the starts of the run that
    takes every tick (the partition's timer every 15 s): asks arrive at different times, so their
    first preemption attempts fall between ticks."""
    clock = Clock(1000.0)
    p = scheduler(GUARANTEED, clock=clock).partition("default")
    p.add_node("n1", Resource({"vcore": node_cores * 1000}))
    p.add_application("g1", UserGroup("bob", ["ops"]), queue="root.g")
    p.add_application("f1", UserGroup("carol", ["ops"]), queue="root.free")
    for i, (leaf, cores, runtime) in enumerate(running):
        p.allocate(f"{leaf[0]}1", f"r{i}", Resource({"vcore": cores * 1000}),
                   max_runtime=runtime * 10 + i / 10)
    for i, (leaf, cores, runtime, priority, gap) in enumerate(waiting):
        clock.advance(gap + 0.001)
        p.add_ask(f"{leaf[0]}1", f"w{i}", Resource({"vcore": cores * 1000}), priority=priority,
                  max_runtime=runtime * 10 + (i + 50) / 10)
    skipped = forecast(p, HoldTimes(), clock.now)
    silent = fc._time_silent
    fc._time_silent = lambda state: False
    try:
        every = forecast(p, HoldTimes(), clock.now)
    finally:
        fc._time_silent = silent
    assert {k: e.p50 for k, e in skipped.asks.items()} == {k: e.p50 for k, e in every.asks.items()}
    assert {k: e.basis for k, e in skipped.asks.items()} == {k: e.basis for k, e in every.asks.items()}


def test_an_ask_that_may_first_preempt_after_an_idle_tick_gets_its_tick() -> None:
    """w0 is tried at every tick and never preempts (it exceeds g's max); w1 arrives later and may
    first preempt at 1050: the ticks between are idle, but the tick after w1's delay is taken."""
    clock = Clock(1000.0)
    p = scheduler(GUARANTEED, clock=clock).partition("default")
    p.add_node("n1", Resource({"vcore": 12000}))
    p.add_application("g1", UserGroup("bob", ["ops"]), queue="root.g")
    p.add_application("f1", UserGroup("carol", ["ops"]), queue="root.free")
    assert p.allocate("f1", "r1", Resource({"vcore": 10000}), max_runtime=10 * H).allocated
    p.add_ask("g1", "w0", Resource({"vcore": 13000}))
    clock.now = 1030.0
    p.add_ask("g1", "w1", Resource({"vcore": 4000}))
    skipped = forecast(p, HoldTimes(), clock.now).asks["w1"]
    silent = fc._time_silent
    fc._time_silent = lambda state: False
    try:
        every = forecast(p, HoldTimes(), clock.now).asks["w1"]
    finally:
        fc._time_silent = silent
    assert every.p50 is not None and every.p50 < 1100
    assert (skipped.p50, skipped.basis) == (every.p50, every.basis)


def test_an_ask_over_its_queues_max_or_the_cluster_never_fits_and_says_which() -> None:
    """Defect: an ask larger than its queue's max was "unknown: no end of running work … lets it
    start", as if some end might; no end ever makes room for it."""
    clock = Clock(NOV27)
    s = Scheduler.from_yaml(WINDOW % 4, clock=clock)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 8000}))
    p.add_application("x", UserGroup("u", []), queue="root.a")
    p.add_ask("x", "big", Resource({"vcore": 3000}), max_runtime=H)        # root.a: max 2 (4 in a window)
    p.add_ask("x", "huge", Resource({"vcore": 5000}), max_runtime=H)       # over the window's 4 too
    p.add_ask("x", "wide", Resource({"vcore": 9000}), max_runtime=H)       # the cluster has 8 cores
    p.add_ask("x", "gpu", Resource({GPU: 1}), max_runtime=H)               # no node has a GPU
    f = forecast(p, HoldTimes(), clock.now)
    # root.a's max is raised by a window: it may fit then (3 cores at 18:00), the run finds it; one
    # over the window's max too is not told "never" (windows change: the claim is kept to what cannot)
    assert f.asks["big"].p50 == NOV27 + 18 * H
    assert f.asks["wide"].basis == ("never fits: wide asks 9 cores over 8 cores, the cluster's capacity now",)
    assert f.asks["gpu"].basis == ("never fits: gpu asks 1 GPU over 0 GPUs, the cluster's capacity now",)
    assert f.asks["huge"].p50 is None and f.asks["huge"].basis[0].startswith("unknown")


def test_an_ask_over_a_max_no_window_changes_never_fits() -> None:
    clock = Clock(NOV27)
    p = Scheduler.from_yaml(HORIZON.replace("PRE", "false"), clock=clock).partition("default")
    p.add_node("n1", Resource({"vcore": 100000}))
    p.add_application("x", UserGroup("u", []), queue="root.a")
    p.add_ask("x", "w", Resource({"vcore": 3000}), max_runtime=H)
    eta = forecast(p, HoldTimes(), clock.now).asks["w"]
    assert eta.p50 is None
    assert eta.basis == ("never fits: w asks 3 cores over 2 cores, root.a's max",)


def test_a_window_due_that_the_timer_has_not_opened_yet_counts_from_now() -> None:
    """The forecast is asked at 18:00:01, the window is due since 18:00 but the service's timer (every
    2 s) has not written it yet: the copy opens it now, as the timer will, and the ask starts now —
    not at the next evening's edge."""
    clock = Clock(NOV27 + 12 * H)
    s = Scheduler.from_yaml(WINDOW % 4, clock=clock)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100000}))
    p.add_application("x", UserGroup("u", []), queue="root.a")
    assert p.allocate("x", "r", Resource({"vcore": 2000}), max_runtime=100 * H).allocated
    p.add_ask("x", "w", Resource({"vcore": 2000}), max_runtime=H)
    clock.now = NOV27 + 18 * H + 1
    eta = forecast(p, HoldTimes(), clock.now).asks["w"]
    assert eta.p50 == clock.now
    assert eta.basis == ("window evening opens on root.a",)
    assert tick(s.config_text, s.update_config, clock.now)
    assert p.allocation("w") is not None
