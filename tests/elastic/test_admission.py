"""Admission (reference §2.9, decision E7), pod → quota mapping (§1.1) and preemption (§2.10, E6)."""

from __future__ import annotations

import pytest

from quotaplane.elastic import DEFAULT_QUOTA, ElasticQuotaManager

V = "vcore"
M = "memory"


def two_teams() -> ElasticQuotaManager:
    e = ElasticQuotaManager({V: 100, M: 100})
    e.upsert("a", min={V: 50, M: 50}, max={V: 100, M: 100})
    e.upsert("b", min={V: 50, M: 50}, max={V: 100, M: 100})
    return e


def test_check_used_plus_request_within_runtime() -> None:
    """§2.9: used + request ≤ runtime in every dimension of the runtime."""
    e = two_teams()
    e.add_pod("a", "p1", {V: 30, M: 10}, assigned=True)
    e.add_pod("a", "p2", {V: 20, M: 10})                  # pending: counted in the request
    assert e.runtime("a") == {V: 50, M: 20}
    assert e.check("a", {V: 20, M: 10}) == []             # p2 fits: 30 + 20 ≤ 50
    reasons = e.check("a", {V: 21, M: 10})
    assert len(reasons) == 1 and "exceedDimensions: [vcore]" in reasons[0] and "quotaName: a" in reasons[0]


def test_check_changes_nothing() -> None:
    e = two_teams()
    e.add_pod("a", "p1", {V: 30}, assigned=True)
    before = e.dump_state()
    e.check("a", {V: 99}, include_request=True)
    e.check("a", {V: 99}, preemptible=False)
    assert e.dump_state() == before


def test_include_request_counts_the_new_pod_as_pending() -> None:
    """§2.9: the pod's own request is part of the quota's request when the runtime is computed."""
    e = two_teams()
    e.add_pod("a", "p1", {V: 30}, assigned=True)          # a's runtime = its request = 30
    assert e.runtime("a")[V] == 30
    assert e.check("a", {V: 10}) != []                     # without counting it: 40 > 30
    assert e.check("a", {V: 10}, include_request=True) == []
    assert e.check("a", {V: 71}, include_request=True) != []   # even borrowing all of b: 101 > 100


def test_include_request_equals_adding_then_checking() -> None:
    """The what-if runtime equals the runtime after really adding the pending pod."""
    e = ElasticQuotaManager({V: 100})
    e.upsert("p", min={V: 40}, max={V: 100}, is_parent=True)
    e.upsert("x", min={V: 20}, max={V: 100}, parent="p")
    e.upsert("y", min={V: 20}, max={V: 100}, parent="p")
    e.upsert("z", min={V: 30}, max={V: 100})
    e.set_request("z", {V: 70})
    e.add_pod("x", "x1", {V: 25}, assigned=True)
    e.add_pod("y", "y1", {V: 10}, assigned=True)
    for amount in (1, 5, 15, 30, 60):
        what_if = e.violations("x", {V: amount}, include_request=True)
        e.add_pod("x", "probe", {V: amount})
        real = e.violations("x", {V: amount})
        e.remove_pod("probe")
        assert what_if == real, amount


def test_non_preemptible_request_within_min() -> None:
    """§2.9: a non-preemptible request also needs non-preemptible used + request ≤ min (original)."""
    e = two_teams()
    e.add_pod("a", "np1", {V: 40}, preemptible=False, assigned=True)
    e.add_pod("a", "p", {V: 40}, assigned=True)
    assert e.check("a", {V: 10}, preemptible=False, include_request=True) == []
    violations = e.violations("a", {V: 11}, preemptible=False, include_request=True)
    assert [v[0] for v in violations] == ["elastic.min"]
    assert violations[0][3] == {V: 1}
    assert e.non_preemptible_used("a") == {V: 40}


def test_shortfall_is_reported_per_resource() -> None:
    e = two_teams()
    e.set_request("b", {V: 100, M: 100})
    e.add_pod("a", "p", {V: 50, M: 50}, assigned=True)
    [(code, path, _msg, short)] = e.violations("a", {V: 5, M: 7})
    assert (code, path, short) == ("elastic.runtime", "a", {V: 5, M: 7})


def test_check_parent_option() -> None:
    """§2.9 EnableCheckParentQuota: every ancestor below the root must also fit."""
    for check_parent, expected in ((False, []), (True, ["p"])):
        e = ElasticQuotaManager({V: 100}, check_parent=check_parent)
        e.upsert("p", min={V: 10}, max={V: 100}, is_parent=True)
        e.upsert("c", min={V: 0}, max={V: 100}, parent="p")
        e.upsert("d", min={V: 0}, max={V: 100}, parent="p")
        e.set_used("d", {V: 20})
        e.set_request("d", {V: 0})       # d runs 20 but requests nothing now (stale): p's runtime = c's
        e.set_request("c", {V: 10})
        found = e.violations("c", {V: 5})
        assert [v[1] for v in found if v[1] != "c"] == expected


