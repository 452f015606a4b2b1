"""Kueue's objects as quotaplane configuration (docs/from-kueue.md).

A YAML stream of Kueue objects — ``ResourceFlavor``, ``ClusterQueue``, ``Cohort``, ``LocalQueue``
(``kueue.x-k8s.io/v1beta1`` or ``v1beta2``, one per document or in a ``List``), and optionally Kueue's
``Configuration`` for its ``fairSharing`` — becomes one partition of quotaplane's queue YAML:

- a ResourceFlavor is a resource flavor counting the resources of the groups that list it;
- a Cohort is a parent queue, a ClusterQueue a leaf under its cohort (or under the root without one);
  a cohort without an object (only named) is a parent queue without quotas;
- ``nominalQuota`` is the guaranteed of the flavored name (``cpu`` of flavor ``spot`` → ``vcore@spot``),
  ``borrowingLimit`` / ``lendingLimit`` the queue's ``borrowinglimit`` / ``lendinglimit``; a cohort's own
  nominal quota is what its queue's guaranteed adds to its children's; the root cohort's total is its
  queue's max (Kueue's supply), as is a lone ClusterQueue's nominal quota;
- ``flavorFungibility``, ``fairSharing.weight`` and the preemption policies map to the queue's keys and
  properties;
- a LocalQueue names the ClusterQueue its namespace submits to (:func:`local_queues`).

Anything without a counterpart (an admission check, ``StrictFIFO``, a stop policy, a namespace selector
that selects, ``borrowWithinCohort``, an object of another kind) is refused, naming the object, the field
and the line (a :class:`~quotaplane.errors.ConfigError` whose problems are ``(line, reason)``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from quotaplane.config.lines import Problem
from quotaplane.config.yaml_tree import LineMap, LineSeq, _TreeBuilder, nesting_depth, raise_problems
from quotaplane.errors import ConfigError, InputError
from quotaplane.resources import Resource, parse_k8s_quantity

__all__ = ["API_GROUP", "is_kueue", "kueue_to_yaml", "local_queue_map", "local_queues"]

#: the API group of Kueue's objects
API_GROUP = "kueue.x-k8s.io"
_VERSIONS = ("v1beta1", "v1beta2")
_KINDS = ("ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "Configuration")
# a document's apiVersion in Kueue's group, in YAML or JSON ({"apiVersion": "kueue.x-k8s.io/v1beta2", …})
_DETECT = re.compile(r"(^|[{,\s])[\"']?apiVersion[\"']?\s*:\s*[\"']?(config\.)?kueue\.x-k8s\.io/",
                     re.MULTILINE)
_QUEUE_NAME = re.compile(r"^[a-zA-Z0-9_:#/@-]{1,64}$")

_CQ_KEYS = ("resourceGroups", "cohortName", "cohort", "queueingStrategy", "namespaceSelector",
            "flavorFungibility", "preemption", "stopPolicy", "fairSharing", "admissionChecks",
            "admissionChecksStrategy", "admissionScope", "concurrentAdmissionPolicy")
_COHORT_KEYS = ("parentName", "parent", "resourceGroups", "fairSharing")
_RF_KEYS = ("nodeLabels", "nodeTaints", "tolerations", "topologyName")
_LQ_KEYS = ("clusterQueue", "stopPolicy", "fairSharing")
_PREEMPTION = {"withinClusterQueue": "preemption.withinclusterqueue",
               "reclaimWithinCohort": "preemption.reclaimwithincohort"}
_FUNGIBILITY = {"whenCanBorrow": "whencanborrow", "whenCanPreempt": "whencanpreempt",
                "preference": "preference"}


def is_kueue(text: str) -> bool:
    """``text`` holds Kueue objects (some document's ``apiVersion`` is in Kueue's API group)."""
    return bool(_DETECT.search(text))


@dataclass
class _Quota:
    """One node's quotas per flavored name (internal units)."""

    nominal: dict[str, int] = field(default_factory=dict)
    borrowing: dict[str, int] = field(default_factory=dict)
    lending: dict[str, int] = field(default_factory=dict)
    flavors: list[str] = field(default_factory=list)


