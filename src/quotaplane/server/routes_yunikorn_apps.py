"""YuniKorn's application routes (``pkg/webservice/handlers.go``): a queue's applications, one
application (with and without its queue), applications by state — every answer an
``ApplicationDAOInfo`` with its allocations, its waiting asks as ``requests`` and its ``stateLog``.

Queue names in paths are unescaped and checked name by name as YuniKorn's ``validateQueue`` does (400
with the reason); unknown partition, queue or application: 404 with YuniKorn's messages.
"""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import unquote

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse

from quotaplane.application import (
    ACCEPTED,
    COMPLETED,
    COMPLETING,
    EXPIRED,
    FAILED,
    FAILING,
    NEW,
    RESUMING,
    RUNNING,
    Application,
)
from quotaplane.errors import NotFoundError
from quotaplane.partition import Partition
from quotaplane.server.common import QUEUE_PATTERN, any_case, errors, json
from quotaplane.server.errors import ApiError
from quotaplane.server.models import ApplicationDaoOut
from quotaplane.server.yunikorn_dao import application_dao

__all__ = ["ACTIVE_STATUSES", "app_dao", "router"]

#: YuniKorn's ``allowedAppActiveStatuses`` (``?status=`` of the active state)
ACTIVE_STATUSES = tuple(s.lower() for s in (NEW, ACCEPTED, RUNNING, COMPLETING, FAILING, RESUMING))
#: states YuniKorn keeps in the partition's completed list
_DONE = frozenset({COMPLETED, FAILED, EXPIRED})
_QUEUE_PART = re.compile(r"^[a-zA-Z0-9_:#/@-]{1,64}\Z")


def _active_status_message() -> str:
    return "Only following active statuses are allowed: " + ",".join(ACTIVE_STATUSES)


#: a queue path parameter: documented with YuniKorn's rule, checked by the route (its own message)
_QUEUE = Path(json_schema_extra={"pattern": QUEUE_PATTERN})


def _queue_name(raw: str) -> str:
    """``url.QueryUnescape`` then ``validateQueue``: each dotted part must be a valid queue name."""
    name = unquote(raw.replace("+", " "))
    for part in name.split(".") if name else ():
        if not _QUEUE_PART.match(part):
            raise ApiError(400, "invalid queue name, max 64 characters consisting of alphanumeric characters "
                                "and '-', '_', '#', '@', '/', ':' allowed")
    return name.lower()


def app_dao(p: Partition, app: Application) -> dict[str, Any]:
    """The ``ApplicationDAOInfo`` of ``app`` (call with the partition lock held)."""
    asks = [(ask, p.pending_reasons(ask.allocation_key)) for ask in p.pending(app.application_id)]
    return application_dao(app, p.name, asks, p.preempting())


def router(service: Any) -> APIRouter:
    """The application routes bound to ``service``."""
    r = APIRouter(tags=["yunikorn"])
    read = service.tokens.dependencies("read")
    listed = {200: {"model": list[ApplicationDaoOut]}, **errors(400, 404, auth=True)}

    def queue_of(p: Partition, raw: str) -> str:
        name = _queue_name(raw)
        if p.queues.queue(name) is None:
            raise NotFoundError("Queue not found")
        return name

    @r.get("/ws/v1/partition/{partition}/queue/{queue}/applications", response_model=None,
           dependencies=read, responses=listed)
    async def queue_applications(partition: str, queue: Annotated[str, _QUEUE]) -> JSONResponse:
        """The applications of a queue (``[]`` when none)."""
        p = service.partition(partition)
        with p.lock:
            name = queue_of(p, queue)
            return json([app_dao(p, a) for a in p.applications() if a.queue_path == name])

    @r.get("/ws/v1/partition/{partition}/queue/{queue}/applications/{state}", response_model=None,
           dependencies=read, responses=listed)
    async def queue_applications_by_state(partition: str, queue: Annotated[str, _QUEUE],
                                          state: Annotated[str, Path(json_schema_extra={
                                              "pattern": any_case("active")})],
                                          request: Request) -> JSONResponse:
        """The active applications of a queue, optionally of one ``status`` (YuniKorn allows only
        ``active`` here)."""
        p = service.partition(partition)
        status = request.query_params.get("status", "").lower()
        with p.lock:
            name = queue_of(p, queue)
            if state.lower() != "active":
                raise ApiError(400, "Only following application states are allowed: active")
            if status and status not in ACTIVE_STATUSES:
                raise ApiError(400, _active_status_message())
            return json([app_dao(p, a) for a in p.applications()
                         if a.queue_path == name and (not status or a.state.lower() == status)])

    async def one(partition: str, queue: str | None, application: str) -> JSONResponse:
        p = service.partition(partition)
        with p.lock:
            app = p.application(application)
            if queue is not None:
                name = queue_of(p, queue)
                if app is not None and app.queue_path != name:
                    app = None
            if app is None:
                raise NotFoundError("Application not found")
            return json(app_dao(p, app))

    @r.get("/ws/v1/partition/{partition}/queue/{queue}/application/{application}", response_model=None,
           dependencies=read, responses={200: {"model": ApplicationDaoOut}, **errors(400, 404, auth=True)})
    async def queue_application(partition: str, queue: Annotated[str, _QUEUE], application: str
                                ) -> JSONResponse:
        """One application of a queue."""
        return await one(partition, queue, application)

    @r.get("/ws/v1/partition/{partition}/application/{application_id}", response_model=None,
           dependencies=read, responses={200: {"model": ApplicationDaoOut}, **errors(404, auth=True)})
    async def application(partition: str, application_id: str) -> JSONResponse:
        """One application: YuniKorn's ``ApplicationDAOInfo`` (allocations, waiting asks as
        ``requests``, ``stateLog``)."""
        return await one(partition, None, application_id)

    @r.get("/ws/v1/partition/{partition}/applications/{state}", response_model=None, dependencies=read,
           responses=listed)
    async def applications_by_state(partition: str, state: Annotated[str, Path(json_schema_extra={
            "pattern": any_case("active", "completed", "rejected")})], request: Request) -> JSONResponse:
        """``active`` (optionally ``?status=running`` …), ``completed`` (Completed, Failed, Expired
        still kept) or ``rejected`` (always ``[]``: a rejected submission is not kept)."""
        p = service.partition(partition)
        kind = state.lower()
        with p.lock:
            if kind == "active":
                status = request.query_params.get("status", "").lower()
                if status and status not in ACTIVE_STATUSES:
                    raise ApiError(400, _active_status_message())
                apps = [a for a in p.applications() if a.state not in _DONE
                        and (not status or a.state.lower() == status)]
            elif kind == "completed":
                apps = [a for a in p.applications() if a.state in _DONE]
            elif kind == "rejected":
                apps = []
            else:
                raise ApiError(400, "Only following application states are allowed: active, rejected, "
                                    "completed")
            return json([app_dao(p, a) for a in apps])

    return r
