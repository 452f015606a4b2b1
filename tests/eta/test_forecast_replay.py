"""The forecast through time windows, checked against a replay (issue 35: "with declared runtimes and
nothing new arriving, the ETA equals the actual start"): the real partition moved through the same
instants — each declared end released, then its windows ticked as the service's timer ticks them, its
timeouts run and a cycle — starts every waiting ask when the forecast said, the ends and the window's
edges in any order, at the same instant too (tests/eta/test_forecast_timed.py has the single cases)."""

from __future__ import annotations

import importlib
import math
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.eta import HoldTimes, forecast
from quotaplane.partition import Partition
from quotaplane.scheduler import Scheduler
from quotaplane.windows import tick
from tests.eta.test_explain_timed import DEC1, GPU, NOV1, NOV27, WINDOW, H
from tests.partition.helpers import Clock

NOON = NOV27 + 12 * H
EVENING = NOV27 + 18 * H           # the window opens 18:00 and closes 23:00 (UTC), every day


def _cores(n: int) -> Resource:
    return Resource({"vcore": n * 1000})


def _windowed(window_max: int, *, start: float = NOON) -> tuple[Scheduler, Partition, Clock]:
    """root.a: max 2 vcore, ``window_max`` from 18:00 to 23:00; its windows ticked at ``start``."""
    clock = Clock(start)
    s = Scheduler.from_yaml(WINDOW % window_max, clock=clock)
    tick(s.config_text, s.update_config, clock.now)
    p = s.partition("default")
    p.add_node("n1", _cores(100))
    p.add_application("x", UserGroup("u", []), queue="root.a")
    return s, p, clock


def test_with_no_room_at_the_opening_the_ask_starts_when_the_room_is_there() -> None:
    """At 18:00 the window gives 3 vcore: the running 2 leave 1, too little for the ask's 2. The
    running work ends at 20:00, inside the window: the ask starts then."""
    _, p, clock = _windowed(3)
    assert p.allocate("x", "r", _cores(2), max_runtime=8 * H).allocated
    p.add_ask("x", "w", _cores(2), max_runtime=H)
    assert forecast(p, HoldTimes(), clock.now).asks["w"].p50 == NOV27 + 20 * H


def test_an_ask_the_window_closed_on_waits_for_the_room_under_the_max_it_left() -> None:
    """In the window (19:00, max 4) two allocations of 2 fill root.a; the window closes at 23:00 (max
    2) before either ends: at 23:30 the first ends and the other still holds the 2 of the max — the
    ask of 2 starts at 00:00, when the second ends."""
    _, p, clock = _windowed(4, start=NOV27 + 19 * H)
    assert p.allocate("x", "r1", _cores(2), max_runtime=4.5 * H).allocated      # ends 23:30
    assert p.allocate("x", "r2", _cores(2), max_runtime=5 * H).allocated        # ends 00:00
    p.add_ask("x", "w", _cores(2), max_runtime=H)
    # 23:30: r1 ends but the window closed: 2 (r2) under max 2 — nothing fits; 00:00: r2 ends
    assert forecast(p, HoldTimes(), clock.now).asks["w"].p50 == NOV27 + 24 * H


def test_an_ask_no_edge_ever_admits_stays_unknown_and_the_run_stops(monkeypatch: Any) -> None:
    """The window raises the max to 3 but the ask wants 4 and nothing ends: no edge ever admits it —
    unknown, and the run stops once the edges ahead bring nothing it has not met, instead of walking
    each of the horizon's 64 edges (each a full cycle: 7.6 s with 10,000 asks waiting)."""
    _, p, clock = _windowed(3)
    assert p.allocate("x", "r", _cores(1)).allocated                  # never ends (no runtime, no history)
    p.add_ask("x", "w", _cores(4), max_runtime=H)
    edges = _count_edges(monkeypatch)
    f = forecast(p, HoldTimes(), clock.now)
    assert f.asks["w"].p50 is None and not f.truncated
    assert edges == [EVENING, NOV27 + 23 * H, EVENING + 86_400]


def _count_edges(monkeypatch: Any) -> list[float]:
    """The instants the forecast's runs take at a window's edge or a budget's reset, as they take them."""
    fc = importlib.import_module("quotaplane.eta.forecast")
    taken: list[float] = []
    edge = fc._Run._edge

    def counted(run: Any, at: float) -> None:
        taken.append(at)
        edge(run, at)

    monkeypatch.setattr(fc._Run, "_edge", counted)
    return taken


TWO_WINDOWS = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: p
      resources: {max: {vcore: 3}}
      queues:
      - name: a
        resources: {max: {vcore: 2}}
  windows:
  - {name: evening, queue: root.p.a, cron: "0 18 * * *", duration: 5h, max: {vcore: 5}}
  - {name: monday, queue: root.p, cron: "0 0 * * 1", duration: 24h, max: {vcore: 10}}
