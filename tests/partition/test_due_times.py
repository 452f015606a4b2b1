"""Timeouts by due time (issue 39): ``check_timeouts`` pops what is due from a heap instead of looking at
every application. The fast path is pinned to its slow twin — the scan of every application in order
(:func:`~quotaplane.state.timeouts.scan_due`) — on random histories: the same timeouts fire, in the same
order, and the journal replays to the same state."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane import ConflictError, NotFoundError, RejectedError, Resource
from quotaplane.application import Application
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.partition import Partition
from quotaplane.state.timeouts import DueTimes, PartitionOptions, due_at, is_due, scan_due
from tests.partition.helpers import CONFIG, Clock

OPTIONS = {"completing_timeout": 5.0, "starting_timeout": 7.0, "terminated_timeout": 20.0}
BOB = UserGroup("bob", ["dev"])
APPS = [f"app{i}" for i in range(3)]
KEYS = st.sampled_from([f"k{i}" for i in range(12)])


class ScanTimes:
    """The slow twin of :class:`DueTimes`: every question is answered by a scan of every application."""

    def __init__(self, apps: Mapping[str, Application], options: PartitionOptions) -> None:
        self.apps, self.options = apps, options

    def enter(self, app: Application) -> None:
        pass

    def leave(self, application_id: str) -> None:
        pass

    def note(self, app: Application) -> None:
        pass

    def any_due(self, t: float) -> bool:
        return bool(scan_due(self.apps.values(), t, self.options))

    def take(self, t: float) -> list[Application]:
        return scan_due(self.apps.values(), t, self.options)

    def settle(self, apps: Iterable[Application]) -> None:
        pass


def _pair() -> tuple[tuple[Scheduler, Partition, Clock, MemoryJournal], tuple[Partition, Clock]]:
    journal = MemoryJournal()
    clock = Clock()
    fast_sched = Scheduler.from_yaml(CONFIG, store=journal, clock=clock, partition_options=OPTIONS,
                                     snapshot_every=0)
    twin_clock = Clock()
    twin = Scheduler.from_yaml(CONFIG, clock=twin_clock, partition_options=OPTIONS).partition("default")
    state = twin.state
    state.due = ScanTimes(state.apps, state.options)  # type: ignore[assignment]
    fast = fast_sched.partition("default")
    for p in (fast, twin):
        p.add_node("n0", Resource({"vcore": 12000, "memory": 100}))
    return (fast_sched, fast, clock, journal), (twin, twin_clock)


def _do(p: Partition, op: tuple[Any, ...]) -> Any:
    kind = op[0]
    try:
        if kind == "add":
            _, app, style, timeout = op
            return p.add_application(app, BOB, queue="root.b", gang_style=style, placeholder_timeout=timeout)
        if kind == "alloc":
            _, app, key, placeholder, vcore = op
            return p.allocate(app, key, Resource({"vcore": vcore}), placeholder=placeholder,
                              task_group="tg" if placeholder else None).allocated
        if kind == "replace":
            _, ph, key = op
            return p.replace_placeholder(ph, key, Resource({"vcore": 1000})).allocated
        if kind == "release":
            return p.release(op[1])
        if kind == "remove":
            return p.remove_application(op[1])
        if kind == "ask":
            _, app, key = op
            return repr(p.add_ask(app, key, Resource({"vcore": 20000})))
        if kind == "unask":
            return p.remove_ask(op[1])
    except (ConflictError, NotFoundError, RejectedError) as exc:
        return type(exc).__name__
    raise AssertionError(op)


ADD = st.tuples(st.just("add"), st.sampled_from(APPS), st.sampled_from(["soft", "hard"]),
                st.sampled_from([0.0, 3.0, 10.0, 60.0]))
ops = st.lists(st.one_of(
    ADD,
    st.tuples(st.just("alloc"), st.sampled_from(APPS), KEYS, st.booleans(), st.integers(0, 3000)),
    st.tuples(st.just("alloc"), st.sampled_from(APPS), KEYS, st.booleans(), st.integers(0, 3000)),
    st.tuples(st.just("alloc"), st.sampled_from(APPS), KEYS, st.booleans(), st.integers(0, 3000)),
    st.tuples(st.just("replace"), KEYS, KEYS),
    st.tuples(st.just("release"), KEYS),
    st.tuples(st.just("remove"), st.sampled_from(APPS)),
    st.tuples(st.just("ask"), st.sampled_from(APPS), KEYS),
    st.tuples(st.just("unask"), KEYS),
    st.tuples(st.just("tick"), st.sampled_from([0.0, 1.0, 2.5, 4.0, 5.0, 7.0, 20.0, 61.0])),
    st.tuples(st.just("tick"), st.sampled_from([3.0, 8.0])),
), max_size=50)


def _canon(p: Partition) -> str:
    return json.dumps(p.dump_state(), sort_keys=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ADD, min_size=len(APPS), max_size=len(APPS)), ops)
def test_due_times_fire_what_the_scan_fires_in_the_same_order(apps: list[tuple[Any, ...]],
                                                              history: list[tuple[Any, ...]]) -> None:
    (sched, fast, clock, journal), (twin, twin_clock) = _pair()
    for op in [("add", app, *rest) for app, (_, _, *rest) in zip(APPS, apps, strict=True)] + history:
        if op[0] == "tick":
            clock.advance(op[1])
            twin_clock.advance(op[1])
            assert fast.check_timeouts() == twin.check_timeouts(), op
            continue
        assert _do(fast, op) == _do(twin, op), op
    assert _canon(fast) == _canon(twin)
    # the heap answers for every application the scan would: nothing is due that it does not know
    t = clock() + 10 ** 6
    assert {a.application_id for a in scan_due(fast.state.apps.values(), t, fast.state.options)} == \
        {a.application_id for a in fast.state.due.take(t)}
    again = Scheduler.from_yaml(CONFIG, store=journal, clock=clock, partition_options=OPTIONS)
    assert _canon(again.partition("default")) == _canon(fast)
    # the rebuilt partition's heap knows the same applications
    state = again.partition("default").state
    assert [a.application_id for a in state.due.take(t)] == \
        [a.application_id for a in scan_due(state.apps.values(), t, state.options)]
    sched.close()


def test_a_first_placeholder_of_a_running_application_starts_its_timeout() -> None:
    """The application does not move (it is Running already): the placeholder alone brings a timeout."""
    (sched, fast, clock, _), (twin, twin_clock) = _pair()
    history: list[tuple[Any, ...]] = [("add", "app0", "soft", 3.0), ("alloc", "app0", "k1", False, 100),
                                      ("alloc", "app0", "k2", False, 100), ("tick", 8.0),
                                      ("alloc", "app0", "k3", True, 100), ("tick", 8.0)]
    for op in history:
        if op[0] == "tick":
            clock.advance(op[1])
            twin_clock.advance(op[1])
            assert fast.check_timeouts() == twin.check_timeouts()
        else:
            assert _do(fast, op) == _do(twin, op)
    assert fast.application("app0").state == "Running"
    assert fast.allocation("k3") is None            # timed out
    sched.close()


def test_due_at_is_never_after_the_predicates_say_due() -> None:
    """The heap's key is a lower bound of the time the predicates first say due (rounding included)."""
    options = PartitionOptions(completing_timeout=0.1, starting_timeout=0.3, terminated_timeout=0.7)
    app = Application("a", BOB, "root.b", submit_time=0.1, placeholder_timeout=0.2)
    for since in (0.1, 1e9 + 0.1, 1.7e9 + 1 / 3, 12345.678):
        app.placeholder_since = since
        key = due_at(app, options)
        assert key <= since + 0.2
        assert not is_due(app, math.nextafter(key, -math.inf) - 1e-9 * since, options)
        # the first time the predicate holds is not before the key
        t = since + 0.2
        while is_due(app, math.nextafter(t, -math.inf), options):
            t = math.nextafter(t, -math.inf)
        assert key <= t


def test_a_tick_with_nothing_due_looks_at_no_application(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39: ``check_timeouts`` costs what is due — with 1,000 running applications and one due, a
    tick asks about one application, not 1,000."""
    asked: list[str] = []
    options = PartitionOptions(**OPTIONS)
    apps: dict[str, Application] = {}
    due = DueTimes(apps, options)
    for i in range(1000):
        app = Application(f"a{i}", BOB, "root.b", submit_time=0.0)
        apps[app.application_id] = app
        due.enter(app)
    watched = apps["a500"]
    watched.watch = due.note
    watched.move("allocated", 1.0)            # Starting: its timeout is due 7 s later
    assert not due.any_due(7.9)

    def counting(app: Application, t: float, opts: PartitionOptions) -> bool:
        asked.append(app.application_id)
        return is_due(app, t, opts)

    monkeypatch.setattr("quotaplane.state.timeouts.is_due", counting)
    assert not due.any_due(7.5)
    assert asked == []
    assert [a.application_id for a in due.take(8.0)] == ["a500"]
    assert asked == ["a500"]
