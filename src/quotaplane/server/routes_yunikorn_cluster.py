"""YuniKorn's cluster-wide routes (``pkg/webservice/routes.go``): clusters, partitions, placement
rules, the application and container history, node utilisation buckets, the events (batch and
stream) and ``/ws/v1/metrics``. Shapes: :mod:`quotaplane.server.yunikorn_dao`; what is not modelled
is YuniKorn's empty value (``docs/rest.md`` "YuniKorn compatibility").
"""

from __future__ import annotations

import json as _json
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from quotaplane.partition import Partition
from quotaplane.placement.manager import Rule
from quotaplane.server.common import errors, json
from quotaplane.server.errors import ApiError
from quotaplane.server.models import ClusterOut, EventBatchOut, PartitionOut
from quotaplane.server.streams import bound_send_buffer
from quotaplane.server.yunikorn_dao import nanos, node_utilisation_dao, partition_dao, prune

__all__ = ["CLUSTER_NAME", "MAX_REST_RESPONSE", "router"]

#: YuniKorn's ``clusterName`` is always ``"kubernetes"`` (``getClusterJSON``)
CLUSTER_NAME = "kubernetes"
#: YuniKorn's ``DefaultRESTResponseSize``: the most records one events batch returns
MAX_REST_RESPONSE = 10_000
#: YuniKorn's default node sorting policy and weights (``NewNodeSortingPolicy`` with no config)
_DEFAULT_SORT = "fair"
_DEFAULT_WEIGHTS = {"memory": 1.0, "vcore": 1.0}


def _rule_parameters(rule: Rule) -> dict[str, str]:
    """A rule's ``parameters`` as its type's ``ruleDAO()`` lists them."""
    create = "true" if rule.create else "false"
    if rule.name == "fixed":
        return {"queue": rule.value, "create": create,
                "qualified": "true" if rule.value.startswith("root") else "false"}
    if rule.name == "tag":
        return {"tagName": rule.value, "create": create}
    if rule.name in ("provided", "user", "group"):
        return {"create": create}
    return {}


def _rule_dao(rule: Rule) -> dict[str, Any]:
    """``RuleDAO`` (``ruleDAO()`` of each rule type)."""
    out: dict[str, Any] = {"name": rule.name, "parameters": _rule_parameters(rule)}
    f = rule.filter
    if not f.empty:
        out["filter"] = prune({"type": "allow" if f.allow else "deny", "userList": sorted(f.users),
                               "groupList": sorted(f.groups),
                               "userExp": f.user_exp.pattern if f.user_exp is not None else "",
                               "groupExp": f.group_exp.pattern if f.group_exp is not None else ""},
                              "userList", "groupList", "userExp", "groupExp")
    if rule.parent is not None:
        out["parentRule"] = _rule_dao(rule.parent)
    return prune(out, "parameters")


#: the internal rule YuniKorn appends to every rule list (``buildRules``)
_RECOVERY = {"name": "recovery", "parameters": {"queue": "root.@recovery@"}}


def _partition_info(p: Partition, cluster_id: str) -> dict[str, Any]:
    with p.lock:
        states: dict[str, int] = {}
        for app in p.applications():
            states[app.state] = states.get(app.state, 0) + 1
        cfg = p.config
        sort = cfg.node_sort_policy
        return partition_dao(
            p.name, cluster_id, p.total_capacity(), p.used_capacity(), nodes=len(p.nodes()), states=states,
            containers=len(p.allocations()), node_sort_type=(sort.type or _DEFAULT_SORT).lower(),
            node_sort_weights=dict(sort.resource_weights) or _DEFAULT_WEIGHTS,
            preemption=cfg.preemption.enabled, quota_preemption=cfg.preemption.quota_preemption_enabled)


