"""Runtime quota through the manager: reference §2.3-§2.8, decisions E1-E4, E7."""

from __future__ import annotations

import pytest

from quotaplane.elastic import DEFAULT_QUOTA, ROOT_QUOTA, SYSTEM_QUOTA, ElasticQuotaManager

from .conftest import assert_consistent

V = "vcore"


def seed_example(scale_min: bool = True) -> ElasticQuotaManager:
    e = ElasticQuotaManager({V: 100}, scale_min=scale_min)
    for name, mn, req, w in [("a", 10, 5, 100), ("b", 15, 20, 60), ("c", 20, 50, 50), ("d", 15, 60, 80)]:
        e.upsert(name, min={V: mn}, max={V: 100}, shared_weight={V: w})
        e.set_request(name, {V: req})
    return e


def test_seed_worked_example_final_runtime_per_group() -> None:
    """Seed 002: total 100, weights 60/50/80 → final runtime A 5, B 20, C 35, D 40."""
    e = seed_example()
    assert [e.runtime(n)[V] for n in "abcd"] == [5, 20, 35, 40]
    assert_consistent(e)


def test_e1_name_tie_break_not_creation_order() -> None:
    """E1: leftover units go to the largest remainders, ties by quota name ascending (not insertion)."""
    e = ElasticQuotaManager({V: 2})
    for name in ("zeta", "alpha", "mid"):
        e.upsert(name, min={V: 0}, max={V: 10})
        e.set_request(name, {V: 10})
    assert {n: e.runtime(n)[V] for n in ("alpha", "mid", "zeta")} == {"alpha": 1, "mid": 1, "zeta": 0}


def test_e1_gpus_are_not_stranded() -> None:
    """E1 (PR #2876 case): 3 GPUs over 10 equal hungry quotas are all handed out (half-up gave 0 each)."""
    e = ElasticQuotaManager({"nvidia.com/gpu": 3})
    for i in range(10):
        e.upsert(f"q{i}", min={"nvidia.com/gpu": 0}, max={"nvidia.com/gpu": 8})
        e.set_request(f"q{i}", {"nvidia.com/gpu": 4})
    got = [e.runtime(f"q{i}")["nvidia.com/gpu"] for i in range(10)]
    assert got == [1, 1, 1, 0, 0, 0, 0, 0, 0, 0]


def three_level() -> ElasticQuotaManager:
    e = ElasticQuotaManager({V: 100})
    e.upsert("p1", min={V: 40}, max={V: 100}, is_parent=True)
    e.upsert("p2", min={V: 20}, max={V: 100})
    e.upsert("q1", min={V: 30}, max={V: 100}, is_parent=True, parent="p1")
    e.upsert("l3", min={V: 10}, max={V: 100}, parent="p1")
    e.upsert("l1", min={V: 10}, max={V: 100}, parent="q1")
    e.upsert("l2", min={V: 20}, max={V: 100}, parent="q1")
    for name, req in (("l1", 50), ("l2", 5), ("l3", 30), ("p2", 60)):
        e.set_request(name, {V: req})
    return e


def test_three_level_hierarchy_top_down() -> None:
    """§2.3/§2.4: requests bottom-up (q1 55, p1 85), runtime top-down over three levels."""
    e = three_level()
    assert e.request("q1")[V] == 55 and e.request("p1")[V] == 85
    got = {n: e.runtime(n)[V] for n in ("p1", "p2", "q1", "l3", "l1", "l2")}
    assert got == {"p1": 60, "p2": 40, "q1": 40, "l3": 20, "l1": 35, "l2": 5}
    assert_consistent(e)


def test_three_level_leaf_change_is_incremental_and_exact() -> None:
    """E2: after one leaf changes, the lazily refreshed path equals a full recompute."""
    e = three_level()
    e.runtime("l1")
    e.set_request("l2", {V: 25})
    assert e.request("p1")[V] == 105 and e.runtime("p1")[V] == 60
    assert (e.runtime("l1")[V], e.runtime("l2")[V]) == (15, 25)
    assert_consistent(e)


def test_parent_request_is_sum_of_children_limited_by_their_max() -> None:
    """§2.3: a parent's request sums min(child request, child max)."""
    e = ElasticQuotaManager({V: 1000})
    e.upsert("p", min={V: 0}, max={V: 1000}, is_parent=True)
    e.upsert("c1", min={V: 0}, max={V: 10}, parent="p")
    e.upsert("c2", min={V: 0}, max={V: 10}, parent="p")
    e.set_request("c1", {V: 50})
    e.set_request("c2", {V: 4})
    assert e.request("c1")[V] == 50          # the leaf keeps its full request
    assert e.request("p")[V] == 14
    assert e.runtime("c1")[V] == 10          # runtime ≤ max


