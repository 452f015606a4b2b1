"""Kubernetes objects → quotaplane requests and application tags (seed 004, reference §1.14 K8-1 … K8-3).

Conversion only: plain dicts in (the JSON of a Pod, a Namespace, an AdmissionReview), resources and
tags out. Nothing here talks to an API server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from quotaplane.config.bodies import load_json
from quotaplane.errors import InputError
from quotaplane.k8s.devices import mig_counters, pod_claims_resource
from quotaplane.resources import Resource

__all__ = [
    "ANNOTATION_GUARANTEED",
    "ANNOTATION_MAX_APPS",
    "ANNOTATION_MAX_CPU",
    "ANNOTATION_MAX_MEMORY",
    "ANNOTATION_PARENT_QUEUE",
    "ANNOTATION_QUOTA",
    "LABEL_KUEUE_QUEUE",
    "TAG_MAX_APPS",
    "TAG_NAMESPACE",
    "TAG_PARENT_QUEUE",
    "TAG_RESOURCE_GUARANTEED",
    "TAG_RESOURCE_QUOTA",
    "admission_review_request",
    "application_tags",
    "namespace_tags",
    "pod_application_id",
    "pod_namespace",
    "pod_queue",
    "pod_resource",
    "resource_list",
    "si_resource_json",
]

# k8shim constants.go
ANNOTATION_QUOTA = "yunikorn.apache.org/namespace.quota"
ANNOTATION_MAX_CPU = "yunikorn.apache.org/namespace.max.cpu"        # deprecated since 1.2.0
ANNOTATION_MAX_MEMORY = "yunikorn.apache.org/namespace.max.memory"  # deprecated since 1.2.0
ANNOTATION_GUARANTEED = "yunikorn.apache.org/namespace.guaranteed"
ANNOTATION_MAX_APPS = "yunikorn.apache.org/namespace.maxApps"
ANNOTATION_PARENT_QUEUE = "yunikorn.apache.org/parentqueue"

TAG_NAMESPACE = "namespace"
TAG_RESOURCE_QUOTA = "namespace.resourcequota"
TAG_RESOURCE_GUARANTEED = "namespace.resourceguaranteed"
TAG_MAX_APPS = "namespace.resourcemaxapps"
TAG_PARENT_QUEUE = "namespace.parentqueue"

_LABEL_APP_ID = "applicationId"
_ANNOTATION_APP_ID = "yunikorn.apache.org/app-id"
_LABEL_SPARK_APP = "spark-app-selector"
_LABEL_QUEUE = "queue"
_ANNOTATION_QUEUE = "yunikorn.apache.org/queue"
#: Kueue's label naming a workload's LocalQueue (in the pod's namespace)
LABEL_KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"

_GO_ATOI = re.compile(r"^[+-]?[0-9]+$")
_POD_LEVEL = {"cpu": "vcore", "memory": "memory"}
_MIG_PREFIX = "nvidia.com/mig-"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, Mapping)]


@lru_cache(maxsize=4096)
def _quantity(name: str, text: str) -> tuple[str, int]:
    # Pods repeat the same few quantity strings: cache the exact (Fraction based) parse.
    ((key, amount),) = Resource.from_k8s({name: text}).items()
    return key, amount


def resource_list(raw: Mapping[str, Any]) -> dict[str, int]:
    """A Kubernetes ResourceList in internal units (``Resource.from_k8s`` semantics, cached): ``cpu`` as
    ``vcore`` in milli, every other resource by its value (memory in bytes, ``pods`` a count); MIG
    profiles also count ``nvidia.com/mig.slices`` and ``nvidia.com/mig.memory``
    (:mod:`quotaplane.k8s.devices`)."""
    out: dict[str, int] = {}
    for name, value in raw.items():
        if isinstance(name, str) and name and isinstance(value, str):
            key, amount = _quantity(name, value)
        else:
            ((key, amount),) = Resource.from_k8s({name: value}).items()
        out[key] = out.get(key, 0) + amount
    if any(key.startswith(_MIG_PREFIX) for key in out):   # device quotas: MIG slices and memory too
        for name, amount in mig_counters(out).items():
            out[name] = out.get(name, 0) + amount
    return out


def _max_into(target: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if name not in target or amount > target[name]:
            target[name] = amount


def _add_into(target: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        target[name] = target.get(name, 0) + amount


def _container_request(container: Mapping[str, Any], status: Mapping[str, Any] | None) -> dict[str, int]:
    """K8-1/K8-3: one container's request, the max of its spec requests and what the status reports
    (``allocatedResources``, ``resources.requests``, for in-place resized pods)."""
    resources = _mapping(container.get("resources"))
    # Kubernetes defaulting: a name with a limit but no request requests its limit.
    raw = dict(_mapping(resources.get("limits")))
    raw.update(_mapping(resources.get("requests")))
    out = resource_list(raw)
    if status is not None:
        _max_into(out, resource_list(_mapping(status.get("allocatedResources"))))
        _max_into(out, resource_list(_mapping(_mapping(status.get("resources")).get("requests"))))
    return out


def _name(container: Mapping[str, Any]) -> str:
    name = container.get("name")
    return name if isinstance(name, str) else ""


def _by_name(statuses: Any) -> dict[str, Mapping[str, Any]]:
    return {_name(s): s for s in _list(statuses) if _name(s)}


def _is_sidecar(container: Mapping[str, Any]) -> bool:
    # A sidecar is an init container with restartPolicy Always (KEP-753).
    return container.get("restartPolicy") == "Always"


def _init_containers_into(total: dict[str, int], init_containers: list[tuple[Any, dict[str, int]]]) -> None:
    """Sidecars add to the pod for its whole life; the pod is at least what each init step needs."""
    for c, request in init_containers:
        if _is_sidecar(c):
            _add_into(total, request)
    sidecars: dict[str, int] = {}
    for c, request in init_containers:
        if _is_sidecar(c):
            _add_into(sidecars, request)
            during = dict(sidecars)
        else:
            during = dict(request)
            _add_into(during, sidecars)
        _max_into(total, during)


def pod_resource(pod: Mapping[str, Any], *, claim_templates: Mapping[str, Mapping[str, Any]] | None = None,
                 device_classes: Mapping[str, str] | None = None) -> Resource:
    """K8-3: the resource request of a pod, in internal units (``vcore`` milli, ``memory`` bytes).

    ``pods: 1`` plus, for each container, the max of its spec requests and its status resources;
    init containers: the pod size is the max of (all containers + all sidecars) and, for each init
    container, its own request plus the sidecars started before it (a sidecar: the sidecars up to and
    including itself); pod-level ``spec.resources.requests`` (cpu, memory) replace the container
    totals; ``spec.overhead`` is added. Raises ValueError for an invalid quantity.
    """
    spec = _mapping(pod.get("spec"))
    status = _mapping(pod.get("status"))
    statuses = _by_name(status.get("containerStatuses"))
    init_statuses = _by_name(status.get("initContainerStatuses"))

    total: dict[str, int] = {}
    for c in _list(spec.get("containers")):
        _add_into(total, _container_request(c, statuses.get(_name(c))))

    _init_containers_into(total, [(c, _container_request(c, init_statuses.get(_name(c))))
                                  for c in _list(spec.get("initContainers"))])
    pod_resources = _mapping(spec.get("resources"))
    # like a container: a pod-level name with a limit but no request requests its limit
    pod_level = dict(_mapping(pod_resources.get("limits")))
    pod_level.update(_mapping(pod_resources.get("requests")))
    if pod_level:
        total.update(resource_list({k: v for k, v in pod_level.items() if k in _POD_LEVEL}))

    overhead = _mapping(spec.get("overhead"))
    if overhead:
        _add_into(total, resource_list(overhead))
    if device_classes is not None:
        _add_into(total, pod_claims_resource(pod, claim_templates or {}, device_classes))
    total["pods"] = 1
    return Resource({k: total[k] for k in sorted(total)})


# ----------------------------------------------------------------------------------------------------
# namespace annotations -> application tags
# ----------------------------------------------------------------------------------------------------
def si_resource_json(resource: Mapping[str, int]) -> str:
    """The JSON of a YuniKorn SI ``Resource`` as the k8shim writes it into a tag (Go ``json.Marshal``:
    sorted names, compact, a zero value omitted): ``{"resources":{"vcore":{"value":5000}}}``."""
    body = {name: ({"value": resource[name]} if resource[name] else {}) for name in sorted(resource)}
    return json.dumps({"resources": body}, separators=(",", ":"))


def _annotations(namespace: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if namespace is None:
        return {}
    if "metadata" in namespace or namespace.get("kind") == "Namespace":
        return _mapping(_mapping(namespace.get("metadata")).get("annotations"))
    return namespace


def _quota_from_json(text: Any) -> Resource | None:
    # k8shim: a JSON object of name -> quantity string; any error ignores the whole annotation.
    if not isinstance(text, str):
        return None
    try:
        data = load_json(text, "a namespace quota annotation")
    except ValueError:
        return None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        return None
    return _quota_from_map(data)


def _quota_from_map(data: Mapping[str, str]) -> Resource | None:
    try:
        return Resource.from_k8s(data)
    except (ValueError, TypeError):
        return None


def _resource_tag(resource: Resource | None) -> str | None:
    if resource is None or resource.is_zero():
        return None  # a zero result gives no tag
    return si_resource_json(resource)


def _namespace_quota(annotations: Mapping[str, Any]) -> Resource | None:
    """``namespace.quota``, else the deprecated ``namespace.max.cpu`` / ``namespace.max.memory``."""
    quota_text = annotations.get(ANNOTATION_QUOTA)
    if quota_text:
        return _quota_from_json(quota_text)  # the new annotation wins over the deprecated ones
    legacy = {name: value for name, value in (("cpu", annotations.get(ANNOTATION_MAX_CPU)),
                                              ("memory", annotations.get(ANNOTATION_MAX_MEMORY))) if value}
    return _quota_from_map(legacy) if legacy else None


def namespace_tags(namespace: Mapping[str, Any] | None) -> dict[str, str]:
    """Application tags from namespace annotations (reference §1.14 table).

    ``namespace`` is a Namespace object (``metadata.annotations`` is read) or the annotations mapping
    itself. Produces ``namespace.resourcequota`` (from ``namespace.quota``, else the deprecated
    ``namespace.max.cpu``/``namespace.max.memory``), ``namespace.resourceguaranteed``,
    ``namespace.resourcemaxapps`` and ``namespace.parentqueue``. Resource tags hold SI JSON; values
    that do not parse, or are zero, give no tag. The ``namespace`` tag itself comes from
    :func:`application_tags`.
    """
    annotations = _annotations(namespace)
    tags: dict[str, str] = {}

    value = _resource_tag(_namespace_quota(annotations))
    if value is not None:
        tags[TAG_RESOURCE_QUOTA] = value

    value = _resource_tag(_quota_from_json(annotations.get(ANNOTATION_GUARANTEED)))
    if value is not None:
        tags[TAG_RESOURCE_GUARANTEED] = value

    max_apps = annotations.get(ANNOTATION_MAX_APPS)
    if isinstance(max_apps, str) and _GO_ATOI.fullmatch(max_apps) and int(max_apps) >= 0:
        tags[TAG_MAX_APPS] = max_apps  # the annotation text, as the k8shim passes it on

    parent = annotations.get(ANNOTATION_PARENT_QUEUE)
    if isinstance(parent, str) and parent:
        tags[TAG_PARENT_QUEUE] = parent
    return tags


def pod_namespace(pod: Mapping[str, Any], default: str = "default") -> str:
    """The pod's namespace (``metadata.namespace``), ``default`` when unset."""
    ns = _mapping(pod.get("metadata")).get("namespace")
    return ns if isinstance(ns, str) and ns else default


