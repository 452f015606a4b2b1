"""Quota tree and forest endpoints under ``/ws/v1/quotatrees`` and ``/ws/v1/forests`` (seed 003).

Quota trees belong to a partition's config extension ``quotatrees`` (the ``partition`` query
parameter, default ``default``); writes are config edits (journalled, all-or-nothing, see
:mod:`quotaplane.server.extensions`); consumers are the partition's allocations (an application's
``quotaplane.io/tree.<tree>`` tags place them), so allocating goes through the allocation endpoints.

* ``GET /ws/v1/quotatrees`` — every tree (name, resource names, root, forest) and the mode
* ``GET /ws/v1/quotatrees/{tree}`` — one tree with every node's quota, allocated amount and consumers
* ``PUT /ws/v1/quotatrees/{tree}`` (admin) — the seed's QuotaTree JSON: add the tree or replace its
  definition (the partition then re-places consumers; those that no longer fit are released)
* ``GET /ws/v1/quotatrees/{tree}/consumer/{id}`` — where a consumer (allocation key) sits
* ``GET /ws/v1/forests`` — ``{forest: [trees in order]}``
* ``PUT /ws/v1/forests/{forest}`` (admin) — ``{"trees": [...]}``: create the forest with these trees
"""

from __future__ import annotations

import json as _json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from quotaplane.errors import NotFoundError
from quotaplane.server.common import errors, json, json_body, parse_body
from quotaplane.server.errors import ApiError
from quotaplane.server.extensions import edit_extension, policy_of, validate_extensions

__all__ = ["router"]

_KEY = "quotatrees"
_PARTITION = Query(description="the partition whose quota trees are meant")


class ForestBody(BaseModel):
    """``PUT /ws/v1/forests/{forest}``."""

    model_config = ConfigDict(extra="forbid")

    trees: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)


class TreeOut(BaseModel):
    """A tree as the engine describes it, plus its forest and nodes."""

    model_config = ConfigDict(extra="allow")

    name: str
    resource_names: list[str]
    root: str


_TREE_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "a QuotaTree JSON document as in seed 003 (metadata.name must be the path's tree)",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


def _normal(current: Any) -> dict[str, Any]:
    if current is None:
        return {"trees": []}
    if isinstance(current, list):
        return {"trees": list(current)}
    if isinstance(current, dict):
        out = dict(current)
        out["trees"] = list(out.get("trees") or [])
        return out
    raise ApiError(400, f"the configured {_KEY} extension has an unexpected shape")


def _tree_name(doc: Any) -> str | None:
    if isinstance(doc, str):
        try:
            doc = _json.loads(doc)
        except ValueError:
            return None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else None


