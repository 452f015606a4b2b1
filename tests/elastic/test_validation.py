"""Configuration rules of reference §3 (webhook), one test per rule; every refusal changes nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from quotaplane.elastic import (
    DEFAULT_QUOTA,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    ElasticQuotaManager,
    QuotaValidationError,
)

V = "vcore"
M = "memory"


def tree() -> ElasticQuotaManager:
    e = ElasticQuotaManager({V: 1000, M: 1000})
    e.upsert("dept", min={V: 100, M: 100}, max={V: 500, M: 500}, is_parent=True)
    e.upsert("team", min={V: 60, M: 60}, max={V: 500, M: 500}, parent="dept")
    return e


def refused(e: ElasticQuotaManager, rule: str, action: Callable[[], object],
            quota: str | None = None) -> None:
    """The action raises QuotaValidationError for ``rule`` naming the quota, and changes nothing."""
    before = e.dump_state()
    with pytest.raises(QuotaValidationError) as info:
        action()
    assert info.value.rule == rule, str(info.value)
    assert isinstance(info.value, ValueError)
    if quota is not None:
        assert info.value.quota == quota
        assert quota in str(info.value) and rule in str(info.value)
    assert e.dump_state() == before


def test_3_2_1_max_negative() -> None:
    e = tree()
    refused(e, "max-negative", lambda: e.upsert("x", min={}, max={V: -1}), "x")


def test_3_2_2_min_negative() -> None:
    e = tree()
    refused(e, "min-negative", lambda: e.upsert("x", min={V: -1}, max={V: 1}), "x")


def test_3_2_3_shared_weight_negative() -> None:
    e = tree()
    refused(e, "shared-weight-negative",
            lambda: e.upsert("x", min={}, max={V: 1}, shared_weight={V: -5}), "x")


def test_3_2_4_min_key_not_in_max() -> None:
    e = tree()
    refused(e, "min-key-not-in-max", lambda: e.upsert("x", min={M: 1}, max={V: 1}), "x")


def test_3_2_4_min_greater_than_max() -> None:
    e = tree()
    refused(e, "min-greater-than-max", lambda: e.upsert("x", min={V: 12}, max={V: 10}), "x")


def test_3_2_5_strict_keys_max_below_used() -> None:
    e = ElasticQuotaManager({V: 100})
    e.upsert("x", min={}, max={V: 50})
    e.set_used("x", {V: 40})
    doc = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: x
  annotations:
    quota.scheduling.koordinator.sh/max-strict-check-resource-keys: '["cpu"]'
spec:
  max: {cpu: 30m}
"""
    refused(e, "max-below-used", lambda: e.apply_yaml(doc), "x")
    e.apply_yaml(doc.replace("30m", "40m"))
    assert e.spec("x").max == {V: 40}


def test_3_3_1_is_parent_true_to_false_with_children() -> None:
    e = tree()
    refused(e, "is-parent-change",
            lambda: e.upsert("dept", min={V: 100, M: 100}, max={V: 500, M: 500}, is_parent=False), "dept")


def test_3_3_1_is_parent_false_to_true_with_pods() -> None:
    e = tree()
    e.add_pod("team", "p", {V: 1})
    refused(e, "is-parent-change",
            lambda: e.upsert("team", min={V: 60, M: 60}, max={V: 500, M: 500}, parent="dept",
                             is_parent=True), "team")
    e.remove_pod("p")
    e.upsert("team", min={V: 60, M: 60}, max={V: 500, M: 500}, parent="dept", is_parent=True)
    assert e.spec("team").is_parent


def test_3_3_2_tree_id_cannot_change_and_is_inherited() -> None:
    e = ElasticQuotaManager({V: 10})
    e.upsert("p", min={V: 5}, max={V: 10}, is_parent=True, tree_id="t1")
    e.upsert("c", min={V: 1}, max={V: 10}, parent="p")
    assert e.spec("c").tree_id == "t1"                  # §3.1: copied from the parent
    refused(e, "tree-id", lambda: e.upsert("c", min={V: 2}, max={V: 10}, parent="p", tree_id="t2"), "c")
    refused(e, "tree-id", lambda: e.upsert("p", min={V: 5}, max={V: 10}, is_parent=True, tree_id="t9"), "p")


