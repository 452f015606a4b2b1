"""``GET /ws/v1/config`` with ``Accept: application/json``: the running configuration as YuniKorn's
``dao.ConfigDAOInfo`` encodes it.

YuniKorn's config structs carry YAML tags only, so Go's JSON encoder names every field after the Go
field (``Partitions``, ``PlacementRules``, ``SubmitACL`` …), writes resource amounts as strings
(``map[string]string``), leaves out empty ``omitempty`` fields but always writes struct-valued ones
(``Preemption``, ``NodeSortPolicy``, ``UserGroupResolver``, a queue's ``Resources`` and
``ChildTemplate``, a rule's ``Filter``), and adds ``Extra`` (the ConfigMap's other keys: none here)
and the deadlock-detection fields (not modelled: ``false`` and ``0``). quotaplane's extension keys of
a partition (``elasticquotas``, ``quotatrees``, ``forests``) have no Go field: they are passed through
under their YAML names, which a Go client decoding into ``ConfigDAOInfo`` ignores.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quotaplane.config.bodies import load_yaml
from quotaplane.config.kueue import is_kueue, kueue_to_yaml

__all__ = ["config_json"]


def _strs(v: Any) -> list[str]:
    return [str(x) for x in v] if isinstance(v, list) else []


def _amounts(v: Any) -> dict[str, str]:
    return {str(k): str(x) for k, x in v.items()} if isinstance(v, Mapping) else {}


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _resources(v: Any) -> dict[str, Any]:
    v = _map(v)
    out: dict[str, Any] = {}
    if _amounts(v.get("guaranteed")):
        out["Guaranteed"] = _amounts(v.get("guaranteed"))
    if _amounts(v.get("max")):
        out["Max"] = _amounts(v.get("max"))
    return out


def _limit(v: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"Limit": str(v.get("limit") or "")}
    for yaml_key, go_key in (("users", "Users"), ("groups", "Groups")):
        if _strs(v.get(yaml_key)):
            out[go_key] = _strs(v.get(yaml_key))
    if _amounts(v.get("maxresources")):
        out["MaxResources"] = _amounts(v.get("maxresources"))
    if v.get("maxapplications"):
        out["MaxApplications"] = int(v["maxapplications"])
    return out


def _limits(v: Any) -> list[dict[str, Any]]:
    return [_limit(x) for x in v if isinstance(x, Mapping)] if isinstance(v, list) else []


def _template(v: Any) -> dict[str, Any]:
    v = _map(v)
    out: dict[str, Any] = {}
    if v.get("maxapplications"):
        out["MaxApplications"] = int(v["maxapplications"])
    if isinstance(v.get("properties"), Mapping) and v["properties"]:
        out["Properties"] = {str(k): str(x) for k, x in v["properties"].items()}
    out["Resources"] = _resources(v.get("resources"))
    return out


def _queue(v: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"Name": str(v.get("name") or "")}
    if v.get("parent") is True:
        out["Parent"] = True
    out["Resources"] = _resources(v.get("resources"))
    if v.get("maxapplications"):
        out["MaxApplications"] = int(v["maxapplications"])
    if isinstance(v.get("properties"), Mapping) and v["properties"]:
        out["Properties"] = {str(k): str(x) for k, x in v["properties"].items()}
    for yaml_key, go_key in (("adminacl", "AdminACL"), ("submitacl", "SubmitACL")):
        if v.get(yaml_key):
            out[go_key] = str(v[yaml_key])
    out["ChildTemplate"] = _template(v.get("childtemplate"))
    children = [_queue(q) for q in v.get("queues") or () if isinstance(q, Mapping)]
    if children:
        out["Queues"] = children
    if _limits(v.get("limits")):
        out["Limits"] = _limits(v.get("limits"))
    return out


def _rule(v: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"Name": str(v.get("name") or "")}
    if v.get("create") is True:
        out["Create"] = True
    f = _map(v.get("filter"))
    flt: dict[str, Any] = {"Type": str(f.get("type") or "")}
    for yaml_key, go_key in (("users", "Users"), ("groups", "Groups")):
        if _strs(f.get(yaml_key)):
            flt[go_key] = _strs(f.get(yaml_key))
    out["Filter"] = flt
    if isinstance(v.get("parent"), Mapping):
        out["Parent"] = _rule(v["parent"])
    if v.get("value"):
        out["Value"] = str(v["value"])
    return out


_PARTITION_KEYS = {"name", "queues", "placementrules", "limits", "preemption", "nodesortpolicy",
                   "usergroupresolver"}


def _partition(v: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"Name": str(v.get("name") or "")}
    out["Queues"] = [_queue(q) for q in v.get("queues") or () if isinstance(q, Mapping)] or None
    rules = [_rule(r) for r in v.get("placementrules") or () if isinstance(r, Mapping)]
    if rules:
        out["PlacementRules"] = rules
    if _limits(v.get("limits")):
        out["Limits"] = _limits(v.get("limits"))
    pre = _map(v.get("preemption"))
    switches = (("enabled", "Enabled"), ("quotapreemptionenabled", "QuotaPreemptionEnabled"))
    out["Preemption"] = {go: bool(pre[key]) for key, go in switches if key in pre}
    nsp = _map(v.get("nodesortpolicy"))
    policy: dict[str, Any] = {"Type": str(nsp.get("type") or "")}
    weights = nsp.get("resourceweights")
    if isinstance(weights, Mapping) and weights:
        policy["ResourceWeights"] = {str(k): float(x) for k, x in weights.items()}
    out["NodeSortPolicy"] = policy
    ugr = _map(v.get("usergroupresolver"))
    out["UserGroupResolver"] = {"type": str(ugr["type"])} if ugr.get("type") else {}
    for key in sorted(k for k in v if k not in _PARTITION_KEYS):
        out[str(key)] = v[key]                  # quotaplane's extensions, passed through
    return out


def config_json(text: str, checksum: str | None) -> dict[str, Any]:
    """``ConfigDAOInfo`` of the configuration ``text`` (the running one: it has been validated; Kueue's
    objects are shown as the queue configuration they map to, docs/from-kueue.md)."""
    if is_kueue(text):
        text = kueue_to_yaml(text)
    data = load_yaml(text, "configuration") if text.strip() else None
    parts = data.get("partitions") if isinstance(data, Mapping) else None
    out: dict[str, Any] = {
        "Partitions": [_partition(p) for p in parts or () if isinstance(p, Mapping)] or None}
    if checksum:
        out["Checksum"] = checksum
    out["DeadlockDetectionEnabled"] = False
    out["DeadlockTimeoutSeconds"] = 0
    return out
