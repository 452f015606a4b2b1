"""Go-format values of queue properties and the REST queue view (YuniKorn's ``PartitionQueueDAOInfo``).

Durations are Go ``time.Duration`` strings (``"30s"``, ``"1h0m0s"``); integers parse like Go's
``strconv`` (a bad value counts as 0, N-1); :func:`queue_dao` builds one queue's DAO (reference §2.3).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from quotaplane.config.bodies import load_json
from quotaplane.config.model import ChildTemplateConfig
from quotaplane.resources import Resource, strictly_greater_than_zero

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.queues.queue import Queue

__all__ = [
    "PROP_PREEMPTION_POLICY",
    "PROP_PRIORITY_OFFSET",
    "PROP_PRIORITY_POLICY",
    "PROP_QUOTA_PREEMPTION_DELAY",
    "go_duration",
    "parse_duration",
    "parse_int32",
    "parse_si_resource",
    "parse_uint",
    "parsed_once",
    "positive_or_none",
    "queue_dao",
    "tag_value",
]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
UINT64_MAX = 2**64 - 1

PROP_SORT_POLICY = "application.sort.policy"
PROP_SORT_PRIORITY = "application.sort.priority"
PROP_PREEMPTION_POLICY = "preemption.policy"
PROP_PREEMPTION_DELAY = "preemption.delay"
PROP_PRIORITY_POLICY = "priority.policy"
PROP_PRIORITY_OFFSET = "priority.offset"
PROP_QUOTA_PREEMPTION_DELAY = "quota.preemption.delay"


_T = TypeVar("_T")


def parsed_once(props: Mapping[str, str], cache: dict[int, tuple[Mapping[str, str], _T]],
                parse: Callable[[Mapping[str, str]], _T]) -> _T:
    """``parse(props)``, remembered in ``cache`` for this properties dict. A queue's properties are
    replaced, never changed in place, by a config change, so the dict's identity is its version; the
    cache is emptied when it grows past 4,096 versions."""
    cached = cache.get(id(props))
    if cached is not None and cached[0] is props:
        return cached[1]
    if len(cache) > 4096:
        cache.clear()
    found = parse(props)
    cache[id(props)] = (props, found)
    return found


def parse_uint(text: str | None) -> int:
    """Go ``strconv.ParseUint``: a non-negative decimal within uint64, else 0."""
    # N-1: a maxApps tag that is not an unsigned integer counts as 0 (Go ParseUint: no spaces, no sign).
    if text is None:
        return 0
    if not text.isdigit() or not text.isascii():
        return 0
    value = int(text)
    return value if value <= UINT64_MAX else 0


def parse_int32(text: str | None) -> int:
    """A decimal within int32 (surrounding spaces allowed), else 0."""
    if text is None:
        return 0
    try:
        value = int(text.strip())
    except ValueError:
        return 0
    return value if INT32_MIN <= value <= INT32_MAX else 0


def abs_used_capacity(max_res: Resource | None, used: Resource) -> dict[str, int]:
    """YuniKorn's ``absUsedCapacity``: per name of max, the used percentage (§2.3)."""
    # §2.3 absUsedCapacity: per name of max: used <= 0 -> 0; max <= 0 -> 100; else int(used/max*100),
    # capped at MaxInt32 (Go float arithmetic).
    if not max_res:
        return {}
    out: dict[str, int] = {}
    for name in sorted(max_res):
        cap = max_res[name]
        u = used.get(name, 0)
        if u <= 0:
            out[name] = 0
        elif cap <= 0:
            out[name] = 100
        else:
            out[name] = min(int(float(u) / float(cap) * 100), INT32_MAX)
    return out


_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str | None, default: float) -> float:
    """A Go duration string (``"30s"``, ``"1h30m"``) in seconds; ``default`` when unset or invalid."""
    if text is None:
        return default
    s = text.strip()
    if s in ("0", ""):
        return 0.0 if s == "0" else default
    pos = 0
    total = 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            return default
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or total < 0:
        return default
    return total


