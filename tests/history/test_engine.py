"""The accounting engine equals brute-force integration of the partition's state, for every scope and
metric, after any sequence of operations; and a replay of the journal gives exactly the same numbers."""

from __future__ import annotations

import tempfile
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane.errors import ConflictError, NotFoundError, QuotaplaneError
from quotaplane.history.engine import GROUP, QUEUE, USER, ms_of
from quotaplane.scheduler import Scheduler
from tests.history.helpers import BruteForce, engine_integrals, user
from tests.partition.helpers import Clock

CONFIG = """
partitions:
- name: default
  limits:
  - limit: dev
    groups: [dev]
    maxresources: {vcore: 1000}
  - limit: ops
    groups: [ops]
    maxresources: {vcore: 1000}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: eng
      parent: true
      resources:
        guaranteed: {vcore: GE}
        max: {vcore: 20}
      queues:
      - name: ml
        resources:
          guaranteed: {vcore: GM, memory: 40}
      - name: web
        resources:
          guaranteed: {vcore: 2}
    - name: ops
      resources:
        guaranteed: {vcore: GO}
    - name: free
"""

LEAVES = ("root.eng.ml", "root.eng.web", "root.ops", "root.free")
USERS = (user("alice", "dev"), user("bob", "ops"), user("carol"), user("dan", "ops", "dev"))


def config(variant: int) -> str:
    ge, gm, go = [(6, 4, 3), (2, 1, 8), (10, 9, 1)][variant % 3]
    return CONFIG.replace("GE", str(ge)).replace("GM", str(gm)).replace("GO", str(go))


