"""A partition's resource flavors at run time: groups, node counting, and which flavors a request may use.

Built from the partition's ``resourceflavors`` (:class:`~quotaplane.config.model.FlavorConfig`). Flavors
that count the same resources form a *group* (Kueue's resource group, KQ-F1): a request gets one flavor
per group it asks from, and every resource of the group it asks for is charged under that flavor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from quotaplane.config.model import FlavorConfig, PartitionConfig, TaintConfig, TolerationConfig
from quotaplane.errors import InputError
from quotaplane.flavors.names import flavored, split
from quotaplane.resources import Resource

__all__ = ["Catalog", "FlavorRequest", "Group", "NodeSelectorTerm", "matches_affinity", "tolerates"]

#: node selector requirement operators (Kubernetes' NodeSelectorOperator)
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@dataclass(frozen=True, slots=True)
class Group:
    """Flavors that count the same resources, in the partition's order."""

    resources: tuple[str, ...]
    flavors: tuple[str, ...]


#: one term of a required node affinity: requirements ``(key, operator, values)``, all of which hold
NodeSelectorTerm = tuple[tuple[str, str, tuple[str, ...]], ...]


@dataclass(frozen=True, slots=True)
class FlavorRequest:
    """What a request says about where it may run: its node selector, required node affinity terms
    (ORed, each a tuple of requirements) and tolerations (KQ-F2)."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[TolerationConfig, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.node_selector or self.affinity or self.tolerations)

    @classmethod
    def parse(cls, node_selector: Any = None, node_affinity: Any = None,
              tolerations: Any = None) -> FlavorRequest:
        """Validate a request's ``nodeSelector`` (label → value), ``nodeAffinity`` (Kubernetes'
        ``nodeSelectorTerms``: ``[{matchExpressions: [{key, operator, values}]}]``) and ``tolerations``
        (``[{key, operator, value, effect}]``); ``ValueError`` naming what is wrong."""
        selector: dict[str, str] = {}
        if node_selector is not None:
            if not isinstance(node_selector, Mapping):
                raise InputError("nodeSelector must be an object of label to value")
            for k, v in node_selector.items():
                if not isinstance(k, str) or not k or not isinstance(v, str):
                    raise InputError(f"nodeSelector entry {k!r}: label and value must be strings")
                selector[k] = v
        terms: list[NodeSelectorTerm] = []
        if node_affinity is not None:
            if not isinstance(node_affinity, list):
                raise InputError("nodeAffinity must be a list of node selector terms")
            for i, term in enumerate(node_affinity):
                exprs = term.get("matchExpressions") if isinstance(term, Mapping) else term
                if not isinstance(exprs, list):
                    raise InputError(f"nodeAffinity term {i + 1}: matchExpressions must be a list")
                reqs: list[tuple[str, str, tuple[str, ...]]] = []
                for e in exprs:
                    if not isinstance(e, Mapping) or not isinstance(e.get("key"), str) or not e.get("key"):
                        raise InputError(f"nodeAffinity term {i + 1}: every expression needs a key")
                    op = e.get("operator")
                    if op not in _OPERATORS:
                        raise InputError(f"nodeAffinity term {i + 1}: operator must be one of "
                                         f"{', '.join(_OPERATORS)}, got {op!r}")
                    values = e.get("values") or []
                    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                        raise InputError(f"nodeAffinity term {i + 1}: values must be a list of strings")
                    reqs.append((e["key"], op, tuple(values)))
                terms.append(tuple(reqs))
        tols: list[TolerationConfig] = []
        if tolerations is not None:
            if not isinstance(tolerations, list):
                raise InputError("tolerations must be a list")
            for i, t in enumerate(tolerations):
                if not isinstance(t, Mapping):
                    raise InputError(f"toleration {i + 1} must be an object")
                key, op = t.get("key") or "", t.get("operator") or "Equal"
                value, effect = t.get("value") or "", t.get("effect") or ""
                if not all(isinstance(x, str) for x in (key, op, value, effect)):
                    raise InputError(f"toleration {i + 1}: key, operator, value and effect must be strings")
                if op not in ("Equal", "Exists"):
                    raise InputError(f"toleration {i + 1}: operator must be Equal or Exists, got {op!r}")
                tols.append(TolerationConfig(key=key, operator=op, value=value, effect=effect))
        return cls(dict(sorted(selector.items())), tuple(terms), tuple(tols))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> FlavorRequest:
        """The journal's form back (:meth:`to_dict`)."""
        if not data:
            return cls()
        affinity = data.get("affinity")
        terms = None if affinity is None else [{"matchExpressions": term} for term in affinity]
        return cls.parse(data.get("nodeSelector"), terms, data.get("tolerations"))

    def to_dict(self) -> dict[str, Any]:
        """The journal's form (only what is set)."""
        out: dict[str, Any] = {}
        if self.node_selector:
            out["nodeSelector"] = dict(sorted(self.node_selector.items()))
        if self.affinity:
            out["affinity"] = [[{"key": k, "operator": op, "values": list(v)} for k, op, v in term]
                               for term in self.affinity]
        if self.tolerations:
            out["tolerations"] = [_toleration_dict(t) for t in self.tolerations]
        return out