def go_duration(seconds: float) -> str:
    """Format like Go's ``time.Duration.String()`` (``"30s"``, ``"1h0m0s"``, ``"500ms"``)."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    if nanos < 1_000_000_000:
        if nanos < 1_000:
            return f"{nanos}ns"
        if nanos < 1_000_000:
            return f"{_trim(nanos / 1e3)}µs"
        return f"{_trim(nanos / 1e6)}ms"
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    secs = _trim(rest / 1e9)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def _trim(value: float) -> str:
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"


def _template_info(template: ChildTemplateConfig) -> dict[str, Any]:
    tinfo: dict[str, Any] = {}
    if template.max_applications:
        tinfo["maxApplications"] = template.max_applications
    tmax = positive_or_none(template.max)
    if tmax:
        tinfo["maxResource"] = tmax.to_dict()
    tguar = positive_or_none(template.guaranteed)
    if tguar:
        tinfo["guaranteedResource"] = tguar.to_dict()
    if template.properties:
        tinfo["properties"] = {k: template.properties[k] for k in sorted(template.properties)}
    return tinfo


def positive_or_none(new: Resource | None) -> Resource | None:
    """M-1: a strictly positive resource is set as given (zero types kept); anything else clears."""
    if new is not None and strictly_greater_than_zero(new):
        return new
    return None


def _policy_fields(q: Queue, out: dict[str, Any]) -> None:
    """Sorting, priority and preemption fields, from the queue's properties."""
    props = q.properties
    if q.is_leaf:
        policy = props.get(PROP_SORT_POLICY, "fifo").lower()
        out["sortingPolicy"] = policy if policy in ("fifo", "fair", "stateaware") else "fifo"
    else:
        out["sortingPolicy"] = "fair"
    out["prioritySorting"] = props.get(PROP_SORT_PRIORITY, "enabled").lower() != "disabled"
    preemption_policy = props.get(PROP_PREEMPTION_POLICY, "default").lower()
    out["preemptionEnabled"] = preemption_policy != "disabled"
    out["isPreemptionFence"] = preemption_policy == "fence"
    out["preemptionDelay"] = go_duration(parse_duration(props.get(PROP_PREEMPTION_DELAY), 30.0))
    quota_delay = parse_duration(props.get(PROP_QUOTA_PREEMPTION_DELAY), 0.0)
    if quota_delay > 0:
        out["quotaPreemptionDelay"] = go_duration(quota_delay)
    out["isPriorityFence"] = props.get(PROP_PRIORITY_POLICY, "default").lower() == "fence"
    offset = parse_int32(props.get(PROP_PRIORITY_OFFSET))
    if offset:
        out["priorityOffset"] = offset


def _wire(r: Resource | None) -> dict[str, int] | None:
    """A resource's wire form; None when absent or empty (omitted, as Go's omitempty does)."""
    return r.to_dict() if r else None


def queue_dao(q: Queue, headroom: Resource | None, subtree_of: Any, partition: str) -> dict[str, Any]:
    """The ``PartitionQueueDAOInfo`` of ``q``: keys in the Go struct order, omitempty rules applied.

    ``headroom`` is the queue's headroom; ``subtree_of(child)`` gives a child's DAO, or None to leave
    ``children`` out; ``partition`` only on the top object.
    """
    out: dict[str, Any] = {"queuename": q.path, "status": q.status, "partition": partition}
    _put(out, "pendingResource", q.pending.to_dict() if q._pending else None)
    _put(out, "maxResource", _wire(q.max))
    _put(out, "guaranteedResource", _wire(q.guaranteed))
    _put(out, "allocatedResource", _wire(q.allocated))
    _put(out, "headroom", _wire(headroom))
    out["isLeaf"] = q.is_leaf
    out["isManaged"] = q.managed
    _put(out, "properties", dict(q.properties))
    _put(out, "parent", q.parent.path if q.parent is not None else None)
    # Only parents carry a template (YuniKorn sets it on parent queues, inherited downwards).
    template = _template_of(q)
    if template is not None:             # present even when empty, as YuniKorn sends it
        out["template"] = template
    children = q.sorted_children()
    _put(out, "children", [subtree_of(c) for c in children] if subtree_of is not None else None)
    _put(out, "childNames", [c.path for c in children])
    _put(out, "absUsedCapacity", abs_used_capacity(q.max, q.allocated))
    _put(out, "maxRunningApps", q.max_applications)
    _put(out, "runningApps", len(q.running_apps))
    out["currentPriority"] = INT32_MIN  # nothing is pending in quotaplane (no asks are queued)
    _policy_fields(q, out)
    return out


def _template_of(q: Queue) -> dict[str, Any] | None:
    template = None if q.is_leaf else q.effective_template()
    return None if template is None else _template_info(template)


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    """Go's ``omitempty``: set ``key`` only when ``value`` is not empty (None, 0, {} or [])."""
    if value:
        out[key] = value


def tag_value(tags: Mapping[str, str], key: str) -> str | None:
    """The tag ``key`` (case-insensitive, P-1), or None."""
    value = tags.get(key)
    if value is None:
        for k, v in tags.items():  # tag keys are case-insensitive in YuniKorn (P-1)
            if k.lower() == key:
                return v
    return value


def parse_si_resource(text: str | None) -> Resource | None:
    """Parse the JSON of a YuniKorn SI ``Resource`` (``{"resources":{"vcore":{"value":5000}}}``).

    Returns None for a missing or malformed value (N-1: a tag that fails to parse is ignored). A
    quantity without ``value`` is 0 (protobuf omits zero values).
    """
    if not text:
        return None
    try:
        data = load_json(text, "a resource tag")
    except (ValueError, TypeError):
        return None
    if not isinstance(data, dict):
        return None
    resources = data.get("resources")
    if not isinstance(resources, dict):
        return None
    values: dict[str, int] = {}
    for name, quantity in resources.items():
        value = _si_quantity(name, quantity)
        if value is None:
            return None
        values[name] = value
    return Resource.of(values)


def _si_quantity(name: object, quantity: object) -> int | None:
    """One SI quantity's ``value`` (a missing value is 0; protobuf JSON renders int64 as a string)."""
    if not isinstance(name, str) or not name or not isinstance(quantity, dict):
        return None
    value = quantity.get("value", 0)
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63:
        return None
    return value
