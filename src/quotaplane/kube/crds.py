"""Koordinator ``ElasticQuota`` and MCAD ``QuotaSubtree`` objects as the partition's extensions.

Both become configuration (reference ``kubernetes-front.md`` §3, §4): the ``elasticquotas`` and
``quotatrees`` extensions of the front's partition are *owned* by the objects once any is seen, and the
configuration the controller applies — the ``yunikorn-configs`` ConfigMap's ``queues.yaml``, or the
running one — is composed with them (:meth:`CustomQuotas.compose`) and applied all or nothing. An
object whose change cannot be applied is reported in a Warning Event on it; the running configuration
stays.

* **ElasticQuota** (``scheduling.sigs.k8s.io/v1alpha1``, namespaced): keyed by ``metadata.name``,
  which Koordinator looks up globally; a second object of the same name in another namespace is a
  conflict and is left out (the first by namespace order wins, so the outcome does not depend on the
  order events arrive in). Koordinator's status write-back (§3.3) is reproduced by
  :meth:`CustomQuotas.status_patches`: the ``runtime`` and ``request`` annotations (JSON resource
  lists) and ``status.used``, sent as one merge patch of the main resource when they change.
* **QuotaSubtree** (``quota.codeflare.dev/v1alpha1``; only objects with a non-empty ``tree`` label, as
  MCAD's informer): every ``spec.children[i]`` is a node of the tree named by the label, its parent
  ``spec.parent``; quotas become integers (cpu in millis, memory in bytes, others whole; a non-integral
  one is dropped, as MCAD does); resource names in first-seen order. All trees go into one forest,
  ``MCAD-CONTROLLER-FOREST``, as in MCAD.

A pod designates its tree nodes the MCAD way (§4.3): each pod label whose key is a tree's name names
its node in that tree (:meth:`CustomQuotas.pod_tags`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from quotaplane.k8s.convert import resource_list
from quotaplane.kube.objects import mapping

__all__ = ["ELASTIC_WRITTEN", "FOREST", "CustomQuotas", "quantity", "quota_trees"]

_KOORD = "quota.scheduling.koordinator.sh/"
#: the annotations the write-back sets (never part of the quota's definition)
ELASTIC_WRITTEN = (_KOORD + "runtime", _KOORD + "request")
#: MCAD's one forest (``qm_lib_backend_with_quotasubt_mgr.go``)
FOREST = "MCAD-CONTROLLER-FOREST"
_TREE_LABEL = "tree"
_TREE_TAG = "quotaplane.io/tree."
_BINARY = (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20),
           ("Ki", 1 << 10))


def _meta(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = mapping(obj.get("metadata"))
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def quantity(name: str, amount: int) -> str:
    """A Kubernetes quantity for an internal amount: ``vcore`` milli-cores as cpu (``"12"``,
    ``"500m"``), others whole, in the largest binary suffix that divides them (``"24Gi"``)."""
    if name in ("vcore", "cpu"):
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    for suffix, size in _BINARY:
        if amount and amount % size == 0:
            return f"{amount // size}{suffix}"
    return str(amount)


def _resource_list(amounts: Mapping[str, int]) -> dict[str, str]:
    """Internal amounts as a Kubernetes ResourceList (``vcore`` → ``cpu``), zeros left out, sorted."""
    out = {("cpu" if k == "vcore" else k): quantity(k, v) for k, v in amounts.items() if v}
    return {k: out[k] for k in sorted(out)}


def _definition(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What defines a quota: identity, labels, annotations (without the written-back ones), spec."""
    meta = mapping(obj.get("metadata"))
    annotations = {k: v for k, v in sorted(mapping(meta.get("annotations")).items())
                   if k not in ELASTIC_WRITTEN}
    out_meta: dict[str, Any] = {"name": meta.get("name"), "namespace": meta.get("namespace")}
    if meta.get("labels"):
        out_meta["labels"] = dict(sorted(mapping(meta.get("labels")).items()))
    if annotations:
        out_meta["annotations"] = annotations
    return {"apiVersion": obj.get("apiVersion", "scheduling.sigs.k8s.io/v1alpha1"), "kind": "ElasticQuota",
            "metadata": out_meta, "spec": dict(mapping(obj.get("spec")))}


