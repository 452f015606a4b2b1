"""The front's writes on the wire: a small HTTP/1.1 keep-alive client over asyncio streams.

Why: the front makes three API calls per admitted pod (the ungate patch, the ``QuotaAdmitted``
condition, the ``Admitted`` Event). Through lightkube and httpx each cost ~800 µs of the front's CPU
(measured against the emulator, one call at a time and 16 at once: URL parsing and merging, the
connection pool's scan of every connection per request, anyio's cancel scopes, h11's validation) — 85 %
of the front's CPU per pod at Kueue's shapes (docs/scale.md "The Kubernetes front"). The same call
written here costs ~50 µs. Lists and watches (streams, pages, bookmarks) stay on lightkube.

It is used only where it behaves as lightkube's client does (:func:`wire_for`): the server is
``http`` or ``https`` with the same TLS context (lightkube's ``verify_cluster``: the cluster's CA, the
user's client certificate), the user authenticates with no credentials, a static bearer token, or a
token file (re-read once on a ``401``, as lightkube's ``BearerTokenFileAuth`` and client-go do), and no
proxy is configured in the environment. Anything else (an exec plugin, basic auth, a proxy) keeps
every call on lightkube.

Failures look as lightkube's do to :meth:`quotaplane.kube.api.KubeApi.call`: an answer ``>= 400`` is
raised through lightkube's own ``raise_for_status`` (its ``ApiError`` with the decoded ``Status``, or
httpx's status error), no answer at all is an ``OSError`` (a connection refused, reset or closed
before the whole answer came, or the client's timeout) — the transient "no answer" the retry policy
retries. A connection is reused only after a whole answer that keeps it alive, and never once the
server closed it while idle.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode, urlsplit

__all__ = ["Answer", "Wire", "wire_for"]

#: the environment variables that send httpx (``trust_env``) through a proxy
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy")
#: idle connections kept per client (the controller's workers and action tasks: 16 + 4 by default)
_MAX_IDLE = 32


class Answer:
    """An HTTP answer: ``status``, ``headers`` (lower-case names) and the ``body`` bytes."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        """The body as JSON (None when empty)."""
        return json.loads(self.body) if self.body else None


class Wire:
    """HTTP/1.1 requests to one server on a small pool of keep-alive connections.

    ``authorization`` gives the ``Authorization`` header's value (None: none); called with True after a
    ``401`` it may read its credentials again, and the request is sent once more when the value
    changed."""

    def __init__(self, base_url: str, *, ssl_context: ssl.SSLContext | None = None,
                 authorization: Callable[[bool], str | None] = lambda _refresh: None,
                 timeout: float | None = 10.0, user_agent: str = "quotaplane") -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url: {base_url!r} is not an http(s) URL")
        tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if tls else 80)
        self.ssl = (ssl_context or ssl.create_default_context()) if tls else None
        self.prefix = parts.path.rstrip("/")
        self.authorization = authorization
        self.timeout = timeout
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.port != (443 if tls else 80):
            host = f"{host}:{self.port}"
        self._fixed = f"Host: {host}\r\nUser-Agent: {user_agent}\r\nAccept: application/json\r\n"
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    def url(self, path: str, params: dict[str, Any] | None = None) -> str:
        """The request target of ``path`` (relative to the base URL) with its query ``params``."""
        target = f"{self.prefix}/{path.lstrip('/')}"
        return f"{target}?{urlencode(params)}" if params else target

    async def request(self, method: str, target: str, body: bytes | None = None,
                      content_type: str | None = None) -> Answer:
        """Send one request (``target`` from :meth:`url`) and read its whole answer."""
        auth = self.authorization(False)
        answer = await self._exchange(method, target, body, content_type, auth)
        if answer.status == 401:
            fresh = self.authorization(True)
            if fresh != auth:
                answer = await self._exchange(method, target, body, content_type, fresh)
        return answer

    async def close(self) -> None:
        """Close the idle connections."""
        idle, self._idle = self._idle, []
        for _reader, writer in idle:
            writer.close()

    def _request_bytes(self, method: str, target: str, body: bytes | None, content_type: str | None,
                       auth: str | None) -> bytes:
        head = f"{method} {target} HTTP/1.1\r\n{self._fixed}"
        if auth is not None:
            head += f"Authorization: {auth}\r\n"
        if body is not None:
            head += f"Content-Type: {content_type or 'application/json'}\r\nContent-Length: {len(body)}\r\n"
        elif method in ("POST", "PUT", "PATCH"):
            head += "Content-Length: 0\r\n"
        return (head + "\r\n").encode("latin-1") + (body or b"")

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        while self._idle:
            reader, writer = self._idle.pop()
            if not writer.is_closing() and not reader.at_eof() and not reader._buffer:  # type: ignore[attr-defined]
                return reader, writer
            writer.close()          # the server closed it while idle (or sent what nobody asked for)
        return await asyncio.open_connection(self.host, self.port, ssl=self.ssl,
                                             server_hostname=self.host if self.ssl is not None else None)

    async def _exchange(self, method: str, target: str, body: bytes | None, content_type: str | None,
                        auth: str | None) -> Answer:
        data = self._request_bytes(method, target, body, content_type, auth)
        conn = None
        try:
            async with asyncio.timeout(self.timeout):
                conn = await self._connection()
                reader, writer = conn
                writer.write(data)
                answer, keep = await _read_answer(reader, method)
        except asyncio.IncompleteReadError as exc:        # closed before the whole answer came
            _drop(conn)
            raise ConnectionResetError(f"the server closed the connection ({len(exc.partial)} bytes "
                                       f"of {exc.expected} read)") from None
        except (ValueError, asyncio.LimitOverrunError) as exc:      # not HTTP/1.1 as spoken here
            _drop(conn)
            raise ConnectionAbortedError(f"unreadable answer: {exc}") from None
        except BaseException:        # no answer (OSError, TimeoutError) or cancelled: never reused
            _drop(conn)
            raise
        if keep and len(self._idle) < _MAX_IDLE:
            self._idle.append(conn)
        else:
            _drop(conn)
        return answer


def _drop(conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None) -> None:
    if conn is not None:
        conn[1].close()


async def _read_answer(reader: asyncio.StreamReader, method: str) -> tuple[Answer, bool]:
    """One answer: its status line, headers and body (by ``Content-Length``, chunked, or up to the
    connection's end); and whether the connection may carry another request."""
    version, status, headers = await _read_head(reader)
    keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return Answer(status, headers, b""), keep
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return Answer(status, headers, await _read_chunked(reader)), keep
    length = headers.get("content-length")
    if length is not None:
        return Answer(status, headers, await reader.readexactly(int(length))), keep
    return Answer(status, headers, await reader.read()), False        # up to the connection's end


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, int, dict[str, str]]:
    """The status line's version and status, and the headers (lower-case names; repeated ones joined)."""
    line = await reader.readuntil(b"\r\n")
    version, _, rest = line.decode("latin-1").partition(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(f"status line {line[:80]!r}")
    status = int(rest[:3])
    headers: dict[str, str] = {}
    while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise ValueError(f"header line {line[:80]!r}")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return version, status, headers


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    """A chunked body (RFC 9112 §7.1), its trailers read and dropped."""
    chunks = []
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16):
        chunks.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("a chunk not ended by CRLF")
    while await reader.readuntil(b"\r\n") != b"\r\n":      # trailers
        pass
    return b"".join(chunks)