def _toleration_dict(t: TolerationConfig) -> dict[str, str]:
    out = {"key": t.key, "operator": t.operator}
    if t.value:
        out["value"] = t.value
    if t.effect:
        out["effect"] = t.effect
    return out


def tolerates(toleration: TolerationConfig, taint: TaintConfig) -> bool:
    """Kubernetes' ``Toleration.ToleratesTaint``: an empty effect tolerates every effect; ``Exists``
    with an empty key tolerates every taint; ``Equal`` needs the same key and value."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.value == taint.value


def _compare_int(value: str, want: str, greater: bool) -> bool:
    """Kubernetes' ``Gt``/``Lt``: both sides integers, else no match."""
    try:
        have, bound = int(value), int(want)
    except ValueError:
        return False
    return have > bound if greater else have < bound


#: a node selector requirement's operator against a label's value (None: the label is absent)
_MATCHES: dict[str, Callable[[str | None, Sequence[str]], bool]] = {
    "In": lambda value, values: value is not None and value in values,
    "NotIn": lambda value, values: value is None or value not in values,
    "Exists": lambda value, values: value is not None,
    "DoesNotExist": lambda value, values: value is None,
    "Gt": lambda value, values: value is not None and len(values) == 1
    and _compare_int(value, values[0], True),
    "Lt": lambda value, values: value is not None and len(values) == 1
    and _compare_int(value, values[0], False),
}


def _requirement_holds(labels: Mapping[str, str], key: str, operator: str, values: Sequence[str]) -> bool:
    test = _MATCHES.get(operator)
    return test is not None and test(labels.get(key), values)


def _untolerated(f: FlavorConfig, request: FlavorRequest) -> str | None:
    """The first NoSchedule/NoExecute taint of ``f`` that neither the request nor the flavor tolerates,
    shown as ``key=value:effect``; PreferNoSchedule is ignored (Kueue docs ``resource_flavor.md``)."""
    for taint in f.node_taints:
        if taint.effect in ("NoSchedule", "NoExecute") and \
                not any(tolerates(t, taint) for t in (*request.tolerations, *f.tolerations)):
            return f"{taint.key}={taint.value}:{taint.effect}" if taint.value else \
                f"{taint.key}:{taint.effect}"
    return None


def matches_affinity(labels: Mapping[str, str], terms: Sequence[NodeSelectorTerm]) -> bool:
    """Required node affinity against a flavor's labels, as Kueue evaluates it (KQ-F2, ``flavorSelector``):
    only requirements on keys the flavor defines count; a term left with none matches everything
    (the terms are ORed)."""
    if not terms:
        return True
    kept: list[NodeSelectorTerm] = []
    for term in terms:
        mine = tuple(r for r in term if r[0] in labels)
        if not mine:
            return True
        kept.append(mine)
    return any(all(_requirement_holds(labels, k, op, v) for k, op, v in term) for term in kept)