def router(service: Any) -> APIRouter:
    """The cluster-wide routes bound to ``service``."""
    r = APIRouter(tags=["yunikorn"])
    read = service.tokens.dependencies("read")

    @r.get("/ws/v1/clusters", response_model=None, dependencies=read,
           responses={200: {"model": list[ClusterOut]}, **errors(auth=True)})
    async def clusters() -> JSONResponse:
        """One ``ClusterDAOInfo`` per partition: start time, partition, cluster name. No resource
        manager registers with quotaplane, so ``rmBuildInformation`` is empty (left out)."""
        return json([{"startTime": nanos(service.started), "partition": p.name, "clusterName": CLUSTER_NAME}
                     for p in service.scheduler.partitions()])

    @r.get("/ws/v1/partitions", response_model=None, dependencies=read,
           responses={200: {"model": list[PartitionOut]}, **errors(auth=True)})
    async def partitions() -> JSONResponse:
        """Every partition (``PartitionInfo``): capacity, used and utilisation, node sorting policy,
        preemption switches, node and container counts, applications by state and their total."""
        return json([_partition_info(p, service.cluster_id) for p in service.scheduler.partitions()])

    @r.get("/ws/v1/partition/{partition}/placementrules", response_model=None, dependencies=read,
           responses={200: {"model": list[dict[str, Any]]}, **errors(404, auth=True)})
    async def placement_rules(partition: str) -> JSONResponse:
        """The partition's rules in order (``RuleDAO``), then YuniKorn's internal recovery rule."""
        p = service.partition(partition)
        with p.lock:
            rules = [_rule_dao(rule) for rule in p.placement.rules]
        return json([*rules, dict(_RECOVERY)])

    @r.get("/ws/v1/history/apps", response_model=None, dependencies=read,
           responses={200: {"model": list[dict[str, Any]]}, **errors(auth=True)})
    async def app_history() -> JSONResponse:
        """Applications running, sampled each minute, the last 1,440 samples (``totalApplications`` is
        a string, as YuniKorn sends it)."""
        return json([{"timestamp": nanos(rec.timestamp), "totalApplications": str(rec.total_applications)}
                     for rec in service.history.records()])

    @r.get("/ws/v1/history/containers", response_model=None, dependencies=read,
           responses={200: {"model": list[dict[str, Any]]}, **errors(auth=True)})
    async def container_history() -> JSONResponse:
        """Containers (allocations) held, sampled each minute, the last 1,440 samples."""
        return json([{"timestamp": nanos(rec.timestamp), "totalContainers": str(rec.total_containers)}
                     for rec in service.history.records()])

    @r.get("/ws/v1/scheduler/node-utilizations", response_model=None, dependencies=read,
           responses={200: {"model": list[dict[str, Any]]}, **errors(auth=True)})
    async def node_utilizations() -> JSONResponse:
        """Per partition and resource, the nodes in ten 10 % buckets of use."""
        out = []
        for p in service.scheduler.partitions():
            with p.lock:
                nodes = [(n, c, _allocated(p, n)) for n, c in p.nodes().items()]
            out.append(node_utilisation_dao(p.name, service.cluster_id, nodes))
        return json(out)

    @r.get("/ws/v1/events/batch", response_model=None, dependencies=read,
           responses={200: {"model": EventBatchOut}, **errors(400, auth=True)})
    async def events_batch(request: Request) -> JSONResponse:
        """Event records from id ``start`` (default 0), at most ``count`` (default and cap 10,000)."""
        service.watch_partitions()
        count = MAX_REST_RESPONSE
        raw = request.query_params.get("count")
        if raw is not None and raw != "":
            count = min(_uint(raw), MAX_REST_RESPONSE)
            if count == 0:
                raise ApiError(400, '0 is not a valid value for "count"')
        raw = request.query_params.get("start")
        start = _uint(raw) if raw else 0
        records, lowest, highest = service.events.batch(start, count)
        return json({"InstanceUUID": service.events.instance_uuid, "LowestID": lowest, "HighestID": highest,
                     "EventRecords": records})

    @r.get("/ws/v1/events/stream", response_model=None, dependencies=read,
           responses={200: {"content": {"application/json": {"schema": {"type": "string"}}},
                            "description": "JSON lines: {\"InstanceUUID\"}, the last `count` records, "
                                           "then one record each as it happens"},
                      **errors(400, 503, auth=True)})
    async def events_stream(request: Request) -> Response:
        """The instance id, then the last ``count`` event records kept (default 0), then every new
        record as it happens (JSON lines), as YuniKorn's ``getStream``. At most ``max-streams`` open
        streams (100), ``max-streams-per-client`` (15) from one client: 503 "Too many streaming
        connections". A reader that falls ``stream-buffer`` records behind gets YuniKorn's "Event
        stream was closed by the producer" line, with ``resumeID``: the id to read on from with
        ``/ws/v1/events/batch?start=ID``."""
        service.watch_partitions()
        raw = request.query_params.get("count")
        replay = _uint(raw) if raw else 0
        client = request.client.host if request.client else ""
        slots = service.stream_slots
        refused = slots.acquire(client)
        if refused is not None:
            which = (f"max-streams {slots.total}" if refused == "total"
                     else f"max-streams-per-client {slots.per_client}")
            raise ApiError(503, "Too many streaming connections",
                           f"Too many streaming connections: {which} reached; retry later")
        bound_send_buffer(request.scope)
        try:
            stream = service.events.open_stream(min(replay, service.events.capacity),
                                                service.limits.stream_buffer)
        except BaseException:
            slots.release(client)
            raise

        async def lines() -> AsyncIterator[bytes]:
            try:
                yield _line({"InstanceUUID": service.events.instance_uuid})
                while True:
                    records = await stream.take(_CHUNK, 1.0)
                    if records is None:
                        resume = stream.next_id
                        yield _line({"status_code": 200, "message": _CLOSED,
                                     "description": f"{_CLOSED}: the reader fell more than "
                                                    f"{service.limits.stream_buffer} records behind "
                                                    "(stream-buffer); read on from "
                                                    f"/ws/v1/events/batch?start={resume}",
                                     "resumeID": resume})
                        return
                    if records:
                        yield b"".join(_line(rec) for rec in records)
                    elif await request.is_disconnected():
                        return
            finally:
                service.events.close_stream(stream)
                slots.release(client)

        return StreamingResponse(lines(), media_type="application/json; charset=UTF-8")

    @r.get("/ws/v1/stack", response_model=None, dependencies=read, include_in_schema=False)
    async def stack_moved(request: Request) -> Response:
        """Moved, as in YuniKorn: 301 to ``/debug/stack``."""
        return _moved(request)

    @r.get("/ws/v1/fullstatedump", response_model=None, dependencies=read, include_in_schema=False)
    async def dump_moved(request: Request) -> Response:
        """Moved, as in YuniKorn: 301 to ``/debug/fullstatedump``."""
        return _moved(request)

    @r.get("/debug/stack", response_model=None, dependencies=read,
           responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                            "description": "every thread's stack"}, **errors(auth=True)})
    async def stack() -> Response:
        """Every thread's current stack (YuniKorn dumps its goroutines here; a Python process has
        threads)."""
        return Response(_thread_stacks(), media_type="text/plain; charset=utf-8")

    @r.get("/debug/fullstatedump", response_model=None, dependencies=read,
           responses={200: {"model": dict[str, Any]}, **errors(auth=True)})
    async def full_state_dump() -> JSONResponse:
        """The whole state (YuniKorn's full state dump; here ``Scheduler.dump_state()``, quotaplane's own
        format: every partition's nodes, applications, allocations, queues, users and groups, quotas,
        waiting asks)."""
        return json({"timestamp": nanos(time.time()), **service.scheduler.dump_state()})

    return r


