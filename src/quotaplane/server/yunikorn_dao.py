"""YuniKorn's ``dao`` shapes built from quotaplane's state (yunikorn-core ``pkg/webservice/dao``).

Field names, types and omit-when-empty behaviour follow the Go structs' JSON tags: a field tagged
``omitempty`` is left out when it is empty (``""``, ``0``, ``false``, an empty map or list), the others
are always present. Times are Unix nanoseconds (``int64``), priorities strings, resources maps of
``int64``. What quotaplane does not model is sent as YuniKorn's empty value, i.e. left out where the
tag says ``omitempty`` (``docs/rest.md`` lists each one).
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any

from quotaplane.application import Allocation, Application
from quotaplane.policies.protocol import Violation
from quotaplane.resources import Resource
from quotaplane.scheduling.asks import Ask

__all__ = ["allocation_dao", "application_dao", "ask_dao", "nanos", "node_dao", "node_utilisation_dao",
           "partition_dao", "percent_used", "prune"]

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


def allocation_dao(alloc: Allocation, held: Container[str] = ()) -> dict[str, Any]:
    """``AllocationDAOInfo``. quotaplane keeps no request time of an allocation apart from its
    admission, so ``requestTime`` and ``allocationDelay`` are YuniKorn's empty value (omitted).
    ``preempted``: the allocation is a victim being removed (``held``: a held preemption)."""
    out: dict[str, Any] = {
        "allocationKey": alloc.allocation_key,
        "allocationTime": nanos(alloc.time),
        "resource": dict(sorted(alloc.resource.items())),
        "priority": str(alloc.priority),
        "nodeId": alloc.node or "",
        "applicationId": alloc.application_id,
        "placeholder": alloc.placeholder,
        "taskGroupName": alloc.task_group or "",
        "allocationTags": dict(sorted((alloc.tags or {}).items())),
        "preempted": alloc.allocation_key in held,
    }
    return prune(out, "allocationTime", "resource", "priority", "nodeId", "applicationId", "placeholder",
                 "taskGroupName", "allocationTags", "preempted")


def _sum(allocs: Iterable[Allocation]) -> dict[str, int]:
    total: dict[str, int] = {}
    for a in allocs:
        for k, v in a.resource.items():
            total[k] = total.get(k, 0) + v
    return total


def node_dao(node_id: str, capacity: Resource, schedulable: bool,
             allocations: list[Allocation], held: Container[str] = (),
             labels: Mapping[str, str] | None = None, flavors: Sequence[str] = ()) -> dict[str, Any]:
    """``NodeDAOInfo`` of a registered node: capacity, the allocations on it and what they leave.

    ``available`` is capacity minus allocated with zero amounts pruned (``refreshAvailableResource``;
    it can be negative when bound pods exceed a shrunk node); ``utilized`` the percentages of
    ``GetUtilizedResource``. Host and rack names, attributes, occupied (foreign) resources and
    reservations are not modelled: omitted, ``isReserved`` false. A node registered with labels shows
    them as its ``attributes`` (YuniKorn keeps a node's labels there) and the resource flavors they
    select as ``flavors`` (docs/flavors.md).
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
        "allocations": [allocation_dao(a, held) for a in allocations],
        "schedulable": schedulable,
        "isReserved": False,
    }
    if labels:
        out["attributes"] = dict(sorted(labels.items()))
    if flavors:
        out["flavors"] = list(flavors)
    return prune(out, "capacity", "allocated", "available", "utilized", "allocations")


def ask_dao(ask: Ask, reasons: Sequence[Violation] | None) -> dict[str, Any]:
    """``AllocationAskDAOInfo`` of a waiting ask. Its ``allocationLog`` holds why it waits now, one entry
    per reason (YuniKorn logs why an ask could not be placed; quotaplane's reasons are that, per quota)
    without ``lastOccurrence``/``count``, which quotaplane does not keep. ``schedulingAttempted``: the
    ask was looked at by a cycle."""
    log = [{"message": f"{v.code} at {v.path}: {v.message}"} for v in (reasons or ())]
    out: dict[str, Any] = {
        "allocationKey": ask.allocation_key,
        "allocationTags": dict(sorted((ask.tags or {}).items())),
        "requestTime": nanos(ask.created),
        "resource": dict(sorted(ask.resource.items())),
        "priority": str(ask.priority),
        "applicationId": ask.application_id,
        "placeholder": ask.placeholder,
        "taskGroupName": ask.task_group or "",
        "allocationLog": log,
        "schedulingAttempted": ask.reasons is not None,
    }
    return prune(out, "allocationTags", "requestTime", "resource", "priority", "applicationId", "placeholder",
                 "taskGroupName", "allocationLog", "schedulingAttempted")


def _pending(asks: Sequence[tuple[Ask, Any]]) -> dict[str, int]:
    """The sum of the waiting asks' resources."""
    pending: dict[str, int] = {}
    for ask, _ in asks:
        for k, v in ask.resource.items():
            pending[k] = pending.get(k, 0) + v
    return pending


