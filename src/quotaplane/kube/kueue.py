"""Kueue's objects read from the cluster (docs/from-kueue.md "In the Kubernetes front").

When Kueue's CRDs are installed, the front watches ResourceFlavor, ClusterQueue, Cohort and LocalQueue
objects (``kueue.x-k8s.io/v1beta2``). Once a ClusterQueue exists they define the front's partition:
its ``queues``, ``resourceflavors`` and ``localqueues`` are what the objects map to
(:mod:`quotaplane.config.kueue`), composed with the rest of the ``yunikorn-configs`` ConfigMap (its
other keys — placement rules, fair sharing, preemption, the other partitions — stay; a ``provided`` rule
is put first among the placement rules, so a pod's LocalQueue decides its queue). A change that
cannot be applied is refused all or nothing and reported on the object (``ConfigRefused``), as for the
other custom quota objects (:mod:`quotaplane.kube.configuration`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from quotaplane.config.kueue import is_kueue, kueue_to_yaml
from quotaplane.kube.objects import mapping

__all__ = ["KUEUE_KINDS", "KueueObjects"]

#: the kinds watched, in the order their objects are converted (plural → kind)
KUEUE_KINDS: dict[str, str] = {"resourceflavors": "ResourceFlavor", "cohorts": "Cohort",
                               "clusterqueues": "ClusterQueue", "localqueues": "LocalQueue"}
_API = "kueue.x-k8s.io/v1beta2"
#: the partition keys the objects own
_OWNED = ("queues", "resourceflavors", "localqueues")


def _definition(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """What of an object defines quota: its kind, name, namespace and spec (not its status)."""
    meta = mapping(obj.get("metadata"))
    out_meta: dict[str, Any] = {"name": meta.get("name", "")}
    if meta.get("namespace"):
        out_meta["namespace"] = meta["namespace"]
    return {"apiVersion": str(obj.get("apiVersion") or _API), "kind": kind, "metadata": out_meta,
            "spec": dict(mapping(obj.get("spec")))}


class KueueObjects:
    """The Kueue objects seen, and the partition configuration they make."""

    def __init__(self) -> None:
        #: plural → (namespace, name) → definition
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {k: {} for k in KUEUE_KINDS}

    def event(self, plural: str, event_type: str, obj: Mapping[str, Any]) -> bool:
        """Apply one event; True when what the objects define changed (not their status)."""
        store = self.objects[plural]
        meta = mapping(obj.get("metadata"))
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        before = store.get(key)
        if event_type == "DELETED":
            store.pop(key, None)
        else:
            store[key] = _definition(KUEUE_KINDS[plural], obj)
        return store.get(key) != before

    @property
    def active(self) -> bool:
        """Some ClusterQueue exists: the objects define the partition's queues."""
        return bool(self.objects["clusterqueues"])

    def text(self) -> str:
        """The objects as one YAML stream (JSON documents), in a stable order."""
        docs = [json.dumps(self.objects[plural][key], sort_keys=True)
                for plural in KUEUE_KINDS for key in sorted(self.objects[plural])]
        return "\n---\n".join(docs) + "\n"

    def compose(self, text: str, partition: str) -> str:
        """``text`` with the partition's queues, flavors and LocalQueues replaced by what the objects
        make (unchanged while no ClusterQueue exists); ConfigError when they cannot be converted."""
        if not self.active:
            return text
        from ruamel.yaml import YAML

        from quotaplane.server.extensions import edit_extension

        if is_kueue(text):                  # the ConfigMap itself holds Kueue objects
            text = kueue_to_yaml(text, partition)
        converted = YAML(typ="safe").load(kueue_to_yaml(self.text(), partition))["partitions"][0]
        for key in _OWNED:
            text = edit_extension(text, partition, key, _replace(converted.get(key)))
        # a pod's LocalQueue names its queue: the placement rules honour a provided queue first
        return edit_extension(text, partition, "placementrules", _provided_first)


def _provided_first(rules: Any) -> Any:
    if not isinstance(rules, list) or not rules:
        return rules
    if isinstance(rules[0], dict) and str(rules[0].get("name", "")).lower() == "provided":
        return rules
    return [{"name": "provided", "create": False}, *rules]


def _replace(value: Any) -> Callable[[Any], Any]:
    """An edit that puts ``value`` in place of whatever was there (None: the key goes)."""
    def edit(_old: Any) -> Any:
        return value
    return edit
