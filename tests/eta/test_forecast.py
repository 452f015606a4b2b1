"""The waiting-time forecast (docs/eta.md): rule by rule, then two properties — the forecast, made on
a copy, never changes the partition; and with declared runtimes honoured and nothing new arriving,
each ask starts exactly when the forecast said (the partition replayed forward)."""

from __future__ import annotations

import importlib
import math
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.eta import MIN_BASIS, HoldSketch, HoldTimes, forecast, tracker
from quotaplane.eta.forecast import MAX_STEPS
from quotaplane.partition.facade import Partition
from tests.partition.helpers import Clock, scheduler

BOB = UserGroup("bob", ["ops"])
CORE = 1000          # vcore is counted in milli-cores


def _partition(clock: Clock, cores: int = 100) -> Partition:
    p = scheduler(clock=clock).partition("default")
    p.add_node("n1", Resource({"vcore": cores * CORE}))
    p.add_application("app1", BOB, queue="root.b")     # root.b: max 20 cores
    return p


def _cores(n: int) -> Resource:
    return Resource({"vcore": n * CORE})


def test_declared_runtimes_give_exact_starts_in_queue_order_with_their_basis() -> None:
    clock = Clock(1000.0)
    p = _partition(clock)
    assert p.allocate("app1", "r1", _cores(10), max_runtime=100)
    assert p.allocate("app1", "r2", _cores(10), max_runtime=300)
    p.add_ask("app1", "w1", _cores(15), max_runtime=50)
    p.add_ask("app1", "w2", _cores(10), max_runtime=50)
    f = forecast(p, HoldTimes(), 1000.0)
    assert f.runs == 1                                   # every end declared: one run is every quantile
    w1, w2 = f.asks["w1"], f.asks["w2"]
    # w2 fits in r1's room at 1100; w1 needs 15 cores: r2's end at 1300 (w2 ends at 1150 first)
    assert (w2.p10, w2.p50, w2.p90) == (1100.0, 1100.0, 1100.0)
    assert w1.p50 == 1300.0
    assert w2.basis == ("declared runtime of r1",)
    assert w1.basis == ("declared runtime of r2",)
    assert w1.to_dict(1000.0)["inSeconds"] == {"p10": 300.0, "p50": 300.0, "p90": 300.0}


def test_an_overdue_declared_runtime_ends_now() -> None:
    clock = Clock(1000.0)
    p = _partition(clock)
    assert p.allocate("app1", "r1", _cores(20), max_runtime=10)
    p.add_ask("app1", "w1", _cores(5))
    f = forecast(p, HoldTimes(), 2000.0)
    assert f.asks["w1"].p50 == 2000.0
    assert f.asks["w1"].basis == ("declared runtime of r1 (overdue)",)


def test_no_declared_runtime_and_no_history_is_unknown_never_a_number() -> None:
    clock = Clock(1000.0)
    p = _partition(clock)
    assert p.allocate("app1", "r1", _cores(20))
    p.add_ask("app1", "w1", _cores(5))
    eta = forecast(p, HoldTimes(), 1000.0).asks["w1"]
    assert not eta.known and (eta.p10, eta.p50, eta.p90) == (None, None, None)
    assert eta.basis[0].startswith("unknown")
    assert eta.to_dict(1000.0)["inSeconds"]["p50"] is None


def test_observed_hold_times_give_p10_p50_p90_with_their_basis() -> None:
    clock = Clock(1000.0)
    p = _partition(clock)
    assert p.allocate("app1", "r1", _cores(20))
    p.add_ask("app1", "w1", _cores(5))
    holds = HoldTimes()
    for seconds in range(60, 60 * 11, 60):               # 10 holds: 1 … 10 minutes
        holds.add("root.b", "bob", seconds)
    eta = forecast(p, holds, 1000.0).asks["w1"]
    assert eta.known
    assert eta.p10 is not None and eta.p50 is not None and eta.p90 is not None
    assert eta.p10 < eta.p50 < eta.p90
    assert abs(eta.p50 - (1000.0 + 300)) < 3                # the median hold, within a bucket
    assert abs(eta.p90 - (1000.0 + 540)) < 5
    assert eta.basis == ("from 10 past allocations of root.b",)


