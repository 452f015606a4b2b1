"""The partition's configuration as the cluster defines it (reference ``kubernetes-front.md`` §8): the
``yunikorn-configs`` ConfigMap's ``queues.yaml`` composed with the ElasticQuota and QuotaSubtree objects
(:mod:`quotaplane.kube.crds`), applied all or nothing, and Koordinator's write-back of the elastic
figures onto the ElasticQuota objects.

The controller hands this part the events of those kinds; what it says to the cluster (Events, status
patches) goes through the controller's action queue, so a slow API server never holds the engine.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from quotaplane.errors import QuotaplaneError
from quotaplane.kube.crds import CustomQuotas
from quotaplane.kube.kueue import KueueObjects
from quotaplane.kube.objects import mapping, name_of
from quotaplane.kube.webhook import CONFIG_MAP, CONFIG_MAP_KEY
from quotaplane.windows import edges

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.cluster import Scheduler
    from quotaplane.kube.api import KubeApi

__all__ = ["ClusterConfiguration"]


class ClusterConfiguration:
    """The ConfigMap's text and the custom quota objects of one partition, composed into its
    configuration (see the module docstring)."""

    __slots__ = ("_conflicts", "_dirty", "_enqueue", "_error", "_namespace", "_partition", "_text", "api",
                 "batching", "custom", "kueue", "scheduler")

    def __init__(self, scheduler: Scheduler, api: KubeApi, partition: str, namespace: str,
                 enqueue: Callable[[Callable[[], Awaitable[None]]], None],
                 error: Callable[[str], None]) -> None:
        self.scheduler = scheduler
        self.api = api
        self._partition = partition
        #: the namespace of the ``yunikorn-configs`` ConfigMap
        self._namespace = namespace
        self._enqueue = enqueue
        self._error = error
        #: ElasticQuota and QuotaSubtree objects (the partition's extensions once any is seen)
        self.custom = CustomQuotas()
        #: Kueue's ResourceFlavor, Cohort, ClusterQueue and LocalQueue objects (docs/from-kueue.md)
        self.kueue = KueueObjects()
        #: the last ``queues.yaml`` of the ConfigMap (the base the custom quotas are composed with)
        self._text: str | None = None
        #: the custom quotas changed and the configuration is still to be applied
        self._dirty = False
        #: True while the start-up listing is applied: the ConfigMap and the custom quotas then make
        #: one configuration change (:meth:`flush` once it is done)
        self.batching = False
        #: ElasticQuota name conflicts already reported
        self._conflicts: set[tuple[str, str]] = set()

    def config_map_event(self, event_type: str, cm: dict[str, Any]) -> None:
        """``yunikorn-configs``'s ``queues.yaml`` is applied all or nothing (an invalid one is reported
        and the running config stays)."""
        meta = mapping(cm.get("metadata"))
        if event_type == "DELETED" or meta.get("name") != CONFIG_MAP or \
                meta.get("namespace") != self._namespace:
            return
        text = mapping(cm.get("data")).get(CONFIG_MAP_KEY)
        if not isinstance(text, str):
            return
        self._text = text
        self._dirty = True
        self.flush(cm)

    def kueue_event(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        """A Kueue object changed: the configuration is composed again when what it defines changed."""
        if self.kueue.event(kind, event_type, obj):
            self._dirty = True
            self.flush(obj if event_type != "DELETED" else None)

    def custom_quota_event(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        """An ElasticQuota or QuotaSubtree changed: the configuration is composed again (only when
        what the objects define changed — not when the write-back touched them)."""
        if self.custom.event(kind, event_type, obj):
            self._dirty = True
            self.flush(obj if event_type != "DELETED" else None)
        if kind == "elasticquotas":
            for conflict, reason in self.custom.elastic_quotas()[1]:
                ident = (name_of(conflict), reason)
                if ident not in self._conflicts:        # said once per object and reason
                    self._conflicts.add(ident)
                    self._enqueue(functools.partial(self.api.event, conflict, "Warning", "QuotaConflict",
                                                    reason))

    def flush(self, source: Mapping[str, Any] | None = None) -> None:
        """Apply the ConfigMap's text (else the running one) composed with the custom quotas, all or
        nothing; a refusal is reported on ``source`` and the running configuration stays."""
        if not self._dirty or self.batching:
            return
        self._dirty = False
        base = self._text if self._text is not None else self.scheduler.config_text
        try:
            text = self.kueue.compose(self.custom.compose(base, self._partition), self._partition)
            # the time windows due now stay open in the composed text (docs/windows.md): the cluster's
            # objects carry the configuration as written, the running one what the windows changed
            opened = edges(text, self.scheduler.clock())
            if opened is not None:
                text = opened[0]
            if text != self.scheduler.config_text:
                self.scheduler.update_config(text)
        except (QuotaplaneError, ValueError) as exc:
            self._error(f"configuration not applied: {exc}")
            if source is not None:
                self._enqueue(functools.partial(self.api.event, source, "Warning", "ConfigRefused", str(exc)))

    def write_quota_status(self) -> None:
        """Koordinator's write-back: runtime and request annotations and ``status.used`` of every
        ElasticQuota whose figures changed (one merge patch each)."""
        if not self.custom.elastic:
            return
        from quotaplane.server.extensions import policy_of

        p = self.scheduler.partition(self._partition)
        policy = policy_of(p, "elastic")
        if policy is None:
            return
        with p.lock:
            names = set(policy.manager.quota_names())
            views = {name: policy.manager.describe(name) for name in sorted(names)}
        for obj, patch in self.custom.status_patches(views):
            self._enqueue(functools.partial(self._write_status, obj, patch))

    async def _write_status(self, obj: Mapping[str, Any], patch: Mapping[str, Any]) -> None:
        try:
            await self.api.patch_merge("elasticquotas", obj, patch)
        except Exception:
            self.custom.forget_written(str(mapping(obj.get("metadata")).get("name", "")))
            raise