def test_child_max_above_parent_max_is_capped_by_parent_runtime() -> None:
    """Proposal rule 2 / §2.4: a child's larger max is capped by the parent's runtime."""
    e = ElasticQuotaManager({V: 1000})
    e.upsert("p", min={V: 0}, max={V: 50}, is_parent=True)
    e.upsert("c", min={V: 0}, max={V: 500}, parent="p")
    e.set_request("c", {V: 400})
    assert e.runtime("p")[V] == 50 and e.runtime("c")[V] == 50


def test_allow_lent_false_keeps_min_and_reports_it_as_request() -> None:
    """§2.6 / E7: allow-lent false → runtime = min even when idle; request reported ≥ min."""
    e = ElasticQuotaManager({V: 100})
    e.upsert("keeper", min={V: 30}, max={V: 100}, allow_lent=False)
    e.upsert("hungry", min={V: 0}, max={V: 100})
    e.set_request("hungry", {V: 100})
    assert e.request("keeper")[V] == 30
    assert (e.runtime("keeper")[V], e.runtime("hungry")[V]) == (30, 70)
    e.upsert("keeper", min={V: 30}, max={V: 100}, allow_lent=True)
    assert (e.runtime("keeper")[V], e.runtime("hungry")[V]) == (0, 100)
    assert_consistent(e)


def test_dimensions_are_independent() -> None:
    """§2.1: a quota can borrow memory while lending cpu."""
    e = ElasticQuotaManager({V: 100, "memory": 100})
    e.upsert("a", min={V: 50, "memory": 50}, max={V: 100, "memory": 100})
    e.upsert("b", min={V: 50, "memory": 50}, max={V: 100, "memory": 100})
    e.set_request("a", {V: 10, "memory": 90})
    e.set_request("b", {V: 90, "memory": 10})
    assert e.runtime("a") == {V: 10, "memory": 90}
    assert e.runtime("b") == {V: 90, "memory": 10}


def test_min_scaling_when_cluster_shrinks() -> None:
    """§2.5 / E3: Σ min 80 > total 50 → mins scale to 25/25; off → runtime keeps min 40/40."""
    on = ElasticQuotaManager({V: 50})
    off = ElasticQuotaManager({V: 50}, scale_min=False)
    for e in (on, off):
        for name in ("a", "b"):
            e.upsert(name, min={V: 40}, max={V: 100})
            e.set_request(name, {V: 100})
    assert (on.runtime("a")[V], on.runtime("b")[V]) == (25, 25)
    assert (off.runtime("a")[V], off.runtime("b")[V]) == (40, 40)
    on.set_total({V: 200})                  # the cluster grows back: the original mins apply again
    assert (on.runtime("a")[V], on.runtime("b")[V]) == (100, 100)
    assert_consistent(on)
    assert_consistent(off)


def test_min_scaling_floors_then_shares_leftover() -> None:
    """§2.5: total 8, mins 3/3/3 → 2/2/2 (floor), the 2 left go by Hamilton to a and b."""
    e = ElasticQuotaManager({V: 8})
    for name in ("a", "b", "c"):
        e.upsert(name, min={V: 3}, max={V: 10})
        e.set_request(name, {V: 10})
    assert [e.runtime(n)[V] for n in "abc"] == [3, 3, 2]


def test_min_scaling_at_a_nested_level_uses_parent_runtime() -> None:
    """§2.5: a child's min is scaled against its parent's runtime, not the parent's min."""
    e = ElasticQuotaManager({V: 60})
    e.upsert("p", min={V: 40}, max={V: 100}, is_parent=True)
    e.upsert("x", min={V: 60}, max={V: 100})
    e.upsert("c1", min={V: 20}, max={V: 100}, parent="p")
    e.upsert("c2", min={V: 20}, max={V: 100}, parent="p")
    for name in ("x", "c1", "c2"):
        e.set_request(name, {V: 100})
    assert (e.runtime("p")[V], e.runtime("x")[V]) == (24, 36)
    assert (e.runtime("c1")[V], e.runtime("c2")[V]) == (12, 12)
    assert_consistent(e)