"""


def test_the_run_goes_on_to_an_edge_that_brings_windows_it_has_not_met() -> None:
    """Only the evening window (root.p.a, daily) and the Monday window (root.p) together admit the
    ask. Friday's and Saturday's evenings repeat what the run met — it goes on all the same, since
    the edges ahead bring the Monday window: the ask starts on Monday at 18:00."""
    clock = Clock(NOON)                                   # Friday 27 November 2026, 12:00 UTC
    s = Scheduler.from_yaml(TWO_WINDOWS, clock=clock)
    p = s.partition("default")
    p.add_node("n1", _cores(100))
    p.add_application("x", UserGroup("u", []), queue="root.p.a")
    p.add_ask("x", "w", _cores(4), max_runtime=H)
    eta = forecast(p, HoldTimes(), clock.now).asks["w"]
    assert eta.p50 == EVENING + 3 * 86_400 and eta.basis == ("window evening opens on root.p.a",)


# --- the replay: the real partition moved through the same instants ----------------------------------

TWO = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      resources: {max: {vcore: %(amax)d}}
    - name: b
      resources: {max: {vcore: 6}}
  windows:
  - name: evening
    queue: root.a
    cron: "0 18 * * *"
    duration: 5h
    max: {vcore: %(wmax)d}
"""


def test_an_end_at_a_windows_closing_frees_its_room_before_the_window_closes() -> None:
    """w0 runs in the window's room (18:00-23:00, max 6) and ends at 23:00, as the window closes
    (max 2): the replay releases it first — its cycle still under the window's max — so w1 starts
    at 23:00; taking the edge first told the next evening."""
    clock = Clock(NOV27 + 3.5 * H)
    s = Scheduler.from_yaml(TWO % {"amax": 2, "wmax": 6}, clock=clock)
    p = s.partition("default")
    p.add_node("n1", _cores(10))
    p.add_application("a", UserGroup("ua", []), queue="root.a")
    p.add_ask("a", "w0", _cores(4), priority=1, max_runtime=5 * H)
    clock.advance(1)
    p.add_ask("a", "w1", _cores(4), max_runtime=6 * H)
    f = forecast(p, HoldTimes(), clock.now)
    assert (f.asks["w0"].p50, f.asks["w1"].p50) == (EVENING, NOV27 + 23 * H)
    assert f.asks["w1"].basis == ("declared runtime of w0",)
    assert _replay(s, p, clock, clock.now + 86_400) == {"w0": EVENING, "w1": NOV27 + 23 * H}


def _edges_after(t: float) -> float:
    """The window's next edge (18:00 or 23:00 UTC) after ``t``."""
    day = NOV27 + math.floor((t - NOV27) / 86_400) * 86_400
    return min(e for e in (day + 18 * H, day + 23 * H, day + 42 * H) if e > t)


def _replay(s: Scheduler, p: Partition, clock: Clock, until: float) -> dict[str, float]:
    """The real partition moved forward with nothing new arriving: at each declared end and each
    window edge, the ends released, the windows ticked, the timers run and a cycle; when each waiting
    ask started."""
    waiting = {a.allocation_key for a in p.pending()}
    starts: dict[str, float] = {}
    while waiting - starts.keys() and clock.now < until:
        allocs = p.allocations()
        ends = [a.time + a.max_runtime for a in allocs if a.max_runtime is not None]
        at = min([*ends, _edges_after(clock.now)])
        clock.now = at
        done = [a.allocation_key for a in allocs
                if a.max_runtime is not None and a.time + a.max_runtime == at]
        if done:
            p.release_batch(done)
        tick(s.config_text, s.update_config, at)
        p.check_timeouts(at)
        p.schedule()
        for key in waiting - starts.keys():
            a = p.allocation(key)
            if a is not None:
                starts[key] = a.time
    return starts


_minutes = st.integers(1, 60).map(lambda m: m * 15 * 60)     # quarter hours, up to 15 h


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 47).map(lambda h: NOV27 + h * 0.5 * H),
       st.lists(st.tuples(st.sampled_from("ab"), st.integers(1, 3), _minutes), max_size=6),
       st.lists(st.tuples(st.sampled_from("ab"), st.integers(1, 4), st.integers(0, 2), _minutes),
                min_size=1, max_size=6),
       st.integers(1, 3), st.integers(2, 8))
