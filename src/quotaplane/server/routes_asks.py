"""Queueing endpoints: pending asks with the reasons they wait, and the partition's event stream.

Seed 004: a request that does not fit is queued, not rejected. A platform posts asks, then listens on
``GET /ws/v1/partition/{p}/events/stream`` (server-sent events) for every change — the allocations the
scheduling cycle makes, and the allocations preempted or reclaimed, which it must evict — so it never
polls nor retries. Each event's ``id:`` is its journal sequence number; a client that reconnects with
``Last-Event-ID`` (or ``?after=SEQ``) gets what it missed, read back from the journal, with no gap and
no duplicate.
"""

from __future__ import annotations

import asyncio
import json as _json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ConfigDict, Field, StrictBool

from quotaplane.errors import InputError, NotFoundError
from quotaplane.notices import NOTICE_TYPES
from quotaplane.resources import Resource
from quotaplane.server.common import errors, json, json_body, parse_body
from quotaplane.server.errors import ApiError
from quotaplane.server.models import AllocationTags, MaxRuntime, Name, Placement, Priority, ResourceMap
from quotaplane.server.routes_eta import ETA_QUERY, with_eta
from quotaplane.server.streams import Feed, bound_send_buffer

__all__ = ["AskBody", "add_ask_one", "router", "scheduling_loop"]

#: Seconds between timer-driven cycles of the service's scheduling loop.
SCHEDULE_INTERVAL = 0.5


class AskBody(Placement):
    """``POST /ws/v1/partition/{p}/application/{app}/asks``: one pending request."""

    # the document says what the partition checks: a placeholder belongs to a task group
    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "if": {"properties": {"placeholder": {"const": True}}, "required": ["placeholder"]},
        "then": {"required": ["taskGroupName"], "properties": {"taskGroupName": {"type": "string"}}}})

    allocationKey: Name
    resource: ResourceMap
    priority: Priority = 0
    preemptible: StrictBool = True
    placeholder: StrictBool = False
    taskGroupName: Name | None = Field(default=None, description="gang task group (placeholders)")
    allocationTags: AllocationTags | None = Field(default=None, description=(
        "YuniKorn's allocation tags, passed to the allocation (e.g. kubernetes.io/meta/podName)"))
    maxRuntime: MaxRuntime | None = Field(default=None, description=(
        "declared runtime in seconds, passed to the allocation (the ETA's end of it, docs/eta.md)"))


def ask_json(ask: Any) -> dict[str, Any]:
    """The REST shape of a pending ask (with the reasons it waits)."""
    out: dict[str, Any] = ask.to_dict()
    return out


def add_ask_one(service: Any, partition: str, application_id: str, body: AskBody) -> dict[str, Any]:
    """``POST …/application/{app}/asks``: queue the ask; the answer's JSON (201). Raises the usual
    errors."""
    service.ensure_writable(partition)
    p = service.partition(partition)
    ask = p.add_ask(application_id, body.allocationKey, Resource(body.resource), priority=body.priority,
                    preemptible=body.preemptible, placeholder=body.placeholder,
                    task_group=body.taskGroupName, tags=body.allocationTags,
                    max_runtime=body.maxRuntime, **body.placement())
    with p.lock:
        allocated = p.allocation(body.allocationKey) is not None
        out = ask_json(ask)
        if not allocated:
            out["reasons"] = [v.to_dict() for v in (p.pending_reasons(body.allocationKey) or [])]
    out["allocated"] = allocated
    return out


