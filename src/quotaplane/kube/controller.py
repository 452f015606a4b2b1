"""The controller: gated pods become asks; allocated asks ungate their pods; preempted pods are evicted.

One asyncio task per watched kind (:class:`~quotaplane.kube.informer.Informer`: list, then watch with
bookmarks, relist only on ``410``) feeds one queue; one worker applies the events to the partition in
order (the partition's own lock makes each change atomic and journalled). What a pod should look like
then follows from the partition's decision, and a pool of reconcile workers makes it so, one pod at a
time (a pod is never reconciled by two workers at once), so that a slow API server does not hold the
engine.

Reconciling a pod (reference ``kubernetes-front.md`` §8) compares what it should be with what the API
server last showed:

* its ask allocated (and, for a gang, the whole minimum admitted): the gate ``quotaplane.io/admission``
  removed (only ours, guarded by a JSON-patch ``test``), the condition ``QuotaAdmitted=True`` (reason
  ``Admitted``, the queue), an Event ``Admitted``;
* still waiting: ``QuotaAdmitted=False`` (reason ``QuotaWaiting``) and a Warning Event carrying the
  reasons (codes, paths, shortfalls), rewritten when they change;
* preempted: ``QuotaAdmitted=False`` (reason ``Preempted``, the engine's reason — the condition the
  Eviction API leaves alone, unlike ``DisruptionTarget``, which it rewrites to
  ``EvictionByEvictionAPI``), then the Eviction API, then a Warning Event ``Preempted``. An eviction a
  PodDisruptionBudget refuses is retried with backoff and reported (a Warning Event
  ``EvictionBlocked``, the ``quotaplane_kube_evictions_blocked`` gauge); after
  ``eviction_timeout`` the preemption is given up (Event ``PreemptionAbandoned``; the pod is admitted
  again with ``QuotaAdmitted=True``, reason ``PreemptionAbandoned``, and never chosen again);
* a pod that succeeded, failed or was deleted: its allocation is released, or its ask withdrawn. A pod
  being deleted while it runs on a node keeps its quota until it is gone: its containers still run.

Every API call goes through the retry policy of :class:`~quotaplane.kube.api.KubeApi`; a call that
still fails is logged, counted, said in a Warning Event ``QuotaplaneRetrying`` when the API takes it,
and the pod is reconciled again after a per-pod backoff. A periodic resync (``resync_every``) compares
every managed pod's gate and condition with the partition's decision and reconciles any that differ,
so no lost call leaves a pod wrong for ever.

Restart: before watching, everything is listed; ungated live pods whose allocation the journal holds
stay counted, ungated pods the journal lacks but that carry the admitted mark are adopted, held
preemptions are rebuilt from the victims' conditions (:mod:`quotaplane.kube.holds`), allocations and
asks of managed applications whose pods are gone are released. Every handler is idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from quotaplane.cluster import Scheduler
from quotaplane.config.kueue import local_queue_map
from quotaplane.errors import InputError
from quotaplane.k8s.convert import application_tags, pod_namespace, pod_queue, pod_resource
from quotaplane.k8s.devices import claim_template_names
from quotaplane.kube.api import CLAIM_TEMPLATES, ApiCallError, KubeApi
from quotaplane.kube.configuration import ClusterConfiguration
from quotaplane.kube.eta import EtaNotes
from quotaplane.kube.holds import ABANDONED, CONDITION_ADMITTED, PREEMPTED, preemption_message, rebuild
from quotaplane.kube.informer import Informer
from quotaplane.kube.kueue import KUEUE_KINDS
from quotaplane.kube.nodes import node_capacity, node_counts
from quotaplane.kube.objects import mapping, name_of
from quotaplane.kube.pods import (
    GATE,
    gang_parameters,
    has_gate,
    is_finished,
    is_terminating,
    pod_app_id,
    pod_key,
    pod_node,
    pod_priority,
    pod_runtime,
    pod_tags,
    pod_user,
    task_group_name,
    task_groups,
    ungate_patch,
)
from quotaplane.kube.webhook import CONFIG_MAP
from quotaplane.partition import Partition
from quotaplane.policies.protocol import Violation
from quotaplane.resources import Resource
from quotaplane.windows import tick as window_tick

__all__ = ["ADMITTED_ANNOTATION", "CONDITION_ADMITTED", "MANAGED_TAG", "Controller", "ControllerOptions",
           "FrontStats", "waiting_message"]

log = logging.getLogger("quotaplane.kube")

#: set on a pod in the ungate patch: the allocation that admitted it (adoption after a restart)
ADMITTED_ANNOTATION = "quotaplane.io/allocation"
#: the application tag that marks applications the controller created
MANAGED_TAG = "quotaplane.io/kube"
_PLACEHOLDER = "placeholder"
_RESYNC = "RESYNC"
#: the condition the Eviction API writes (and rewrites): quotaplane's reason goes in QuotaAdmitted
_DISRUPTION_TARGET = "DisruptionTarget"


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
    #: seconds between resyncs: every managed pod whose gate or condition differs from the partition's
    #: decision is reconciled again
    resync_every: float = 30.0
    #: seconds between forecasts of the waiting pods' start (docs/eta.md "Kubernetes"): each waiting
    #: pod's condition then says when it should start and the top change; None: not said
    eta_every: float | None = 30.0
    #: seconds a preemption waits for its victim's eviction (refused by a PodDisruptionBudget, failing)
    #: before it is given up
    eviction_timeout: float = 300.0
    #: a pod whose reconcile failed is tried again after this backoff (doubling, capped)
    retry_base: float = 0.5
    retry_max: float = 30.0
    #: Kueue's ``deviceClassMappings``: DeviceClass name → the resource a device of it counts as. Set,
    #: the front also follows the ResourceClaimTemplates and charges a pod's DRA claims from them
    #: (docs/flavors.md "Device quotas"); None: claims are not counted
    device_classes: Mapping[str, str] | None = None


@dataclass
class FrontStats:
    """What the controller did that an operator watches (the ``quotaplane_kube_*`` metrics)."""

    #: pods reconciled again by the periodic resync because they differed from the decision
    repaired: int = 0
    #: reconciles that failed (an API call failed for good), by call
    failed: Counter[str] = field(default_factory=Counter)
    #: evictions by outcome: ``evicted``, ``blocked`` (refused, retried), ``abandoned``
    evictions: Counter[str] = field(default_factory=Counter)
    #: victims whose eviction is refused right now
    blocked: set[str] = field(default_factory=set)


@dataclass
class _Eviction:
    """A preempted pod being evicted: why, since when (monotonic), whether the API accepted it."""

    reason: Mapping[str, Any]
    since: float
    done: bool = False
    blocked: str = ""


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
        # a victim's quota stays charged until its pod is gone: the Eviction API may refuse it (a
        # PodDisruptionBudget), and a terminating pod still runs (issue 31 #3)
        self.partition.hold_preempted = True
        #: allocation key → the latest pod object of every pod the controller manages
        self.pods: dict[str, dict[str, Any]] = {}
        #: namespace name → its object (for tags and the webhook's enableYuniKorn)
        self.namespaces: dict[str, dict[str, Any]] = {}
        #: node name → the capacity registered for it
        self.nodes: dict[str, Resource] = {}
        #: allocation key → the (reason, message) of the last Event said about the pod
        self._said: dict[str, tuple[str, str]] = {}
        #: allocation key → the waiting message the reasons loop last saw (reconcile when it changes)
        self._reported: dict[str, str] = {}
        #: the ETA sentence of each waiting pod, refreshed every ``eta_every`` seconds
        self.eta_notes = EtaNotes(self.partition)
        #: keys ungated by this process (their Admitted Event is owed until said)
        self._ungated: set[str] = set()
        #: gang applications whose whole minimum was admitted once
        self._gang_whole: set[str] = set()
        #: gang application → its minimum (Σ minMember of its task groups)
        self._gang_min: dict[str, int] = {}
        #: keys of pods preempted and being evicted (never adopted again)
        self._evicting: dict[str, _Eviction] = {}
        #: keys of pods whose preemption was given up (``QuotaAdmitted=True``, ``PreemptionAbandoned``)
        self._spared: set[str] = set()
        #: the start-up listing is being applied (the only time running pods are adopted)
        self._syncing = False
        self._events: asyncio.Queue[tuple[str, str, dict[str, Any]]] | None = None
        self._actions: asyncio.Queue[Callable[[], Awaitable[None]]] | None = None
        #: pods to reconcile (each key once in the queue at a time)
        self._queue: asyncio.Queue[str] | None = None
        self._queued: set[str] = set()
        #: keys a worker is reconciling, and those touched meanwhile (reconciled again after)
        self._busy: set[str] = set()
        self._again: set[str] = set()
        #: key → failures in a row (the per-pod backoff)
        self._failures: dict[str, int] = {}
        self._rng = random.Random()
        self.stats = FrontStats()
        self._tasks: list[asyncio.Task[None]] = []
        self._unsubscribe: Callable[[], None] | None = None
        #: the kinds followed: the API's, and the claim templates when device classes are mapped
        self.kinds: tuple[str, ...] = api.KINDS if self.options.device_classes is None else \
            (*[k for k in api.KINDS if k != "pods"], CLAIM_TEMPLATES, "pods")
        #: namespace → ResourceClaimTemplate name → its ``spec`` (a pod's claims are charged from them)
        self.claim_templates: dict[str, dict[str, dict[str, Any]]] = {}
        #: kind → its informer (the ConfigMap's narrowed to its namespace and name)
        self.informers: dict[str, Informer] = {
            kind: Informer(api, kind, error=self._error, **self._narrowed(kind)) for kind in self.kinds}
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
        self._queue = asyncio.Queue()
        self._unsubscribe = self.partition.subscribe(self._notice)
        try:
            workers = max(1, self.options.workers)
            self._tasks = [asyncio.create_task(self._act()) for _ in range(max(1, workers // 4))]
            self._tasks += [asyncio.create_task(self._reconcile_worker()) for _ in range(workers)]
            await self.sync()
            self._tasks += [asyncio.create_task(self._watch(kind)) for kind in self.kinds
                            if kind not in self._absent]
            self._tasks.append(asyncio.create_task(self._report_loop()))
            self._tasks.append(asyncio.create_task(self._resync_loop(self.options.resync_every)))
            if self.options.eta_every is not None:
                self._tasks.append(asyncio.create_task(self._eta_loop(self.options.eta_every)))
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
        await self._sync_inputs()
        items = await self._first_list("pods") or []
        self._hold_again(items)
        self._syncing = True
        try:
            # every listed pod is decided here, three journalled changes each: one snapshot after
            # them, not one of the growing state every snapshot_every events
            with self.partition.snapshots_held():
                for pod in items:
                    self._apply("pods", "ADDED", pod)
        finally:
            self._syncing = False
        self._release_missing({pod_key(pod) for pod in items})
        for key, held in self.partition.preempting().items():     # held before this controller ran
            if key in self.pods and key not in self._evicting:
                self._evicting[key] = _Eviction(held.get("reason") or {}, time.monotonic())
                self._touch(key)
        self.synced.set()

    async def _sync_inputs(self) -> None:
        """Every kind but pods listed and applied, as one configuration change."""
        configuration = self.configuration
        configuration.batching = True   # the custom quotas and the ConfigMap make one configuration change
        try:
            for kind in self.kinds:
                listed = None if kind == "pods" else await self._first_list(kind)
                for obj in listed or ():
                    self._apply(kind, "ADDED", obj)
        finally:
            configuration.batching = False
        configuration.flush()

    def _hold_again(self, items: list[dict[str, Any]]) -> None:
        """The preemptions this front was carrying out before it stopped, rebuilt from the pods
        (:mod:`quotaplane.kube.holds`) before any waiting pod is looked at, so nothing is decided
        again: each victim held again with its reason, its eviction resumed from when it was decided;
        a victim whose preemption was given up is never chosen again. A victim the journal lacks (a
        store lost) is adopted first, as any running pod that carries the admitted mark."""
        p = self.partition
        live = {pod_key(pod): pod for pod in items if not is_finished(pod)}
        found = rebuild(live.items())
        self._adopt_victims(live, sorted([*found.held, *found.spared]))
        for key, (reason, since) in sorted(found.held.items()):
            if p.allocation(key) is None:
                continue
            self._evicting.setdefault(key, _Eviction(reason, since))
            p.hold([key], reason)
        spared = [key for key in found.spared if p.allocation(key) is not None]
        if spared:
            p.spare(spared)
            self._spared.update(spared)

    def _adopt_victims(self, live: dict[str, dict[str, Any]], keys: list[str]) -> None:
        """Victims the journal lacks (a store lost) that carry the admitted mark: adopted."""
        for key in keys:
            pod = live[key]
            if self.partition.allocation(key) is None and not has_gate(pod) and \
                    _annotations(pod).get(ADMITTED_ANNOTATION) is not None:
                self.pods[key] = pod
                self._adopt(key, pod)

    def _narrowed(self, kind: str) -> dict[str, Any]:
        """The one ConfigMap the front reads is listed and watched alone (namespace, field selector)."""
        if kind == "configmaps":
            return {"namespace": self.options.config_namespace, "fields": {"metadata.name": CONFIG_MAP}}
        return {}

    async def _first_list(self, kind: str) -> list[dict[str, Any]] | None:
        """The start-up listing of ``kind``, tried until it works: a kind whose storage initialises
        answers 429 for a while (a CRD just installed, an apiserver restart), the API server may be
        restarting. None: the kind is not served (its CRD is not installed)."""
        failures = 0
        while True:
            try:
                return await self.informers[kind].list()
            except ApiCallError as exc:
                if kind in self.api.OPTIONAL and exc.code == 404:
                    self._absent.add(kind)      # the CRD is not installed: nothing to read
                    log.info("%s: not served by the API server (CRD not installed)", kind)
                    return None
                failures += 1
                self._error(f"listing {kind}: {exc}; trying again")
                await asyncio.sleep(min(self.options.retry_max,
                                        self.options.retry_base * 2 ** min(failures, 10)))

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
        elif kind == CLAIM_TEMPLATES:
            self.claim_templates.clear()
        elif kind in KUEUE_KINDS:
            seen = {(str(mapping(o.get("metadata")).get("namespace") or ""),
                     str(mapping(o.get("metadata")).get("name") or "")) for o in items}
            for ns, name in sorted(set(self.configuration.kueue.objects[kind]) - seen):
                self._apply(kind, "DELETED", {"metadata": {"name": name, "namespace": ns}})
        for obj in items:
            self._apply(kind, "ADDED", obj)

    def _release_missing(self, live: set[str]) -> None:
        """Allocations and asks of managed applications whose pods are gone: released / withdrawn."""
        p = self.partition
        for app in p.applications():
            if app.tags.get(MANAGED_TAG) != "true":
                continue
            # the application's own allocations, not every allocation once per application: at
            # Kueue's 50,000 pods that scan was quadratic and kept the front from starting (issue 38)
            gone = [a.allocation_key for a in list(app.allocations.values())
                    if not a.placeholder and a.allocation_key not in live]
            if gone:
                p.release_batch(gone)
            self._withdraw_missing(app.application_id, live)
            self._forget_app_if_idle(app.application_id)

    def _withdraw_missing(self, app_id: str, live: set[str]) -> None:
        """The application's waiting asks whose pods are gone: withdrawn."""
        p = self.partition
        for ask in p.pending(app_id):
            if not ask.placeholder and ask.allocation_key not in live:
                p.remove_ask(ask.allocation_key)

    async def _watch(self, kind: str) -> None:
        """Follow ``kind`` from its listing's version (:class:`Informer`): events, and a relisting
        after ``410``, go to the one queue the partition's writer reads."""
        assert self._events is not None
        events = self._events

        async def handle(event_type: str, obj: dict[str, Any]) -> None:
            await events.put((kind, event_type, obj))

        async def resync(items: list[dict[str, Any]]) -> None:
            await events.put((kind, _RESYNC, {"items": items}))
        await self.informers[kind].run(handle, resync)

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
            elif kind in KUEUE_KINDS:
                self.configuration.kueue_event(kind, event_type, obj)
            elif kind == CLAIM_TEMPLATES:
                self.claim_template_event(event_type, obj)
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
        if event_type == "DELETED" or is_finished(pod) or (is_terminating(pod) and pod_node(pod) is None):
            if key in self.pods or p.allocation(key) is not None or p.get_ask(key) is not None:
                self._pod_gone(key, pod)
            return
        if is_terminating(pod):         # being deleted on its node: it runs until the kubelet is done
            if p.allocation(key) is not None:
                self.pods[key] = pod
            return
        if has_gate(pod):
            self.pods[key] = pod
            if p.allocation(key) is None and p.get_ask(key) is None:
                self._ask_for(key, pod)
            self._touch(key)
            return
        # ungated and running
        if p.allocation(key) is not None:
            self.pods[key] = pod
            self._bind(key, pod)
            self._touch(key)
        elif self._syncing and key not in self._evicting and \
                _annotations(pod).get(ADMITTED_ANNOTATION) is not None:
            self.pods[key] = pod
            self._adopt(key, pod)

    # ------------------------------------------------------------------------------------------------
    # DRA claim templates (device quotas)
    # ------------------------------------------------------------------------------------------------
    def claim_template_event(self, event_type: str, template: dict[str, Any]) -> None:
        """One ResourceClaimTemplate ADDED / MODIFIED / DELETED: kept for the pods that refer to it. A
        gated pod that waited for it (its claims could not be charged: no ask yet) is taken up now —
        the template's watch may bring it after the pod's."""
        meta = mapping(template.get("metadata"))
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        known = self.claim_templates.setdefault(ns, {})
        if event_type == "DELETED":
            known.pop(name, None)   # a pod charged from it keeps its ask: Kubernetes made its claim
            return
        known[name] = dict(mapping(template.get("spec")))
        p = self.partition
        for key, pod in sorted(self.pods.items()):
            if pod_namespace(pod) == ns and has_gate(pod) and p.get_ask(key) is None and \
                    p.allocation(key) is None and name in claim_template_names(pod):
                self.pod_event("MODIFIED", pod)

    def _claims_refused(self, key: str, pod: dict[str, Any], message: str) -> None:
        """A pod whose DRA claims cannot be charged (a template not seen yet, what Kueue refuses: KQ-D3)
        stays gated with no ask; a Warning Event ``ClaimsNotCharged`` says why, once per message."""
        if self._said.get(key) != ("ClaimsNotCharged", message):
            self._said[key] = ("ClaimsNotCharged", message)
            self._enqueue(functools.partial(self._quiet_event, pod, "Warning", "ClaimsNotCharged", message))

    def _resource_of(self, pod: Mapping[str, Any]) -> Resource:
        """What ``pod`` is charged: its requests and, with device classes mapped, its DRA claims from
        their templates (``InputError`` naming the claim when one cannot be charged)."""
        classes = self.options.device_classes
        if classes is None:
            return pod_resource(pod)
        return pod_resource(pod, claim_templates=self.claim_templates.get(pod_namespace(pod), {}),
                            device_classes=classes)

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
            queue = pod_queue(pod, local_queue_map(p.config.extensions))     # Kueue's LocalQueues too
            p.add_application(app_id, pod_user(pod), queue=queue, tags=tags, gang_style=style,
                              placeholder_timeout=timeout)
        return app_id

    def _ask_for(self, key: str, pod: dict[str, Any]) -> None:
        try:
            resource = self._resource_of(pod)
        except InputError as exc:
            self._claims_refused(key, pod, str(exc))
            return
        group = task_group_name(pod)
        groups = task_groups(pod) if group is not None else []
        new = self.partition.application(pod_app_id(pod)) is None
        app_id = self._app_for(pod)
        if groups:
            self._gang_min[app_id] = sum(g.min_member for g in groups)
            if new:         # YuniKorn: the placeholders are created once, when the gang is first seen
                self._placeholders(app_id, groups)
        self.partition.add_ask(app_id, key, resource, priority=pod_priority(pod),
                               task_group=group if groups else None, tags=pod_tags(pod),
                               max_runtime=pod_runtime(pod))

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
        decision = self.partition.allocate(app_id, key, self._resource_of(pod), priority=pod_priority(pod),
                                           node=node if node in self.partition.nodes() else None,
                                           tags=pod_tags(pod), max_runtime=pod_runtime(pod),
                                           preempt=False)   # it runs already
        if not decision.allocated:
            self._error(f"adopting running pod {name_of(pod)}: not within quota now "
                        f"({waiting_message(list(decision.reasons))}); it is not counted")

    def _pod_gone(self, key: str, pod: Mapping[str, Any]) -> None:
        p = self.partition
        self.pods.pop(key, None)
        self._reported.pop(key, None)
        self._said.pop(key, None)
        self._failures.pop(key, None)
        self._ungated.discard(key)
        self._evicting.pop(key, None)
        self._spared.discard(key)
        self.stats.blocked.discard(key)
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
                    self._touch(key)
                else:
                    self._gang_progress_key(key)
        elif kind == "preempted":
            reason = notice.get("reason") or {}
            for key in _keys(notice):
                if key in self.pods and key not in self._evicting:
                    self._evicting[key] = _Eviction(reason, time.monotonic())
                    self._touch(key)

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
                self._touch(alloc.allocation_key)

    def _admitted(self, key: str) -> Any:
        """The pod's allocation when it may run: allocated and, for a gang, the whole minimum admitted
        once (all or nothing); else None."""
        alloc = self.partition.allocation(key)
        if alloc is None:
            return None
        if alloc.task_group is not None and alloc.application_id not in self._gang_whole:
            self._gang_progress(alloc.application_id)
            if alloc.application_id not in self._gang_whole:
                return None
        return alloc

    def _enqueue(self, action: Callable[[], Awaitable[None]]) -> None:
        if self._actions is not None:
            self._actions.put_nowait(action)

    async def _act(self) -> None:
        """One-off calls (the configuration's Events and status writes, failure Events): retried by the
        API's policy; what still fails is reported (the quota status is written again next round)."""
        assert self._actions is not None
        while True:
            action = await self._actions.get()
            try:
                await action()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._error(f"API call failed: {type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------------------------------------
    # reconciling pods
    # ------------------------------------------------------------------------------------------------
    def _touch(self, key: str) -> None:
        """Reconcile the pod ``key`` soon (once, however often it is touched)."""
        if self._queue is None:
            return
        if key in self._busy:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def _touch_later(self, key: str, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self._touch, key)

    async def _reconcile_worker(self) -> None:
        assert self._queue is not None
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            self._busy.add(key)
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except ApiCallError as exc:
                self._failed(key, exc)
            except Exception as exc:     # a bug must not stop the worker: reported, tried again later
                self._error(f"reconcile {key}: {type(exc).__name__}: {exc}")
                self._retry_later(key)
            else:
                self._failures.pop(key, None)
            finally:
                self._busy.discard(key)
                if key in self._again:
                    self._again.discard(key)
                    self._touch(key)

    def _retry_later(self, key: str) -> None:
        n = self._failures[key] = self._failures.get(key, 0) + 1
        delay = min(self.options.retry_max, self.options.retry_base * 2 ** min(n - 1, 10))
        self._touch_later(key, delay * self._rng.uniform(0.5, 1.0))

    def _failed(self, key: str, exc: ApiCallError) -> None:
        """An API call for pod ``key`` failed for good: logged, counted, said in an Event when the API
        takes it, and the pod is reconciled again after its backoff."""
        self.stats.failed[exc.call] += 1
        pod = self.pods.get(key)
        self._error(f"pod {name_of(pod) if pod else key}: {exc}; trying again")
        if pod is not None and exc.call != "event":
            self._enqueue(functools.partial(self._quiet_event, pod, "Warning", "QuotaplaneRetrying",
                                            f"{exc}; quotaplane tries again"))
        self._retry_later(key)

    async def _quiet_event(self, pod: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        with contextlib.suppress(ApiCallError):
            await self.api.event(pod, event_type, reason, message)

    def differs(self, key: str) -> bool:
        """The pod ``key`` as last seen differs from the partition's decision (its gate, its
        ``QuotaAdmitted`` condition, a pending eviction, an Event still owed)."""
        pod = self.pods.get(key)
        if pod is None:
            return False
        if key in self._evicting:
            return not self._evicting[key].done
        if self._admitted(key) is not None:
            return self._admission_differs(key, pod)
        ask = self.partition.get_ask(key)
        if (ask is not None and ask.reasons) or self.partition.allocation(key) is not None:
            message = self._waiting(ask) if ask is not None else _GANG_WAITING
            return _condition(pod) != ("False", "QuotaWaiting", message)
        return False

    def _admission_differs(self, key: str, pod: Mapping[str, Any]) -> bool:
        """An admitted pod still gated, without its ``QuotaAdmitted`` condition, or owed its Event."""
        if has_gate(pod) or _condition(pod)[:2] != ("True", self._admitted_reason(key)):
            return True
        return key in self._ungated and self._said.get(key, ("",))[0] != "Admitted"

    async def reconcile(self, key: str) -> None:
        """Make the pod ``key`` what the partition decided (see the module docstring)."""
        pod = self.pods.get(key)
        if pod is None:
            return
        if key in self._evicting:
            await self._evict(key, pod, self._evicting[key])
            return
        alloc = self._admitted(key)
        if alloc is not None:
            await self._admit(key, pod, alloc)
            return
        ask = self.partition.get_ask(key)
        if ask is None and self.partition.allocation(key) is None:
            return
        if ask is not None and not ask.reasons:
            return          # not through a cycle yet: its reasons come with the cycle (report_waiting)
        await self._say_waiting(key, pod, self._waiting(ask) if ask is not None else _GANG_WAITING)

    async def _say_waiting(self, key: str, pod: dict[str, Any], message: str) -> None:
        """The pod's ``QuotaWaiting`` condition and Event, each written once per message."""
        if _condition(pod) != ("False", "QuotaWaiting", message):
            await self._condition(pod, "False", "QuotaWaiting", message)
        self._reported[key] = message
        if self._said.get(key) != ("QuotaWaiting", message):
            await self.api.event(pod, "Warning", "QuotaWaiting", message)
            self._said[key] = ("QuotaWaiting", message)

    async def _admit(self, key: str, pod: dict[str, Any], alloc: Any) -> None:
        app = self.partition.application(alloc.application_id)
        queue = app.queue_path if app is not None else ""
        if has_gate(pod):
            fresh = await self._ungate(key, pod)
            if fresh is None:
                return                      # gone meanwhile
            pod = fresh
        message = f"admitted by quotaplane to queue {queue}"
        reason = self._admitted_reason(key)
        if reason == ABANDONED:
            message += "; its preemption was given up (its eviction kept being refused)"
        if _condition(pod)[:2] != ("True", reason):
            await self._condition(pod, "True", reason, message)
        if key in self._ungated and self._said.get(key, ("",))[0] != "Admitted":
            await self.api.event(pod, "Normal", "Admitted", message)
            self._said[key] = ("Admitted", message)

    def _admitted_reason(self, key: str) -> str:
        """``QuotaAdmitted=True``'s reason: ``Admitted``, or ``PreemptionAbandoned`` for a victim whose
        preemption was given up (what a restarted front reads to spare it again)."""
        return ABANDONED if key in self._spared else "Admitted"

    async def _ungate(self, key: str, pod: dict[str, Any]) -> dict[str, Any] | None:
        """Remove quotaplane's gate (and mark the pod admitted). A failed ``test`` (another controller
        changed the gates meanwhile, or an earlier try's answer was lost) reads the pod again and
        patches the gate where it now is."""
        for _ in range(3):
            patch = ungate_patch(pod)
            if not patch:
                return pod
            if "annotations" in mapping(pod.get("metadata")):
                path = "/metadata/annotations/" + ADMITTED_ANNOTATION.replace("/", "~1")
                patch.append({"op": "add", "path": path, "value": key})
            else:
                patch.append({"op": "add", "path": "/metadata/annotations",
                              "value": {ADMITTED_ANNOTATION: key}})
            try:
                await self.api.patch_json("pods", pod, patch)
            except ApiCallError as exc:
                if exc.code not in (404, 422):
                    raise
                fresh = await self._fresh(pod)
                if fresh is None:
                    return None
                pod = fresh
                continue
            self._ungated.add(key)
            gates = [g for g in mapping(pod.get("spec")).get("schedulingGates") or []
                     if mapping(g).get("name") != GATE]
            pod = {**pod, "spec": {**mapping(pod.get("spec")), "schedulingGates": gates}}
            self.pods[key] = pod
            return pod
        raise ApiCallError("patch", 422, "the pod's gates kept changing", 3, True)

    async def _fresh(self, pod: Mapping[str, Any]) -> dict[str, Any] | None:
        """The pod as the API server has it now (None: gone)."""
        meta = mapping(pod.get("metadata"))
        try:
            fresh = await self.api.get("pods", str(meta.get("name", "")), meta.get("namespace"))
        except ApiCallError as exc:
            if exc.code == 404:
                return None
            raise
        if mapping(fresh.get("metadata")).get("uid") != meta.get("uid"):
            return None                 # another pod of the same name
        if pod_key(fresh) in self.pods:
            self.pods[pod_key(fresh)] = fresh
        return fresh

    async def _condition(self, pod: Mapping[str, Any], status: str, reason: str, message: str) -> None:
        """Write ``QuotaAdmitted``; its transition time moves only when its status does."""
        before, when = _condition(pod), _condition_time(pod)
        stamp = when if before[0] == status and when else _now()
        condition = {"type": CONDITION_ADMITTED, "status": status, "reason": reason, "message": message,
                     "lastTransitionTime": stamp}
        await self.api.patch_status_condition(pod, condition)
        conditions = [c for c in mapping(pod.get("status")).get("conditions") or []
                      if mapping(c).get("type") != CONDITION_ADMITTED]
        key = pod_key(pod)
        if key in self.pods:
            status_now = {**mapping(pod.get("status")), "conditions": [*conditions, condition]}
            self.pods[key] = {**pod, "status": status_now}

    async def _evict(self, key: str, pod: dict[str, Any], eviction: _Eviction) -> None:
        """Evict a preempted pod: the reason in ``QuotaAdmitted`` first (the pod may go at once, and
        the Eviction API rewrites ``DisruptionTarget``), then the Eviction API; a refusal is retried
        with backoff, reported, and given up after ``eviction_timeout``."""
        if eviction.done or is_terminating(pod):
            eviction.done = True
            return
        message = preemption_message(eviction.reason)
        if _condition(pod) != ("False", PREEMPTED, message):
            await self._condition(pod, "False", PREEMPTED, message)
        try:
            await self.api.evict(pod, self.options.eviction_grace_seconds)
        except ApiCallError as exc:
            if not exc.transient:
                raise
            self._blocked(key, pod, eviction, exc)
            return
        eviction.done = True
        self.stats.blocked.discard(key)
        self.stats.evictions["evicted"] += 1
        self._said[key] = ("Preempted", message)
        self._enqueue(functools.partial(self._quiet_event, pod, "Warning", "Preempted", message))

    def _blocked(self, key: str, pod: dict[str, Any], eviction: _Eviction, exc: ApiCallError) -> None:
        """A refused eviction (a PodDisruptionBudget, or the API failing): reported, retried, and after
        ``eviction_timeout`` given up."""
        why = "; ".join(exc.causes) or exc.message
        self.stats.evictions["blocked"] += 1
        limit = self.options.eviction_timeout
        if time.monotonic() - eviction.since >= limit:
            self._evicting.pop(key, None)
            self.stats.blocked.discard(key)
            self._spared.add(key)
            self.partition.cancel_preemption([key])     # never this victim again: the engine picks others
            self.stats.evictions["abandoned"] += 1
            self._error(f"pod {name_of(pod)}: eviction refused for {limit:g}s ({why}); the preemption is "
                        "given up")
            self._enqueue(functools.partial(self._quiet_event, pod, "Warning", "PreemptionAbandoned",
                                            f"the eviction was refused for {limit:g}s ({why}); the "
                                            "preemption is given up"))
            self._touch(key)
            return
        self.stats.blocked.add(key)
        if eviction.blocked != why:
            eviction.blocked = why
            log.warning("pod %s: eviction refused (%s); retrying", name_of(pod), why)
            self._enqueue(functools.partial(self._quiet_event, pod, "Warning", "EvictionBlocked",
                                            f"the eviction for quotaplane's preemption was refused: {why}; "
                                            "retrying"))
        self._retry_later(key)

    # ------------------------------------------------------------------------------------------------
    # why pods wait
    # ------------------------------------------------------------------------------------------------
    async def _timeouts_loop(self, every: float) -> None:
        """Time moves the engine too (E5 reclaim after ``revokeDelay``, gang placeholders, budgets'
        resets): its timeouts run here, so what they preempt is evicted like any other preemption; and
        the time windows open and close here, each edge a configuration change (docs/windows.md)."""
        while True:
            await asyncio.sleep(every)
            try:
                scheduler = self.scheduler
                for line in window_tick(scheduler.config_text, scheduler.update_config, scheduler.clock()):
                    log.info("%s", line)
            except Exception as exc:     # a refused change: reported, the next round tries again
                self._error(f"windows: {type(exc).__name__}: {exc}")
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

    def _waiting(self, ask: Any) -> str:
        """The condition message of a waiting pod: why it waits, then when it should start and the
        top change that would start it now (:mod:`quotaplane.kube.eta`, once refreshed)."""
        return waiting_message(list(ask.reasons or [])) + self.eta_notes.note(ask.allocation_key)

    async def _eta_loop(self, every: float) -> None:
        """Every ``every`` seconds, the forecast on a worker thread; the pods whose note changed are
        reconciled (their condition message rewritten)."""
        while True:
            await asyncio.sleep(every)
            try:
                changed = await asyncio.to_thread(self.eta_notes.refresh)
            except Exception as exc:     # the forecast is advice: the next round tries again
                self._error(f"eta: {type(exc).__name__}: {exc}")
                continue
            for key in changed:
                if key in self.pods:
                    self._touch(key)

    def report_waiting(self) -> None:
        """Reconcile every waiting pod whose reasons changed since they were last written."""
        for ask in self.partition.pending():
            key = ask.allocation_key
            if key not in self.pods:
                continue
            if self._reported.get(key) != self._waiting(ask):
                self._touch(key)

    async def _resync_loop(self, every: float) -> None:
        """Every ``every`` seconds, reconcile each managed pod that differs from the decision."""
        while True:
            await asyncio.sleep(every)
            self.resync_pods()

    def resync_pods(self) -> int:
        """Touch every managed pod whose gate or condition differs from the partition's decision; how
        many."""
        repaired = 0
        for key in sorted(self.pods):
            if key not in self._queued and key not in self._busy and self.differs(key):
                repaired += 1
                self._touch(key)
        self.stats.repaired += repaired
        return repaired

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


_GANG_WAITING = "waiting for the rest of its gang's minimum to be admitted"


def _condition(pod: Mapping[str, Any]) -> tuple[str, str, str]:
    """(status, reason, message) of the pod's ``QuotaAdmitted`` condition ("" when absent)."""
    for c in mapping(pod.get("status")).get("conditions") or []:
        c = mapping(c)
        if c.get("type") == CONDITION_ADMITTED:
            return str(c.get("status", "")), str(c.get("reason", "")), str(c.get("message", ""))
    return "", "", ""


def _condition_time(pod: Mapping[str, Any]) -> str:
    for c in mapping(pod.get("status")).get("conditions") or []:
        c = mapping(c)
        if c.get("type") == CONDITION_ADMITTED:
            return str(c.get("lastTransitionTime") or "")
    return ""


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
