"""Kueue's objects read from the cluster (docs/from-kueue.md): once a ClusterQueue exists, the
ResourceFlavor, Cohort, ClusterQueue and LocalQueue objects define the front's queues; a pod labelled
``kueue.x-k8s.io/queue-name`` is placed in its LocalQueue's ClusterQueue and gated by its quota; a change
that cannot be applied is refused and reported on the object; the ConfigMap's other keys stay."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from quotaplane.cluster import Scheduler
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
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


def _obj(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": meta, "spec": spec}


def _cq(cpu: str) -> dict[str, Any]:
    return _obj("ClusterQueue", "team-cq", {"namespaceSelector": {}, "resourceGroups": [{
        "coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor", "resources": [
            {"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "16Gi"}]}]}]})


@pytest.fixture
def front() -> Iterator[Front]:
    f = Front(Scheduler.from_yaml(CONFIG))
    f.namespace("team-a")
    f.node(node("n1", cpu="8"))
    yield f
    f.close()


def test_kueue_objects_define_the_queues_and_local_queues_place_pods(front: Front) -> None:
    front.create(f"{KUEUE}/resourceflavors", _obj("ResourceFlavor", "default-flavor", {}))
    front.create(f"{KUEUE}/clusterqueues", _cq("1"))
    front.create(f"{KUEUE}/namespaces/team-a/localqueues",
                 _obj("LocalQueue", "user-queue", {"clusterQueue": "team-cq"}, "team-a"))
    front.start()
    front.wait(lambda: front.scheduler.config.partition("default").queue("root.team-cq") is not None)
    labels = {"kueue.x-k8s.io/queue-name": "user-queue"}
    front.submit(pod("p0", labels=labels))
    front.submit(pod("p1", labels=labels))
    front.wait(lambda: not front.gated("p0"))
    assert front.gated("p1")                            # the ClusterQueue's nominal quota: 1 cpu
    p = front.scheduler.partition("default")
    assert {a.queue_path for a in p.applications()} == {"root.team-cq"}
    assert "placementrules" in front.scheduler.config_text    # the ConfigMap's other keys stay
    # a bigger quota applies at once; an invalid one is refused and the running configuration stays
    r = front.kubectl.patch(f"{KUEUE}/clusterqueues/team-cq", json={"spec": {"stopPolicy": "Hold"}},
                            headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200
    front.wait(lambda: any(e.get("reason") == "ConfigRefused" for e in front.events("default")))
    fixed = {"spec": {"stopPolicy": None, "resourceGroups": _cq("2")["spec"]["resourceGroups"]}}
    r = front.kubectl.patch(f"{KUEUE}/clusterqueues/team-cq", json=fixed,
                            headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    front.wait(lambda: not front.gated("p1"))


def test_the_objects_compose_with_the_config_map() -> None:
    """Unit: the objects own queues, flavors and LocalQueues of the front's partition; a status change is
    no change; without a ClusterQueue the ConfigMap is applied as it is."""
    from ruamel.yaml import YAML

    from quotaplane.kube.kueue import KueueObjects

    k = KueueObjects()
    assert k.event("resourceflavors", "ADDED", _obj("ResourceFlavor", "default-flavor", {}))
    assert k.compose(CONFIG, "default") == CONFIG          # no ClusterQueue yet
    assert k.event("clusterqueues", "ADDED", _cq("1"))
    assert not k.event("clusterqueues", "MODIFIED", _cq("1") | {"status": {"pendingWorkloads": 3}})
    out = YAML(typ="safe").load(k.compose(CONFIG, "default"))["partitions"][0]
    assert out["placementrules"][0] == {"name": "provided", "create": False}
    assert out["placementrules"][1]["name"] == "tag"
    assert [q["name"] for q in out["queues"][0]["queues"]] == ["team-cq"]
    assert out["resourceflavors"] == [{"name": "default-flavor", "resources": ["vcore", "memory"]}]
    assert k.event("clusterqueues", "DELETED", _cq("1"))
    assert k.compose(CONFIG, "default") == CONFIG
