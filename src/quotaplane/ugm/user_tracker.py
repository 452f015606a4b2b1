"""The tracked usage of one user (seed 001 "User tracking")."""

from __future__ import annotations

from quotaplane.ugm.queue_tracker import QueueTracker

__all__ = ["UserTracker"]


class UserTracker:
    """Everything tracked for one user: queue nodes by path and the application → group links.

    ``groups`` maps each running application to the group its usage is also tracked against, or
    ``None`` for "no group" (G-1, G-6: set at the first increase, never changed for the life of the
    application, a ``None`` link included). ``nodes`` maps lower-case queue paths to nodes.
    """

    __slots__ = ("groups", "name", "nodes")

    name: str
    nodes: dict[str, QueueTracker]
    groups: dict[str, str | None]

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes = {}
        self.groups = {}

    def has_group_for_app(self, application_id: str) -> bool:
        """True when the application has a link, even a ``None`` one (seed 001 ``hasGroupForApp``)."""
        return application_id in self.groups

    def set_group_for_app(self, application_id: str, group: str | None) -> None:
        """Link an application to a group once; an existing link is never replaced (seed 001)."""
        if application_id not in self.groups:
            self.groups[application_id] = group

    def usage(self) -> dict[str, int]:
        """The user's total usage: the root node's usage (a copy)."""
        root = self.nodes.get("root")
        return dict(root.usage) if root is not None else {}
