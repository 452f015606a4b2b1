"""When will my job start, and what would it take (docs/eta.md, docs/rest.md "ETA").

- ``GET /ws/v1/partition/{p}/eta``: the forecast start (p10/p50/p90, basis) of every waiting ask,
  optionally of one queue (and below) or one application;
- ``GET /ws/v1/partition/{p}/eta/{allocationKey}``: one waiting ask's forecast and what would have
  to change for it to start now;
- ``POST /ws/v1/partition/{p}/whatif/explain``: ``whatif``'s verdict and what would have to change.

The forecast and the explanation run the engines on working copies, never on the partition: these
are reads (the ``read`` permission). They run on a worker thread — a forecast of a large partition
takes a noticeable time and must not hold the event loop.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from quotaplane.errors import NotFoundError
from quotaplane.eta import explain, explain_ask, tracker
from quotaplane.resources import Resource
from quotaplane.server.common import errors, json, json_body, parse_body
from quotaplane.server.models import WhatIfBody

__all__ = ["ETA_QUERY", "router", "with_eta"]

#: the ``eta`` query parameter of the ask lists and ``standing``: each waiting ask with its forecast
ETA_QUERY = Query(description="true: each waiting ask with its forecast start ('eta': known, start and "
                              "inSeconds p10/p50/p90, basis; docs/eta.md) — computed on demand, cached "
                              "until the partition changes")


def with_eta(partition: Any, asks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``asks`` (REST dicts with an ``allocationKey``) each with its forecast as ``eta``: ``known``,
    ``start`` and ``inSeconds`` (p10/p50/p90, null: unknown) and ``basis`` from the partition's
    cached forecast (docs/eta.md); an ask the forecast does not know of (allocated meanwhile) gets
    null. Call it off the event loop: a forecast of a large partition takes a noticeable time."""
    forecast = tracker(partition).forecast()
    for a in asks:
        found = forecast.asks.get(a.get("allocationKey", ""))
        if found is None:
            a["eta"] = None
            continue
        whole = found.to_dict(forecast.as_of)
        a["eta"] = {"known": whole["known"], "start": whole["start"], "inSeconds": whole["inSeconds"],
                    "basis": whole["basis"], "asOf": forecast.as_of}
    return asks

_queue_q = Query(description="only the asks of this queue and the queues below it")
_app_q = Query(alias="applicationID", description="only the asks of this application")


def router(service: Any) -> APIRouter:
    """The ETA routes bound to ``service``."""
    r = APIRouter(tags=["eta"])
    read = service.tokens.dependencies("read")
    # the hold times are observed from the first forecast's tracker on: start them with the service,
    # so the first question has the releases since the start as its basis
    for p in service.scheduler.partitions():
        tracker(p)

    @r.get("/ws/v1/partition/{partition}/eta", response_model=None, dependencies=read,
           responses={200: {"model": dict[str, Any], "description": "the forecast of every waiting ask"},
                      **errors(404, auth=True)})
    async def eta_all(partition: str, queue: Annotated[str | None, _queue_q] = None,
                      application: Annotated[str | None, _app_q] = None) -> JSONResponse:
        """The forecast start of every waiting ask (arrival order): ``start`` (times), ``inSeconds``
        (from ``asOf``), ``known`` and ``basis``; null times are unknown, never guessed."""
        p = service.partition(partition)
        # an unknown queue or application is a 404 naming it, as standing and whatif answer
        if queue is not None:
            queue = queue.lower()
            # the queue tree answers whether it exists (the criterion standing uses); computing the
            # queue's standing for it was a walk of its usage and waiting asks under the lock
            if p.queues.queue(queue) is None:
                raise NotFoundError(f"queue {queue!r} not found in partition {p.name!r}")
        if application is not None and p.application(application) is None:
            raise NotFoundError(f"application {application!r} not found in partition {p.name!r}")
        forecast = await asyncio.to_thread(tracker(p).forecast)
        out = forecast.to_dict()
        if queue is not None or application is not None:
            out["asks"] = [a for a in out["asks"]
                           if (queue is None or a["queue"] == queue or a["queue"].startswith(queue + "."))
                           and (application is None or a["applicationID"] == application)]
        return json(out)

    @r.get("/ws/v1/partition/{partition}/eta/{allocation_key}", response_model=None, dependencies=read,
           responses={200: {"model": dict[str, Any],
                            "description": "the ask's forecast and what would have to change"},
                      **errors(404, auth=True)})
    async def eta_one(partition: str, allocation_key: str) -> JSONResponse:
        """One waiting ask: its forecast (``eta``) and what would admit it now (``explain``)."""
        p = service.partition(partition)

        def answer() -> dict[str, Any] | None:
            t = tracker(p)
            f = t.forecast()
            found = f.asks.get(allocation_key)
            why = explain_ask(p, allocation_key)
            if found is None or why is None:
                return None
            return {"eta": found.to_dict(f.as_of), "explain": why.to_dict(), "top": why.top()}

        out = await asyncio.to_thread(answer)
        if out is None:
            raise NotFoundError(f"no waiting ask {allocation_key!r} in partition {partition!r}")
        return json(out)

    @r.post("/ws/v1/partition/{partition}/whatif/explain", response_model=None,
            openapi_extra=json_body(WhatIfBody), dependencies=read,
            responses={200: {"model": dict[str, Any],
                             "description": "the verdict and what would have to change"},
                       **errors(404, auth=True)})
    async def whatif_explain(partition: str, request: Request) -> JSONResponse:
        """``whatif``'s verdict with what would have to change for it to be admitted now: the running
        allocations that would have to end, how far each blocking limit would have to rise, the
        largest request of the same shape admitted now; each verified on a copy."""
        body = await parse_body(request, WhatIfBody)
        p = service.partition(partition)
        if p.application(body.applicationID) is None:
            raise NotFoundError(f"application {body.applicationID!r} not found")
        e = await asyncio.to_thread(explain, p, body.applicationID, Resource(body.resource),
                                    priority=body.priority, preemptible=body.preemptible,
                                    placement=body.placement(), max_runtime=body.maxRuntime)
        out = e.to_dict()
        out["top"] = e.top()
        return json(out)

    return r
