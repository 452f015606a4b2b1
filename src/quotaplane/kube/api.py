"""The API server as the controller sees it: a thin layer over lightkube's asynchronous client, with
one retry policy for every call.

Why lightkube: it is typed where types help (``lightkube-models`` per Kubernetes version), speaks every
patch type (JSON patch with ``test`` guards, merge, strategic), reaches subresources (``status``,
``eviction``), and its generic resources are plain dicts — the shape every reader in
:mod:`quotaplane.k8s.convert` takes, so objects are not converted twice. It is a client, not a
framework: the controller's order of work (list, reconcile, watch; one writer of the engine) stays in
quotaplane's hands, where kopf would own the loop and store its progress in annotations.

The retry policy (:class:`RetryPolicy`, docs/kubernetes.md "Retries"): a call that fails with a
transient answer — no answer at all, ``429``, ``500``, ``502``, ``503``, ``504`` — is tried again after
an exponential backoff with full jitter, and never sooner than the server's ``Retry-After`` (client-go's
rule: a ``429 storage is (re)initializing`` while a CRD's storage starts, API Priority and Fairness
throttling). After ``attempts`` tries, or at once for an answer no retry changes (``403``, ``404``,
``409``, ``422`` …), the call raises :class:`ApiCallError`; every outcome is counted in
:class:`ApiStats` (the ``quotaplane_kube_api_*`` metrics). What the caller does then — report it and
come back at the next reconcile — is the controller's part.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from lightkube import AsyncClient, KubeConfig
from lightkube.core import generic_client
from lightkube.core import resource as lightkube_resource
from lightkube.generic_resource import (
    GenericNamespacedResource,
    create_global_resource,
    create_namespaced_resource,
)
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from quotaplane.kube.kubeconfig import client_config
from quotaplane.kube.objects import mapping
from quotaplane.kube.wire import Answer, Wire, wire_for

__all__ = ["ApiCallError", "ApiStats", "KubeApi", "RetryPolicy", "client_config", "retry_after",
           "status_code"]

T = TypeVar("T")
#: answers a retry may change (the server was busy, restarting or throttling)
_TRANSIENT = frozenset({429, 500, 502, 503, 504})
#: objects per list page (client-go's pager: ``defaultPageSize``)
PAGE_SIZE = 500
#: lists of one call started over after an expired continue token before the call fails
_RELISTS = 3
#: what a failed call raises: the HTTP library lightkube is built on (``httpx``, or its ``httpx2`` fork
#: in lightkube ≥ 1.0) — its status and transport errors — and the socket's own
_HTTP_ERRORS: tuple[type[BaseException], ...] = (generic_client.httpx.HTTPError,  # type: ignore[attr-defined]
                                                 OSError)

_RESOURCES: dict[str, Any] = {   # lightkube resource classes (typed per call inside lightkube)
    "pods": create_namespaced_resource("", "v1", "Pod", "pods"),
    "nodes": create_global_resource("", "v1", "Node", "nodes"),
    "namespaces": create_global_resource("", "v1", "Namespace", "namespaces"),
    "configmaps": create_namespaced_resource("", "v1", "ConfigMap", "configmaps"),
    "events": create_namespaced_resource("", "v1", "Event", "events"),
    "leases": create_namespaced_resource("coordination.k8s.io", "v1", "Lease", "leases"),
    "poddisruptionbudgets": create_namespaced_resource("policy", "v1", "PodDisruptionBudget",
                                                       "poddisruptionbudgets"),
    # the custom resources the front reads when their CRDs are installed (deploy/crds)
    "elasticquotas": create_namespaced_resource("scheduling.sigs.k8s.io", "v1alpha1", "ElasticQuota",
                                                "elasticquotas"),
    "quotasubtrees": create_namespaced_resource("quota.codeflare.dev", "v1alpha1", "QuotaSubtree",
                                                "quotasubtrees"),
    # Kueue's objects (docs/from-kueue.md)
    "resourceflavors": create_global_resource("kueue.x-k8s.io", "v1beta2", "ResourceFlavor",
                                              "resourceflavors"),
    "cohorts": create_global_resource("kueue.x-k8s.io", "v1beta2", "Cohort", "cohorts"),
    "clusterqueues": create_global_resource("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues"),
    "localqueues": create_namespaced_resource("kueue.x-k8s.io", "v1beta2", "LocalQueue", "localqueues"),
    # DRA claim templates, followed when device classes are mapped (docs/flavors.md "Device quotas")
    "resourceclaimtemplates": create_namespaced_resource("resource.k8s.io", "v1", "ResourceClaimTemplate",
                                                         "resourceclaimtemplates"),
}
#: kind → (API group, version, plural) of its request paths (lightkube's, for the calls on the wire)
_API_PATHS: dict[str, tuple[str, str, str]] = {
    kind: (info.resource.group, info.resource.version, info.plural)
    for kind, info in ((kind, lightkube_resource.api_info(res)) for kind, res in _RESOURCES.items())}
#: the kind of DRA's ResourceClaimTemplates (``resource.k8s.io/v1``)
CLAIM_TEMPLATES = "resourceclaimtemplates"


def status_code(exc: BaseException) -> int | None:
    """The HTTP status of a failed API call (:class:`ApiCallError`, lightkube's ApiError, or the HTTP
    error under it); None when no answer came."""
    if isinstance(exc, ApiCallError):
        return exc.code
    status = getattr(exc, "status", None)
    code = getattr(status, "code", None)
    if isinstance(code, int):
        return code
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def retry_after(exc: BaseException) -> float | None:
    """The server's ``Retry-After`` (seconds) on a failed call, else None."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class ApiCallError(Exception):
    """An API call that failed for good: ``call`` (``patch``, ``evict`` …), the HTTP ``code`` (None: no
    answer), the server's ``message``, after ``attempts`` tries; ``transient`` when more tries might
    have worked (the next reconcile tries again)."""

    def __init__(self, call: str, code: int | None, message: str, attempts: int, transient: bool,
                 causes: list[str] | None = None) -> None:
        super().__init__(f"{call}: {code or 'no answer'}: {message}" +
                         (f" (after {attempts} tries)" if attempts > 1 else ""))
        self.call = call
        self.code = code
        self.message = message
        self.attempts = attempts
        self.transient = transient
        #: the Status's ``details.causes`` messages (a PodDisruptionBudget names itself there)
        self.causes = causes or []