def _proxied() -> bool:
    return any(os.environ.get(v) or os.environ.get(v.upper()) for v in _PROXY_VARS)


def wire_for(client: Any) -> Wire | None:
    """A :class:`Wire` speaking to the server of lightkube's ``client`` (an ``AsyncClient``) as its
    httpx client would, or None when that cannot be promised (see the module docstring)."""
    from lightkube.config import client_adapter

    try:
        generic = client._client
        hx = generic._client
        config = generic.config
    except AttributeError:
        return None
    base = str(hx.base_url)
    if urlsplit(base).scheme not in ("http", "https"):
        return None
    if getattr(hx, "_trust_env", True) and _proxied():
        return None
    auth = hx.auth
    authorization: Callable[[bool], str | None]
    if auth is None:
        def authorization(_refresh: bool) -> str | None:
            return None
    elif type(auth) is client_adapter.BearerAuth:
        bearer = auth._bearer

        def authorization(_refresh: bool) -> str | None:
            return bearer
    elif type(auth) is client_adapter.BearerTokenFileAuth:
        token_file = auth

        def authorization(refresh: bool) -> str | None:
            # the same object lightkube's own requests use: one token read for both
            if refresh or token_file._last_bearer is None:
                token_file._last_bearer = token_file._read_token()
            return token_file._last_bearer
    else:
        return None                 # exec plugins, basic auth: lightkube's flows
    ssl_context = None
    if base.startswith("https"):
        ssl_context = client_adapter.verify_cluster(config.cluster, config.user, config.abs_file,
                                                    trust_env=getattr(hx, "_trust_env", True))
    timeout = hx.timeout.read
    return Wire(base, ssl_context=ssl_context, authorization=authorization,
                timeout=float(timeout) if timeout is not None else None)
