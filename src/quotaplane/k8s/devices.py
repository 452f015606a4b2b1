"""Device quotas: partitionable GPUs counted as resources (docs/flavors.md "Device quotas"; KQ-D1 … KQ-D3).

Two ways a pod asks for a slice of a GPU, each counted as far as its API pins it down:

- **MIG extended resources** (NVIDIA's device plugin, "mixed" strategy): ``nvidia.com/mig-3g.40gb: 2``
  asks for two instances of a profile of 3 compute slices and 40 GB. Besides the profile itself, such a
  request — and a node's allocatable of it — counts ``nvidia.com/mig.slices`` (3 × 2 = 6) and
  ``nvidia.com/mig.memory`` (40 × 2 = 80, in the profile's GB), so one quota can cap every profile
  together: ``max: {nvidia.com/mig.memory: 160}``.
- **DRA resource claims** (``resource.k8s.io``): a claim (or claim template) spec's device requests are
  charged as Kueue's device-class mapping says (``deviceClassMappings``, KQ-D1): each request of a mapped
  DeviceClass with ``allocationMode: ExactCount`` (the default) is ``count`` (default 1) of the mapped
  resource name; a capacity it requests per device (``capacity.requests``, e.g. ``memory: 10Gi``) is
  charged ``count ×`` that amount under ``NAME.CAPACITY`` (``example.com/gpu.memory``). What Kueue
  refuses is refused (KQ-D3): ``allocationMode: All``, ``firstAvailable``, constraints, config,
  ``adminAccess``, an unmapped device class, a direct ``resourceClaimName`` of a pod.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from quotaplane.errors import InputError
from quotaplane.resources import Resource

__all__ = ["MIG_MEMORY", "MIG_SLICES", "claim_resource", "claim_template_names", "mig_counters",
           "pod_claims_resource"]

#: the compute slices of every MIG instance asked for (a profile ``<G>g.<M>gb`` counts G each)
MIG_SLICES = "nvidia.com/mig.slices"
#: the memory of every MIG instance asked for, in the profiles' GB (``<G>g.<M>gb`` counts M each)
MIG_MEMORY = "nvidia.com/mig.memory"

# nvidia.com/mig-1g.10gb, nvidia.com/mig-1g.10gb+me, nvidia.com/mig-1g.5gb.me (media extensions)
_MIG = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb(?:[.+]me(?:\.all)?)?$")
_CLAIM_REFUSED = ("constraints", "config")
_REQUEST_REFUSED = ("firstAvailable", "adminAccess", "selectors")


def mig_counters(resources: Mapping[str, int]) -> dict[str, int]:
    """The MIG counters of ``resources`` (requests or a node's allocatable): slices and GB over every MIG
    profile it names; ``{}`` when it names none."""
    slices = memory = 0
    for name, amount in resources.items():
        match = _MIG.match(name)
        if match is not None and amount > 0:
            slices += int(match.group(1)) * amount
            memory += int(match.group(2)) * amount
    return {MIG_SLICES: slices, MIG_MEMORY: memory} if slices or memory else {}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _request_parts(request: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """A device request's own fields: ``exactly`` in resource.k8s.io/v1, the request itself before."""
    for key in _REQUEST_REFUSED:
        if request.get(key):
            raise InputError(f"{where}: {key} is not admissible with device quotas (KQ-D3)")
    exactly = request.get("exactly")
    if isinstance(exactly, Mapping):
        for key in _REQUEST_REFUSED:
            if exactly.get(key):
                raise InputError(f"{where}: {key} is not admissible with device quotas (KQ-D3)")
        return exactly
    return request


def _count(parts: Mapping[str, Any], where: str) -> int:
    mode = parts.get("allocationMode", "ExactCount")
    if mode != "ExactCount":
        raise InputError(f"{where}: allocationMode {mode!r} is not admissible: only ExactCount is (KQ-D3)")
    count = parts.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InputError(f"{where}: count must be a positive integer, got {count!r}")
    return count


def claim_resource(spec: Mapping[str, Any], device_classes: Mapping[str, str],
                   where: str = "resource claim") -> dict[str, int]:
    """What a ResourceClaim (or ResourceClaimTemplate's ``spec.spec``) ``spec`` is charged:
    ``device_classes`` maps a DeviceClass name to the resource name it counts as (Kueue's
    ``deviceClassMappings``). ``InputError`` naming the request for what is not admissible."""
    devices = _mapping(spec.get("devices"))
    for key in _CLAIM_REFUSED:
        if devices.get(key):
            raise InputError(f"{where}: devices.{key} is not admissible with device quotas (KQ-D3)")
    out: dict[str, int] = {}
    for i, request in enumerate(devices.get("requests") or []):
        if not isinstance(request, Mapping):
            raise InputError(f"{where}: devices.requests[{i}] must be a mapping")
        at = f"{where}: devices.requests[{i}] ({request.get('name', '?')})"
        parts = _request_parts(request, at)
        device_class = parts.get("deviceClassName")
        name = device_classes.get(str(device_class)) if device_class else None
        if name is None:
            raise InputError(f"{at}: device class {device_class!r} is not mapped to a resource "
                             "(deviceClassMappings)")
        count = _count(parts, at)
        out[name] = out.get(name, 0) + count
        capacity = _mapping(_mapping(parts.get("capacity")).get("requests"))
        for cap, quantity in capacity.items():
            ((_, amount),) = Resource.from_k8s({str(cap): quantity}).items()
            key = f"{name}.{cap}"
            out[key] = out.get(key, 0) + count * amount
    return out


def claim_template_names(pod: Mapping[str, Any]) -> set[str]:
    """The ResourceClaimTemplates a pod's ``spec.resourceClaims`` name."""
    return {str(name) for ref in _mapping(pod.get("spec")).get("resourceClaims") or []
            if (name := _mapping(ref).get("resourceClaimTemplateName"))}


def pod_claims_resource(pod: Mapping[str, Any], templates: Mapping[str, Mapping[str, Any]],
                        device_classes: Mapping[str, str]) -> dict[str, int]:
    """What a pod's ``spec.resourceClaims`` are charged: each names a ResourceClaimTemplate of
    ``templates`` (name → the template's ``spec``, whose ``spec`` is the claim's); a direct
    ``resourceClaimName`` is not admissible (KQ-D3: a shared claim cannot be charged to one pod)."""
    out: dict[str, int] = {}
    for ref in _mapping(pod.get("spec")).get("resourceClaims") or []:
        ref = _mapping(ref)
        where = f"resource claim {ref.get('name', '?')!r}"
        if ref.get("resourceClaimName"):
            raise InputError(f"{where}: a direct resourceClaimName is not admissible (KQ-D3); use a "
                             "resourceClaimTemplateName")
        template = ref.get("resourceClaimTemplateName")
        if template is None:
            continue
        found = templates.get(str(template))
        if found is None:
            raise InputError(f"{where}: ResourceClaimTemplate {template!r} not found")
        for name, amount in claim_resource(_mapping(found.get("spec")), device_classes, where).items():
            out[name] = out.get(name, 0) + amount
    return out
