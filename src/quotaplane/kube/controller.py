"""The controller: gated pods become asks; allocated asks ungate their pods; preempted pods are evicted.

One asyncio task per watched kind feeds one queue; one worker applies the events to the partition in
order (the partition's own lock makes each change atomic and journalled). What the partition then
says — its notices (``allocated``, ``preempted``) — becomes API calls (ungate, evict, conditions,
Events), run by a small pool so that a slow API server does not hold the engine.

The mapping (reference ``kubernetes-front.md`` §8):

* a pod carrying the gate ``quotaplane.io/admission`` is an ask, keyed by its UID, of its application
  (:func:`~quotaplane.kube.pods.pod_app_id`), submitted by the user the webhook recorded; its namespace's
  annotations are the application's tags (seed 004), so the placement rules place it;
* a gang (YuniKorn task groups) asks for its placeholders first; its real pods replace them and are
  ungated only once the whole minimum was admitted (all or nothing);
* the ask allocated: the gate is removed (only ours, guarded by a JSON-patch ``test``), an Event
  ``Admitted`` recorded;
* still waiting: a pod condition ``QuotaAdmitted=False`` and a Warning Event carry the reasons (codes,
  paths, shortfalls), rewritten when they change;
* a ``preempted`` notice: a ``DisruptionTarget`` condition and a Warning Event with the reason, then
  the Eviction API;
* a pod that succeeded, failed or was deleted: its allocation is released, or its ask withdrawn;
* nodes (allocatable of schedulable, Ready nodes) are the partition's nodes; namespaces' annotations
  are cached for tags; the ``yunikorn-configs`` ConfigMap's ``queues.yaml`` is applied all or nothing.

Restart: before watching, everything is listed; ungated live pods whose allocation the journal holds
stay counted, ungated pods the journal lacks but that carry the admitted mark are adopted, allocations
and asks of managed applications whose pods are gone are released. Every handler is idempotent: list
and watch (and kmock's watch replay) deliver the same object more than once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from quotaplane.k8s.convert import application_tags, pod_namespace, pod_queue, pod_resource
from quotaplane.kube.api import KubeApi, status_code
from quotaplane.kube.configuration import ClusterConfiguration
from quotaplane.kube.nodes import node_capacity, node_counts
from quotaplane.kube.objects import mapping, name_of
from quotaplane.kube.pods import (
    gang_parameters,
    has_gate,
    is_finished,
    is_terminating,
    pod_app_id,
    pod_key,
    pod_node,
    pod_priority,
    pod_user,
    task_group_name,
    task_groups,
    ungate_patch,
)
from quotaplane.partition import Partition
from quotaplane.policy import Violation
from quotaplane.resources import Resource
from quotaplane.scheduler import Scheduler

__all__ = ["ADMITTED_ANNOTATION", "CONDITION_ADMITTED", "MANAGED_TAG", "Controller", "ControllerOptions",
           "waiting_message"]

log = logging.getLogger("quotaplane.kube")

#: set on a pod in the ungate patch: the allocation that admitted it (adoption after a restart)
ADMITTED_ANNOTATION = "quotaplane.io/allocation"
#: the pod condition that says why a pod waits
CONDITION_ADMITTED = "QuotaAdmitted"
#: the application tag that marks applications the controller created
MANAGED_TAG = "quotaplane.io/kube"
_PLACEHOLDER = "placeholder"
_RESYNC = "RESYNC"


@dataclass(frozen=True)
class ControllerOptions:
    """How the controller runs."""

    #: the partition pods go to (YuniKorn's default partition)
    partition: str = "default"
    #: the namespace of the ``yunikorn-configs`` ConfigMap
    config_namespace: str = "quotaplane-system"
    #: API calls in flight at once (ungates, evictions, conditions, Events)
    workers: int = 16
    #: seconds between rewrites of waiting pods' reasons (their conditions follow the cycles)
    reasons_every: float = 0.25
    #: grace period of evictions
    eviction_grace_seconds: int | None = None
    #: seconds between rounds of the partition's timeouts (elastic reclaim, placeholders, states);
    #: None when something else runs them (``quotaplane kube``: the REST service's timeouts loop)
    timeouts_every: float | None = 2.0


def waiting_message(reasons: list[Violation]) -> str:
    """The reasons a pod waits, as its condition and Event say them: ``code at path (short of …)``."""
    parts = []
    for v in reasons:
        short = f", short of {v.resource.to_dict()}" if v.resource is not None and v.resource else ""
        parts.append(f"{v.code} at {v.path}{short}: {v.message}")
    return "; ".join(parts) if parts else "waiting for the next scheduling cycle"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Controller:
    """Keeps one partition of ``scheduler`` in step with a cluster reached through ``api``."""

    def __init__(self, scheduler: Scheduler, api: KubeApi, options: ControllerOptions | None = None) -> None:
        self.scheduler = scheduler
        self.api = api
        self.options = options or ControllerOptions()
        self.partition: Partition = scheduler.partition(self.options.partition)
        #: allocation key → the latest pod object of every pod the controller manages
        self.pods: dict[str, dict[str, Any]] = {}
        #: namespace name → its object (for tags and the webhook's enableYuniKorn)
        self.namespaces: dict[str, dict[str, Any]] = {}
        #: node name → the capacity registered for it
        self.nodes: dict[str, Resource] = {}
        #: allocation key → the waiting message last written on the pod
        self._reported: dict[str, str] = {}
        #: keys ungated (or being ungated) by this process
        self._ungated: set[str] = set()
        #: gang applications whose whole minimum was admitted once
        self._gang_whole: set[str] = set()
        #: gang application → its minimum (Σ minMember of its task groups)
        self._gang_min: dict[str, int] = {}
        #: keys of pods preempted and being evicted (never adopted again)
        self._evicting: set[str] = set()
        #: the start-up listing is being applied (the only time running pods are adopted)
        self._syncing = False
        self._events: asyncio.Queue[tuple[str, str, dict[str, Any]]] | None = None
        self._actions: asyncio.Queue[Callable[[], Awaitable[None]]] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._unsubscribe: Callable[[], None] | None = None
        #: kind → the resourceVersion its watch resumes from (None: list again first)
        self._versions: dict[str, str | None] = {}
        #: kinds whose watch has started once (a later start without a version lists again)
        self._listed: set[str] = set()
        #: the partition's configuration from the cluster: the ConfigMap and the custom quota objects
        self.configuration = ClusterConfiguration(scheduler, api, self.options.partition,
                                                  self.options.config_namespace, self._enqueue, self._error)
        #: kinds whose CRD is not installed (not watched)
        self._absent: set[str] = set()
        self._rounds = 0
        #: set once the first full listing has been applied
        self.synced = asyncio.Event()
        self.errors: list[str] = []

    # ------------------------------------------------------------------------------------------------
    # running
    # ------------------------------------------------------------------------------------------------
    async def run(self) -> None:
        """List everything, reconcile, then follow the watches until cancelled."""
        self._events = asyncio.Queue()
        self._actions = asyncio.Queue()
        self._unsubscribe = self.partition.subscribe(self._notice)
        try:
            self._tasks = [asyncio.create_task(self._act()) for _ in range(max(1, self.options.workers))]
            await self.sync()
            self._tasks += [asyncio.create_task(self._watch(kind)) for kind in self.api.KINDS
                            if kind not in self._absent]
            self._tasks.append(asyncio.create_task(self._report_loop()))
            if self.options.timeouts_every is not None:
                self._tasks.append(asyncio.create_task(self._timeouts_loop(self.options.timeouts_every)))
            await self._apply_events()
        finally:
            if self._unsubscribe is not None:
                self._unsubscribe()
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(BaseException):
                    await task

    async def sync(self) -> None:
        """The restart-safe start (reference §8 item 8): inputs first, then pods, then the journal's
        leftovers released."""
        configuration = self.configuration
        configuration.batching = True   # the custom quotas and the ConfigMap make one configuration change
        try:
            for kind in self.api.KINDS:
                if kind == "pods":
                    continue
                try:
                    items, self._versions[kind] = await self.api.list_versioned(kind)
                except Exception as exc:
                    if kind in self.api.OPTIONAL and status_code(exc) == 404:
                        self._absent.add(kind)      # the CRD is not installed: nothing to read
                        log.info("%s: not served by the API server (CRD not installed)", kind)
                        continue
                    raise
                for obj in items:
                    self._apply(kind, "ADDED", obj)
        finally:
            configuration.batching = False
        configuration.flush()
        items, self._versions["pods"] = await self.api.list_versioned("pods")
        self._syncing = True
        try:
            for pod in items:
                self._apply("pods", "ADDED", pod)
        finally:
            self._syncing = False
        self._release_missing({pod_key(pod) for pod in items})
        self.synced.set()

    def resync(self, kind: str, items: list[dict[str, Any]]) -> None:
        """A fresh listing of ``kind`` after a watch was lost: what the listing lacks is gone (its
        DELETED event may have been missed), the rest is applied as it is now."""
        if kind == "pods":
            live = {pod_key(pod) for pod in items}
            for key, pod in sorted(self.pods.items()):
                if key not in live:
                    self._pod_gone(key, pod)
            self._release_missing(live)
        elif kind in ("nodes", "namespaces"):
            present = {str(mapping(obj.get("metadata")).get("name", "")) for obj in items}
            known = self.nodes if kind == "nodes" else self.namespaces
            for name in sorted(set(known) - present):
                self._apply(kind, "DELETED", {"metadata": {"name": name}})
        for obj in items:
            self._apply(kind, "ADDED", obj)

    def _release_missing(self, live: set[str]) -> None:
        """Allocations and asks of managed applications whose pods are gone: released / withdrawn."""
        p = self.partition
        for app in p.applications():
            if app.tags.get(MANAGED_TAG) != "true":
                continue
            gone = [a.allocation_key for a in p.allocations()
                    if a.application_id == app.application_id and not a.placeholder
                    and a.allocation_key not in live]
            if gone:
                p.release_batch(gone)
            for ask in p.pending(app.application_id):
                if not ask.placeholder and ask.allocation_key not in live:
                    p.remove_ask(ask.allocation_key)
            self._forget_app_if_idle(app.application_id)

    async def _watch(self, kind: str) -> None:
        """Follow ``kind`` from the version of its last listing; when the watch breaks (a dropped
        connection, 410 Gone: the version expired), list again and resume from there."""
        assert self._events is not None
        while True:
            try:
                version = self._versions.get(kind)
                if version is None and self.synced.is_set() and kind in self._listed:
                    items, version = await self.api.list_versioned(kind)
                    await self._events.put((kind, _RESYNC, {"items": items}))
                self._listed.add(kind)
                async for event_type, obj in self.api.watch(kind, version):
                    await self._events.put((kind, event_type, obj))
                    meta_version = mapping(obj.get("metadata")).get("resourceVersion")
                    if isinstance(meta_version, str) and meta_version:
                        self._versions[kind] = meta_version
            except asyncio.CancelledError:
                raise
            except Exception as exc:        # relisted next round (the handlers are idempotent)
                self._error(f"watch {kind}: {exc}")
                self._versions[kind] = None
                await asyncio.sleep(1.0)

    async def _apply_events(self) -> None:
        assert self._events is not None
        while True:
            kind, event_type, obj = await self._events.get()
            self._apply(kind, event_type, obj)

    def _apply(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        try:
            if event_type == _RESYNC:
                self.resync(kind, list(obj.get("items") or []))
            elif kind == "pods":
                self.pod_event(event_type, obj)
            elif kind == "nodes":
                self.node_event(event_type, obj)
            elif kind == "namespaces":
                self.namespace_event(event_type, obj)
            elif kind == "configmaps":
                self.configuration.config_map_event(event_type, obj)
            elif kind in ("elasticquotas", "quotasubtrees"):
                self.configuration.custom_quota_event(kind, event_type, obj)
        except Exception as exc:   # one bad object must not stop the controller; it is reported
            self._error(f"{kind} {event_type} {name_of(obj)}: {type(exc).__name__}: {exc}")

    def _error(self, text: str) -> None:
        log.warning("%s", text)
        self.errors.append(text)
        del self.errors[:-100]

    # ------------------------------------------------------------------------------------------------
    # pods
    # ------------------------------------------------------------------------------------------------
    def pod_event(self, event_type: str, pod: dict[str, Any]) -> None:
        """One pod ADDED / MODIFIED / DELETED (idempotent)."""
        key = pod_key(pod)
        p = self.partition
        if event_type == "DELETED" or is_finished(pod) or is_terminating(pod):
            if key in self.pods or p.allocation(key) is not None or p.get_ask(key) is not None:
                self._pod_gone(key, pod)
            return
        if has_gate(pod):
            self.pods[key] = pod
            if p.allocation(key) is not None:
                self._maybe_ungate(key)
            elif p.get_ask(key) is None:
                self._ask_for(key, pod)
            return
        # ungated and running
        if p.allocation(key) is not None:
            self.pods[key] = pod
            self._bind(key, pod)
        elif self._syncing and key not in self._evicting and \
                _annotations(pod).get(ADMITTED_ANNOTATION) is not None:
            self.pods[key] = pod
            self._adopt(key, pod)

    def _app_for(self, pod: Mapping[str, Any]) -> str:
        """The pod's application, added (placed by the rules, tagged by its namespace) when new."""
        app_id = pod_app_id(pod)
        p = self.partition
        if p.application(app_id) is None:
            ns = self.namespaces.get(pod_namespace(pod))
            tags = application_tags(pod, ns)
            tags.update(self.configuration.custom.pod_tags(pod))
            tags[MANAGED_TAG] = "true"
            style, timeout = gang_parameters(pod)
            p.add_application(app_id, pod_user(pod), queue=pod_queue(pod), tags=tags, gang_style=style,
                              placeholder_timeout=timeout)
        return app_id

    def _ask_for(self, key: str, pod: dict[str, Any]) -> None:
        group = task_group_name(pod)
        groups = task_groups(pod) if group is not None else []
        new = self.partition.application(pod_app_id(pod)) is None
        app_id = self._app_for(pod)
        if groups:
            self._gang_min[app_id] = sum(g.min_member for g in groups)
            if new:         # YuniKorn: the placeholders are created once, when the gang is first seen
                self._placeholders(app_id, groups)
        self.partition.add_ask(app_id, key, pod_resource(pod), priority=pod_priority(pod),
                               task_group=group if groups else None)

    def _placeholders(self, app_id: str, groups: list[Any]) -> None:
        """The gang's placeholders (once per application): minMember asks of minResource per group."""
        p = self.partition
        for g in groups:
            for i in range(g.min_member):
                key = f"{app_id}/{_PLACEHOLDER}/{g.name}/{i}"
                if p.get_ask(key) is None and p.allocation(key) is None:
                    p.add_ask(app_id, key, g.min_resource, placeholder=True, task_group=g.name)

    def _adopt(self, key: str, pod: dict[str, Any]) -> None:
        """An admitted pod the journal lacks (its allocation was lost with a store): counted again."""
        app_id = self._app_for(pod)
        node = pod_node(pod)
        decision = self.partition.allocate(app_id, key, pod_resource(pod), priority=pod_priority(pod),
                                           node=node if node in self.partition.nodes() else None)
        if not decision.allocated:
            self._error(f"adopting running pod {name_of(pod)}: not within quota now "
                        f"({waiting_message(list(decision.reasons))}); it is not counted")

    def _pod_gone(self, key: str, pod: Mapping[str, Any]) -> None:
        p = self.partition
        self.pods.pop(key, None)
        self._reported.pop(key, None)
        self._ungated.discard(key)
        self._evicting.discard(key)
        app_id = pod_app_id(pod)
        if p.allocation(key) is not None:
            p.release(key)
        elif p.get_ask(key) is not None:
            p.remove_ask(key)
        self._forget_app_if_idle(app_id)

    def _forget_app_if_idle(self, app_id: str) -> None:
        """An application none of whose pods remain (placeholders aside) is removed."""
        p = self.partition
        app = p.application(app_id)
        if app is None or app.tags.get(MANAGED_TAG) != "true":
            return
        if any(not a.placeholder for a in app.allocations.values()):
            return
        if any(not a.placeholder for a in p.pending(app_id)):
            return
        if app.allocations or p.pending(app_id):
            return          # placeholders of a gang still waiting for its pods (their timeout decides)
        p.remove_application(app_id)
        self._gang_whole.discard(app_id)
        self._gang_min.pop(app_id, None)

    # ------------------------------------------------------------------------------------------------
    # notices → actions
    # ------------------------------------------------------------------------------------------------
    def _notice(self, notice: dict[str, Any]) -> None:
        kind = notice.get("type")
        if kind == "allocated":
            for key in _keys(notice):
                if key in self.pods:
                    self._maybe_ungate(key)
                else:
                    self._gang_progress_key(key)
        elif kind == "preempted":
            reason = notice.get("reason") or {}
            for key in _keys(notice):
                pod = self.pods.get(key)
                if pod is not None:
                    self._evicting.add(key)
                    self._enqueue(functools.partial(self._evict, key, pod, reason))

    def _gang_progress_key(self, key: str) -> None:
        alloc = self.partition.allocation(key)
        if alloc is not None and alloc.placeholder:
            self._gang_progress(alloc.application_id)

    def _gang_progress(self, app_id: str) -> None:
        """The gang's whole minimum is (or was) admitted: its allocated pods may be ungated."""
        p = self.partition
        app = p.application(app_id)
        if app is None or app_id in self._gang_whole:
            return
        admitted = sum(1 for a in app.allocations.values() if a.task_group is not None)
        if app_id not in self._gang_min or admitted < self._gang_min[app_id]:
            return
        self._gang_whole.add(app_id)
        for alloc in list(app.allocations.values()):
            if not alloc.placeholder and alloc.allocation_key in self.pods:
                self._maybe_ungate(alloc.allocation_key)

    def _maybe_ungate(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None or key in self._ungated or not has_gate(pod):
            return
        alloc = self.partition.allocation(key)
        if alloc is None:
            return
        if alloc.task_group is not None and alloc.application_id not in self._gang_whole:
            self._gang_progress(alloc.application_id)
            if alloc.application_id not in self._gang_whole:
                return          # all or nothing: the rest of the gang's minimum is not admitted yet
        self._ungated.add(key)
        queue = self.partition.application(alloc.application_id)
        path = queue.queue_path if queue is not None else ""
        self._enqueue(functools.partial(self._ungate, key, pod, path))

    def _enqueue(self, action: Callable[[], Awaitable[None]]) -> None:
        if self._actions is not None:
            self._actions.put_nowait(action)

    async def _act(self) -> None:
        assert self._actions is not None
        while True:
            action = await self._actions.get()
            try:
                await action()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._error(f"API call failed: {type(exc).__name__}: {exc}")

    async def _ungate(self, key: str, pod: Mapping[str, Any], queue: str) -> None:
        patch = ungate_patch(pod)
        if not patch:
            return
        if "annotations" in mapping(pod.get("metadata")):
            path = "/metadata/annotations/" + ADMITTED_ANNOTATION.replace("/", "~1")
            patch.append({"op": "add", "path": path, "value": key})
        else:
            patch.append({"op": "add", "path": "/metadata/annotations", "value": {ADMITTED_ANNOTATION: key}})
        try:
            await self.api.patch_json("pods", pod, patch)
        except Exception:
            self._ungated.discard(key)      # the next event of the pod tries again
            raise
        self._reported.pop(key, None)
        await self.api.event(pod, "Normal", "Admitted", f"admitted by quotaplane to queue {queue}")

    async def _evict(self, key: str, pod: Mapping[str, Any], reason: Mapping[str, Any]) -> None:
        message = f"preempted by quotaplane: {reason.get('code', '')} at {reason.get('path', '')}: " \
                  f"{reason.get('message', '')}".strip()
        await self.api.patch_status_condition(pod, {
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByQuotaplane",
            "message": message, "lastTransitionTime": _now()})
        await self.api.event(pod, "Warning", "Preempted", message)
        await self.api.evict(pod, self.options.eviction_grace_seconds)

    # ------------------------------------------------------------------------------------------------
    # why pods wait
    # ------------------------------------------------------------------------------------------------
    async def _timeouts_loop(self, every: float) -> None:
        """Time moves the engine too (E5 reclaim after ``revokeDelay``, gang placeholders): its
        timeouts run here, so what they preempt is evicted like any other preemption."""
        while True:
            await asyncio.sleep(every)
            try:
                self.partition.check_timeouts()
            except Exception as exc:     # a journal hiccup: the next round tries again
                self._error(f"timeouts: {type(exc).__name__}: {exc}")

    async def _report_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.reasons_every)
            self.report_waiting()
            self._rounds += 1
            if self._rounds % 4 == 0:
                self.configuration.write_quota_status()

    def report_waiting(self) -> None:
        """Write the reasons of every waiting pod whose reasons changed since they were last written."""
        for ask in self.partition.pending():
            key = ask.allocation_key
            pod = self.pods.get(key)
            if pod is None or key in self._ungated:
                continue
            message = waiting_message(list(ask.reasons or []))
            if self._reported.get(key) == message:
                continue
            self._reported[key] = message
            self._enqueue(functools.partial(self._say_waiting, pod, message))

    async def _say_waiting(self, pod: Mapping[str, Any], message: str) -> None:
        await self.api.patch_status_condition(pod, {
            "type": CONDITION_ADMITTED, "status": "False", "reason": "QuotaWaiting", "message": message,
            "lastTransitionTime": _now()})
        await self.api.event(pod, "Warning", "QuotaWaiting", message)

    # ------------------------------------------------------------------------------------------------
    # inputs: nodes and namespaces (the ConfigMap and the custom quotas: kube/configuration.py)
    # ------------------------------------------------------------------------------------------------
    def node_event(self, event_type: str, node: dict[str, Any]) -> None:
        """A node's allocatable is its capacity; a cordoned or un-Ready node stays registered with the
        pods it runs but adds no capacity; a deleted node's pods are released (reference §5.2)."""
        name = str(mapping(node.get("metadata")).get("name", ""))
        p = self.partition
        registered = name in p.nodes()
        if event_type == "DELETED":
            if registered:
                p.remove_node(name)
            self.nodes.pop(name, None)
            return
        capacity, schedulable = node_capacity(node), node_counts(node)
        if not registered:
            p.add_node(name, capacity, schedulable=schedulable)
        else:
            p.update_node(name, capacity=capacity, schedulable=schedulable)
        self.nodes[name] = capacity
        for key, pod in sorted(self.pods.items()):      # pods that were bound before their node was seen
            if pod_node(pod) == name:
                self._bind(key, pod)

    def _bind(self, key: str, pod: Mapping[str, Any]) -> None:
        """The pod's node (``spec.nodeName``, set when the scheduler bound it) is its allocation's."""
        node = pod_node(pod)
        p = self.partition
        alloc = p.allocation(key)
        if node is None or alloc is None or alloc.node == node or node not in p.nodes():
            return
        p.bind(key, node)

    def namespace_event(self, event_type: str, ns: dict[str, Any]) -> None:
        """Namespaces' annotations become the tags of applications placed after (seed 004)."""
        name = str(mapping(ns.get("metadata")).get("name", ""))
        if event_type == "DELETED":
            self.namespaces.pop(name, None)
        else:
            self.namespaces[name] = ns


def _annotations(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(mapping(pod.get("metadata")).get("annotations"))


def _keys(notice: Mapping[str, Any]) -> list[str]:
    """The allocation keys a notice names (``allocationKey``, or each of ``allocations``)."""
    keys: list[str] = []
    if isinstance(notice.get("allocationKey"), str):
        keys.append(notice["allocationKey"])
    for item in notice.get("allocations") or []:
        if isinstance(item, Mapping) and isinstance(item.get("allocationKey"), str):
            keys.append(item["allocationKey"])
    return keys
