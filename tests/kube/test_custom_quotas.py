"""ElasticQuota and QuotaSubtree objects drive the front (issue 16 item 5, reference
kubernetes-front.md §3, §4): the quotas they define gate pods, Koordinator's status is written back,
conflicts and refusals are reported, and the ConfigMap composes with them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from quotaplane.cluster import Scheduler
from quotaplane.kube.crds import CustomQuotas, quantity, quota_trees
from tests.kube.emulator import Emulator
from tests.kube.harness import Front, node, pod

CONFIG = """
partitions:
- name: default
  placementrules:
  - name: tag
    value: namespace
    create: true
  queues:
  - name: root
    submitacl: '*'
"""
EQ = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{ns}/elasticquotas"
QST = "/apis/quota.codeflare.dev/v1alpha1/namespaces/{ns}/quotasubtrees"


def elastic_quota(name: str, ns: str, min_cpu: str, max_cpu: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"min": {"cpu": min_cpu, "memory": "8Gi"}, "max": {"cpu": max_cpu, "memory": "16Gi"}}}


def subtree(name: str, parent: str, children: list[dict[str, Any]], tree: str = "quota_context"
            ) -> dict[str, Any]:
    spec: dict[str, Any] = {"children": children}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": "quota.codeflare.dev/v1alpha1", "kind": "QuotaSubtree",
            "metadata": {"name": name, "namespace": "kube-system", "labels": {"tree": tree}}, "spec": spec}


@pytest.fixture
def front() -> Iterator[Front]:
    f = Front(Scheduler.from_yaml(CONFIG))
    f.namespace("team-a")
    f.namespace("team-b")
    f.namespace("quotaplane-system")
    f.node(node("n1", cpu="8"))
    yield f
    f.close()


def _condition(front: Front, name: str, ns: str = "team-a") -> str | None:
    p = front.get_pod(name, ns) or {}
    for c in p.get("status", {}).get("conditions", []):
        if c.get("type") == "QuotaAdmitted":
            return str(c.get("message"))
    return None


def test_elastic_quotas_gate_pods_and_get_koordinators_status_written_back(front: Front) -> None:
    front.create(EQ.format(ns="team-a"), elastic_quota("team-a", "team-a", "1", "2"))
    front.start()
    for i in range(3):
        front.submit(pod(f"p{i}"))
    front.wait(lambda: not front.gated("p0") and not front.gated("p1"))
    message = front.wait(lambda: _condition(front, "p2"))
    assert "elastic" in message and "team-a" in message
    assert front.gated("p2")

    def written() -> dict[str, Any] | None:
        obj = front.kubectl.get(EQ.format(ns="team-a") + "/team-a").json()
        ann = obj["metadata"].get("annotations", {})
        if obj.get("status", {}).get("used", {}).get("cpu") == "2":
            return {"runtime": json.loads(ann["quota.scheduling.koordinator.sh/runtime"]),
                    "request": json.loads(ann["quota.scheduling.koordinator.sh/request"]),
                    "used": obj["status"]["used"]}
        return None
    status = front.wait(written)
    assert status["request"]["cpu"] == "3"                 # what the three pods ask
    assert status["runtime"]["cpu"] == "2"                 # bounded by max
    assert status["used"]["memory"] == "128Mi"
    # the write-back changes the object; that must not count as a quota change
    seq = front.scheduler.config_seq
    front.delete_pod("p0")
    front.wait(lambda: not front.gated("p2"))
    assert front.scheduler.config_seq == seq


def test_a_changed_elastic_quota_applies_and_a_config_map_keeps_it(front: Front) -> None:
    front.create(EQ.format(ns="team-a"), elastic_quota("team-a", "team-a", "1", "1"))
    front.start()
    front.submit(pod("p0"))
    front.submit(pod("p1"))
    front.wait(lambda: not front.gated("p0"))
    assert front.gated("p1")
    r = front.kubectl.patch(EQ.format(ns="team-a") + "/team-a", json={"spec": {"max": {"cpu": "2"}}},
                            headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200
    front.wait(lambda: not front.gated("p1"))
    # the ConfigMap's queues.yaml has no elasticquotas: the objects' quotas are kept with it
    front.create("/api/v1/namespaces/quotaplane-system/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "yunikorn-configs", "namespace": "quotaplane-system"},
        "data": {"queues.yaml": CONFIG.replace("submitacl: '*'", "submitacl: '*'\n    maxapplications: 50")}})
    front.wait(lambda: "maxapplications: 50" in front.scheduler.config_text)
    assert "team-a" in front.scheduler.config_text.split("elasticquotas")[1]
    front.submit(pod("p2"))
    assert front.wait(lambda: _condition(front, "p2"))   # still limited by the quota (max 2 cpu)


def test_duplicate_names_conflict_and_an_invalid_quota_is_refused(front: Front) -> None:
    front.create(EQ.format(ns="team-a"), elastic_quota("shared", "team-a", "1", "2"))
    front.create(EQ.format(ns="team-b"), elastic_quota("shared", "team-b", "1", "4"))
    front.start()
    assert front.wait(lambda: [e for e in front.events("team-b") if e["reason"] == "QuotaConflict"])
    assert front.scheduler.config_text.count("name: shared") == 1
    seq = front.scheduler.config_seq
    bad = elastic_quota("broken", "team-a", "3", "2")     # min above max
    front.create(EQ.format(ns="team-a"), bad)
    refused = front.wait(lambda: [e for e in front.events("team-a") if e["reason"] == "ConfigRefused"])
    assert "broken" in refused[0]["message"]
    assert front.scheduler.config_seq == seq and "broken" not in front.scheduler.config_text


def test_quota_subtrees_become_a_tree_and_pods_name_their_node(front: Front) -> None:
    front.create(QST.format(ns="kube-system"), subtree("context-root", "", [
        {"name": "context-root", "quotas": {"requests": {"cpu": "4", "memory": "16Gi"}}}]))
    front.create(QST.format(ns="kube-system"), subtree("context-root-children", "context-root", [
        {"name": "gold", "quotas": {"hardLimit": True, "requests": {"cpu": "2", "memory": "8Gi"}}},
        {"name": "bronze", "quotas": {"hardLimit": False, "requests": {"cpu": "1", "memory": "4Gi"}}}]))
    front.start()
    assert front.wait(lambda: "quota_context" in front.scheduler.config_text)
    for i in range(3):
        front.submit(pod(f"g{i}", labels={"quota_context": "gold"}))
    front.wait(lambda: not front.gated("g0") and not front.gated("g1"))
    message = front.wait(lambda: _condition(front, "g2"))
    assert "forest.quota" in message and "gold" in message
    front.submit(pod("free"))                     # names no node: not subject to the tree
    front.wait(lambda: not front.gated("free"))


def test_without_the_crds_the_front_still_runs() -> None:
    f = Front(Scheduler.from_yaml(CONFIG), emulator=Emulator(crds=False).start())
    try:
        f.namespace("team-a")
        f.node(node("n1"))
        f.start()
        f.submit(pod("p0"))
        f.wait(lambda: not f.gated("p0"))
        assert f.controller is not None and not f.controller.errors
    finally:
        f.close()


# the conversions, one rule at a time --------------------------------------------------------------
def test_quota_trees_follow_mcads_reading_of_quota_subtrees() -> None:
    trees = quota_trees([
        subtree("root", "", [{"name": "context-root", "quotas": {"requests": {
            "cpu": "1075m", "memory": "1045Mi", "nvidia.com/gpu": 16}}}]),
        subtree("kids", "context-root", [
            {"name": "gold", "quotas": {"hardLimit": False, "requests": {"cpu": "1075m", "memory": "450Mi"}}},
            {"name": "bronze", "quotas": {"hardLimit": True, "requests": {"cpu": "900m", "memory": "300Mi",
                                                                          "nvidia.com/gpu": "1.5"}}}]),
        {"apiVersion": "quota.codeflare.dev/v1alpha1", "kind": "QuotaSubtree",
         "metadata": {"name": "unlabelled", "namespace": "x"}, "spec": {"children": [{"name": "ignored"}]}},
    ])
    assert trees == [{"kind": "QuotaTree", "metadata": {"name": "quota_context"}, "spec": {
        "resourceNames": ["cpu", "memory", "nvidia.com/gpu"],
        "nodes": {
            "context-root": {"parent": "", "hard": "false",
                             "quota": {"cpu": "1075", "memory": "1095761920", "nvidia.com/gpu": "16"}},
            "gold": {"parent": "context-root", "hard": "false",
                     "quota": {"cpu": "1075", "memory": "471859200"}},
            # a non-integral count is dropped, as MCAD logs and drops it
            "bronze": {"parent": "context-root", "hard": "true",
                       "quota": {"cpu": "900", "memory": "314572800"}},
        }}}]


def test_quantities_are_written_the_kubernetes_way() -> None:
    assert quantity("vcore", 12000) == "12" and quantity("vcore", 500) == "500m"
    assert quantity("memory", 24 * 1024**3) == "24Gi" and quantity("memory", 1000) == "1000"
    assert quantity("pods", 3) == "3"


def test_a_resource_no_longer_used_is_removed_from_status_used() -> None:
    c = CustomQuotas()
    c.event("elasticquotas", "ADDED", elastic_quota("q", "ns", "1", "2"))
    busy = {"q": {"runtime": {"vcore": 1000}, "request": {"vcore": 1000, "nvidia.com/gpu": 1},
                  "used": {"vcore": 1000, "nvidia.com/gpu": 1}}}
    first = c.status_patches(busy)
    assert first[0][1]["status"]["used"] == {"cpu": "1", "nvidia.com/gpu": "1"}
    assert c.status_patches(busy) == []   # unchanged
    second = c.status_patches({"q": {"runtime": {"vcore": 1000}, "request": {}, "used": {}}})
    assert second[0][1]["status"]["used"] == {"cpu": None, "nvidia.com/gpu": None}
