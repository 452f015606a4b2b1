"""The API server as the controller sees it: a thin layer over lightkube's asynchronous client.

Why lightkube: it is typed where types help (``lightkube-models`` per Kubernetes version), speaks every
patch type (JSON patch with ``test`` guards, merge, strategic), reaches subresources (``status``,
``eviction``), and its generic resources are plain dicts — the shape every reader in
:mod:`quotaplane.k8s.convert` takes, so objects are not converted twice. It is a client, not a
framework: the controller's order of work (list, reconcile, watch; one writer of the engine) stays in
quotaplane's hands, where kopf would own the loop and store its progress in annotations.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

from lightkube import AsyncClient, KubeConfig
from lightkube.generic_resource import (
    GenericNamespacedResource,
    create_global_resource,
    create_namespaced_resource,
)
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from quotaplane.kube.objects import mapping

__all__ = ["KubeApi", "client_config", "status_code"]

_RESOURCES: dict[str, Any] = {   # lightkube resource classes (typed per call inside lightkube)
    "pods": create_namespaced_resource("", "v1", "Pod", "pods"),
    "nodes": create_global_resource("", "v1", "Node", "nodes"),
    "namespaces": create_global_resource("", "v1", "Namespace", "namespaces"),
    "configmaps": create_namespaced_resource("", "v1", "ConfigMap", "configmaps"),
    "events": create_namespaced_resource("", "v1", "Event", "events"),
    "leases": create_namespaced_resource("coordination.k8s.io", "v1", "Lease", "leases"),
    # the custom resources the front reads when their CRDs are installed (deploy/crds)
    "elasticquotas": create_namespaced_resource("scheduling.sigs.k8s.io", "v1alpha1", "ElasticQuota",
                                                "elasticquotas"),
    "quotasubtrees": create_namespaced_resource("quota.codeflare.dev", "v1alpha1", "QuotaSubtree",
                                                "quotasubtrees"),
}


def client_config(server: str | None = None, token: str | None = None, kubeconfig: str | None = None
                  ) -> KubeConfig:
    """The client's configuration: an explicit ``server`` (and bearer ``token``), a kubeconfig file, or
    the environment (in-cluster service account, then ``~/.kube/config``)."""
    if server is not None:
        return KubeConfig.from_dict({
            "apiVersion": "v1", "kind": "Config", "current-context": "quotaplane",
            "clusters": [{"name": "quotaplane", "cluster": {"server": server.rstrip("/")}}],
            # lightkube needs a user entry even when the server wants no credentials
            "users": [{"name": "quotaplane", "user": {"token": token or "none"}}],
            "contexts": [{"name": "quotaplane", "context": {"cluster": "quotaplane", "user": "quotaplane"}}]})
    if kubeconfig is not None:
        return KubeConfig.from_file(kubeconfig)
    return KubeConfig.from_env()


def status_code(exc: BaseException) -> int | None:
    """The HTTP status of a failed API call (lightkube's ApiError, or the HTTP error under it)."""
    status = getattr(exc, "status", None)
    code = getattr(status, "code", None)
    if isinstance(code, int):
        return code
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def _meta(obj: Mapping[str, Any]) -> tuple[str, str | None]:
    meta = mapping(obj.get("metadata"))
    ns = meta.get("namespace")
    return str(meta.get("name", "")), ns if isinstance(ns, str) and ns else None


class KubeApi:
    """The calls the controller makes; every object in and out is a plain dict."""

    #: the kinds the controller watches
    KINDS: ClassVar[tuple[str, ...]] = ("namespaces", "nodes", "elasticquotas", "quotasubtrees", "configmaps",
                                        "pods")
    #: the kinds that exist only when their CRD is installed (a 404 listing them: not watched)
    OPTIONAL: ClassVar[tuple[str, ...]] = ("elasticquotas", "quotasubtrees")

    def __init__(self, config: KubeConfig, *, field_manager: str = "quotaplane") -> None:
        self.client: Any = AsyncClient(config=config, field_manager=field_manager)
        self.field_manager = field_manager

    async def close(self) -> None:
        """Close the connections."""
        await self.client.close()

    async def list_all(self, kind: str) -> list[dict[str, Any]]:
        """Every object of ``kind`` (all namespaces)."""
        return (await self.list_versioned(kind))[0]

    async def list_versioned(self, kind: str) -> tuple[list[dict[str, Any]], str | None]:
        """Every object of ``kind`` and the list's ``resourceVersion`` (where a watch takes over, so
        nothing that happens between the list and the watch is missed)."""
        res = _RESOURCES[kind]
        listing = self.client.list(res, namespace="*") if issubclass(res, GenericNamespacedResource) \
            else self.client.list(res)
        items = [dict(obj) async for obj in listing]
        try:
            version = listing.resourceVersion
        except Exception:       # no version on the answer (an emulator): the watch starts from now
            version = None
        return items, version if isinstance(version, str) and version else None

    async def watch(self, kind: str, resource_version: str | None = None
                    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(event type, object) of ``kind`` as they happen, after ``resource_version`` when given."""
        res = _RESOURCES[kind]
        stream = self.client.watch(res, namespace="*", resource_version=resource_version) \
            if issubclass(res, GenericNamespacedResource) \
            else self.client.watch(res, resource_version=resource_version)
        async for event_type, obj in stream:
            yield event_type, dict(obj)

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """One object (lightkube's ApiError with status 404 when absent)."""
        return dict(await self.client.get(_RESOURCES[kind], name, namespace=namespace))

    async def create(self, kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``obj`` (a dict shaped like the API object)."""
        res = _RESOURCES[kind]
        _, ns = _meta(obj)
        created = await self.client.create(res(dict(obj)), namespace=ns)
        return dict(created) if created is not None else dict(obj)

    async def patch_json(self, kind: str, obj: Mapping[str, Any], patch: list[dict[str, Any]]) -> None:
        """A JSON patch (RFC 6902; its ``test`` operations make it fail on a concurrent change)."""
        name, ns = _meta(obj)
        await self.client.patch(_RESOURCES[kind], name, patch, namespace=ns, patch_type=PatchType.JSON)

    async def patch_merge(self, kind: str, obj: Mapping[str, Any], patch: Mapping[str, Any]) -> None:
        """A JSON merge patch (RFC 7386)."""
        name, ns = _meta(obj)
        await self.client.patch(_RESOURCES[kind], name, dict(patch), namespace=ns,
                                patch_type=PatchType.MERGE)

    async def patch_status_condition(self, pod: Mapping[str, Any], condition: Mapping[str, Any]) -> None:
        """Set one pod condition through the ``status`` subresource; a strategic merge keyed by the
        condition's ``type`` keeps the others (the kubelet's and the scheduler's)."""
        name, ns = _meta(pod)
        res = _RESOURCES["pods"]
        await self.client.patch(res.Status, name, {"status": {"conditions": [dict(condition)]}},
                                namespace=ns, patch_type=PatchType.STRATEGIC)

    async def evict(self, pod: Mapping[str, Any], grace_seconds: int | None = None) -> None:
        """The Eviction API (``pods/eviction``): PodDisruptionBudgets are honoured (429 when one
        blocks it); the pod's UID is a precondition, so a re-created pod of the same name is safe."""
        name, ns = _meta(pod)
        uid = mapping(pod.get("metadata")).get("uid")
        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": ns}}
        options: dict[str, Any] = {}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        if isinstance(uid, str) and uid:
            options["preconditions"] = {"uid": uid}
        if options:
            body["deleteOptions"] = options
        eviction: Any = Pod.Eviction.from_dict(body)
        await self.client.create(eviction, name=name, namespace=ns)

    async def event(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        """Record a core/v1 Event about ``obj`` (what ``kubectl describe`` shows)."""
        name, ns = _meta(obj)
        meta = mapping(obj.get("metadata"))
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        await self.create("events", {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": ns or "default"},
            "involvedObject": {"apiVersion": obj.get("apiVersion", "v1"), "kind": obj.get("kind", "Pod"),
                               "name": name, "namespace": ns, "uid": meta.get("uid")},
            "type": event_type, "reason": reason, "message": message[:1024],
            "source": {"component": "quotaplane"}, "reportingComponent": "quotaplane",
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1})