def test_the_remaining_hold_counts_only_holds_longer_than_the_age() -> None:
    holds = HoldTimes()
    for seconds in [10] * 20 + [1000] * MIN_BASIS:
        holds.add("root.b", "bob", seconds)
    young = holds.remaining("root.b", "bob", 0.0, 0.5)
    old = holds.remaining("root.b", "bob", 100.0, 0.5)
    assert young.seconds is not None and young.seconds < 11
    assert old.seconds is not None and abs(old.seconds - 1000) < 10
    assert old.basis == f"from {MIN_BASIS} past allocations of root.b"
    too_old = holds.remaining("root.b", "bob", 5000.0, 0.5)
    assert too_old.seconds is None and "no basis" in too_old.basis


def test_the_user_stands_in_when_the_queue_has_too_few_holds() -> None:
    holds = HoldTimes()
    holds.add("root.b", "bob", 50)
    for _ in range(MIN_BASIS):
        holds.add("root.a", "bob", 70)
    est = holds.remaining("root.b", "bob", 0.0, 0.5)
    assert est.scope == "user bob" and est.samples == MIN_BASIS + 1


def test_holds_are_observed_from_the_partitions_commits_with_event_times() -> None:
    clock = Clock(1000.0)
    p = _partition(clock)
    t = tracker(p)
    assert p.allocate("app1", "r1", _cores(1))
    clock.advance(42)
    p.release("r1")
    sketch = t.holds.queues["root.b"]
    assert sketch.total == 1 and abs((sketch.quantile(0.5) or 0) - 42) < 0.5
    assert t.holds.users["bob"].total == 1


def test_the_tracker_caches_until_the_partition_changes() -> None:
    clock = Clock(1000.0)
    p = _partition(clock)
    assert p.allocate("app1", "r1", _cores(20), max_runtime=100)
    p.add_ask("app1", "w1", _cores(5), max_runtime=10)
    t = tracker(p)
    first = t.forecast()
    assert t.forecast() is first
    clock.advance(1)
    assert t.forecast() is first                        # nothing changed, no end passed
    p.add_ask("app1", "w2", _cores(5), max_runtime=10)
    second = t.forecast()
    assert second is not first and set(second.asks) == {"w1", "w2"}
    clock.advance(200)                                  # past the end the forecast counted on
    assert t.forecast() is not second


def test_an_overdue_declared_runtime_keeps_the_cached_forecast_until_something_changes() -> None:
    """Review (issue 35): an allocation past its declared runtime ends "now" in each forecast, so the
    end the forecast counted on was its own time and every later call forecast again. That end is no
    real event: the cache holds until a commit (its release) or a real end passes."""
    clock = Clock(1000.0)
    p = _partition(clock)
    assert p.allocate("app1", "r1", _cores(10), max_runtime=5)
    assert p.allocate("app1", "r2", _cores(10), max_runtime=500)
    p.add_ask("app1", "w1", _cores(5))
    clock.advance(10)                                   # r1 is overdue
    t = tracker(p)
    first = t.forecast()
    assert first.asks["w1"].basis == ("declared runtime of r1 (overdue)",)
    assert first.next_end == 1500.0                     # r2's end, not the overdue r1's
    for _ in range(3):
        clock.advance(1)
        assert t.forecast() is first
    p.release("r1")
    assert t.forecast() is not first


def test_sketch_quantiles_are_nearest_rank() -> None:
    s = HoldSketch()
    for v in (1, 2, 3, 4):
        s.add(v / 1000)                                 # exact buckets below 128 ms
    assert [s.quantile(q) for q in (0.25, 0.5, 0.75, 1.0)] == [0.001, 0.002, 0.003, 0.004]
    assert s.longer_than(0.002) == 2
    assert HoldSketch().quantile(0.5) is None


# --- properties -------------------------------------------------------------------------------------

_running = st.lists(st.tuples(st.sampled_from(["a1", "b1"]), st.integers(1, 8), st.integers(1, 50)),
                    max_size=8)
_waiting = st.lists(st.tuples(st.sampled_from(["a1", "b1"]), st.integers(1, 12), st.integers(1, 50),
                              st.integers(0, 2)), min_size=1, max_size=8)


