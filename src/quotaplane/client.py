"""A Python client of the REST service (issue 17 #3): :class:`Client` (sync) and :class:`AsyncClient`.

Both speak to a running ``quotaplane serve`` (or ``quotaplane kube``) with httpx, under the names the
library uses where they overlap: ``allocate`` answers a :class:`~quotaplane.policy.Decision` with its
:class:`~quotaplane.policy.Violation` reasons, ``add_application`` takes a
:class:`~quotaplane.config.identity.UserGroup`. Errors are typed from the service's error body
(``{status_code, message, description}``): 404 raises :class:`~quotaplane.errors.NotFoundError`, 409
:class:`~quotaplane.errors.ConflictError`, 400 :class:`BadRequestError` (a ``ValueError``), 401/403
:class:`AccessDeniedError`, 503 :class:`UnavailableError`, other 5xx :class:`ServerError` — each also a
:class:`ServiceError` carrying ``status`` and ``description``. No answer at all (nothing listens at the
URL, the connection dropped, a timeout) raises :class:`UnreachableError`, a ``ConnectionError``.

A 503 is retried (``retries`` times, waiting ``Retry-After`` capped at 5 s); when it names the
``leader`` (a follower of a PostgreSQL fail-over pair), the client moves there and retries at once.
:meth:`Client.events` iterates the partition's event stream and, when the connection drops, resumes
after the last sequence number it saw — nothing is missed or repeated.

The server and token default to ``QUOTAPLANE_SERVER`` (else ``http://127.0.0.1:9080``) and
``QUOTAPLANE_TOKEN``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from quotaplane.config.identity import UserGroup
from quotaplane.errors import ConflictError, NotFoundError, QuotaplaneError
from quotaplane.policy import Decision, Violation
from quotaplane.resources import Resource

__all__ = [
    "DEFAULT_SERVER",
    "AccessDeniedError",
    "AsyncClient",
    "BadRequestError",
    "Client",
    "ServerError",
    "ServiceError",
    "UnavailableError",
    "UnreachableError",
]

#: where the client goes without ``server`` nor ``QUOTAPLANE_SERVER`` (``make run``'s address)
DEFAULT_SERVER = "http://127.0.0.1:9080"
_WS = "/ws/v1"


class ServiceError(QuotaplaneError):
    """An error answer of the service: ``status``, ``message`` and ``description`` of its body."""

    def __init__(self, status: int, message: str, description: str = "",
                 body: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.description = description or message
        self.body: dict[str, Any] = dict(body or {})


class BadRequestError(ServiceError, ValueError):
    """400: the request was refused as malformed (its description says what and where)."""


class AccessDeniedError(ServiceError, PermissionError):
    """401 or 403: no token, an unknown one, a role too weak, or an ACL that refuses the user."""


class UnavailableError(ServiceError):
    """503 after the retries: the store is unavailable, or no leader could be reached."""


class ServerError(ServiceError):
    """Another 5xx: a fault of the server (its log has the detail)."""


class UnreachableError(QuotaplaneError, ConnectionError):
    """No answer from the service: nothing listens at ``server``, the connection dropped, or it
    timed out. ``sent`` is False when the request certainly did not reach it (nothing changed);
    otherwise a change it asked for may or may not have been applied."""

    def __init__(self, server: str, method: str, cause: httpx.TransportError) -> None:
        self.server = server
        self.sent = not isinstance(cause, _NOT_SENT)
        detail = str(cause) or type(cause).__name__
        message = f"cannot reach the service at {server}: {detail}"
        if self.sent and method not in ("GET", "HEAD"):
            message += ("; the request may have reached it, so its change may or may not have been "
                        "applied (read it back, or retry: an allocation key makes a retry safe)")
        super().__init__(message)

    def __str__(self) -> str:
        return str(self.args[0])


#: transport failures before any byte of the request left: the service changed nothing
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol,
             httpx.LocalProtocolError, httpx.ProxyError)


class _NotFound(ServiceError, NotFoundError):
    def __str__(self) -> str:
        return self.message


class _Conflict(ServiceError, ConflictError):
    pass


def _error(response: httpx.Response) -> ServiceError:
    try:
        body = response.json()
    except ValueError:
        body = {"message": response.text.strip() or response.reason_phrase}
    if not isinstance(body, dict):
        body = {"message": str(body)}
    message = str(body.get("message") or response.reason_phrase)
    description = str(body.get("description") or "")
    status = response.status_code
    cls: type[ServiceError]
    if status == 404:
        cls = _NotFound
    elif status == 409:
        cls = _Conflict
    elif status == 400:
        cls = BadRequestError
    elif status in (401, 403):
        cls = AccessDeniedError
    elif status == 503:
        cls = UnavailableError
    elif status >= 500:
        cls = ServerError
    else:
        cls = ServiceError
    return cls(status, message, description, body)


def decision_of(body: Mapping[str, Any]) -> Decision:
    """The library's :class:`Decision` of a decision body (allocate, what-if, a batch entry)."""
    reasons = [Violation(str(v.get("policy", "")), str(v.get("code", "")), str(v.get("path", "")),
                         str(v.get("message", "")), Resource.of(dict(v["resource"])) if v.get("resource")
                         else None) for v in body.get("reasons") or ()]
    return Decision(bool(body.get("allocated")), reasons, list(body.get("preempted") or ()),
                    queue=str(body.get("queueName", "")), allocation_key=str(body.get("allocationKey", "")))