_OP = st.one_of(
    st.tuples(st.just("app"), st.integers(0, 3), st.integers(0, 3)),
    st.tuples(st.just("ask"), st.integers(0, 7), st.integers(1, 6)),
    st.tuples(st.just("alloc"), st.integers(0, 7), st.integers(1, 6)),
    st.tuples(st.just("release"), st.integers(0, 30), st.just(0)),
    st.tuples(st.just("unask"), st.integers(0, 30), st.just(0)),
    st.tuples(st.just("rmapp"), st.integers(0, 7), st.just(0)),
    st.tuples(st.just("tick"), st.integers(0, 5000), st.integers(0, 2)),
    st.tuples(st.just("config"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("node"), st.integers(0, 3), st.integers(0, 16)),
)
OPS = st.lists(_OP, max_size=50)


def run(s: Scheduler, clock: Clock, ops: list[tuple[str, int, int]],
        brute: BruteForce | None = None, apps: list[str] | None = None, first: int = 1) -> None:
    """Apply ``ops`` to partition ``default`` of ``s`` (operations the partition refuses are skipped);
    ``apps``: the applications made so far (kept across calls), ``first``: the first op's number."""
    p = s.partition("default")
    apps = [] if apps is None else apps
    for n, (op, a, b) in enumerate(ops, first):
        try:
            if op == "app":
                app = f"app{n}"
                p.add_application(app, USERS[a], queue=LEAVES[b])
                apps.append(app)
            elif op == "ask" and apps:
                p.add_ask(apps[a % len(apps)], f"ask{n}", {"vcore": 1000 * b, "memory": 3 * b})
            elif op == "alloc" and apps:
                p.allocate(apps[a % len(apps)], f"al{n}", {"vcore": 1000 * b, "memory": 5 * b})
            elif op == "release":
                keys = sorted(x.allocation_key for x in p.allocations())
                if keys:
                    p.release(keys[a % len(keys)])
            elif op == "unask":
                keys = sorted(x.allocation_key for x in p.pending())
                if keys:
                    p.remove_ask(keys[a % len(keys)])
            elif op == "rmapp" and apps:
                p.remove_application(apps[a % len(apps)])
            elif op == "tick":
                # whole seconds, and thirds of a second (times that are no whole number of ms)
                clock.advance(a if b == 0 else a / 3 if b == 1 else a * 61.0)
            elif op == "config":
                s.update_config(config(a))
            elif op == "node":
                # the cluster grows or shrinks (the root's max follows it); nodes n1..n4
                node = f"n{a + 1}"
                if node in p.nodes() and (b == 0 or node == "n1"):
                    p.update_node(node, capacity={"vcore": 1000 * max(b, 1), "memory": 10_000})
                elif node in p.nodes() and b % 2:
                    p.remove_node(node)
                elif node not in p.nodes():
                    p.add_node(node, {"vcore": 1000 * b, "memory": 100 * b})
        except (ConflictError, NotFoundError, QuotaplaneError, ValueError):
            pass
        if brute is not None:
            brute.step()


def _journalled_counts(engine: Any) -> dict[Any, dict[str, int]]:
    """Counters that come from the journal (refusals are not journalled: docs/history.md)."""
    out = {}
    for k, v in engine.scopes.items():
        c = {n: x for n, x in v.counts.items() if not n.startswith("refused:")}
        if c:
            out[k] = c
    return out


def _journalled_rows(rows: list[Any]) -> list[Any]:
    """Rows without their refusal counters."""
    out = []
    for r in rows:
        data = dict(r.data)
        if "c" in data:
            data["c"] = {n: x for n, x in data["c"].items() if not n.startswith("refused:")}
            if not data["c"]:
                del data["c"]
        out.append((r.resolution, r.t, r.kind, r.name, data))
    return out


def _scheduler(store: Any, clock: Clock, snapshot_every: int = 0) -> Scheduler:
    s = Scheduler.from_yaml(config(0), store=store, clock=clock, snapshot_every=snapshot_every)
    p = s.partition("default")
    p.add_node("n1", {"vcore": 16_000, "memory": 10_000})
    p.auto_schedule = True
    return s


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_every_integral_equals_brute_force_integration(ops: list[tuple[str, int, int]]) -> None:
    clock = Clock(1_764_000_000.0)
    s = _scheduler(None, clock)
    p = s.partition("default")
    brute = BruteForce(p)
    run(s, clock, ops, brute)
    clock.advance(1234.567)
    end = ms_of(clock())
    want = brute.at(end)
    got = engine_integrals(p, end)
    assert got == want, repr(ops)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_a_replay_of_the_journal_gives_exactly_the_same_numbers(ops: list[tuple[str, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/s.db"
        clock = Clock(1_764_000_000.0)
        s = _scheduler(store, clock)
        run(s, clock, ops)
        live = s.partition("default").history.engine
        assert live is not None
        end = ms_of(clock()) + 999_999
        want = engine_integrals(s.partition("default"), end)
        rows = _journalled_rows(live.outbox)
        counts = _journalled_counts(live)
        s.close(snapshot=False)
        s2 = Scheduler.from_yaml(config(0), store=store, clock=clock, snapshot_every=0)
        again = s2.partition("default").history.engine
        assert again is not None
        assert engine_integrals(s2.partition("default"), end) == want
        assert _journalled_rows(again.outbox) == rows
        assert _journalled_counts(again) == counts
        s2.close(snapshot=False)


def test_a_scope_per_kind_by_hand() -> None:
    """One allocation by hand (milli-cores × milliseconds): the queue chain, the user, the group and
    the application each hold exactly resource × time; borrowed is what exceeds the guarantee."""
    clock = Clock(1_000.0)
    s = _scheduler(None, clock)
    p = s.partition("default")
    p.add_application("a1", USERS[0], queue="root.eng.ml")
    p.allocate("a1", "k1", {"vcore": 6000})       # ml guaranteed 4 cores: borrows 2
    clock.advance(10)
    p.release("k1")
    clock.advance(5)
    engine = p.history.engine
    assert engine is not None
    at = ms_of(clock())
    assert engine.integral(QUEUE, "root.eng.ml", "used", at) == {"vcore": 60_000_000}
    assert engine.integral(QUEUE, "root.eng.ml", "borrowed", at) == {"vcore": 20_000_000}
    assert engine.integral(QUEUE, "root.eng", "used", at) == {"vcore": 60_000_000}
    assert engine.integral(QUEUE, "root.eng", "borrowed", at) == {}    # eng guaranteed 6
    assert engine.integral(QUEUE, "root", "used", at) == {"vcore": 60_000_000}
    assert engine.integral(USER, "alice", "used", at) == {"vcore": 60_000_000}
    assert engine.integral(GROUP, "dev", "used", at) == {"vcore": 60_000_000}
    assert engine.integral("application", "a1", "used", at) == {"vcore": 60_000_000}
    # web's guarantee of 2 was unused while ml borrowed 2: web lent 2 for 10 s
    assert engine.integral(QUEUE, "root.eng.web", "lent", at) == {"vcore": 20_000_000}


def test_nodes_added_and_removed_mid_run_while_a_queue_borrows() -> None:
    """The cluster changes while ml borrows above its guarantee and web lends it its idle share: every
    integral equals brute-force integration, and a replay of the journal gives the same numbers."""
    ops: list[tuple[str, int, int]] = [
        ("app", 0, 0), ("app", 3, 1), ("alloc", 0, 6), ("tick", 100, 0), ("node", 1, 8), ("tick", 7, 1),
        ("alloc", 1, 1), ("node", 2, 3), ("tick", 50, 0), ("node", 0, 0), ("tick", 3, 2), ("node", 1, 1),
        ("release", 1, 0), ("tick", 20, 1), ("config", 1, 0), ("node", 2, 5), ("alloc", 0, 5),
        ("tick", 61, 0), ("node", 0, 12), ("release", 0, 0), ("node", 3, 9), ("tick", 9, 0),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/s.db"
        clock = Clock(1_764_000_000.0)
        s = _scheduler(store, clock)
        p = s.partition("default")
        brute = BruteForce(p)
        run(s, clock, ops, brute)
        assert len(p.nodes()) > 1
        end = ms_of(clock()) + 4321
        want = brute.at(end)
        assert want[(QUEUE, "root.eng.ml", "borrowed")] and want[(QUEUE, "root.eng.web", "lent")]
        assert engine_integrals(p, end) == want
        live = p.history.engine
        assert live is not None
        rows, counts = _journalled_rows(live.outbox), _journalled_counts(live)
        s.close(snapshot=False)
        s2 = Scheduler.from_yaml(config(0), store=store, clock=clock, snapshot_every=0)
        again = s2.partition("default").history.engine
        assert again is not None
        assert engine_integrals(s2.partition("default"), end) == want
        assert _journalled_rows(again.outbox) == rows
        assert _journalled_counts(again) == counts
        s2.close(snapshot=False)


def test_changes_logged_past_the_cap_within_one_minute_give_the_hand_computed_integrals() -> None:
    """An allocation's change of use is logged and applied at the next read, period end or when
    1,024 wait: 1,500 short allocations within one minute (more than the log holds) while ml borrows
    give exactly the integrals computed by hand, and the log never holds more than its cap."""
    clock = Clock(1_764_000_000.0)             # a whole minute: the pairs stay within one period
    s = _scheduler(None, clock)
    p = s.partition("default")
    engine = p.history.engine
    assert engine is not None
    p.add_application("a1", USERS[2], queue="root.eng.ml")
    start = ms_of(clock())
    p.allocate("a1", "held", {"vcore": 5000})      # ml guaranteed 4 cores: borrows 1 the whole time
    longest = 0
    for i in range(1500):
        p.allocate("a1", f"k{i}", {"vcore": 1000})
        clock.advance(0.005)
        p.release(f"k{i}")
        clock.advance(0.015)
        longest = max(longest, len(engine._log))
    assert 0 < longest <= 1024
    end = ms_of(clock())
    span, short = end - start, 1500 * 5 * 1000         # ms, and the short ones' vcore-ms
    assert ms_of(clock()) - start < 60_000
    assert engine.integral(QUEUE, "root.eng.ml", "used", end) == {"vcore": 5000 * span + short}
    assert engine.integral(QUEUE, "root.eng.ml", "borrowed", end) == {"vcore": 1000 * span + short}
    # web's 2 idle cores lent to ml: 1 the whole time, 2 while a short one ran
    assert engine.integral(QUEUE, "root.eng.web", "lent", end) == {"vcore": 1000 * span + short}
    assert engine.integral("application", "a1", "used", end) == {"vcore": 5000 * span + short}
    assert not engine._log


_SNAP_OPS = st.lists(st.one_of(_OP, st.tuples(st.just("snapshot"), st.just(0), st.just(0))), max_size=50)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_SNAP_OPS, st.sampled_from([0, 2, 5]))
def test_snapshots_compaction_and_a_restart_give_exactly_the_same_numbers(
        ops: list[tuple[str, int, int]], every: int) -> None:
    """Snapshots at random points of a compacting store (asked for, and every ``every`` events while
    a change is journalled), then a restart from the last one plus the journal's tail: every integral,
    counter and row is the one the live engine had."""
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/s.db?compact=true"
        clock = Clock(1_764_000_000.0)
        s = _scheduler(store, clock, every)
        p = s.partition("default")
        apps: list[str] = []
        for i, op in enumerate(ops):
            if op[0] == "snapshot":
                p.take_snapshot()
            else:
                run(s, clock, [op], apps=apps, first=i)
            if i % 7 == 3:
                clock.advance(3600)
        live = p.history.engine
        assert live is not None
        end = ms_of(clock()) + 1
        want = engine_integrals(p, end)
        rows = _journalled_rows(live.outbox)
        counts = _journalled_counts(live)
        s.close(snapshot=False)         # as a kill -9 after the last commit leaves the store
        s2 = Scheduler.from_yaml(config(0), store=store, clock=clock, snapshot_every=0)
        p2 = s2.partition("default")
        if any(op[0] == "snapshot" for op in ops):
            assert s2.restored_from["default"] == "snapshot"
        again = p2.history.engine
        assert again is not None, p2.history.error
        assert engine_integrals(p2, end) == want
        assert _journalled_rows(again.outbox) == rows
        assert _journalled_counts(again) == counts
        s2.close(snapshot=False)


def test_waiting_asks_share_one_request_and_a_resource_at_zero_counts_nowhere() -> None:
    """Asks of the same request hold one shared vector in the engine (memory per pending ask, issue
    38), not a copy each; a resource named at 0 makes no waiting cell, on arrival or on leaving."""
    clock = Clock(1_764_000_000.0)
    s = _scheduler(None, clock)
    p = s.partition("default")
    p.auto_schedule = False
    p.add_application("a", USERS[0], queue="root.free")
    p.add_ask("a", "k1", {"vcore": 1000, "gpu": 0})
    p.add_ask("a", "k2", {"vcore": 1000, "gpu": 0})
    engine = p.history.engine
    assert engine is not None
    assert engine.asks["k1"].resource is engine.asks["k2"].resource
    clock.advance(10)
    p.remove_ask("k1")
    p.remove_ask("k2")
    engine.propagate()
    own = engine.scopes[("application", "a")]
    assert set(own.w) == {"vcore"}
    assert own.integral("waiting", ms_of(clock()) - engine.origin) == {"vcore": 2 * 1000 * 10_000}
    s.close(snapshot=False)