@dataclass
class _Node:
    kind: str
    name: str
    line: int
    parent: str = ""
    quota: _Quota = field(default_factory=_Quota)
    properties: dict[str, str] = field(default_factory=dict)
    fungibility: dict[str, str] = field(default_factory=dict)
    children: list[_Node] = field(default_factory=list)


class _Reader:
    """Reads the objects, collecting every problem as ``(line, reason)``."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.flavors: dict[str, tuple[LineMap, int]] = {}
        self.covered: dict[str, tuple[str, ...]] = {}      # flavor → the resources it counts
        self.queues: dict[str, _Node] = {}
        self.cohorts: dict[str, _Node] = {}
        self.local: dict[tuple[str, str], tuple[str, int | None]] = {}
        self.fair: dict[str, Any] | None = None

    def add(self, line: int | None, reason: str) -> None:
        self.problems.append((line, reason))

    # -- objects ------------------------------------------------------------------------------------
    def read(self, doc: object, index: int) -> None:
        if doc is None:
            return
        if not isinstance(doc, LineMap):
            self.add(getattr(doc, "line", None), f"document {index}: expected a Kubernetes object")
            return
        if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            for item in doc["items"]:
                self.read(item, index)
            return
        api, kind = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
        group, _, version = api.rpartition("/")
        where = f"{kind or 'object'} (document {index})"
        # Cohort objects were v1alpha1 before Kueue 0.11
        known = version in _VERSIONS or (version == "v1alpha1" and kind == "Cohort")
        if group not in (API_GROUP, "config." + API_GROUP) or not known:
            self.add(doc.line, f"{where}: apiVersion {api!r} is not Kueue's ({API_GROUP}/v1beta1 or v1beta2)")
            return
        if kind not in _KINDS:
            self.add(doc.line, f"{where}: kind {kind!r} has no counterpart in quotaplane (it reads "
                               f"{', '.join(_KINDS)})")
            return
        if kind == "Configuration":
            self.configuration(doc)
            return
        meta = doc.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str) or not name:
            self.add(doc.line, f"{where}: metadata.name is missing")
            return
        spec = doc.get("spec", LineMap(doc.line))
        if not isinstance(spec, LineMap):
            self.add(_line(doc, "spec"), f"{kind} {name!r}: spec must be a mapping")
            return
        getattr(self, kind.lower())(name, spec, meta, doc.line)

    def configuration(self, doc: LineMap) -> None:
        fs = doc.get("fairSharing")
        if not isinstance(fs, Mapping):
            return
        if fs.get("enable", True) is False:
            return
        strategies = fs.get("preemptionStrategies")
        self.fair = {"enabled": True}
        if isinstance(strategies, list) and strategies:
            self.fair["preemptionstrategies"] = [str(s) for s in strategies]

    def resourceflavor(self, name: str, spec: LineMap, _meta: Any, line: int) -> None:
        self.unknown(spec, _RF_KEYS, f"ResourceFlavor {name!r}")
        if "topologyName" in spec:
            self.add(_line(spec, "topologyName"),
                     f"ResourceFlavor {name!r}: spec.topologyName (topology-aware scheduling) has no "
                     "counterpart in quotaplane")
        if name in self.flavors:
            self.add(line, f"ResourceFlavor {name!r} is defined twice")
        self.flavors[name] = (spec, line)

    def clusterqueue(self, name: str, spec: LineMap, _meta: Any, line: int) -> None:
        what = f"ClusterQueue {name!r}"
        self.unknown(spec, _CQ_KEYS, what)
        cohort = spec.get("cohortName") or spec.get("cohort") or ""
        node = _Node("ClusterQueue", name, line, parent=str(cohort))
        self.refuse_cq_fields(spec, what)
        self.groups(spec, node, what)
        self.common(spec, node, what)
        if not node.parent and (node.quota.borrowing or node.quota.lending):
            self.add(line, f"{what}: borrowingLimit and lendingLimit must be nil when cohort is empty "
                           "(KQ-O3 #5)")
        for flavored, limit in node.quota.lending.items():
            if limit > node.quota.nominal.get(flavored, 0):
                self.add(line, f"{what}: lendingLimit of {flavored} must be less than or equal to the "
                               "nominalQuota (KQ-O3 #6)")
        self.fungibility(spec, node, what)
        self.preemption(spec, node, what)
        if name in self.queues:
            self.add(line, f"{what} is defined twice")
        self.queues[name] = node

    def cohort(self, name: str, spec: LineMap, _meta: Any, line: int) -> None:
        what = f"Cohort {name!r}"
        self.unknown(spec, _COHORT_KEYS, what)
        node = _Node("Cohort", name, line, parent=str(spec.get("parentName") or spec.get("parent") or ""))
        self.groups(spec, node, what)
        self.common(spec, node, what)
        if not node.parent and (node.quota.borrowing or node.quota.lending):
            self.add(line, f"{what}: borrowingLimit and lendingLimit must be nil when parentName is empty "
                           "(KQ-O4)")
        if name in self.cohorts:
            self.add(line, f"{what} is defined twice")
        self.cohorts[name] = node

    def localqueue(self, name: str, spec: LineMap, meta: Any, line: int) -> None:
        namespace = meta.get("namespace", "default") if isinstance(meta, Mapping) else "default"
        what = f"LocalQueue {namespace}/{name}"
        self.unknown(spec, _LQ_KEYS, what)
        stop = spec.get("stopPolicy", "None")
        if stop != "None":
            self.add(_line(spec, "stopPolicy"),
                     f"{what}: stopPolicy {stop!r} has no counterpart in quotaplane")
        if "fairSharing" in spec:
            self.add(_line(spec, "fairSharing"), f"{what}: fairSharing (admission fair sharing) has no "
                                                 "counterpart here: set history.fairshare weights instead")
        cq = spec.get("clusterQueue")
        if not isinstance(cq, str) or not cq:
            self.add(line, f"{what}: spec.clusterQueue is missing")
            return
        self.local[(str(namespace), name)] = (cq, _line(spec, "clusterQueue"))

    # -- fields -------------------------------------------------------------------------------------
    def unknown(self, spec: LineMap, allowed: tuple[str, ...], what: str) -> None:
        for key in spec:
            if key not in allowed:
                self.add(_line(spec, key),
                         f"{what}: unknown field spec.{key} (allowed: {', '.join(allowed)})")

    def refuse_cq_fields(self, spec: LineMap, what: str) -> None:
        checks = (
            ("queueingStrategy", lambda v: v in (None, "BestEffortFIFO"),
             "StrictFIFO has no counterpart (quotaplane never blocks behind an inadmissible head)"),
            ("stopPolicy", lambda v: v in (None, "None"), "only None has a counterpart"),
            ("namespaceSelector", lambda v: v is None or v == {},
             "only {} (every namespace) has a counterpart: quotaplane places by LocalQueue"),
            ("admissionChecks", lambda v: not v, "admission checks have no counterpart"),
            ("admissionChecksStrategy", lambda v: not v, "admission checks have no counterpart"),
            ("admissionScope", lambda v: not v or (isinstance(v, Mapping) and v.get("admissionMode") in
                                                   (None, "NoAdmissionFairSharing")),
             "admission fair sharing has no counterpart here: set history.fairshare instead"),
            ("concurrentAdmissionPolicy", lambda v: not v, "concurrent admission has no counterpart"),
        )
        for key, ok, why in checks:
            if key in spec and not ok(spec[key]):
                self.add(_line(spec, key), f"{what}: spec.{key} {_show(spec[key])}: {why}")

    def common(self, spec: LineMap, node: _Node, what: str) -> None:
        fs = spec.get("fairSharing")
        if isinstance(fs, Mapping) and "weight" in fs:
            try:
                weight = parse_k8s_quantity(fs["weight"])
            except (InputError, ValueError):
                self.add(_line(fs, "weight"),
                         f"{what}: fairSharing.weight {fs['weight']!r} is not a quantity")
                return
            node.properties["fairsharing.weight"] = _decimal(weight)

    def fungibility(self, spec: LineMap, node: _Node, what: str) -> None:
        ff = spec.get("flavorFungibility")
        if not isinstance(ff, Mapping):
            return
        for key, value in ff.items():
            if key not in _FUNGIBILITY:
                self.add(_line(ff, key), f"{what}: unknown field spec.flavorFungibility.{key}")
            else:
                node.fungibility[_FUNGIBILITY[key]] = str(value)

    def preemption(self, spec: LineMap, node: _Node, what: str) -> None:
        pre = spec.get("preemption")
        if not isinstance(pre, Mapping):
            return
        for key, value in pre.items():
            if key in _PREEMPTION:
                node.properties[_PREEMPTION[key]] = str(value)
            elif key == "borrowWithinCohort":
                policy = value.get("policy", "Never") if isinstance(value, Mapping) else value
                if policy != "Never":
                    self.add(_line(pre, key),
                             f"{what}: spec.preemption.borrowWithinCohort {_show(value)} has no counterpart "
                             "(quotaplane's preemption never lets the preemptor borrow)")
            else:
                self.add(_line(pre, key), f"{what}: unknown field spec.preemption.{key}")

    def groups(self, spec: LineMap, node: _Node, what: str) -> None:
        groups = spec.get("resourceGroups")
        if groups is None:
            return
        if not isinstance(groups, LineSeq):
            self.add(_line(spec, "resourceGroups"), f"{what}: spec.resourceGroups must be a list")
            return
        for i, group in enumerate(groups):
            if isinstance(group, LineMap):
                self.group(group, node, f"{what}: spec.resourceGroups[{i}]")
            else:
                self.add(groups.item_lines[i], f"{what}: spec.resourceGroups[{i}] must be a mapping")

    def group(self, group: LineMap, node: _Node, where: str) -> None:
        covered = group.get("coveredResources")
        flavors = group.get("flavors")
        if not isinstance(covered, list) or not covered or not isinstance(flavors, LineSeq) or not flavors:
            self.add(group.line, f"{where}: coveredResources and flavors must be non-empty lists")
            return
        names = tuple(str(c) for c in covered)
        for j, fq in enumerate(flavors):
            if not isinstance(fq, LineMap) or not isinstance(fq.get("name"), str):
                self.add(flavors.item_lines[j], f"{where}.flavors[{j}]: a flavor needs a name")
                continue
            self.flavor_quotas(fq, names, node, f"{where}.flavors[{j}] ({fq['name']})")

    def flavor_quotas(self, fq: LineMap, covered: tuple[str, ...], node: _Node, where: str) -> None:
        flavor = str(fq["name"])
        known = self.covered.setdefault(flavor, covered)
        if known != covered:
            self.add(fq.line, f"{where}: flavor {flavor!r} covers {', '.join(covered)} here but "
                              f"{', '.join(known)} elsewhere; quotaplane counts a flavor's resources once "
                              "(FL-3)")
        node.quota.flavors.append(flavor)
        resources = fq.get("resources")
        if not isinstance(resources, LineSeq) or [r.get("name") if isinstance(r, Mapping) else None
                                                  for r in resources] != list(covered):
            self.add(fq.line, f"{where}: resources must list {', '.join(covered)}, in that order (KQ-O3 #1)")
            return
        for r in resources:
            self.quantities(r, flavor, node, where)

    def quantities(self, r: LineMap, flavor: str, node: _Node, where: str) -> None:
        name = str(r["name"])
        for key, into in (("nominalQuota", node.quota.nominal), ("borrowingLimit", node.quota.borrowing),
                          ("lendingLimit", node.quota.lending)):
            if key not in r:
                if key == "nominalQuota":
                    self.add(r.line, f"{where}: {name}: nominalQuota is required")
                continue
            try:
                ((internal, amount),) = Resource.from_k8s({name: r[key]}).items()
            except (InputError, ValueError) as exc:
                self.add(_line(r, key), f"{where}: {name}: {key} {r[key]!r}: {exc}")
                continue
            into[f"{internal}@{flavor}"] = amount
        for key in r:
            if key not in ("name", "nominalQuota", "borrowingLimit", "lendingLimit"):
                self.add(_line(r, key), f"{where}: {name}: unknown field {key}")


def _line(m: Any, key: str) -> int | None:
    lines = getattr(m, "key_lines", None)
    if isinstance(lines, dict) and key in lines:
        found = lines[key]
        return found if isinstance(found, int) else None
    line = getattr(m, "line", None)
    return line if isinstance(line, int) else None


def _show(value: Any) -> str:
    return repr(value) if not isinstance(value, Mapping) else repr(dict(value))


def _decimal(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    text = f"{float(value):.9f}".rstrip("0").rstrip(".")
    return text or "0"


def _documents(text: str) -> Iterator[object]:
    from ruamel.yaml import YAML

    depth, line = nesting_depth(text)
    if depth > 250:
        raise_problems([(line, "invalid YAML: nested too deeply")])
    yaml = YAML(typ="safe")
    try:
        for node in yaml.compose_all(text):
            yield None if node is None else _TreeBuilder(yaml.constructor).build(node)
    except ConfigError:
        raise
    except Exception as exc:  # any parser failure is bad input, named with its line
        mark = getattr(exc, "problem_mark", None)
        at = getattr(mark, "line", None)
        raise_problems([(at + 1 if isinstance(at, int) else None, f"invalid YAML: {exc}")])


# -- the queue tree ---------------------------------------------------------------------------------
def _tree(r: _Reader) -> list[_Node]:
    """The root's children: root cohorts and the ClusterQueues without a cohort."""
    for node in [*r.queues.values(), *r.cohorts.values()]:
        if node.parent and node.parent not in r.cohorts:
            r.cohorts[node.parent] = _Node("Cohort", node.parent, node.line)     # implicit (KQ-O4)
    top: list[_Node] = []
    for node in [*r.cohorts.values(), *r.queues.values()]:
        (r.cohorts[node.parent].children if node.parent else top).append(node)
    _check_cycles(r)
    for node in [*r.cohorts.values(), *r.queues.values()]:
        if not _QUEUE_NAME.match(node.name):
            r.add(node.line, f"{node.kind} {node.name!r}: a queue name is 1-64 letters, digits and _:#/@- "
                             "(quotaplane's queue paths are dotted)")
    return top