def test_the_forecast_is_the_start_a_replay_gives_through_the_window_edges(
        start: float, running: list[tuple[str, int, int]], waiting: list[tuple[str, int, int, int]],
        amax: int, wmax: int) -> None:
    """Declared runtimes, a window on root.a that raises (or lowers) its max every evening, nothing new
    arriving: every p50 is the start the real partition gives when moved through the same ends and
    window edges, and an ask the forecast does not start does not start in three days of replay."""
    clock = Clock(start)
    s = Scheduler.from_yaml(TWO % {"amax": amax, "wmax": wmax}, clock=clock)
    tick(s.config_text, s.update_config, clock.now)
    p = s.partition("default")
    p.add_node("n1", _cores(10))
    for leaf in "ab":
        p.add_application(leaf, UserGroup(f"u{leaf}", []), queue=f"root.{leaf}")
    for i, (leaf, cores, runtime) in enumerate(running):
        p.allocate(leaf, f"r{i}", _cores(cores), max_runtime=runtime)
    for i, (leaf, cores, priority, runtime) in enumerate(waiting):
        clock.advance(1)
        p.add_ask(leaf, f"w{i}", _cores(cores), priority=priority, max_runtime=runtime)
    f = forecast(p, HoldTimes(), clock.now)
    predicted = {k: e.p50 for k, e in f.asks.items()}
    actual = _replay(s, p, clock, clock.now + 3 * 86_400)
    assert predicted == {k: actual.get(k) for k in predicted}
    at_edge = any(v is not None and v == _edges_after(v - 1) for v in predicted.values())
    event("some start at an edge" if at_edge else "none at an edge")


# --- the quantiles' shared pass with window edges -----------------------------------------------------

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 47).map(lambda h: NOV27 + h * 0.5 * H),
       st.lists(st.tuples(st.sampled_from("ab"), st.integers(1, 3), st.one_of(st.none(), _minutes)),
                max_size=6),
       st.lists(st.tuples(st.sampled_from("ab"), st.integers(1, 4), st.one_of(st.none(), _minutes)),
                min_size=1, max_size=6),
       st.lists(st.integers(1, 40).map(lambda m: m * 900.0), max_size=8),
       st.integers(1, 3), st.integers(2, 8))
def test_the_quantiles_sharing_a_pass_through_window_edges_answer_as_their_own_runs(
        start: float, running: list[tuple[str, int, int | None]], waiting: list[tuple[str, int, int | None]],
        holds_of: list[float], amax: int, wmax: int) -> None:
    """Observed holds make p10, p50 and p90 runs whose ends fall on either side of a window's edge: a
    follower leaves the shared pass where its instants and the leader's part (an edge before its own
    next end, or an end of its own after the leader's edge), so every answer is that of the runs each
    on its own copy."""
    fc = importlib.import_module("quotaplane.eta.forecast")
    clock = Clock(start)
    s = Scheduler.from_yaml(TWO % {"amax": amax, "wmax": wmax}, clock=clock)
    tick(s.config_text, s.update_config, clock.now)
    p = s.partition("default")
    p.add_node("n1", _cores(10))
    for leaf in "ab":
        p.add_application(leaf, UserGroup(f"u{leaf}", []), queue=f"root.{leaf}")
    for i, (leaf, cores, runtime) in enumerate(running):
        p.allocate(leaf, f"r{i}", _cores(cores), max_runtime=runtime)
    for i, (leaf, cores, runtime) in enumerate(waiting):
        clock.advance(1)
        p.add_ask(leaf, f"w{i}", _cores(cores), max_runtime=runtime)
    holds = HoldTimes()
    for leaf in "ab":
        for seconds in holds_of:
            holds.add(f"root.{leaf}", f"u{leaf}", seconds)
    shared = forecast(p, holds, clock.now)
    fc.ADOPT_KEYS = False
    try:
        apart = forecast(p, holds, clock.now, share=False)
    finally:
        fc.ADOPT_KEYS = True
    assert shared.asks == apart.asks
    assert (shared.truncated, shared.next_end, shared.runs) == (apart.truncated, apart.next_end, apart.runs)
    event(f"{apart.runs} runs in {shared.passes} passes")


GUARANTEED_IN_THE_EVENING = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: g
      resources: {max: {vcore: 10}}
      properties: {preemption.delay: 20s}
    - name: o
      resources: {guaranteed: {vcore: 2}, max: {vcore: 10}}
  windows:
  - name: evening
    queue: root.g
    cron: "0 18 * * *"
    duration: 5h
    guaranteed: {vcore: 6}