def _tree_quota(requests: Mapping[str, Any]) -> dict[str, str]:
    """MCAD's node quota: cpu in millis, memory in bytes, others whole (non-integral dropped)."""
    out: dict[str, str] = {}
    for name, raw in requests.items():
        if not name:
            continue
        try:
            parsed = resource_list({name: raw})
        except (ValueError, TypeError):
            continue
        # resource_list reads cpu as vcore milli-cores and everything else whole
        value = parsed.get("vcore" if name == "cpu" else name)
        if value is None:
            continue
        if name not in ("cpu", "memory") and not _integral(raw):
            continue
        out[name] = str(value)
    return out


def _integral(raw: Any) -> bool:
    text = str(raw).strip()
    return not text.endswith("m") and "." not in text


def _tree_child(t: dict[str, Any], parent: str, child: Mapping[str, Any]) -> None:
    """One child of a QuotaSubtree as a node of its tree (its resources added to the tree's names)."""
    name = str(child.get("name") or "")
    if not name:
        return
    quotas = mapping(child.get("quotas"))
    quota = _tree_quota(mapping(quotas.get("requests")))
    for res in quota:
        if res not in t["resourceNames"]:
            t["resourceNames"].append(res)
    hard = "true" if quotas.get("hardLimit") is True else "false"
    t["nodes"][name] = {"parent": parent, "hard": hard, "quota": quota}