def test_e4_system_and_default_used_is_subtracted_from_root_total() -> None:
    """E4: root total = cluster − used(system) − used(default); their pending requests do not count."""
    e = ElasticQuotaManager({V: 100})
    e.upsert("a", min={V: 0}, max={V: 100})
    e.set_request("a", {V: 100})
    assert e.runtime("a")[V] == 100
    e.add_pod(SYSTEM_QUOTA, "sys-1", {V: 30}, assigned=True)
    assert e.runtime(ROOT_QUOTA)[V] == 70 and e.runtime("a")[V] == 70
    e.add_pod(DEFAULT_QUOTA, "def-pending", {V: 50})           # pending: fix of upstream #2263
    assert e.runtime("a")[V] == 70
    e.add_pod(DEFAULT_QUOTA, "def-1", {V: 10}, assigned=True)
    assert e.runtime("a")[V] == 60
    e.remove_pod("sys-1")
    assert e.runtime("a")[V] == 90
    assert_consistent(e)


def test_e4_system_and_default_runtime_is_their_max() -> None:
    """E4 / §2.8: system and default groups are outside the distribution; runtime = max."""
    e = ElasticQuotaManager({V: 100}, default_max={V: 7})
    assert e.runtime(DEFAULT_QUOTA) == {V: 7}
    assert e.runtime(SYSTEM_QUOTA)[V] == (2**63 - 1) // 5
    e.upsert(DEFAULT_QUOTA, min={}, max={V: 20})
    assert e.runtime(DEFAULT_QUOTA) == {V: 20}


def test_e7_requests_are_masked_to_max_names() -> None:
    """E7: names outside the quota's max are neither counted nor limited."""
    e = ElasticQuotaManager({V: 100, "memory": 100})
    e.upsert("a", min={V: 0}, max={V: 50})
    e.add_pod("a", "p", {V: 10, "memory": 10**12}, assigned=True)
    assert e.request("a") == {V: 10} and e.used("a") == {V: 10}
    assert e.runtime("a") == {V: 10}
    assert e.check("a", {"memory": 10**15}, include_request=True) == []


def test_changing_max_keys_remasks_existing_pods() -> None:
    """E7: when max gains a name, the pods' amounts for that name start to count."""
    e = ElasticQuotaManager({V: 100, "memory": 100})
    e.upsert("a", min={}, max={V: 50})
    e.add_pod("a", "p", {V: 10, "memory": 20}, assigned=True)
    e.upsert("a", min={}, max={V: 50, "memory": 50})
    assert e.used("a") == {V: 10, "memory": 20}
    assert e.runtime("a") == {V: 10, "memory": 20}
    assert_consistent(e)


def test_reparenting_moves_requests_and_used() -> None:
    """§3 rule 6 of the proposal: a quota may change its parent; sums follow it."""
    e = ElasticQuotaManager({V: 100})
    e.upsert("p1", min={V: 10}, max={V: 100}, is_parent=True)
    e.upsert("p2", min={V: 10}, max={V: 100}, is_parent=True)
    e.upsert("c", min={V: 10}, max={V: 100}, parent="p1")
    e.add_pod("c", "x", {V: 30}, assigned=True)
    assert e.request("p1")[V] == 30 and e.used("p1")[V] == 30
    e.upsert("c", min={V: 10}, max={V: 100}, parent="p2")
    assert e.request("p1") == {V: 0} and e.used("p1") == {V: 0}
    assert e.request("p2")[V] == 30 and e.used("p2")[V] == 30
    assert e.children("p2") == ["c"] and e.children("p1") == []
    assert_consistent(e)


def test_delete_releases_sums() -> None:
    """Deleting an idle leaf removes it from its parent's group."""
    e = three_level()
    e.set_request("l3", {})
    e.delete("l3")
    assert "l3" not in e.quota_names()
    assert e.request("p1")[V] == 55
    assert_consistent(e)


def test_unknown_quota_reads_raise_key_error() -> None:
    e = ElasticQuotaManager({V: 1})
    with pytest.raises(KeyError):
        e.runtime("nope")
    with pytest.raises(KeyError):
        e.set_request("nope", {V: 1})


def test_dump_state_is_deterministic() -> None:
    """Same operations → identical dump_state (no set or hash order)."""
    assert three_level().dump_state() == three_level().dump_state()
    state = three_level().dump_state()
    assert list(state["quotas"]) == sorted(state["quotas"])
    assert state["quotas"]["l1"]["runtime"] == {V: 35}


def test_negative_total_is_refused() -> None:
    with pytest.raises(ValueError):
        ElasticQuotaManager({V: -1})
    e = ElasticQuotaManager({V: 1})
    with pytest.raises(ValueError):
        e.set_total({V: -5})
    assert e.total == {V: 1}


def test_describe_one_quota() -> None:
    e = three_level()
    d = e.describe("q1")
    assert d["name"] == "q1" and d["parent"] == "p1" and d["is_parent"]
    assert d["children"] == ["l1", "l2"] and d["runtime"] == {V: 40} and d["request"] == {V: 55}
    assert d == e.dump_state()["quotas"]["q1"]
