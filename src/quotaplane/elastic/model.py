"""The declarative shape of one quota group and the ElasticQuota YAML reader (seed 002 "API").

A :class:`QuotaSpec` is what a user declares (min, max, shared weight, flags, parent); the manager keeps
the state that follows from it. :func:`parse_elastic_quotas` reads ElasticQuota objects exactly as the seed
writes them: ``apiVersion: scheduling.sigs.k8s.io/v1alpha1``, ``kind: ElasticQuota``, labels and
annotations under the ``quota.scheduling.koordinator.sh/`` prefix, quantities as Kubernetes quantities
(``cpu`` becomes ``vcore`` in milli-cores, contract.md "Units").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from quotaplane.config.bodies import load_json, load_yaml, load_yaml_documents
from quotaplane.elastic.errors import QuotaValidationError
from quotaplane.resources import INT64_MAX, Resource, parse_k8s_quantity

__all__ = [
    "API_VERSION",
    "DEFAULT_QUOTA",
    "KIND",
    "PREFIX",
    "ROOT_QUOTA",
    "SPECIAL_QUOTAS",
    "SYSTEM_QUOTA",
    "QuotaSpec",
    "parse_elastic_quotas",
]

API_VERSION = "scheduling.sigs.k8s.io/v1alpha1"
KIND = "ElasticQuota"
PREFIX = "quota.scheduling.koordinator.sh/"

#: The special quotas of reference §1.1 / decision E4.
ROOT_QUOTA = "koordinator-root-quota"
SYSTEM_QUOTA = "koordinator-system-quota"
DEFAULT_QUOTA = "koordinator-default-quota"
#: The quotas outside the runtime distribution (reference §1.4, decision E4).
SPECIAL_QUOTAS = (SYSTEM_QUOTA, DEFAULT_QUOTA)

LABEL_PARENT = PREFIX + "parent"
LABEL_PARENT_QUOTA_NAME = PREFIX + "parent-quota-name"
LABEL_IS_PARENT = PREFIX + "is-parent"
LABEL_ALLOW_LENT = PREFIX + "allow-lent-resource"
LABEL_TREE_ID = PREFIX + "tree-id"
LABEL_FORCE_UPDATE = PREFIX + "allow-force-update"
ANNOTATION_SHARED_WEIGHT = PREFIX + "shared-weight"
#: quotaplane's own: Kueue's lendingLimit / borrowingLimit on an elastic quota (docs/elastic-quota.md)
ANNOTATION_LENDING_LIMIT = PREFIX + "lending-limit"
ANNOTATION_BORROWING_LIMIT = PREFIX + "borrowing-limit"
ANNOTATION_NAMESPACES = PREFIX + "namespaces"
ANNOTATION_STRICT_KEYS = PREFIX + "max-strict-check-resource-keys"
POD_LABEL_NAME = PREFIX + "name"
POD_LABEL_PREEMPTIBLE = PREFIX + "preemptible"


@dataclass(frozen=True, slots=True)
class QuotaSpec:
    """One quota group as declared (internal units).

    ``shared_weight`` ``None`` means "default = max" (seed 002). ``parent`` is
    :data:`ROOT_QUOTA` for a first-level quota. ``tree_id``, ``force_update`` and ``strict_keys`` are the
    webhook's ``tree-id``, ``allow-force-update`` and ``max-strict-check-resource-keys`` (reference §3).
    """

    name: str
    min: Resource
    max: Resource
    parent: str = ROOT_QUOTA
    is_parent: bool = False
    shared_weight: Resource | None = None
    allow_lent: bool = True
    namespaces: tuple[str, ...] = ()
    #: of its unused min, at most this is lent (None: everything, ``allow_lent`` permitting)
    lending_limit: Resource | None = None
    #: above its min, at most this is used (None: up to its max)
    borrowing_limit: Resource | None = None
    tree_id: str = ""
    force_update: bool = False
    strict_keys: tuple[str, ...] = ()

    def effective_weight(self) -> dict[str, int]:
        """The weight the calculator uses (reference §3.1 mutation + §1.1 fallback).

        Keys of max missing from the weight take the max value, keys not in max are dropped; no weight,
        or an all-zero one, means the max.
        """
        mx = self.max._values
        if self.shared_weight is None:
            return dict(mx)
        given = self.shared_weight._values
        out = {k: given.get(k, v) for k, v in mx.items()}
        if all(v == 0 for v in out.values()):
            return dict(mx)
        return out


# ------------------------------------------------------------------------------------------------
# YAML
# ------------------------------------------------------------------------------------------------
def _truthy(value: Any) -> bool:
    return str(value).strip().lower() == "true"


def _k8s_resources(quota: str, field: str, raw: Any) -> Resource:
    """Parse a ResourceList; a negative amount is rule ``<field>-negative`` (reference §3.2)."""
    if raw is None:
        return Resource()
    if not isinstance(raw, Mapping):
        raise QuotaValidationError(quota, f"{field}-invalid",
                                   f"{field} must be a mapping of resource quantities")
    items = _split_flow_pairs(raw)
    negative: list[str] = []
    for name, value in items.items():
        try:
            if parse_k8s_quantity(value) < 0:
                negative.append(str(name))
        except ValueError as exc:
            raise QuotaValidationError(quota, f"{field}-invalid",
                                       f"{field}: resource {name!r}: {exc}") from None
    if negative:
        raise QuotaValidationError(quota, f"{field}-negative",
                                   f"{field}'s value < 0, in dimensions :[{' '.join(sorted(negative))}]")
    try:
        return Resource.from_k8s(items)
    except ValueError as exc:
        raise QuotaValidationError(quota, f"{field}-invalid", f"{field}: {exc}") from None


def _split_flow_pairs(raw: Mapping[Any, Any]) -> dict[str, Any]:
    """Undo YAML's reading of ``{cpu:4, memory: 8Gi}`` (the seed's spelling).

    In a YAML flow mapping ``cpu:4`` without a space is one plain scalar key with a null value; the seed
    means ``cpu: 4``, so such a key is split at its first colon.
    """
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = str(key)
        if value is None and ":" in name:
            name, _, text = name.partition(":")
            value = text.strip()
        out[name.strip()] = value
    return out


def _structured(quota: str, rule: str, raw: Any) -> Any:
    """An annotation value: a YAML structure as is, or a string holding JSON (or YAML flow syntax)."""
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    if not text:
        return None
    try:
        return load_json(text, f"annotation {rule}")
    except ValueError:
        pass
    try:
        return load_yaml(text, f"annotation {rule}", pure=True)
    except ValueError:
        raise QuotaValidationError(quota, rule,
                                   f"annotation value {raw!r} is neither JSON nor YAML") from None


def _string_list(quota: str, rule: str, raw: Any) -> tuple[str, ...]:
    value = _structured(quota, rule, raw)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise QuotaValidationError(quota, rule, f"expected a list of names, got {raw!r}")
    return tuple(value)


def _metadata(obj: Any) -> tuple[Mapping[str, Any], str]:
    """The metadata mapping and the name of an object (the name is what later errors name)."""
    if not isinstance(obj, Mapping):
        raise QuotaValidationError("?", "document", "an ElasticQuota document must be a mapping")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise QuotaValidationError("?", "document", "metadata must be a mapping")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise QuotaValidationError("?", "document", "metadata.name is missing")
    return meta, name


def _header(obj: Any) -> tuple[str, Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]:
    """The name, labels, annotations and spec of an ElasticQuota object, each checked for its type."""
    meta, name = _metadata(obj)
    if obj.get("apiVersion") != API_VERSION:
        raise QuotaValidationError(name, "document",
                                   f"apiVersion must be {API_VERSION}, got {obj.get('apiVersion')!r}")
    if obj.get("kind") != KIND:
        raise QuotaValidationError(name, "document", f"kind must be {KIND}, got {obj.get('kind')!r}")
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if not isinstance(labels, Mapping) or not isinstance(annotations, Mapping):
        raise QuotaValidationError(name, "document", "labels and annotations must be mappings")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise QuotaValidationError(name, "document", "spec must be a mapping")
    return name, labels, annotations, spec


def _parent_of(name: str, labels: Mapping[str, Any]) -> str:
    # Both spellings name the parent: `parent` (Koordinator's code) and `parent-quota-name` (the seed).
    parents = [str(labels[k]).strip() for k in (LABEL_PARENT, LABEL_PARENT_QUOTA_NAME)
               if labels.get(k) not in (None, "")]
    if len(set(parents)) > 1:
        raise QuotaValidationError(name, "parent-label-conflict",
                                   f"labels parent and parent-quota-name disagree: "
                                   f"{parents[0]!r} vs {parents[1]!r}")
    return parents[0] if parents else ROOT_QUOTA


def _weight_of(name: str, annotations: Mapping[str, Any],
               key: str = ANNOTATION_SHARED_WEIGHT) -> Resource | None:
    raw_weight = annotations.get(key)
    if raw_weight in (None, ""):
        return None
    what = key[len(PREFIX):]
    value = _structured(name, f"{what}-invalid", raw_weight)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise QuotaValidationError(name, f"{what}-invalid",
                                   f"{what} must be a resource mapping, got {raw_weight!r}")
    return _k8s_resources(name, what, value)


def spec_from_object(obj: Any) -> QuotaSpec:
    """One ElasticQuota object (a parsed YAML/JSON mapping) as a :class:`QuotaSpec`."""
    name, labels, annotations, spec = _header(obj)
    parent = _parent_of(name, labels)           # checked in this order: the first problem is reported
    weight = _weight_of(name, annotations)
    return QuotaSpec(
        name=name,
        min=_k8s_resources(name, "min", spec.get("min")),
        max=_k8s_resources(name, "max", spec.get("max")),
        parent=parent,
        is_parent=_truthy(labels.get(LABEL_IS_PARENT, "false")),
        shared_weight=weight,
        allow_lent=str(labels.get(LABEL_ALLOW_LENT, "true")).strip().lower() != "false",
        lending_limit=_weight_of(name, annotations, ANNOTATION_LENDING_LIMIT),
        borrowing_limit=_weight_of(name, annotations, ANNOTATION_BORROWING_LIMIT),
        namespaces=_string_list(name, "namespaces-invalid", annotations.get(ANNOTATION_NAMESPACES)),
        tree_id=str(labels.get(LABEL_TREE_ID) or ""),
        force_update=_truthy(labels.get(LABEL_FORCE_UPDATE, "false")),
        # Kubernetes names, like the spec: `cpu` is `vcore` inside quotaplane.
        strict_keys=tuple("vcore" if k == "cpu" else k for k in _string_list(
            name, "strict-keys-invalid", annotations.get(ANNOTATION_STRICT_KEYS))),
    )


def parse_elastic_quotas(text: str) -> list[QuotaSpec]:
    """Every ElasticQuota of a YAML (or JSON) text, in document order.

    Accepts several ``---`` documents, and ``List`` / ``ElasticQuotaList`` objects with ``items``.
    Raises :class:`QuotaValidationError` for text that does not parse or objects that are not
    ElasticQuotas.
    """
    try:
        docs = load_yaml_documents(text, "the ElasticQuota documents", pure=True)
    except ValueError as exc:
        raise QuotaValidationError("?", "document", f"the YAML does not parse: {exc}") from None
    specs: list[QuotaSpec] = []
    for doc in docs:
        if doc is None:
            continue
        if isinstance(doc, Mapping) and doc.get("kind") in ("List", KIND + "List"):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise QuotaValidationError("?", "document", "items must be a list")
            specs.extend(spec_from_object(item) for item in items)
        else:
            specs.append(spec_from_object(doc))
    return specs


def _amount_problem(field: str, name: object, value: object) -> str | None:
    """Why ``name: value`` is not an internal-unit amount (a name, an int64 integer), or None."""
    if not isinstance(name, str) or not name:
        return f"invalid resource name {name!r}"
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{field}: resource {name!r} must be an integer, got {value!r}"
    if value > INT64_MAX:
        return f"{field}: resource {name!r} overflows int64"
    return None


def internal_resources(quota: str, field: str, raw: Mapping[str, Any] | None) -> Resource:
    """Validate a mapping of internal-unit integers given to ``upsert`` (reference §3.2 rules 1-3)."""
    if raw is None:
        return Resource()
    if not isinstance(raw, Mapping):
        raise QuotaValidationError(quota, f"{field}-invalid", f"{field} must be a mapping")
    negative: list[str] = []
    data: dict[str, int] = {}
    for name, value in raw.items():
        problem = _amount_problem(field, name, value)
        if problem is not None:
            raise QuotaValidationError(quota, f"{field}-invalid", problem)
        if value < 0:
            negative.append(name)
        data[name] = int(value)
    if negative:
        raise QuotaValidationError(quota, f"{field}-negative",
                                   f"{field}'s value < 0, in dimensions :[{' '.join(sorted(negative))}]")
    return Resource.of(data)


def namespaces_tuple(quota: str, raw: Sequence[str]) -> tuple[str, ...]:
    """Validate the namespaces given to ``upsert``."""
    if isinstance(raw, str) or not all(isinstance(n, str) and n for n in raw):
        raise QuotaValidationError(quota, "namespaces-invalid", "namespaces must be a list of names")
    return tuple(raw)
