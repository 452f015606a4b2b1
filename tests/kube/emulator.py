"""A Kubernetes API server for the front's tests: kmock serves HTTP and discovery; the API objects are
served here, with the behaviour of a real kube-apiserver that the front depends on and kmock lacks.

What a real apiserver does and this one reproduces (each with the upstream source it follows):

* **resourceVersion.** One counter for the whole store; every write gives the object the next value; a
  list answers the current one (etcd's revision, as the apiserver's ``GetList`` does).
* **Watches from a resourceVersion** (``cacher.Watch``, ``watch_cache.go getAllEventsSinceLocked``):
  the events after it, from a bounded history window; a version older than the window is answered
  with an ``ERROR`` event carrying ``410 Expired`` "too old resource version: N (M)" and the stream
  ends. Without a version: every current object as ``ADDED``, then live events. ``allowWatchBookmarks``
  gets ``BOOKMARK`` events carrying the current version; ``timeoutSeconds`` ends the stream (so does
  :attr:`ApiState.watch_timeout`, the server's own limit). ``fieldSelector`` (``metadata.name``,
  ``metadata.namespace``, any dotted field) and ``labelSelector`` (``k=v``, ``k!=v``, ``k``) filter
  lists and watches.
* **Lists in pages** (``storage/etcd3/store.go GetList``, ``storage/continue.go``): ``limit`` answers at
  most that many items and, when more remain, ``metadata.continue`` (base64url JSON ``{"v":
  "meta.k8s.io/v1", "rv": N, "start": key}``) and ``remainingItemCount`` (without selectors); a
  ``continue`` reads the same list at the first page's version, so the pages are one consistent list
  whatever was written between them. A token whose version was compacted is ``410 Expired`` ("The
  provided continue parameter is too old…"); a malformed one ``400`` "continue key is not valid".
* **A kind whose storage is (re)initialising** (a CRD just created, an apiserver restart:
  ``cacher.go``, ``errors.NewTooManyRequests(err.Error(), calculateRetryAfterForUnreadyCache(…))``):
  ``429 TooManyRequests`` "storage is (re)initializing" with ``Retry-After`` (≥ 1 s) and
  ``details.retryAfterSeconds``.
* **Patches**: JSON patch (RFC 6902; a failed ``test`` is ``422``), merge patch (RFC 7386), strategic
  merge patch with the list merge keys of the core types (``conditions`` by ``type``,
  ``schedulingGates``/``containers`` by ``name``, ``$patch: delete``; refused with ``415`` for custom
  resources); the ``status`` subresource changes only ``status``, the main resource never changes a
  kind's ``status`` when it has that subresource. A ``metadata.resourceVersion`` in a patch is a
  precondition (``409 Conflict``).
* **Pod update validation** (``validation.go ValidatePodUpdate``, ``validateOnlyDeletedSchedulingGates``):
  scheduling gates may only be removed (``422`` "only deletion is allowed, but found new scheduling
  gate 'x'"); the spec is otherwise immutable but for the fields the apiserver lets change (images,
  ``activeDeadlineSeconds``, added tolerations, a gated pod's added ``nodeSelector`` keys); a pod is
  bound only through its ``binding`` subresource.
* **Graceful deletion** (``pkg/registry/core/pod/strategy.go CheckGracefulDelete``): with
  :attr:`ApiState.graceful`, deleting a pod bound to a node sets ``deletionTimestamp`` and the pod stays
  until the kubelet (:meth:`Emulator.finish`) is done; an unbound pod goes at once. Finalizers hold
  any object until they are removed. ``preconditions.uid``/``resourceVersion`` are checked (``409``).
* **The Eviction API** (``pkg/registry/core/pod/storage/eviction.go``): a pod that is terminal,
  ``Pending`` or terminating is deleted without asking its PodDisruptionBudget; otherwise a matching PDB
  with no disruption allowed answers ``429`` "Cannot evict pod as it would violate the pod's disruption
  budget." (cause ``DisruptionBudget``: "The disruption budget X needs N healthy pods and has M
  currently"); more than one PDB is a ``500``. An accepted eviction sets the ``DisruptionTarget``
  condition to reason ``EvictionByEvictionAPI``, message "Eviction API: evicting" — replacing one of the
  same type (``addConditionAndDeletePod``, ``podutil.UpdatePodCondition``) — then deletes the pod.
  ``disruptionsAllowed`` is computed the way the disruption controller does (healthy = running, not
  terminating, matching pods; ``minAvailable`` or ``maxUnavailable``).
* **Events and creates**: a name taken is ``409 AlreadyExists``; the server sets ``uid``,
  ``creationTimestamp``, ``resourceVersion``, ``generation``; list items of built-in kinds carry no
  ``kind``/``apiVersion``.

Test levers (none of them changes the rules above): :class:`Faults` refuses a share of calls of chosen
types at random, with the transient answers a real cluster gives (429 with ``Retry-After``, 500
"etcdserver: request timed out", 503, an applied write whose answer is lost, a watch dropped mid-way);
:meth:`Emulator.delay` slows chosen calls; :meth:`Emulator.compact` drops the watch history (etcd
compaction); :meth:`Emulator.restart` is an apiserver restart (watches cut, history gone, every kind
initialising for a while); ``kubelet=True`` binds every ungated pod to a node and runs it.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import copy
import datetime as dt
import itertools
import json
import random
import socket
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp.web
import jsonpatch
import kmock

__all__ = ["ApiError", "ApiState", "Emulator", "Faults", "free_port"]


def _copy(value: Any) -> Any:
    """A deep copy of a JSON value — what every stored object, patch and answer is: dicts and lists
    copied, scalars shared; anything else through :func:`copy.deepcopy`. An order of magnitude cheaper
    than ``copy.deepcopy`` (no memo), which was most of the emulator's CPU per pod at Kueue's shapes
    (benchmarks/kube_shapes.py)."""
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    if kind in (str, int, float, bool) or value is None:
        return value
    return copy.deepcopy(value)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str
    namespaced: bool
    status: bool            # has a status subresource
    custom: bool = False    # a custom resource (no strategic merge patch)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


KINDS: dict[str, Kind] = {
    "pods": Kind("", "v1", "Pod", True, True),
    "nodes": Kind("", "v1", "Node", False, True),
    "namespaces": Kind("", "v1", "Namespace", False, True),
    "configmaps": Kind("", "v1", "ConfigMap", True, False),
    "events": Kind("", "v1", "Event", True, False),
    "leases": Kind("coordination.k8s.io", "v1", "Lease", True, False),
    "poddisruptionbudgets": Kind("policy", "v1", "PodDisruptionBudget", True, True),
    "resourceclaimtemplates": Kind("resource.k8s.io", "v1", "ResourceClaimTemplate", True, False),
    # deploy/crds: neither declares a status subresource
    "elasticquotas": Kind("scheduling.sigs.k8s.io", "v1alpha1", "ElasticQuota", True, False, True),
    "quotasubtrees": Kind("quota.codeflare.dev", "v1alpha1", "QuotaSubtree", True, False, True),
    # Kueue's (config/components/crd): each declares a status subresource
    "resourceflavors": Kind("kueue.x-k8s.io", "v1beta2", "ResourceFlavor", False, False, True),
    "cohorts": Kind("kueue.x-k8s.io", "v1beta2", "Cohort", False, True, True),
    "clusterqueues": Kind("kueue.x-k8s.io", "v1beta2", "ClusterQueue", False, True, True),
    "localqueues": Kind("kueue.x-k8s.io", "v1beta2", "LocalQueue", True, True, True),
}
CRDS = ("elasticquotas", "quotasubtrees", "resourceflavors", "cohorts", "clusterqueues", "localqueues")
#: list merge keys of the strategic merge patch (k8s.io/api core/v1 types' patchMergeKey)
MERGE_KEYS = {"conditions": "type", "schedulingGates": "name", "containers": "name", "initContainers": "name",
              "ownerReferences": "uid", "volumes": "name", "env": "name"}
#: pod spec fields an update may change (ValidatePodUpdate's mungedPodSpec), besides the gates
_POD_MUTABLE = ("activeDeadlineSeconds", "tolerations", "schedulingGates", "nodeSelector", "affinity",
                "terminationGracePeriodSeconds")


class ApiError(Exception):
    """An answer other than success: a ``Status`` object with ``code`` (and ``Retry-After``)."""

    def __init__(self, code: int, reason: str, message: str, *, retry_after: int = 0,
                 causes: list[dict[str, str]] | None = None, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.retry_after = retry_after
        self.details = dict(details or {})
        if causes:
            self.details["causes"] = causes
        if retry_after:
            self.details["retryAfterSeconds"] = retry_after

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            out["details"] = self.details
        return out


def _not_found(plural: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{plural} "{name}" not found', details={"name": name, "kind": plural})


def _now() -> str:
    return dt.datetime.now(tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _dig(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def _selected(obj: Mapping[str, Any], fields: str | None, labels: str | None) -> bool:
    for term in (fields or "").split(","):
        if not term:
            continue
        neg = "!=" in term
        key, _, value = term.partition("!=" if neg else "=")
        value = value.lstrip("=")
        actual = _dig(obj, key.strip())
        actual = "" if actual is None else str(actual)
        if (actual == value) == neg:
            return False
    have = _meta(obj).get("labels") or {}
    for term in (labels or "").split(","):
        term = term.strip()
        if not term:
            continue
        if "!=" in term:
            key, _, value = term.partition("!=")
            if have.get(key) == value:
                return False
        elif "=" in term:
            key, _, value = term.partition("=")
            if have.get(key) != value.lstrip("="):
                return False
        elif term.startswith("!"):
            if term[1:] in have:
                return False
        elif term not in have:
            return False
    return True


def strategic_merge(base: Any, patch: Any, key: str | None = None) -> Any:
    """A strategic merge patch of the core types: maps merge (``null`` deletes), lists of objects with a
    merge key merge by it (``$patch: delete`` removes the entry), other lists are replaced."""
    if isinstance(patch, dict) and isinstance(base, dict):
        out = dict(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            elif k in out:
                out[k] = strategic_merge(out[k], v, k)
            else:
                out[k] = strategic_merge(None, v, k) if isinstance(v, list) else _copy(v)
        return out
    if isinstance(patch, list) and key in MERGE_KEYS:
        mkey = MERGE_KEYS[key]
        items = [_copy(i) for i in (base if isinstance(base, list) else [])]
        for entry in patch:
            if not isinstance(entry, dict) or mkey not in entry:
                continue
            found = next((i for i, old in enumerate(items)
                          if isinstance(old, dict) and old.get(mkey) == entry[mkey]), None)
            if entry.get("$patch") == "delete":
                if found is not None:
                    items.pop(found)
            elif found is not None:
                items[found] = strategic_merge(items[found], entry)
            else:
                items.append(_copy(entry))
        return items
    return _copy(patch)


def merge_patch(base: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return _copy(patch)
    out = dict(base) if isinstance(base, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


@dataclass
class Faults:
    """Refuse ``rate`` of the calls whose type is in ``calls`` (see :func:`call_type`), at random with
    ``seed``, with a transient answer drawn from ``kinds``."""

    rate: float = 0.2
    seed: int = 0
    calls: frozenset[str] = frozenset({"get", "list", "watch", "create", "patch", "status", "event", "evict",
                                       "delete"})
    kinds: tuple[str, ...] = ("429", "500", "503", "lost")
    retry_after: int = 1
    #: the first call of each type is refused whatever the draw (every type is exercised)
    first: bool = False
    #: how many calls of each type were refused (test reports)
    refused: Counter[str] = field(default_factory=Counter)
    seen: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def draw(self, call: str) -> str | None:
        if call not in self.calls:
            return None
        self.seen[call] += 1
        if not (self.first and self.seen[call] == 1) and self.rng.random() >= self.rate:
            return None
        self.refused[call] += 1
        # an answer lost after the change was made (reads change nothing; a watch is dropped mid-way)
        kinds = [k for k in self.kinds if k != "lost" or call not in ("get", "list")]
        return self.rng.choice(kinds)


def call_type(method: str, plural: str, sub: str | None, watch: bool, name: str | None) -> str:
    """The type of a call, as :class:`Faults` names them."""
    if method == "GET":
        return "watch" if watch else ("get" if name else "list")
    if method == "POST":
        return "evict" if sub == "eviction" else ("event" if plural == "events" else "create")
    if method == "PATCH":
        return "status" if sub == "status" else "patch"
    return method.lower()


@dataclass
class _Watcher:
    plural: str
    namespace: str | None
    fields: str | None
    labels: str | None
    queue: asyncio.Queue[dict[str, Any] | None]


class ApiState:
    """The store and its rules (runs on the emulator's loop)."""

    def __init__(self, crds: bool = True, kubelet: bool = False, graceful: bool = False) -> None:
        self.served = {k: v for k, v in KINDS.items() if crds or k not in CRDS}
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.rv = 1000
        #: (resourceVersion, plural, type, object) of recent changes; older ones are gone (etcd compaction)
        self.history: list[tuple[int, str, str, dict[str, Any]]] = []
        self.history_limit = 10_000
        #: a watch from a version below this one is answered 410
        self.floor = self.rv
        self.watchers: list[_Watcher] = []
        #: kind → requests still answered 429 "storage is (re)initializing"
        self.initializing: dict[str, int] = {}
        self.init_retry_after = 1
        self.kubelet = kubelet
        self.graceful = graceful
        #: seconds between bookmarks of watches that asked for them (the apiserver: one minute)
        self.bookmark_every = 0.5
        #: the server's own limit on a watch's life in seconds (None: none)
        self.watch_timeout: float | None = None
        self.faults: Faults | None = None
        #: (call type, plural) → seconds each such call waits before it is served
        self.delays: dict[tuple[str, str], float] = {}
        self.evictions: list[tuple[str, str]] = []
        self.refused_evictions: list[tuple[str, str]] = []
        self.calls: Counter[str] = Counter()
        #: (call type, plural, namespace, query) of the latest requests
        self.log: list[tuple[str, str, str | None, dict[str, str]]] = []
        self._uids = itertools.count(1)
        #: (resourceVersion, plural) → that kind's objects at that version in key order, for the pages
        #: after a list's first (etcd reads a continued list at its first page's revision); stored objects
        #: are replaced on every write, never changed in place, so references are a consistent copy
        self._pages: dict[tuple[int, str], tuple[list[tuple[str, str]], list[dict[str, Any]]]] = {}

    # ---------------------------------------------------------------------------------------- store
    def _key(self, plural: str, ns: str | None, name: str) -> tuple[str, str, str]:
        return (plural, ns or "" if self.served[plural].namespaced else "", name)

    def get(self, plural: str, ns: str | None, name: str) -> dict[str, Any] | None:
        obj = self.objects.get(self._key(plural, ns, name))
        return _copy(obj) if obj is not None else None

    def _out(self, plural: str, obj: dict[str, Any], listed: bool = False) -> dict[str, Any]:
        out = _copy(obj)
        kind = self.served[plural]
        if listed and not kind.custom:
            out.pop("kind", None)
            out.pop("apiVersion", None)
        else:
            out["kind"], out["apiVersion"] = kind.kind, kind.api_version
        return out

    def _emit(self, plural: str, event_type: str, obj: dict[str, Any]) -> None:
        rv = int(_meta(obj).get("resourceVersion") or self.rv)
        snapshot = self._out(plural, obj)
        self.history.append((rv, plural, event_type, snapshot))
        if len(self.history) > self.history_limit:
            dropped = self.history[: len(self.history) - self.history_limit]
            del self.history[: len(dropped)]
            self.floor = dropped[-1][0]
        for w in list(self.watchers):
            if w.plural == plural and self._watches(w, snapshot):
                w.queue.put_nowait({"type": event_type, "object": snapshot})

    @staticmethod
    def _watches(w: _Watcher, obj: Mapping[str, Any]) -> bool:
        if w.namespace is not None and _meta(obj).get("namespace") != w.namespace:
            return False
        return _selected(obj, w.fields, w.labels)

    def _stamp(self, obj: dict[str, Any]) -> None:
        self.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj`` (409 when its name is taken)."""
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta.get("name"), str) or not meta["name"]:
            raise ApiError(422, "Invalid", f"{self.served[plural].kind} \"\" is invalid: metadata.name: "
                                           "Required value: name or generateName is required")
        key = self._key(plural, meta.get("namespace"), meta["name"])
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", f'{plural} "{meta["name"]}" already exists',
                           details={"name": meta["name"], "kind": plural})
        obj = _copy(obj)
        meta = obj["metadata"]
        if not self.served[plural].namespaced:
            meta.pop("namespace", None)
        meta.setdefault("uid", f"uid-{next(self._uids):06d}-{uuid.uuid4().hex[:8]}")
        meta["creationTimestamp"] = _now()
        meta["generation"] = 1
        if plural == "pods":
            obj["status"] = {"phase": "Pending"}        # PrepareForCreate: a new pod's status is the server's
        self._stamp(obj)
        self.objects[key] = obj
        self._emit(plural, "ADDED", obj)
        self._after(plural, obj)
        return obj

    def replace(self, plural: str, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """Store ``new`` in place of ``old`` (validated), MODIFIED."""
        meta, old_meta = new.setdefault("metadata", {}), _meta(old)
        for k in ("uid", "creationTimestamp", "name", "namespace", "generation"):
            if k in old_meta:
                meta[k] = old_meta[k]
        if plural == "pods":
            self._validate_pod_update(old, new)
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        if new == old:
            return old              # nothing changed: no new version (the apiserver's no-op update)
        self._stamp(new)
        key = self._key(plural, old_meta.get("namespace"), old_meta["name"])
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and \
                (plural != "pods" or not self._runs(new)):
            self.objects.pop(key, None)
            self._emit(plural, "DELETED", new)
            self._after(plural, new)
            return new
        self.objects[key] = new
        self._emit(plural, "MODIFIED", new)
        self._after(plural, new)
        return new

    @staticmethod
    def _runs(pod: Mapping[str, Any]) -> bool:
        """Bound and not finished: a kubelet still has to stop it."""
        return bool(_dig(pod, "spec.nodeName")) and _dig(pod, "status.phase") not in ("Succeeded", "Failed")

    def delete(self, plural: str, ns: str | None, name: str, options: Mapping[str, Any] | None = None
               ) -> dict[str, Any]:
        obj = self.objects.get(self._key(plural, ns, name))
        if obj is None:
            raise _not_found(plural, name)
        options = options or {}
        pre = options.get("preconditions") or {}
        meta = _meta(obj)
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {pre['uid']}, UID in "
                                            f"object meta: {meta.get('uid')}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise ApiError(409, "Conflict", "Precondition failed: ResourceVersion in precondition: "
                                            f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                                            f"{meta.get('resourceVersion')}")
        grace = options.get("gracePeriodSeconds")
        if grace is None:
            grace = _dig(obj, "spec.terminationGracePeriodSeconds")
            grace = 30 if grace is None else grace
        graceful = plural == "pods" and self.graceful and self._runs(obj) and grace > 0
        if meta.get("finalizers") or graceful:
            if meta.get("deletionTimestamp"):
                return self._out(plural, obj)
            new = _copy(obj)
            new["metadata"]["deletionTimestamp"] = _now()
            if graceful:
                new["metadata"]["deletionGracePeriodSeconds"] = grace
            self._stamp(new)
            self.objects[self._key(plural, ns, name)] = new
            self._emit(plural, "MODIFIED", new)
            return self._out(plural, new)
        self.objects.pop(self._key(plural, ns, name))
        gone = _copy(obj)
        self._stamp(gone)
        self._emit(plural, "DELETED", gone)
        self._after(plural, gone)
        return self._out(plural, gone)

    def finish(self, ns: str, name: str, phase: str = "Failed") -> None:
        """The kubelet stopped a terminating pod: it ends (``phase``) and goes."""
        pod = self.objects.get(self._key("pods", ns, name))
        if pod is None:
            return
        new = _copy(pod)
        new.setdefault("status", {})["phase"] = phase
        self.replace("pods", pod, new)

    def _after(self, plural: str, obj: dict[str, Any]) -> None:
        """The cluster's own controllers: the scheduler and kubelet (``kubelet=True``)."""
        if not self.kubelet or plural not in ("pods", "nodes"):
            return
        nodes = sorted(n for (p, _, n) in self.objects if p == "nodes")
        if not nodes:
            return
        for key, pod in sorted(self.objects.items()):
            if key[0] != "pods" or _dig(pod, "spec.schedulingGates") or _dig(pod, "spec.nodeName") or \
                    _meta(pod).get("deletionTimestamp") or _dig(pod, "status.phase") != "Pending":
                continue
            new = _copy(pod)
            new["spec"]["nodeName"] = nodes[0]
            new.setdefault("status", {})["phase"] = "Running"
            self._stamp(new)
            self.objects[key] = new
            self._emit("pods", "MODIFIED", new)

    # ---------------------------------------------------------------------------------- validation
    def _validate_pod_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        name = _meta(old).get("name")
        before = [g.get("name") for g in _dig(old, "spec.schedulingGates") or [] if isinstance(g, dict)]
        after = _dig(new, "spec.schedulingGates") or []
        for i, gate in enumerate(after):
            gate_name = gate.get("name") if isinstance(gate, dict) else None
            if gate_name not in before:
                raise ApiError(422, "Invalid", f'Pod "{name}" is invalid: spec.schedulingGates[{i}].name: '
                                               "Forbidden: only deletion is allowed, but found new "
                                               f"scheduling gate '{gate_name}'")
        old_spec, new_spec = dict(old.get("spec") or {}), dict(new.get("spec") or {})
        for spec in (old_spec, new_spec):
            for k in _POD_MUTABLE:
                spec.pop(k, None)
            spec["containers"] = [{k: v for k, v in c.items() if k != "image"}
                                  for c in spec.get("containers") or []]
        if old_spec != new_spec:
            raise ApiError(422, "Invalid", f'Pod "{name}" is invalid: spec: Forbidden: pod updates may not '
                                           "change fields other than `spec.containers[*].image`, "
                                           "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, "
                                           "`spec.tolerations` (only additions to existing tolerations), "
                                           "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 "
                                           "if it was previously negative)")

    # ----------------------------------------------------------------------------------- requests
    def patch(self, plural: str, ns: str | None, name: str, sub: str | None, content_type: str,
              body: Any) -> dict[str, Any]:
        kind = self.served[plural]
        old = self.objects.get(self._key(plural, ns, name))
        if old is None:
            raise _not_found(plural, name)
        ctype = content_type.split(";")[0].strip()
        if ctype == "application/json-patch+json":
            if not isinstance(body, list):
                raise ApiError(400, "BadRequest", "json patch must be a list of operations")
            try:
                new = jsonpatch.apply_patch(_copy(old), body)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                raise ApiError(422, "Invalid", str(exc)) from None
        elif ctype == "application/merge-patch+json":
            new = merge_patch(old, body)
        elif ctype == "application/strategic-merge-patch+json":
            if kind.custom:
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown "
                               "format - accepted media types include: application/json-patch+json, "
                               "application/merge-patch+json, application/apply-patch+yaml")
            new = strategic_merge(old, body)
        else:
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of the request was in an unknown format: {ctype}")
        if not isinstance(new, dict):
            raise ApiError(422, "Invalid", "the patched object is not an object")
        want = _meta(body if isinstance(body, dict) else {}).get("resourceVersion")
        if want is not None and want != _meta(old).get("resourceVersion"):
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {plural} "{name}": the object '
                                            "has been modified; please apply your changes to the latest "
                                            "version and try again")
        if sub == "status":
            new = {**_copy(old), "status": new.get("status", {})}
        elif kind.status:
            new = {**new, "status": _copy(old.get("status", {}))}
            if "status" not in old:
                new.pop("status")
        return self._out(plural, self.replace(plural, old, new))

    def bind(self, ns: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        pod = self.objects.get(self._key("pods", ns, name))
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        if _dig(pod, "spec.nodeName"):
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": pod '
                                            f"{name} is already assigned to node "
                                            f"\"{pod['spec']['nodeName']}\"")
        new = _copy(pod)
        new["spec"]["nodeName"] = _dig(body, "target.name")
        self._stamp(new)
        self.objects[self._key("pods", ns, name)] = new
        self._emit("pods", "MODIFIED", new)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    def _pdbs(self, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
        ns = _meta(pod).get("namespace")
        labels = _meta(pod).get("labels") or {}
        out = []
        for (plural, pns, _), pdb in sorted(self.objects.items()):
            if plural != "poddisruptionbudgets" or pns != ns:
                continue
            match = _dig(pdb, "spec.selector.matchLabels") or {}
            if match and all(labels.get(k) == v for k, v in match.items()):
                out.append(pdb)
        return out

    def _healthy(self, pdb: Mapping[str, Any]) -> tuple[int, int, int]:
        """(expected, healthy, desired healthy) of a PDB, as the disruption controller counts them."""
        ns, match = _meta(pdb).get("namespace"), _dig(pdb, "spec.selector.matchLabels") or {}
        pods = [p for (plural, pns, _), p in self.objects.items() if plural == "pods" and pns == ns and
                all((_meta(p).get("labels") or {}).get(k) == v for k, v in match.items())]
        expected = len(pods)
        healthy = sum(1 for p in pods
                      if _dig(p, "status.phase") == "Running" and not _meta(p).get("deletionTimestamp"))
        if _dig(pdb, "spec.minAvailable") is not None:
            desired = int(pdb["spec"]["minAvailable"])
        else:
            desired = max(0, expected - int(_dig(pdb, "spec.maxUnavailable") or 0))
        return expected, healthy, desired

    def evict(self, ns: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        if _meta(body).get("name") not in (None, name):
            raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
        pod = self.objects.get(self._key("pods", ns, name))
        if pod is None:
            raise _not_found("pods", name)
        options = body.get("deleteOptions") or {}
        uid = (options.get("preconditions") or {}).get("uid")
        if uid and uid != _meta(pod).get("uid"):
            raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}, UID in object "
                                            f"meta: {_meta(pod).get('uid')}")
        phase = _dig(pod, "status.phase")
        if phase in ("Succeeded", "Failed", "Pending") or _meta(pod).get("deletionTimestamp"):
            self.evictions.append((ns, name))
            self.delete("pods", ns, name, options)          # canIgnorePDB
            return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}
        pdbs = self._pdbs(pod)
        if len(pdbs) > 1:
            raise ApiError(500, "InternalError", "This pod has more than one PodDisruptionBudget, which the "
                                                 "eviction subresource does not support.")
        if pdbs:
            _, healthy, desired = self._healthy(pdbs[0])
            if healthy - desired <= 0:
                self.refused_evictions.append((ns, name))
                budget = _meta(pdbs[0]).get("name")
                raise ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's "
                               "disruption budget.", causes=[{"reason": "DisruptionBudget", "message": (
                                   f"The disruption budget {budget} needs {desired} healthy pods and has "
                                   f"{healthy} currently")}])
        # addConditionAndDeletePod: the DisruptionTarget condition replaces one of the same type
        new = _copy(pod)
        conditions = [c for c in new.setdefault("status", {}).get("conditions") or []
                      if c.get("type") != "DisruptionTarget"]
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                           "message": "Eviction API: evicting", "lastTransitionTime": _now()})
        new["status"]["conditions"] = conditions
        self._stamp(new)
        self.objects[self._key("pods", ns, name)] = new
        self._emit("pods", "MODIFIED", new)
        self.evictions.append((ns, name))
        self.delete("pods", ns, name, options)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    def listing(self, plural: str, ns: str | None, fields: str | None, labels: str | None,
                limit: int = 0, cont: str | None = None) -> dict[str, Any]:
        """A list answer: every matching object, or a page of at most ``limit`` (0: all) from ``cont``."""
        kind = self.served[plural]
        if not limit and cont is None:
            items = [self._out(plural, obj, listed=True) for (p, ons, _), obj in sorted(self.objects.items())
                     if p == plural and (ns is None or ons == ns) and _selected(obj, fields, labels)]
            return {"kind": f"{kind.kind}List", "apiVersion": kind.api_version,
                    "metadata": {"resourceVersion": str(self.rv)}, "items": items}
        if cont is None:
            rv, start = self.rv, ""
            if (rv, plural) not in self._pages:
                for old in [k for k in self._pages if k[0] < self.floor] + list(self._pages)[:-7]:
                    self._pages.pop(old, None)
                ordered = sorted((k[1:], obj) for k, obj in self.objects.items() if k[0] == plural)
                self._pages[(rv, plural)] = ([k for k, _ in ordered], [obj for _, obj in ordered])
        else:
            rv, start = self._continued(cont)
            if rv < self.floor or (rv, plural) not in self._pages:
                raise ApiError(410, "Expired", _CONTINUE_EXPIRED)
        keys, objs = self._pages[(rv, plural)]
        # a namespace is one contiguous range of keys (etcd: the prefix /registry/pods/<ns>/)
        lo, hi = (0, len(keys)) if ns is None else \
            (bisect.bisect_left(keys, (ns, "")), bisect.bisect_left(keys, (ns + "\x00", "")))
        ons, _, name = start.partition("/")
        i = max(lo, bisect.bisect_left(keys, (ons, name))) if start else lo
        items: list[dict[str, Any]] = []
        while i < hi and (not limit or len(items) < limit):
            if _selected(objs[i], fields, labels):
                items.append(self._out(plural, objs[i], listed=True))
            i += 1
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if i < hi:          # more keys in the range, matching or not (etcd's "more"), as the apiserver
            ons, name = keys[i - 1]
            token = {"v": "meta.k8s.io/v1", "rv": rv, "start": f"{ons}/{name}\x00"}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(token).encode()).decode().rstrip("=")
            if not fields and not labels:
                meta["remainingItemCount"] = hi - i
        return {"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": meta, "items": items}

    @staticmethod
    def _continued(cont: str) -> tuple[int, str]:
        """(resourceVersion, start key) of a continue token; 400 when it is not one."""
        try:
            token = json.loads(base64.urlsafe_b64decode(cont + "=" * (-len(cont) % 4)))
            if not isinstance(token, dict) or token.get("v") != "meta.k8s.io/v1":
                raise ValueError("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
            rv, start = token.get("rv"), token.get("start")
            if not isinstance(rv, int) or rv <= 0 or not isinstance(start, str) or not start:
                raise ValueError("incorrect encoded start resourceVersion or start key")
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"continue key is not valid: {exc}") from None
        return rv, start

    def since(self, plural: str, version: int, w: _Watcher) -> list[dict[str, Any]]:
        if version < self.floor:
            raise ApiError(410, "Expired", f"too old resource version: {version} ({self.floor})")
        return [{"type": t, "object": o} for rv, p, t, o in self.history
                if rv > version and p == plural and self._watches(w, o)]

    def restart(self, initializing: int = 2) -> None:
        """An apiserver restart: every watch ends, the history is gone, every kind initialises."""
        for w in self.watchers:
            w.queue.put_nowait(None)
        self.watchers.clear()
        self.history.clear()
        self.floor = self.rv
        for plural in self.served:
            self.initializing[plural] = initializing

    def compact(self) -> None:
        """etcd compaction: watches from any version before now get 410."""
        self.history.clear()
        self.floor = self.rv


