"""Application placement rules (seed 004, reference §1.14 P-1 … P-8).

``PlacementManager(rules).place(application_id, user, tags, queues, requested_queue)`` returns the full
lower-case queue path of an application or raises :class:`~quotaplane.errors.RejectedError`. It imports
only ``quotaplane.resources``, ``quotaplane.config`` and ``quotaplane.errors``.
"""

from __future__ import annotations

from quotaplane.placement.manager import (
    DEFAULT_QUEUE,
    RULE_NAMES,
    Filter,
    PlacementError,
    PlacementManager,
    QueueView,
    Rule,
    build_rule,
    replace_dot,
)

__all__ = [
    "DEFAULT_QUEUE",
    "RULE_NAMES",
    "Filter",
    "PlacementError",
    "PlacementManager",
    "QueueView",
    "Rule",
    "build_rule",
    "replace_dot",
]
