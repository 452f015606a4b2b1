"""Value objects and JSON parsing of the quota-forest engine (seed 003, reference §6–§8).

Everything here is plain data: the error type, the manager mode, the allocation response, the parsed
consumer specification (:class:`ConsumerInfo`) and the per-tree edit cache (:class:`TreeCache`). The
allocation algorithm lives in :mod:`quotaplane.forest._tree` (on :mod:`~quotaplane.forest._structure`
and :mod:`~quotaplane.forest._undo`), the public manager in
:mod:`quotaplane.forest.manager`.
"""

from __future__ import annotations

import enum
import json
import re
import threading
from collections.abc import Mapping
from typing import Any

from quotaplane.config.bodies import MAX_NESTING, json_depth
from quotaplane.errors import QuotaError

__all__ = [
    "DEFAULT_RESOURCE_NAMES",
    "AllocationResponse",
    "ConsumerInfo",
    "ConsumerTreeSpec",
    "Mode",
    "NodeSpec",
    "QuotaError",
    "TreeCache",
    "parse_tree_json",
]

#: Resource names a tree gets when its definition names none (reference §7 ``CreateTree``).
DEFAULT_RESOURCE_NAMES: tuple[str, ...] = ("cpu", "memory", "nvidia.com/gpu")

_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})     # Go strconv.ParseBool (§7)
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
# A comma directly before a closing bracket, outside strings (the seed README's tree has one, B12).
_TRAILING_COMMA_RE = re.compile(r'("(?:[^"\\]|\\.)*")|,(\s*[}\]])')


class Mode(enum.IntEnum):
    """The manager mode (§6): ``MAINTENANCE`` (the initial mode) forces allocations at the gNode."""

    NORMAL = 0
    MAINTENANCE = 1

    def describe(self) -> str:
        """Go's ``GetModeString()``: ``"mode set to Normal"`` / ``"mode set to Maintenance"``."""
        return "mode set to Normal" if self is Mode.NORMAL else "mode set to Maintenance"


class AllocationResponse:
    """The answer of an allocation call (§8.3).

    ``allocated`` says whether the consumer was placed; ``preempted_ids`` lists the consumers removed
    to make room, in preemption order (decision F3); ``message`` is Go's message text (``" "`` on a
    tree success, the failure reason otherwise).
    """

    __slots__ = ("allocated", "consumer_id", "failed_node", "failed_tree", "message", "preempted_ids",
                 "shortfall")

    def __init__(self, consumer_id: str, allocated: bool, message: str,
                 preempted_ids: list[str] | None = None) -> None:
        self.consumer_id = consumer_id
        self.allocated = allocated
        self.message = message
        self.preempted_ids: list[str] = preempted_ids if preempted_ids is not None else []
        #: on failure: the tree and node where the allocation stopped, and what was missing there
        self.failed_tree: str | None = None
        self.failed_node: str | None = None
        self.shortfall: dict[str, int] = {}

    def __bool__(self) -> bool:
        return self.allocated

    def __repr__(self) -> str:
        return (f"AllocationResponse: consumer={self.consumer_id}; allocated={str(self.allocated).lower()}; "
                f"message={self.message!r}; preemptedIds={self.preempted_ids}")


# --------------------------------------------------------------------------------------------- parsing