class Catalog:
    """A partition's resource flavors: by name, grouped, and how they count nodes."""

    __slots__ = ("flavors", "group_of", "groups")

    def __init__(self, flavors: Iterable[FlavorConfig]) -> None:
        self.flavors: dict[str, FlavorConfig] = {}
        for f in flavors:
            self.flavors.setdefault(f.name, f)
        groups: dict[tuple[str, ...], list[str]] = {}
        for f in self.flavors.values():
            groups.setdefault(tuple(sorted(set(f.resources))), []).append(f.name)
        self.groups: tuple[Group, ...] = tuple(Group(k, tuple(v)) for k, v in sorted(groups.items()))
        #: covered resource name → its group
        self.group_of: dict[str, Group] = {r: g for g in self.groups for r in g.resources}

    @classmethod
    def of(cls, config: PartitionConfig) -> Catalog | None:
        """The catalog of a partition, None when it declares no flavors (nothing is flavored then)."""
        return cls(config.resource_flavors) if config.resource_flavors else None

    def same_as(self, other: Catalog | None) -> bool:
        """True when ``other`` declares the same flavors (node totals need no recount)."""
        return other is not None and list(self.flavors.values()) == list(other.flavors.values())

    # -- nodes ----------------------------------------------------------------------------------------
    def node_flavors(self, labels: Mapping[str, str] | None) -> list[str]:
        """The flavors a node with ``labels`` counts for: those whose every node label it has (a flavor
        without labels counts every node)."""
        have = labels or {}
        return [name for name, f in self.flavors.items()
                if all(have.get(k) == v for k, v in f.node_labels.items())]

    def node_capacity(self, capacity: Resource, labels: Mapping[str, str] | None) -> Resource:
        """A node's capacity as the root counts it: its resources, plus each resource a matching flavor
        counts under the flavored name (docs/flavors.md "Nodes")."""
        extra: dict[str, int] = {}
        for name in self.node_flavors(labels):
            for res in self.flavors[name].resources:
                amount = capacity.get(res)
                if amount:
                    extra[flavored(res, name)] = amount
        if not extra:
            return capacity
        out = dict(capacity._values)
        out.update(extra)
        return Resource.of(out)

    # -- requests -------------------------------------------------------------------------------------
    def groups_asked(self, resource: Resource) -> list[Group]:
        """The groups whose resources ``resource`` asks for (a positive amount), in catalog order."""
        asked: list[Group] = []
        for name, amount in resource.items():
            if amount > 0:
                g = self.group_of.get(name)
                if g is not None and g not in asked:
                    asked.append(g)
        return [g for g in self.groups if g in asked]

    def pins_in(self, resource: Resource) -> tuple[Resource, dict[str, str]]:
        """A request that names flavored resources itself (``nvidia.com/gpu@a100: 2``) pins their flavor:
        the request as plain names and ``{group's first resource: flavor}``; ``ValueError`` for a flavor
        or resource the catalog does not know, or two flavors for one group."""
        plain: dict[str, int] = {}
        pins: dict[str, str] = {}
        for name, amount in resource.items():
            base, flavor = split(name)
            if flavor is None:
                plain[name] = plain.get(name, 0) + amount
                continue
            f = self.flavors.get(flavor)
            if f is None:
                raise InputError(f"resource {name!r} names flavor {flavor!r}, which is not a declared "
                                 "resource flavor")
            if base not in f.resources:
                raise InputError(f"resource {name!r}: flavor {flavor!r} does not count {base!r}")
            key = self.group_of[base].resources[0]
            if pins.get(key, flavor) != flavor:
                raise InputError(f"resource {name!r}: the request names flavors {pins[key]!r} and {flavor!r} "
                                 f"for {', '.join(self.group_of[base].resources)}")
            pins[key] = flavor
            plain[base] = plain.get(base, 0) + amount
        return Resource.of(plain), pins

    def charge(self, resource: Resource, chosen: Mapping[str, str]) -> tuple[Resource, dict[str, str]]:
        """What a request is charged with its groups' flavors ``chosen`` (group's first resource →
        flavor): every requested resource of a chosen group also under its flavored name; and the
        flavor of each flavored resource, by resource name (the allocation's ``flavors``)."""
        if not chosen:
            return resource, {}
        out = dict(resource._values)
        names: dict[str, str] = {}
        for name, amount in resource.items():
            g = self.group_of.get(name)
            if g is None or amount <= 0:
                continue
            flavor = chosen.get(g.resources[0])
            if flavor is not None:
                out[flavored(name, flavor)] = amount
                names[name] = flavor
        return Resource.of(out), dict(sorted(names.items()))

    def eligible(self, flavor: str, request: FlavorRequest) -> str | None:
        """Why ``request`` may not use ``flavor`` (KQ-F2: an untolerated NoSchedule/NoExecute taint, a
        node selector or required affinity its labels do not match), None when it may."""
        f = self.flavors[flavor]
        untolerated = _untolerated(f, request)
        if untolerated is not None:
            return f"the request does not tolerate taint {untolerated} of flavor {flavor!r}"
        labels = f.node_labels
        for key, value in request.node_selector.items():
            if key in labels and labels[key] != value:
                return (f"flavor {flavor!r} has node label {key}={labels[key]}, the request's node selector "
                        f"asks for {key}={value}")
        if request.affinity and not matches_affinity(labels, request.affinity):
            return f"flavor {flavor!r} does not match the request's required node affinity"
        return None
