"""Writes routed to the partition's leader (issue 18 #2: partitions on several instances).

With ``serve --partitions`` each partition is written by one instance only. A write that reaches
another instance — through a plain load balancer, or a client that does not know the layout — is
forwarded to the partition's leader and its answer is relayed unchanged, so any HTTP client can talk
to any instance. A read is not forwarded: every instance serves reads after catching up on the
partition's stream (:meth:`quotaplane.server.app.Service.refresh_for_read`).

Rules:

* **At most two hops.** The forwarded request carries ``X-Quotaplane-Forwarded``, the instances it
  passed through. Two relays cover a hand-over: a write relayed to the old leader just after it
  handed the partition back is passed on to the new one, which waits until it has taken the
  partition. An instance that receives a request relayed :data:`MAX_HOPS` times answers it itself
  (503 with the leader when it does not lead) — no request travels in circles.
* **No leader for a moment** (a hand-over: released by one, not yet taken by the other): the write
  waits for the hurried leadership rounds, at most the leadership's ``hold``, instead of a 503
  (:mod:`quotaplane.server.write_routing` decides where a write goes).
* **The leader's answer is the answer.** Status, body and the headers a client acts on
  (``Content-Type``, ``Retry-After``) are relayed as they are; the leader sent them only once the
  change was durable (S1).
* **No leader reachable** (refused connection, unknown leader): the request never left this instance
  and changed nothing — answered 503 with the leader's URL, exactly as without forwarding.
* **The leader did not answer** after the request was sent (a timeout, a dropped connection): the
  change may have been applied or not, so the answer is **502** saying so, never the 503 "nothing was
  changed". Allocation keys make a retry safe; or read the allocation back.
* Credentials travel with the request (``Authorization``), so the leader checks them itself. Without
  tokens an instance answers loopback clients only, so forwarding between machines needs tokens, like
  any remote client.

The relay speaks HTTP/1.1 itself over a small pool of keep-alive connections per leader: a general
HTTP client (httpx) cost three times the rest of the request, and the relay only needs one request
and one answer with a length. An idle connection is dropped after :data:`IDLE_SECONDS` — well inside
the leader's keep-alive timeout (uvicorn's 5 s) — so a request is never written to a connection the
leader is closing.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from starlette.types import Receive, Scope, Send

from quotaplane.errors import NotLeaderError
from quotaplane.server.durability import partition_of_path
from quotaplane.server.errors import error_response, exception_response

__all__ = ["FORWARDED_HEADER", "MAX_HOPS", "Forwarder", "hops", "leader_write"]

_log = logging.getLogger("quotaplane.server")

#: set on a forwarded request (its value: the forwarding instance's URL); never forwarded again
FORWARDED_HEADER = b"x-quotaplane-forwarded"

#: the request headers that describe this hop only (RFC 9110 §7.6.1) or that the relay writes itself
_HOP_BY_HOP = frozenset({b"host", b"content-length", b"connection", b"keep-alive", b"transfer-encoding",
                         b"te", b"trailer", b"upgrade", b"proxy-authorization", b"proxy-connection",
                         b"expect", FORWARDED_HEADER})

#: the answer headers relayed to the client (the rest describe the leader's connection)
_RELAYED = frozenset({b"content-type", b"retry-after", b"location", b"last-event-id"})

#: seconds to wait for the leader: to connect, and for the whole answer
CONNECT_TIMEOUT = 2.0
ANSWER_TIMEOUT = 30.0
#: an idle connection to a leader older than this is closed instead of reused
IDLE_SECONDS = 2.0
#: idle connections kept per leader
MAX_IDLE = 64

_READS = frozenset({"GET", "HEAD", "OPTIONS"})

#: how many times a request may be relayed: twice covers a hand-over (relayed to the old leader,
#: which hands it on to the new one); a request relayed that often is answered where it arrives
MAX_HOPS = 2


def leader_write(scope: Scope) -> tuple[bool, str | None]:
    """``(True, partition)`` for a request only a leader applies — a write (not GET/HEAD/OPTIONS) to
    a partition (``/ws/v1/partition/{name}/…``) or, with ``partition`` None, to the configuration
    (``/ws/v1/config``); ``(False, None)`` otherwise. The path is matched once."""
    if scope["method"] in _READS:
        return False, None
    path = scope["path"]
    partition = partition_of_path(path)
    return (partition is not None or path == "/ws/v1/config"), partition


def hops(scope: Scope) -> int:
    """How many instances relayed this request so far (the URLs in ``X-Quotaplane-Forwarded``)."""
    return sum(len(value.split(b",")) for key, value in scope["headers"] if key == FORWARDED_HEADER)


def _via(scope: Scope) -> bytes:
    """The instances this request came through (``X-Quotaplane-Forwarded``), empty if none."""
    return b", ".join(value for key, value in scope["headers"] if key == FORWARDED_HEADER)


class _NotSent(Exception):
    """The request never reached the leader (nothing changed there)."""


class _NoAnswer(Exception):
    """The request was sent, the answer did not come (the change may have been applied)."""


_Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _Answer:
    __slots__ = ("body", "headers", "keep_alive", "status")

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes,
                 keep_alive: bool) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive


async def _read_answer(reader: asyncio.StreamReader, method: str) -> _Answer:
    """One HTTP/1.1 answer: status line, headers, and a body by length, by chunks or up to the end."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise ValueError(f"not an HTTP/1.1 answer: {lines[0][:80]!r}")
    status = int(parts[1])
    headers: list[tuple[bytes, bytes]] = []
    length: int | None = None
    chunked = False
    keep_alive = parts[0] == b"HTTP/1.1"
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name, value = name.strip().lower(), value.strip()
        headers.append((name, value))
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and value.lower() == b"chunked":
            chunked = True
        elif name == b"connection":
            keep_alive = b"close" not in value.lower()
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        body = b""
    elif chunked:
        pieces: list[bytes] = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":   # trailers
                    pass
                break
            pieces.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(pieces)
    elif length is not None:
        body = await reader.readexactly(length)
    else:
        body = await reader.read()
        keep_alive = False
    return _Answer(status, headers, body, keep_alive)


