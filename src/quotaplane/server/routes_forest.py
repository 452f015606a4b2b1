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

Issue 7 (every operation of the Python API over REST):

* ``GET|PUT /ws/v1/quotamode`` — the manager's mode (``set_mode``/``get_mode``); PUT (admin)
  ``{"mode": "normal"|"maintenance"}``
* ``DELETE /ws/v1/quotatrees/{tree}`` (admin) — ``delete_tree`` (409 while consumers are allocated)
* ``GET /ws/v1/quotatrees/{tree}/node/{node}`` — ``node_quota``/``node_allocated``/``node_consumers``
* ``PUT|DELETE /ws/v1/quotatrees/{tree}/node/{node}`` (admin) — the tree cache's ``add_node_spec`` /
  ``delete_node`` followed by the update; ``POST …/node/{node}/rename`` ``{"name": new}`` —
  ``rename_node``; ``PUT|DELETE /ws/v1/quotatrees/{tree}/resource/{name}`` — ``add_resource_name`` /
  ``delete_resource_name``. These edit the tree's definition in the config; the answer lists the
  consumers the update left unallocated (released by the partition), as ``update_tree`` returns them.
* ``GET /ws/v1/forests/{forest}`` — one forest's trees in order
* ``GET /ws/v1/forests/{forest}/consumer/{id}`` — ``is_allocated_forest`` and the node per tree
* ``DELETE /ws/v1/forests/{forest}`` (admin) — ``delete_forest`` (409 while forest allocations exist)
* ``DELETE /ws/v1/forests/{forest}/tree/{tree}`` (admin) — ``delete_tree_from_forest`` (409 while
  forest allocations hold the tree)
"""

from __future__ import annotations

import copy as _copy
import json as _json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from quotaplane.config.bodies import load_json
from quotaplane.errors import ConflictError, NotFoundError
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


class ModeBody(BaseModel):
    """``PUT /ws/v1/quotamode`` (and its answer)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["normal", "maintenance"]


