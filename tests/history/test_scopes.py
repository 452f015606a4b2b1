"""Scopes beyond queues, users and groups: elastic quotas (min, borrowed, lent as standing shows them)
and quota-tree nodes; wait-time quantiles; preemptions by reason code."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import quotaplane.events as E
from quotaplane.errors import QuotaplaneError
from quotaplane.history.engine import QUEUE, QUOTA, TREE, Accounting, ScopeInfo, TreeTarget, ms_of
from quotaplane.history.sketch import WaitSketch
from quotaplane.resources import Resource
from quotaplane.scheduler import Scheduler
from tests.history.helpers import BruteForce, engine_integrals, user
from tests.partition.helpers import Clock


def _quota(name: str, mn: int | None, mx: int, parent: str | None = None, is_parent: bool = False) -> str:
    labels = {}
    if parent:
        labels["quota.scheduling.koordinator.sh/parent"] = parent
    if is_parent:
        labels["quota.scheduling.koordinator.sh/is-parent"] = "true"
    spec: dict[str, Any] = {"max": {"cpu": mx}}
    if mn is not None:
        spec["min"] = {"cpu": mn}
    doc = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
           "metadata": {"name": name, "namespace": name, "labels": labels}, "spec": spec}
    return json.dumps(doc)


ELASTIC = "\n---\n".join([_quota("dept", 6, 16, is_parent=True), _quota("ta", 4, 16, "dept"),
                          _quota("tb", 2, 16, "dept"), _quota("tc", None, 16, "dept")])

CONFIG = f"""
partitions:
- name: default
  elasticquotas:
    quotas: |
{chr(10).join('      ' + line for line in ELASTIC.splitlines())}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
"""

_OPS = st.lists(st.one_of(
    st.tuples(st.just("alloc"), st.integers(0, 2), st.integers(1, 5)),
    st.tuples(st.just("release"), st.integers(0, 20), st.just(0)),
    st.tuples(st.just("tick"), st.integers(1, 900), st.just(0)),
    # the cluster shrinks below the quotas' mins and grows again: min scaling (E3) moves them
    st.tuples(st.just("node"), st.integers(0, 2), st.integers(1, 12)),
), max_size=40)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_OPS)
def test_elastic_quota_integrals_equal_brute_force(ops: list[tuple[str, int, int]]) -> None:
    clock = Clock(1_764_000_000.0)
    s = Scheduler.from_yaml(CONFIG, clock=clock, snapshot_every=0)
    p = s.partition("default")
    p.add_node("n", {"vcore": 100_000, "memory": 10**12})
    for ns in ("ta", "tb", "tc"):
        p.add_application(ns, user("u-" + ns), queue="root.a", tags={"namespace": ns})
    brute = BruteForce(p)
    for n, (op, a, b) in enumerate(ops):
        try:
            if op == "alloc":
                p.allocate(("ta", "tb", "tc")[a], f"k{n}", {"vcore": 1000 * b})
            elif op == "release":
                keys = sorted(x.allocation_key for x in p.allocations())
                if keys:
                    p.release(keys[a % len(keys)])
            elif op == "node":
                node = ("n", "m1", "m2")[a]
                if node in p.nodes():
                    p.update_node(node, capacity={"vcore": 1000 * b, "memory": 10**12})
                else:
                    p.add_node(node, {"vcore": 1000 * b, "memory": 10**9})
            else:
                clock.advance(a)
        except (QuotaplaneError, ValueError):
            pass
        brute.step()
    clock.advance(77.7)
    end = ms_of(clock())
    want = {k: v for k, v in brute.at(end).items() if k[0] == QUOTA}
    got = {k: v for k, v in engine_integrals(p, end).items() if k[0] == QUOTA and k[2] != "waiting"}
    assert got == want


class FakeView:
    """A view with two sibling queues under root (a guaranteed 4, b guaranteed 2) and a tree."""

    def __init__(self) -> None:
        self.table: dict[str, dict[str, ScopeInfo]] = {
            QUEUE: {"root": (None, None, None), "root.a": ({"cpu": 4}, "root", {"cpu": 10}),
                    "root.b": ({"cpu": 2}, "root", None)},
            QUOTA: {},
            TREE: {"T/A": ({"cpu": 6}, None, None), "T/B": ({"cpu": 2}, "T/A", None),
                   "T/C": ({"cpu": 3}, "T/A", None)}}

    def guarantees(self) -> dict[str, dict[str, ScopeInfo]]:
        return {k: dict(v) for k, v in self.table.items()}

    def cluster_bound(self) -> dict[str, dict[str, ScopeInfo]]:
        return self.guarantees()        # here every guarantee and max may follow the cluster

    def timezone(self) -> str:
        return "UTC"

    def half_life(self) -> int:
        return self.half

    half = 0

    def queue_info(self, path: str) -> ScopeInfo:
        return self.table[QUEUE].get(path, (None, path.rpartition(".")[0] or None, None))

    def group_of(self, app: str, user: str, groups: tuple[str, ...], queue: str) -> str | None:
        return groups[0] if groups else None

    def quota_of(self, key: str, tags: Any) -> str | None:
        return None

    def tree_targets(self, key: str, app: str, queue: str, user: str, groups: tuple[str, ...], tags: Any,
                     resource: Any) -> list[TreeTarget]:
        node = tags.get("tree")
        return [("T", node, {"cpu": resource.get("cpu", 0)})] if node else []


def _engine() -> Accounting:
    a = Accounting(FakeView())
    a.observe([E.ConfigApplied(seq=1)])
    return a


def _r(cpu: int) -> Resource:
    return Resource({"cpu": cpu})


def test_quota_tree_nodes_count_the_group_node_and_its_ancestors_with_borrowed_and_lent() -> None:
    a = _engine()
    a.observe([E.AppAdded(app="x", user="u", groups=(), queue="root.a", tags={"tree": "B"}, t=100.0),
               E.Allocated(app="x", key="k", resource=_r(5), t=100.0),
               E.Released(key="k", t=110.0)])
    at = ms_of(120.0)
    assert a.integral(TREE, "T/B", "used", at) == {"cpu": 50_000}
    assert a.integral(TREE, "T/A", "used", at) == {"cpu": 50_000}
    assert a.integral(TREE, "T/B", "borrowed", at) == {"cpu": 30_000}     # 5 over a quota of 2
    assert a.integral(TREE, "T/A", "borrowed", at) == {}                   # the root has 6
    assert a.integral(TREE, "T/C", "lent", at) == {"cpu": 30_000}          # C's 3 idle while B borrowed 3
    assert a.integral(TREE, "T/C", "used", at) == {}


class _FullRecompute(Accounting):
    """The engine as it was: a node event reads every guarantee again and, when any changed,
    recomputes every scope and re-charges every live allocation and ask."""

    def _refresh_cluster_bound(self) -> bool:
        return self._refresh_guarantees()


_GUAR_OPS = st.lists(st.one_of(
    st.tuples(st.just("alloc"), st.integers(0, 3), st.integers(1, 6)),
    st.tuples(st.just("release"), st.integers(0, 20), st.just(0)),
    st.tuples(st.just("tick"), st.integers(1, 900), st.just(0)),
    # the cluster changed, and with it a guarantee (or a max): which scope, its new value (0: none)
    st.tuples(st.just("node"), st.integers(0, 5), st.integers(0, 7)),
), max_size=40)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_GUAR_OPS)
def test_a_node_event_recomputes_only_what_changed_and_exactly_what_a_full_recompute_gives(
        ops: list[tuple[str, int, int]]) -> None:
    """Guarantees and maxima that change with the cluster (elastic min scaling, the root's max) are
    taken in at a node event by recomputing the changed scopes and their siblings only: every cell
    of every scope equals that of an engine recomputing everything at each node event."""
    views = FakeView(), FakeView()
    fast, full = Accounting(views[0]), _FullRecompute(views[1])

    def observe(evs: list[E.Event]) -> None:
        fast.observe(evs)
        full.observe(evs)

    observe([E.ConfigApplied(seq=1)])
    t = 1000.0
    apps = [("x", "root.a", "B"), ("y", "root.b", "C"), ("z", "root.a", None), ("w", "root.b", "B")]
    observe([E.AppAdded(app=x, user="u" + x, groups=("g",), queue=q, tags={"tree": n} if n else {}, t=t)
             for x, q, n in apps])
    keys: list[str] = []
    scopes = [(QUEUE, "root.a"), (QUEUE, "root.b"), (TREE, "T/A"), (TREE, "T/B"), (TREE, "T/C"),
              (QUEUE, "root")]
    for n, (op, a, b) in enumerate(ops):
        if op == "alloc":
            keys.append(f"k{n}")
            observe([E.Allocated(app=apps[a][0], key=f"k{n}", resource=_r(b), t=t)])
        elif op == "release" and keys:
            observe([E.Released(key=keys.pop(a % len(keys)), t=t)])
        elif op == "tick":
            t += a / 3
        elif op == "node":
            kind, name = scopes[a]
            for v in views:
                guar, parent, mx = v.table[kind][name]
                if name == "root":
                    mx = {"cpu": 10 * b}
                elif b and guar:
                    guar = {"cpu": b}
                elif b:
                    mx = {"cpu": b}             # one without a guarantee (b: 0) gains only a max
                else:
                    guar = None if kind == QUEUE else {}
                v.table[kind][name] = (guar, parent, mx)
            observe([E.NodeAdded(node=f"n{n}", capacity=_r(b), t=t)])
    observe([E.Timeouts(t=t + 1)])
    at = ms_of(t + 100)
    fast.propagate()
    full.propagate()
    for key, s in full.scopes.items():
        mine = fast.scopes[key]
        assert (mine.guar, mine.max) == (s.guar, s.max), key
        for metric in ("used", "waiting", "borrowed", "lent"):
            here = mine.integral(metric, at - fast.origin)
            assert here == s.integral(metric, at - full.origin), (key, metric)
            assert mine.level(metric) == s.level(metric), (key, metric)
    assert [(r.t, r.kind, r.name, r.data) for r in fast.outbox] == [(r.t, r.kind, r.name, r.data)
                                                                    for r in full.outbox]


def test_wait_quantiles_are_within_the_sketch_bound_and_max_is_exact() -> None:
    a = _engine()
    evs: list[E.Event] = [E.AppAdded(app="x", user="u", groups=("g",), queue="root.b", t=0.0)]
    waits = [1.0, 2.5, 3.0, 7.0, 11.0, 20.0, 45.5, 60.0, 90.0, 3600.0]
    evs += [E.AskAdded(key=f"k{i}", app="x", resource=_r(1), t=1000.0) for i in range(len(waits))]
    evs += [E.Allocated(app="x", key=f"k{i}", resource=_r(1), t=1000.0 + w) for i, w in enumerate(waits)]
    evs.append(E.Timeouts(t=100_000.0))         # closes every period the waits fell in
    a.observe(evs)
    for kind, name in ((QUEUE, "root.b"), (QUEUE, "root"), ("user", "u"), ("group", "g"),
                       ("application", "x")):
        sketch = WaitSketch()
        for row in a.outbox:
            res = 1 if kind == "application" else 0          # applications: hour rows
            if row.resolution == res and (row.kind, row.name) == (kind, name) and "s" in row.data:
                sketch.merge(WaitSketch.from_json(row.data["s"]))
        exact = sorted(round(w * 1000) for w in waits)
        assert sketch.count == len(waits) and sketch.max == exact[-1]
        for q, rank in ((0.5, 5), (0.9, 9)):
            got = sketch.quantile(q)
            assert got is not None and abs(got - exact[rank - 1]) <= exact[rank - 1] / 128


def test_preemptions_are_counted_by_reason_code_on_every_scope_of_the_allocation() -> None:
    a = _engine()
    a.observe([E.AppAdded(app="x", user="u", groups=("g",), queue="root.a", t=1.0),
               E.Allocated(app="x", key="k1", resource=_r(1), t=1.0),
               E.Allocated(app="x", key="k2", resource=_r(1), t=1.0),
               E.Preempted(keys=("k1",), apps=("x",), reason={"policy": "queue", "code": "queue.guaranteed",
                                                              "path": "root.a", "message": ""}, t=2.0),
               E.Noted(notice={"type": "preempted", "allocations": [{"allocationKey": "k2",
                                                                     "applicationID": "x"}],
                               "reason": {"policy": "forest", "code": "forest.preempted", "path": "",
                                          "message": ""}, "preemptor": "z"}),
               E.Timeouts(t=200.0)])
    for kind, name in ((QUEUE, "root.a"), (QUEUE, "root"), ("user", "u"), ("group", "g"),
                       ("application", "x")):
        s = a.scope(kind, name)
        assert s is not None
        assert s.counts == {"preempted:queue.guaranteed": 1, "preempted:forest.preempted": 1}, (kind, name)
        assert s.level("used") == {}


def test_time_never_runs_backwards_an_older_event_counts_at_the_newest_time() -> None:
    a = _engine()
    a.observe([E.AppAdded(app="x", user="u", groups=(), queue="root.b", t=10.0),
               E.Allocated(app="x", key="k", resource=_r(1), t=10.0),
               E.Released(key="k", t=5.0)])           # a clock that stepped back
    assert a.integral(QUEUE, "root.b", "used", ms_of(20.0)) == {}


def test_a_refused_allocation_counts_once_per_reason_code_in_the_application_scopes() -> None:
    from tests.history.test_engine import USERS, _scheduler

    clock = Clock(1_000.0)
    s = _scheduler(None, clock)
    p = s.partition("default")
    p.add_application("a", USERS[0], queue="root.eng.ml")
    decision = p.allocate("a", "k", {"vcore": 25_000})           # eng's max is 20 cores
    assert not decision.allocated
    codes = {v.code for v in decision.reasons}
    engine = p.history.engine
    assert engine is not None
    for kind, name in ((QUEUE, "root.eng.ml"), (QUEUE, "root"), ("user", "alice"), ("application", "a")):
        scope = engine.scope(kind, name)
        assert scope is not None
        assert {c: n for c, n in scope.counts.items() if c.startswith("refused:")} == \
            {f"refused:{c}": 1 for c in codes}
