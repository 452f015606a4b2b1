"""Reading Kubernetes objects as the API server sends them (JSON decoded to dicts): a field that is
missing or not an object reads as an empty one, so a handler never fails on a sparse object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["mapping", "name_of"]


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is an object (a mapping), else an empty one."""
    return value if isinstance(value, Mapping) else {}


def name_of(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of a namespaced object, ``name`` of a cluster-wide one (for messages)."""
    meta = mapping(obj.get("metadata"))
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))