#: storage/etcd3/store.go: a continue token whose revision was compacted
_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list.")


def _parse(path: str) -> tuple[str, str | None, str | None, str | None] | None:
    """(plural, namespace, name, subresource) of an API path, None for anything else."""
    p = path.strip("/").split("/")
    if len(p) >= 2 and p[0] == "api":
        rest = p[2:]
    elif len(p) >= 3 and p[0] == "apis":
        rest = p[3:]
    else:
        return None
    ns = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        ns, rest = rest[1], rest[2:]
    if not rest:
        return None
    return rest[0], ns, rest[1] if len(rest) > 1 else None, "/".join(rest[2:]) or None


def _limit(q: Mapping[str, str]) -> int:
    """A list's ``limit`` (0: none); 400 when it is not a number."""
    try:
        return max(0, int(q.get("limit") or 0))
    except ValueError:
        raise ApiError(400, "BadRequest", f"limit: Invalid value: {q.get('limit')!r}") from None


class _Server(kmock.KubernetesEmulator):  # type: ignore[misc]
    """kmock's HTTP and discovery; every API object request is answered by :class:`ApiState`."""

    state: ApiState

    async def _handle(self, request: Any) -> aiohttp.web.StreamResponse:
        raw = request._raw_request
        parsed = _parse(raw.path)
        if parsed is None or parsed[0] not in self.state.served:
            return await super()._handle(request)      # discovery, version
        try:
            return await self._serve(raw, request, *parsed)
        except ApiError as exc:
            headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
            return aiohttp.web.json_response(exc.status(), status=exc.code, headers=headers)

    async def _serve(self, raw: Any, request: Any, plural: str, ns: str | None, name: str | None,
                     sub: str | None) -> aiohttp.web.StreamResponse:
        s = self.state
        watch = raw.method == "GET" and raw.query.get("watch") in ("true", "1")
        call = call_type(raw.method, plural, sub, watch, name)
        s.calls[f"{call} {plural}"] += 1
        s.log.append((call, plural, ns, dict(raw.query)))
        del s.log[:-2000]
        delay = s.delays.get((call, plural))
        if delay:
            await asyncio.sleep(delay)
        if plural in s.initializing and s.initializing[plural] > 0 and raw.method == "GET":
            s.initializing[plural] -= 1
            raise ApiError(429, "TooManyRequests", "storage is (re)initializing",
                           retry_after=s.init_retry_after)
        fault = s.faults.draw(call) if s.faults is not None else None
        if fault == "429":
            raise ApiError(429, "TooManyRequests", "Too many requests, please try again later.",
                           retry_after=s.faults.retry_after if s.faults else 1)
        if fault == "lost" and raw.method == "DELETE" and name is None:
            fault = None
        if fault == "500":
            raise ApiError(500, "InternalError", "Internal error occurred: etcdserver: request timed out")
        if fault == "503":
            raise ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request")
        body = request.data
        q = raw.query
        if watch:
            return await self._watch(raw, plural, ns, q, drop=fault == "lost")
        if raw.method == "GET":
            out = s.listing(plural, ns, q.get("fieldSelector"), q.get("labelSelector"), _limit(q),
                            q.get("continue") or None) if name is None else s.get(plural, ns, name)
            if out is None:
                raise _not_found(plural, name)
            if name is not None:
                out = s._out(plural, out)
            status = 200
        elif raw.method == "POST" and sub == "eviction" and plural == "pods" and ns and name:
            out, status = s.evict(ns, name, body or {}), 201
        elif raw.method == "POST" and sub == "binding" and plural == "pods" and ns and name:
            out, status = s.bind(ns, name, body or {}), 201
        elif raw.method == "POST" and name is None:
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request is not an object")
            if ns is not None:
                body.setdefault("metadata", {}).setdefault("namespace", ns)
            out, status = s._out(plural, s.put(plural, body)), 201
        elif raw.method == "PATCH" and name is not None:
            out, status = s.patch(plural, ns, name, sub, raw.headers.get("Content-Type", ""), body), 200
        elif raw.method == "DELETE" and name is not None:
            out, status = s.delete(plural, ns, name, body if isinstance(body, dict) else None), 200
        else:
            raise ApiError(405, "MethodNotAllowed", f"{raw.method} is not supported here")
        if fault == "lost":         # applied, but the answer never reaches the client
            raw.transport.abort()
        return aiohttp.web.json_response(out, status=status)

    async def _watch(self, raw: Any, plural: str, ns: str | None, q: Mapping[str, str], drop: bool
                     ) -> aiohttp.web.StreamResponse:
        s = self.state
        w = _Watcher(plural, ns, q.get("fieldSelector"), q.get("labelSelector"), asyncio.Queue())
        version = q.get("resourceVersion")
        if version not in (None, "", "0"):
            try:
                first = s.since(plural, int(str(version)), w)
            except ValueError:
                raise ApiError(400, "BadRequest", f"invalid resource version: {version}") from None
            except ApiError as exc:         # served as the stream's one ERROR event (newErrWatcher)
                first = [{"type": "ERROR", "object": exc.status()}]
                drop = True
        else:
            first = [{"type": "ADDED", "object": s._out(plural, o)}
                     for (p, _, _), o in sorted(s.objects.items()) if p == plural and s._watches(w, o)]
        response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await response.prepare(raw)
        for ev in first:
            await response.write(json.dumps(ev).encode() + b"\n")
        if drop:                    # an expired version (the ERROR event ends it) or a dropped stream
            if not first or first[-1]["type"] != "ERROR":
                raw.transport.abort()
            return response
        s.watchers.append(w)
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        limits = [float(q["timeoutSeconds"])] if q.get("timeoutSeconds") else []
        if s.watch_timeout is not None:
            limits.append(s.watch_timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(limits) if limits else None
        try:
            while True:
                timeout = s.bookmark_every if bookmarks else None
                if deadline is not None:
                    left = deadline - loop.time()
                    if left <= 0:
                        break
                    timeout = left if timeout is None else min(timeout, left)
                try:
                    ev = await asyncio.wait_for(w.queue.get(), timeout)
                except TimeoutError:
                    if bookmarks:
                        kind = s.served[plural]
                        mark = {"kind": kind.kind, "apiVersion": kind.api_version,
                                "metadata": {"resourceVersion": str(s.rv)}}
                        ev = {"type": "BOOKMARK", "object": mark}
                    else:
                        continue
                if ev is None:          # the server cut the stream
                    raw.transport.abort()
                    break
                await response.write(json.dumps(ev).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            if w in s.watchers:
                s.watchers.remove(w)
        return response


def _patch_kmock_parsing() -> None:
    """kmock's request parser reads ``/api/v1/namespaces`` as a namespace prefix and fails (500) before
    any handler runs; the Namespace resource's own paths get a parse that does not fail (the objects
    are served by :class:`_Server`, which parses paths itself)."""
    from kmock._internal import parsing

    if getattr(parsing.parse_path, "_quotaplane", False):
        return
    orig = parsing.parse_path

    def fixed(path: str) -> Any:
        p = path.strip("/").split("/")
        if p[:3] == ["api", "v1", "namespaces"] and (len(p) <= 4 or p[4] in ("status", "finalize")):
            return parsing.ParsedPath("", "v1", "namespaces", None, p[3] if len(p) > 3 else None,
                                      p[4] if len(p) > 4 else None)
        return orig(path)

    fixed._quotaplane = True  # type: ignore[attr-defined]
    parsing.parse_path = fixed


class _Recent(list):  # type: ignore[type-arg]
    """kmock's log of every request, kept to the newest few (it is never read here)."""

    def append(self, item: Any) -> None:
        super().append(item)
        if len(self) > 16:
            del self[:-8]


class Emulator:
    """The API server on loopback in a thread of its own: ``url`` for clients; :attr:`state` (touched
    only through :meth:`call` from other threads) to seed, inspect and inject faults."""

    def __init__(self, crds: bool = True, *, kubelet: bool = False, graceful: bool = False) -> None:
        self.state = ApiState(crds=crds, kubelet=kubelet, graceful=graceful)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def evictions(self) -> list[tuple[str, str]]:
        """(namespace, name) of every eviction the server accepted."""
        return list(self.state.evictions)

    def start(self) -> Emulator:
        _patch_kmock_parsing()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10), "the emulator did not start"
        return self

    def _run(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = _Server()
        server.state = self.state
        for plural, kind in self.state.served.items():
            path = f"{kind.group}/{kind.version}/{plural}" if kind.group else f"{kind.version}/{plural}"
            server.resources[path] = kmock.ResourceInfo(kind=kind.kind, namespaced=kind.namespaced)
        object.__setattr__(server, "_requests", _Recent())
        async with server, kmock.Server(server, host="127.0.0.1", port=self.port):
            self.ready.set()
            await self._stop.wait()

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` on the emulator's loop and return what it returns (raises what it raises)."""
        assert self.loop is not None
        future: Any = asyncio.run_coroutine_threadsafe(self._run_fn(fn), self.loop)
        return future.result(10)

    @staticmethod
    async def _run_fn(fn: Callable[[], Any]) -> Any:
        return fn()

    # conveniences for tests ----------------------------------------------------------------------
    def faults(self, faults: Faults | None) -> None:
        """Inject (or stop injecting, with None) random transient failures."""
        self.call(lambda: setattr(self.state, "faults", faults))

    def delay(self, call: str, plural: str, seconds: float) -> None:
        """Every ``call`` (see :func:`call_type`) of ``plural`` waits ``seconds`` before it is served."""
        self.call(lambda: self.state.delays.__setitem__((call, plural), seconds))

    def compact(self) -> None:
        self.call(self.state.compact)

    def restart(self, initializing: int = 2) -> None:
        self.call(lambda: self.state.restart(initializing))

    def initializing(self, plural: str, requests: int, retry_after: int = 1) -> None:
        """The next ``requests`` reads of ``plural`` answer 429 "storage is (re)initializing"."""
        def set_() -> None:
            self.state.initializing[plural] = requests
            self.state.init_retry_after = retry_after
        self.call(set_)

    def finish(self, ns: str, name: str, phase: str = "Failed") -> None:
        """The kubelet finished a terminating pod (it ends and goes)."""
        self.call(lambda: self.state.finish(ns, name, phase))

    def objects(self, plural: str) -> Iterator[dict[str, Any]]:
        items = self.call(lambda: [_copy(o) for (p, _, _), o in sorted(self.state.objects.items())
                                   if p == plural])
        return iter(items)

    def stop(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(5)