def quota_trees(objects: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """QuotaSubtree objects as QuotaTree definitions (seed 003's JSON), one per ``tree`` label."""
    trees: dict[str, dict[str, Any]] = {}
    for obj in objects:
        tree = str(mapping(mapping(obj.get("metadata")).get("labels")).get(_TREE_LABEL) or "")
        if not tree:
            continue
        t = trees.setdefault(tree, {"resourceNames": [], "nodes": {}})
        spec = mapping(obj.get("spec"))
        parent = str(spec.get("parent") or "")
        for child in spec.get("children") or []:
            _tree_child(t, parent, mapping(child))
    return [{"kind": "QuotaTree", "metadata": {"name": name}, "spec": trees[name]} for name in sorted(trees)]


class CustomQuotas:
    """The ElasticQuota and QuotaSubtree objects seen, and what they make of the configuration."""

    def __init__(self) -> None:
        #: (namespace, name) → object, per kind
        self.elastic: dict[tuple[str, str], dict[str, Any]] = {}
        self.subtrees: dict[tuple[str, str], dict[str, Any]] = {}
        #: the extensions are owned by the objects once any was seen (so deleting the last one empties it)
        self.owns_elastic = False
        self.owns_trees = False
        #: quota name → the status patch last sent
        self._written: dict[str, dict[str, Any]] = {}

    # inputs -------------------------------------------------------------------------------------------
    def event(self, kind: str, event_type: str, obj: Mapping[str, Any]) -> bool:
        """Apply one event; True when the configuration the objects make changed."""
        store = self.elastic if kind == "elasticquotas" else self.subtrees
        key = _meta(obj)
        before = self._signature(kind)
        if event_type == "DELETED":
            store.pop(key, None)
        else:
            store[key] = dict(obj)
            if kind == "elasticquotas":
                self.owns_elastic = True
            else:
                self.owns_trees = True
        return self._signature(kind) != before

    def _signature(self, kind: str) -> str:
        value = self.elastic_quotas()[0] if kind == "elasticquotas" else quota_trees(self._subtree_list())
        return json.dumps(value, sort_keys=True)

    def _subtree_list(self) -> list[Mapping[str, Any]]:
        return [self.subtrees[k] for k in sorted(self.subtrees)]

    def elastic_quotas(self) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], str]]]:
        """(the quota definitions, in name order; the conflicting objects left out, with the reason)."""
        chosen: dict[str, dict[str, Any]] = {}
        conflicts: list[tuple[dict[str, Any], str]] = []
        for key in sorted(self.elastic):
            obj = self.elastic[key]
            name = key[1]
            if name in chosen:
                first = chosen[name]["metadata"].get("namespace")
                conflicts.append((obj, f"an ElasticQuota named {name!r} exists in namespace {first!r}: "
                                       "quota names are cluster-wide"))
                continue
            chosen[name] = _definition(obj)
        return [chosen[n] for n in sorted(chosen)], conflicts

    def tree_names(self) -> list[str]:
        """The names of the trees the QuotaSubtree objects make."""
        return [t["metadata"]["name"] for t in quota_trees(self._subtree_list())]

    def compose(self, text: str, partition: str) -> str:
        """``text`` with the partition's extensions replaced by what the objects make (if owned)."""
        from quotaplane.server.extensions import edit_extension

        if self.owns_elastic:
            quotas = self.elastic_quotas()[0]

            def edit_elastic(current: Any) -> Any:
                if isinstance(current, dict) and current.get("kind") is None and "quotas" in current:
                    return {**current, "quotas": quotas} if quotas else None
                return quotas or None
            text = edit_extension(text, partition, "elasticquotas", edit_elastic)
        if self.owns_trees:
            trees = quota_trees(self._subtree_list())

            def edit_trees(_current: Any) -> Any:
                if not trees:
                    return None
                return {"trees": trees, "forests": {FOREST: [t["metadata"]["name"] for t in trees]},
                        "defaultforest": FOREST}
            text = edit_extension(text, partition, "quotatrees", edit_trees)
        return text

    # pods ---------------------------------------------------------------------------------------------
    def pod_tags(self, pod: Mapping[str, Any]) -> dict[str, str]:
        """The tags that route a pod to its quotas: its Koordinator quota label, its tree nodes."""
        labels = mapping(mapping(pod.get("metadata")).get("labels"))
        tags: dict[str, str] = {}
        quota = labels.get(_KOORD + "name")
        if isinstance(quota, str) and quota:
            tags[_KOORD + "name"] = quota
        for tree in self.tree_names():
            node = labels.get(tree)
            if isinstance(node, str) and node:
                tags[_TREE_TAG + tree] = node
        return tags

    # write-back ---------------------------------------------------------------------------------------
    def status_patches(self, describe: Mapping[str, Mapping[str, Any]]
                       ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(object, merge patch) for every quota whose runtime, request or used changed since last
        written; ``describe`` is the elastic manager's view by quota name."""
        out: list[tuple[dict[str, Any], dict[str, Any]]] = []
        chosen, _ = self.elastic_quotas()
        for definition in chosen:
            name = definition["metadata"]["name"]
            view = describe.get(name)
            if view is None:
                continue
            used = _resource_list(view.get("used") or {})
            written = {"metadata": {"annotations": {
                        _KOORD + "runtime": json.dumps(_resource_list(view.get("runtime") or {}),
                                                       separators=(",", ":")),
                        _KOORD + "request": json.dumps(_resource_list(view.get("request") or {}),
                                                       separators=(",", ":"))}},
                       "status": {"used": used}}
            before = self._written.get(name)
            if before == written:
                continue
            self._written[name] = written
            # a merge patch keeps keys it does not name: resources no longer used are removed with null
            gone: dict[str, Any] = dict.fromkeys(
                sorted(set(before["status"]["used"]) - set(used)) if before else [])
            patch = {"metadata": written["metadata"], "status": {"used": {**used, **gone}}}
            obj = self.elastic[(definition["metadata"].get("namespace") or "", name)]
            out.append((obj, patch))
        return out

    def forget_written(self, name: str) -> None:
        """The patch for ``name`` failed: send it again next round."""
        self._written.pop(name, None)
