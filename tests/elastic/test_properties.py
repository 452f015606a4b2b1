"""Hypothesis properties (issue 5): incremental = full recompute (E2), Σ children runtime ≤ parent runtime
with scaling on, min(request, scaled min) ≤ runtime ≤ max, refused operations change nothing, replay is
deterministic."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane.elastic import (
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    ElasticQuotaManager,
    QuotaSpec,
    QuotaValidationError,
    scale_mins,
)
from quotaplane.resources import Resource

from .conftest import assert_consistent

V, G = "vcore", "gpu"
DIMS = (V, G)
# name -> (parent, is_parent)
TREE: dict[str, tuple[str | None, bool]] = {
    "p1": (None, True), "p2": (None, True), "l0": (None, False),
    "l1": ("p1", False), "l2": ("p1", False), "p3": ("p1", True),
    "l3": ("p3", False), "l4": ("p3", False), "l5": ("p2", False),
}
ORDER = ["p1", "p2", "l0", "l1", "l2", "p3", "l3", "l4", "l5"]        # parents before children
LEAVES = [n for n in ORDER if not TREE[n][1]]
POD_LEAVES = [n for n in LEAVES if n != "l0"]                          # l0 uses the aggregate form

amount = st.integers(0, 120)


@st.composite
def quota_params(draw: Any) -> dict[str, Any]:
    mx = {V: draw(st.integers(0, 100)), G: draw(st.integers(0, 12))}
    mn = {k: draw(st.integers(0, v)) for k, v in mx.items()}
    weight = draw(st.none() | st.fixed_dictionaries({V: st.integers(0, 100), G: st.integers(0, 10)}))
    return {"min": mn, "max": mx, "shared_weight": weight, "allow_lent": draw(st.booleans())}


op = st.one_of(
    st.tuples(st.just("request"), st.sampled_from(LEAVES), amount, st.integers(0, 15), st.booleans()),
    st.tuples(st.just("remove"), st.integers(0, 50)),
    st.tuples(st.just("assign"), st.integers(0, 50)),
    st.tuples(st.just("total"), st.integers(20, 300), st.integers(0, 30)),
    st.tuples(st.just("respec"), st.sampled_from(ORDER), quota_params()),
    st.tuples(st.just("read"), st.sampled_from(ORDER)),
    st.tuples(st.just("system"), st.integers(0, 20)),
    st.tuples(st.just("move"), st.sampled_from(["l2", "l3", "p3"]), st.sampled_from(["p1", "p2", "p3"])),
)


def build(params: dict[str, dict[str, Any]], scale_min: bool = True,
          check_parent: bool = False) -> ElasticQuotaManager:
    e = ElasticQuotaManager({V: 100, G: 8}, scale_min=scale_min, check_parent=check_parent)
    for name in ORDER:
        parent, is_parent = TREE[name]
        e.upsert(name, parent=parent, is_parent=is_parent, force_update=True, **params[name])
    return e


def run(e: ElasticQuotaManager, ops: list[tuple[Any, ...]], check_each: bool) -> None:
    pod_seq = 0
    for o in ops:
        kind = o[0]
        if kind == "request":
            _, leaf, v, g, assigned = o
            if leaf == "l0":
                e.set_request(leaf, {V: v, G: g})
                e.set_used(leaf, {V: v // 2, G: g // 2})
            else:
                pod_seq += 1
                e.add_pod(leaf, f"pod-{pod_seq}", {V: v, G: g}, assigned=assigned, priority=v % 3,
                          start_time=float(pod_seq))
        elif kind in ("remove", "assign"):
            pods = sorted(e.dump_state()["pods"])
            if pods:
                pid = pods[o[1] % len(pods)]
                e.remove_pod(pid) if kind == "remove" else e.assign_pod(pid)
        elif kind == "total":
            e.set_total({V: o[1], G: o[2]})
        elif kind == "respec":
            parent, is_parent = TREE[o[1]]
            e.upsert(o[1], parent=parent, is_parent=is_parent, force_update=True, **o[2])
        elif kind == "read":
            e.runtime(o[1])
        elif kind == "system":
            e.set_used(SYSTEM_QUOTA, {V: o[1]})
        elif kind == "move" and o[1] != o[2]:
            # re-parenting (proposal rule 6); p3 may not move below itself
            e.apply_specs([replace(e.spec(o[1]), parent=o[2])])
        if check_each:
            assert_consistent(e)


def check_bounds(e: ElasticQuotaManager) -> None:
    """Σ children ≤ parent (scaling on, root total ≥ 0) and min(limited request, scaled min) ≤ rt ≤ max."""
    for parent in [ROOT_QUOTA, "p1", "p2", "p3"]:
        kids = e.children(parent)
        total = e.runtime(parent)
        for k in DIMS:
            t = total.get(k, 0)
            assert t >= 0
            assert sum(e.runtime(c).get(k, 0) for c in kids) <= t, (parent, k)
            scaled = scale_mins(t, [e.spec(c).min.get(k, 0) for c in kids])
            for c, smin in zip(kids, scaled, strict=True):
                mx = e.spec(c).max.get(k, 0)
                limited = min(e.request(c).get(k, 0), mx)
                rt = e.runtime(c).get(k, 0)
                assert min(limited, smin) <= rt <= mx, (c, k)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.fixed_dictionaries({n: quota_params() for n in ORDER}), st.lists(op, max_size=25))
def test_incremental_equals_full_recompute_and_bounds_hold(params: dict[str, Any],
                                                           ops: list[tuple[Any, ...]]) -> None:
    e = build(params)
    run(e, ops, check_each=True)
    check_bounds(e)


@SETTINGS
@given(st.fixed_dictionaries({n: quota_params() for n in ORDER}), st.lists(op, max_size=20))
def test_incremental_equals_full_recompute_without_scaling(params: dict[str, Any],
                                                           ops: list[tuple[Any, ...]]) -> None:
    e = build(params, scale_min=False)
    run(e, ops, check_each=False)
    assert_consistent(e)


@SETTINGS
@given(st.fixed_dictionaries({n: quota_params() for n in ORDER}), st.lists(op, max_size=15),
       st.sampled_from([*ORDER, "new"]), quota_params(), st.sampled_from([None, "p1", "p3", "l1", "ghost"]),
       st.booleans())
def test_refused_upsert_changes_nothing_and_replay_is_identical(
        params: dict[str, Any], ops: list[tuple[Any, ...]], name: str, new: dict[str, Any],
        parent: str | None, is_parent: bool) -> None:
    e = build(params)
    run(e, ops, check_each=False)
    twin = build(params)
    run(twin, ops, check_each=False)
    assert e.dump_state() == twin.dump_state()                   # deterministic replay
    before = e.dump_state()
    try:
        e.upsert(name, parent=parent, is_parent=is_parent, **new)
    except QuotaValidationError:
        assert e.dump_state() == before
    else:
        assert_consistent(e)


@SETTINGS
@given(st.fixed_dictionaries({n: quota_params() for n in ORDER}), st.lists(op, max_size=15),
       st.sampled_from(POD_LEAVES), amount, st.integers(0, 15), st.booleans(), st.booleans())
def test_what_if_check_equals_adding_the_pending_pod(
        params: dict[str, Any], ops: list[tuple[Any, ...]], leaf: str, v: int, g: int, preemptible: bool,
        scale_min: bool) -> None:
    """§2.9: check(include_request=True) answers exactly what check gives once the pod is pending,
    for the quota and (check_parent) every ancestor — and changes nothing."""
    e = build(params, scale_min=scale_min, check_parent=True)
    run(e, ops, check_each=False)
    before = e.dump_state()
    what_if = e.violations(leaf, {V: v, G: g}, preemptible=preemptible, include_request=True)
    assert e.dump_state() == before
    e.add_pod(leaf, "probe", {V: v, G: g})
    real = e.violations(leaf, {V: v, G: g}, preemptible=preemptible)
    assert what_if == real


@SETTINGS
@given(st.lists(st.tuples(st.sets(st.sampled_from(ORDER), max_size=len(ORDER)),
                          st.fixed_dictionaries({n: quota_params() for n in ORDER})), min_size=1, max_size=4),
       st.lists(st.tuples(st.sampled_from(POD_LEAVES), amount), max_size=4))
def test_sync_makes_exactly_the_configured_set_or_changes_nothing(
        configs: list[tuple[set[str], dict[str, Any]]], pods: list[tuple[str, int]]) -> None:
    """sync_specs (config reload): afterwards the quota set is exactly the configured one; a refused
    reload changes nothing; runtimes stay equal to a full recompute."""
    e = ElasticQuotaManager({V: 100, G: 8})
    for i, (names, params) in enumerate(configs):
        specs = [QuotaSpec(n, Resource(params[n]["min"]), Resource(params[n]["max"]),
                           parent=TREE[n][0] or ROOT_QUOTA, is_parent=TREE[n][1],
                           allow_lent=params[n]["allow_lent"], force_update=True)
                 for n in ORDER if n in names]
        before = e.dump_state()
        try:
            e.sync_specs(specs)
        except QuotaValidationError:
            assert e.dump_state() == before
        else:
            mine = {n for n in e.quota_names() if not n.startswith("koordinator-")}
            assert mine == names
        assert_consistent(e)
        if i == 0:
            for j, (leaf, v) in enumerate(pods):
                if leaf in e.quota_names():
                    e.add_pod(leaf, f"p{j}", {V: v}, assigned=True)
