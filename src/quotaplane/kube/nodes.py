"""Nodes → partition capacity (reference ``kubernetes-front.md`` §5).

YuniKorn registers a node's ``status.allocatable`` (``GetNodeResource``), cpu as ``vcore`` in milli and
everything else by ``Value()`` — ``pods`` as a plain count. quotaplane places nothing on nodes: a node
counts towards the cluster's capacity while it can take new pods, i.e. it is not cordoned
(``spec.unschedulable``) and, when it reports a ``Ready`` condition, that condition is ``True``. Taints
are not evaluated (tolerations are per pod), as the reference recommends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quotaplane.k8s.convert import resource_list
from quotaplane.kube.objects import mapping
from quotaplane.resources import Resource

__all__ = ["node_capacity", "node_counts"]


def node_counts(node: Mapping[str, Any]) -> bool:
    """The node adds to the cluster's capacity: schedulable and not reported un-Ready."""
    if mapping(node.get("spec")).get("unschedulable") is True:
        return False
    conditions = mapping(node.get("status")).get("conditions")
    if isinstance(conditions, list):
        for c in conditions:
            if isinstance(c, Mapping) and c.get("type") == "Ready":
                return c.get("status") == "True"
    return True


def node_capacity(node: Mapping[str, Any]) -> Resource:
    """``status.allocatable`` in internal units (ValueError names a bad quantity)."""
    allocatable = mapping(mapping(node.get("status")).get("allocatable"))
    return Resource.of(dict(sorted(resource_list(allocatable).items())))
