"""The tracked usage of one group, shared by every application linked to it (seed 001 "Group tracking")."""

from __future__ import annotations

from quotaplane.ugm.queue_tracker import QueueTracker

__all__ = ["GroupTracker"]


class GroupTracker:
    """Everything tracked for one group: queue nodes by path and the linked applications.

    ``applications`` maps each linked application to its user. The ``*`` group is one such tracker
    named ``*`` (G-5, decision U5): a combined budget for everyone who falls into it.
    """

    __slots__ = ("applications", "name", "nodes")

    name: str
    nodes: dict[str, QueueTracker]
    applications: dict[str, str]

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes = {}
        self.applications = {}

    def usage(self) -> dict[str, int]:
        """The group's total usage: the root node's usage (a copy)."""
        root = self.nodes.get("root")
        return dict(root.usage) if root is not None else {}
