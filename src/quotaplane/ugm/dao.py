"""The REST shapes of the user group manager (reference §2.1, decision U15).

``/usage/users`` → a list of user objects, ``/usage/groups`` → a list of group objects::

    {"userName": str, "groups": {appID: groupName}, "queues": <node>}
    {"groupName": str, "applications": [appID], "queues": <node>}
    <node> = {"queuePath": str, "resourceUsage": {type: int}, "runningApplications": [appID],
              "maxResources": {type: int}, "maxApplications": int, "children": [<node>]}

Empty fields are omitted (Go ``omitempty``): ``groups`` lists only applications with a non-``None``
link, ``resourceUsage`` has zero amounts pruned, ``maxApplications`` 0 is omitted. YuniKorn emits
lists in map order; quotaplane sorts them (application ids, child paths, user and group names) so
the output is deterministic.
"""

from __future__ import annotations

from typing import Any

from quotaplane.ugm.group_tracker import GroupTracker
from quotaplane.ugm.queue_tracker import QueueTracker
from quotaplane.ugm.user_tracker import UserTracker

__all__ = ["group_dao", "node_dao", "user_dao"]


def _children_index(nodes: dict[str, QueueTracker]) -> dict[str, list[str]]:
    index: dict[str, list[str]] = {}
    for path in sorted(nodes):
        cut = path.rfind(".")
        if cut > 0:
            index.setdefault(path[:cut], []).append(path)
    return index


def node_dao(nodes: dict[str, QueueTracker], path: str = "root",
             index: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The ``ResourceUsageDAOInfo`` of the node at ``path`` and everything below it."""
    if index is None:
        index = _children_index(nodes)
    node = nodes[path]
    out: dict[str, Any] = {"queuePath": path}
    if node.usage:
        out["resourceUsage"] = {k: node.usage[k] for k in sorted(node.usage)}
    if node.running:
        out["runningApplications"] = sorted(node.running)
    if node.max_resources:
        out["maxResources"] = {k: node.max_resources[k] for k in sorted(node.max_resources)}
    if node.max_applications:
        out["maxApplications"] = node.max_applications
    children = index.get(path)
    if children:
        out["children"] = [node_dao(nodes, child, index) for child in children]
    return out


def _queues(nodes: dict[str, QueueTracker]) -> dict[str, Any] | None:
    if "root" not in nodes:
        return None
    return node_dao(nodes, "root")


def user_dao(tracker: UserTracker) -> dict[str, Any]:
    """The ``UserResourceUsageDAOInfo`` of one user."""
    out: dict[str, Any] = {"userName": tracker.name}
    links = {app: link[0] for app, link in sorted(tracker.apps.items()) if link[0] is not None}
    if links:
        out["groups"] = links
    queues = _queues(tracker.nodes)
    if queues is not None:
        out["queues"] = queues
    return out


def group_dao(tracker: GroupTracker) -> dict[str, Any]:
    """The ``GroupResourceUsageDAOInfo`` of one group."""
    out: dict[str, Any] = {"groupName": tracker.name}
    if tracker.applications:
        out["applications"] = sorted(tracker.applications)
    queues = _queues(tracker.nodes)
    if queues is not None:
        out["queues"] = queues
    return out
