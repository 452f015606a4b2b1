"""The outer ASGI layer of the service: what every request passes through before any route.

* :class:`Outer` — latency metrics, the loopback guard (decision S2), browser safety (the Host
  allow-list, the Origin and Content-Type of changes, CORS for allowed origins only:
  :mod:`quotaplane.server.browser`), the body size limit (:mod:`quotaplane.server.limits`), the
  last-resort error handler,
  the commit barrier (an answer waits until what it saw is durable, issue 18), writes relayed to
  their partition's leader (:mod:`quotaplane.server.forwarding`), reads of partitions led elsewhere
  caught up first, and the hot paths — ``POST /ws/v1/partition/{p}/allocations``, ``DELETE
  /ws/v1/partition/{p}/allocation/{key}`` (without a query string) and ``POST
  /ws/v1/partition/{p}/application/{app}/asks`` — served without FastAPI's routing and dependency
  pass (issue 38 item 3: that pass is more than half of the server's CPU per release or ask);
* :class:`App` — FastAPI handing those hot paths to :class:`Outer` before Starlette's own middleware
  layers.

Pure ASGI, not ``BaseHTTPMiddleware``: that one costs ~100 µs per request.
"""

from __future__ import annotations

import json as _json
import logging
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from fastapi import FastAPI
from pydantic import BaseModel, ValidationError

from quotaplane.journal.base import one_shot_encoder
from quotaplane.server.browser import BrowserPolicy, is_document_type, media_type
from quotaplane.server.errors import exception_response, status_for
from quotaplane.server.logs import ACCESS

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.server.auth import Tokens
    from quotaplane.server.durability import CommitBarrier
    from quotaplane.server.ha import Leadership
    from quotaplane.server.limits import Limits
    from quotaplane.server.metrics import Metrics
    from quotaplane.server.write_routing import WriteRouter

__all__ = ["App", "Outer", "Service", "fast_route"]


class Service(Protocol):
    """What the outer layer reads of the service per request (:class:`quotaplane.server.app.Service`
    is it). Declared here, where it is read, so that this module imports nothing of the app that
    installs it (no import circle, issue 29)."""

    browser: BrowserPolicy
    limits: Limits
    tokens: Tokens
    barrier: CommitBarrier
    router: WriteRouter | None
    #: the one-leader lease (None without a shared store, or with partitions led apart)
    lease: Leadership | None
    metrics: Metrics

    @property
    def group_commit_on(self) -> bool:
        """True while answers wait for group commits."""

    def form_types(self, method: str, path: str) -> frozenset[str]:
        """The media types besides JSON and YAML the operation documents for its body."""

    async def refresh_for_read(self, method: str, path: str) -> None:
        """Bring the partitions a read shows that another instance leads up to their streams."""