def router(service: Any) -> APIRouter:
    """The queueing routes bound to ``service``."""
    r = APIRouter(tags=["queueing"])
    tokens = service.tokens
    read = Depends(tokens.dependency("read"))
    submit = Depends(tokens.dependency("submit"))

    @r.post("/ws/v1/partition/{partition}/application/{application_id}/asks", response_model=None,
            status_code=201, dependencies=[submit], openapi_extra=json_body(AskBody),
            responses={201: {"model": dict[str, Any],
                             "description": "queued (allocated: true when a cycle allocated it at once)"},
                       **errors(404, 409, auth=True, write=True)})
    async def add_ask(partition: str, application_id: str, request: Request) -> JSONResponse:
        """Queue an ask: it counts towards no quota and is allocated as soon as it fits."""
        # like every other route: the body is JSON whatever the Content-Type (curl -d sends a form type)
        # (Normally served by the ASGI fast path in outer.py, which shares add_ask_one; this route
        # documents the operation and serves it when the fast path is off.)
        body = await parse_body(request, AskBody)
        return json(add_ask_one(service, partition, application_id, body), 201)

    @r.get("/ws/v1/partition/{partition}/application/{application_id}/asks", response_model=None,
           dependencies=[read], responses={200: {"model": list[dict[str, Any]]}, **errors(404, auth=True)})
    async def list_asks(partition: str, application_id: str,
                        eta: Annotated[bool, ETA_QUERY] = False) -> JSONResponse:
        """The application's pending asks in scheduling order, each with the reasons it waits (and
        its forecast start with ``eta=true``)."""
        p = service.partition(partition)
        if p.application(application_id) is None:
            raise NotFoundError(f"application {application_id!r} not found")
        out = [ask_json(a) for a in p.pending(application_id)]
        return json(await asyncio.to_thread(with_eta, p, out) if eta else out)

    @r.get("/ws/v1/partition/{partition}/asks", response_model=None, dependencies=[read],
           responses={200: {"model": list[dict[str, Any]]}, **errors(404, auth=True)})
    async def list_all_asks(partition: str, eta: Annotated[bool, ETA_QUERY] = False) -> JSONResponse:
        """Every pending ask of the partition (arrival order) with the reasons it waits (and its
        forecast start with ``eta=true``)."""
        p = service.partition(partition)
        out = [ask_json(a) for a in p.pending()]
        return json(await asyncio.to_thread(with_eta, p, out) if eta else out)

    @r.delete("/ws/v1/partition/{partition}/application/{application_id}/ask/{allocation_key}",
              response_model=None, dependencies=[submit],
              responses={200: {"model": dict[str, Any]}, **errors(404, auth=True, write=True)})
    async def remove_ask(partition: str, application_id: str, allocation_key: str) -> JSONResponse:
        """Withdraw a pending ask."""
        service.ensure_writable(partition)
        p = service.partition(partition)
        with p.lock:
            ask = p.get_ask(allocation_key)
            if ask is None or ask.application_id != application_id:
                raise NotFoundError(f"ask {allocation_key!r} of application {application_id!r} not found")
            p.remove_ask(allocation_key)
        return json({"ok": True, "allocationKey": allocation_key})

    @r.post("/ws/v1/partition/{partition}/schedule", response_model=None, dependencies=[submit],
            responses={200: {"model": dict[str, Any]}, **errors(404, auth=True, write=True)})
    async def schedule(partition: str) -> JSONResponse:
        """Run one scheduling cycle now; answer the allocations it made."""
        service.ensure_writable(partition)
        p = service.partition(partition)
        made = p.schedule()
        return json({"allocations": [{"allocationKey": a.allocation_key, "applicationID": a.application_id,
                                      "resource": a.resource.to_dict()} for a in made]})

    @r.get("/ws/v1/partition/{partition}/events/stream", response_model=None, dependencies=[read],
           responses={200: {"content": {"text/event-stream": {"schema": {"type": "string"}}},
                            "description": "server-sent events, one per journalled change, each with "
                                           "`id:` = its journal sequence number"},
                      **errors(400, 404, 503, auth=True)})
    async def events_stream(
        partition: str,
        request: Request,
        applicationID: Annotated[str | None, Query(description="only this application's events")] = None,
        types: Annotated[str | None, Query(description="only these event types (comma separated), "
                                                        "e.g. `preempted`")] = None,
        after: Annotated[int | None, Query(ge=0, description="resume: first send the events journalled "
                                                             "after this sequence number")] = None,
        timeout: Annotated[float, Query(ge=0, le=86400, description="close after this many seconds "
                                                                   "(0: never)")] = 0,
        max_events: Annotated[int, Query(ge=0, le=1_000_000, description="close after this many "
                                                                        "events (0: no limit)")] = 0,
    ) -> StreamingResponse:
        """Server-sent events of every change (docs/preemption.md "Events"), resumable without gaps.
        Counted with the other event streams (``max-streams``, ``max-streams-per-client``: 503); a
        reader that falls ``stream-buffer`` events behind gets a last ``dropped`` event naming the
        sequence number to resume after (``Last-Event-ID``, which an EventSource sends by itself)."""
        p = service.partition(partition)
        resume = after if after is not None else _last_event_id(request.headers.get("last-event-id"))
        wanted = None if types is None else {t.strip() for t in types.split(",") if t.strip()}
        if wanted is not None and (not wanted or not wanted <= set(NOTICE_TYPES)):
            # an unknown type would be a stream that never sends anything
            unknown = ", ".join(repr(t) for t in sorted(wanted - set(NOTICE_TYPES))) or repr(types)
            raise ApiError(400, f"types: unknown event type {unknown}; the types are "
                                + ", ".join(NOTICE_TYPES))
        client = request.client.host if request.client else ""
        slots = service.stream_slots
        refused = slots.acquire(client)
        if refused is not None:
            which = (f"max-streams {slots.total}" if refused == "total"
                     else f"max-streams-per-client {slots.per_client}")
            raise ApiError(503, "Too many streaming connections",
                           f"Too many streaming connections: {which} reached; retry later")
        bound_send_buffer(request.scope)
        feed: Feed[dict[str, Any]] = Feed(service.limits.stream_buffer)
        unsubscribe = p.subscribe(feed.offer)
        try:
            backlog = p.notices_after(resume) if resume is not None else []
        except BaseException:
            unsubscribe()
            feed.close()
            slots.release(client)
            raise               # a ValueError (nothing to resume from) is answered 400

        def wanted_event(event: dict[str, Any]) -> bool:
            return ((wanted is None or event["type"] in wanted)
                    and (applicationID is None or _concerns(event, applicationID)))

        async def stream() -> AsyncIterator[bytes]:
            sent = 0
            last = resume if resume is not None else -1
            deadline = time.monotonic() + timeout if timeout > 0 else None
            try:
                yield b": quotaplane events\n\n"
                for event in backlog:
                    if max_events and sent >= max_events:
                        return
                    last = event["seq"]
                    if wanted_event(event):
                        yield _frame(event)
                        sent += 1
                while max_events == 0 or sent < max_events:
                    wait = 15.0
                    if deadline is not None:
                        wait = min(wait, deadline - time.monotonic())
                        if wait <= 0:
                            break
                    events = await feed.take(wait)
                    if not events and not feed.overflowed:
                        # a comment keeps idle proxies from closing the connection
                        if deadline is None or time.monotonic() < deadline:
                            yield b": keep-alive\n\n"
                        continue
                    frames: list[bytes] = []
                    for event in events:
                        if event["seq"] <= last:
                            continue             # sent already from the journal (resume)
                        if max_events and sent >= max_events:
                            break
                        last = event["seq"]
                        if wanted_event(event):
                            frames.append(_frame(event))
                            sent += 1
                        if len(frames) >= _CHUNK:
                            yield b"".join(frames)
                            frames = []
                    if frames:
                        yield b"".join(frames)
                    if feed.overflowed and not (max_events and sent >= max_events):
                        yield _dropped(last, service.limits.stream_buffer)
                        return
            finally:
                unsubscribe()
                feed.close()
                slots.release(client)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    return r


