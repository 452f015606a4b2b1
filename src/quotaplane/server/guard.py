"""Connection limits under the HTTP server: what a slow or idle client may hold (issue 32 item 8).

uvicorn reads a request's headers for as long as the client takes, keeps every connection it accepts
and, when the process runs out of file descriptors, stops accepting (asyncio) or accepts and drops
the waiting connections (uvloop/libuv): 1,100 slowloris connections under an open-files limit of
1,024 made every other request fail. :class:`GuardedHttp` (uvicorn's httptools protocol with the
limits of :class:`quotaplane.server.limits.Limits`) bounds each of those:

* **open connections** (``max-connections``): when a new connection would pass the limit, the one
  that has waited longest for its request (headers not complete, or an idle keep-alive connection),
  else the one that has been sending its body longest, is closed to make room; only when every
  connection is busy with a request or a stream does the new one get a 503. A slow client therefore
  cannot crowd out one that sends its request at once: the first is always older. The limit stays
  under the open-files limit (with room for a full accept backlog, :data:`BACKLOG`), so the process
  never runs out of descriptors;
* **request headers** (``header-timeout``, ``max-header-bytes``): complete within 10 s of the
  connection (or of the previous answer on a kept-alive one), or the connection gets a 408; larger
  than 64 KiB, a 431;
* **request bodies** (``body-timeout``): complete within 30 s of their headers, or a 408;
* **answers** (``send-timeout``): a client that accepts none of the data waiting for it for 30 s is
  disconnected (what is queued for it is then freed); an event stream's kernel send buffer is kept
  small (:meth:`GuardedHttp.bound_send_buffer`), so a client that stops reading is found out after
  about 100 KiB, not after the kernel has buffered megabytes for it.

Timeouts are checked by one sweep per second over the connections in order of their deadline (not a
timer per request: the hot path only records a time), so a timeout fires up to a second late. Every
refusal carries YuniKorn's error body.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections import OrderedDict
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from quotaplane.server.limits import Limits

__all__ = ["BACKLOG", "CONNECTION_EXTENSION", "ConnectionGuard", "GuardedHttp", "guarded_protocol"]

_log = logging.getLogger("quotaplane.server")

#: the listening socket's accept backlog: an event loop accepts at most about this many connections
#: at once before a protocol can close others, so the connection limit keeps this much room under
#: the open-files limit (:data:`quotaplane.server.limits.FD_RESERVE`)
BACKLOG = 128

_SWEEP_EVERY = 1.0

#: the ASGI scope extension holding the request's :class:`GuardedHttp`
CONNECTION_EXTENSION = "quotaplane.connection"

#: the kernel send buffer of an event stream's socket (bytes)
STREAM_SEND_BUFFER = 64 * 1024


def _answer(status: int, reason: str, message: str) -> bytes:
    body = json.dumps({"status_code": status, "message": message, "description": message}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json; charset=UTF-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


class ConnectionGuard:
    """The connections of one server: how many are open, which wait for headers or a body (oldest
    first: the order of eviction and of the timeout sweep), and counters for the metrics."""

    def __init__(self, limits: Limits, clock: Any = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self.open = 0
        #: connections waiting for request headers (new or kept alive), with the time they started
        self.waiting: OrderedDict[GuardedHttp, float] = OrderedDict()
        #: connections whose request body is being received, with the time its headers completed
        self.reading: OrderedDict[GuardedHttp, float] = OrderedDict()
        self.evicted = 0
        self.refused = 0
        self.timed_out = 0
        self._sweeping: asyncio.TimerHandle | None = None
        self._last_warning = 0.0

    # -- admission ------------------------------------------------------------------------------
    def admit(self, conn: GuardedHttp) -> bool:
        """Count ``conn`` in; when the limit is reached, close the oldest waiting connection to
        make room. False when none can be closed (``conn`` is then refused)."""
        if self.open >= self.limits.max_connections:
            victim = self._oldest()
            if victim is None:
                self.refused += 1
                self._warn("refused a connection: every one of the %d open connections is busy "
                           "(max-connections)", self.limits.max_connections)
                return False
            self.evicted += 1
            self._warn("closed the connection that waited longest for its request to make room "
                       "(max-connections %d reached)", self.limits.max_connections)
            victim.drop()
        self.open += 1
        self._start_sweeping(conn.loop)
        return True

    def _oldest(self) -> GuardedHttp | None:
        for queue in (self.waiting, self.reading):
            if queue:
                return next(iter(queue))
        return None

    def release(self, conn: GuardedHttp) -> None:
        """``conn`` is gone (closed by either side): forget it."""
        self.waiting.pop(conn, None)
        self.reading.pop(conn, None)
        self.open -= 1

    # -- timeouts -------------------------------------------------------------------------------
    def _start_sweeping(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._sweeping is None:
            self._sweeping = loop.call_later(_SWEEP_EVERY, self._sweep, loop)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        now = self.clock()
        for queue, timeout, what in ((self.waiting, self.limits.header_timeout, "headers"),
                                     (self.reading, self.limits.body_timeout, "body")):
            while queue:
                conn, since = next(iter(queue.items()))
                if now - since < timeout:
                    break                       # the rest started later
                queue.pop(conn)
                self.timed_out += 1
                conn.time_out(what, timeout)
        self._sweeping = loop.call_later(_SWEEP_EVERY, self._sweep, loop) if self.open else None

    def _warn(self, message: str, *args: Any) -> None:
        # under an attack this happens per connection: one line per 10 s, with the running counts
        now = self.clock()
        if now - self._last_warning >= 10.0:
            self._last_warning = now
            _log.warning(message + " [so far: %d closed to make room, %d refused, %d timed out]",
                         *args, self.evicted, self.refused, self.timed_out)


#: uvicorn's protocol methods that :class:`GuardedHttp` extends, called directly rather than through
#: ``super()``: each request passes through eight of them (and ``on_header`` once per header), and a
#: ``super()`` call builds a proxy object and searches the MRO each time — with the limit read through
#: three attributes, the guard cost 34 k instructions per request (callgrind, a bare answer 128 k with
#: uvicorn's own protocol, 163 k within the guard; issue 38 service path)
_data_received = HttpToolsProtocol.data_received
_on_url = HttpToolsProtocol.on_url
_on_header = HttpToolsProtocol.on_header
_on_headers_complete = HttpToolsProtocol.on_headers_complete
_on_body = HttpToolsProtocol.on_body
_on_message_complete = HttpToolsProtocol.on_message_complete
_on_response_complete = HttpToolsProtocol.on_response_complete


class GuardedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol within :class:`ConnectionGuard`'s limits (see the module)."""

    guard: ClassVar[ConnectionGuard]
    #: ``guard.limits.max_header_bytes``, read on every header (:func:`guarded_protocol` sets both)
    max_header_bytes: ClassVar[int]

    _counted = False
    _refused = False
    _header_bytes = 0
    _send_timer: asyncio.TimerHandle | None = None

    # -- the connection -------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.guard.admit(self):
            self._refuse(503, "Service Unavailable",
                         f"too many connections: all {self.guard.limits.max_connections} are busy "
                         "(max-connections); retry later")
            return
        self._counted = True
        self._await_request()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._counted:
            self._counted = False
            self.guard.release(self)
        self._cancel_send_timer()
        super().connection_lost(exc)

    def drop(self) -> None:
        """Close at once, answering nothing (made room for a new connection)."""
        if self._counted:
            self._counted = False
            self.guard.release(self)
        self.transport.abort()

    def time_out(self, what: str, timeout: float) -> None:
        """The request's ``what`` (headers or body) did not arrive in ``timeout`` seconds: 408."""
        option = "header-timeout" if what == "headers" else "body-timeout"
        self._refuse(408, "Request Timeout",
                     f"the request {what} did not arrive within {timeout:g} s ({option})")

    def _refuse(self, status: int, reason: str, message: str) -> None:
        self._refused = True
        self.guard.waiting.pop(self, None)
        self.guard.reading.pop(self, None)
        if self.transport.is_closing():
            return
        if self.cycle is None or not self.cycle.response_started:
            # written at once to the socket when the client reads at all; the close below does not
            # wait for a client that does not (the descriptor is what is being protected)
            self.transport.write(_answer(status, reason, message))
        self.transport.abort()

    def _await_request(self) -> None:
        """Wait for the next request's headers (a new connection or one kept alive)."""
        self._header_bytes = 0
        guard = self.guard
        guard.reading.pop(self, None)
        guard.waiting[self] = guard.clock()
        guard.waiting.move_to_end(self)

    # -- the request (httptools callbacks) ------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        _data_received(self, data)
        if (self._header_bytes > self.max_header_bytes and self._counted
                and self in self.guard.waiting):
            self._too_large()

    def on_url(self, url: bytes) -> None:
        size = self._header_bytes = self._header_bytes + len(url)
        if size <= self.max_header_bytes:
            _on_url(self, url)

    def on_header(self, name: bytes, value: bytes) -> None:
        size = self._header_bytes = self._header_bytes + len(name) + len(value) + 4
        if size <= self.max_header_bytes:
            _on_header(self, name, value)

    def on_headers_complete(self) -> None:
        if self._refused:
            return
        guard = self.guard
        guard.waiting.pop(self, None)
        if self._header_bytes > self.max_header_bytes:
            self._too_large()
            return
        if self._counted:
            guard.reading[self] = guard.clock()
        # the routes reach the connection through the scope (an event stream bounds its socket buffer)
        scope: dict[str, Any] = self.scope  # type: ignore[assignment]  # (not typing.cast: a call per request)
        scope.setdefault("extensions", {})[CONNECTION_EXTENSION] = self
        _on_headers_complete(self)

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            _on_body(self, body)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        self.guard.reading.pop(self, None)
        _on_message_complete(self)

    def on_response_complete(self) -> None:
        _on_response_complete(self)
        # idle (uvicorn armed its keep-alive timer; not when a pipelined request started instead)
        if self._counted and self.timeout_keep_alive_task is not None:
            self._await_request()

    def _too_large(self) -> None:
        self.guard.waiting.pop(self, None)
        self._refuse(431, "Request Header Fields Too Large",
                     f"the request line and headers are larger than {self.max_header_bytes} "
                     "bytes (max-header-bytes)")

    def bound_send_buffer(self, size: int = STREAM_SEND_BUFFER) -> None:
        """Keep at most about ``size`` bytes in the kernel for this client (a long-lived stream): the
        kernel would otherwise grow the buffer of a client that does not read to megabytes, and the
        send timeout only starts once it is full."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)

    # -- the answer (flow control) --------------------------------------------------------------
    def pause_writing(self) -> None:
        super().pause_writing()
        self._arm_send_timer()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_send_timer()

    def _arm_send_timer(self) -> None:
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.guard.limits.send_timeout, self._send_timed_out)

    def _cancel_send_timer(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _send_timed_out(self) -> None:
        self._send_timer = None
        self.guard.timed_out += 1
        self.transport.abort()


def guarded_protocol(limits: Limits) -> tuple[type[GuardedHttp], ConnectionGuard]:
    """A protocol class for ``uvicorn.Config(http=…)`` bound to a fresh guard of ``limits``."""
    guard = ConnectionGuard(limits)
    cls = type("GuardedHttp", (GuardedHttp,), {"guard": guard, "max_header_bytes": limits.max_header_bytes})
    return cls, guard