def test_default_quota_admission_against_its_max() -> None:
    e = ElasticQuotaManager({V: 100}, default_max={V: 10})
    e.add_pod(DEFAULT_QUOTA, "d1", {V: 8}, assigned=True)
    assert e.check(DEFAULT_QUOTA, {V: 2}) == []
    assert e.check(DEFAULT_QUOTA, {V: 3}) != []


def test_quota_for_pod_resolution_order() -> None:
    """§1.1: label name → quota named as the namespace → namespaces annotation → default."""
    e = ElasticQuotaManager({V: 1})
    e.upsert("by-label", min={}, max={V: 1})
    e.upsert("ns1", min={}, max={V: 1})
    e.upsert("annotated", min={}, max={V: 1}, namespaces=["ns2", "ns1"])
    label = "quota.scheduling.koordinator.sh/name"
    assert e.quota_for_pod({label: "by-label"}, "ns1") == "by-label"
    assert e.quota_for_pod({}, "ns1") == "ns1"
    assert e.quota_for_pod(None, "ns2") == "annotated"
    assert e.quota_for_pod({}, "elsewhere") == DEFAULT_QUOTA
    assert e.quota_for_pod({label: "ghost"}, "ns1") == DEFAULT_QUOTA       # unknown → default
    assert e.quota_for_pod({}, None) == DEFAULT_QUOTA


def test_pod_form_and_aggregate_form_do_not_mix() -> None:
    e = two_teams()
    e.add_pod("a", "p", {V: 1})
    with pytest.raises(ValueError):
        e.set_request("a", {V: 1})
    e.set_used("b", {V: 1})
    with pytest.raises(ValueError):
        e.add_pod("b", "q", {V: 1})


def test_pod_errors() -> None:
    e = two_teams()
    e.add_pod("a", "p", {V: 1})
    with pytest.raises(ValueError):
        e.add_pod("b", "p", {V: 1})                 # duplicate id
    with pytest.raises(KeyError):
        e.remove_pod("ghost")
    with pytest.raises(KeyError):
        e.assign_pod("ghost")
    with pytest.raises(ValueError):
        e.add_pod("a", "neg", {V: -1})


def test_assign_and_remove_pod_update_used_and_request() -> None:
    e = two_teams()
    e.add_pod("a", "p", {V: 7})
    assert e.request("a") == {V: 7} and e.used("a") == {}
    e.assign_pod("p")
    e.assign_pod("p")                               # idempotent
    assert e.used("a") == {V: 7}
    e.remove_pod("p")
    assert e.request("a") == {} and e.used("a") == {}


def test_e6_preemption_only_lower_priority_preemptible_same_quota() -> None:
    """§2.10 / E6: victims are strictly lower priority, preemptible, same quota; minimal by reprieve."""
    e = two_teams()
    e.set_request("b", {V: 50})                      # a's runtime: 50
    e.add_pod("a", "low-old", {V: 10}, priority=1, assigned=True, start_time=1.0)
    e.add_pod("a", "low-new", {V: 10}, priority=1, assigned=True, start_time=2.0)
    e.add_pod("a", "mid", {V: 10}, priority=5, assigned=True)
    e.add_pod("a", "np", {V: 10}, priority=0, preemptible=False, assigned=True)
    e.add_pod("a", "same", {V: 10}, priority=9, assigned=True)
    assert e.runtime("a")[V] == 50 and e.used("a")[V] == 50
    # 10 needed: the most important candidates are reprieved first, so one low pod goes (the newest)
    assert e.preemption_victims("a", {V: 10}, priority=9) == ["low-new"]
    assert e.preemption_victims("a", {V: 25}, priority=9) == ["low-new", "low-old", "mid"]
    assert e.preemption_victims("a", {V: 10}, priority=1) == []     # nothing strictly lower but np
    assert e.preemption_victims("a", {V: 45}, priority=9) == []     # even all candidates: no room
    assert e.preemption_victims("b", {V: 10}, priority=9) == []     # fits already; never crosses quotas


def test_default_quota_pods_are_never_preempted() -> None:
    e = ElasticQuotaManager({V: 100}, default_max={V: 10})
    e.add_pod(DEFAULT_QUOTA, "d1", {V: 10}, priority=0, assigned=True)
    assert e.preemption_victims(DEFAULT_QUOTA, {V: 5}, priority=100) == []


def test_ancestors_name_a_quota_and_its_parents_up_to_the_root() -> None:
    """What a budget on a quota tree charges (docs/budgets.md): the quota, then each parent."""
    e = ElasticQuotaManager({V: 100})
    e.upsert("org", min={V: 50}, max={V: 100}, is_parent=True)
    e.upsert("a", min={V: 20}, max={V: 100}, parent="org")
    assert e.ancestors("a") == ("a", "org")
    assert e.ancestors("org") == ("org",)
    assert e.ancestors(DEFAULT_QUOTA) == (DEFAULT_QUOTA,)
    assert e.ancestors("nowhere") == ()
