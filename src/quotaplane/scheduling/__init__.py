"""Pending asks and their scheduling: the asks, their order, the cycle, and the scheduler object.

See ``docs/queueing.md``. The partition composes :class:`~quotaplane.scheduling.runner.PendingAsks`.
"""

from quotaplane.scheduling.asks import Ask, AskQueue
from quotaplane.scheduling.order import SORT_POLICIES, SORT_POLICY_PROPERTY, usage_shares
from quotaplane.scheduling.runner import CYCLE_FLUSH_EVERY, PendingAsks

__all__ = ["CYCLE_FLUSH_EVERY", "SORT_POLICIES", "SORT_POLICY_PROPERTY", "Ask", "AskQueue", "PendingAsks",
           "usage_shares"]
