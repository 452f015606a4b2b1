"""Device quotas (KQ-D1 … KQ-D3; docs/flavors.md "Device quotas"): MIG profiles counted as slices and
memory besides themselves, DRA resource claims charged through a device-class mapping, and what Kueue
refuses refused."""

from __future__ import annotations

from typing import Any

import pytest

from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.errors import InputError
from quotaplane.journal import MemoryJournal
from quotaplane.k8s.convert import pod_resource, resource_list
from quotaplane.k8s.devices import MIG_MEMORY, MIG_SLICES, claim_resource, mig_counters
from tests.partition.helpers import Clock


def _pod(limits: dict[str, str], claims: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"limits": limits}}]}
    if claims is not None:
        spec["resourceClaims"] = claims
    return {"metadata": {"name": "p"}, "spec": spec}


def test_mig_profiles_count_slices_and_memory() -> None:
    """Each ``<G>g.<M>gb`` instance counts G compute slices and M GB, media-extension variants too."""
    assert mig_counters({"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb+me": 1}) == {
        MIG_SLICES: 7, MIG_MEMORY: 90}
    assert mig_counters({"nvidia.com/gpu": 1}) == {}
    r = pod_resource(_pod({"nvidia.com/mig-1g.5gb": "2", "cpu": "1"}))
    assert dict(r) == {"nvidia.com/mig-1g.5gb": 2, MIG_SLICES: 2, MIG_MEMORY: 10, "pods": 1, "vcore": 1000}
    # a node's allocatable counts the same way, so the root's size holds the counters too
    assert resource_list({"nvidia.com/mig-1g.10gb": "7"}) == {"nvidia.com/mig-1g.10gb": 7, MIG_SLICES: 7,
                                                                MIG_MEMORY: 70}


def test_a_quota_on_mig_memory_caps_every_profile() -> None:
    text = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: inference
            resources: {max: {nvidia.com/mig.memory: 60}}
"""
    p = Scheduler.from_yaml(text, store=MemoryJournal(), clock=Clock()).partition("default")
    p.add_node("n", resource_list({"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2",
                                   "pods": "110"}))
    p.add_application("a", UserGroup("u"), queue="root.inference")
    assert p.allocate("a", "k1", pod_resource(_pod({"nvidia.com/mig-3g.40gb": "1"})))
    assert p.allocate("a", "k2", pod_resource(_pod({"nvidia.com/mig-1g.10gb": "2"})))
    d = p.allocate("a", "k3", pod_resource(_pod({"nvidia.com/mig-1g.10gb": "1"})))
    assert not d.allocated and d.reasons[0].code == "queue.max"
    assert "nvidia.com/mig.memory" in str(d.reasons[0].resource)


MAPPING = {"gpu.example.com": "example.com/gpu"}
TEMPLATE = {"spec": {"devices": {"requests": [
    {"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": 2,
                                 "capacity": {"requests": {"memory": "10Gi"}}}}]}}}


def test_a_claim_is_charged_its_device_count_and_capacity() -> None:
    """KQ-D1/KQ-D2: ExactCount of a mapped device class is ``count`` of its resource; a capacity asked
    per device is ``count ×`` that (resource.k8s.io/v1 ``exactly``; the older flat request too)."""
    assert claim_resource(TEMPLATE["spec"], MAPPING) == {"example.com/gpu": 2,
                                                         "example.com/gpu.memory": 20 * 2**30}
    flat = {"devices": {"requests": [{"name": "g", "deviceClassName": "gpu.example.com"}]}}
    assert claim_resource(flat, MAPPING) == {"example.com/gpu": 1}
    pod = _pod({"cpu": "1"}, [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}])
    r = pod_resource(pod, claim_templates={"two-gpus": TEMPLATE}, device_classes=MAPPING)
    assert r.get("example.com/gpu") == 2 and r.get("vcore") == 1000
    assert "example.com/gpu" not in pod_resource(pod)          # no mapping: claims are not charged


@pytest.mark.parametrize(("request_", "words"), [
    ({"name": "g", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "All"}},
     "allocationMode 'All' is not admissible"),
    ({"name": "g", "firstAvailable": [{"name": "a", "deviceClassName": "gpu.example.com"}]},
     "firstAvailable is not admissible"),
    ({"name": "g", "exactly": {"deviceClassName": "gpu.example.com", "adminAccess": True}},
     "adminAccess is not admissible"),
    ({"name": "g", "exactly": {"deviceClassName": "other.example.com"}}, "is not mapped to a resource"),
    ({"name": "g", "exactly": {"deviceClassName": "gpu.example.com", "count": 0}}, "positive integer"),
])
def test_what_kueue_refuses_is_refused(request_: dict[str, Any], words: str) -> None:
    """KQ-D3."""
    with pytest.raises(InputError, match=words):
        claim_resource({"devices": {"requests": [request_]}}, MAPPING)


def test_a_direct_claim_or_a_missing_template_is_refused() -> None:
    with pytest.raises(InputError, match="direct resourceClaimName is not admissible"):
        pod_resource(_pod({}, [{"name": "c", "resourceClaimName": "shared"}]), device_classes=MAPPING)
    with pytest.raises(InputError, match="ResourceClaimTemplate 'gone' not found"):
        pod_resource(_pod({}, [{"name": "c", "resourceClaimTemplateName": "gone"}]), device_classes=MAPPING)
    with pytest.raises(InputError, match=r"devices\.constraints is not admissible"):
        claim_resource({"devices": {"requests": [], "constraints": [{"matchAttribute": "x"}]}}, MAPPING)