_M = TypeVar("_M", bound=BaseModel)
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The hot paths served by :meth:`Outer._fast` (each documented route has the same path; FastAPI's
#: ``{param}`` matches one segment of the decoded path, as ``[^/]+`` does here).
_ALLOCATE_PATH = re.compile(r"^/ws/v1/partition/([^/]+)/allocations$")
_RELEASE_PATH = re.compile(r"^/ws/v1/partition/([^/]+)/allocation/([^/]+)$")
_ASK_PATH = re.compile(r"^/ws/v1/partition/([^/]+)/application/([^/]+)/asks$")


class _FastRoute:
    """What the request metrics read of a route (its documented path template)."""

    def __init__(self, path: str) -> None:
        self.path = path


#: the hot paths' answer encoder: ``json.dumps(…, ensure_ascii=False, separators=(",", ":"))`` built
#: once (``json.dumps`` with arguments builds an encoder per call: ~1.5 µs of each answer), calling
#: the C encoder directly (``encode`` itself rebuilds it per call, issue 38)
_encode = one_shot_encoder(_json.JSONEncoder(ensure_ascii=False, separators=(",", ":")))

_ALLOCATE_ROUTE = _FastRoute("/ws/v1/partition/{partition}/allocations")
_RELEASE_ROUTE = _FastRoute("/ws/v1/partition/{partition}/allocation/{allocation_key}")
_ASK_ROUTE = _FastRoute("/ws/v1/partition/{partition}/application/{application_id}/asks")


def fast_route(scope: Scope) -> tuple[_FastRoute, re.Match[str]] | None:
    """The hot path ``scope`` asks for (its route and its path match), or None: the normal stack.
    A release with a query string (``?user=``) takes the normal stack, which validates it."""
    method = scope["method"]
    if method == "POST":
        path = scope["path"]
        if (m := _ALLOCATE_PATH.match(path)) is not None:
            return _ALLOCATE_ROUTE, m
        if (m := _ASK_PATH.match(path)) is not None:
            return _ASK_ROUTE, m
    elif method == "DELETE" and not scope.get("query_string") \
            and (m := _RELEASE_PATH.match(scope["path"])) is not None:
        return _RELEASE_ROUTE, m
    return None


class _ForwardedRoute:
    path = "forwarded to the leader"


_FORWARDED_ROUTE = _ForwardedRoute()


_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost", "testclient"})

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

#: answered whatever the Host: a probe (kubelet's names the pod's address) reads nothing private
_PROBES = frozenset({"/healthz", "/readyz", "/ws/v1/scheduler/healthcheck"})


def _route_label(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


class App(FastAPI):
    """FastAPI with the hot paths (:func:`fast_route`) handed to :class:`Outer` before Starlette's
    own middleware layers (error, telemetry, body-limit wrappers: ~10 % of a request). The hot
    paths answer their errors themselves; every other request takes the normal stack."""

    fast: Outer | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        fast = self.fast
        if fast is not None and scope["type"] == "http" and (hot := fast_route(scope)) is not None:
            scope["app"] = self
            await fast(scope, receive, send, hot)      # matched once: the route is handed over
            return
        await super().__call__(scope, receive, send)


class Outer:
    """Pure ASGI middleware: latency metrics, loopback guard, browser safety, body size, and the
    last-resort error handler.

    Pure ASGI (not ``BaseHTTPMiddleware``) because that one costs ~100 µs per request.
    """

    def __init__(self, app: ASGIApp, service: Service, loopback_only: bool, fast: bool = True) -> None:
        self.app = app
        self.service = service
        self.loopback_only = loopback_only
        self.fast = fast
        # read per request: bound once (the service keeps them for its life)
        self._policy = service.browser
        self._max_body = service.limits.max_body_bytes
        #: Content-Type value -> JSON or YAML (clients send the same few values over and over)
        self._document_types: dict[bytes, bool] = {}
        # the hot paths' handlers, imported here rather than per request (a function-level import
        # costs ~1 µs per name each time it runs, issue 38) and not at module level (the routes import
        # the app's modules, which import this one)
        from quotaplane.server.models import AllocationBody
        from quotaplane.server.routes_asks import AskBody, add_ask_one
        from quotaplane.server.routes_core import allocate_one, release_one

        self._allocation_body = AllocationBody
        self._ask_body = AskBody
        self._allocate_one = allocate_one
        self._release_one = release_one
        self._add_ask_one = add_ask_one

    async def _fast(self, route: _FastRoute, m: re.Match[str], scope: Scope, receive: Receive,
                    send: Send) -> None:
        """:meth:`_decide`, answered through ``send``."""
        decided = await self._decide(route, m, scope, receive)
        if decided is None:
            return                  # the client went away
        status, payload = decided
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode("ascii"))]})
        await send({"type": "http.response.body", "body": payload})

    async def _decide(self, route: _FastRoute, m: re.Match[str], scope: Scope,
                      receive: Receive) -> tuple[int, bytes] | None:
        """A hot path without FastAPI's routing and dependency pass: the same token check, body
        model, partition call and answers as its documented route (both call the same
        ``allocate_one``, ``release_one`` or ``add_ask_one``; tests pin each pair). Answers (status,
        body), or None when the client went away; raises the route's errors."""
        tokens = self.service.tokens
        if tokens:
            auth = b""
            for k, v in scope["headers"]:
                if k == b"authorization":
                    auth = v
            text = auth.decode("latin-1")
            token = text[7:].strip() if text[:7].lower() == "bearer " else None
            tokens.check(token, "submit")
        out: Any
        if route is _RELEASE_ROUTE:
            status, out = 200, self._release_one(self.service, m.group(1), m.group(2))
        else:
            raw = await _body(receive)
            if raw is None:
                return None             # the client went away
            if route is _ALLOCATE_ROUTE:
                status, out = self._allocate_one(self.service, m.group(1),
                                                 _decode(self._allocation_body, raw))
            else:
                status, out = 201, self._add_ask_one(self.service, m.group(1), m.group(2),
                                                     _decode(self._ask_body, raw))
        return status, _encode(out).encode("utf-8")

    async def _hot(self, route: _FastRoute, m: re.Match[str], scope: Scope, receive: Receive,
                   send: Send) -> None:
        """A hot path in the common case — screened clean, no CORS, no forwarding, no late lease
        renewal (:meth:`__call__` checks) — as :meth:`__call__` serves it, without its per-request
        closures: decide, let the commit barrier settle (the answer waits for its commit; a failed
        commit replaces it with its 503), answer, count. Same statuses, bodies and headers (tests
        pin the pair against the documented routes)."""
        start = time.perf_counter()
        service = self.service
        barrier = service.barrier
        epochs = barrier.epochs_of(m.group(1)) if service.group_commit_on else ()
        deciding = bool(epochs)
        if deciding:
            barrier.deciding += 1      # until its answer starts (then: alone? see CommitBarrier.settle)
        scope["route"] = route
        status = 500
        try:
            answer: tuple[int, bytes] | BaseException | None
            try:
                answer = await self._decide(route, m, scope, receive)
            except Exception as exc:  # the route's error, answered as the general path answers it
                answer = exc
            if answer is None:
                return                  # the client went away
            alone = False
            if deciding:
                deciding = False
                barrier.deciding -= 1
                alone = barrier.deciding == 0
            if epochs:
                try:
                    # alone, in the common case, without a coroutine (CommitBarrier.settle_alone)
                    now = barrier.settle_alone(epochs) if alone else False
                    failed = await barrier.settle(epochs, alone) if now is False else now
                except Exception as exc:  # last resort, as the general path: an error body
                    failed = exc
                if failed is not None:
                    answer = failed
            if isinstance(answer, BaseException):
                resp = exception_response(answer)
                status = resp.status_code
                await resp(scope, receive, send)
                return
            status, payload = answer
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(payload)).encode("ascii"))]})
            await send({"type": "http.response.body", "body": payload})
        finally:
            if deciding:                # the client went away
                barrier.deciding -= 1
            elapsed = time.perf_counter() - start
            service.metrics.observe_request(scope["method"], route.path, status, elapsed)
            if not ACCESS.disabled and ACCESS.isEnabledFor(logging.INFO):
                _access(scope, status, elapsed)

    def _remote_refused(self, scope: Scope) -> bool:
        """Without tokens the service answers loopback clients only (decision S2)."""
        if not self.loopback_only:
            return False
        client = scope.get("client")
        host = client[0] if client else None
        return host is not None and host not in _LOOPBACK

    def _screen(self, scope: Scope, receive: Receive) -> tuple[Exception | None, bytes | None, Receive]:
        """What every request passes first (issue 32 items 7 and 10): the Host allow-list, the
        Origin and Content-Type of a change, and the body size. Answers (the refusal or None, the
        ``Access-Control-Allow-Origin`` value or None, the receive to use)."""
        host = origin = ctype = length = None
        for k, v in scope["headers"]:
            if k == b"host":
                host = v
            elif k == b"origin":
                origin = v
            elif k == b"content-type":
                ctype = v
            elif k == b"content-length":
                length = v
        policy = self._policy
        if not policy.host_allowed(host) and scope["path"] not in _PROBES:
            return _refused_host(host, policy), None, receive
        cors = policy.cors_origin(origin) if origin is not None else None
        if scope["method"] in _SAFE_METHODS:
            return None, cors, receive
        if origin is not None and not policy.origin_allowed(origin, host):
            return _refused_origin(origin), None, receive
        if ctype is not None and not self._type_accepted(scope, ctype):
            return _refused_type(ctype), cors, receive
        limit = self._max_body
        if length is not None:
            if not length.isdigit():
                return _bad_length(length), cors, receive
            if int(length) > limit:
                return _too_large(limit), cors, receive
            return None, cors, receive
        return None, cors, _bounded(receive, limit)

    def _type_accepted(self, scope: Scope, ctype: bytes) -> bool:
        known = self._document_types.get(ctype)
        if known:
            return True
        kind = media_type(ctype.decode("latin-1"))
        if known is None:
            document = is_document_type(kind)
            if len(self._document_types) < 64:      # bounded: a client may send any value
                self._document_types[ctype] = document
            if document:
                return True
        # an operation that documents another body type (the web page's login form)
        return kind in self.service.form_types(scope["method"], scope["path"])

    async def __call__(self, scope: Scope, receive: Receive, send: Send,
                       hot: tuple[_FastRoute, re.Match[str]] | None = None) -> None:
        """Serve one request; ``hot``: the hot path :class:`App` matched already (None: match here)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if hot is not None and self.service.router is None and not self._remote_refused(scope) \
                and ((lease := self.service.lease) is None or not lease.renewing()):
            refused, cors, bounded = self._screen(scope, receive)
            if refused is None and cors is None:
                await self._hot(hot[0], hot[1], scope, bounded, send)
                return
        start = time.perf_counter()
        status = [500]
        started = [False]
        # group commit (issue 18): the answer waits until what it saw is durable, or becomes a 503
        barrier = self.service.barrier
        epochs = barrier.epochs(scope["path"]) if self.service.group_commit_on else ()
        deciding = [False]
        replaced = [False]
        refusal, cors, receive = self._screen(scope, receive)
        extra: tuple[tuple[bytes, bytes], ...] = () if cors is None else (
            (b"access-control-allow-origin", cors), (b"vary", b"Origin"))

        async def send_wrapper(message: Message) -> None:
            if replaced[0]:
                return                   # the body of an answer replaced by a 503
            if message["type"] == "http.response.start":
                alone = False
                if deciding[0]:
                    deciding[0] = False
                    barrier.deciding -= 1
                    alone = barrier.deciding == 0
                if epochs and (failed := await barrier.settle(epochs, alone)) is not None:
                    replaced[0] = True
                    started[0] = True
                    status[0] = status_for(failed)
                    resp = exception_response(failed)
                    await resp(scope, receive, send_extra)
                    return
                status[0] = message["status"]
                started[0] = True
                if extra:
                    message["headers"] = [*message.get("headers", ()), *extra]
            await send(message)

        async def send_extra(message: Message) -> None:
            if extra and message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *extra]
            await send(message)

        if refusal is None and self._remote_refused(scope):
            refusal = _forbidden_remote()
        if refusal is None and cors is not None and scope["method"] == "OPTIONS":
            status[0] = 204
            started[0] = True
            await _preflight(send_extra)
            return
        if refusal is not None:
            resp = exception_response(refusal)
            await resp(scope, receive, send_wrapper)
            return
        router = self.service.router
        if epochs:
            deciding[0] = True       # until its answer starts (then: alone? see CommitBarrier.settle)
            barrier.deciding += 1
        try:
            if (lease := self.service.lease) is not None and lease.renewing():
                await lease.renewal()       # a late renewal holds the request (not a 503)
            if router is not None and (leader := await router.target(scope)) is not None:
                scope["route"] = _FORWARDED_ROUTE
                status[0] = await router.forwarder.forward(leader, scope, receive, send_extra,
                                                           router.rerouter(scope))
                started[0] = True
                return
            if self.fast and (hot is not None or (hot := fast_route(scope)) is not None):
                scope["route"] = hot[0]
                await self._fast(hot[0], hot[1], scope, receive, send_wrapper)
                return
            await self.service.refresh_for_read(scope["method"], scope["path"])
            await self.app(scope, receive, send_wrapper)
        except Exception as exc:  # last resort: the error body (a fault: 500, detail only in the log)
            if started[0]:
                raise
            resp = exception_response(exc)
            await resp(scope, receive, send_wrapper)
        finally:
            if deciding[0]:             # no answer (the client went away, a forwarded request)
                barrier.deciding -= 1
            if router is not None:
                router.done(scope)
            elapsed = time.perf_counter() - start
            self.service.metrics.observe_request(scope["method"], _route_label(scope), status[0], elapsed)
            if not ACCESS.disabled and ACCESS.isEnabledFor(logging.INFO):
                _access(scope, status[0], elapsed)


def _access(scope: Scope, status: int, elapsed: float) -> None:
    """The access log's line of one request (``--access-log``)."""
    client = scope.get("client")
    ACCESS.info("%s %s %s", scope["method"], scope["path"], status,
                extra={"method": scope["method"], "path": scope["path"], "status": status,
                       "duration_ms": round(elapsed * 1000, 3), "client": client[0] if client else ""})