def _loads(text: str, what: str) -> Any:
    """``json.loads`` that also accepts trailing commas (the seed README's example has one, B12)."""
    if not isinstance(text, str):
        raise QuotaError(f"error parsing {what}: expected a JSON string, got {type(text).__name__}")
    if json_depth(text) > MAX_NESTING:
        raise QuotaError(f"error parsing {what}: nested too deeply (more than {MAX_NESTING} levels)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        relaxed = _TRAILING_COMMA_RE.sub(lambda m: m.group(1) or m.group(2), text)
        if relaxed != text:
            try:
                return json.loads(relaxed)
            except json.JSONDecodeError:
                pass
        raise QuotaError(f"error parsing {what}: {first}") from None


def parse_amount(value: Any, where: str) -> int:
    """A quota or request amount: a non-negative int or a base-10 integer string (decision F4)."""
    if isinstance(value, bool):
        raise QuotaError(f"{where}: expected an integer, got {value!r}")
    if isinstance(value, int):
        out = value
    elif isinstance(value, str) and _INT_RE.match(value.strip()):
        out = int(value.strip())
    else:
        raise QuotaError(f"{where}: expected an integer or a string holding one, got {value!r}")
    if out < 0:
        raise QuotaError(f"{where}: negative amount {out}")
    return out


def parse_hard(value: Any, where: str) -> bool:
    """The ``hard`` flag: Go ``strconv.ParseBool`` spellings or a JSON boolean; absent = Soft (§7)."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
    raise QuotaError(f"{where}: 'hard' must be a boolean spelling (true/false/1/0/t/f), got {value!r}")


def _parse_int_field(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise QuotaError(f"{where}: expected an integer, got {value!r}")
    return value


class NodeSpec:
    """One node of a tree definition: parent name (``""`` = root), Hard flag and quota amounts."""

    __slots__ = ("hard", "parent", "quota")

    def __init__(self, parent: str, hard: bool, quota: dict[str, int]) -> None:
        self.parent = parent
        self.hard = hard
        self.quota = quota

    @classmethod
    def parse(cls, name: str, raw: Any) -> NodeSpec:
        """Validate a JSON node spec (§7 ``AddNodeSpec``, §8.1); raise :class:`QuotaError`."""
        if not isinstance(raw, Mapping) or not raw:
            raise QuotaError(f"node {name}: node spec is invalid; not added")
        quota = raw.get("quota")
        if quota is None:
            raise QuotaError(f"node {name}: quota is missing; not added")
        if not isinstance(quota, Mapping):
            raise QuotaError(f"node {name}: quota must be an object")
        parent = raw.get("parent")
        if parent is None:
            parent = ""
        if not isinstance(parent, str):
            raise QuotaError(f"node {name}: parent must be a string")
        if parent == "nil":
            parent = ""
        amounts = {str(k): parse_amount(v, f"node {name}: quota of {k}") for k, v in quota.items()}
        return cls(parent, parse_hard(raw.get("hard"), f"node {name}"), amounts)

    def copy(self) -> NodeSpec:
        """An independent copy."""
        return NodeSpec(self.parent, self.hard, dict(self.quota))

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape (``parent`` ``"nil"`` for a root, quota values as strings like the seed)."""
        return {"parent": self.parent or "nil", "hard": "true" if self.hard else "false",
                "quota": {k: str(v) for k, v in sorted(self.quota.items())}}


def parse_tree_json(text: str) -> tuple[str, list[str], dict[str, NodeSpec]]:
    """Parse a ``QuotaTree`` document (§8.1) into (name, resource names, node specs). All or nothing."""
    doc = _loads(text, "tree")
    return parse_tree_obj(doc)


def _tree_head(doc: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """A tree document's name and spec, checked to be a string and an object."""
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
        raise QuotaError("error parsing tree: metadata and spec must be objects")
    name = meta.get("name", "")
    if not isinstance(name, str):
        raise QuotaError("error parsing tree: metadata.name must be a string")
    return name, spec


def parse_tree_obj(doc: Any) -> tuple[str, list[str], dict[str, NodeSpec]]:
    """Like :func:`parse_tree_json` for an already decoded JSON object."""
    if not isinstance(doc, Mapping):
        raise QuotaError("error parsing tree: the document must be a JSON object")
    kind = doc.get("kind")
    if kind != "QuotaTree":
        raise QuotaError(f"invalid kind: {kind if kind is not None else ''}")
    name, spec = _tree_head(doc)
    names = spec.get("resourceNames") or []
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise QuotaError("error parsing tree: resourceNames must be a list of non-empty strings")
    return name, list(dict.fromkeys(names)), _node_specs(spec.get("nodes") or {})


def _node_specs(nodes: Any) -> dict[str, NodeSpec]:
    """A tree's ``spec.nodes`` parsed, every invalid node named in one error."""
    if not isinstance(nodes, Mapping):
        raise QuotaError("error parsing tree: nodes must be an object")
    specs: dict[str, NodeSpec] = {}
    problems: list[str] = []
    for node_name, raw in nodes.items():
        try:
            specs[str(node_name)] = NodeSpec.parse(str(node_name), raw)
        except QuotaError as err:
            problems.append(str(err))
    if problems:
        # B13 fixed: one invalid node fails the whole tree, nothing is added.
        raise QuotaError("invalid specs for some nodes: " + "; ".join(problems))
    return specs


class ConsumerTreeSpec:
    """What a consumer asks of one tree: its group node (gNode), request and priority/type flags."""

    __slots__ = ("_vec", "_vec_names", "group_id", "priority", "request", "tree_name", "type",
                 "unpreemptable")

    def __init__(self, tree_name: str, group_id: str, request: Mapping[str, int], *, priority: int = 0,
                 type: int = 0, unpreemptable: bool = False) -> None:
        self.tree_name = tree_name
        self.group_id = group_id
        self.request: dict[str, int] = dict(request)
        self.priority = priority
        self.type = type
        self.unpreemptable = unpreemptable
        self._vec_names: tuple[str, ...] | None = None
        self._vec: list[int] = []

    def vector(self, names: tuple[str, ...]) -> list[int]:
        """The request in the order of ``names`` (missing = 0, others ignored; §8.2). Cached; read-only."""
        if self._vec_names is not names:
            req = self.request
            self._vec = [req.get(n, 0) for n in names]
            self._vec_names = names
        return self._vec

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of this tree entry."""
        return {"treeName": self.tree_name, "groupID": self.group_id,
                "request": dict(sorted(self.request.items())), "priority": self.priority,
                "type": self.type, "unPreemptable": self.unpreemptable}


def _tree_spec(t: Any, where: str) -> ConsumerTreeSpec:
    """One entry of a consumer's ``trees`` (an entry without a tree name is dropped by the caller)."""
    if not isinstance(t, Mapping):
        raise QuotaError(f"{where} must be an object")
    tree_name = t.get("treeName") or ""
    group = t.get("groupID") or ""
    if not isinstance(tree_name, str) or not isinstance(group, str):
        raise QuotaError(f"{where}: treeName and groupID must be strings")
    req = t.get("request") or {}
    if not isinstance(req, Mapping):
        raise QuotaError(f"{where}: request must be an object")
    request = {str(k): parse_amount(v, f"{where}: request of {k}") for k, v in req.items()}
    unp = t.get("unPreemptable", False)
    if not isinstance(unp, bool):
        raise QuotaError(f"{where}: unPreemptable must be a boolean")
    return ConsumerTreeSpec(tree_name, group, request,
                            priority=_parse_int_field(t.get("priority"), f"{where}: priority"),
                            type=_parse_int_field(t.get("type"), f"{where}: type"), unpreemptable=unp)


def _consumer_head(doc: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """A consumer document's spec and id, checked to be an object and a non-empty string."""
    spec = doc.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise QuotaError("error parsing consumer: spec must be an object")
    cid = spec.get("id")
    if not isinstance(cid, str) or not cid:
        raise QuotaError("missing consumer ID")
    return spec, cid


class ConsumerInfo:
    """A parsed consumer specification (§8.2): an id and one :class:`ConsumerTreeSpec` per tree."""

    __slots__ = ("id", "trees")

    def __init__(self, consumer_id: str, trees: list[ConsumerTreeSpec] | None = None) -> None:
        if not isinstance(consumer_id, str) or not consumer_id:
            raise QuotaError("missing consumer ID")
        self.id = consumer_id
        self.trees: dict[str, ConsumerTreeSpec] = {}
        for t in trees or ():
            if t.tree_name in self.trees:
                raise QuotaError(f"consumer {consumer_id}: tree {t.tree_name} named twice")
            self.trees[t.tree_name] = t

    @classmethod
    def from_string(cls, json_text: str) -> ConsumerInfo:
        """Parse a ``Consumer`` JSON document; raise :class:`QuotaError` on any problem."""
        return cls.from_dict(_loads(json_text, "consumer"))

    @classmethod
    def from_dict(cls, doc: Any) -> ConsumerInfo:
        """Like :meth:`from_string` for a decoded JSON object."""
        if not isinstance(doc, Mapping):
            raise QuotaError("error parsing consumer: the document must be a JSON object")
        kind = doc.get("kind")
        if kind != "Consumer":
            raise QuotaError(f"consumer invalid kind: {kind if kind is not None else ''}")
        spec, cid = _consumer_head(doc)
        # Only the key "trees" counts: the seed's "trees:" (with a colon) yields no trees (S59, B12).
        raw_trees = spec.get("trees") or []
        if not isinstance(raw_trees, list):
            raise QuotaError(f"consumer {cid}: trees must be a list")
        out = [entry for i, t in enumerate(raw_trees)
               if (entry := _tree_spec(t, f"consumer {cid}: trees[{i}]")).tree_name]   # F1 of §4
        return cls(cid, out)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of this consumer."""
        return {"kind": "Consumer", "metadata": {"name": self.id},
                "spec": {"id": self.id, "trees": [t.to_dict() for t in self.trees.values()]}}

    def __repr__(self) -> str:
        return f"ConsumerInfo({self.id!r}, trees={list(self.trees)})"


class TreeCache:
    """The pending definition of one tree (§7): edits take effect at ``update_tree``/``update_forest``.

    Obtained from :meth:`QuotaManager.get_tree_cache`; every method takes the manager's lock. Invalid
    edits raise :class:`QuotaError` and change nothing.
    """

    __slots__ = ("_lock", "_renamed", "_resources", "_specs", "tree_name")

    def __init__(self, tree_name: str, lock: threading.RLock | None = None) -> None:
        self.tree_name = tree_name
        self._lock = lock if lock is not None else threading.RLock()
        self._resources: set[str] = set()
        self._specs: dict[str, NodeSpec] = {}
        self._renamed: dict[str, str] = {}

    # -- node specs
    def add_node_spec(self, name: str, spec: Mapping[str, Any]) -> None:
        """Add or replace (whole spec, S44) the node ``name``; ``spec`` as in the tree JSON."""
        if not isinstance(name, str) or not name:
            raise QuotaError("node name must be a non-empty string")
        parsed = NodeSpec.parse(name, spec)
        with self._lock:
            self._specs[name] = parsed
            self._renamed.pop(name, None)

    def add_node_specs_from_string(self, json_text: str) -> None:
        """Add a JSON object ``{name: spec, …}``; all or nothing (B13 fixed)."""
        doc = _loads(json_text, "node specs")
        if not isinstance(doc, Mapping):
            raise QuotaError("error parsing node specs: expected a JSON object of node specs")
        parsed: dict[str, NodeSpec] = {}
        problems: list[str] = []
        for name, raw in doc.items():
            if not name:
                problems.append("node name must be a non-empty string")
                continue
            try:
                parsed[str(name)] = NodeSpec.parse(str(name), raw)
            except QuotaError as err:
                problems.append(str(err))
        if problems:
            raise QuotaError("; ".join(problems))
        with self._lock:
            for name, spec in parsed.items():
                self._specs[name] = spec
                self._renamed.pop(name, None)

    def delete_node(self, name: str) -> None:
        """Remove a node spec (its children dangle unless re-parented)."""
        with self._lock:
            if name not in self._specs:
                raise QuotaError(f"node {name} does not exist in the cache of tree {self.tree_name}")
            del self._specs[name]

    def rename_node(self, old: str, new: str) -> None:
        """Rename ``old`` to ``new``: children follow, allocated consumers keep their place (S39)."""
        with self._lock:
            if not old or not new:
                raise QuotaError("rename needs two non-empty node names")
            if old == new:
                raise QuotaError(f"rename of node {old} to itself")
            if old not in self._specs:
                raise QuotaError(f"node {old} does not exist in the cache of tree {self.tree_name}")
            if new in self._specs:
                raise QuotaError(f"node {new} already exists in the cache of tree {self.tree_name}")
            specs: dict[str, NodeSpec] = {}
            for name, spec in self._specs.items():
                key = new if name == old else name
                if spec.parent == old:
                    spec = NodeSpec(new, spec.hard, spec.quota)
                specs[key] = spec
            self._specs = specs
            self._renamed[old] = new

    def node_names(self) -> list[str]:
        """The node names held, sorted."""
        with self._lock:
            return sorted(self._specs)

    def node_spec(self, name: str) -> dict[str, Any]:
        """The JSON shape of node ``name``'s spec."""
        with self._lock:
            spec = self._specs.get(name)
            if spec is None:
                raise QuotaError(f"node {name} does not exist in the cache of tree {self.tree_name}")
            return spec.to_dict()

    # -- resource names
    def add_resource_name(self, name: str) -> None:
        """Add a resource name (vectors follow the sorted names)."""
        if not isinstance(name, str) or not name:
            raise QuotaError("resource name must be a non-empty string")
        with self._lock:
            self._resources.add(name)

    def delete_resource_name(self, name: str) -> None:
        """Remove a resource name."""
        with self._lock:
            if name not in self._resources:
                raise QuotaError(f"resource {name} is not defined for tree {self.tree_name}")
            self._resources.discard(name)

    def resource_names(self) -> list[str]:
        """The resource names, sorted (the vector order, §1)."""
        with self._lock:
            return sorted(self._resources)

    def replace(self, other: TreeCache) -> None:
        """Replace the resource names and node specs by (copies of) ``other``'s; renames are kept."""
        with self._lock:
            self._resources = set(other._resources)
            self._specs = {n: s.copy() for n, s in other._specs.items()}

    # -- internal
    def _load(self, resources: list[str], specs: dict[str, NodeSpec]) -> None:
        self._resources = set(resources)
        self._specs = dict(specs)

    def _renamed_map(self) -> dict[str, str]:
        return dict(self._renamed)

    def _effective_resources(self) -> tuple[str, ...]:
        # §7: with no names the defaults are written into the cache itself.
        if not self._resources:
            self._resources = set(DEFAULT_RESOURCE_NAMES)
        return tuple(sorted(self._resources))

    def _specs_sorted(self) -> list[tuple[str, NodeSpec]]:
        return sorted(self._specs.items())

    def to_dict(self) -> dict[str, Any]:
        """Deterministic dump of the cache contents."""
        with self._lock:
            return {"resource_names": sorted(self._resources),
                    "nodes": {n: s.to_dict() for n, s in sorted(self._specs.items())},
                    "renamed": dict(sorted(self._renamed.items()))}