def _usable(conn: _Connection) -> bool:
    """An idle connection still open both ways: a reset by the leader is not an end of stream for the
    reader (its error is kept instead), and the transport may be closed already."""
    reader, writer = conn
    return not writer.is_closing() and not reader.at_eof() and reader.exception() is None


class Forwarder:
    """Relays requests to the leaders over pooled keep-alive connections (opened on first use, on the
    event loop that serves the requests)."""

    def __init__(self, advertise: str) -> None:
        self.advertise = advertise
        self._idle: dict[tuple[str, str, int], list[tuple[float, _Connection]]] = {}
        #: requests relayed so far (answered by a leader)
        self.forwarded = 0

    async def aclose(self) -> None:
        """Close the idle connections (the service stops)."""
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for _, (_, writer) in conns:
                writer.close()

    async def _connection(self, key: tuple[str, str, int], fresh: bool = False) -> _Connection:
        conns = None if fresh else self._idle.get(key)
        now = time.monotonic()
        while conns:
            since, conn = conns.pop()
            if now - since < IDLE_SECONDS and _usable(conn):
                return conn
            conn[1].close()
        scheme, host, port = key
        context = ssl.create_default_context() if scheme == "https" else None
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=context, server_hostname=host if context else None),
                CONNECT_TIMEOUT)
        except (TimeoutError, OSError, ssl.SSLError) as exc:
            raise _NotSent(f"cannot connect: {exc or type(exc).__name__}") from exc

    def _release(self, key: tuple[str, str, int], conn: _Connection) -> None:
        conns = self._idle.setdefault(key, [])
        if len(conns) < MAX_IDLE:
            conns.append((time.monotonic(), conn))
        else:
            conn[1].close()

    async def _exchange(self, leader: str, method: str, target: str, headers: list[tuple[bytes, bytes]],
                        body: bytes, via: bytes) -> _Answer:
        try:
            url = urlsplit(leader)
            port = url.port or (443 if url.scheme == "https" else 80)
        except ValueError as exc:                       # a bad port in the advertised URL
            raise _NotSent(f"not a usable URL: {leader!r} ({exc})") from exc
        if url.scheme not in ("http", "https") or not url.hostname:
            raise _NotSent(f"not an http(s) URL: {leader!r}")
        key = (url.scheme, url.hostname, port)
        netloc = url.netloc.rsplit("@", 1)[-1].encode("ascii")
        path = url.path.rstrip("/").encode("latin-1") + target.encode("latin-1")
        request = [method.encode("ascii"), b" ", path, b" HTTP/1.1\r\nhost: ", netloc,
                   b"\r\ncontent-length: ", str(len(body)).encode("ascii"), b"\r\n",
                   FORWARDED_HEADER, b": ", (via + b", ") if via else b"", self.advertise.encode("latin-1"),
                   b"\r\n"]
        for name, value in headers:
            request += [name, b": ", value, b"\r\n"]
        request += [b"\r\n", body]
        data = b"".join(request)
        reader, writer = await self._connection(key)
        try:
            writer.write(data)
        except (RuntimeError, OSError):
            # the connection went away after it was taken from the pool (uvloop refuses a write on a
            # closed handle): nothing was sent — once more on a new connection
            writer.close()
            reader, writer = await self._connection(key, fresh=True)
            try:
                writer.write(data)
            except (RuntimeError, OSError) as exc:
                writer.close()
                raise _NotSent(f"connection lost: {exc}") from exc
        try:
            answer = await asyncio.wait_for(_read_answer(reader, method), ANSWER_TIMEOUT)
        except BaseException as exc:
            writer.close()
            if isinstance(exc, (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError,
                                asyncio.LimitOverrunError, ValueError)):
                raise _NoAnswer(f"{type(exc).__name__}: {exc}") from exc
            raise
        if answer.keep_alive:
            self._release(key, (reader, writer))
        else:
            writer.close()
        return answer

    async def forward(self, leader: str, scope: Scope, receive: Receive, send: Send,
                      reroute: Callable[[str], Awaitable[str | None]] | None = None) -> int:
        """Send this request to ``leader`` and relay its answer; returns the status answered.
        ``reroute(leader)``, when the leader could not be reached (nothing was sent): the leader to
        try next, once the leadership rounds have looked again (None: give up, answer 503)."""
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return 499                       # the client went away: nothing was sent on
            chunks.append(message.get("body", b""))
            more = bool(message.get("more_body", False))
        target = scope.get("root_path", "") + scope["path"]
        query = scope.get("query_string", b"")
        if query:
            target += "?" + query.decode("latin-1")
        headers = [(k, v) for k, v in scope["headers"] if k not in _HOP_BY_HOP]
        body, via = b"".join(chunks), _via(scope)
        try:
            while True:
                try:
                    answer = await self._exchange(leader, scope["method"], target, headers, body, via)
                    break
                except _NotSent:
                    # nothing was sent: safe to try again where the rounds now say (a leader that is
                    # starting or restarting, a hand-over under way)
                    nxt = await reroute(leader) if reroute is not None else None
                    if nxt is None:
                        raise
                    leader = nxt
        except _NotSent as exc:
            # never reached the leader: nothing changed anywhere — the answer without forwarding
            _log.warning("could not forward %s %s to the leader %s: %s", scope["method"], scope["path"],
                         leader, exc)
            resp = exception_response(NotLeaderError(
                f"this instance does not lead what {scope['path']} changes and could not reach its leader "
                f"{leader}", leader=leader))
            await resp(scope, receive, send)
            return resp.status_code
        except _NoAnswer as exc:
            _log.warning("forwarded %s %s to the leader %s: no answer: %s", scope["method"], scope["path"],
                         leader, exc)
            resp = error_response(502, f"forwarded to the leader {leader}, which did not answer: the change "
                                       "may or may not have been applied; read it back or retry (an "
                                       "allocation key makes a retry safe)", outcome="unknown")
            await resp(scope, receive, send)
            return 502
        self.forwarded += 1
        relayed = [(k, v) for k, v in answer.headers if k in _RELAYED]
        relayed.append((b"content-length", str(len(answer.body)).encode("ascii")))
        await send({"type": "http.response.start", "status": answer.status, "headers": relayed})
        await send({"type": "http.response.body", "body": answer.body})
        return answer.status