def test_3_3_3_leaf_under_root_skips_topology_checks() -> None:
    """Rule 3: a leaf directly under the root is valid whatever the root children's mins sum to."""
    e = ElasticQuotaManager({V: 10})
    e.upsert("a", min={V: 100}, max={V: 100})
    e.upsert("b", min={V: 100}, max={V: 100})          # first level may exceed the cluster (rule 1)
    assert e.children(ROOT_QUOTA) == ["a", "b"]


def test_3_3_4_parent_must_exist() -> None:
    e = tree()
    refused(e, "parent-not-found", lambda: e.upsert("x", min={}, max={V: 1, M: 1}, parent="ghost"), "x")


def test_3_3_4_parent_must_be_a_parent() -> None:
    e = tree()
    refused(e, "parent-not-parent",
            lambda: e.upsert("x", min={}, max={V: 500, M: 500}, parent="team"), "x")
    refused(e, "parent-not-parent",
            lambda: e.upsert("x", min={}, max={V: 500, M: 500}, parent=DEFAULT_QUOTA), "x")


def test_parent_cycle_is_refused() -> None:
    """Proposal rule 6: a parent change may not break the tree (no cycles)."""
    e = tree()
    e.upsert("sub", min={V: 10, M: 10}, max={V: 500, M: 500}, parent="dept", is_parent=True)
    refused(e, "parent-cycle",
            lambda: e.upsert("dept", min={V: 100, M: 100}, max={V: 500, M: 500}, is_parent=True,
                             parent="sub"), "dept")
    refused(e, "parent-cycle",
            lambda: e.upsert("sub", min={V: 10, M: 10}, max={V: 500, M: 500}, is_parent=True,
                             parent="sub"), "sub")


def test_3_3_5_max_keys_must_equal_parent_max_keys() -> None:
    e = tree()
    refused(e, "resource-keys", lambda: e.upsert("x", min={}, max={V: 10}, parent="dept"), "x")


def test_3_3_5_min_keys_must_be_in_parent_min() -> None:
    e = ElasticQuotaManager({V: 10, M: 10})
    e.upsert("p", min={V: 5}, max={V: 10, M: 10}, is_parent=True)
    refused(e, "resource-keys", lambda: e.upsert("x", min={M: 1}, max={V: 10, M: 10}, parent="p"), "x")


def test_3_3_5_parent_update_checks_children_keys() -> None:
    e = tree()
    refused(e, "resource-keys",
            lambda: e.upsert("dept", min={V: 100}, max={V: 500}, is_parent=True), "dept")


def test_3_3_6_siblings_min_sum_within_parent_min() -> None:
    e = tree()
    refused(e, "min-sum", lambda: e.upsert("x", min={V: 41}, max={V: 500, M: 500}, parent="dept"), "x")
    e.upsert("x", min={V: 40}, max={V: 500, M: 500}, parent="dept")      # exactly at the parent min
    # an update of an existing child does not count its old min twice
    e.upsert("x", min={V: 40, M: 5}, max={V: 500, M: 500}, parent="dept")


def test_3_3_6_children_min_sum_within_own_min() -> None:
    e = tree()
    refused(e, "min-sum",
            lambda: e.upsert("dept", min={V: 59, M: 100}, max={V: 500, M: 500}, is_parent=True), "dept")


def test_3_3_6_parent_without_min_rejects_child_min() -> None:
    """LessThanOrEqualCompletely: a key missing on the right counts as 0."""
    e = ElasticQuotaManager({V: 10})
    e.upsert("p", min={}, max={V: 10}, is_parent=True)
    refused(e, "resource-keys", lambda: e.upsert("c", min={V: 1}, max={V: 10}, parent="p"), "c")
    e.upsert("p", min={V: 0}, max={V: 10}, is_parent=True)
    refused(e, "min-sum", lambda: e.upsert("c", min={V: 1}, max={V: 10}, parent="p"), "c")


def test_3_3_6_force_update_skips_min_sum() -> None:
    e = tree()
    e.upsert("x", min={V: 400}, max={V: 500, M: 500}, parent="dept", force_update=True)
    assert e.spec("x").min == {V: 400}


def test_3_4_namespace_bound_to_one_quota() -> None:
    e = ElasticQuotaManager({V: 10})
    e.upsert("a", min={}, max={V: 1}, namespaces=["ns1"])
    refused(e, "namespace-bound", lambda: e.upsert("b", min={}, max={V: 1}, namespaces=["ns1"]), "b")
    e.upsert("a", min={}, max={V: 1}, namespaces=["ns2"])              # a moves: ns1 is free again
    e.upsert("b", min={}, max={V: 1}, namespaces=["ns1"])
    assert e.quota_for_pod({}, "ns1") == "b" and e.quota_for_pod({}, "ns2") == "a"