def _check_cycles(r: _Reader) -> None:
    for name, node in r.cohorts.items():
        seen = [name]
        parent = node.parent
        while parent:
            if parent in seen:
                r.add(node.line, f"Cohort {name!r}: parentName makes a cycle "
                                 f"({' -> '.join([*seen, parent])}); Kueue disables its ClusterQueues, "
                                 "quotaplane refuses it (KQ-O4)")
                node.parent = ""
                break
            seen.append(parent)
            parent = r.cohorts[parent].parent if parent in r.cohorts else ""


def _total(node: _Node) -> dict[str, int]:
    out = dict(node.quota.nominal)
    for child in node.children:
        for k, v in _total(child).items():
            out[k] = out.get(k, 0) + v
    return out


def _amount(name: str, value: int) -> str:
    return f"\"{value}m\"" if name.startswith("vcore") else str(value)


def _resources(values: Mapping[str, int]) -> str:
    return "{" + ", ".join(f"{k}: {_amount(k, v)}" for k, v in sorted(values.items())) + "}"


def _queue_yaml(node: _Node, indent: int, top: bool) -> list[str]:
    pad = " " * indent
    lines = [f"{pad}- name: {node.name}"]
    res: dict[str, Mapping[str, int]] = {}
    if node.kind == "ClusterQueue":
        if node.quota.nominal:
            res["guaranteed"] = node.quota.nominal
        if top and node.quota.nominal:
            res["max"] = node.quota.nominal                 # a lone ClusterQueue cannot borrow
        if node.quota.flavors:
            lines.append(f"{pad}  flavors: [{', '.join(dict.fromkeys(node.quota.flavors))}]")
        if node.fungibility:
            body = ", ".join(f"{k}: {v}" for k, v in node.fungibility.items())
            lines.append(f"{pad}  flavorfungibility: {{{body}}}")
    else:
        total = _total(node)
        if node.quota.nominal:
            res["guaranteed"] = total                       # its own nominal on top of its children's
        if top and total:
            res["max"] = total                              # the root cohort's supply
    if node.quota.borrowing:
        res["borrowinglimit"] = node.quota.borrowing
    if node.quota.lending:
        res["lendinglimit"] = node.quota.lending
    if res:
        lines.append(f"{pad}  resources:")
        lines.extend(f"{pad}    {k}: {_resources(v)}" for k, v in res.items())
    if node.properties:
        body = ", ".join(f"{k}: \"{v}\"" for k, v in sorted(node.properties.items()))
        lines.append(f"{pad}  properties: {{{body}}}")
    if node.kind == "Cohort":
        lines.append(f"{pad}  parent: true")
        if node.children:
            lines.append(f"{pad}  queues:")
            for child in node.children:
                lines.extend(_queue_yaml(child, indent + 4, False))
    return lines


