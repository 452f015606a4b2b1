"""YuniKorn-compatible endpoints (reference §2): partitions, queues, usage, validate-conf, healthcheck.

Paths, keys and omitted empty fields follow YuniKorn's webservice; the shapes come from the engines'
``dao`` methods (queues: ``QueueTree.dao``; users and groups: ``ugm.Manager.users_usage`` …). Unlike
YuniKorn the partition parameter of the usage endpoints is honoured (decision U3).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse

from quotaplane.errors import ConfigError, NotFoundError
from quotaplane.server.common import (
    GROUP_PATTERN,
    GROUP_RE,
    QUEUE_PATTERN,
    USER_PATTERN,
    USER_RE,
    check_queue_name,
    errors,
    json,
)
from quotaplane.server.errors import ApiError
from quotaplane.server.ha_partitions import PartitionLeadership
from quotaplane.server.models import (
    GroupUsageOut,
    HealthOut,
    QueueOut,
    UserUsageOut,
    ValidateConfOut,
)

__all__ = ["router"]

#: a queue path parameter: documented with YuniKorn's rule, checked by the route (its own message)
_QUEUE = Path(json_schema_extra={"pattern": QUEUE_PATTERN})

_YAML_BODY: dict[str, Any] = {
    "requestBody": {
        "required": False,
        "description": "the queue configuration YAML, whatever the Content-Type (it changes nothing; "
                       "YuniKorn's admission controller sends it as application/json)",
        "content": {
            # any body is accepted (and judged): no schema, so no body is "of the wrong type"
            "application/x-yaml": {"schema": {}},
            "text/plain": {"schema": {}},
            "application/octet-stream": {"schema": {}},
            # what `curl --data-binary @queues.yaml` sends (docs/rest.md); harmless from a page: it
            # changes nothing and its answer is not readable cross-origin
            "application/x-www-form-urlencoded": {"schema": {}},
        },
    }
}


def validate_text(raw: bytes) -> dict[str, Any]:
    """``{"allowed", "reason"}`` for a config body (never raises)."""
    from quotaplane.config.files import later_problems
    from quotaplane.server.extensions import validate_extensions

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return {"allowed": False, "reason": f"configuration is not UTF-8 text: {exc}"}
    try:
        # the same checks as PUT /ws/v1/config: the queues and the elastic/quota-tree extensions
        validate_extensions(text)
        later = later_problems(text)        # a window that would open to an invalid configuration
        if later:
            return {"allowed": False, "reason": later[0]}
    except ConfigError as exc:
        text_msg = str(exc)
        where = f"line {exc.line}: " if exc.line and not text_msg.startswith("line") else ""
        return {"allowed": False, "reason": f"{where}{text_msg}"}
    except Exception as exc:  # the loader documents ConfigError only; any other failure is "not allowed"
        return {"allowed": False, "reason": f"{type(exc).__name__}: {exc}"}
    return {"allowed": True, "reason": ""}


def _empty_document(raw: bytes) -> bool:
    """True for a body with no YAML document: empty, blank or only comments."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines())