async def _body(receive: Receive) -> bytes | None:
    """The whole request body, or None when the client disconnected first."""
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        more = bool(message.get("more_body", False))
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _decode(model: type[_M], raw: bytes) -> _M:
    """``raw`` validated as ``model`` — pydantic-core's JSON parser, as ``parse_body`` of the
    documented routes, so a bad body is the same 400 naming the field. (Measured, issue 38: ~7 µs
    of a decision's CPU; msgspec would save ~5 of them but is not a dependency.)"""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        from quotaplane.server.errors import ApiError, validation_message

        message_text, description = validation_message(exc.errors(include_url=False))
        raise ApiError(400, message_text, description) from None


async def _preflight(send: Send) -> None:
    """A CORS preflight from an allowed origin: the methods and headers a page may use."""
    await send({"type": "http.response.start", "status": 204,
                "headers": [(b"access-control-allow-methods", b"GET, POST, PUT, DELETE, OPTIONS"),
                            (b"access-control-allow-headers", b"Authorization, Content-Type, Accept"),
                            (b"access-control-max-age", b"600")]})
    await send({"type": "http.response.body", "body": b""})


def _bounded(receive: Receive, limit: int) -> Receive:
    """``receive`` that refuses (413) a body without ``Content-Length`` once it passes ``limit``."""
    seen = 0

    async def bounded() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise _too_large(limit)
        return message

    return bounded


