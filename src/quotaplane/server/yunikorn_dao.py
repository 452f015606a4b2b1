"""YuniKorn's ``dao`` shapes built from quotaplane's state (yunikorn-core ``pkg/webservice/dao``).

Field names, types and omit-when-empty behaviour follow the Go structs' JSON tags: a field tagged
``omitempty`` is left out when it is empty (``""``, ``0``, ``false``, an empty map or list), the others
are always present. Times are Unix nanoseconds (``int64``), priorities strings, resources maps of
``int64``. What quotaplane does not model is sent as YuniKorn's empty value, i.e. left out where the
tag says ``omitempty`` (``docs/rest.md`` lists each one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from quotaplane.application import Allocation
from quotaplane.resources import Resource

__all__ = ["allocation_dao", "nanos", "node_dao", "percent_used", "prune"]

_INT32_MAX = 2**31 - 1


def nanos(seconds: float | None) -> int:
    """A clock value in seconds as YuniKorn's ``UnixNano`` (0 when unknown: omitted)."""
    return 0 if seconds is None else round(seconds * 1_000_000_000)


def prune(out: dict[str, Any], *omitempty: str) -> dict[str, Any]:
    """Drop the ``omitempty`` fields whose value is empty, as Go's encoder does."""
    for name in omitempty:
        value = out.get(name)
        if value is None or value == 0 or value is False or value == "" or value == {} or value == []:
            out.pop(name, None)
    return out


def percent_used(capacity: Mapping[str, int], used: Mapping[str, int]) -> dict[str, int]:
    """``resources.CalculateAbsUsedCapacity``: per resource of ``capacity`` also in ``used``, the
    whole percentage used (0 when nothing is used, 100 when the capacity is 0, capped at int32)."""
    out: dict[str, int] = {}
    for name, cap in capacity.items():
        if name not in used:
            continue
        u = used[name]
        if u <= 0:
            out[name] = 0
        elif cap <= 0:
            out[name] = 100
        else:
            out[name] = min(int(u / cap * 100), _INT32_MAX)
    return out


def allocation_dao(alloc: Allocation) -> dict[str, Any]:
    """``AllocationDAOInfo``. quotaplane keeps no request time of an allocation apart from its
    admission, so ``requestTime`` and ``allocationDelay`` are YuniKorn's empty value (omitted)."""
    out: dict[str, Any] = {
        "allocationKey": alloc.allocation_key,
        "allocationTime": nanos(alloc.time),
        "resource": dict(sorted(alloc.resource.items())),
        "priority": str(alloc.priority),
        "nodeId": alloc.node or "",
        "applicationId": alloc.application_id,
        "placeholder": alloc.placeholder,
        "taskGroupName": alloc.task_group or "",
    }
    return prune(out, "allocationTime", "resource", "priority", "nodeId", "applicationId", "placeholder",
                 "taskGroupName")


def _sum(allocs: Iterable[Allocation]) -> dict[str, int]:
    total: dict[str, int] = {}
    for a in allocs:
        for k, v in a.resource.items():
            total[k] = total.get(k, 0) + v
    return total


def node_dao(node_id: str, capacity: Resource, schedulable: bool,
             allocations: list[Allocation]) -> dict[str, Any]:
    """``NodeDAOInfo`` of a registered node: capacity, the allocations on it and what they leave.

    ``available`` is capacity minus allocated with zero amounts pruned (``refreshAvailableResource``;
    it can be negative when bound pods exceed a shrunk node); ``utilized`` the percentages of
    ``GetUtilizedResource``. Host and rack names, attributes, occupied (foreign) resources and
    reservations are not modelled: omitted, ``isReserved`` false.
    """
    cap = dict(sorted(capacity.items()))
    allocated = dict(sorted(_sum(allocations).items()))
    available = {k: v for k, v in ((k, cap.get(k, 0) - allocated.get(k, 0))
                                   for k in sorted(set(cap) | set(allocated))) if v != 0}
    utilized = {k: v for k, v in percent_used(cap, allocated).items() if k in allocated and cap.get(k, 0) > 0}
    out: dict[str, Any] = {
        "nodeID": node_id,
        "capacity": cap,
        "allocated": allocated,
        "available": available,
        "utilized": dict(sorted(utilized.items())),
        "allocations": [allocation_dao(a) for a in allocations],
        "schedulable": schedulable,
        "isReserved": False,
    }
    return prune(out, "capacity", "allocated", "available", "utilized", "allocations")
