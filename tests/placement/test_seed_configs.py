"""The seed 004 configurations end to end: YAML → QueueTree + PlacementManager, Kubernetes namespace →
tags → placement → dynamic queue with the namespace quota (P-7, P-8, N-2, K8-3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import quotaplane as qp
from quotaplane.config.identity import UserGroup
from quotaplane.k8s import application_tags, pod_resource
from quotaplane.placement import PlacementManager
from quotaplane.queues import QueueTree

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "k8s"

STATIC = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: advertisement
      resources:
        guaranteed: {memory: 500G, vcore: 50}
        max: {memory: 800G, vcore: 80}
    - name: search
      resources:
        guaranteed: {memory: 400G, vcore: 40}
        max: {memory: 600G, vcore: 60}
    - name: sandbox
      resources:
        guaranteed: {memory: 100G, vcore: 10}
        max: {memory: 100G, vcore: 10}
"""

NAMESPACE_MAPPING = """
partitions:
- name: default
  placementrules:
  - name: tag
    value: namespace
    create: true
  queues:
  - name: root
    submitacl: '*'
    properties:
      application.sort.policy: stateaware
"""

PARENT_MAPPING = """
partitions:
- name: default
  placementrules:
  - name: tag
    value: namespace
    create: true
    parent:
      name: tag
      value: namespace.parentqueue
  queues:
  - name: root
    queues:
    - name: production
      parent: true
    - name: development
      parent: true
"""


def load(name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((EXAMPLES / name).read_text())
    return data


def build(text: str) -> tuple[QueueTree, PlacementManager]:
    cfg = qp.load_config(text).partition("default")
    return QueueTree(cfg), PlacementManager(cfg.placement_rules)


def test_static_queues_with_labels() -> None:
    tree, pm = build(STATIC)
    tree.set_cluster_resource({"vcore": 1_000_000, "memory": 10**13, "pods": 1000, "hugepages-1Gi": 4})
    pod = load("pod-seed-example.json")
    # no rules: the pod's queue label is used as given
    path = pm.place("my-test-app-01", UserGroup("u"), application_tags(pod), tree, "root.sandbox")
    assert path == "root.sandbox"
    assert tree.check_allocation(path, pod_resource(pod)) == []
    over = tree.check_allocation(path, {"vcore": 10_001})
    assert [(lim.code, lim.queue_path) for lim in over] == [("queue.max", "root.sandbox")]


def test_namespace_to_queue_mapping_with_quota() -> None:
    tree, pm = build(NAMESPACE_MAPPING)
    ns = load("namespace-quota.json")  # "development" with quota 64 cpu / 100G / 1 gpu, maxApps 5
    tags = application_tags({"metadata": {"namespace": "development"}}, ns)
    path = pm.place("app", UserGroup("u"), tags, tree)
    assert path == "root.development" and tree.queue(path) is None
    q = tree.ensure_dynamic_queue(path)
    tree.apply_namespace_tags(path, tags)
    assert q.max == {"vcore": 64_000, "memory": 100_000_000_000, "nvidia.com/gpu": 1}
    assert q.guaranteed == {"vcore": 8000, "memory": 10_000_000_000} and q.max_applications == 5
    assert q.properties["application.sort.policy"] == "stateaware"  # inherited from root


@pytest.mark.parametrize(("namespace", "annotation", "expected"), [
    ("finance", "root.production", "root.production.finance"),
    ("sales", "production", "root.production.sales"),
    ("dev", "root.development", "root.development.dev"),
])
def test_parent_queue_mapping(namespace: str, annotation: str, expected: str) -> None:
    tree, pm = build(PARENT_MAPPING)
    ns = {"metadata": {"name": namespace, "annotations": {"yunikorn.apache.org/parentqueue": annotation}}}
    tags = application_tags({}, ns)
    # root has no submitacl in this seed config: nobody may submit (YuniKorn: an unset ACL denies)
    with pytest.raises(qp.RejectedError):
        pm.place("app", UserGroup("u"), tags, tree)
    tree.update_config(qp.load_config(PARENT_MAPPING.replace(
        "  - name: root\n", "  - name: root\n    submitacl: '*'\n")).partition("default"))
    assert pm.place("app", UserGroup("u"), tags, tree) == expected


def test_finance_namespace_manifest() -> None:
    tree, pm = build(PARENT_MAPPING.replace("  - name: root\n", "  - name: root\n    submitacl: '*'\n"))
    tags = application_tags(load("pod-init-sidecar.json"), load("namespace-finance.json"))
    path = pm.place("etl-42", UserGroup("u"), tags, tree)
    assert path == "root.production.finance"
    q = tree.ensure_dynamic_queue(path)
    assert not q.managed and q.parent is tree.queue("root.production")


CHILD_TEMPLATE = """
partitions:
- name: default
  placementrules:
  - name: tag
    value: namespace
    create: true
  queues:
  - name: root
    submitacl: '*'
    childtemplate:
      maxapplications: 10
      properties:
        application.sort.policy: fair
      resources:
        guaranteed: {vcore: 1, memory: 1G}
        max: {vcore: 20, memory: 600G}
    queues:
    - name: tenants
      parent: true
      childtemplate:
        resources:
          max: {vcore: 2}
"""


def test_m6_child_templates_from_yaml() -> None:
    tree, pm = build(CHILD_TEMPLATE)
    path = pm.place("app", UserGroup("u"), {"namespace": "ns1"}, tree)
    q = tree.ensure_dynamic_queue(path)
    assert path == "root.ns1" and q.max_applications == 10
    assert q.max == {"vcore": 20_000, "memory": 600_000_000_000}
    assert q.guaranteed == {"vcore": 1000, "memory": 1_000_000_000}
    assert q.properties["application.sort.policy"] == "fair"
    # the nearest template wins: root.tenants has its own
    q2 = tree.ensure_dynamic_queue("root.tenants.team")
    assert q2.max == {"vcore": 2000} and q2.guaranteed is None and q2.max_applications == 0
    dao = tree.dao("root", subtree=False)
    assert dao["template"]["maxApplications"] == 10