def router(service: Any) -> APIRouter:
    """The quota tree and forest routes bound to ``service``."""
    r = APIRouter(tags=["forest"])
    read = service.tokens.dependencies("read")
    admin = service.tokens.dependencies("admin")

    def policy(partition: str) -> tuple[Any, Any]:
        p = service.partition(partition)
        pol = policy_of(p, "forest")
        if pol is None:
            raise NotFoundError(f"partition {partition!r} has no quota trees (config key {_KEY!r})")
        return p, pol.manager

    def apply_edit(partition: str, edit: Any) -> None:
        service.ensure_writable()
        service.partition(partition)
        text = edit_extension(service.scheduler.config_text, partition, _KEY, edit)
        validate_extensions(text)
        service.scheduler.update_config(text)

    def tree_json(qm: Any, tree: str, nodes: bool) -> dict[str, Any]:
        info = dict(qm.tree_info(tree))
        info["forest"] = qm.tree_forest(tree)
        if nodes:
            info["nodes"] = [{"id": n, "quota": qm.node_quota(tree, n),
                              "allocated": qm.node_allocated(tree, n),
                              "consumers": qm.node_consumers(tree, n)} for n in qm.node_ids(tree)]
            info["allocatedConsumers"] = qm.allocated_consumers(tree)
        return info

    @r.get("/ws/v1/quotatrees", response_model=None, dependencies=read,
           responses={200: {"model": dict[str, Any]}, **errors(404, auth=True)})
    async def list_trees(partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Every quota tree of the partition, and the manager's mode."""
        p, qm = policy(partition)
        with p.lock, qm.transaction():
            return json({"mode": str(getattr(qm.get_mode(), "name", qm.get_mode())).lower(),
                         "trees": [tree_json(qm, t, False) for t in qm.tree_names()]})

    @r.get("/ws/v1/quotatrees/{tree}", response_model=None, dependencies=read,
           responses={200: {"model": TreeOut}, **errors(404, auth=True)})
    async def get_tree(tree: str, partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """One tree with every node's quota, allocated amount and consumers."""
        p, qm = policy(partition)
        with p.lock, qm.transaction():
            if tree not in qm.tree_names():
                raise NotFoundError(f"quota tree {tree!r} not found")
            return json(tree_json(qm, tree, True))

    @r.put("/ws/v1/quotatrees/{tree}", response_model=None, dependencies=admin, openapi_extra=_TREE_BODY,
           responses={200: {"model": TreeOut}, **errors(404, 409, auth=True, write=True)})
    async def put_tree(tree: str, request: Request,
                       partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Add a quota tree or replace its definition (the seed's QuotaTree JSON)."""
        raw = await request.body()
        try:
            doc = _json.loads(raw)
        except ValueError as exc:
            raise ApiError(400, f"request body is not valid JSON: {exc}") from None
        if _tree_name(doc) != tree:
            raise ApiError(400, f"metadata.name of the body must be {tree!r}")

        def edit(current: Any) -> Any:
            ext = _normal(current)
            ext["trees"] = [t for t in ext["trees"] if _tree_name(t) != tree] + [doc]
            return ext

        apply_edit(partition, edit)
        _p, qm = policy(partition)
        with qm.transaction():
            return json(tree_json(qm, tree, True))

    @r.get("/ws/v1/quotatrees/{tree}/consumer/{consumer_id}", response_model=None, dependencies=read,
           responses={200: {"model": dict[str, Any]}, **errors(404, auth=True)})
    async def get_consumer(tree: str, consumer_id: str,
                           partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Where a consumer (an allocation key) is placed in ``tree``."""
        p, qm = policy(partition)
        with p.lock, qm.transaction():
            if tree not in qm.tree_names():
                raise NotFoundError(f"quota tree {tree!r} not found")
            if not qm.has_consumer(consumer_id):
                raise NotFoundError(f"consumer {consumer_id!r} not found")
            return json({"consumerID": consumer_id, "tree": tree,
                         "allocated": qm.is_allocated(tree, consumer_id),
                         "node": qm.consumer_node(tree, consumer_id)})

    @r.get("/ws/v1/forests", response_model=None, dependencies=read,
           responses={200: {"model": dict[str, list[str]]}, **errors(404, auth=True)})
    async def list_forests(partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Every forest with its trees in order."""
        p, qm = policy(partition)
        with p.lock, qm.transaction():
            return json({f: list(qm.forest_tree_names(f)) for f in qm.forest_names()})

    @r.put("/ws/v1/forests/{forest}", response_model=None, dependencies=admin,
           openapi_extra=json_body(ForestBody),
           responses={200: {"model": dict[str, list[str]]}, **errors(404, 409, auth=True, write=True)})
    async def put_forest(forest: str, request: Request,
                         partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Create a forest with these trees (trees already in another forest stay there)."""
        body = await parse_body(request, ForestBody)

        def edit(current: Any) -> Any:
            ext = _normal(current)
            forests = dict(ext.get("forests") or {})
            forests[forest] = list(body.trees)
            ext["forests"] = forests
            return ext

        apply_edit(partition, edit)
        _p, qm = policy(partition)
        with qm.transaction():
            return json({f: list(qm.forest_tree_names(f)) for f in qm.forest_names()})

    return r