def _resource(resource: Mapping[str, int] | Resource) -> dict[str, int]:
    return {str(k): int(v) for k, v in resource.items()}


def _app_body(application_id: str, user: UserGroup, queue: str | None,
              tags: Mapping[str, str] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"applicationID": application_id, "user": user.user, "groups": list(user.groups)}
    if queue is not None:
        body["queue"] = queue
    if tags:
        body["tags"] = dict(tags)
    return body


def _alloc_body(application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource,
                priority: int, preemptible: bool, node: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"applicationID": application_id, "allocationKey": allocation_key,
                            "resource": _resource(resource), "priority": priority,
                            "preemptible": preemptible}
    if node is not None:
        body["nodeID"] = node
    return body


def _node_body(capacity: Mapping[str, int] | Resource, schedulable: bool) -> dict[str, Any]:
    return {"capacity": _resource(capacity), "schedulable": schedulable}


def _decision(response: httpx.Response) -> Decision:
    data = response.json()
    if response.status_code == 409 and "allocated" not in data:
        raise _error(response)              # a duplicate key, not a refusal
    return decision_of(data)


def _stream_params(last: int | None, types: Sequence[str], application_id: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {"timeout": 86400}
    if last is not None:
        params["after"] = last
    if types:
        params["types"] = ",".join(types)
    if application_id is not None:
        params["applicationID"] = application_id
    return params


#: connect within 10 s, then wait as long as the stream lasts
_STREAM_TIMEOUT = httpx.Timeout(10.0, read=None)


class _Calls:
    """What a call sends and how its answer reads, shared by both clients (no I/O here)."""

    def __init__(self, server: str | None, token: str | None, retries: int) -> None:
        self.server = (server or os.environ.get("QUOTAPLANE_SERVER") or DEFAULT_SERVER).rstrip("/")
        token = token if token is not None else os.environ.get("QUOTAPLANE_TOKEN")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.retries = retries

    def retry_after(self, response: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before trying again (None: give up); moves to the leader when named."""
        if response.status_code != 503 or attempt >= self.retries:
            return None
        try:
            leader = response.json().get("leader")
        except (ValueError, AttributeError):
            leader = None
        if isinstance(leader, str) and leader and leader.rstrip("/") != self.server:
            self.server = leader.rstrip("/")
            return 0.0
        try:
            return min(float(response.headers.get("retry-after", "0.5")), 5.0)
        except ValueError:
            return 0.5


class Client:
    """A synchronous client of the service (see the module docstring). Use as a context manager or
    call :meth:`close`."""

    def __init__(self, server: str | None = None, *, token: str | None = None, timeout: float = 30.0,
                 retries: int = 3, transport: httpx.BaseTransport | None = None) -> None:
        self._calls = _Calls(server, token, retries)
        self._http = httpx.Client(timeout=timeout, transport=transport)

    @property
    def server(self) -> str:
        """The service this client talks to now (a leader it was sent to, after a fail-over)."""
        return self._calls.server

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, *, json_body: Any = None, content: str | bytes | None = None,
                params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None,
                ok: Sequence[int] = (200, 201)) -> httpx.Response:
        """One call with the retries; a status outside ``ok`` raises the typed error."""
        attempt = 0
        while True:
            try:
                response = self._http.request(method, self._calls.server + path, json=json_body,
                                              content=content, params=params,
                                              headers={**self._calls.headers, **(headers or {})})
            except httpx.TransportError as exc:
                raise UnreachableError(self._calls.server, method, exc) from exc
            if response.status_code in ok:
                return response
            wait = self._calls.retry_after(response, attempt)
            if wait is None:
                raise _error(response)
            attempt += 1
            time.sleep(wait)

    def _get(self, path: str, **params: Any) -> Any:
        return self.request("GET", _WS + path, params=params or None).json()

    # -- reading -------------------------------------------------------------------------------------
    def partitions(self) -> list[dict[str, Any]]:
        """``GET /ws/v1/partitions``."""
        return list(self._get("/partitions"))

    def queues(self, partition: str = "default") -> dict[str, Any]:
        """The queue tree of ``partition`` (YuniKorn's ``PartitionQueueDAOInfo``)."""
        return dict(self._get(f"/partition/{partition}/queues"))

    def queue(self, path: str, partition: str = "default") -> dict[str, Any]:
        """One queue by its full path."""
        return dict(self._get(f"/partition/{partition}/queue/{path}"))

    def nodes(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every node with its allocations (``NodeDAOInfo``)."""
        return list(self._get(f"/partition/{partition}/nodes"))

    def application(self, application_id: str, partition: str = "default") -> dict[str, Any]:
        """One application (``ApplicationDAOInfo``: allocations, waiting asks, state log)."""
        return dict(self._get(f"/partition/{partition}/application/{application_id}"))

    def applications(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every application (short form)."""
        return list(self._get(f"/partition/{partition}/applications"))

    def pending(self, application_id: str | None = None, partition: str = "default") -> list[dict[str, Any]]:
        """The waiting asks (of one application) with their reasons, in scheduling order."""
        if application_id is None:
            return list(self._get(f"/partition/{partition}/asks"))
        return list(self._get(f"/partition/{partition}/application/{application_id}/asks"))

    def standing(self, *, queue: str | None = None, user: str | None = None, group: str | None = None,
                 quota: str | None = None, partition: str = "default") -> dict[str, Any]:
        """Where one queue, user, group or elastic quota stands (``Partition.standing``)."""
        asked = [(k, v) for k, v in (("queue", queue), ("user", user), ("group", group), ("quota", quota))
                 if v is not None]
        if len(asked) != 1:
            raise ValueError("name exactly one of queue, user, group or quota")
        (kind, name), = asked
        return dict(self._get(f"/partition/{partition}/standing", kind=kind, name=name))

    def users_usage(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every tracked user's usage (``UserResourceUsageDAOInfo``)."""
        return list(self._get(f"/partition/{partition}/usage/users"))

    def groups_usage(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every tracked group's usage."""
        return list(self._get(f"/partition/{partition}/usage/groups"))

    def user_usage(self, user: str, partition: str = "default") -> dict[str, Any]:
        """One user's usage; :class:`~quotaplane.errors.NotFoundError` when the user is not tracked."""
        return dict(self._get(f"/partition/{partition}/usage/user/{quote(user, safe='')}"))

    def group_usage(self, group: str, partition: str = "default") -> dict[str, Any]:
        """One group's usage; :class:`~quotaplane.errors.NotFoundError` when the group is not tracked."""
        return dict(self._get(f"/partition/{partition}/usage/group/{quote(group, safe='')}"))

    def config(self) -> str:
        """The running configuration (YAML)."""
        return self.request("GET", _WS + "/config").text

    def validate_config(self, text: str) -> tuple[bool, str]:
        """``(allowed, reason)`` of a configuration, changing nothing."""
        body = self.request("POST", _WS + "/validate-conf", content=text).json()
        return bool(body["allowed"]), str(body.get("reason", ""))

    def what_if(self, application_id: str, resource: Mapping[str, int] | Resource, *, priority: int = 0,
                partition: str = "default") -> Decision:
        """Would this allocation be admitted now? Changes nothing."""
        r = self.request("POST", _WS + f"/partition/{partition}/whatif",
                         json_body={"applicationID": application_id, "resource": _resource(resource),
                                    "priority": priority})
        return decision_of(r.json())

    # -- changing ------------------------------------------------------------------------------------
    def update_config(self, text: str) -> dict[str, Any]:
        """Apply a configuration (all or nothing; :class:`BadRequestError` names the problem)."""
        return dict(self.request("PUT", _WS + "/config", content=text,
                                 headers={"Content-Type": "application/x-yaml"}).json())

    def add_node(self, node_id: str, capacity: Mapping[str, int] | Resource, *, schedulable: bool = True,
                 partition: str = "default") -> dict[str, Any]:
        """Register (or update) a node."""
        return dict(self.request("PUT", _WS + f"/partition/{partition}/node/{node_id}",
                                 json_body=_node_body(capacity, schedulable)).json())

    def remove_node(self, node_id: str, partition: str = "default") -> None:
        """Remove a node; the allocations on it are released."""
        self.request("DELETE", _WS + f"/partition/{partition}/node/{node_id}")

    def add_application(self, application_id: str, user: UserGroup, *, queue: str | None = None,
                        tags: Mapping[str, str] | None = None, partition: str = "default") -> str:
        """Submit an application; the queue placement chose."""
        body = _app_body(application_id, user, queue, tags)
        return str(self.request("POST", _WS + f"/partition/{partition}/applications", json_body=body)
                   .json()["queueName"])

    def remove_application(self, application_id: str, partition: str = "default") -> None:
        """Remove an application with its allocations and asks."""
        self.request("DELETE", _WS + f"/partition/{partition}/application/{application_id}")

    def allocate(self, application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource, *,
                 priority: int = 0, preemptible: bool = True, node: str | None = None,
                 partition: str = "default") -> Decision:
        """Ask for an allocation: the :class:`Decision` (refused: ``allocated`` false with every reason)."""
        body = _alloc_body(application_id, allocation_key, resource, priority, preemptible, node)
        return _decision(self.request("POST", _WS + f"/partition/{partition}/allocations", json_body=body,
                                      ok=(201, 409)))

    def release(self, allocation_key: str, partition: str = "default") -> None:
        """Release an allocation."""
        self.request("DELETE", _WS + f"/partition/{partition}/allocation/{allocation_key}")

    def add_ask(self, application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource, *,
                priority: int = 0, partition: str = "default") -> dict[str, Any]:
        """Queue an ask: allocated at once when it fits, else it waits (the answer says why)."""
        return dict(self.request("POST", _WS + f"/partition/{partition}/application/{application_id}/asks",
                                 json_body={"allocationKey": allocation_key, "resource": _resource(resource),
                                            "priority": priority}).json())

    def remove_ask(self, application_id: str, allocation_key: str, partition: str = "default") -> None:
        """Withdraw a waiting ask."""
        self.request("DELETE", _WS + f"/partition/{partition}/application/{application_id}"
                               f"/ask/{allocation_key}")

    # -- the event stream ----------------------------------------------------------------------------
    def events(self, partition: str = "default", *, after: int | None = None, types: Sequence[str] = (),
               application_id: str | None = None, reconnect: int = 10) -> Iterator[dict[str, Any]]:
        """The partition's notices as they happen (``allocated``, ``released``, ``preempted`` …). When
        the connection drops, the stream resumes after the last sequence number seen, at most
        ``reconnect`` times in a row."""
        last = after
        failures = 0
        while True:
            params = _stream_params(last, types, application_id)
            url = self._calls.server + _WS + f"/partition/{partition}/events/stream"
            try:
                with self._http.stream("GET", url, params=params, headers=self._calls.headers,
                                       timeout=_STREAM_TIMEOUT) as response:
                    if response.status_code != 200:
                        response.read()
                        raise _error(response)
                    parser = _Sse()
                    for line in response.iter_lines():
                        notice = parser.feed(line)
                        if notice is not None:
                            last, failures = int(notice.get("seq", last or 0)), 0
                            yield notice
                error: Exception | None = None          # the server ended the stream: reconnect
            except httpx.TransportError as exc:       # dropped or refused: reconnect, then give up
                error = UnreachableError(self._calls.server, "GET", exc)
            failures += 1
            wait = _reconnect_wait(failures, reconnect, error)
            if wait is None:
                return
            time.sleep(wait)


class _Sse:
    """Server-sent events, line by line: :meth:`feed` answers a notice when one is complete."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data: list[str] = []

    def feed(self, line: str) -> dict[str, Any] | None:
        if line.startswith("data:"):
            self.data.append(line[5:].strip())
        elif not line and self.data:
            notice: dict[str, Any] = json.loads("\n".join(self.data))
            self.data = []
            return notice
        return None


def _reconnect_wait(failures: int, reconnect: int, error: Exception | None) -> float | None:
    """Seconds before the next connection; None to stop (the stream ended for good); raises the last
    error after ``reconnect`` failures in a row."""
    if failures > reconnect:
        if error is not None:
            raise error
        return None
    return min(0.2 * failures, 2.0)


class AsyncClient:
    """The asynchronous twin of :class:`Client` (the same methods, awaited)."""

    def __init__(self, server: str | None = None, *, token: str | None = None, timeout: float = 30.0,
                 retries: int = 3, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._calls = _Calls(server, token, retries)
        self._http = httpx.AsyncClient(timeout=timeout, transport=transport)

    @property
    def server(self) -> str:
        """The service this client talks to now."""
        return self._calls.server

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def request(self, method: str, path: str, *, json_body: Any = None,
                      content: str | bytes | None = None, params: Mapping[str, Any] | None = None,
                      headers: Mapping[str, str] | None = None,
                      ok: Sequence[int] = (200, 201)) -> httpx.Response:
        """One call with the retries; a status outside ``ok`` raises the typed error."""
        attempt = 0
        while True:
            try:
                response = await self._http.request(method, self._calls.server + path, json=json_body,
                                                    content=content, params=params,
                                                    headers={**self._calls.headers, **(headers or {})})
            except httpx.TransportError as exc:
                raise UnreachableError(self._calls.server, method, exc) from exc
            if response.status_code in ok:
                return response
            wait = self._calls.retry_after(response, attempt)
            if wait is None:
                raise _error(response)
            attempt += 1
            await asyncio.sleep(wait)

    async def queues(self, partition: str = "default") -> dict[str, Any]:
        """The queue tree of ``partition``."""
        return dict((await self.request("GET", _WS + f"/partition/{partition}/queues")).json())

    async def application(self, application_id: str, partition: str = "default") -> dict[str, Any]:
        """One application (``ApplicationDAOInfo``)."""
        return dict((await self.request("GET", _WS + f"/partition/{partition}/application/{application_id}"))
                    .json())

    async def add_node(self, node_id: str, capacity: Mapping[str, int] | Resource, *,
                       schedulable: bool = True, partition: str = "default") -> dict[str, Any]:
        """Register (or update) a node."""
        r = await self.request("PUT", _WS + f"/partition/{partition}/node/{node_id}",
                               json_body=_node_body(capacity, schedulable))
        return dict(r.json())

    async def add_application(self, application_id: str, user: UserGroup, *, queue: str | None = None,
                              tags: Mapping[str, str] | None = None, partition: str = "default") -> str:
        """Submit an application; the queue placement chose."""
        body = _app_body(application_id, user, queue, tags)
        r = await self.request("POST", _WS + f"/partition/{partition}/applications", json_body=body)
        return str(r.json()["queueName"])

    async def allocate(self, application_id: str, allocation_key: str,
                       resource: Mapping[str, int] | Resource, *, priority: int = 0, preemptible: bool = True,
                       node: str | None = None, partition: str = "default") -> Decision:
        """Ask for an allocation: the :class:`Decision`."""
        body = _alloc_body(application_id, allocation_key, resource, priority, preemptible, node)
        return _decision(await self.request("POST", _WS + f"/partition/{partition}/allocations",
                                            json_body=body, ok=(201, 409)))

    async def release(self, allocation_key: str, partition: str = "default") -> None:
        """Release an allocation."""
        await self.request("DELETE", _WS + f"/partition/{partition}/allocation/{allocation_key}")

    async def events(self, partition: str = "default", *, after: int | None = None, types: Sequence[str] = (),
                     application_id: str | None = None, reconnect: int = 10) -> AsyncIterator[dict[str, Any]]:
        """The partition's notices as they happen, resuming after a dropped connection."""
        last = after
        failures = 0
        while True:
            params = _stream_params(last, types, application_id)
            url = self._calls.server + _WS + f"/partition/{partition}/events/stream"
            try:
                async with self._http.stream("GET", url, params=params, headers=self._calls.headers,
                                             timeout=_STREAM_TIMEOUT) as response:
                    if response.status_code != 200:
                        await response.aread()
                        raise _error(response)
                    parser = _Sse()
                    async for line in response.aiter_lines():
                        notice = parser.feed(line)
                        if notice is not None:
                            last, failures = int(notice.get("seq", last or 0)), 0
                            yield notice
                error: Exception | None = None          # the server ended the stream: reconnect
            except httpx.TransportError as exc:       # dropped or refused: reconnect, then give up
                error = UnreachableError(self._calls.server, "GET", exc)
            failures += 1
            wait = _reconnect_wait(failures, reconnect, error)
            if wait is None:
                return
            await asyncio.sleep(wait)