def _world(running: list[tuple[str, int, int]], waiting: list[tuple[str, int, int, int]],
           node_cores: int) -> tuple[Partition, Clock]:
    clock = Clock(1000.0)
    p = scheduler(clock=clock).partition("default")
    p.add_node("n1", _cores(node_cores))
    p.add_application("a1", UserGroup("bob", ["ops"]), queue="root.b")
    p.add_application("b1", UserGroup("carol", ["ops"]), queue="root.default")
    for i, (app, cores, runtime) in enumerate(running):
        # distinct ends (the tenth of a second): two ends at one instant are one release in the
        # forecast, and a replay that released them one by one could start another ask in between
        p.allocate(app, f"r{i}", _cores(cores), max_runtime=runtime * 10 + i / 10)
    for i, (app, cores, runtime, priority) in enumerate(waiting):
        clock.advance(0.001)
        p.add_ask(app, f"w{i}", _cores(cores), priority=priority, max_runtime=runtime * 10 + (i + 50) / 10)
    return p, clock


def _replay(p: Partition, clock: Clock) -> dict[str, float]:
    """Run the partition itself forward: every allocation ends at its declared runtime, nothing new
    arrives; when each waiting ask started."""
    waiting = {a.allocation_key for a in p.pending()}
    starts: dict[str, float] = {}
    while waiting - starts.keys():
        allocs = p.allocations()
        ends = [a.time + (a.max_runtime or math.inf) for a in allocs]
        if not ends or min(ends) == math.inf:
            break
        at = min(ends)
        clock.now = max(clock.now, at)
        p.release_batch([a.allocation_key for a, e in zip(allocs, ends, strict=True) if e == at])
        p.check_timeouts(clock.now)
        p.schedule()
        for key in waiting - starts.keys():
            a = p.allocation(key)
            if a is not None:
                starts[key] = a.time
    return starts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_running, _waiting, st.integers(10, 40))
def test_the_forecast_never_changes_the_partition_and_is_exact_when_runtimes_are_honoured(
        running: list[tuple[str, int, int]], waiting: list[tuple[str, int, int, int]],
        node_cores: int) -> None:
    p, clock = _world(running, waiting, node_cores)
    before = p.dump_state()
    f = forecast(p, HoldTimes(), clock.now)
    assert p.dump_state() == before                      # the copy's runs left the partition as it was
    predicted = {k: e.p50 for k, e in f.asks.items()}
    assert set(predicted) == {a.allocation_key for a in p.pending()}
    actual = _replay(p, clock)
    assert predicted == {k: actual.get(k) for k in predicted}


def test_the_forecast_is_bounded_and_beyond_its_horizon_says_unknown() -> None:
    clock = Clock(1000.0)
    p = _partition(clock)
    for i in range(4):                                   # ends at 1010, 1020, 1030, 1040
        assert p.allocate("app1", f"r{i}", _cores(5), max_runtime=10 * (i + 1))
    for i in range(4):
        p.add_ask("app1", f"w{i}", _cores(5), max_runtime=1000)
    full = forecast(p, HoldTimes(), 1000.0)
    assert [full.asks[f"w{i}"].p50 for i in range(4)] == [1010.0, 1020.0, 1030.0, 1040.0]
    assert not full.truncated
    short = forecast(p, HoldTimes(), 1000.0, max_steps=2)
    assert short.truncated
    assert [short.asks[f"w{i}"].p50 for i in range(4)] == [1010.0, 1020.0, None, None]
    assert short.asks["w3"].basis == \
        ("unknown: w3 does not start within the forecast's horizon of 2 instants",)


def test_a_preemption_delay_passing_starts_an_ask_when_the_partitions_timer_would() -> None:
    """PR-Y3 in the forecast: child2's ask waits for nothing that ends — it starts when its preemption
    delay (30 s) passes and the timer's cycle preempts child1's newest allocation; the partition itself,
    moved to that instant, does the same."""
    from tests.preemption.test_guaranteed import _example_1, _on_queue

    s, clock = _example_1(_on_queue())
    p = s.partition("default")
    before = p.dump_state()
    eta = forecast(p, HoldTimes(), clock.now).asks["ask"]
    assert p.dump_state() == before
    created = p.get_ask("ask").created                   # type: ignore[union-attr]
    assert eta.p50 is not None and created + 30 <= eta.p50 <= created + 30 + 15
    assert eta.basis == ("a preemption delay passed",)
    clock.now = eta.p50 - 0.5
    p.check_timeouts()
    assert p.allocation("ask") is None                   # not before the forecast time
    clock.now = eta.p50
    p.check_timeouts()
    assert p.allocation("ask") is not None and p.allocation("c1-1") is None


