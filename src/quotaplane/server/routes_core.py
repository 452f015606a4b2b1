"""quotaplane's own endpoints: config, nodes, applications, allocations (single, batch), what-if.

Every write checks the role of the token, that this instance leads (fail-over), and then calls the
partition, which journals the change before it returns (decision S1) — the answer is only sent after.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse, Response

from quotaplane.admission import AllocationSpec
from quotaplane.config.files import later_problems
from quotaplane.config.identity import NAME_PATTERN, UserGroup
from quotaplane.errors import ConfigError, NotFoundError, RejectedError
from quotaplane.flavors.catalog import FlavorRequest
from quotaplane.resources import Resource
from quotaplane.server.common import errors, json, json_body, parse_body
from quotaplane.server.errors import ApiError
from quotaplane.server.extensions import validate_extensions
from quotaplane.server.models import (
    AllocationBody,
    AllocationNodeBody,
    ApplicationBody,
    ApplicationOut,
    BatchBody,
    BatchOut,
    ConfigAppliedOut,
    DecisionOut,
    NodeBody,
    NodeOut,
    OkOut,
    WhatIfBody,
    WhatIfOut,
)
from quotaplane.server.routes_eta import ETA_QUERY, with_eta
from quotaplane.server.yunikorn_config import config_json
from quotaplane.server.yunikorn_dao import node_dao

__all__ = ["router"]

_YAML_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "the queue configuration YAML (a change: typed YAML or JSON, issue 32 item 7)",
        "content": {
            "application/x-yaml": {"schema": {"type": "string"}},
            "application/yaml": {"schema": {"type": "string"}},
        },
    }
}

_USER_QUERY = Query(min_length=1, description=(
    "the user on whose behalf the call is made: must own the application or pass the queue's adminacl"))
_GROUPS_QUERY = Query(description="the user's groups (repeat the parameter)")


def application_json(app: Any) -> dict[str, Any]:
    """The REST shape of an application."""
    user = app.user
    out: dict[str, Any] = {
        "applicationID": app.application_id,
        "queueName": app.queue_path,
        "state": str(getattr(app.state, "value", app.state)),
        "user": user.user,
        "groups": list(user.groups),
    }
    tags = getattr(app, "tags", None)
    if tags:
        out["tags"] = dict(tags)
    return out


def allocation_json(a: Any) -> dict[str, Any]:
    """The REST shape of an allocation: its own record (:meth:`~quotaplane.application.Allocation.to_dict`,
    as the partition's dump and the event stream have it) — one wire form (issue 29)."""
    out: dict[str, Any] = a.to_dict()
    return out


def _acl_allows(p: Any, queue_path: str, user: UserGroup, kind: str) -> bool:
    queues = p.queues
    fn = getattr(queues, f"check_{kind}_acl", None)
    if fn is None:
        return True
    return bool(fn(queue_path, user))


def check_admin_or_owner(p: Any, application_id: str, user: str | None, groups: list[str] | None) -> None:
    """Decision S2: a user named in a request must own the application or pass the queue's adminacl."""
    if user is None:
        return
    app = p.application(application_id)
    if app is None:
        raise NotFoundError(f"application {application_id!r} not found")
    ug = UserGroup(user, groups or [])
    if app.user.user == user:
        return
    if not _acl_allows(p, app.queue_path, ug, "admin"):
        raise ApiError(403, f"user {user!r} is not the owner of application {application_id!r} and not in "
                            f"the adminacl of queue {app.queue_path!r}", extra={"code": "acl.admin"})


def _constraints(body: AllocationBody) -> FlavorRequest | None:
    """An allocation entry's placement (docs/flavors.md), checked; None when it gives none."""
    if body.nodeSelector is None and body.nodeAffinity is None and body.tolerations is None:
        return None
    args = body.placement()
    return FlavorRequest.parse(args["node_selector"], args["node_affinity"], args["tolerations"]) or None


def allocate_one(service: Any, partition: str, body: AllocationBody) -> tuple[int, dict[str, Any]]:
    """``POST …/allocations``: (201 or 409, the decision's JSON). Raises the usual errors."""
    service.ensure_writable(partition)
    p = service.partition(partition)
    start = time.perf_counter()
    decision = p.allocate(body.applicationID, body.allocationKey, Resource.of(body.resource),
                          priority=body.priority, preemptible=body.preemptible, node=body.nodeID,
                          tags=body.allocationTags, max_runtime=body.maxRuntime, **body.placement())
    service.metrics.admission.observe(time.perf_counter() - start)
    service.metrics.observe_decision(decision)
    out = decision.to_dict()
    out.setdefault("allocationKey", body.allocationKey)
    return (201 if decision.allocated else 409), out


def release_one(service: Any, partition: str, allocation_key: str, user: str | None = None,
                groups: list[str] | None = None) -> dict[str, Any]:
    """``DELETE …/allocation/{key}``: release it (on behalf of ``user`` when given); the answer's JSON.
    Raises the usual errors."""
    service.ensure_writable(partition)
    p = service.partition(partition)
    if user is not None:
        a = p.allocation(allocation_key)
        if a is None:
            raise NotFoundError(f"allocation {allocation_key!r} not found")
        check_admin_or_owner(p, a.application_id, user, groups)
    p.release(allocation_key)
    return {"ok": True, "released": True, "allocationKey": allocation_key}


def router(service: Any) -> APIRouter:
    """The quotaplane routes bound to ``service``."""
    r = APIRouter(tags=["quotaplane"])
    tokens = service.tokens
    read = tokens.dependencies("read")
    submit = tokens.dependencies("submit")
    admin = tokens.dependencies("admin")
    metrics = service.metrics

    # -- config ------------------------------------------------------------------------------------
    @r.get("/ws/v1/config", response_model=None, dependencies=read,
           responses={200: {"content": {"application/x-yaml": {"schema": {
                                "type": "object", "description": "a YuniKorn queue configuration document"}}},
                            "description": "the running queue configuration (YAML)"},
                      **errors(auth=True)})
    async def get_config(request: Request) -> Response:
        """The running configuration as YAML; as YuniKorn's ``ConfigDAOInfo`` JSON when the request
        says ``Accept: application/json`` (exactly, as YuniKorn compares it)."""
        text = service.scheduler.config_text
        if request.headers.get("accept") == "application/json":
            checksum = getattr(service.scheduler.config, "checksum", "") or None
            return json(config_json(text, checksum))
        return Response(text, media_type="application/x-yaml; charset=UTF-8")

    @r.put("/ws/v1/config", response_model=None, dependencies=admin, openapi_extra=_YAML_BODY,
           responses={200: {"model": ConfigAppliedOut}, **errors(auth=True, write=True)})
    async def put_config(request: Request) -> JSONResponse:
        """Apply a new configuration (admin). All-or-nothing: an invalid one is 400 and changes nothing."""
        service.ensure_writable()
        raw = await request.body()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ApiError(400, f"configuration is not UTF-8 text: {exc}") from None
        # The loader passes elasticquotas/quotatrees through unchecked: check them before the config
        # event is journalled, so an invalid extension is a 400 and changes nothing.
        validate_extensions(text)
        later = later_problems(text)    # a window that would open to an invalid configuration
        if later:
            raise ConfigError(later[0], problems=[(0, problem) for problem in later])
        service.scheduler.update_config(text)
        checksum = getattr(service.scheduler.config, "checksum", "") or None
        return json({"applied": True, "checksum": checksum})

    # -- nodes -------------------------------------------------------------------------------------
    @r.get("/ws/v1/partition/{partition}/nodes", response_model=None, dependencies=read,
           responses={200: {"model": list[NodeOut]}, **errors(404, auth=True)})
    async def list_nodes(partition: str) -> JSONResponse:
        """Every registered node as YuniKorn's ``NodeDAOInfo``: capacity, allocated, available,
        utilized, the allocations on it, schedulable."""
        p = service.partition(partition)
        with p.lock:
            held = p.preempting()
            out = [node_dao(n, c, p.node_schedulable(n), p.node_allocations(n), held, p.node_labels(n),
                            p.node_flavors(n))
                   for n, c in p.nodes().items()]
        return json(out)

    @r.get("/ws/v1/partition/{partition}/node/{node}", response_model=None, dependencies=read,
           responses={200: {"model": NodeOut}, **errors(404, auth=True)})
    async def get_node(partition: str, node: str) -> JSONResponse:
        """One node (``NodeDAOInfo``); 404 ``Node not found``."""
        p = service.partition(partition)
        with p.lock:
            capacity = p.nodes().get(node)
            if capacity is None:
                raise NotFoundError("Node not found")
            return json(node_dao(node, capacity, p.node_schedulable(node), p.node_allocations(node),
                                 p.preempting(), p.node_labels(node), p.node_flavors(node)))

    @r.put("/ws/v1/partition/{partition}/node/{node}", response_model=None,
            openapi_extra=json_body(NodeBody), status_code=201,
           dependencies=admin,
           responses={200: {"model": NodeOut, "description": "updated (or unchanged)"},
                      201: {"model": NodeOut}, **errors(404, auth=True, write=True)})
    async def put_node(partition: str, node: Annotated[str, Path(pattern=NAME_PATTERN)],
                       request: Request) -> JSONResponse:
        """Register a node (admin, 201) or update a registered one (200): its capacity, and whether it
        takes new allocations (``schedulable: false`` — cordoned — keeps the allocations on it and
        takes its capacity out of the cluster's total). The root queue's max follows."""
        body = await parse_body(request, NodeBody)
        service.ensure_writable(partition)
        p = service.partition(partition)
        capacity = Resource(body.capacity)
        if node in p.nodes():
            p.update_node(node, capacity=capacity, schedulable=body.schedulable, labels=body.labels)
            status = 200
        else:
            p.add_node(node, capacity, schedulable=body.schedulable, labels=body.labels)
            status = 201
        with p.lock:
            return json(node_dao(node, p.nodes()[node], p.node_schedulable(node), p.node_allocations(node),
                                 p.preempting(), p.node_labels(node), p.node_flavors(node)),
                        status)

    @r.delete("/ws/v1/partition/{partition}/node/{node}", response_model=None, dependencies=admin,
              responses={200: {"model": OkOut}, **errors(404, 409, auth=True, write=True)})
    async def delete_node(partition: str, node: str) -> JSONResponse:
        """Remove a node (admin); the allocations on it are released (YuniKorn's removeNode)."""
        service.ensure_writable(partition)
        p = service.partition(partition)
        p.remove_node(node)
        return json({"ok": True, "nodeID": node})

    # -- applications ------------------------------------------------------------------------------
    @r.post("/ws/v1/partition/{partition}/applications", response_model=None,
            openapi_extra=json_body(ApplicationBody), status_code=201,
            dependencies=submit,
            responses={201: {"model": ApplicationOut}, **errors(404, 409, auth=True, write=True)})
    async def add_application(partition: str, request: Request) -> JSONResponse:
        """Submit an application for a user; placement decides the queue; 403 when the submit ACL refuses."""
        body = await parse_body(request, ApplicationBody)
        service.ensure_writable(partition)
        p = service.partition(partition)
        user = UserGroup(body.user, body.groups)
        try:
            p.add_application(body.applicationID, user, queue=body.queue, tags=body.tags)
        except RejectedError as exc:
            # ACL refusals are 403 (decision S2); other placement rejections 400.
            code = getattr(exc, "code", None)
            if code is None and body.queue is not None:
                target = body.queue.lower()
                if p.queues.queue(target) is not None and not _acl_allows(p, target, user, "submit"):
                    raise ApiError(403, str(exc), extra={"code": "acl.submit"}) from None
            raise
        app = p.application(body.applicationID)
        return json(application_json(app), 201)

    @r.get("/ws/v1/partition/{partition}/applications", response_model=None, dependencies=read,
           responses={200: {"model": list[ApplicationOut]}, **errors(404, auth=True)})
    async def list_applications(partition: str) -> JSONResponse:
        """Every application of the partition."""
        p = service.partition(partition)
        with p.lock:
            return json([application_json(a) for a in p.applications()])

    @r.delete("/ws/v1/partition/{partition}/application/{application_id}", response_model=None,
              dependencies=submit, responses={200: {"model": OkOut}, **errors(404, auth=True, write=True)})
    async def remove_application(partition: str, application_id: str,
                                 user: Annotated[str | None, _USER_QUERY] = None,
                                 groups: Annotated[list[str] | None, _GROUPS_QUERY] = None) -> JSONResponse:
        """Remove an application and release its allocations."""
        service.ensure_writable(partition)
        p = service.partition(partition)
        check_admin_or_owner(p, application_id, user, groups)
        p.remove_application(application_id)
        return json({"ok": True, "applicationID": application_id})

    @r.get("/ws/v1/partition/{partition}/standing", response_model=None, dependencies=read,
           responses={200: {"model": dict[str, Any]}, **errors(404, auth=True)})
    async def standing(partition: str,
                       kind: Annotated[Literal["queue", "user", "group", "quota"], Query(
                           description="what ``name`` is: a queue's full path, a user, a group or an "
                                       "elastic quota")],
                       name: Annotated[str, Query(min_length=1)],
                       eta: Annotated[bool, ETA_QUERY] = False) -> JSONResponse:
        """Where one queue, user, group or elastic quota stands: guaranteed or min, max, used, waiting
        demand, borrowed and from whom, lent, the elastic runtime, running applications against their
        limits, the waiting asks with their reasons and position (and their forecast start with
        ``eta=true``). Unknown: 404."""
        p = service.partition(partition)
        out = p.standing(kind, name.lower() if kind == "queue" else name)
        if eta and isinstance(out.get("waiting"), list):
            await asyncio.to_thread(with_eta, p, out["waiting"])
        return json(out)

    @r.get("/ws/v1/partition/{partition}/policies", response_model=None, dependencies=read,
           responses={200: {"model": list[dict[str, Any]]}, **errors(404, auth=True)})
    async def policies(partition: str) -> JSONResponse:
        """The policies a partition's configuration switched on (elastic quotas, quota trees, plug-ins),
        in admission order: the configuration key, the policy's name, the violation codes it gives and
        what it shows of its state (its plug-in protocol view)."""
        from quotaplane.policies.registry import plugin

        p = service.partition(partition)
        with p.lock:
            out = []
            for key, policy in p.extensions():
                found = plugin(key)
                out.append({"key": key, "name": policy.name, "codes": list(found.codes) if found else [],
                            "view": policy.view()})
        return json(out)

    @r.post("/ws/v1/partition/{partition}/timeouts", response_model=None, dependencies=admin,
            responses={200: {"model": dict[str, list[str]]}, **errors(404, auth=True, write=True)})
    async def run_timeouts(partition: str) -> JSONResponse:
        """Apply the partition's due timeouts now (the service also does it every few seconds):
        placeholders, Completing → Completed, Starting → Running, Completed → Expired, elastic reclaim.
        Answers what happened, in order."""
        service.ensure_writable(partition)
        p = service.partition(partition)
        return json({"events": list(p.check_timeouts())})

    # -- allocations -------------------------------------------------------------------------------
    @r.post("/ws/v1/partition/{partition}/allocations", response_model=None,
            openapi_extra=json_body(AllocationBody), status_code=201,
            dependencies=submit,
            responses={201: {"model": DecisionOut, "description": "allocated"},
                       409: {"description": "refused with every reason (DecisionOut), or a duplicate "
                                            "allocationKey (the error body)",
                             "content": {"application/json": {"schema": {"anyOf": [
                                 {"$ref": "#/components/schemas/DecisionOut"},
                                 {"$ref": "#/components/schemas/ErrorBody"}]}}}},
                       **{k: v for k, v in errors(404, auth=True, write=True).items() if k != 409}})
    async def allocate(partition: str, request: Request) -> JSONResponse:
        """Ask for an allocation: 201 when every policy admits it, 409 with every reason otherwise."""
        # (Normally served by the ASGI fast path in app.py, which shares allocate_one; this route
        # documents the operation and serves it when the fast path is off.)
        body = await parse_body(request, AllocationBody)
        status, out = allocate_one(service, partition, body)
        return json(out, status)

    @r.get("/ws/v1/partition/{partition}/allocation/{allocation_key}", response_model=None,
           dependencies=read, responses={200: {"model": dict[str, Any]}, **errors(404, auth=True)})
    async def get_allocation(partition: str, allocation_key: str) -> JSONResponse:
        """One allocation."""
        p = service.partition(partition)
        with p.lock:
            a = p.allocation(allocation_key)
            if a is None:
                raise NotFoundError(f"allocation {allocation_key!r} not found")
            return json(allocation_json(a))

    @r.delete("/ws/v1/partition/{partition}/allocation/{allocation_key}", response_model=None,
              dependencies=submit, responses={200: {"model": OkOut}, **errors(404, auth=True, write=True)})
    async def release(partition: str, allocation_key: str,
                      user: Annotated[str | None, _USER_QUERY] = None,
                      groups: Annotated[list[str] | None, _GROUPS_QUERY] = None) -> JSONResponse:
        """Release an allocation."""
        # (Without a query string normally served by the ASGI fast path in outer.py, which shares
        # release_one; this route documents the operation and serves ``?user=``.)
        return json(release_one(service, partition, allocation_key, user, groups))

    @r.put("/ws/v1/partition/{partition}/allocation/{allocation_key}/node", response_model=None,
           openapi_extra=json_body(AllocationNodeBody), dependencies=submit,
           responses={200: {"model": dict[str, Any]}, **errors(404, auth=True, write=True)})
    async def bind_allocation(partition: str, allocation_key: str, request: Request) -> JSONResponse:
        """Set the node an allocation runs on (e.g. once Kubernetes bound its pod); the node must be
        registered. Answers the allocation."""
        body = await parse_body(request, AllocationNodeBody)
        service.ensure_writable(partition)
        p = service.partition(partition)
        p.bind(allocation_key, body.nodeID)
        with p.lock:
            a = p.allocation(allocation_key)
            if a is None:           # released meanwhile by another request
                raise NotFoundError(f"allocation {allocation_key!r} not found")
            return json(allocation_json(a))

    @r.post("/ws/v1/partition/{partition}/allocations/batch", response_model=None,
            openapi_extra=json_body(BatchBody), dependencies=submit,
            responses={200: {"model": BatchOut}, **errors(404, 409, 413, auth=True, write=True)})
    async def allocate_batch(partition: str, request: Request) -> JSONResponse:
        """Many allocations in one request and one journal transaction; a decision per entry, in order
        (at most ``max-batch``, 1,000 by default: a larger batch would hold every other request up)."""
        body = await parse_body(request, BatchBody)
        if len(body.allocations) > service.limits.max_batch:
            raise ApiError(413, f"a batch holds at most {service.limits.max_batch} allocations (max-batch); "
                                f"this one has {len(body.allocations)}: send it in parts")
        service.ensure_writable(partition)
        p = service.partition(partition)
        # The models already checked every id, amount (int64, >= 0), priority and flag, and gave
        # fresh dicts: build the validated specs directly instead of validating each entry a second
        # time, and adopt the amounts without Resource's per-amount checks.
        entries = [AllocationSpec(a.applicationID, a.allocationKey, Resource.of(a.resource), a.priority,
                                  a.preemptible, node=a.nodeID, tags=a.allocationTags or None,
                                  constraints=_constraints(a), max_runtime=a.maxRuntime)
                   for a in body.allocations]
        start = time.perf_counter()
        decisions = p.allocate_specs(entries)
        if decisions:                       # the batch's time, shared by its decisions
            each = (time.perf_counter() - start) / len(decisions)
            for _ in decisions:
                metrics.admission.observe(each)
        n_ok = metrics.observe_decisions(decisions)
        out = []
        for spec, d in zip(entries, decisions, strict=True):
            dj = d.to_dict()
            dj.setdefault("allocationKey", spec.allocation_key)
            out.append(dj)
        return json({"decisions": out, "allocated": n_ok, "refused": len(out) - n_ok})

    @r.post("/ws/v1/partition/{partition}/whatif", response_model=None,
            openapi_extra=json_body(WhatIfBody), dependencies=read,
            responses={200: {"model": WhatIfOut}, **errors(404, auth=True)})
    async def what_if(partition: str, request: Request) -> JSONResponse:
        """The decision an allocation would get now; nothing changes."""
        body = await parse_body(request, WhatIfBody)
        p = service.partition(partition)
        decision = p.what_if(body.applicationID, Resource(body.resource), priority=body.priority,
                             preemptible=body.preemptible, max_runtime=body.maxRuntime, **body.placement())
        metrics.observe_whatif(decision)
        out = decision.to_dict()
        # item 7: the allocation keys allocate would preempt now ([] when none)
        out["wouldPreempt"] = out.pop("preempted", [])
        return json(out)

    return r