def _moved(request: Request) -> Response:
    """``redirectDebug``: 301 to the same path under ``/debug`` (query kept), with its HTML body."""
    target = request.url.path.replace("/ws/v1", "/debug", 1)
    if request.url.query:
        target += "?" + request.url.query
    body = f'<a href="{target}">Moved Permanently</a>.\n\n'
    return Response(body, 301, headers={"Location": target}, media_type="text/html; charset=utf-8")


def _thread_stacks() -> str:
    frames = sys._current_frames()
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident in sorted(frames):
        out.append(f"thread {names.get(ident, '?')} ({ident}):\n")
        out.extend(traceback.format_stack(frames[ident]))
        out.append("\n")
    return "".join(out)


#: YuniKorn's line when the event system closes a stream (``getStream``)
_CLOSED = "Event stream was closed by the producer"
#: the most records one write of a stream carries (what waits in the socket's buffer stays bounded)
_CHUNK = 500


def _line(obj: Any) -> bytes:
    return (_json.dumps(obj, separators=(",", ":")) + "\n").encode()


def _uint(raw: str) -> int:
    """``strconv.ParseUint(raw, 10, 64)``: 400 with Go's message otherwise."""
    if not raw.isdigit() or int(raw) >= 2**64:
        raise ApiError(400, f'strconv.ParseUint: parsing "{raw}": invalid syntax')
    return int(raw)


def _allocated(p: Partition, node: str) -> dict[str, int]:
    total: dict[str, int] = {}
    for a in p.node_allocations(node):
        for k, v in a.resource.items():
            total[k] = total.get(k, 0) + v
    return total
