"""The admission adapter src/quotaplane/policies/elastic.py, driven with AdmissionRequest objects."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from quotaplane.config.identity import UserGroup
from quotaplane.elastic import DEFAULT_QUOTA, ElasticQuotaManager, QuotaValidationError
from quotaplane.policies.elastic import ElasticPolicy, build_policy, validate_extension
from quotaplane.policy import AdmissionRequest, QuotaPolicy
from quotaplane.resources import Resource

V = "vcore"
NAME_TAG = "quota.scheduling.koordinator.sh/name"


def req(key: str, amount: int, *, tags: dict[str, str] | None = None, preemptible: bool = True,
        priority: int = 0) -> AdmissionRequest:
    return AdmissionRequest(application_id="app-1", allocation_key=key, queue_path="root.a",
                            user=UserGroup("alice"), resource=Resource({V: amount}), priority=priority,
                            preemptible=preemptible, tags=tags or {})


def policy() -> ElasticPolicy:
    e = ElasticQuotaManager({V: 100}, default_max={V: 5})
    e.upsert("a", min={V: 50}, max={V: 100}, namespaces=["team-a"])
    e.upsert("b", min={V: 50}, max={V: 100})
    e.upsert("dept", min={V: 0}, max={V: 100}, is_parent=True)
    return ElasticPolicy(e)


def test_implements_the_protocol() -> None:
    p = policy()
    assert isinstance(p, QuotaPolicy) and p.name == "elastic"


def test_mapping_by_name_tag_then_namespace_then_default() -> None:
    p = policy()
    assert p.quota_of(req("k", 1, tags={NAME_TAG: "b", "namespace": "team-a"})) == "b"
    assert p.quota_of(req("k", 1, tags={"namespace": "team-a"})) == "a"
    assert p.quota_of(req("k", 1, tags={"namespace": "b"})) == "b"
    assert p.quota_of(req("k", 1)) == DEFAULT_QUOTA


def test_apply_counts_an_assigned_pod_and_release_removes_it() -> None:
    p = policy()
    r = req("alloc-1", 30, tags={NAME_TAG: "a"})
    assert p.check(r) == []
    assert p.apply(r) == []
    assert p.manager.used("a") == {V: 30} and p.manager.pod_quota("alloc-1") == "a"
    p.release(r, last_allocation=True)
    assert p.manager.used("a") == {} and not p.manager.has_pod("alloc-1")


def test_undo_reverses_apply_exactly() -> None:
    p = policy()
    before = p.manager.dump_state()
    r = req("alloc-1", 30, tags={NAME_TAG: "a"})
    assert p.apply(r) == []
    p.undo(r)
    assert p.manager.dump_state() == before


def test_runtime_violation_with_path_and_shortfall() -> None:
    """elastic.runtime: path = the quota, resource = what does not fit."""
    p = policy()
    p.manager.set_request("b", {V: 50})
    assert p.apply(req("k1", 40, tags={NAME_TAG: "a"})) == []
    [v] = p.check(req("k2", 15, tags={NAME_TAG: "a"}))
    assert (v.policy, v.code, v.path, v.resource) == ("elastic", "elastic.runtime", "a", Resource({V: 5}))

def test_apply_counts_without_rechecking() -> None:
    """apply is the count after the partition's check: a restore (placeholder put back, journal replay)
    is never refused because the runtime moved meanwhile."""
    p = policy()
    p.manager.set_request("b", {V: 50})
    assert p.apply(req("k1", 40, tags={NAME_TAG: "a"})) == []
    assert p.check(req("k2", 15, tags={NAME_TAG: "a"})) != []
    assert p.apply(req("k2", 15, tags={NAME_TAG: "a"})) == []
    assert p.manager.used("a") == {V: 55}


def test_apply_refuses_what_cannot_be_counted_and_changes_nothing() -> None:
    p = policy()
    p.manager.set_used("b", {V: 1})                                 # b is fed in aggregate form
    before = p.manager.dump_state()
    for r in (req("k", 1, tags={NAME_TAG: "dept"}), req("k", 1, tags={NAME_TAG: "b"})):
        [v] = p.apply(r)
        assert v.code == "elastic.runtime" and v.path in ("dept", "b")
    assert p.manager.dump_state() == before


def test_borrowing_is_admitted_when_others_are_idle() -> None:
    """The request counts as pending for the runtime: a may borrow b's idle min."""
    p = policy()
    assert p.apply(req("k1", 90, tags={NAME_TAG: "a"})) == []
    assert p.check(req("k2", 10, tags={NAME_TAG: "a"})) == []
    assert [v.code for v in p.check(req("k2", 11, tags={NAME_TAG: "a"}))] == ["elastic.runtime"]


def test_non_preemptible_min_violation() -> None:
    p = policy()
    assert p.apply(req("k1", 45, tags={NAME_TAG: "a"}, preemptible=False)) == []
    codes = [v.code for v in p.check(req("k2", 10, tags={NAME_TAG: "a"}, preemptible=False))]
    assert codes == ["elastic.min"]
    assert p.check(req("k2", 10, tags={NAME_TAG: "a"})) == []


def test_default_group_limited_by_its_max() -> None:
    p = policy()
    assert p.apply(req("k1", 5)) == []
    [v] = p.check(req("k2", 1))
    assert v.path == DEFAULT_QUOTA and v.code == "elastic.runtime"