class RenameBody(BaseModel):
    """``POST /ws/v1/quotatrees/{tree}/node/{node}/rename``."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1)]


class NodeOut(BaseModel):
    """One node of the tree in effect."""

    id: str
    quota: dict[str, int]
    allocated: dict[str, int]
    consumers: list[str]


class TreeEditOut(BaseModel):
    """The tree after a definition edit and the consumers the update left unallocated."""

    model_config = ConfigDict(extra="allow")

    tree: dict[str, Any]
    unallocated: list[str]


class ForestOut(BaseModel):
    """One forest and its trees in order."""

    forest: str
    trees: list[str]


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


_NODE_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": 'a node spec as in the QuotaTree JSON: {"parent": "root", "hard": "true", '
                       '"quota": {"cpu": "2"}} (parent "nil" or absent for the root)',
        "content": {"application/json": {"schema": {
            "type": "object", "required": ["quota"],
            "properties": {"parent": {"type": "string"}, "hard": {"type": ["string", "boolean"]},
                           "quota": {"type": "object",
                                     "additionalProperties": {"type": ["string", "integer"]}}}}}},
    }
}


def _mode_name(qm: Any) -> str:
    mode = qm.get_mode()
    return str(getattr(mode, "name", mode)).lower()


def _tree_name(doc: Any) -> str | None:
    if isinstance(doc, str):
        try:
            doc = load_json(doc, "a quota tree definition")
        except ValueError:
            return None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else None



def _require_tree(qm: Any, tree: str) -> None:
    """404 unless the quota tree exists."""
    if tree not in qm.tree_names():
        raise NotFoundError(f"quota tree {tree!r} not found")


def _require_forest(qm: Any, forest: str) -> None:
    """404 unless the quota forest exists."""
    if forest not in qm.forest_names():
        raise NotFoundError(f"quota forest {forest!r} not found")


def _require_consumer(qm: Any, consumer_id: str) -> None:
    """404 unless the consumer is known to the forest manager."""
    if not qm.has_consumer(consumer_id):
        raise NotFoundError(f"consumer {consumer_id!r} not found")

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
        return p, pol.engine()

    def forest_policy(partition: str) -> tuple[Any, Any]:
        p = service.partition(partition)
        pol = policy_of(p, "forest")
        if pol is None:
            raise NotFoundError(f"partition {partition!r} has no quota trees (config key {_KEY!r})")
        return p, pol

    def apply_edit(partition: str, edit: Any) -> None:
        service.ensure_writable(partition)
        service.partition(partition)
        text = edit_extension(service.scheduler.config_text, partition, _KEY, edit)
        validate_extensions(text)
        service.scheduler.update_config(text)

    def edit_tree(partition: str, tree: str, change: Callable[[dict[str, Any]], None]) -> JSONResponse:
        """Apply ``change`` to the spec of ``tree``'s definition in the config, then answer the tree
        and the consumers left unallocated (allocated before, not after: the update dropped them)."""
        p, qm = policy(partition)
        with p.lock, qm.transaction():
            _require_tree(qm, tree)
            before = allocated_everywhere(qm)

        def edit(current: Any) -> Any:
            ext = _normal(current)
            for i, t in enumerate(ext["trees"]):
                if _tree_name(t) != tree:
                    continue
                doc = load_json(t, f"tree {tree!r}") if isinstance(t, str) else _copy.deepcopy(t)
                if not isinstance(doc, dict):
                    raise ApiError(400, f"the configured definition of tree {tree!r} is not an object")
                spec = doc.get("spec")
                if not isinstance(spec, dict):
                    spec = doc["spec"] = {}
                change(spec)
                ext["trees"][i] = _json.dumps(doc) if isinstance(t, str) else doc
                return ext
            raise NotFoundError(f"quota tree {tree!r} is not in the configuration")

        apply_edit(partition, edit)
        _p, qm = policy(partition)
        with qm.transaction():
            after = set(allocated_everywhere(qm))
            return json({"tree": tree_json(qm, tree, True),
                         "unallocated": [c for c in before if c not in after]})

    def allocated_everywhere(qm: Any) -> list[str]:
        out: dict[str, None] = {}
        for t in qm.tree_names():
            out.update(dict.fromkeys(qm.allocated_consumers(t)))
        return list(out)

    def nodes_of(spec: dict[str, Any]) -> dict[str, Any]:
        nodes = spec.get("nodes")
        if not isinstance(nodes, dict):
            nodes = spec["nodes"] = {}
        return nodes

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
            return json({"mode": _mode_name(qm),
                         "trees": [tree_json(qm, t, False) for t in qm.tree_names()]})

    @r.get("/ws/v1/quotatrees/{tree}", response_model=None, dependencies=read,
           responses={200: {"model": TreeOut}, **errors(404, auth=True)})
    async def get_tree(tree: str, partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """One tree with every node's quota, allocated amount and consumers."""
        p, qm = policy(partition)
        with p.lock, qm.transaction():
            _require_tree(qm, tree)
            return json(tree_json(qm, tree, True))

    @r.put("/ws/v1/quotatrees/{tree}", response_model=None, dependencies=admin, openapi_extra=_TREE_BODY,
           responses={200: {"model": TreeOut}, **errors(404, 409, auth=True, write=True)})
    async def put_tree(tree: str, request: Request,
                       partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Add a quota tree or replace its definition (the seed's QuotaTree JSON)."""
        raw = await request.body()
        doc = load_json(raw, "request body")
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
            _require_tree(qm, tree)
            _require_consumer(qm, consumer_id)
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
        """Create or redefine a forest with these trees, in order (a tree in another forest: 400)."""
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

    @r.get("/ws/v1/quotamode", response_model=None, dependencies=read,
           responses={200: {"model": ModeBody}, **errors(404, auth=True)})
    async def get_mode(partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """The quota manager's mode (``get_mode``): normal or maintenance."""
        p, qm = policy(partition)
        with p.lock, qm.transaction():
            return json({"mode": _mode_name(qm)})

    @r.put("/ws/v1/quotamode", response_model=None, dependencies=admin, openapi_extra=json_body(ModeBody),
           responses={200: {"model": ModeBody}, **errors(404, auth=True, write=True)})
    async def put_mode(request: Request, partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Switch the mode (``set_mode``); kept in the config extension's ``mode`` key."""
        body = await parse_body(request, ModeBody)
        policy(partition)

        def edit(current: Any) -> Any:
            ext = _normal(current)
            ext["mode"] = body.mode
            return ext

        apply_edit(partition, edit)
        _p, qm = policy(partition)
        return json({"mode": _mode_name(qm)})

    @r.delete("/ws/v1/quotatrees/{tree}", response_model=None, dependencies=admin,
              responses={200: {"model": dict[str, Any]}, **errors(404, 409, auth=True, write=True)})
    async def delete_tree(tree: str, partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Delete a tree (``delete_tree``; it also leaves its forest); 409 while consumers are allocated."""
        p, qm = policy(partition)
        with p.lock, qm.transaction():
            _require_tree(qm, tree)
            if qm.allocated_consumers(tree):
                raise ConflictError(f"quota tree {tree!r} still has allocated consumers")

        def edit(current: Any) -> Any:
            ext = _normal(current)
            kept = [t for t in ext["trees"] if _tree_name(t) != tree]
            if len(kept) == len(ext["trees"]):
                raise NotFoundError(f"quota tree {tree!r} is not in the configuration")
            ext["trees"] = kept
            if ext.get("forests"):
                ext["forests"] = {f: [t for t in ts if t != tree] for f, ts in dict(ext["forests"]).items()}
            return ext

        apply_edit(partition, edit)
        _p, qm = policy(partition)
        with qm.transaction():
            return json({"mode": _mode_name(qm),
                         "trees": [tree_json(qm, t, False) for t in qm.tree_names()]})

    @r.get("/ws/v1/quotatrees/{tree}/node/{node}", response_model=None, dependencies=read,
           responses={200: {"model": NodeOut}, **errors(404, auth=True)})
    async def get_node(tree: str, node: str,
                       partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """A node of the tree in effect: its quota, allocated amount (whole subtree) and consumers."""
        p, qm = policy(partition)
        with p.lock, qm.transaction():
            _require_tree(qm, tree)
            if node not in qm.node_ids(tree):
                raise NotFoundError(f"node {node!r} not found in quota tree {tree!r}")
            return json({"id": node, "quota": qm.node_quota(tree, node),
                         "allocated": qm.node_allocated(tree, node),
                         "consumers": qm.node_consumers(tree, node)})

    @r.put("/ws/v1/quotatrees/{tree}/node/{node}", response_model=None, dependencies=admin,
           openapi_extra=_NODE_BODY,
           responses={200: {"model": TreeEditOut}, **errors(404, auth=True, write=True)})
    async def put_node(tree: str, node: str, request: Request,
                       partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Add or replace a node spec (``add_node_spec``), then update the tree."""
        p, qm = policy(partition)
        with p.lock, qm.transaction():
            _require_tree(qm, tree)
        spec = load_json(await request.body(), "request body")
        if not isinstance(spec, dict) or not spec:
            raise ApiError(400, "the body must be a non-empty node spec object")

        def change(tspec: dict[str, Any]) -> None:
            nodes_of(tspec)[node] = spec

        return edit_tree(partition, tree, change)

    @r.delete("/ws/v1/quotatrees/{tree}/node/{node}", response_model=None, dependencies=admin,
              responses={200: {"model": TreeEditOut}, **errors(404, auth=True, write=True)})
    async def delete_node(tree: str, node: str,
                          partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Remove a node spec (``delete_node``; its children dangle unless re-parented), then update."""
        def change(tspec: dict[str, Any]) -> None:
            nodes = nodes_of(tspec)
            if node not in nodes:
                raise NotFoundError(f"node {node!r} is not in the definition of quota tree {tree!r}")
            del nodes[node]

        return edit_tree(partition, tree, change)

    @r.post("/ws/v1/quotatrees/{tree}/node/{node}/rename", response_model=None, dependencies=admin,
            openapi_extra=json_body(RenameBody),
            responses={200: {"model": TreeEditOut}, **errors(404, 409, auth=True, write=True)})
    async def rename_node(tree: str, node: str, request: Request,
                          partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Rename a node (``rename_node``): its children follow; then update the tree.

        The definition in the config is what changes, so consumers are re-placed by the update
        like after any definition change (listed in ``unallocated`` if nothing can take them).
        """
        body = await parse_body(request, RenameBody)
        new = body.name

        def change(tspec: dict[str, Any]) -> None:
            nodes = nodes_of(tspec)
            if node not in nodes:
                raise NotFoundError(f"node {node!r} is not in the definition of quota tree {tree!r}")
            if new == node or new in nodes:
                raise ConflictError(f"node {new!r} already exists in quota tree {tree!r}")
            renamed: dict[str, Any] = {}
            for name, raw in nodes.items():
                if isinstance(raw, dict) and raw.get("parent") == node:
                    raw = {**raw, "parent": new}
                renamed[new if name == node else name] = raw
            tspec["nodes"] = renamed

        return edit_tree(partition, tree, change)

    @r.put("/ws/v1/quotatrees/{tree}/resource/{name}", response_model=None, dependencies=admin,
           responses={200: {"model": TreeEditOut}, **errors(404, auth=True, write=True)})
    async def add_resource_name(tree: str, name: str,
                                partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Add a resource name to the tree (``add_resource_name``), then update it."""
        def change(tspec: dict[str, Any]) -> None:
            names = list(tspec.get("resourceNames") or [])
            if name not in names:
                names.append(name)
            tspec["resourceNames"] = names

        return edit_tree(partition, tree, change)

    @r.delete("/ws/v1/quotatrees/{tree}/resource/{name}", response_model=None, dependencies=admin,
              responses={200: {"model": TreeEditOut}, **errors(404, auth=True, write=True)})
    async def delete_resource_name(tree: str, name: str,
                                   partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Remove a resource name from the tree (``delete_resource_name``), then update it."""
        def change(tspec: dict[str, Any]) -> None:
            names = list(tspec.get("resourceNames") or [])
            if name not in names:
                raise NotFoundError(f"resource {name!r} is not defined for quota tree {tree!r}")
            names.remove(name)
            tspec["resourceNames"] = names

        return edit_tree(partition, tree, change)

    @r.get("/ws/v1/forests/{forest}", response_model=None, dependencies=read,
           responses={200: {"model": ForestOut}, **errors(404, auth=True)})
    async def get_forest(forest: str, partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """One forest with its trees in order."""
        p, qm = policy(partition)
        with p.lock, qm.transaction():
            _require_forest(qm, forest)
            return json({"forest": forest, "trees": list(qm.forest_tree_names(forest))})

    @r.get("/ws/v1/forests/{forest}/consumer/{consumer_id}", response_model=None, dependencies=read,
           responses={200: {"model": dict[str, Any]}, **errors(404, auth=True)})
    async def get_forest_consumer(forest: str, consumer_id: str,
                                  partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Whether a consumer is allocated on the forest (``is_allocated_forest``) and its node per tree."""
        p, qm = policy(partition)
        with p.lock, qm.transaction():
            _require_forest(qm, forest)
            _require_consumer(qm, consumer_id)
            return json({"consumerID": consumer_id, "forest": forest,
                         "allocated": qm.is_allocated_forest(forest, consumer_id),
                         "nodes": {t: qm.consumer_node(t, consumer_id)
                                   for t in qm.forest_tree_names(forest)}})

    @r.delete("/ws/v1/forests/{forest}", response_model=None, dependencies=admin,
              responses={200: {"model": dict[str, list[str]]}, **errors(404, 409, auth=True, write=True)})
    async def delete_forest(forest: str, partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Delete a forest (``delete_forest``; its trees stay); 409 while allocations were made on it."""
        p, pol = forest_policy(partition)
        with p.lock:
            if forest not in pol.engine().forest_names():
                raise NotFoundError(f"quota forest {forest!r} not found")
            if pol.forest_users(forest):
                raise ConflictError(f"quota forest {forest!r} still has allocated consumers")

        def edit(current: Any) -> Any:
            ext = _normal(current)
            forests = dict(ext.get("forests") or {})
            if forest not in forests:
                raise NotFoundError(f"quota forest {forest!r} is not in the configuration")
            del forests[forest]
            ext["forests"] = forests
            for key in ("defaultforest", "defaultForest"):
                if ext.get(key) == forest:
                    del ext[key]
            return ext

        apply_edit(partition, edit)
        _p, qm = policy(partition)
        with qm.transaction():
            return json({f: list(qm.forest_tree_names(f)) for f in qm.forest_names()})

    @r.delete("/ws/v1/forests/{forest}/tree/{tree}", response_model=None, dependencies=admin,
              responses={200: {"model": dict[str, list[str]]}, **errors(404, 409, auth=True, write=True)})
    async def delete_tree_from_forest(forest: str, tree: str,
                                      partition: Annotated[str, _PARTITION] = "default") -> JSONResponse:
        """Remove a tree from a forest (``delete_tree_from_forest``; the tree stays)."""
        p, pol = forest_policy(partition)
        with p.lock:
            qm = pol.engine()
            _require_forest(qm, forest)
            if tree not in qm.forest_tree_names(forest):
                raise NotFoundError(f"quota forest {forest!r} does not include tree {tree!r}")
            if pol.forest_users(forest, tree):
                raise ConflictError(f"forest consumers of {forest!r} are allocated on tree {tree!r}")

        def edit(current: Any) -> Any:
            ext = _normal(current)
            forests = dict(ext.get("forests") or {})
            members = list(forests.get(forest) or [])
            if tree not in members:
                raise NotFoundError(f"quota forest {forest!r} does not include tree {tree!r} "
                                    "in the configuration")
            forests[forest] = [t for t in members if t != tree]
            ext["forests"] = forests
            return ext

        apply_edit(partition, edit)
        _p, qm = policy(partition)
        with qm.transaction():
            return json({f: list(qm.forest_tree_names(f)) for f in qm.forest_names()})

    return r