def _too_large(limit: int) -> Exception:
    from quotaplane.server.errors import ApiError

    return ApiError(413, f"the request body is larger than {limit} bytes (max-body-bytes)")


def _bad_length(length: bytes) -> Exception:
    from quotaplane.server.errors import ApiError

    return ApiError(400, f"Content-Length {length.decode('latin-1')[:40]!r} is not a number of bytes")


def _refused_host(host: bytes | None, policy: BrowserPolicy) -> Exception:
    from quotaplane.server.errors import ApiError

    shown = "none" if host is None else repr(host.decode("latin-1")[:200])
    return ApiError(403, f"host {shown} is not allowed (allowed: {policy.describe_hosts()}; "
                         "see --allowed-hosts)")


def _refused_origin(origin: bytes) -> Exception:
    from quotaplane.server.errors import ApiError

    return ApiError(403, f"a change from the page of origin {origin.decode('latin-1')[:200]!r} is refused: "
                         "it is not this service's origin nor an allowed one (see --allowed-origins)")


def _refused_type(ctype: bytes) -> Exception:
    from quotaplane.server.errors import ApiError

    return ApiError(415, f"Content-Type {ctype.decode('latin-1')[:200]!r} is not accepted for a change: "
                         "send application/json (or YAML where the operation takes a document), e.g. "
                         "curl --json or -H 'Content-Type: application/json'")


def _forbidden_remote() -> Exception:
    from quotaplane.server.errors import ApiError

    return ApiError(403, "no tokens are configured: only loopback clients are served")