@dataclass(frozen=True)
class RetryPolicy:
    """How one API call is retried: ``attempts`` tries at most, the n-th retry after a random delay in
    ``[0, min(max_delay, base · factor^n)]`` (full jitter) and never before the server's
    ``Retry-After`` (itself capped at ``max_retry_after``)."""

    attempts: int = 5
    base: float = 0.2
    factor: float = 2.0
    max_delay: float = 10.0
    max_retry_after: float = 60.0

    def delay(self, retry: int, server: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry`` (0 = the first retry)."""
        backoff = rng.uniform(0.0, min(self.max_delay, self.base * self.factor ** retry))
        if server is None:
            return backoff
        return max(min(server, self.max_retry_after), backoff)


class ApiStats:
    """What the front's API calls did: counted by call and outcome (the ``quotaplane_kube_api_*``
    metrics)."""

    def __init__(self) -> None:
        #: (call, "ok" | "failed") → calls
        self.calls: Counter[tuple[str, str]] = Counter()
        #: (call, code) → retries
        self.retries: Counter[tuple[str, str]] = Counter()
        #: (call, code) → calls that failed for good
        self.failures: Counter[tuple[str, str]] = Counter()
        #: kind → lists started over because their continue token expired between pages
        self.relists: Counter[str] = Counter()


def _label(code: int | None) -> str:
    return str(code) if code is not None else "none"


def _body_message(exc: BaseException, message: Any, causes: list[str]) -> tuple[Any, list[str]]:
    """The message and causes of an undecoded answer's JSON body; the given ones when it has none."""
    try:
        body = exc.response.json()  # type: ignore[attr-defined]
    except Exception:
        body = None
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        found = mapping(body.get("details")).get("causes")
        return body["message"], [str(mapping(c).get("message")) for c in found if mapping(c).get("message")] \
            if isinstance(found, list) else []
    return message, causes


def _message(exc: BaseException) -> tuple[str, list[str]]:
    """The server's message and its causes' messages: from lightkube's decoded ``Status``, else from
    the answer's body (a subresource's error comes back undecoded)."""
    status = getattr(exc, "status", None)
    message = getattr(status, "message", None)
    details = getattr(status, "details", None)
    causes = [c.message for c in getattr(details, "causes", None) or [] if getattr(c, "message", None)]
    if not (isinstance(message, str) and message):
        message, causes = _body_message(exc, message, causes)
    return (message if isinstance(message, str) and message else f"{type(exc).__name__}: {exc}"), causes