"""


def test_an_ask_a_windows_guarantee_lets_preempt_starts_at_the_opening() -> None:
    """root.g has no guaranteed, so its ask can never preempt (PR-Y2) — until the evening window gives
    it 6 vcore: then it preempts root.o's work above o's own guarantee. The copy marked the ask as
    never preempting under the configuration it was made with; the window's edge changes that
    configuration, and the forecast's answer is the opening, as the partition gives it — not the end
    of o's work, 100 hours on."""
    clock = Clock(NOON)
    s = Scheduler.from_yaml(GUARANTEED_IN_THE_EVENING, clock=clock)
    p = s.partition("default")
    p.add_node("n1", _cores(10))
    p.add_application("g", UserGroup("ug", []), queue="root.g")
    p.add_application("o", UserGroup("uo", []), queue="root.o")
    for i in range(5):
        assert p.allocate("o", f"o{i}", _cores(2), max_runtime=100 * H).allocated
    p.add_ask("g", "w", _cores(2), max_runtime=H)
    eta = forecast(p, HoldTimes(), clock.now).asks["w"]
    assert eta.p50 == EVENING and eta.basis == ("window evening opens on root.g",)
    assert _replay(s, p, clock, clock.now + 86_400) == {"w": EVENING}


BUDGET_AND_WINDOW = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      resources: {max: {nvidia.com/gpu: 4}}
  windows:
  - {name: evening, queue: root.a, cron: "0 18 * * *", duration: 5h, max: {nvidia.com/gpu: 8}}
  budgets:
  - {queue: root.a, resourcehours: {nvidia.com/gpu: 100}, period: month}
"""


def test_past_evenings_that_find_nothing_the_run_goes_to_the_reset_and_on_to_the_opening() -> None:
    """root.a spent its 100 GPU-hours of November; its max lets the ask in only in the evening window.
    The evenings of November find nothing (the budget refuses), and the run goes past them to the
    reset — the evening of 1 December starts the ask, as the partition itself gives it — without
    taking each evening of the month."""
    clock = Clock(NOV1 + 8 * H)
    s = Scheduler.from_yaml(BUDGET_AND_WINDOW, clock=clock)
    p = s.partition("default")
    p.add_node("n1", {GPU: 8})
    p.add_application("train", UserGroup("alice", ["ml"]), queue="root.a")
    assert p.allocate("train", "run", {GPU: 4}).allocated           # never ends (no runtime, no history)
    clock.advance(25 * H)
    p.add_ask("train", "w", {GPU: 1}, max_runtime=H)
    eta = forecast(p, HoldTimes(), clock.now).asks["w"]
    assert eta.p50 == DEC1 + 18 * H and eta.basis == ("window evening opens on root.a",)
    for at, started in ((DEC1 - 6 * H, False), (DEC1, False), (DEC1 + 18 * H, True)):
        clock.now = at
        tick(s.config_text, s.update_config, at)
        p.check_timeouts(at)
        assert (p.allocation("w") is not None) == started, at


def test_a_run_past_evenings_takes_a_few_edges_not_each_of_the_month(monkeypatch: Any) -> None:
    """The same partition: the run takes five instants, not the 58 edges and the reset of its horizon
    (with 10,000 asks waiting that nothing admits, 25.8 s of CPU before, 3.0 s now)."""
    clock = Clock(NOV1 + 8 * H)
    s = Scheduler.from_yaml(BUDGET_AND_WINDOW, clock=clock)
    p = s.partition("default")
    p.add_node("n1", {GPU: 8})
    p.add_application("train", UserGroup("alice", ["ml"]), queue="root.a")
    assert p.allocate("train", "run", {GPU: 4}).allocated
    clock.advance(25 * H)
    p.add_ask("train", "w", {GPU: 1}, max_runtime=H)
    edges = _count_edges(monkeypatch)
    forecast(p, HoldTimes(), clock.now)
    nov2 = NOV1 + 86_400
    # each quantile's run (no runtime is declared; a budget reads the clock, so they share no pass):
    # two evenings of November (the second repeats the first), the reset, the first evening after it
    assert edges == [nov2 + 18 * H, nov2 + 23 * H, nov2 + 42 * H, DEC1, DEC1 + 18 * H] * 3


def test_a_period_like_the_last_is_passed_and_a_later_one_with_the_window_is_not() -> None:
    """Root.b's budget resets every 6 hours; root.a's ask fits only in the evening window. The periods
    beginning at 00:00 and 06:00 bring the same (no edge, the window closed): the second finds
    nothing, as the first did — but the run goes on to the period that brings the window's opening,
    and the ask starts at 18:00."""
    text = (TWO % {"amax": 2, "wmax": 6}) + \
        "  budgets:\n  - {queue: root.b, resourcehours: {vcore: 100}, period: 6h}\n"
    clock = Clock(NOV27 - 0.5 * H)
    s = Scheduler.from_yaml(text, clock=clock)
    tick(s.config_text, s.update_config, clock.now)
    p = s.partition("default")
    p.add_node("n1", _cores(10))
    p.add_application("a", UserGroup("ua", []), queue="root.a")
    p.add_ask("a", "w", _cores(4), max_runtime=H)
    assert forecast(p, HoldTimes(), clock.now).asks["w"].p50 == EVENING
    assert _replay(s, p, clock, clock.now + 86_400) == {"w": EVENING}
