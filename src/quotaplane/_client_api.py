"""What the REST API's calls send and how their answers read, shared by :class:`~quotaplane.client.Client`
and :class:`~quotaplane.client.AsyncClient` (no I/O here): the error types and the error body, the
request bodies, and one :class:`_Call` per method (:class:`_api`). Import from :mod:`quotaplane.client`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from quotaplane.config.identity import UserGroup
from quotaplane.errors import ConflictError, InputError, NotFoundError, QuotaplaneError
from quotaplane.policies.protocol import Decision, Violation
from quotaplane.resources import Resource


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


class UnknownOutcomeError(ServerError):
    """502 with ``"outcome": "unknown"``: the store (or the partition's leader) did not confirm the
    commit, so the change may or may not have been applied. Read it back, or send it again when a
    retry cannot apply it twice (an allocation key)."""


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


#: transport failures before any byte of the request left: the service changed nothing
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol,
             httpx.LocalProtocolError, httpx.ProxyError)


class ServiceNotFoundError(ServiceError, NotFoundError):
    """404: no such partition, application, node, queue … (also a :class:`quotaplane.NotFoundError`)."""

    def __str__(self) -> str:
        return self.message


class ServiceConflictError(ServiceError, ConflictError):
    """409 other than a refused allocation: it exists already, or the state forbids the change (also a
    :class:`quotaplane.ConflictError`)."""


# Tracebacks and reprs name the module people import them from, not this private one.
for _cls in (ServiceError, BadRequestError, AccessDeniedError, UnavailableError, ServerError,
             UnreachableError, ServiceNotFoundError, ServiceConflictError, UnknownOutcomeError):
    _cls.__module__ = "quotaplane.client"


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
    return _error_class(status, body)(status, message, description, body)


#: the error class of each status the service answers (401/403, 502 and other 5xx apart)
_BY_STATUS: dict[int, type[ServiceError]] = {404: ServiceNotFoundError, 409: ServiceConflictError,
                                             400: BadRequestError, 401: AccessDeniedError,
                                             403: AccessDeniedError, 503: UnavailableError}


def _error_class(status: int, body: Mapping[str, Any]) -> type[ServiceError]:
    """The :class:`ServiceError` subclass an answer of ``status`` raises."""
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if status == 502 and body.get("outcome") == "unknown":
        return UnknownOutcomeError
    return ServerError if status >= 500 else ServiceError


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
                priority: int, preemptible: bool, node: str | None,
                max_runtime: float | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"applicationID": application_id, "allocationKey": allocation_key,
                            "resource": _resource(resource), "priority": priority,
                            "preemptible": preemptible}
    if node is not None:
        body["nodeID"] = node
    if max_runtime is not None:
        body["maxRuntime"] = max_runtime
    return body


def _node_body(capacity: Mapping[str, int] | Resource, schedulable: bool) -> dict[str, Any]:
    return {"capacity": _resource(capacity), "schedulable": schedulable}


def _decision(response: httpx.Response) -> Decision:
    data = response.json()
    if response.status_code == 409 and "allocated" not in data:
        raise _error(response)              # a duplicate key, not a refusal
    return decision_of(data)


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Done(Generic[T]):
    """The answer of a call, known without reading anything more."""

    value: T


@dataclass(frozen=True, slots=True)
class _Call(Generic[T]):
    """One call of the REST API — what to send and how its answer reads — built once for both
    clients, which only carry it out (:meth:`Client._run`, :meth:`AsyncClient._run`).

    ``again``: only for a call that a retry cannot apply twice (issue 32 #3: an allocation, whose key
    names it; a release). It is then sent again after an unknown outcome (a 502 ``"outcome":
    "unknown"``, or no answer once sent), and ``again`` reads the answer to that retry: the answer
    (:class:`_Done`) or a call that reads it back when it says the first attempt was applied,
    None to read it as usual."""

    method: str
    path: str                                    # below /ws/v1
    read: Callable[[httpx.Response], T]
    json_body: Any = None
    content: str | None = None
    params: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    ok: tuple[int, ...] = (200, 201)
    again: Callable[[httpx.Response], _Done[T] | _Call[T] | None] | None = None


def _list(r: httpx.Response) -> list[dict[str, Any]]:
    return list(r.json())


def _dict(r: httpx.Response) -> dict[str, Any]:
    return dict(r.json())


def _windows(r: httpx.Response) -> list[dict[str, Any]]:
    return list(r.json()["windows"])


def _none(_: httpx.Response) -> None:
    return None


def _validation(r: httpx.Response) -> tuple[bool, str]:
    body = r.json()
    return bool(body["allowed"]), str(body.get("reason", ""))


def _queue_name(r: httpx.Response) -> str:
    return str(r.json()["queueName"])


def _what_if(r: httpx.Response) -> Decision:
    return decision_of(r.json())


def _released_already(r: httpx.Response) -> _Done[None] | None:
    # a release sent again after an unknown outcome: gone already is what the first attempt did
    return _Done(None) if r.status_code == 404 else None


def _allocated_already(application_id: str, key: str, resource: Mapping[str, int] | Resource,
                       partition: str) -> Callable[[httpx.Response], _Call[Decision] | None]:
    """How the answer to an allocation sent again after an unknown outcome reads: "the key exists"
    is the first attempt's success once the allocation read back is the one asked for (the same
    allocation key is the same request); another request holding the key is a conflict."""
    want = {k: v for k, v in _resource(resource).items() if v}

    def same(r: httpx.Response) -> Decision:
        data = r.json()
        have = {str(k): int(v) for k, v in (data.get("resource") or {}).items() if v}
        if data.get("applicationID") == application_id and have == want:
            return Decision(True, [], [], allocation_key=key)
        raise ServiceConflictError(409, f"allocation key {key!r} is held by another request (application "
                             f"{data.get('applicationID')!r}, resource {have}), not this one")

    def again(r: httpx.Response) -> _Call[Decision] | None:
        if r.status_code != 409 or "allocated" in r.json():
            return None
        return _Call("GET", f"/partition/{partition}/allocation/{key}", same)

    return again


class _api:
    """The calls of the API, by the client method names (see :class:`Client` for what each does)."""

    @staticmethod
    def partitions() -> _Call[list[dict[str, Any]]]:
        return _Call("GET", "/partitions", _list)

    @staticmethod
    def queues(partition: str) -> _Call[dict[str, Any]]:
        return _Call("GET", f"/partition/{partition}/queues", _dict)

    @staticmethod
    def queue(path: str, partition: str) -> _Call[dict[str, Any]]:
        return _Call("GET", f"/partition/{partition}/queue/{path}", _dict)

    @staticmethod
    def nodes(partition: str) -> _Call[list[dict[str, Any]]]:
        return _Call("GET", f"/partition/{partition}/nodes", _list)

    @staticmethod
    def application(application_id: str, partition: str) -> _Call[dict[str, Any]]:
        return _Call("GET", f"/partition/{partition}/application/{application_id}", _dict)

    @staticmethod
    def applications(partition: str) -> _Call[list[dict[str, Any]]]:
        return _Call("GET", f"/partition/{partition}/applications", _list)

    @staticmethod
    def pending(application_id: str | None, partition: str, eta: bool = False) -> _Call[list[dict[str, Any]]]:
        params = {"eta": "true"} if eta else None
        if application_id is None:
            return _Call("GET", f"/partition/{partition}/asks", _list, params=params)
        return _Call("GET", f"/partition/{partition}/application/{application_id}/asks", _list, params=params)

    @staticmethod
    def standing(queue: str | None, user: str | None, group: str | None, quota: str | None,
                 partition: str, eta: bool = False) -> _Call[dict[str, Any]]:
        asked = [(k, v) for k, v in (("queue", queue), ("user", user), ("group", group), ("quota", quota))
                 if v is not None]
        if len(asked) != 1:
            raise InputError("name exactly one of queue, user, group or quota")
        (kind, name), = asked
        params = {"kind": kind, "name": name, **({"eta": "true"} if eta else {})}
        return _Call("GET", f"/partition/{partition}/standing", _dict, params=params)

    @staticmethod
    def usage(kind: str, name: str | None, partition: str) -> _Call[Any]:
        if name is None:
            return _Call("GET", f"/partition/{partition}/usage/{kind}s", _list)
        return _Call("GET", f"/partition/{partition}/usage/{kind}/{quote(name, safe='')}", _dict)

    @staticmethod
    def history(what: str, params: Mapping[str, Any], csv: bool, partition: str) -> _Call[Any]:
        query = {k: v for k, v in params.items() if v is not None}
        if csv:
            query["format"] = "csv"
        return _Call("GET", f"/partition/{partition}/history/{what}", (lambda r: r.text) if csv else _dict,
                     params=query)

    @staticmethod
    def budgets(queue: str | None, user: str | None, group: str | None, partition: str,
                elastic_quota: str | None = None) -> _Call[Any]:
        if elastic_quota is not None:
            return _Call("GET", f"/partition/{partition}/budget/elasticquota/{quote(elastic_quota, safe='')}",
                         _dict)
        if queue is None:
            return _Call("GET", f"/partition/{partition}/budgets", _dict)
        who = f"/user/{quote(user, safe='')}" if user is not None else \
            f"/group/{quote(group, safe='')}" if group is not None else ""
        return _Call("GET", f"/partition/{partition}/budget{who}", _dict, params={"queue": queue})

    @staticmethod
    def windows(partition: str) -> _Call[list[dict[str, Any]]]:
        return _Call("GET", f"/partition/{partition}/windows", _windows)

    @staticmethod
    def add_window(window: Mapping[str, Any], partition: str) -> _Call[list[dict[str, Any]]]:
        return _Call("POST", f"/partition/{partition}/windows", _windows, json_body=dict(window))

    @staticmethod
    def remove_window(name: str, partition: str) -> _Call[list[dict[str, Any]]]:
        return _Call("DELETE", f"/partition/{partition}/window/{quote(name, safe='')}", _windows)

    @staticmethod
    def config() -> _Call[str]:
        return _Call("GET", "/config", lambda r: r.text)

    @staticmethod
    def validate_config(text: str) -> _Call[tuple[bool, str]]:
        return _Call("POST", "/validate-conf", _validation, content=text)

    @staticmethod
    def what_if(application_id: str, resource: Mapping[str, int] | Resource, priority: int,
                partition: str, max_runtime: float | None = None) -> _Call[Decision]:
        body: dict[str, Any] = {"applicationID": application_id, "resource": _resource(resource),
                                "priority": priority}
        if max_runtime is not None:
            body["maxRuntime"] = max_runtime
        return _Call("POST", f"/partition/{partition}/whatif", _what_if, json_body=body)

    @staticmethod
    def eta(queue: str | None, application_id: str | None, partition: str) -> _Call[dict[str, Any]]:
        params = {k: v for k, v in (("queue", queue), ("applicationID", application_id)) if v is not None}
        return _Call("GET", f"/partition/{partition}/eta", _dict, params=params or None)

    @staticmethod
    def eta_of(allocation_key: str, partition: str) -> _Call[dict[str, Any]]:
        return _Call("GET", f"/partition/{partition}/eta/{quote(allocation_key, safe='')}", _dict)

    @staticmethod
    def explain(application_id: str, resource: Mapping[str, int] | Resource, priority: int,
                partition: str, max_runtime: float | None = None) -> _Call[dict[str, Any]]:
        body: dict[str, Any] = {"applicationID": application_id, "resource": _resource(resource),
                                "priority": priority}
        if max_runtime is not None:
            body["maxRuntime"] = max_runtime
        return _Call("POST", f"/partition/{partition}/whatif/explain", _dict, json_body=body)

    @staticmethod
    def update_config(text: str) -> _Call[dict[str, Any]]:
        return _Call("PUT", "/config", _dict, content=text, headers={"Content-Type": "application/x-yaml"})

    @staticmethod
    def add_node(node_id: str, capacity: Mapping[str, int] | Resource, schedulable: bool,
                 partition: str) -> _Call[dict[str, Any]]:
        return _Call("PUT", f"/partition/{partition}/node/{node_id}", _dict,
                     json_body=_node_body(capacity, schedulable))

    @staticmethod
    def remove_node(node_id: str, partition: str) -> _Call[None]:
        return _Call("DELETE", f"/partition/{partition}/node/{node_id}", _none)

    @staticmethod
    def add_application(application_id: str, user: UserGroup, queue: str | None,
                        tags: Mapping[str, str] | None, partition: str) -> _Call[str]:
        return _Call("POST", f"/partition/{partition}/applications", _queue_name,
                     json_body=_app_body(application_id, user, queue, tags))

    @staticmethod
    def remove_application(application_id: str, partition: str) -> _Call[None]:
        return _Call("DELETE", f"/partition/{partition}/application/{application_id}", _none)

    @staticmethod
    def allocate(application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource,
                 priority: int, preemptible: bool, node: str | None, partition: str,
                 max_runtime: float | None = None) -> _Call[Decision]:
        return _Call("POST", f"/partition/{partition}/allocations", _decision,
                     json_body=_alloc_body(application_id, allocation_key, resource, priority, preemptible,
                                           node, max_runtime), ok=(201, 409),
                     again=_allocated_already(application_id, allocation_key, resource, partition))

    @staticmethod
    def release(allocation_key: str, partition: str) -> _Call[None]:
        return _Call("DELETE", f"/partition/{partition}/allocation/{allocation_key}", _none,
                     again=_released_already)

    @staticmethod
    def add_ask(application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource,
                priority: int, partition: str, max_runtime: float | None = None) -> _Call[dict[str, Any]]:
        body: dict[str, Any] = {"allocationKey": allocation_key, "resource": _resource(resource),
                                "priority": priority}
        if max_runtime is not None:
            body["maxRuntime"] = max_runtime
        return _Call("POST", f"/partition/{partition}/application/{application_id}/asks", _dict,
                     json_body=body)

    @staticmethod
    def remove_ask(application_id: str, allocation_key: str, partition: str) -> _Call[None]:
        return _Call("DELETE", f"/partition/{partition}/application/{application_id}/ask/{allocation_key}",
                     _none)