def router(service: Any) -> APIRouter:
    """The YuniKorn-compatible routes bound to ``service``."""
    r = APIRouter(tags=["yunikorn"])
    read = service.tokens.dependencies("read")

    @r.get("/ws/v1/scheduler/healthcheck", response_model=None,
           responses={200: {"model": HealthOut}, **errors(403)})
    async def healthcheck() -> JSONResponse:
        """Scheduler health (YuniKorn shape). Open to everyone (probes)."""
        checks = []
        ok_partitions = True
        try:
            parts = service.scheduler.partitions()
            ok_partitions = bool(parts)
        except Exception:  # a broken scheduler is unhealthy, not a 500
            ok_partitions = False
        checks.append({"Name": "Scheduler partitions", "Succeeded": ok_partitions,
                       "Description": "the scheduler has at least one partition",
                       "DiagnosisMessage": "" if ok_partitions else "no partition"})
        stored = True
        failed: list[str] = []
        try:
            for p in service.scheduler.partitions():
                if p.recovering:
                    p.recover()
                if not p.healthy:
                    stored = False
                    failed.append(p.name)
        except Exception:  # a broken scheduler is unhealthy, not a 500
            stored = False
        # issue 14 #2: a store that refuses writes (or a partition waiting to be rebuilt from it) is
        # unhealthy until a write succeeds again, so probes and alerts see it
        checks.append({"Name": "Journal store", "Succeeded": stored,
                       "Description": "the last write of every partition reached the store",
                       "DiagnosisMessage": "" if stored else
                       f"store writes failing for partition(s) {', '.join(failed) or '?'}"})
        lead = service.leadership
        if isinstance(lead, PartitionLeadership):
            checks.append({"Name": "Leadership", "Succeeded": True,
                           "Description": "the partitions this instance leads, and who leads the others",
                           "DiagnosisMessage": lead.describe()})
        elif lead is not None:
            leader = lead.leader_url() or ""
            checks.append({"Name": "Leadership", "Succeeded": True,
                           "Description": "this instance leads, or follows the leader's journal",
                           "DiagnosisMessage": "leader" if lead.is_leader() else f"follower of {leader}"})
        healthy = all(c["Succeeded"] for c in checks)
        for c in checks:                    # ``DiagnosisMessage,omitempty``
            if not c["DiagnosisMessage"]:
                del c["DiagnosisMessage"]
        return json({"Healthy": healthy, "HealthChecks": checks})

    @r.get("/ws/v1/partition/{partition}/queues", response_model=None, dependencies=read,
           responses={200: {"model": QueueOut}, **errors(404, auth=True)})
    async def queues(partition: str) -> JSONResponse:
        """The root queue with its whole subtree (PartitionQueueDAOInfo)."""
        p = service.partition(partition)
        with p.lock:
            dao = p.queues.dao(None, subtree=True, partition=p.name)
        return json(dao)

    @r.get("/ws/v1/partition/{partition}/queue/{queue}", response_model=None, dependencies=read,
           responses={200: {"model": QueueOut}, **errors(404, auth=True)})
    async def queue(partition: str, queue: Annotated[str, _QUEUE], request: Request,
                    subtree: Annotated[str | None, Query(
                        description="present (any value): include the children")] = None) -> JSONResponse:
        """One queue; its children only when the ``subtree`` query key is present."""
        p = service.partition(partition)
        path = check_queue_name(queue)
        with_children = "subtree" in request.query_params
        with p.lock:
            if p.queues.queue(path) is None:
                raise NotFoundError("Queue not found")
            dao = p.queues.dao(path, subtree=with_children, partition="")
        return json(dao)

    @r.get("/ws/v1/partition/{partition}/usage/users", response_model=None, dependencies=read,
           responses={200: {"model": list[UserUsageOut]}, **errors(404, auth=True)})
    async def users_usage(partition: str) -> JSONResponse:
        """Usage of every tracked user (``[]`` when none)."""
        p = service.partition(partition)
        with p.lock:
            return json(p.ugm.users_usage())

    @r.get("/ws/v1/partition/{partition}/usage/user/{user}", response_model=None, dependencies=read,
           responses={200: {"model": UserUsageOut}, **errors(404, auth=True)})
    async def user_usage(partition: str, user: Annotated[str, Path(
            json_schema_extra={"pattern": USER_PATTERN})]) -> JSONResponse:
        """Usage of one user; 400 ``Invalid user name``; 404 ``User not found``."""
        p = service.partition(partition)
        if not USER_RE.match(user):
            raise ApiError(400, "Invalid user name")
        with p.lock:
            dao = p.ugm.user_usage(user)
        if dao is None:
            raise NotFoundError("User not found")
        return json(dao)

    @r.get("/ws/v1/partition/{partition}/usage/groups", response_model=None, dependencies=read,
           responses={200: {"model": list[GroupUsageOut]}, **errors(404, auth=True)})
    async def groups_usage(partition: str) -> JSONResponse:
        """Usage of every tracked group (``[]`` when none)."""
        p = service.partition(partition)
        with p.lock:
            return json(p.ugm.groups_usage())

    @r.get("/ws/v1/partition/{partition}/usage/group/{group}", response_model=None, dependencies=read,
           responses={200: {"model": GroupUsageOut}, **errors(404, auth=True)})
    async def group_usage(partition: str, group: Annotated[str, Path(
            json_schema_extra={"pattern": GROUP_PATTERN})]) -> JSONResponse:
        """Usage of one group; 400 ``Invalid group name`` (so ``*`` is 400, as in YuniKorn); 404."""
        p = service.partition(partition)
        if not GROUP_RE.match(group):
            raise ApiError(400, "Invalid group name")
        with p.lock:
            dao = p.ugm.group_usage(group)
        if dao is None:
            raise NotFoundError("Group not found")
        return json(dao)

    @r.post("/ws/v1/validate-conf", response_model=None, dependencies=read,
            responses={200: {"model": ValidateConfOut}, **errors(auth=True)}, openapi_extra=_YAML_BODY)
    async def validate_conf(request: Request) -> JSONResponse:
        """Validate a queue configuration; always 200 ``{"allowed", "reason"}``. An empty document (the
        body the k8shim's admission controller sends when its ConfigMap has no ``queues.yaml``) is
        allowed, as YuniKorn's decoder reads it as a configuration with nothing to check."""
        raw = await request.body()
        if _empty_document(raw):
            return json({"allowed": True})
        out = validate_text(raw)
        if not out["reason"]:
            del out["reason"]                   # ``reason,omitempty``
        return json(out)

    return r
