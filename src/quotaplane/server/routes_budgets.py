"""Budget endpoints under ``/ws/v1/partition/{p}/`` (issue 34, docs/budgets.md).

* ``GET …/budgets`` — every budgeted scope now: per resource its limit, consumed, committed and left
  resource-hours, the share used, the burn rate, when it runs out at that rate, and when it resets.
* ``GET …/budget?queue=root.a``, ``GET …/budget/user/{user}?queue=root.a``,
  ``GET …/budget/group/{group}?queue=root.a`` — one scope (404 when no budget is set there, or
  naming the queue when it does not exist).
* ``PUT …/budgets`` (admin) — the partition's budgets become the body's list (YAML or JSON): a
  configuration change, journalled and all-or-nothing like any other (a wrong entry is a 400 naming
  it, nothing changed).

* ``GET …/windows`` — every time window (docs/windows.md): schedule, overrides, whether it is open and
  whether it is due.
* ``POST …/windows`` (admin) — a one-off window (a temporary override: ``from``/``to`` or a cron):
  added to the configuration, validated like any change; one already due opens at once.
* ``DELETE …/window/{name}`` (admin) — remove a window (an open one is closed first).

The budgets themselves live in the partition's configuration (``budgets:``); reads come from the
partition's budget policy, at the service's clock (reading changes nothing).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from quotaplane.budgets import scope_status
from quotaplane.config.budgets import parse_budgets
from quotaplane.errors import ConfigError, InputError, NotFoundError
from quotaplane.server.common import errors, json
from quotaplane.server.extensions import edit_extension, policy_of, validate_extensions, yaml_documents
from quotaplane.windows import add_window, check_opened, remove_window, tick, window_states

__all__ = ["open_and_close", "router"]

_Queue = Annotated[str, Query(description="the queue (full path)")]

_KEY = "budgets"
_WINDOW_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "one window: name, queue, from/to or cron with duration, overrides (docs/windows.md)",
        "content": {"application/x-yaml": {"schema": {}}, "application/yaml": {"schema": {}},
                    "application/json": {"schema": {"type": "object"}}},
    }
}
_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "the partition's budgets: a list of budget entries (docs/budgets.md)",
        "content": {"application/x-yaml": {"schema": {}}, "application/yaml": {"schema": {}},
                    "application/json": {"schema": {"type": "array", "items": {"type": "object"}}}},
    }
}


def _policy(service: Any, partition: str) -> tuple[Any, Any]:
    p = service.partition(partition)
    policy = policy_of(p, "budget")
    if policy is None:
        raise NotFoundError(f"partition {partition!r} has no budgets (config key {_KEY!r})")
    return p, policy


def router(service: Any) -> APIRouter:
    """The budget routes bound to ``service``."""
    r = APIRouter(tags=["budgets"])
    read = service.tokens.dependencies("read")
    admin = service.tokens.dependencies("admin")

    @r.get("/ws/v1/partition/{partition}/budgets", response_model=None, dependencies=read,
           responses={200: {"description": "every budgeted scope"}, **errors(404, auth=True)})
    async def list_budgets(partition: str) -> JSONResponse:
        """Every budgeted scope seen so far (a wildcard budget shows each user or group it charged)."""
        p, policy = _policy(service, partition)
        with p.lock:
            return json({"partition": p.name, "budgets": policy.statuses(p.clock())})

    def one(partition: str, queue: str, user: str | None, group: str | None) -> JSONResponse:
        p, policy = _policy(service, partition)
        queue = queue.lower()               # queue names are case-blind, as everywhere
        with p.lock:
            # an unknown queue is a 404 naming it, as the other routes answer — not "no budget on" it
            if p.queues.queue(queue) is None:
                raise NotFoundError(f"queue {queue!r} not found in partition {p.name!r}")
            ledger = policy.ledger
            scope = ledger.peek(queue, user, group)
            if scope is None:
                who = f"user {user!r} in " if user else f"group {group!r} in " if group else ""
                raise NotFoundError(f"no budget on {who}queue {queue!r} in partition {p.name!r}")
            return json(scope_status(ledger, scope, max(round(p.clock() * 1000), ledger.now)))

    @r.get("/ws/v1/partition/{partition}/budget", response_model=None, dependencies=read,
           responses={200: {"description": "one queue's budget"}, **errors(404, auth=True)})
    async def queue_budget(partition: str, queue: _Queue) -> JSONResponse:
        """A queue's own budget."""
        return one(partition, queue, None, None)

    @r.get("/ws/v1/partition/{partition}/budget/user/{user}", response_model=None, dependencies=read,
           responses={200: {"description": "a user's budget in a queue"}, **errors(404, auth=True)})
    async def user_budget(partition: str, user: str, queue: _Queue) -> JSONResponse:
        """A user's budget in a queue (by name, or the queue's ``*`` budget)."""
        return one(partition, queue, user, None)

    @r.get("/ws/v1/partition/{partition}/budget/group/{group}", response_model=None, dependencies=read,
           responses={200: {"description": "a group's budget in a queue"}, **errors(404, auth=True)})
    async def group_budget(partition: str, group: str, queue: _Queue) -> JSONResponse:
        """A group's budget in a queue (by name, or the queue's ``*`` budget)."""
        return one(partition, queue, None, group)

    @r.get("/ws/v1/partition/{partition}/budget/elasticquota/{name}", response_model=None, dependencies=read,
           responses={200: {"description": "an elastic quota's budget"}, **errors(404, auth=True)})
    async def elastic_budget(partition: str, name: str) -> JSONResponse:
        """An elastic quota's budget."""
        p, policy = _policy(service, partition)
        with p.lock:
            ledger = policy.ledger
            scope = ledger.peek("", elastic=name)
            if scope is None:
                raise NotFoundError(f"no budget on elastic quota {name!r} in partition {p.name!r}")
            return json(scope_status(ledger, scope, max(round(p.clock() * 1000), ledger.now)))

    @r.put("/ws/v1/partition/{partition}/budgets", response_model=None, dependencies=admin,
           openapi_extra=_BODY, responses={200: {"description": "every budgeted scope"},
                                           **errors(400, 404, auth=True, write=True)})
    async def replace_budgets(partition: str, request: Request) -> JSONResponse:
        """The partition's budgets become the body's list (a configuration change)."""
        docs = yaml_documents((await request.body()).decode("utf-8", errors="strict"))
        if len(docs) != 1:
            raise InputError("the body must be one YAML or JSON document: a list of budgets")
        [budgets] = docs
        parse_budgets(budgets)                      # a wrong entry: a 400 naming it, nothing changed
        service.ensure_writable(partition)
        service.partition(partition)
        text = edit_extension(service.scheduler.config_text, partition, _KEY, lambda _: budgets or None)
        validate_extensions(text)
        service.scheduler.update_config(text)
        return await list_budgets(partition)

    def apply(text: str) -> None:
        validate_extensions(text)
        service.scheduler.update_config(text)
        open_and_close(service)

    @r.get("/ws/v1/partition/{partition}/windows", response_model=None, dependencies=read,
           responses={200: {"description": "every time window"}, **errors(404, auth=True)})
    async def list_windows(partition: str) -> JSONResponse:
        """Every window of the partition with its state now."""
        p = service.partition(partition)
        with p.lock:
            raw = p.config.extensions.get("windows")
            return json({"partition": p.name, "windows": window_states(raw, p.clock())})

    @r.post("/ws/v1/partition/{partition}/windows", response_model=None, dependencies=admin,
            openapi_extra=_WINDOW_BODY, responses={200: {"description": "every time window"},
                                                   **errors(400, 404, auth=True, write=True)})
    async def add(partition: str, request: Request) -> JSONResponse:
        """Add a one-off window (a temporary override); a wrong one is a 400 naming it."""
        docs = yaml_documents((await request.body()).decode("utf-8", errors="strict"))
        if len(docs) != 1 or not isinstance(docs[0], dict):
            raise InputError("the body must be one YAML or JSON document: a window")
        service.ensure_writable(None)
        service.partition(partition)
        try:
            text = add_window(service.scheduler.config_text, partition, docs[0])
            check_opened(text, partition, str(docs[0].get("name")))
            apply(text)
        except ConfigError as exc:
            # its line is one of the running configuration the window was added to, not of the body
            raise ConfigError(exc.problems[0][1]) from None
        return await list_windows(partition)

    @r.delete("/ws/v1/partition/{partition}/window/{name}", response_model=None, dependencies=admin,
              responses={200: {"description": "every time window"}, **errors(404, auth=True, write=True)})
    async def remove(partition: str, name: str) -> JSONResponse:
        """Remove a window; an open one is closed first (the values it replaced are put back)."""
        service.ensure_writable(None)
        service.partition(partition)
        apply(remove_window(service.scheduler.config_text, partition, name))
        return await list_windows(partition)

    return r


def open_and_close(service: Any) -> list[str]:
    """Open and close the windows due now (the timeouts loop's step, also run after a window edit)."""
    scheduler = service.scheduler
    return tick(scheduler.config_text, scheduler.update_config, scheduler.clock())