def _flavor_yaml(name: str, spec: LineMap, resources: tuple[str, ...]) -> list[str]:
    import json

    counted = ["vcore" if r == "cpu" else r for r in resources]
    out = [f"      - name: {name}", f"        resources: [{', '.join(counted)}]"]
    labels = spec.get("nodeLabels")
    if isinstance(labels, Mapping) and labels:
        out.append(f"        nodelabels: {json.dumps(dict(labels), sort_keys=True)}")
    for key, into in (("nodeTaints", "nodetaints"), ("tolerations", "tolerations")):
        items = spec.get(key)
        if isinstance(items, list) and items:
            # timeAdded and tolerationSeconds are about eviction timing, not quota: not carried
            plain = [{k.lower(): v for k, v in dict(i).items() if k in ("key", "operator", "value", "effect")}
                     for i in items if isinstance(i, Mapping)]
            out.append(f"        {into}: {json.dumps(plain, sort_keys=True)}")
    return out


def _convert(text: str, partition: str) -> tuple[str, _Reader]:
    r = _Reader()
    for i, doc in enumerate(_documents(text), 1):
        r.read(doc, i)
    for name, (cq, line) in r.local.items():
        if cq not in r.queues:
            r.add(line, f"LocalQueue {name[0]}/{name[1]}: clusterQueue {cq!r} is not defined")
    for flavor in r.covered:
        if flavor not in r.flavors:
            r.add(None, f"flavor {flavor!r} is used by a ClusterQueue but no ResourceFlavor defines it")
    top = _tree(r)
    if not r.queues:
        r.add(None, "no ClusterQueue found: nothing to admit to")
    if r.problems:
        raise_problems(r.problems)
    lines = ["partitions:", f"  - name: {partition}"]
    if r.fair is not None:
        import json

        lines.append(f"    fairsharing: {json.dumps(r.fair)}")
    used = [f for f in r.flavors if f in r.covered]
    if used:
        lines.append("    resourceflavors:")
        for flavor in used:
            lines.extend(_flavor_yaml(flavor, r.flavors[flavor][0], r.covered[flavor]))
    if r.local:
        lines.append("    localqueues:")
        paths = _paths(r)
        lines += [f"      - {{namespace: {ns}, name: {name}, queue: {paths[cq]}}}"
                  for (ns, name), (cq, _) in sorted(r.local.items())]
    lines += ["    queues:", "      - name: root", "        submitacl: \"*\"", "        queues:"]
    for node in top:
        lines.extend(_queue_yaml(node, 10, True))
    return "\n".join(lines) + "\n", r


