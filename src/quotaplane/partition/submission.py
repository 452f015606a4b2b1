"""Where a submitted application goes and whether its user may submit there (seed 004, P-1 … P-8).

Placement rules pick the queue (with none, the requested queue as given); the submit ACL of that queue
— or, for a queue placement will create, of its first existing ancestor (P-6) — must admit the user.
An explicitly requested, existing queue whose ACL refuses the user is refused outright when no
placement rules are configured.
"""

from __future__ import annotations

from collections.abc import Mapping

from quotaplane.config.identity import UserGroup
from quotaplane.errors import RejectedError
from quotaplane.placement import PlacementManager
from quotaplane.policies.protocol import Decision, Violation
from quotaplane.queues import DRAINING, QueueTree

__all__ = ["Submission"]


class Submission:
    """The placement and submit-ACL decisions of one partition (its queue tree and rules)."""

    __slots__ = ("has_rules", "placement", "queues")

    def __init__(self, queues: QueueTree, placement: PlacementManager, *, has_rules: bool) -> None:
        self.queues = queues
        self.placement = placement
        #: placement rules are configured (then an explicit queue is only a hint to the rules)
        self.has_rules = has_rules

    def explicit_acl_denied(self, queue: str | None, user: UserGroup) -> str | None:
        """The path of an explicitly requested, existing queue whose submit ACL refuses ``user``."""
        if not queue:
            return None
        path = queue.strip().lower()
        if path != "root" and not path.startswith("root."):
            path = "root." + path
        if self.queues.queue(path) is not None and not self.queues.check_submit_acl(path, user):
            return path
        return None

    def submit_allowed(self, path: str, user: UserGroup) -> bool:
        """May ``user`` submit to ``path`` (P-6: a queue to be created is covered by its first existing
        ancestor's ACL)?"""
        probe = path
        while self.queues.queue(probe) is None and "." in probe:
            probe = probe.rsplit(".", 1)[0]
        return bool(self.queues.check_submit_acl(probe, user))

    def place(self, application_id: str, user: UserGroup, queue: str | None, tags: Mapping[str, str]) -> str:
        """The leaf queue path for the application; :class:`RejectedError` saying why when none."""
        denied = self.explicit_acl_denied(queue, user)
        if denied is not None and not self.has_rules:
            raise RejectedError(f"application {application_id!r} rejected: user {user.user!r} may not "
                                f"submit to queue {denied!r} (submit ACL)")
        path = self.placement.place(application_id, user, tags, self.queues, requested_queue=queue).lower()
        q = self.queues.queue(path)
        if q is not None and not q.is_leaf:
            raise RejectedError(f"application {application_id!r} rejected: queue {path!r} "
                                "is not a leaf queue")
        if q is not None and q.status == DRAINING:
            raise RejectedError(f"application {application_id!r} rejected: queue {path!r} is draining")
        if not self.submit_allowed(path, user):
            raise RejectedError(f"application {application_id!r} rejected: user {user.user!r} may not "
                                f"submit to queue {path!r} (submit ACL)")
        return path

    def can_submit(self, user: UserGroup, queue: str | None, tags: Mapping[str, str],
                   application_id: str) -> Decision:
        """The :meth:`place` answer as a Decision (an ``acl.submit`` violation when the ACL refuses)."""
        path = self.explicit_acl_denied(queue, user)
        if path is None or self.has_rules:
            path = self.placement.place(application_id, user, dict(tags), self.queues,
                                        requested_queue=queue).lower()
            if self.submit_allowed(path, user):
                return Decision(True, queue=path)
        return Decision(False, [Violation("acl", "acl.submit", path,
                                          f"user {user.user!r} may not submit to queue {path!r}")],
                        queue=path)
