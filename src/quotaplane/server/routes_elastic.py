"""Elastic quota endpoints under ``/ws/v1/partition/{p}/elasticquotas`` (seed 002).

The quota groups of a partition live in its config extension ``elasticquotas``; writes here are
config edits (see :mod:`quotaplane.server.extensions`): journalled, all-or-nothing, replayed after a
restart. Reads come from the partition's elastic policy (runtime, request, used per quota).

* ``GET  …/elasticquotas`` — every quota (spec, runtime, request, used, children, pods)
* ``GET  …/elasticquota/{name}`` — one quota
* ``PUT  …/elasticquotas`` (admin) — ElasticQuota YAML (one or more documents): the quota set becomes
  exactly these
* ``POST …/elasticquotas`` (admin) — ElasticQuota YAML: add or replace these quotas by name
* ``DELETE …/elasticquota/{name}`` (admin) — remove a quota (409 while it has children or pods)
* ``POST …/elasticquota/{name}/check`` — would ``resource`` be admitted now (``check``), nothing changes
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, StrictBool

from quotaplane.errors import ConflictError, NotFoundError
from quotaplane.resources import Resource
from quotaplane.server.common import errors, json, json_body, parse_body
from quotaplane.server.errors import ApiError
from quotaplane.server.extensions import edit_extension, policy_of, validate_extensions, yaml_documents
from quotaplane.server.models import ResourceMap, ViolationOut

__all__ = ["router"]

_KEY = "elasticquotas"

_YAML_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "one or more ElasticQuota documents (YAML or JSON), as in seed 002",
        # a change: typed YAML or JSON (issue 32 item 7)
        "content": {"application/x-yaml": {"schema": {}}, "application/yaml": {"schema": {}},
                    "application/json": {"schema": {}}},
    }
}


class ElasticCheckBody(BaseModel):
    """``POST …/elasticquota/{name}/check``."""

    model_config = ConfigDict(extra="forbid")

    resource: ResourceMap
    preemptible: StrictBool = True


class ElasticQuotaOut(BaseModel):
    """One quota as the engine describes it (internal units)."""

    model_config = ConfigDict(extra="allow")

    name: str
    parent: str | None = None
    min: dict[str, int]
    max: dict[str, int]
    runtime: dict[str, int]
    used: dict[str, int]
    request: dict[str, int]


class ElasticCheckOut(BaseModel):
    """The answer of a check: admissible, or the violations (as in an allocation's reasons)."""

    allowed: bool
    reasons: list[ViolationOut]


def _name_of(doc: Any) -> str:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise ApiError(400, "every ElasticQuota document needs metadata.name")
    return name


def _quota_list(current: Any) -> tuple[list[Any], Any]:
    """(list of quota objects, a function wrapping a new list back into the extension's shape)."""
    if current is None:
        return [], lambda new: new
    if isinstance(current, dict) and current.get("kind") is None:
        quotas = current.get("quotas")
        inner, wrap_inner = _quota_list(quotas)

        def wrap(new: list[Any]) -> Any:
            out = dict(current)
            out["quotas"] = wrap_inner(new)
            return out
        return inner, wrap
    if isinstance(current, str):
        return yaml_documents(current), lambda new: new
    if isinstance(current, dict):
        return [current], lambda new: new
    if isinstance(current, list):
        return list(current), lambda new: new
    raise ApiError(400, f"the configured {_KEY} extension has an unexpected shape")


def router(service: Any) -> APIRouter:
    """The elastic quota routes bound to ``service``."""
    r = APIRouter(tags=["elastic"])
    read = service.tokens.dependencies("read")
    admin = service.tokens.dependencies("admin")

    def manager_of(partition: str) -> Any:
        p = service.partition(partition)
        policy = policy_of(p, "elastic")
        if policy is None:
            raise NotFoundError(f"partition {partition!r} has no elastic quotas (config key {_KEY!r})")
        return p, policy.engine()

    def apply_edit(partition: str, edit: Any) -> None:
        service.ensure_writable(partition)
        service.partition(partition)
        text = edit_extension(service.scheduler.config_text, partition, _KEY, edit)
        validate_extensions(text)
        service.scheduler.update_config(text)

    def listing(partition: str) -> list[dict[str, Any]]:
        p, m = manager_of(partition)
        with p.lock:
            return [m.describe(n) for n in m.quota_names()]

    @r.get("/ws/v1/partition/{partition}/elasticquotas", response_model=None, dependencies=read,
           responses={200: {"model": list[ElasticQuotaOut]}, **errors(404, auth=True)})
    async def list_quotas(partition: str) -> JSONResponse:
        """Every quota group with its runtime quota, request and used amounts."""
        return json(listing(partition))

    @r.get("/ws/v1/partition/{partition}/elasticquota/{name}", response_model=None, dependencies=read,
           responses={200: {"model": ElasticQuotaOut}, **errors(404, auth=True)})
    async def get_quota(partition: str, name: str) -> JSONResponse:
        """One quota group."""
        p, m = manager_of(partition)
        with p.lock:
            if name not in m.quota_names():
                raise NotFoundError(f"elastic quota {name!r} not found")
            return json(m.describe(name))

    @r.put("/ws/v1/partition/{partition}/elasticquotas", response_model=None, dependencies=admin,
           openapi_extra=_YAML_BODY,
           responses={200: {"model": list[ElasticQuotaOut]}, **errors(404, 409, auth=True, write=True)})
    async def replace_quotas(partition: str, request: Request) -> JSONResponse:
        """Replace the quota set by the ElasticQuota documents of the body (all-or-nothing)."""
        docs = yaml_documents((await request.body()).decode("utf-8", errors="strict"))
        for d in docs:
            _name_of(d)

        def edit(current: Any) -> Any:
            _, wrap = _quota_list(current)
            return wrap(docs)

        apply_edit(partition, edit)
        return json(listing(partition))

    @r.post("/ws/v1/partition/{partition}/elasticquotas", response_model=None, dependencies=admin,
            openapi_extra=_YAML_BODY,
            responses={200: {"model": list[ElasticQuotaOut]}, **errors(404, 409, auth=True, write=True)})
    async def upsert_quotas(partition: str, request: Request) -> JSONResponse:
        """Add the quotas of the body, replacing those with the same name (all-or-nothing)."""
        docs = yaml_documents((await request.body()).decode("utf-8", errors="strict"))
        if not docs:
            raise ApiError(400, "no ElasticQuota document in the body")
        by_name = {_name_of(d): d for d in docs}

        def edit(current: Any) -> Any:
            quotas, wrap = _quota_list(current)
            kept = [q for q in quotas if not (isinstance(q, dict) and _name_of(q) in by_name)]
            return wrap(kept + list(by_name.values()))

        apply_edit(partition, edit)
        return json(listing(partition))

    @r.delete("/ws/v1/partition/{partition}/elasticquota/{name}", response_model=None, dependencies=admin,
              responses={200: {"model": list[ElasticQuotaOut]}, **errors(404, 409, auth=True, write=True)})
    async def delete_quota(partition: str, name: str) -> JSONResponse:
        """Remove a quota group; 409 while it has children or pods."""
        p, m = manager_of(partition)
        with p.lock:
            if name not in m.quota_names():
                raise NotFoundError(f"elastic quota {name!r} not found")
            info = m.describe(name)
            if info["children"] or info["pods"] or info["used"]:
                raise ConflictError(f"elastic quota {name!r} still has children or pods")

        def edit(current: Any) -> Any:
            quotas, wrap = _quota_list(current)
            kept = [q for q in quotas if not (isinstance(q, dict) and _name_of(q) == name)]
            if len(kept) == len(quotas):
                raise NotFoundError(f"elastic quota {name!r} is not in the configuration")
            return wrap(kept)

        apply_edit(partition, edit)
        return json(listing(partition))

    @r.post("/ws/v1/partition/{partition}/elasticquota/{name}/check", response_model=None,
            dependencies=read, openapi_extra=json_body(ElasticCheckBody),
            responses={200: {"model": ElasticCheckOut}, **errors(404, auth=True)})
    async def check(partition: str, name: str, request: Request) -> JSONResponse:
        """Would ``resource`` fit the quota's runtime (and min, when not preemptible)? Changes nothing.

        The request counts as pending when the runtime is computed, as in admission.
        """
        body = await parse_body(request, ElasticCheckBody)
        p, m = manager_of(partition)
        with p.lock:
            if name not in m.quota_names():
                raise NotFoundError(f"elastic quota {name!r} not found")
            # As in admission (policies.elastic): the request counts as pending for the runtime.
            found = m.violations(name, Resource(body.resource), preemptible=body.preemptible,
                                 include_request=True)
        reasons = [{"policy": "elastic", "code": code, "path": path, "message": message,
                    "resource": {k: int(v) for k, v in dict(short).items()}}
                   for code, path, message, short in found]
        return json({"allowed": not reasons, "reasons": reasons})

    return r