def test_3_4_unchanged_topology_is_not_rechecked() -> None:
    """§3.4: an update that does not change parent, is-parent, tree-id, namespaces or spec is allowed."""
    e = tree()
    e.upsert("x", min={V: 400}, max={V: 500, M: 500}, parent="dept", force_update=True)
    e.upsert("x", min={V: 400}, max={V: 500, M: 500}, parent="dept", shared_weight={V: 3})
    assert e.dump_state()["quotas"]["x"]["shared_weight"] == {M: 500, V: 3}


def test_root_and_system_cannot_be_modified() -> None:
    e = tree()
    refused(e, "immutable", lambda: e.upsert(ROOT_QUOTA, min={}, max={V: 1}), ROOT_QUOTA)
    refused(e, "immutable", lambda: e.upsert(SYSTEM_QUOTA, min={}, max={V: 1}), SYSTEM_QUOTA)


def test_default_quota_stays_a_leaf_under_root() -> None:
    e = tree()
    refused(e, "special-quota",
            lambda: e.upsert(DEFAULT_QUOTA, min={}, max={V: 1}, is_parent=True), DEFAULT_QUOTA)


def test_delete_rules() -> None:
    """§3.4 delete: unknown → KeyError; root/system/default; children; pods."""
    e = tree()
    with pytest.raises(KeyError):
        e.delete("ghost")
    for name in (ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA):
        refused(e, "delete-protected", lambda n=name: e.delete(n), name)  # type: ignore[misc]
    refused(e, "delete-has-children", lambda: e.delete("dept"), "dept")
    e.add_pod("team", "pod-a", {V: 1})
    refused(e, "delete-has-pods", lambda: e.delete("team"), "team")
    e.remove_pod("pod-a")
    e.set_used("team", {V: 3})
    refused(e, "delete-has-pods", lambda: e.delete("team"), "team")
    e.set_used("team", {})
    e.delete("team")
    e.delete("dept")
    assert e.quota_names() == sorted([ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA])


def test_pods_cannot_be_linked_to_a_parent_quota() -> None:
    """§3.4 pods: a pod may not resolve to a parent quota."""
    e = tree()
    refused(e, "pod-parent-quota", lambda: e.add_pod("dept", "p", {V: 1}), "dept")
    refused(e, "pod-parent-quota", lambda: e.set_request("dept", {V: 1}), "dept")
    refused(e, "pod-parent-quota", lambda: e.add_pod(ROOT_QUOTA, "p", {V: 1}), ROOT_QUOTA)


def test_duplicate_in_one_batch() -> None:
    e = tree()
    doc = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: dup}
spec: {max: {cpu: 1}}
"""
    refused(e, "duplicate", lambda: e.apply_yaml(doc + "---" + doc), "dup")


def test_batch_is_all_or_nothing() -> None:
    """A batch whose last document breaks a rule changes nothing, not even the valid first ones."""
    e = tree()
    text = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: fine}
spec: {max: {cpu: 1}}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: broken
  labels: {quota.scheduling.koordinator.sh/parent: nowhere}
spec: {max: {cpu: 1}}
"""
    refused(e, "parent-not-found", lambda: e.apply_yaml(text), "broken")
    assert "fine" not in e.quota_names()


def test_batch_may_list_children_before_parents() -> None:
    """A batch is validated parents first, so document order does not matter."""
    e = ElasticQuotaManager({V: 10})
    e.apply_yaml("""
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: kid
  labels: {quota.scheduling.koordinator.sh/parent: mom}
spec: {max: {cpu: 2}, min: {cpu: 1}}
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: mom
  labels: {quota.scheduling.koordinator.sh/is-parent: "true"}
spec: {max: {cpu: 2}, min: {cpu: 1}}
""")
    assert e.children("mom") == ["kid"]


def test_batch_siblings_are_summed_together() -> None:
    """Rule 6 counts siblings staged earlier in the same batch."""
    e = tree()
    doc = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: {name}
  labels: {{quota.scheduling.koordinator.sh/parent: dept}}
spec: {{max: {{cpu: 500m, memory: 500}}, min: {{cpu: 30m}}}}
"""
    text = doc.format(name="s1") + "---" + doc.format(name="s2")
    refused(e, "min-sum", lambda: e.apply_yaml(text), "s2")
