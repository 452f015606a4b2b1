"""The tracked usage of one user (seed 001 "User tracking")."""

from __future__ import annotations

from quotaplane.ugm.queue_tracker import QueueTracker

__all__ = ["AppLink", "UserTracker"]

#: ``(group, leaf queue path)`` of a running application: the group its usage is also tracked
#: against (``None``: no group) and the queue of its first increase.
AppLink = tuple[str | None, str]


class UserTracker:
    """Everything tracked for one user: queue nodes by path and the application → group links.

    ``apps`` maps each running application to its :data:`AppLink`. The group part is set at the
    first increase and never changes for the life of the application, a ``None`` ("no group") link
    included (G-1, G-6, seed 001 ``setGroupForApp``). The leaf path lets the hot path know that the
    application already counts as running at every node of that path (invariant: while the link
    exists, the application is in ``running`` of each of those nodes, for the user and the group).
    ``nodes`` maps lower-case queue paths to nodes.
    """

    __slots__ = ("apps", "name", "nodes")

    name: str
    nodes: dict[str, QueueTracker]
    apps: dict[str, AppLink]

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes = {}
        self.apps = {}

    def has_group_for_app(self, application_id: str) -> bool:
        """True when the application has a link, even a ``None`` one (seed 001 ``hasGroupForApp``)."""
        return application_id in self.apps

    def group_for_app(self, application_id: str) -> str | None:
        """The linked group of the application (``None``: no group, or no link)."""
        link = self.apps.get(application_id)
        return None if link is None else link[0]

    def set_group_for_app(self, application_id: str, group: str | None, leaf: str) -> None:
        """Link an application to a group once; an existing link is never replaced (seed 001)."""
        if application_id not in self.apps:
            self.apps[application_id] = (group, leaf)

    def usage(self) -> dict[str, int]:
        """The user's total usage: the root node's usage (a copy)."""
        root = self.nodes.get("root")
        return dict(root.usage) if root is not None else {}
