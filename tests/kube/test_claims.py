"""DRA claims through the Kubernetes front (docs/flavors.md "Device quotas"): with device classes mapped
(Kueue's ``deviceClassMappings``) the front follows the ResourceClaimTemplates of the cluster and charges
each pod's ``spec.resourceClaims`` from them, so a quota on the mapped resource holds pods back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from quotaplane.cluster import Scheduler
from quotaplane.kube.controller import ControllerOptions
from tests.kube.harness import Front, node, pod

GPU = "example.com/gpu"
CONFIG = f"""
partitions:
- name: default
  placementrules:
  - name: tag
    value: namespace
    create: true
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: team-a
      resources: {{max: {{{GPU}: 2}}}}
"""


def _template(name: str, count: int, ns: str = "team-a") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": count,
                                            "capacity": {"requests": {"memory": "10Gi"}}}}]}}}}


def _claiming(name: str, template: str) -> dict[str, Any]:
    obj = pod(name)
    obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    return obj


@pytest.fixture
def front() -> Iterator[Front]:
    f = Front(Scheduler.from_yaml(CONFIG), options=ControllerOptions(
        reasons_every=0.05, device_classes={"gpu.example.com": GPU}))
    f.namespace("team-a")
    n = node("n1")
    # DRA devices are not in a node's allocatable: the root's size needs them (docs/flavors.md)
    n["status"]["allocatable"].update({GPU: "8", f"{GPU}.memory": "80Gi"})
    f.node(n)
    f.create("/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates", _template("two", 2))
    f.start()
    yield f
    f.close()


def test_a_pods_claims_are_charged_from_its_template(front: Front) -> None:
    """Two GPUs (and 20 Gi of their memory) per pod from the template listed at start-up: the first pod
    is admitted, the second waits for the queue's GPU max."""
    front.submit(_claiming("p0", "two"))
    front.submit(_claiming("p1", "two"))
    front.wait(lambda: not front.gated("p0"))
    p = front.scheduler.partition("default")
    alloc = p.allocation("uid-team-a-p0")
    assert alloc is not None
    assert alloc.resource.get(GPU) == 2 and alloc.resource.get(f"{GPU}.memory") == 2 * 10 * 2**30
    front.wait(lambda: p.get_ask("uid-team-a-p1") is not None)
    assert front.gated("p1")
    reasons = p.pending_reasons("uid-team-a-p1") or []
    assert any(v.code == "queue.max" and v.path == "root.team-a" for v in reasons)


def test_a_template_seen_after_its_pod_takes_the_pod_up(front: Front) -> None:
    """The template's watch may bring it after the pod's: the pod waits gated, with no ask (a Warning
    Event says why), and is charged and admitted once the template arrives."""
    front.submit(_claiming("late", "one"))
    front.wait(lambda: front.controller is not None and "uid-team-a-late" in front.controller.pods)
    p = front.scheduler.partition("default")
    assert p.get_ask("uid-team-a-late") is None and p.allocation("uid-team-a-late") is None
    assert front.gated("late")
    front.wait(lambda: any(e["reason"] == "ClaimsNotCharged" and "'one' not found" in e["message"]
                           for e in front.events()))
    front.create("/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates", _template("one", 1))
    front.wait(lambda: not front.gated("late"))
    alloc = p.allocation("uid-team-a-late")
    assert alloc is not None and alloc.resource.get(GPU) == 1


def test_without_device_classes_claim_templates_are_not_followed() -> None:
    """No mapping: the front neither lists nor watches claim templates (no call a cluster without DRA
    would refuse), and claims are not counted."""
    f = Front(Scheduler.from_yaml(CONFIG.replace(f"{GPU}: 2", "vcore: 8")))
    try:
        f.namespace("team-a")
        f.node(node("n1"))
        f.start()
        f.submit(_claiming("p0", "missing"))
        f.wait(lambda: not f.gated("p0"))
        assert not any(plural == "resourceclaimtemplates" for _, plural, _, _ in f.emulator.state.log)
    finally:
        f.close()


def test_a_claim_kueue_refuses_is_said_on_the_pod(front: Front) -> None:
    """KQ-D3: ``allocationMode: All`` cannot be charged — the pod stays gated, an Event names the claim."""
    t = _template("all", 1)
    t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "All"
    front.create("/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates", t)
    front.submit(_claiming("greedy", "all"))
    front.wait(lambda: any(e["reason"] == "ClaimsNotCharged" and "allocationMode 'All'" in e["message"]
                           for e in front.events()))
    assert front.gated("greedy")
    assert front.scheduler.partition("default").get_ask("uid-team-a-greedy") is None