GUARANTEED = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: g
      resources: {guaranteed: {vcore: 6}, max: {vcore: 12}}
      properties: {preemption.delay: 20s}
    - name: free
      resources: {max: {vcore: 14}}
      properties: {preemption.delay: 10s}
"""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["g", "free"]), st.integers(1, 6), st.integers(1, 30)), max_size=8),
       st.lists(st.tuples(st.sampled_from(["g", "free"]), st.integers(1, 6), st.integers(1, 30),
                          st.integers(0, 1)), min_size=1, max_size=8),
       st.integers(8, 20), st.booleans())
def test_asks_that_never_may_preempt_are_not_retried_and_no_start_moves(
        running: list[tuple[str, int, int]], waiting: list[tuple[str, int, int, int]],
        node_cores: int, preemption: bool) -> None:
    """The copy does not retry for preemption the asks whose chain has no guaranteed (PR-Y2: they never
    find a victim): the starts are those of the copy that retries them (the guaranteed leaf still
    preempts from the other after its delay); with YuniKorn preemption off, none is retried. Without
    guaranteed, the property above compares them with the partition itself run forward."""
    fc = importlib.import_module("quotaplane.eta.forecast")   # the package exports the function

    clock = Clock(1000.0)
    config = GUARANTEED if preemption else \
        GUARANTEED.replace("- name: default\n", "- name: default\n  preemption: {enabled: false}\n")
    p = scheduler(config, clock=clock).partition("default")
    p.add_node("n1", _cores(node_cores))
    p.add_application("g1", UserGroup("bob", ["ops"]), queue="root.g")
    p.add_application("f1", UserGroup("carol", ["ops"]), queue="root.free")
    for i, (leaf, cores, runtime) in enumerate(running):
        p.allocate(f"{leaf[0]}1", f"r{i}", _cores(cores), max_runtime=runtime * 10 + i / 10)
    for i, (leaf, cores, runtime, priority) in enumerate(waiting):
        clock.advance(0.001)
        p.add_ask(f"{leaf[0]}1", f"w{i}", _cores(cores), priority=priority,
                  max_runtime=runtime * 10 + (i + 50) / 10)
    marked = {k: e.p50 for k, e in forecast(p, HoldTimes(), clock.now).asks.items()}
    mark = fc._never_preempting
    fc._never_preempting = lambda state: None
    try:
        retried = {k: e.p50 for k, e in forecast(p, HoldTimes(), clock.now).asks.items()}
    finally:
        fc._never_preempting = mark
    assert marked == retried


def test_an_ask_preempts_at_the_timers_tick_not_a_tick_late() -> None:
    """Defect found by the property above: the forecast stepped to the guaranteed ask's own first
    attempt (20 s), where the timer runs no cycle, and then skipped the timer's next tick (15 s after
    the first delay to pass, 10 s): it started the ask when a running allocation ended instead. The
    partition itself, its timer run at those instants, preempts at the tick."""
    clock = Clock(1000.0)
    p = scheduler(GUARANTEED, clock=clock).partition("default")
    p.add_node("n1", _cores(11))
    p.add_application("g1", UserGroup("bob", ["ops"]), queue="root.g")
    p.add_application("f1", UserGroup("carol", ["ops"]), queue="root.free")
    p.allocate("g1", "r0", _cores(5), max_runtime=30)
    p.allocate("f1", "r1", _cores(6), max_runtime=30.1)
    clock.advance(0.001)
    p.add_ask("g1", "w0", _cores(1))                    # may preempt from 1020.001 (g: 20 s)
    clock.advance(0.001)
    p.add_ask("f1", "w1", _cores(1))                    # the timer's first tick: 1010.002 (free: 10 s)
    eta = forecast(p, HoldTimes(), clock.now).asks["w0"]
    assert eta.p50 == 1025.002
    for t in (1010.002, 1020.001):
        clock.now = t
        p.check_timeouts()
        assert p.allocation("w0") is None
    clock.now = 1025.002
    p.check_timeouts()
    assert p.allocation("w0") is not None and p.allocation("r1") is None


def test_the_hold_times_survive_a_restart(tmp_path: Any) -> None:
    """The observed holds are read again from the journal after a restart: the same ETA on the same
    basis (and the holds that ended before the first forecast count too). Then the commits after
    the restart count once, not twice."""
    from quotaplane.journal import SQLiteJournal
    from tests.partition.helpers import CONFIG

    path = tmp_path / "j.db"
    clock = Clock(1000.0)

    def start() -> Partition:
        return scheduler(CONFIG, clock=clock, store=SQLiteJournal(path)).partition("default")

    p = start()
    p.add_node("n1", _cores(20))
    p.add_application("app1", BOB, queue="root.b")
    for i in range(6):                                  # six holds of 100..600 s in root.b, by bob
        assert p.allocate("app1", f"h{i}", _cores(1))
        clock.advance(100 * (i + 1))
        p.release(f"h{i}")
    p.remove_application("app1")
    p.add_application("app2", BOB, queue="root.b")
    assert p.allocate("app2", "big", _cores(20))        # running, no declared runtime
    p.add_ask("app2", "w", _cores(2))
    before = tracker(p).forecast(clock.now).asks["w"]
    assert before.known and before.basis == ("from 6 past allocations of root.b",)
    p.journal.close()                                   # type: ignore[union-attr]

    again = start()                                      # a restart: snapshot or journal, no tracker yet
    after = tracker(again).forecast(clock.now).asks["w"]
    assert (after.p10, after.p50, after.p90) == (before.p10, before.p50, before.p90)
    assert after.basis == before.basis
    clock.advance(10)
    again.release("big")
    assert tracker(again).holds.queues["root.b"].total == 7
    again.journal.close()                                # type: ignore[union-attr]


def test_a_restart_after_compaction_reads_the_holds_that_ended_after_the_snapshot(tmp_path: Any) -> None:
    """After a snapshot compacted the journal, a restart reads the holds that ended after the snapshot,
    one running across it included (its start is in the snapshot), and does not fail: reading the
    journal from its first event raised JournalCompactedError and the service could not start."""
    from quotaplane.journal import SQLiteJournal
    from tests.partition.helpers import CONFIG

    path = tmp_path / "j.db"
    clock = Clock(1000.0)

    def start() -> Partition:
        return scheduler(CONFIG, clock=clock, store=SQLiteJournal(path, compact_on_snapshot=True)
                         ).partition("default")

    p = start()
    p.add_node("n1", _cores(20))
    p.add_application("app1", BOB, queue="root.b")
    for i in range(3):                                  # three holds before the snapshot …
        assert p.allocate("app1", f"h{i}", _cores(1))
        clock.advance(100 * (i + 1))
        p.release(f"h{i}")
    assert p.allocate("app1", "across", _cores(1))      # running at the snapshot, ended after it
    clock.advance(50)
    assert p.take_snapshot() > 0
    for i in range(3, 9):                               # … six after it: 400..900 s
        assert p.allocate("app1", f"h{i}", _cores(1))
        clock.advance(100 * (i + 1))
        p.release(f"h{i}")
    p.release("across")
    p.journal.close()                                   # type: ignore[union-attr]

    again = start()
    assert again.application("app1") is not None
    holds = tracker(again).holds.queues["root.b"]
    assert holds.total == 7                             # the six after it, and the one across it
    again.journal.close()                               # type: ignore[union-attr]


def test_the_copy_keeps_no_usage_history_unless_it_orders_the_waiting_work() -> None:
    """The forecast's working copy does not account its future (nobody reads it), but keeps the
    history when fair share with memory orders the waiting asks (the copy must order them alike)."""
    from quotaplane.eta.copy import working_copy
    from tests.partition.helpers import CONFIG

    clock = Clock(1000.0)
    plain = scheduler(CONFIG, clock=clock).partition("default")
    assert plain.history.engine is not None
    assert working_copy(plain, clock).history.engine is None
    fair = CONFIG.replace("- name: default\n",
                          "- name: default\n  history: {fairshare: {enabled: true}}\n", 1)
    ranked = scheduler(fair, clock=clock).partition("default")
    assert working_copy(ranked, clock).history.engine is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_running, _waiting, st.integers(10, 40))
def test_the_working_copy_holds_the_partitions_state(
        running: list[tuple[str, int, int]], waiting: list[tuple[str, int, int, int]],
        node_cores: int) -> None:
    """The copy puts the waiting asks back in one pass, as a snapshot restore does (not one by one):
    its state is the partition's, and its first cycle decides what the partition's would."""
    from quotaplane.eta.copy import working_copy

    p, clock = _world(running, waiting, node_cores)
    copy = working_copy(p, clock)
    assert copy.dump_state() == p.dump_state()
    copy.schedule()
    p.schedule()
    assert copy.dump_state() == p.dump_state()


def test_the_tracker_forecasts_again_when_a_running_allocation_outlives_an_observed_hold() -> None:
    """An allocation's end comes from the holds longer than it has run: as it runs past an observed
    hold, that hold leaves its basis and its end moves, with nothing committed and before any end
    the forecast counted on (found by review: kept at 100 s while a fresh forecast said 1,000 s)."""
    clock = Clock(1000.0)
    p = _partition(clock, cores=20)
    assert p.allocate("app1", "run", _cores(20))
    p.add_ask("app1", "w", _cores(5))
    t = tracker(p)
    for i in range(1, 11):
        t.holds.add("root.b", "bob", 10 * i)              # 10 … 100 s
        t.holds.add("root.b", "bob", 900 + 100 * i)       # 1,000 … 1,900 s
    early = t.forecast(1005.0)
    # the p10 run's first end is the 2nd of the 20 holds (1,020); it outlives the 1st (10 s) before
    assert 1009 < early.next_end <= 1010 and t.forecast(1009.0) is early
    fresh = forecast(p, t.holds, 1015.0).asks["w"]       # it ran past the 10 s hold: p50 100 → 1,000 s
    assert fresh.p50 != early.asks["w"].p50
    assert t.forecast(1015.0).asks["w"] == fresh


# --- the quantiles' shared pass ---------------------------------------------------------------------

def _shared_world(guaranteed: bool, reservation_delay: bool, preemption: bool = True,
                  stateaware: bool = False, window: bool = False) -> str:
    x = "resources: {guaranteed: {vcore: 4}, max: {vcore: 8}}" if guaranteed else \
        "resources: {max: {vcore: 8}}"
    y = ", properties: {reservation.delay: 30s}" if reservation_delay else ""
    off = "" if preemption else "  preemption: {enabled: false}\n"
    z = ", properties: {application.sort.policy: stateaware}" if stateaware else ""
    # root.y's max rises from 10 to 14 cores between 1050 and 1150 (seconds since the epoch)
    w = """  windows:
  - {name: burst, queue: root.y, from: "1970-01-01T00:17:30+00:00", to: "1970-01-01T00:19:10+00:00",
     max: {vcore: 14}}
