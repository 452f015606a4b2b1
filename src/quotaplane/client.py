"""A Python client of the REST service (issue 17 #3): :class:`Client` (sync) and :class:`AsyncClient`.

Both speak to a running ``quotaplane serve`` (or ``quotaplane kube``) with httpx, under the names the
library uses where they overlap: ``allocate`` answers a :class:`~quotaplane.policies.Decision` with its
:class:`~quotaplane.policies.Violation` reasons, ``add_application`` takes a
:class:`~quotaplane.config.identity.UserGroup`. Errors are typed from the service's error body
(``{status_code, message, description}``): 404 raises :class:`~quotaplane.errors.NotFoundError`, 409
:class:`~quotaplane.errors.ConflictError`, 400 :class:`BadRequestError` (a ``ValueError``), 401/403
:class:`AccessDeniedError`, 503 :class:`UnavailableError`, other 5xx :class:`ServerError` — each also a
:class:`ServiceError` carrying ``status`` and ``description``. No answer at all (nothing listens at the
URL, the connection dropped, a timeout) raises :class:`UnreachableError`, a ``ConnectionError``.

A 503 is retried (``retries`` times, waiting ``Retry-After`` capped at 5 s): it says nothing was
changed. When it names the ``leader`` (a follower of a PostgreSQL fail-over pair), the client moves
there and retries at once. After an unknown outcome — a 502 :class:`UnknownOutcomeError` ("may or
may not have been applied"), or no answer once the request was sent — only an allocation and a
release are sent again: the same allocation key is the same request, so a retry that finds the
allocation there (the one asked for) or already gone is the first attempt's success (issue 32 #3).
Any other call raises, and the caller reads back what happened.
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

import httpx

from quotaplane._client_api import (
    AccessDeniedError,
    BadRequestError,
    ServerError,
    ServiceConflictError,
    ServiceError,
    ServiceNotFoundError,
    T,
    UnavailableError,
    UnknownOutcomeError,
    UnreachableError,
    _api,
    _Call,
    _Done,
    _error,
    decision_of,
)
from quotaplane.config.identity import UserGroup
from quotaplane.policies.protocol import Decision
from quotaplane.resources import Resource

__all__ = [
    "DEFAULT_SERVER",
    "AccessDeniedError",
    "AsyncClient",
    "BadRequestError",
    "Client",
    "ServerError",
    "ServiceConflictError",
    "ServiceError",
    "ServiceNotFoundError",
    "UnavailableError",
    "UnknownOutcomeError",
    "UnreachableError",
    "decision_of",
]

#: where the client goes without ``server`` nor ``QUOTAPLANE_SERVER`` (``make run``'s address)
DEFAULT_SERVER = "http://127.0.0.1:9080"
_WS = "/ws/v1"


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


class _Session:
    """Where both clients send their calls and how they retry: the server (a leader it was sent to,
    after a fail-over), the token's header, the 503 rule (no I/O here; each call itself is a
    :class:`~quotaplane._client_api._Call`)."""

    def __init__(self, server: str | None, token: str | None, retries: int) -> None:
        url = (server or os.environ.get("QUOTAPLANE_SERVER") or DEFAULT_SERVER).rstrip("/")
        # the service's root is meant; a URL naming its API path (YuniKorn's habit) means it too
        self.server = url[:-len(_WS)] if url.endswith(_WS) else url
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

    def unknown_retry(self, call: _Call[Any], outcome: httpx.Response | UnreachableError,
                      attempt: int) -> float | None:
        """Seconds to wait before sending ``call`` again after ``outcome`` (None: do not): only a
        call that a retry cannot apply twice, after an unknown outcome."""
        if call.again is None or attempt >= self.retries:
            return None
        if isinstance(outcome, UnreachableError):
            unknown = outcome.sent
        else:
            unknown = outcome.status_code == 502 and isinstance(_error(outcome), UnknownOutcomeError)
        return 0.2 * (attempt + 1) if unknown else None


#: the answers an idempotent call's retry may get besides its own: gone, there, unknown
_AGAIN_OK = (404, 409, 502)


class Client:
    """A synchronous client of the service (see the module docstring). Use as a context manager or
    call :meth:`close`."""

    def __init__(self, server: str | None = None, *, token: str | None = None, timeout: float = 30.0,
                 retries: int = 3, transport: httpx.BaseTransport | None = None) -> None:
        self._session = _Session(server, token, retries)
        self._http = httpx.Client(timeout=timeout, transport=transport)

    @property
    def server(self) -> str:
        """The service this client talks to now (a leader it was sent to, after a fail-over)."""
        return self._session.server

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
                response = self._http.request(method, self._session.server + path, json=json_body,
                                              content=content, params=params,
                                              headers={**self._session.headers, **(headers or {})})
            except httpx.TransportError as exc:
                raise UnreachableError(self._session.server, method, exc) from exc
            if response.status_code in ok:
                return response
            wait = self._session.retry_after(response, attempt)
            if wait is None:
                raise _error(response)
            attempt += 1
            time.sleep(wait)

    def _send(self, call: _Call[T], ok: Sequence[int]) -> httpx.Response:
        return self.request(call.method, _WS + call.path, json_body=call.json_body, content=call.content,
                            params=call.params, headers=call.headers, ok=ok)

    def _run(self, call: _Call[T]) -> T:
        if call.again is None:
            return call.read(self._send(call, call.ok))
        attempt = 0
        while True:
            try:
                response = self._send(call, (*call.ok, *_AGAIN_OK))
            except UnreachableError as exc:
                if (wait := self._session.unknown_retry(call, exc, attempt)) is None:
                    raise
            else:
                if attempt and (settled := call.again(response)) is not None:
                    return settled.value if isinstance(settled, _Done) else self._run(settled)
                if (wait := self._session.unknown_retry(call, response, attempt)) is None:
                    if response.status_code not in call.ok:
                        raise _error(response)
                    return call.read(response)
            attempt += 1
            time.sleep(wait)


    def partitions(self) -> list[dict[str, Any]]:
        """``GET /ws/v1/partitions``."""
        return self._run(_api.partitions())

    def queues(self, partition: str = "default") -> dict[str, Any]:
        """The queue tree of ``partition`` (YuniKorn's ``PartitionQueueDAOInfo``)."""
        return self._run(_api.queues(partition))

    def queue(self, path: str, partition: str = "default") -> dict[str, Any]:
        """One queue by its full path."""
        return self._run(_api.queue(path, partition))

    def nodes(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every node with its allocations (``NodeDAOInfo``)."""
        return self._run(_api.nodes(partition))

    def application(self, application_id: str, partition: str = "default") -> dict[str, Any]:
        """One application (``ApplicationDAOInfo``)."""
        return self._run(_api.application(application_id, partition))

    def applications(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every application of the partition."""
        return self._run(_api.applications(partition))

    def pending(self, application_id: str | None = None, partition: str = "default", *,
                eta: bool = False) -> list[dict[str, Any]]:
        """The waiting asks (of one application, or of the partition in scheduling order); ``eta``:
        each with its forecast start (docs/eta.md)."""
        return self._run(_api.pending(application_id, partition, eta))

    def standing(self, *, queue: str | None = None, user: str | None = None, group: str | None = None,
                 quota: str | None = None, partition: str = "default", eta: bool = False) -> dict[str, Any]:
        """Where exactly one of ``queue``, ``user``, ``group`` or ``quota`` stands (else ValueError);
        ``eta``: its waiting asks with their forecast start (docs/eta.md)."""
        return self._run(_api.standing(queue, user, group, quota, partition, eta))

    def history(self, *, group_by: str = "queue", step: str = "day", start: str | None = None,
                end: str | None = None, period: str | None = None, resource: str | None = None,
                names: Sequence[str] | None = None, top: int | None = None, csv: bool = False,
                partition: str = "default") -> Any:
        """Usage per scope and step (``GET …/history/usage``, docs/history.md): a dict, or CSV text."""
        return self._run(_api.history("usage", {"groupBy": group_by, "step": step, "start": start,
                                                "end": end, "period": period, "resource": resource,
                                                "name": list(names) if names else None, "top": top},
                                      csv, partition))

    def history_cost(self, *, group_by: str = "queue", start: str | None = None, end: str | None = None,
                     period: str | None = None, names: Sequence[str] | None = None, csv: bool = False,
                     partition: str = "default") -> Any:
        """The bill of a range per scope (``GET …/history/cost``): a dict, or CSV text."""
        return self._run(_api.history("cost", {"groupBy": group_by, "start": start, "end": end,
                                               "period": period, "name": list(names) if names else None},
                                      csv, partition))

    def budgets(self, queue: str | None = None, *, user: str | None = None, group: str | None = None,
                elastic_quota: str | None = None, partition: str = "default") -> dict[str, Any]:
        """Every budget (``GET …/budgets``), or one scope's (``queue``, and ``user`` or ``group`` in it:
        ``GET …/budget``; or ``elastic_quota``): limit, consumed, committed, left, burn rate, reset
        (docs/budgets.md)."""
        found: dict[str, Any] = self._run(_api.budgets(queue, user, group, partition, elastic_quota))
        return found

    def windows(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every time window with its state: open now (``active``), due, schedule, overrides, and the
        values it replaced (``GET …/windows``, docs/windows.md)."""
        return self._run(_api.windows(partition))

    def add_window(self, window: Mapping[str, Any], partition: str = "default") -> list[dict[str, Any]]:
        """Add a one-off window — a temporary override, e.g. ``{"name": "audit", "queue": "root.a",
        "from": "2026-11-27T09:00", "to": "2026-11-27T12:00", "max": {"vcore": 4000}}`` — validated with
        the whole configuration (admin, as a configuration change); one already due opens at once.
        Every window afterwards."""
        return self._run(_api.add_window(window, partition))

    def remove_window(self, name: str, partition: str = "default") -> list[dict[str, Any]]:
        """Remove window ``name`` (an open one is closed first: the values it replaced come back);
        every window afterwards."""
        return self._run(_api.remove_window(name, partition))

    def users_usage(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every tracked user's usage (``UserResourceUsageDAOInfo``)."""
        return self._run(_api.usage("user", None, partition))

    def groups_usage(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every tracked group's usage."""
        return self._run(_api.usage("group", None, partition))

    def user_usage(self, user: str, partition: str = "default") -> dict[str, Any]:
        """One user's usage; :class:`~quotaplane.errors.NotFoundError` when the user is not tracked."""
        return self._run(_api.usage("user", user, partition))

    def group_usage(self, group: str, partition: str = "default") -> dict[str, Any]:
        """One group's usage; :class:`~quotaplane.errors.NotFoundError` when the group is not tracked."""
        return self._run(_api.usage("group", group, partition))

    def config(self) -> str:
        """The running configuration (YAML text)."""
        return self._run(_api.config())

    def validate_config(self, text: str) -> tuple[bool, str]:
        """``(allowed, reason)`` of a configuration text (changes nothing)."""
        return self._run(_api.validate_config(text))

    def what_if(self, application_id: str, resource: Mapping[str, int] | Resource, *, priority: int = 0,
                partition: str = "default", max_runtime: float | None = None) -> Decision:
        """The decision ``allocate`` would give now, with every reason; changes nothing.
        ``max_runtime``: its declared runtime in seconds (a budget counts what it would commit)."""
        return self._run(_api.what_if(application_id, resource, priority, partition, max_runtime))

    def eta(self, *, queue: str | None = None, application_id: str | None = None,
            partition: str = "default") -> dict[str, Any]:
        """When each waiting ask will start (docs/eta.md): p10/p50/p90 times with their basis, None when
        unknown; of one queue (and below) or one application when named."""
        return self._run(_api.eta(queue, application_id, partition))

    def eta_of(self, allocation_key: str, partition: str = "default") -> dict[str, Any]:
        """One waiting ask's forecast and what would have to change for it to start now."""
        return self._run(_api.eta_of(allocation_key, partition))

    def explain(self, application_id: str, resource: Mapping[str, int] | Resource, *, priority: int = 0,
                partition: str = "default", max_runtime: float | None = None) -> dict[str, Any]:
        """``what_if`` with what would have to change for the request to be admitted now (releases,
        limits, the largest request of the same shape, a budget's reset or a window's edge that admits
        it), each change verified; changes nothing. ``max_runtime``: its declared runtime (seconds)."""
        return self._run(_api.explain(application_id, resource, priority, partition, max_runtime))

    def update_config(self, text: str) -> dict[str, Any]:
        """Apply a configuration text (all or nothing); ``{applied, checksum}``."""
        return self._run(_api.update_config(text))

    def add_node(self, node_id: str, capacity: Mapping[str, int] | Resource, *, schedulable: bool = True,
                 partition: str = "default") -> dict[str, Any]:
        """Register (or update) a node with its capacity."""
        return self._run(_api.add_node(node_id, capacity, schedulable, partition))

    def remove_node(self, node_id: str, partition: str = "default") -> None:
        """Remove a node (releasing what runs on it)."""
        return self._run(_api.remove_node(node_id, partition))

    def add_application(self, application_id: str, user: UserGroup, *, queue: str | None = None,
                        tags: Mapping[str, str] | None = None, partition: str = "default") -> str:
        """Submit an application; the queue it was placed in."""
        return self._run(_api.add_application(application_id, user, queue, tags, partition))

    def remove_application(self, application_id: str, partition: str = "default") -> None:
        """Remove an application, releasing its allocations."""
        return self._run(_api.remove_application(application_id, partition))

    def allocate(self, application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource, *,
                 priority: int = 0, preemptible: bool = True, node: str | None = None,
                 partition: str = "default", max_runtime: float | None = None) -> Decision:
        """Ask for an allocation: the :class:`Decision` (refused: ``allocated`` false with every reason).
        ``max_runtime``: its declared runtime in seconds (docs/eta.md)."""
        return self._run(_api.allocate(application_id, allocation_key, resource, priority, preemptible, node,
                                       partition, max_runtime))

    def release(self, allocation_key: str, partition: str = "default") -> None:
        """Release an allocation."""
        return self._run(_api.release(allocation_key, partition))

    def add_ask(self, application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource, *,
                priority: int = 0, partition: str = "default",
                max_runtime: float | None = None) -> dict[str, Any]:
        """Queue an ask: it waits (with its reasons) and is allocated once it fits. ``max_runtime``: the
        declared runtime in seconds of its allocation (docs/eta.md)."""
        return self._run(_api.add_ask(application_id, allocation_key, resource, priority, partition,
                                      max_runtime))

    def remove_ask(self, application_id: str, allocation_key: str, partition: str = "default") -> None:
        """Withdraw a waiting ask."""
        return self._run(_api.remove_ask(application_id, allocation_key, partition))

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
            url = self._session.server + _WS + f"/partition/{partition}/events/stream"
            try:
                with self._http.stream("GET", url, params=params, headers=self._session.headers,
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
                error = UnreachableError(self._session.server, "GET", exc)
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
    """The asynchronous twin of :class:`Client`: the same methods, awaited."""

    def __init__(self, server: str | None = None, *, token: str | None = None, timeout: float = 30.0,
                 retries: int = 3, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._session = _Session(server, token, retries)
        self._http = httpx.AsyncClient(timeout=timeout, transport=transport)

    @property
    def server(self) -> str:
        """The service this client talks to now."""
        return self._session.server

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
                response = await self._http.request(method, self._session.server + path, json=json_body,
                                                    content=content, params=params,
                                                    headers={**self._session.headers, **(headers or {})})
            except httpx.TransportError as exc:
                raise UnreachableError(self._session.server, method, exc) from exc
            if response.status_code in ok:
                return response
            wait = self._session.retry_after(response, attempt)
            if wait is None:
                raise _error(response)
            attempt += 1
            await asyncio.sleep(wait)

    async def _send(self, call: _Call[T], ok: Sequence[int]) -> httpx.Response:
        return await self.request(call.method, _WS + call.path, json_body=call.json_body,
                                  content=call.content, params=call.params, headers=call.headers, ok=ok)

    async def _run(self, call: _Call[T]) -> T:
        if call.again is None:
            return call.read(await self._send(call, call.ok))
        attempt = 0
        while True:             # as Client._run
            try:
                response = await self._send(call, (*call.ok, *_AGAIN_OK))
            except UnreachableError as exc:
                if (wait := self._session.unknown_retry(call, exc, attempt)) is None:
                    raise
            else:
                if attempt and (settled := call.again(response)) is not None:
                    return settled.value if isinstance(settled, _Done) else await self._run(settled)
                if (wait := self._session.unknown_retry(call, response, attempt)) is None:
                    if response.status_code not in call.ok:
                        raise _error(response)
                    return call.read(response)
            attempt += 1
            await asyncio.sleep(wait)


    async def partitions(self) -> list[dict[str, Any]]:
        """``GET /ws/v1/partitions``."""
        return await self._run(_api.partitions())

    async def queues(self, partition: str = "default") -> dict[str, Any]:
        """The queue tree of ``partition`` (YuniKorn's ``PartitionQueueDAOInfo``)."""
        return await self._run(_api.queues(partition))

    async def queue(self, path: str, partition: str = "default") -> dict[str, Any]:
        """One queue by its full path."""
        return await self._run(_api.queue(path, partition))

    async def nodes(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every node with its allocations (``NodeDAOInfo``)."""
        return await self._run(_api.nodes(partition))

    async def application(self, application_id: str, partition: str = "default") -> dict[str, Any]:
        """One application (``ApplicationDAOInfo``)."""
        return await self._run(_api.application(application_id, partition))

    async def applications(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every application of the partition."""
        return await self._run(_api.applications(partition))

    async def pending(self, application_id: str | None = None, partition: str = "default", *,
                      eta: bool = False) -> list[dict[str, Any]]:
        """The waiting asks (of one application, or of the partition in scheduling order); ``eta``:
        each with its forecast start (docs/eta.md)."""
        return await self._run(_api.pending(application_id, partition, eta))

    async def standing(self, *, queue: str | None = None, user: str | None = None, group: str | None = None,
                       quota: str | None = None, partition: str = "default",
                       eta: bool = False) -> dict[str, Any]:
        """Where exactly one of ``queue``, ``user``, ``group`` or ``quota`` stands (else ValueError);
        ``eta``: its waiting asks with their forecast start (docs/eta.md)."""
        return await self._run(_api.standing(queue, user, group, quota, partition, eta))

    async def history(self, *, group_by: str = "queue", step: str = "day", start: str | None = None,
                end: str | None = None, period: str | None = None, resource: str | None = None,
                names: Sequence[str] | None = None, top: int | None = None, csv: bool = False,
                partition: str = "default") -> Any:
        """Usage per scope and step (``GET …/history/usage``, docs/history.md): a dict, or CSV text."""
        return await self._run(_api.history("usage", {"groupBy": group_by, "step": step, "start": start,
                                                      "end": end, "period": period, "resource": resource,
                                                      "name": list(names) if names else None, "top": top},
                                            csv, partition))

    async def history_cost(self, *, group_by: str = "queue", start: str | None = None, end: str | None = None,
                     period: str | None = None, names: Sequence[str] | None = None, csv: bool = False,
                     partition: str = "default") -> Any:
        """The bill of a range per scope (``GET …/history/cost``): a dict, or CSV text."""
        params = {"groupBy": group_by, "start": start, "end": end, "period": period,
                  "name": list(names) if names else None}
        return await self._run(_api.history("cost", params, csv, partition))

    async def budgets(self, queue: str | None = None, *, user: str | None = None, group: str | None = None,
                      elastic_quota: str | None = None, partition: str = "default") -> dict[str, Any]:
        """Every budget, or one scope's (see :meth:`Client.budgets`)."""
        found: dict[str, Any] = await self._run(_api.budgets(queue, user, group, partition, elastic_quota))
        return found

    async def windows(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every time window with its state (see :meth:`Client.windows`)."""
        return await self._run(_api.windows(partition))

    async def add_window(self, window: Mapping[str, Any], partition: str = "default") -> list[dict[str, Any]]:
        """Add a one-off window (see :meth:`Client.add_window`)."""
        return await self._run(_api.add_window(window, partition))

    async def remove_window(self, name: str, partition: str = "default") -> list[dict[str, Any]]:
        """Remove a window (see :meth:`Client.remove_window`)."""
        return await self._run(_api.remove_window(name, partition))

    async def users_usage(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every tracked user's usage (``UserResourceUsageDAOInfo``)."""
        return await self._run(_api.usage("user", None, partition))

    async def groups_usage(self, partition: str = "default") -> list[dict[str, Any]]:
        """Every tracked group's usage."""
        return await self._run(_api.usage("group", None, partition))

    async def user_usage(self, user: str, partition: str = "default") -> dict[str, Any]:
        """One user's usage; :class:`~quotaplane.errors.NotFoundError` when the user is not tracked."""
        return await self._run(_api.usage("user", user, partition))

    async def group_usage(self, group: str, partition: str = "default") -> dict[str, Any]:
        """One group's usage; :class:`~quotaplane.errors.NotFoundError` when the group is not tracked."""
        return await self._run(_api.usage("group", group, partition))

    async def config(self) -> str:
        """The running configuration (YAML text)."""
        return await self._run(_api.config())

    async def validate_config(self, text: str) -> tuple[bool, str]:
        """``(allowed, reason)`` of a configuration text (changes nothing)."""
        return await self._run(_api.validate_config(text))

    async def what_if(self, application_id: str, resource: Mapping[str, int] | Resource, *, priority: int = 0,
                      partition: str = "default", max_runtime: float | None = None) -> Decision:
        """The decision ``allocate`` would give now, with every reason; changes nothing.
        ``max_runtime``: its declared runtime in seconds (a budget counts what it would commit)."""
        return await self._run(_api.what_if(application_id, resource, priority, partition, max_runtime))

    async def eta(self, *, queue: str | None = None, application_id: str | None = None,
                  partition: str = "default") -> dict[str, Any]:
        """When each waiting ask will start (docs/eta.md): p10/p50/p90 times with their basis, None when
        unknown; of one queue (and below) or one application when named."""
        return await self._run(_api.eta(queue, application_id, partition))

    async def eta_of(self, allocation_key: str, partition: str = "default") -> dict[str, Any]:
        """One waiting ask's forecast and what would have to change for it to start now."""
        return await self._run(_api.eta_of(allocation_key, partition))

    async def explain(self, application_id: str, resource: Mapping[str, int] | Resource, *,
                      priority: int = 0, partition: str = "default",
                      max_runtime: float | None = None) -> dict[str, Any]:
        """``what_if`` with what would have to change for the request to be admitted now (releases,
        limits, the largest request of the same shape, a budget's reset or a window's edge that admits
        it), each change verified; changes nothing. ``max_runtime``: its declared runtime (seconds)."""
        return await self._run(_api.explain(application_id, resource, priority, partition, max_runtime))

    async def update_config(self, text: str) -> dict[str, Any]:
        """Apply a configuration text (all or nothing); ``{applied, checksum}``."""
        return await self._run(_api.update_config(text))

    async def add_node(self, node_id: str, capacity: Mapping[str, int] | Resource, *,
                       schedulable: bool = True,
                       partition: str = "default") -> dict[str, Any]:
        """Register (or update) a node with its capacity."""
        return await self._run(_api.add_node(node_id, capacity, schedulable, partition))

    async def remove_node(self, node_id: str, partition: str = "default") -> None:
        """Remove a node (releasing what runs on it)."""
        return await self._run(_api.remove_node(node_id, partition))

    async def add_application(self, application_id: str, user: UserGroup, *, queue: str | None = None,
                              tags: Mapping[str, str] | None = None, partition: str = "default") -> str:
        """Submit an application; the queue it was placed in."""
        return await self._run(_api.add_application(application_id, user, queue, tags, partition))

    async def remove_application(self, application_id: str, partition: str = "default") -> None:
        """Remove an application, releasing its allocations."""
        return await self._run(_api.remove_application(application_id, partition))

    async def allocate(self, application_id: str, allocation_key: str,
                       resource: Mapping[str, int] | Resource, *,
                       priority: int = 0, preemptible: bool = True, node: str | None = None,
                       partition: str = "default", max_runtime: float | None = None) -> Decision:
        """Ask for an allocation: the :class:`Decision` (refused: ``allocated`` false with every reason).
        ``max_runtime``: its declared runtime in seconds (docs/eta.md)."""
        return await self._run(_api.allocate(application_id, allocation_key, resource, priority, preemptible,
                                             node, partition, max_runtime))

    async def release(self, allocation_key: str, partition: str = "default") -> None:
        """Release an allocation."""
        return await self._run(_api.release(allocation_key, partition))

    async def add_ask(self, application_id: str, allocation_key: str,
                      resource: Mapping[str, int] | Resource, *,
                      priority: int = 0, partition: str = "default",
                      max_runtime: float | None = None) -> dict[str, Any]:
        """Queue an ask: it waits (with its reasons) and is allocated once it fits. ``max_runtime``: the
        declared runtime in seconds of its allocation (docs/eta.md)."""
        return await self._run(_api.add_ask(application_id, allocation_key, resource, priority, partition,
                                            max_runtime))

    async def remove_ask(self, application_id: str, allocation_key: str, partition: str = "default") -> None:
        """Withdraw a waiting ask."""
        return await self._run(_api.remove_ask(application_id, allocation_key, partition))

    async def events(self, partition: str = "default", *, after: int | None = None, types: Sequence[str] = (),
                     application_id: str | None = None, reconnect: int = 10) -> AsyncIterator[dict[str, Any]]:
        """The partition's notices as they happen, resuming after a dropped connection."""
        last = after
        failures = 0
        while True:
            params = _stream_params(last, types, application_id)
            url = self._session.server + _WS + f"/partition/{partition}/events/stream"
            try:
                async with self._http.stream("GET", url, params=params, headers=self._session.headers,
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
                error = UnreachableError(self._session.server, "GET", exc)
            failures += 1
            wait = _reconnect_wait(failures, reconnect, error)
            if wait is None:
                return
            await asyncio.sleep(wait)