def kueue_to_yaml(text: str, partition: str = "default") -> str:
    """quotaplane's queue YAML for the Kueue objects in ``text`` (one partition); a
    :class:`~quotaplane.errors.ConfigError` naming every object and field without a counterpart."""
    return _convert(text, partition)[0]


def _paths(r: _Reader) -> dict[str, str]:
    """Every ClusterQueue's queue path."""
    out: dict[str, str] = {}
    for name, node in r.queues.items():
        chain = [node.name]
        parent = node.parent
        while parent:
            chain.append(parent)
            parent = r.cohorts[parent].parent if parent in r.cohorts else ""
        out[name] = ".".join(["root", *reversed(chain)])
    return out


def local_queues(text: str) -> dict[tuple[str, str], str]:
    """Every LocalQueue of ``text``: ``(namespace, name)`` → the queue path of its ClusterQueue."""
    _, r = _convert(text, "default")
    paths = _paths(r)
    return {key: paths[cq] for key, (cq, _) in r.local.items()}


def local_queue_map(extensions: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """A partition's ``localqueues`` (its configuration's extensions) as ``(namespace, name)`` → queue
    path: where a pod labelled ``kueue.x-k8s.io/queue-name`` goes."""
    out: dict[tuple[str, str], str] = {}
    for item in extensions.get("localqueues") or ():
        out[(str(item["namespace"]), str(item["name"]))] = str(item["queue"])
    return out