""" if window else ""
    return f"""
partitions:
- name: default
{off}  queues:
  - name: root
    submitacl: '*'
    queues:
    - {{name: x, {x}, properties: {{preemption.delay: 20s}}}}
    - {{name: y, resources: {{max: {{vcore: 10}}}}{y}}}
    - {{name: z, resources: {{max: {{vcore: 6}}}}{z}}}
{w}"""


_APPS = ("x1", "y1", "y2", "z1")
_runtime = st.one_of(st.none(), st.integers(1, 60))
_holds = st.lists(st.integers(1, 60), max_size=12)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(_APPS), st.integers(1, 3), _runtime, st.integers(0, 20),
                          st.sampled_from("ab")), min_size=1, max_size=6),
       st.lists(st.tuples(st.sampled_from(_APPS[:2] + _APPS[3:]), st.integers(1, 6), st.integers(0, 2),
                          _runtime), min_size=1, max_size=8),
       st.tuples(_holds, _holds, _holds), st.integers(6, 24), st.sampled_from([False, False, True]),
       st.booleans(), st.sampled_from([3, 8, MAX_STEPS]), st.booleans(), st.booleans(),
       st.sampled_from([False, False, True]), st.booleans())
def test_the_quantiles_sharing_a_pass_answer_as_their_own_runs(
        running: list[tuple[str, int, int | None, int, str]], waiting: list[tuple[str, int, int, int | None]],
        holds_of: tuple[list[int], list[int], list[int]], node_cores: int, guaranteed: bool,
        reservation_delay: bool, max_steps: int, settled: bool, preemption: bool, stateaware: bool,
        window: bool) -> None:
    """The p10 and p90 runs follow the p50 run on its copy while they would release the same
    allocations at each of their instants and nothing reads the clock; the copy of a settled
    partition starts from its wake index rather than a full cycle. The answer — every start, its
    basis, the horizon, the time the forecast holds until — is the one of three runs, each on its own
    copy that runs a full first cycle. The worlds mix declared and observed ends, ages, a guaranteed
    that lets asks preempt after a delay, a reservation delay, applications that time out (Starting
    with one allocation, Completing once their last allocation ends), horizons short enough to cut
    runs, partitions that did not schedule since their asks came (not settled: some fit now),
    YuniKorn preemption off, a leaf ordered by ``stateaware`` (then Starting against Running
    decides, and the runs part when a timeout waits), and a time window raising a leaf's max for a
    while (its edges are at the same instants in every run: a run whose next end falls on the other
    side of an edge from the leader's parts)."""
    fc = importlib.import_module("quotaplane.eta.forecast")
    clock = Clock(1000.0)
    world = _shared_world(guaranteed, reservation_delay, preemption, stateaware, window)
    p = scheduler(world, clock=clock).partition("default")
    p.auto_schedule = settled
    p.add_node("n1", _cores(node_cores))
    for app in _APPS:
        p.add_application(app, UserGroup(f"u-{app}", ["ops"]), queue=f"root.{app[0]}")
    for i, (app, cores, runtime, later, halves) in enumerate(running):
        clock.advance(later)
        for half in "ab"[:"ab".index(halves) + 1]:    # an application with one allocation is Starting
            p.allocate(app, f"r{i}{half}", _cores(cores),
                       max_runtime=None if runtime is None else runtime * 10)
    for i, (app, cores, priority, runtime) in enumerate(waiting):
        clock.advance(0.5)
        p.add_ask(app, f"w{i}", _cores(cores), priority=priority,
                  max_runtime=None if runtime is None else runtime * 10)
    holds = HoldTimes()
    for leaf, seconds in zip("xyz", holds_of, strict=True):
        for s in seconds:
            holds.add(f"root.{leaf}", f"u-{leaf}1", s * 10)
    clock.advance(5)
    shared = forecast(p, holds, clock.now, max_steps=max_steps)
    fc.ADOPT_KEYS = False
    try:
        apart = forecast(p, holds, clock.now, max_steps=max_steps, share=False)
    finally:
        fc.ADOPT_KEYS = True
    assert shared.asks == apart.asks
    assert (shared.truncated, shared.next_end, shared.runs) == (apart.truncated, apart.next_end, apart.runs)
    assert shared.passes <= apart.passes == apart.runs
    event(f"{apart.runs} runs in {shared.passes} passes")       # both paths are taken (hypothesis stats)


def test_quantile_runs_that_agree_take_one_pass_and_one_that_differs_its_own() -> None:
    """Four full queues with the same observed holds: every run releases the same allocations at each
    of its instants, so one pass answers p10, p50 and p90; when one queue's holds order its ends
    differently in the p90 run, that run leaves the pass and runs on its own."""
    text = "partitions:\n- name: default\n  queues:\n  - name: root\n    submitacl: '*'\n    queues:\n" + \
        "".join(f"    - {{name: q{i}, resources: {{max: {{vcore: 2}}}}}}\n" for i in range(4))
    clock = Clock(1000.0)
    p = scheduler(text, clock=clock).partition("default")
    p.add_node("n1", _cores(100))
    for i in range(4):
        p.add_application(f"a{i}", UserGroup(f"u{i}", ["g"]), queue=f"root.q{i}")
        for j in range(2):
            assert p.allocate(f"a{i}", f"r{i}-{j}", _cores(1))
        for j in range(2):
            p.add_ask(f"a{i}", f"w{i}-{j}", _cores(1))
    same = HoldTimes()
    for i in range(4):
        for s in (60, 120, 300, 600, 900):
            same.add(f"root.q{i}", f"u{i}", s)
    f = forecast(p, same, clock.now)
    assert (f.runs, f.passes) == (3, 1)
    assert f.asks == forecast(p, same, clock.now, share=False).asks
    assert f.asks["w0-0"].p10 is not None and f.asks["w0-0"].p10 < f.asks["w0-0"].p50   # type: ignore[operator]
    crossed = HoldTimes()
    for i in range(4):       # q0 ends first at p10 and p50 (10 s against 50 s) and last at p90 (2000 s)
        for s in ((10, 10, 10, 2000, 2000) if i == 0 else (50, 50, 50, 60, 60)):
            crossed.add(f"root.q{i}", f"u{i}", s)
    g = forecast(p, crossed, clock.now)
    assert (g.runs, g.passes) == (3, 2)          # p10 follows p50; p90 runs alone
    assert g.asks == forecast(p, crossed, clock.now, share=False).asks