def test_parent_quota_target_is_a_violation_not_a_crash() -> None:
    p = policy()
    [v] = p.check(req("k", 1, tags={NAME_TAG: "dept"}))
    assert v.code == "elastic.runtime" and v.path == "dept"


def test_revoke_returns_allocation_keys() -> None:
    p = policy()
    assert p.apply(req("k1", 80, tags={NAME_TAG: "a"})) == []
    p.manager.set_request("b", {V: 50})
    assert p.revoke(0.0) == []
    (found,) = p.revoke(121.0)
    assert found.keys == ("k1",)
    assert (found.reason.policy, found.reason.code, found.reason.path) == ("elastic", "elastic.revoked", "a")


def test_build_policy_from_partition_extension() -> None:
    """The registry's builder reads the `elasticquotas` extension (YAML text or mapping with options)."""
    text = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: team}
spec: {max: {cpu: 10}, min: {cpu: 2}}
"""
    cfg = SimpleNamespace(extensions={"elasticquotas": {"quotas": text, "scaleMin": False, "revokeDelay": 5}})
    p = build_policy(cfg, None)
    assert p.manager.spec("team").max == {V: 10000}
    assert not p.manager.scale_min
    p.set_cluster_resource({V: 4000})
    assert p.manager.runtime("koordinator-root-quota") == {V: 4000}
    plain = build_policy(SimpleNamespace(extensions={"elasticquotas": text}), None)
    assert plain.manager.quota_names().count("team") == 1
    p.update_config(SimpleNamespace(extensions={"elasticquotas": text.replace("cpu: 10", "cpu: 20")}))
    assert p.manager.spec("team").max == {V: 20000}


QUOTA = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: {name}
  labels: {{quota.scheduling.koordinator.sh/parent: {parent}}}
spec: {{max: {{cpu: 10}}, min: {{cpu: 1}}}}
"""
DEPT = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: dept
  labels: {quota.scheduling.koordinator.sh/is-parent: "true"}
spec: {max: {cpu: 10}, min: {cpu: 5}}
"""


def _cfg(text: str) -> SimpleNamespace:
    return SimpleNamespace(extensions={"elasticquotas": {"quotas": text}})


def test_update_config_syncs_the_quota_set() -> None:
    """A reload makes the quota set exactly the configured one; removed quotas are deleted."""
    p = build_policy(_cfg(DEPT + "---" + QUOTA.format(name="t1", parent="dept") + "---"
                          + QUOTA.format(name="t2", parent="dept")), None)
    assert p.manager.children("dept") == ["t1", "t2"]
    p.update_config(_cfg(DEPT + "---" + QUOTA.format(name="t2", parent="dept")))
    assert p.manager.children("dept") == ["t2"] and "t1" not in p.manager.quota_names()
    p.update_config(_cfg(QUOTA.format(name="solo", parent="koordinator-root-quota")))
    assert [n for n in p.manager.quota_names() if not n.startswith("koordinator-")] == ["solo"]


def test_update_config_refuses_removing_a_quota_with_allocations() -> None:
    p = build_policy(_cfg(DEPT + "---" + QUOTA.format(name="t1", parent="dept")), None)
    p.set_cluster_resource({V: 10_000})
    assert p.apply(req("k1", 100, tags={NAME_TAG: "t1"})) == []
    before = p.manager.dump_state()
    for text in (DEPT, QUOTA.format(name="t2", parent="koordinator-root-quota"),
                 DEPT + "---" + QUOTA.format(name="t9", parent="dept")):
        try:
            p.update_config(_cfg(text))
        except QuotaValidationError as exc:
            assert (exc.quota, exc.rule) == ("t1", "delete-has-pods")
        else:
            raise AssertionError(f"reload accepted: {text}")
        assert p.manager.dump_state() == before


def test_update_config_refuses_parent_that_goes_away() -> None:
    p = build_policy(_cfg(DEPT + "---" + QUOTA.format(name="t1", parent="dept")), None)
    before = p.manager.dump_state()
    try:
        p.update_config(_cfg(QUOTA.format(name="t1", parent="dept")))
    except QuotaValidationError as exc:
        assert (exc.quota, exc.rule) == ("t1", "parent-not-found")
    else:
        raise AssertionError("reload accepted")
    assert p.manager.dump_state() == before


def test_validate_extension_and_bad_options() -> None:
    validate_extension({"quotas": DEPT, "scaleMin": "false", "revokeDelay": 0})
    for bad in ({"quotas": DEPT, "scalemin": True}, {"revokeDelay": -1}, {"revokeDelay": "soon"},
                {"checkParent": "maybe"}, {"quotas": 42}):
        with pytest.raises(ValueError):
            validate_extension(bad)
    try:
        validate_extension(QUOTA.format(name="x", parent="ghost"))
    except QuotaValidationError as exc:
        assert (exc.quota, exc.rule) == ("x", "parent-not-found")
    else:
        raise AssertionError("accepted a missing parent")


def test_update_config_may_move_a_busy_quota_and_drop_its_old_parent() -> None:
    p = build_policy(_cfg(DEPT + "---" + QUOTA.format(name="t1", parent="dept")), None)
    assert p.apply(req("k1", 100, tags={NAME_TAG: "t1"})) == []
    p.update_config(_cfg(QUOTA.format(name="t1", parent="koordinator-root-quota")))
    assert "dept" not in p.manager.quota_names() and p.manager.used("t1") == {V: 100}