def application_tags(pod: Mapping[str, Any], namespace: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The tags the k8shim gives an application: ``namespace`` = the pod's namespace (else the
    namespace object's name), plus :func:`namespace_tags` of the namespace."""
    ns_name = _mapping(pod.get("metadata")).get("namespace")
    if not (isinstance(ns_name, str) and ns_name) and namespace is not None:
        ns_name = _mapping(namespace.get("metadata")).get("name")
    tags = {TAG_NAMESPACE: ns_name if isinstance(ns_name, str) and ns_name else "default"}
    tags.update(namespace_tags(namespace))
    return tags


def _label_or_annotation(pod: Mapping[str, Any], *keys: str) -> str | None:
    meta = _mapping(pod.get("metadata"))
    labels, annotations = _mapping(meta.get("labels")), _mapping(meta.get("annotations"))
    for key in keys:
        for source in (annotations, labels):
            value = source.get(key)
            if isinstance(value, str) and value:
                return value
    return None


def pod_application_id(pod: Mapping[str, Any]) -> str:
    """The application a pod belongs to (k8shim ``GetApplicationIDFromPod``): the
    ``yunikorn.apache.org/app-id`` annotation/label, the ``applicationId`` label, the
    ``spark-app-selector`` label, else ``yunikorn-<namespace>-autogen``."""
    app_id = _label_or_annotation(pod, _ANNOTATION_APP_ID, _LABEL_APP_ID, _LABEL_SPARK_APP)
    return app_id if app_id else f"yunikorn-{pod_namespace(pod)}-autogen"


def pod_queue(pod: Mapping[str, Any],
              local_queues: Mapping[tuple[str, str], str] | None = None) -> str | None:
    """The queue a pod asks for (``yunikorn.apache.org/queue`` annotation/label or ``queue`` label);
    else, with Kueue's LocalQueues (``(namespace, name)`` → queue path, docs/from-kueue.md), the queue
    of the LocalQueue its ``kueue.x-k8s.io/queue-name`` label names in its namespace."""
    found = _label_or_annotation(pod, _ANNOTATION_QUEUE, _LABEL_QUEUE)
    if found is None and local_queues:
        name = _mapping(_mapping(pod.get("metadata")).get("labels")).get(LABEL_KUEUE_QUEUE)
        if isinstance(name, str):
            found = local_queues.get((pod_namespace(pod), name))
    return found


def _review_parts(review: Any) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The ``request`` of an AdmissionReview and its ``object`` (ValueError when either is missing)."""
    if not isinstance(review, Mapping):
        raise InputError("an AdmissionReview must be a JSON object")
    request = review.get("request")
    if not isinstance(request, Mapping):
        raise InputError("AdmissionReview without a 'request'")
    obj = request.get("object")
    if not isinstance(obj, Mapping):
        raise InputError("AdmissionReview request without an 'object'")
    return request, obj


def admission_review_request(review: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The pod and its namespace name from an ``admission.k8s.io/v1`` AdmissionReview.

    Raises ValueError when the review has no ``request`` or the request object is not a Pod.
    """
    request, obj = _review_parts(review)
    kind = obj.get("kind")
    req_kind = _mapping(request.get("kind")).get("kind")
    if (kind is not None and kind != "Pod") or (req_kind is not None and req_kind != "Pod"):
        raise InputError(f"AdmissionReview object is a {kind or req_kind}, not a Pod")
    namespace = request.get("namespace")
    if not (isinstance(namespace, str) and namespace):
        namespace = pod_namespace(obj)
    return dict(obj), namespace