def application_dao(app: Application, partition: str, asks: Sequence[tuple[Ask, Sequence[Violation] | None]],
                    held: Container[str] = ()) -> dict[str, Any]:
    """``ApplicationDAOInfo``: usage, demand, the allocations and the waiting asks (``requests``), the
    state with its ``stateLog``. ``usedResource`` is what its real allocations hold, as YuniKorn's
    ``allocatedResource`` (gang placeholders are counted apart there; they are listed in
    ``allocations``). ``maxUsedResource`` is the component-wise maximum the application's allocations
    ever reached (its real ones and its placeholders each, as YuniKorn's
    ``maxAllocatedResource``), left out until it has held something. Not modelled, so YuniKorn's
    empty value: ``rejectedMessage`` (rejected applications are not kept), ``placeholderData``,
    ``hasReserved``, ``reservations``; ``resourceHistory`` is ``{}``. ``startTime`` is milliseconds, as
    in YuniKorn; before the application started it is the zero time's milliseconds (YuniKorn sends the
    same)."""
    pending = _pending(asks)
    started = app.started_at()
    finished = app.finished_at()
    out: dict[str, Any] = {
        "applicationID": app.application_id,
        # YuniKorn's allocatedResource: the real allocations only (placeholders have their own total)
        "usedResource": {k: v for k, v in sorted(app.used.items()) if v},
        "maxUsedResource": dict(sorted(app.max_used.items())),
        "pendingResource": dict(sorted(pending.items())),
        "partition": partition,
        "queueName": app.queue_path,
        "submissionTime": nanos(app.submit_time),
        "requests": [ask_dao(a, r) for a, r in asks],
        "allocations": [allocation_dao(a, held) for a in app.allocations.values()],
        "applicationState": app.state,
        "user": app.user.user,
        "groups": list(app.user.groups),
        "stateLog": [{"time": nanos(t), "applicationState": s} for t, s in app.state_log],
        "maxRequestPriority": max((a.priority for a, _ in asks), default=0),
        "startTime": round(started * 1000) if started is not None else _GO_ZERO_TIME_MILLIS,
        "resourceHistory": {},
    }
    if finished is not None:
        out["finishedTime"] = nanos(finished)
    return prune(out, "usedResource", "maxUsedResource", "pendingResource", "submissionTime", "requests",
                 "allocations", "applicationState", "user", "groups", "stateLog", "maxRequestPriority",
                 "startTime")


def partition_dao(name: str, cluster_id: str, capacity: Resource, used: Resource, *, nodes: int,
                  states: Mapping[str, int], containers: int, node_sort_type: str,
                  node_sort_weights: Mapping[str, float], preemption: bool, quota_preemption: bool
                  ) -> dict[str, Any]:
    """``PartitionInfo``: capacity and its use, the node sorting policy, preemption switches, node and
    container counts, applications by state with their ``total``."""
    cap, use = dict(sorted(capacity.items())), dict(sorted(used.items()))
    apps = dict(sorted(states.items()))
    apps["total"] = sum(states.values())
    out: dict[str, Any] = {
        "clusterId": cluster_id,
        "name": name,
        "capacity": prune({"capacity": cap, "usedCapacity": use,
                           "utilization": dict(sorted(percent_used(cap, use).items()))},
                          "capacity", "usedCapacity", "utilization"),
        "nodeSortingPolicy": prune({"type": node_sort_type, "resourceWeights": dict(node_sort_weights)},
                                   "type", "resourceWeights"),
        "preemptionEnabled": preemption,
        "quotaPreemptionEnabled": quota_preemption,
        "totalNodes": nodes,
        "applications": apps,
        "totalContainers": containers,
        "state": "Active",
    }
    return prune(out, "totalNodes", "applications", "totalContainers")


#: ``time.Time{}.UnixMilli()``: what YuniKorn sends as ``startTime`` of an application not started
_GO_ZERO_TIME_MILLIS = -62135596800000


def node_utilisation_dao(name: str, cluster_id: str,
                         nodes: Sequence[tuple[str, Resource, Mapping[str, int]]]) -> dict[str, Any]:
    """``PartitionNodesUtilDAOInfo`` (``getPartitionNodesUtilJSON``): per resource a node advertises,
    ten buckets of 10 % by the node's used percentage (bucket ``max(ceil(p / 10) - 1, 0)``) with the
    count and names of the nodes in each. Resource types in name order (YuniKorn's map order varies)."""
    counts: dict[str, list[list[str]]] = {}
    for node_id, capacity, allocated in nodes:
        used = percent_used(capacity, allocated)
        for resource in capacity:
            idx = 0
            if resource in used:
                idx = max(math.ceil(used[resource] / 10) - 1, 0)
                idx = min(idx, 9)
            counts.setdefault(resource, [[] for _ in range(10)])[idx].append(node_id)
    utils = []
    for resource in sorted(counts):
        buckets = [prune({"bucketName": f"{k * 10}-{(k + 1) * 10}%", "numOfNodes": len(names),
                          "nodeNames": names}, "numOfNodes", "nodeNames")
                   for k, names in enumerate(counts[resource])]
        utils.append({"type": resource, "utilization": buckets})
    return prune({"clusterId": cluster_id, "partition": name, "utilizations": utils}, "utilizations")
