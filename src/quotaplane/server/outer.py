"""The outer ASGI layer of the service: what every request passes through before any route.

* :class:`Outer` — latency metrics, the loopback guard (decision S2), the last-resort error handler,
  the commit barrier (an answer waits until what it saw is durable, issue 18), writes relayed to
  their partition's leader (:mod:`quotaplane.server.forwarding`), reads of partitions led elsewhere
  caught up first, and the hot path ``POST /ws/v1/partition/{p}/allocations`` served without
  FastAPI's routing and dependency pass;
* :class:`App` — FastAPI handing that hot path to :class:`Outer` before Starlette's own middleware
  layers.

Pure ASGI, not ``BaseHTTPMiddleware``: that one costs ~100 µs per request.
"""

from __future__ import annotations

import json as _json
import logging
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from pydantic import ValidationError

from quotaplane.server.errors import exception_response, status_for
from quotaplane.server.logs import ACCESS

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.server.app import Service

__all__ = ["App", "Outer"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The hot path served by :meth:`Outer._allocate` (the documented route has the same path).
_ALLOCATE_PATH = re.compile(r"^/ws/v1/partition/([^/]+)/allocations$")


class _FastRoute:
    path = "/ws/v1/partition/{partition}/allocations"


_FAST_ROUTE = _FastRoute()


class _ForwardedRoute:
    path = "forwarded to the leader"


_FORWARDED_ROUTE = _ForwardedRoute()


_CORS = (b"access-control-allow-origin", b"*")

_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost", "testclient"})


def _route_label(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


class App(FastAPI):
    """FastAPI with the hot path (``POST …/allocations``) handed to :class:`Outer` before
    Starlette's own middleware layers (error, telemetry, body-limit wrappers: ~10 % of a request).
    The hot path answers its errors itself; every other request takes the normal stack."""

    fast: Outer | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        fast = self.fast
        if (fast is not None and scope["type"] == "http" and scope["method"] == "POST"
                and _ALLOCATE_PATH.match(scope["path"]) is not None):
            scope["app"] = self
            await fast(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


class Outer:
    """Pure ASGI middleware: latency metrics, loopback guard, and the last-resort error handler.

    Pure ASGI (not ``BaseHTTPMiddleware``) because that one costs ~100 µs per request.
    """

    def __init__(self, app: ASGIApp, service: Service, loopback_only: bool, fast: bool = True) -> None:
        self.app = app
        self.service = service
        self.loopback_only = loopback_only
        self.fast = fast

    async def _allocate(self, partition: str, scope: Scope, receive: Receive, send: Send) -> None:
        """The hot path ``POST /ws/v1/partition/{p}/allocations`` without FastAPI's routing and
        dependency pass (~30 % of a request): same token check, body model, partition call and
        answers as the documented route (both use ``routes_core.allocate_one``)."""
        from quotaplane.server.errors import ApiError, validation_message
        from quotaplane.server.models import AllocationBody
        from quotaplane.server.routes_core import allocate_one

        tokens = self.service.tokens
        if tokens:
            auth = b""
            for k, v in scope["headers"]:
                if k == b"authorization":
                    auth = v
            text = auth.decode("latin-1")
            token = text[7:].strip() if text[:7].lower() == "bearer " else None
            tokens.check(token, "submit")
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = bool(message.get("more_body", False))
        try:
            body = AllocationBody.model_validate_json(b"".join(chunks))
        except ValidationError as exc:
            message_text, description = validation_message(exc.errors(include_url=False))
            raise ApiError(400, message_text, description) from None
        status, out = allocate_one(self.service, partition, body)  # the ASGI path is decoded
        payload = _json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode("ascii"))]})
        await send({"type": "http.response.body", "body": payload})

    def _remote_refused(self, scope: Scope) -> bool:
        """Without tokens the service answers loopback clients only (decision S2)."""
        if not self.loopback_only:
            return False
        client = scope.get("client")
        host = client[0] if client else None
        return host is not None and host not in _LOOPBACK

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = [500]
        started = [False]
        # group commit (issue 18): the answer waits until what it saw is durable, or becomes a 503
        epochs = self.service.barrier.epochs(scope["path"]) if self.service.group_commit_on else ()
        replaced = [False]

        async def send_wrapper(message: Message) -> None:
            if replaced[0]:
                return                   # the body of an answer replaced by a 503
            if message["type"] == "http.response.start":
                if epochs and (failed := await self.service.barrier.settle(epochs)) is not None:
                    replaced[0] = True
                    started[0] = True
                    status[0] = status_for(failed)
                    resp = exception_response(failed)
                    await resp(scope, receive, send_cors)
                    return
                status[0] = message["status"]
                started[0] = True
                # YuniKorn's webservice answers every request with this header (reference §2).
                message["headers"] = [*message.get("headers", ()), _CORS]
            await send(message)

        async def send_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), _CORS]
            await send(message)

        if self._remote_refused(scope):
            resp = exception_response(_forbidden_remote())
            await resp(scope, receive, send_wrapper)
            return
        router = self.service.router
        try:
            if router is not None and (leader := await router.target(scope)) is not None:
                scope["route"] = _FORWARDED_ROUTE
                status[0] = await router.forwarder.forward(leader, scope, receive, send_cors,
                                                           router.rerouter(scope))
                started[0] = True
                return
            if (self.fast and scope["method"] == "POST"
                    and (m := _ALLOCATE_PATH.match(scope["path"])) is not None):
                scope["route"] = _FAST_ROUTE
                await self._allocate(m.group(1), scope, receive, send_wrapper)
                return
            await self.service.refresh_for_read(scope["method"], scope["path"])
            await self.app(scope, receive, send_wrapper)
        except Exception as exc:  # last resort: the error body (a fault: 500, detail only in the log)
            if started[0]:
                raise
            resp = exception_response(exc)
            await resp(scope, receive, send_wrapper)
        finally:
            if router is not None:
                router.done(scope)
            elapsed = time.perf_counter() - start
            self.service.metrics.observe_request(scope["method"], _route_label(scope), status[0], elapsed)
            if not ACCESS.disabled and ACCESS.isEnabledFor(logging.INFO):
                client = scope.get("client")
                ACCESS.info("%s %s %s", scope["method"], scope["path"], status[0],
                            extra={"method": scope["method"], "path": scope["path"], "status": status[0],
                                   "duration_ms": round(elapsed * 1000, 3),
                                   "client": client[0] if client else ""})


def _forbidden_remote() -> Exception:
    from quotaplane.server.errors import ApiError

    return ApiError(403, "no tokens are configured: only loopback clients are served")