def _meta(obj: Mapping[str, Any]) -> tuple[str, str | None]:
    meta = mapping(obj.get("metadata"))
    ns = meta.get("namespace")
    return str(meta.get("name", "")), ns if isinstance(ns, str) and ns else None


class KubeApi:
    """The calls the controller makes; every object in and out is a plain dict."""

    #: the kinds the controller watches
    KINDS: ClassVar[tuple[str, ...]] = ("namespaces", "nodes", "elasticquotas", "quotasubtrees",
                                        "resourceflavors", "cohorts", "clusterqueues", "localqueues",
                                        "configmaps", "pods")
    #: the kinds that exist only when their CRD is installed (a 404 listing them: not watched)
    OPTIONAL: ClassVar[tuple[str, ...]] = ("elasticquotas", "quotasubtrees", "resourceflavors", "cohorts",
                                           "clusterqueues", "localqueues", CLAIM_TEMPLATES)

    def __init__(self, config: KubeConfig, *, field_manager: str = "quotaplane",
                 retry: RetryPolicy | None = None, seed: int | None = None) -> None:
        self.client: Any = AsyncClient(config=config, field_manager=field_manager)
        self.field_manager = field_manager
        self.retry = retry or RetryPolicy()
        self.stats = ApiStats()
        #: objects per list page (0: one unpaged list)
        self.page_size = PAGE_SIZE
        self._rng = random.Random(seed)
        #: the single-object calls (get, create, the patches) on the wire directly when that behaves
        #: as lightkube's client does (quotaplane.kube.wire: ~50 µs of CPU a call instead of ~800);
        #: None: every call through lightkube
        self.wire: Wire | None = wire_for(self.client)

    async def close(self) -> None:
        """Close the connections."""
        if self.wire is not None:
            await self.wire.close()
        await self.client.close()

    def _target(self, kind: str, ns: str | None, name: str | None = None, sub: str | None = None,
                write: bool = False) -> str:
        """The request target of one object of ``kind`` (or of the collection when ``name`` is None),
        as lightkube's request builder makes it: the config's namespace when none is given, the
        field manager on writes."""
        assert self.wire is not None
        res = _RESOURCES[kind]
        group, version, plural = _API_PATHS[kind]
        path = f"api/{version}" if not group else f"apis/{group}/{version}"
        if issubclass(res, GenericNamespacedResource):
            path += f"/namespaces/{ns or self.client._client.namespace}"
        path += f"/{plural}"
        if name is not None:
            path += f"/{name}"
        if sub is not None:
            path += f"/{sub}"
        return self.wire.url(path, {"fieldManager": self.field_manager} if write else None)

    async def _send(self, method: str, target: str, body: Any = None,
                    content_type: str | None = None) -> Answer:
        """One call on the wire; an answer ``>= 400`` raised as lightkube raises it."""
        assert self.wire is not None
        data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
        answer = await self.wire.request(method, target, data, content_type)
        if answer.status >= 400:
            httpx = generic_client.httpx  # type: ignore[attr-defined]
            request = httpx.Request(method, f"http://{self.wire.host}{target}")
            response = httpx.Response(answer.status, headers=answer.headers, content=answer.body,
                                      request=request)
            self.client._client.raise_for_status(response)
        return answer

    async def call(self, call: str, fn: Callable[[], Awaitable[T]]) -> T:
        """``fn()`` under the retry policy (see the module docstring); :class:`ApiCallError` when it
        fails for good."""
        retry = 0
        while True:
            try:
                out = await fn()
            except asyncio.CancelledError:
                raise
            except ApiCallError as exc:     # a watch's ERROR event: already an answer
                code, message, causes = exc.code, exc.message, exc.causes
                exc_: BaseException = exc
            except _HTTP_ERRORS as exc:
                code = status_code(exc)
                message, causes = _message(exc)
                exc_ = exc
            else:
                self.stats.calls[(call, "ok")] += 1
                return out
            transient = code is None or code in _TRANSIENT
            if not transient or retry + 1 >= self.retry.attempts:
                self.stats.calls[(call, "failed")] += 1
                self.stats.failures[(call, _label(code))] += 1
                raise ApiCallError(call, code, message, retry + 1, transient, causes) from exc_
            self.stats.retries[(call, _label(code))] += 1
            await asyncio.sleep(self.retry.delay(retry, retry_after(exc_), self._rng))
            retry += 1

    async def list_all(self, kind: str) -> list[dict[str, Any]]:
        """Every object of ``kind`` (all namespaces)."""
        return (await self.list_versioned(kind))[0]

    async def list_versioned(self, kind: str, *, namespace: str | None = None,
                             fields: Mapping[str, str] | None = None
                             ) -> tuple[list[dict[str, Any]], str | None]:
        """Every object of ``kind`` (in ``namespace``, matching the field selector ``fields``) and the
        list's ``resourceVersion`` (where a watch takes over, so nothing that happens between the list
        and the watch is missed).

        Listed in pages of :attr:`page_size` (``limit`` and ``continue``, as client-go's pager does): the
        apiserver serves the pages from the first one's version, so they are one consistent list, and
        no single answer has to carry every pod of a large cluster. A continue token that expired
        between pages (``410``: compacted) starts the list over."""
        res = _RESOURCES[kind]

        async def run() -> tuple[list[dict[str, Any]], str | None]:
            selector = dict(fields) if fields else None
            for attempt in range(_RELISTS):
                if issubclass(res, GenericNamespacedResource):
                    listing = self.client.list(res, namespace=namespace or "*", fields=selector,
                                               chunk_size=self.page_size or None)
                else:
                    listing = self.client.list(res, fields=selector, chunk_size=self.page_size or None)
                items: list[dict[str, Any]] = []
                try:
                    async for obj in listing:
                        items.append(dict(obj))
                except _HTTP_ERRORS as exc:
                    if status_code(exc) != 410 or not items or attempt + 1 == _RELISTS:
                        raise
                    self.stats.relists[kind] += 1
                    continue
                try:
                    version = listing.resourceVersion
                except Exception:       # no version on the answer: the watch starts from now
                    version = None
                return items, version if isinstance(version, str) and version else None
            raise AssertionError("unreachable: the last attempt returns or raises")
        return await self.call("list", run)

    async def watch(self, kind: str, resource_version: str | None = None, *, namespace: str | None = None,
                    fields: Mapping[str, str] | None = None, timeout_seconds: int | None = None
                    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(event type, object) of ``kind`` as they happen, after ``resource_version`` when given, on
        one connection, with bookmarks (``BOOKMARK`` events carry only a fresh ``resourceVersion``, so a
        quiet watch resumes from a recent version instead of an expired one). An ``ERROR`` event (410
        Expired: the version left the server's window) raises :class:`ApiCallError`; the server ending
        the stream (``timeout_seconds``, its own limit) ends the iteration. Starting it is retried."""
        res = _RESOURCES[kind]
        # lightkube's own watch reconnects by itself and asks for no bookmarks: the request is built
        # with its request builder and streamed here, one connection per call
        gc = self.client._client
        params: dict[str, Any] = {"resourceVersion": resource_version, "allowWatchBookmarks": "true",
                                  "timeoutSeconds": timeout_seconds}
        if fields:
            params["fieldSelector"] = ",".join(f"{k}={v}" for k, v in sorted(fields.items()))
        ns = (namespace or "*") if issubclass(res, GenericNamespacedResource) else None
        br = gc.prepare_request("list", res=res, namespace=ns, watch=True, params=params)

        async def start() -> Any:
            req = gc._client.build_request(br.method, br.url, params=br.params, timeout=gc._watch_timeout)
            resp = await gc.send(req, stream=True)
            if resp.status_code >= 400:
                await resp.aread()
                await resp.aclose()
                gc.raise_for_status(resp)
            return resp
        resp = await self.call("watch", start)
        try:
            async for line in resp.aiter_lines():
                if not line.strip():
                    continue
                event = json.loads(line)
                event_type, obj = event.get("type"), event.get("object")
                if not isinstance(obj, dict) or not isinstance(event_type, str):
                    continue
                if event_type == "ERROR":
                    code = obj.get("code")
                    raise ApiCallError("watch", code if isinstance(code, int) else None,
                                       str(obj.get("message", "")), 1, code != 410)
                yield event_type, obj
        except _HTTP_ERRORS as exc:       # the stream broke: the caller resumes from its last version
            raise ApiCallError("watch", None, f"{type(exc).__name__}: {exc}", 1, True) from exc
        finally:
            await resp.aclose()

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """One object (:class:`ApiCallError` with code 404 when absent)."""
        async def run() -> dict[str, Any]:
            if self.wire is not None:
                return dict((await self._send("GET", self._target(kind, namespace, name))).json())
            return dict(await self.client.get(_RESOURCES[kind], name, namespace=namespace))
        return await self.call("get", run)

    async def create(self, kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``obj`` (a dict shaped like the API object); 409 when its name is taken."""
        res = _RESOURCES[kind]
        _, ns = _meta(obj)

        async def run() -> dict[str, Any]:
            if self.wire is not None:
                out = (await self._send("POST", self._target(kind, ns, write=True), dict(obj))).json()
                return dict(out) if isinstance(out, dict) else dict(obj)
            created = await self.client.create(res(dict(obj)), namespace=ns)
            return dict(created) if created is not None else dict(obj)
        return await self.call("event" if kind == "events" else "create", run)

    async def patch_json(self, kind: str, obj: Mapping[str, Any], patch: list[dict[str, Any]]) -> None:
        """A JSON patch (RFC 6902; its ``test`` operations make it fail with 422 on a concurrent
        change)."""
        name, ns = _meta(obj)

        async def run() -> None:
            if self.wire is not None:
                await self._send("PATCH", self._target(kind, ns, name, write=True), patch,
                                 PatchType.JSON.value)
                return
            await self.client.patch(_RESOURCES[kind], name, patch, namespace=ns, patch_type=PatchType.JSON)
        await self.call("patch", run)

    async def patch_merge(self, kind: str, obj: Mapping[str, Any], patch: Mapping[str, Any]) -> None:
        """A JSON merge patch (RFC 7386)."""
        name, ns = _meta(obj)

        async def run() -> None:
            if self.wire is not None:
                await self._send("PATCH", self._target(kind, ns, name, write=True), dict(patch),
                                 PatchType.MERGE.value)
                return
            await self.client.patch(_RESOURCES[kind], name, dict(patch), namespace=ns,
                                    patch_type=PatchType.MERGE)
        await self.call("patch", run)

    async def patch_status_condition(self, pod: Mapping[str, Any], condition: Mapping[str, Any]) -> None:
        """Set one pod condition through the ``status`` subresource; a strategic merge keyed by the
        condition's ``type`` keeps the others (the kubelet's and the scheduler's)."""
        name, ns = _meta(pod)
        res = _RESOURCES["pods"]

        body = {"status": {"conditions": [dict(condition)]}}

        async def run() -> None:
            if self.wire is not None:
                await self._send("PATCH", self._target("pods", ns, name, "status", write=True), body,
                                 PatchType.STRATEGIC.value)
                return
            await self.client.patch(res.Status, name, body, namespace=ns, patch_type=PatchType.STRATEGIC)
        await self.call("status", run)

    async def evict(self, pod: Mapping[str, Any], grace_seconds: int | None = None) -> None:
        """The Eviction API (``pods/eviction``): PodDisruptionBudgets are honoured (429 when one
        blocks it); the pod's UID is a precondition, so a re-created pod of the same name is safe. A pod
        already gone (404: an earlier try's answer was lost) counts as evicted."""
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

        async def run() -> None:
            await self.client.create(eviction, name=name, namespace=ns)
        try:
            await self.call("evict", run)
        except ApiCallError as exc:
            if exc.code != 404:
                raise

    async def event(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        """Record a core/v1 Event about ``obj`` (what ``kubectl describe`` shows). Its name is chosen
        once, so a retry whose first answer was lost meets 409 and counts as written."""
        name, ns = _meta(obj)
        meta = mapping(obj.get("metadata"))
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        try:
            await self._event(name, ns, meta, obj, stamp, event_type, reason, message)
        except ApiCallError as exc:
            if exc.code != 409:
                raise

    async def _event(self, name: str, ns: str | None, meta: Mapping[str, Any], obj: Mapping[str, Any],
                     stamp: str, event_type: str, reason: str, message: str) -> None:
        await self.create("events", {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": ns or "default"},
            "involvedObject": {"apiVersion": obj.get("apiVersion", "v1"), "kind": obj.get("kind", "Pod"),
                               "name": name, "namespace": ns, "uid": meta.get("uid")},
            "type": event_type, "reason": reason, "message": message[:1024],
            "source": {"component": "quotaplane"}, "reportingComponent": "quotaplane",
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1})
