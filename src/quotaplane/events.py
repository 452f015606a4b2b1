"""The partition's journal events, one typed class each, with their JSON form (product.md "Architecture").

Events are plain slotted dataclasses, treated as immutable once built (not ``frozen``: a frozen
dataclass costs a ``object.__setattr__`` per field, and an event is built for every allocation).

Every change of a partition is one of these events: the partition applies it, appends its JSON form
to the journal, and only then answers (rule S1 in ``docs/rules.md``); replay decodes the JSON with
:func:`decode` and applies the same class through the same code. The JSON form is the journal's
format, kept byte-identical across releases (``tests/journal/test_journal_fixture.py`` replays a
journal written by earlier code): field names are the JSON keys, and a field listed in a class's
``OMIT`` is left out of the JSON while it is ``None`` (older events lack those keys).

Two events never appear in a partition's stream, only in a snapshot's rebuild list: :class:`CountIn`
and :class:`AppRestore`, and :class:`PolicyMemo` (state a policy cannot derive from allocations).

Subscribers (``Partition.subscribe``) do not receive these events; they receive *notices*
(:mod:`quotaplane.notices`), one per journalled event, whose shape is the REST event stream's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self, TypeVar

from quotaplane.errors import EventFormatError
from quotaplane.resources import Resource

__all__ = [
    "EVENT_TYPES",
    "Allocated",
    "AppAdded",
    "AppRemoved",
    "AppRestore",
    "AskAdded",
    "AskRemoved",
    "Bound",
    "ConfigApplied",
    "CountIn",
    "Event",
    "EventFormatError",
    "NodeAdded",
    "NodeRemoved",
    "NodeUpdated",
    "Noted",
    "PolicyMemo",
    "Preempted",
    "Released",
    "Replaced",
    "Timeouts",
    "decode",
]


_Conv = Callable[[Any], Any]


def _fail(what: str) -> EventFormatError:
    return EventFormatError(what)


def _str(v: Any) -> str:
    if type(v) is not str:
        raise _fail(f"expected a string, got {v!r}")
    return v


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _fail(f"expected an integer, got {v!r}")
    return v


def _float(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise _fail(f"expected a number, got {v!r}")
    return float(v)


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise _fail(f"expected true or false, got {v!r}")
    return v


def _res(v: Any) -> Resource:
    if type(v) is not dict:
        if not isinstance(v, Mapping):
            raise _fail(f"expected a resource object, got {v!r}")
        v = dict(v)
    for name, amount in v.items():
        if type(amount) is not int or amount < 0 or type(name) is not str:
            raise _fail(f"resource {name!r}: expected a non-negative integer, got {amount!r}")
    return Resource.of(dict(v))


def _runtime(v: Any) -> float:
    seconds = _float(v)
    if seconds <= 0:
        raise _fail(f"expected a positive number of seconds, got {v!r}")
    return seconds


def _strs(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list | tuple):
        raise _fail(f"expected a list of strings, got {v!r}")
    return tuple(_str(x) for x in v)


def _tags(v: Any) -> dict[str, str]:
    if not isinstance(v, Mapping):
        raise _fail(f"expected an object of strings, got {v!r}")
    return {_str(k): _str(x) for k, x in v.items()}


def _any_map(v: Any) -> dict[str, Any]:
    if not isinstance(v, Mapping):
        raise _fail(f"expected an object, got {v!r}")
    return dict(v)


def _opt(conv: _Conv) -> _Conv:
    def convert(v: Any) -> Any:
        return None if v is None else conv(v)
    return convert


def _json_value(v: Any) -> Any:
    if isinstance(v, Resource):
        return v.to_dict()
    if isinstance(v, tuple):
        # a tuple of pairs (a state log) becomes a list of lists; a flat one a list
        return [list(x) for x in v] if v and type(v[0]) is tuple else list(v)
    if isinstance(v, dict):
        return dict(v)
    return v


@dataclass(slots=True, kw_only=True)
class Event:
    """A journalled change of a partition. ``TYPE`` is its ``"type"`` in the JSON form."""

    TYPE: ClassVar[str] = ""
    #: converters of the JSON values, one per field, in field order
    FIELDS: ClassVar[dict[str, _Conv]] = {}
    #: fields left out of the JSON while None
    OMIT: ClassVar[frozenset[str]] = frozenset()

    def to_json(self) -> dict[str, Any]:
        """The journal form: ``{"type": TYPE, field: value, …}`` (plain JSON values)."""
        out: dict[str, Any] = {"type": self.TYPE}
        omit = self.OMIT
        for name in self.FIELDS:
            value = getattr(self, name)
            if value is None and name in omit:
                continue
            out[name] = _json_value(value)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """Decode the journal form; :class:`EventFormatError` names the field that is wrong."""
        kwargs: dict[str, Any] = {}
        try:
            for name, conv in cls.FIELDS.items():
                if name in data:
                    kwargs[name] = conv(data[name])
                elif name not in cls._defaults():
                    raise EventFormatError(f"missing field {name!r}")
        except EventFormatError as exc:
            raise EventFormatError(f"{cls.TYPE} event, field {name!r}: {exc}") from None
        return cls(**kwargs)

    @classmethod
    def _defaults(cls) -> frozenset[str]:
        found = _DEFAULTS.get(cls)
        if found is None:
            from dataclasses import MISSING, fields

            found = frozenset(f.name for f in fields(cls)
                              if f.default is not MISSING or f.default_factory is not MISSING)
            _DEFAULTS[cls] = found
        return found


_DEFAULTS: dict[type[Event], frozenset[str]] = {}

_E = TypeVar("_E", bound=Event)


def _generic_from_json(cls: type[_E], data: Mapping[str, Any]) -> _E:
    """The generic decoder of :class:`Event`, for subclasses that write out a fast path."""
    decoded: _E = Event.from_json.__func__(cls, data)  # type: ignore[attr-defined]
    return decoded


# what the written-out decoders (Allocated, AskAdded) accept without the generic decoder: exact types
# only (a bool is not an int here), each check a few bytecodes — every allocation is decoded by them
_STR_OR_NONE = (str, type(None))
_INT_OR_NONE = (int, type(None))
_ALLOCATED_TYPES = (str, str, int, bool, bool)          # app, key, priority, preemptible, placeholder
_ASK_TYPES = (str, str, int, bool, int)                 # key, app, priority, preemptible, seq


def _plain(t: Any, res: Any) -> bool:
    """The time and resource the written-out decoders take as they are, in one call (every allocation
    is decoded by them: a call per field cost a replay 6-13 % per line): a time that is a finite float
    or an int, and a resource as the journal writes it (a dict of
    names to non-negative integers)."""
    return (((type(t) is float and math.isfinite(t)) or type(t) is int)
            and type(res) is dict
            and all(type(k) is str and type(v) is int and v >= 0 for k, v in res.items()))


def _names(values: Any) -> bool:
    """A list of strings (the keys a decision names, the places an ask passed)."""
    return type(values) is list and all(type(v) is str for v in values)


@dataclass(slots=True, kw_only=True)
class ConfigApplied(Event):
    """Config ``seq`` (a sequence number of the scheduler stream) took effect in the partition at ``t``,
    the time of the releases the new config caused (quota-tree consumers left without a node).

    Until issue 29 ``t`` was written only when the config released something; older markers lack it.
    """

    TYPE: ClassVar[str] = "config"
    FIELDS: ClassVar[dict[str, _Conv]] = {"seq": _int, "t": _opt(_float)}
    OMIT: ClassVar[frozenset[str]] = frozenset({"t"})
    seq: int
    t: float | None = None


@dataclass(slots=True, kw_only=True)
class NodeAdded(Event):
    """A node registered with its capacity (the root queue's max grows while it is schedulable).

    ``schedulable`` is written only when false (a cordoned node registered with the pods it runs).
    ``t``: when (older journals lack it).
    """

    TYPE: ClassVar[str] = "node_added"
    FIELDS: ClassVar[dict[str, _Conv]] = {"node": _str, "capacity": _res, "schedulable": _opt(_bool),
                                          "t": _opt(_float), "labels": _opt(_tags)}
    OMIT: ClassVar[frozenset[str]] = frozenset({"schedulable", "t", "labels"})
    node: str
    capacity: Resource
    schedulable: bool | None = None
    t: float | None = None
    #: the node's labels, written only when given (they select its resource flavors, docs/flavors.md)
    labels: dict[str, str] | None = None


@dataclass(slots=True, kw_only=True)
class NodeUpdated(Event):
    """A registered node's capacity or schedulability changed (cordon, uncordon, new allocatable) at
    ``t`` (older journals lack it)."""

    TYPE: ClassVar[str] = "node_updated"
    FIELDS: ClassVar[dict[str, _Conv]] = {"node": _str, "capacity": _res, "schedulable": _bool,
                                          "t": _opt(_float), "labels": _opt(_tags)}
    OMIT: ClassVar[frozenset[str]] = frozenset({"t", "labels"})
    node: str
    capacity: Resource
    schedulable: bool
    t: float | None = None
    #: the node's labels after the change, written only when they changed (None: unchanged)
    labels: dict[str, str] | None = None


@dataclass(slots=True, kw_only=True)
class NodeRemoved(Event):
    """A node removed at ``t`` (the root queue's max shrinks); the allocations on it are released then.

    Older journals lack ``t``: no allocation named a node then, so nothing is released. (Until issue 29
    ``t`` was written only when the node held allocations.)
    """

    TYPE: ClassVar[str] = "node_removed"
    FIELDS: ClassVar[dict[str, _Conv]] = {"node": _str, "t": _opt(_float)}
    OMIT: ClassVar[frozenset[str]] = frozenset({"t"})
    node: str
    t: float | None = None


@dataclass(slots=True, kw_only=True)
class Bound(Event):
    """Allocation ``key`` runs on ``node`` (known after the allocation, e.g. once a pod is bound) since
    ``t`` (older journals lack it)."""

    TYPE: ClassVar[str] = "bound"
    FIELDS: ClassVar[dict[str, _Conv]] = {"key": _str, "node": _str, "t": _opt(_float)}
    OMIT: ClassVar[frozenset[str]] = frozenset({"t"})
    key: str
    node: str
    t: float | None = None


@dataclass(slots=True, kw_only=True)
class AppAdded(Event):
    """An application placed in ``queue`` (placement already decided: replay does not place again)."""

    TYPE: ClassVar[str] = "app_added"
    FIELDS: ClassVar[dict[str, _Conv]] = {
        "app": _str, "user": _str, "groups": _strs, "queue": _str, "tags": _tags, "t": _float,
        "gang_style": _str, "placeholder_timeout": _opt(_float)}
    app: str
    user: str
    groups: tuple[str, ...]
    queue: str
    tags: dict[str, str] = field(default_factory=dict)
    t: float
    gang_style: str = "soft"
    placeholder_timeout: float | None = None


@dataclass(slots=True, kw_only=True)
class AppRemoved(Event):
    """An application removed with all its allocations and asks."""

    TYPE: ClassVar[str] = "app_removed"
    FIELDS: ClassVar[dict[str, _Conv]] = {"app": _str, "t": _float}
    app: str
    t: float


@dataclass(slots=True, kw_only=True)
class Allocated(Event):
    """An allocation admitted by every policy; ``preempted``: what a policy let go for it.

    ``preempted`` is ``None`` in a snapshot's rebuild list (the preemptions happened before it).
    ``node``: the node it runs on, when the caller named one (written only then). ``tags``: the
    allocation's tags (YuniKorn's ``allocationTags``, e.g. the pod it is), written only when given.
    ``flavors``: the resource flavor chosen for each requested resource counted per flavor
    (docs/flavors.md), written only then; ``resource`` is what was charged, flavored names included.
    ``max_runtime``: its declared runtime in seconds (written only when declared; docs/eta.md).
    """

    TYPE: ClassVar[str] = "allocated"
    FIELDS: ClassVar[dict[str, _Conv]] = {
        "app": _str, "key": _str, "resource": _res, "priority": _int, "preemptible": _bool,
        "placeholder": _bool, "task_group": _opt(_str), "t": _float, "preempted": _opt(_strs),
        "node": _opt(_str), "tags": _opt(_tags), "flavors": _opt(_tags), "max_runtime": _opt(_runtime)}
    OMIT: ClassVar[frozenset[str]] = frozenset({"preempted", "node", "tags", "flavors", "max_runtime"})
    app: str
    key: str
    resource: Resource
    priority: int = 0
    preemptible: bool = True
    placeholder: bool = False
    task_group: str | None = None
    t: float
    preempted: tuple[str, ...] | None = None
    node: str | None = None
    tags: dict[str, str] | None = None
    flavors: dict[str, str] | None = None
    max_runtime: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """:meth:`Event.from_json`, written out for the common well-formed case (every allocation is
        replayed); anything unusual takes the generic decoder, which names what is wrong."""
        try:
            app, key, res, t = data["app"], data["key"], data["resource"], data["t"]
            priority, preemptible, placeholder = data["priority"], data["preemptible"], data["placeholder"]
            task_group, preempted, node = data["task_group"], data.get("preempted"), data.get("node")
            data["type"]        # counted below
        except (KeyError, TypeError):
            return _generic_from_json(cls, data)
        # the type, the eight fields and those two only: tags, flavors and a declared runtime are rare
        # and take the generic decoder, so the written-out path stays the common one
        size = 9 + (preempted is not None) + (node is not None)
        if (len(data) == size
                and (type(app), type(key), type(priority), type(preemptible),
                     type(placeholder)) == _ALLOCATED_TYPES
                and type(task_group) in _STR_OR_NONE and type(node) in _STR_OR_NONE
                and _plain(t, res) and (preempted is None or _names(preempted))):
            return cls(app=app, key=key, resource=Resource.of(dict(res)), priority=priority,
                       preemptible=preemptible, placeholder=placeholder, task_group=task_group,
                       t=float(t), preempted=None if preempted is None else tuple(preempted), node=node)
        return _generic_from_json(cls, data)

    def to_json(self) -> dict[str, Any]:
        """:meth:`Event.to_json`, written out: one is built for every allocation (pinned by a test)."""
        # the journal writes canonical (sorted) JSON: the resource needs no sorting here
        out: dict[str, Any] = {"type": "allocated", "app": self.app, "key": self.key,
                               "resource": self.resource.plain(), "priority": self.priority,
                               "preemptible": self.preemptible, "placeholder": self.placeholder,
                               "task_group": self.task_group, "t": self.t}
        if self.preempted is not None:
            out["preempted"] = list(self.preempted)
        if self.node is not None:
            out["node"] = self.node
        if self.tags is not None:
            out["tags"] = dict(self.tags)
        if self.flavors is not None:
            out["flavors"] = dict(self.flavors)
        if self.max_runtime is not None:
            out["max_runtime"] = self.max_runtime
        return out


@dataclass(slots=True, kw_only=True)
class Released(Event):
    """An allocation released (the last one of an application ends its running count).

    ``app`` names the allocation's application (written since preemption, for the event stream;
    older journals lack it).
    """

    TYPE: ClassVar[str] = "released"
    FIELDS: ClassVar[dict[str, _Conv]] = {"key": _str, "t": _float, "app": _opt(_str)}
    OMIT: ClassVar[frozenset[str]] = frozenset({"app"})
    key: str
    t: float
    app: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """:meth:`Event.from_json`, written out for the common case (every release is replayed)."""
        key, t, app = data.get("key"), data.get("t"), data.get("app")
        if (type(key) is str and ((type(t) is float and math.isfinite(t)) or type(t) is int)
                and (app is None or type(app) is str)):
            return cls(key=key, t=float(t), app=app)
        return _generic_from_json(cls, data)

    def to_json(self) -> dict[str, Any]:
        """:meth:`Event.to_json`, written out: one is built for every release (pinned by a test)."""
        if self.app is None:
            return {"type": "released", "key": self.key, "t": self.t}
        return {"type": "released", "key": self.key, "t": self.t, "app": self.app}


@dataclass(slots=True, kw_only=True)
class Replaced(Event):
    """A gang placeholder replaced by the real allocation ``key`` of ``resource``."""

    TYPE: ClassVar[str] = "replaced"
    FIELDS: ClassVar[dict[str, _Conv]] = {"placeholder": _str, "key": _str, "resource": _res, "t": _float}
    placeholder: str
    key: str
    resource: Resource
    t: float


@dataclass(slots=True, kw_only=True)
class Timeouts(Event):
    """Every timeout due at ``t`` applied (placeholders, lifecycle, elastic reclaim)."""

    TYPE: ClassVar[str] = "timeouts"
    FIELDS: ClassVar[dict[str, _Conv]] = {"t": _float}
    t: float


@dataclass(slots=True, kw_only=True)
class AskAdded(Event):
    """A pending ask queued; ``seq`` is its arrival number in the partition."""

    TYPE: ClassVar[str] = "ask_added"
    FIELDS: ClassVar[dict[str, _Conv]] = {
        "key": _str, "app": _str, "resource": _res, "priority": _int, "preemptible": _bool, "seq": _int,
        "t": _float, "placeholder": _opt(_bool), "task_group": _opt(_str), "places": _opt(_strs),
        "overtaken": _opt(_int), "tags": _opt(_tags), "constraints": _opt(_any_map),
        "max_runtime": _opt(_runtime)}
    OMIT: ClassVar[frozenset[str]] = frozenset({"placeholder", "task_group", "places", "overtaken", "tags",
                                                "constraints", "max_runtime"})
    key: str
    app: str
    resource: Resource
    priority: int = 0
    preemptible: bool = True
    seq: int = 0
    t: float = 0.0
    placeholder: bool | None = None       # written only when true
    task_group: str | None = None
    #: a snapshot's record of a waiting ask's reservation state (never in a live ``ask_added``): the
    #: places that held it back when it arrived and how often it was overtaken there
    places: tuple[str, ...] | None = None
    overtaken: int | None = None
    #: the ask's tags (YuniKorn's ``allocationTags``), written only when given
    tags: dict[str, str] | None = None
    #: where it may run, for choosing its resource flavors (``nodeSelector``, ``affinity``,
    #: ``tolerations``; docs/flavors.md), written only when given
    constraints: dict[str, Any] | None = None
    #: the declared runtime (seconds) its allocation will have, written only when declared
    max_runtime: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """:meth:`Event.from_json`, written out for the common well-formed ask with no optional field
        but its reservation record (a snapshot restore decodes every waiting ask: 500,000 at issue
        38's size); anything else takes the generic decoder, which names what is wrong."""
        try:
            key, app, res, t = data["key"], data["app"], data["resource"], data["t"]
            priority, preemptible, seq = data["priority"], data["preemptible"], data["seq"]
        except (KeyError, TypeError):
            return _generic_from_json(cls, data)
        # a snapshot's record of an ask names its reservation places (and how often it was overtaken
        # there) whenever reservations are on, so those two take the written-out path too
        places, overtaken = data.get("places"), data.get("overtaken")
        size = 8 + (places is not None) + (overtaken is not None)
        if (len(data) == size and "type" in data     # the type, the seven fields and those two only
                and type(overtaken) in _INT_OR_NONE
                and (type(key), type(app), type(priority), type(preemptible), type(seq)) == _ASK_TYPES
                and _plain(t, res) and (places is None or _names(places))):
            return cls(key=key, app=app, resource=Resource.of(dict(res)), priority=priority,
                       preemptible=preemptible, seq=seq, t=float(t),
                       places=None if places is None else tuple(places), overtaken=overtaken)
        return _generic_from_json(cls, data)

    def to_json(self) -> dict[str, Any]:
        """:meth:`Event.to_json`, written out: one is built for every waiting ask a snapshot holds and
        a restore checks (pinned by a test)."""
        out: dict[str, Any] = {"type": "ask_added", "key": self.key, "app": self.app,
                               "resource": self.resource.plain(), "priority": self.priority,
                               "preemptible": self.preemptible, "seq": self.seq, "t": self.t}
        if self.placeholder is not None:
            out["placeholder"] = self.placeholder
        if self.task_group is not None:
            out["task_group"] = self.task_group
        if self.places is not None:
            out["places"] = list(self.places)
        if self.overtaken is not None:
            out["overtaken"] = self.overtaken
        if self.tags is not None:
            out["tags"] = dict(self.tags)
        if self.constraints is not None:
            out["constraints"] = dict(self.constraints)
        if self.max_runtime is not None:
            out["max_runtime"] = self.max_runtime
        return out


@dataclass(slots=True, kw_only=True)
class AskRemoved(Event):
    """A pending ask withdrawn."""

    TYPE: ClassVar[str] = "ask_removed"
    FIELDS: ClassVar[dict[str, _Conv]] = {"key": _str, "t": _float}
    key: str
    t: float = 0.0


def _state_log(v: Any) -> tuple[tuple[float, str], ...]:
    if not isinstance(v, list | tuple):
        raise _fail(f"expected a list of [time, state] pairs, got {v!r}")
    out = []
    for entry in v:
        if not isinstance(entry, list | tuple) or len(entry) != 2:
            raise _fail(f"expected a [time, state] pair, got {entry!r}")
        out.append((_float(entry[0]), _str(entry[1])))
    return tuple(out)


def _reason(v: Any) -> dict[str, str]:
    if not isinstance(v, dict) or set(v) != {"policy", "code", "path", "message"}:
        raise _fail(f"expected a reason {{policy, code, path, message}}, got {v!r}")
    return {k: _str(v[k]) for k in ("policy", "code", "path", "message")}


@dataclass(slots=True, kw_only=True)
class Preempted(Event):
    """Allocations taken away by a decision: preemption for ``preemptor``, or a reclaim (no preemptor).

    The decision as it was made (PR-S3): ``keys`` (with their applications ``apps``, same order) are
    released on replay without deciding again. ``reason`` is violation-shaped
    ``{policy, code, path, message}``: why they went (``elastic.revoked``, ``elastic.preempted``,
    ``queue.guaranteed``, ``queue.quota``).
    """

    TYPE: ClassVar[str] = "preempted"
    FIELDS: ClassVar[dict[str, _Conv]] = {"keys": _strs, "apps": _strs, "reason": _reason,
                                          "preemptor": _opt(_str), "t": _float}
    OMIT: ClassVar[frozenset[str]] = frozenset({"preemptor"})
    keys: tuple[str, ...]
    apps: tuple[str, ...]
    reason: dict[str, str]
    preemptor: str | None = None
    t: float


@dataclass(slots=True, kw_only=True)
class Noted(Event):
    """A change another event made, told to subscribers with its own sequence number.

    An application's state change, or an allocation released by a timeout, a removal or a config.
    Replay applies the event that made the change; a ``noted`` event changes nothing. ``notice`` is
    the subscriber notice without ``partition`` and ``seq``; ``t`` when the change was made (older
    journals lack it).
    """

    TYPE: ClassVar[str] = "noted"
    FIELDS: ClassVar[dict[str, _Conv]] = {"notice": _any_map, "t": _opt(_float)}
    OMIT: ClassVar[frozenset[str]] = frozenset({"t"})
    notice: dict[str, Any]
    t: float | None = None


@dataclass(slots=True, kw_only=True)
class CountIn(Event):
    """Snapshot rebuild: an application enters the running count with no resources."""

    TYPE: ClassVar[str] = "count_in"
    FIELDS: ClassVar[dict[str, _Conv]] = {"app": _str}
    app: str


@dataclass(slots=True, kw_only=True)
class AppRestore(Event):
    """Snapshot rebuild: an application's lifecycle fields as they were."""

    TYPE: ClassVar[str] = "app_restore"
    FIELDS: ClassVar[dict[str, _Conv]] = {
        "app": _str, "state": _str, "state_since": _float, "placeholder_since": _opt(_float),
        "anchor_seq": _int, "added_seq": _int, "allocations": _opt(_strs), "state_log": _opt(_state_log),
        "started": _opt(_float), "max_used": _opt(_res)}
    OMIT: ClassVar[frozenset[str]] = frozenset({"state_log", "started", "max_used"})
    app: str
    state: str
    state_since: float
    placeholder_since: float | None
    anchor_seq: int
    added_seq: int
    allocations: tuple[str, ...] | None = None
    #: the application's state changes ``[[time, state], …]`` (snapshots since the state log)
    state_log: tuple[tuple[float, str], ...] | None = None
    #: when it first entered Starting or Running (kept apart: the log holds the newest changes only)
    started: float | None = None
    #: the most it ever held per resource (``maxUsedResource``): released allocations no longer show it
    max_used: Resource | None = None


@dataclass(slots=True, kw_only=True)
class PolicyMemo(Event):
    """Snapshot rebuild: state of policy ``policy`` that allocations do not determine."""

    TYPE: ClassVar[str] = "policy_memo"
    FIELDS: ClassVar[dict[str, _Conv]] = {"policy": _str, "memo": _any_map}
    policy: str
    memo: dict[str, Any]


#: Every event class by its JSON ``type``.
EVENT_TYPES: dict[str, type[Event]] = {cls.TYPE: cls for cls in (
    ConfigApplied, NodeAdded, NodeUpdated, NodeRemoved, Bound, AppAdded, AppRemoved, Allocated, Released,
    Replaced, Timeouts, AskAdded, AskRemoved, Preempted, Noted, CountIn, AppRestore, PolicyMemo)}


def decode(data: Mapping[str, Any]) -> Event:
    """The typed event of a journalled JSON object; :class:`EventFormatError` when it is not one."""
    if not isinstance(data, Mapping):
        raise EventFormatError(f"an event must be a JSON object, got {type(data).__name__}")
    cls = EVENT_TYPES.get(data.get("type"))  # type: ignore[arg-type]
    if cls is None:
        raise EventFormatError(f"unknown event type {data.get('type')!r}")
    return cls.from_json(data)