#: the most events one write of a stream carries (what waits in the socket's buffer stays bounded)
_CHUNK = 500


def _dropped(last: int, buffer: int) -> bytes:
    """The last event of a stream whose reader fell ``buffer`` events behind: where to resume."""
    data = _json.dumps({"message": f"the reader fell more than {buffer} events behind (stream-buffer): "
                                   f"reconnect with Last-Event-ID: {last} (or ?after={last}) to resume "
                                   "without a gap", "after": last}, sort_keys=True)
    return f"event: dropped\ndata: {data}\n\n".encode()


def _frame(event: dict[str, Any]) -> bytes:
    data = _json.dumps(event, sort_keys=True)
    return f"id: {event['seq']}\nevent: {event['type']}\ndata: {data}\n\n".encode()


def _concerns(event: dict[str, Any], application_id: str) -> bool:
    """The notice is about ``application_id`` (a preemption: one of its allocations was taken)."""
    if event.get("applicationID") == application_id:
        return True
    return any(a.get("applicationID") == application_id for a in event.get("allocations", ()))


def _last_event_id(header: str | None) -> int | None:
    """The ``Last-Event-ID`` header of a reconnecting SSE client, as a sequence number."""
    if header is None or not header.strip():
        return None
    try:
        seq = int(header.strip())
    except ValueError:
        raise InputError(f"Last-Event-ID must be a sequence number, got {header!r}") from None
    if seq < 0:
        raise InputError(f"Last-Event-ID must not be negative, got {seq}")
    return seq


async def scheduling_loop(service: Any, interval: float = SCHEDULE_INTERVAL) -> None:
    """The timer side of the scheduling cycle: every ``interval`` seconds, run a cycle for each
    partition whose pending asks may fit now (something changed since its last cycle)."""
    while True:
        await asyncio.sleep(interval)
        try:
            for p in service.scheduler.partitions():
                if p.schedule_needed and service.is_leader(p.name):
                    # in a worker thread: a long cycle must not stall the event loop (the
                    # partition's lock keeps it consistent with the request handlers)
                    await asyncio.to_thread(p.schedule)
        except Exception:  # the loop must survive a bad moment (e.g. a journal hiccup); retry later
            continue
