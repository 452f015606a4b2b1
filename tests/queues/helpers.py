"""Build config model objects directly (independent of the YAML loader) for the queue tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from quotaplane.config.model import (
    ChildTemplateConfig,
    PartitionConfig,
    PlacementRuleConfig,
    QueueConfig,
)
from quotaplane.resources import Resource


def _res(raw: Mapping[str, Any] | None) -> Resource | None:
    return None if raw is None else Resource.from_config(raw)


def queue(spec: Mapping[str, Any], parent_path: str = "") -> QueueConfig:
    """A QueueConfig from a YuniKorn-like dict (``name``, ``parent``, ``max``, ``guaranteed``,
    ``maxapplications``, ``submitacl``, ``adminacl``, ``properties``, ``childtemplate``, ``queues``)."""
    name = str(spec["name"]).lower()
    path = name if not parent_path else f"{parent_path}.{name}"
    template = spec.get("childtemplate")
    child_template = None
    if template is not None:
        child_template = ChildTemplateConfig(
            max_applications=int(template.get("maxapplications", 0)),
            properties=dict(template.get("properties", {})),
            max=_res(template.get("max")),
            guaranteed=_res(template.get("guaranteed")),
        )
    return QueueConfig(
        name=name,
        path=path,
        parent=bool(spec.get("parent", False)),
        max=_res(spec.get("max")),
        guaranteed=_res(spec.get("guaranteed")),
        max_applications=int(spec.get("maxapplications", 0)),
        submit_acl=spec.get("submitacl"),
        admin_acl=spec.get("adminacl"),
        properties=dict(spec.get("properties", {})),
        child_template=child_template,
        queues=tuple(queue(c, path) for c in spec.get("queues", ())),
    )


def partition(root: Mapping[str, Any], *, name: str = "default",
              rules: Sequence[PlacementRuleConfig] = ()) -> PartitionConfig:
    """A PartitionConfig whose root queue is built by :func:`queue` (``root`` is forced as the name)."""
    spec = dict(root)
    spec["name"] = "root"
    spec["parent"] = True
    return PartitionConfig(name=name, root=queue(spec), placement_rules=tuple(rules))
