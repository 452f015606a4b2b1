"""Pending asks and their scheduling: the asks and the notes of what to retry (the state's), their
order, the cycle, the scheduler, the preemptors and the questions they ask of the state.

See ``docs/queueing.md``. The partition holds :class:`~quotaplane.scheduling.runner.PendingAsks` beside
its state; both the scheduler and the preemptors plan on a read-only view of the state and apply through
the partition's transaction (:mod:`quotaplane.scheduling.view`).
"""

from quotaplane.scheduling.asks import Ask, AskQueue
from quotaplane.scheduling.order import SORT_POLICIES, SORT_POLICY_PROPERTY, usage_shares
from quotaplane.scheduling.runner import CYCLE_FLUSH_EVERY, PendingAsks

__all__ = ["CYCLE_FLUSH_EVERY", "SORT_POLICIES", "SORT_POLICY_PROPERTY", "Ask", "AskQueue", "PendingAsks",
           "usage_shares"]
