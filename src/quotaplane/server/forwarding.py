"""Writes routed to the partition's leader (issue 18 #2: partitions on several instances).

With ``serve --partitions`` each partition is written by one instance only. A write that reaches
another instance — through a plain load balancer, or a client that does not know the layout — is
forwarded to the partition's leader and its answer is relayed unchanged, so any HTTP client can talk
to any instance. A read is not forwarded: every instance serves reads after catching up on the
partition's stream (:meth:`quotaplane.server.app.Service.refresh_for_read`).

Rules:

* **One hop.** The forwarded request carries ``X-Quotaplane-Forwarded``; an instance that receives
  such a request for a partition it does not lead (the lease moved meanwhile) answers it 503 with the
  leader, as it answers any write it does not lead — no request travels in a circle.
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
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx
from starlette.types import Receive, Scope, Send

from quotaplane.errors import NotLeaderError
from quotaplane.server.durability import partition_of_path
from quotaplane.server.errors import error_response, exception_response

__all__ = ["FORWARDED_HEADER", "Forwarder", "forward_target"]

_log = logging.getLogger("quotaplane.server")

#: set on a forwarded request (its value: the forwarding instance's URL); never forwarded again
FORWARDED_HEADER = b"x-quotaplane-forwarded"

#: the request headers that describe this hop only (RFC 9110 §7.6.1) or that httpx sets itself
_HOP_BY_HOP = frozenset({b"host", b"content-length", b"connection", b"keep-alive", b"transfer-encoding",
                         b"te", b"trailer", b"upgrade", b"proxy-authorization", b"proxy-connection",
                         FORWARDED_HEADER})

#: the answer headers relayed to the client (the rest describe the leader's connection)
_RELAYED = frozenset({"content-type", "retry-after", "location", "last-event-id"})

#: seconds to wait for the leader: to connect, and for the whole answer
CONNECT_TIMEOUT = 2.0
ANSWER_TIMEOUT = 30.0

_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def forward_target(scope: Scope, *, is_leader: Callable[[str | None], bool],
                   leader_url: Callable[[str | None], str | None]) -> str | None:
    """The leader's URL when this request should be forwarded to it, else None: a write to a
    partition (or to the configuration) that this instance does not lead, not forwarded already,
    whose leader is known."""
    if scope["method"] in _READS:
        return None
    path = scope["path"]
    partition = partition_of_path(path)
    if partition is None and path != "/ws/v1/config":
        return None
    if is_leader(partition):
        return None
    for key, _ in scope["headers"]:
        if key == FORWARDED_HEADER:
            return None                  # one hop: answered here (503 with the leader)
    return leader_url(partition)


class Forwarder:
    """Relays requests to another instance over one pooled HTTP client (created on first use, on the
    event loop that serves the requests)."""

    def __init__(self, advertise: str, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.advertise = advertise
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        #: requests relayed so far, for tests and metrics
        self.forwarded = 0

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                transport=self._transport, trust_env=False,
                timeout=httpx.Timeout(ANSWER_TIMEOUT, connect=CONNECT_TIMEOUT))
        return self._client

    async def aclose(self) -> None:
        """Close the pooled connections (the service stops)."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def forward(self, leader: str, scope: Scope, receive: Receive, send: Send) -> int:
        """Send this request to ``leader`` and relay its answer; returns the status answered."""
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return 499                       # the client went away: nothing was sent on
            chunks.append(message.get("body", b""))
            more = bool(message.get("more_body", False))
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]
                   if k not in _HOP_BY_HOP]
        headers.append((FORWARDED_HEADER.decode(), self.advertise))
        url = leader.rstrip("/") + scope.get("root_path", "") + scope["path"]
        query = scope.get("query_string", b"")
        if query:
            url += "?" + query.decode("latin-1")
        try:
            answer = await self._http().request(scope["method"], url, headers=headers,
                                                content=b"".join(chunks))
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
            # never reached the leader: nothing changed anywhere — the answer without forwarding
            _log.warning("could not forward %s %s to the leader %s: %s", scope["method"], scope["path"],
                         leader, exc)
            resp = exception_response(NotLeaderError(
                f"this instance does not lead what {scope['path']} changes and could not reach its leader "
                f"{leader}", leader=leader))
            await resp(scope, receive, send)
            return resp.status_code
        except httpx.HTTPError as exc:
            _log.warning("forwarded %s %s to the leader %s: no answer: %s", scope["method"], scope["path"],
                         leader, exc)
            resp = error_response(502, f"forwarded to the leader {leader}, which did not answer: the change "
                                       "may or may not have been applied; read it back or retry (an "
                                       "allocation key makes a retry safe)")
            await resp(scope, receive, send)
            return 502
        self.forwarded += 1
        relayed = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers.items()
                   if k.lower() in _RELAYED]
        body = answer.content
        relayed.append((b"content-length", str(len(body)).encode("ascii")))
        await send({"type": "http.response.start", "status": answer.status_code, "headers": relayed})
        await send({"type": "http.response.body", "body": body})
        return answer.status_code
