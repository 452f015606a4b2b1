"""The user group manager (seeds 000 and 001): usage tracking and limit enforcement per user and group.

Self-contained engine: it imports only :mod:`quotaplane.resources` and :mod:`quotaplane.config`.

    >>> import quotaplane as qp
    >>> m = qp.ugm.Manager()
    >>> m.increase_tracked_resource("root.a", "app-1", qp.Resource({"vcore": 1000}), qp.UserGroup("sue"))
    True
    >>> m.get_user_resources(qp.UserGroup("sue"))
    Resource({'vcore': 1000})

See ``docs/users-and-groups.md`` for the rules and worked examples.
"""

from quotaplane.ugm.group_tracker import GroupTracker
from quotaplane.ugm.limits import WILDCARD, LimitEntry, LimitTable
from quotaplane.ugm.manager import LimitExceeded, Manager, split_queue_path
from quotaplane.ugm.queue_tracker import QueueTracker
from quotaplane.ugm.user_tracker import UserTracker

__all__ = [
    "WILDCARD",
    "GroupTracker",
    "LimitEntry",
    "LimitExceeded",
    "LimitTable",
    "Manager",
    "QueueTracker",
    "UserTracker",
    "split_queue_path",
]
