"""The queue quota policy: a :class:`~quotaplane.queues.QueueTree` behind the QuotaPolicy protocol.

First in the admission path (decision Q2: queue → user/group → elastic → forest). ``check`` lists every
queue from the leaf to the root whose ``max`` the allocation would exceed (M-2: ``queue.max``, and
``root.capacity`` for the cluster size) and, for the application's first allocation, every queue whose
``maxapplications`` one more running application would exceed (M-4: ``queue.maxapplications``). The
violation ``path`` is the queue where the limit is set; ``resource`` is the shortfall. An application
counts as running from its first allocation until its last allocation is released (seed 001).
"""

from __future__ import annotations

from typing import Any

from quotaplane.policies.protocol import AdmissionRequest, QuotaPolicy, Violation
from quotaplane.queues import QueueLimit, QueueTree
from quotaplane.resources import Resource

__all__ = ["QueuePolicy"]


def _violation(limit: QueueLimit) -> Violation:
    return Violation(policy="queue", code=limit.code, path=limit.queue_path, message=limit.message,
                     resource=limit.shortfall)


class QueuePolicy(QuotaPolicy):
    """Adapter from the admission protocol to one partition's queue tree."""

    __slots__ = ("tree",)

    def __init__(self, tree: QueueTree) -> None:
        self.name = "queue"
        self.tree = tree

    def check(self, request: AdmissionRequest) -> list[Violation]:
        """Every queue violation of ``request`` (M-2, and M-4 on the first allocation). Changes nothing."""
        tree = self.tree
        out = [_violation(lim) for lim in tree.check_allocation(request.queue_path, request.resource)]
        if request.first_allocation:
            out.extend(_violation(lim) for lim in tree.check_run_app(request.queue_path,
                                                                      request.application_id))
        return out

    def apply(self, request: AdmissionRequest) -> list[Violation]:
        """Count the allocation at every queue leaf to root (+ the running application on the first
        allocation). The partition has checked under its lock; this never refuses."""
        self.tree.increase_allocated(request.queue_path, request.resource)
        if request.first_allocation:
            self.tree.app_started(request.queue_path, request.application_id)
        return []

    def undo(self, request: AdmissionRequest) -> None:
        """Reverse a successful :meth:`apply` exactly."""
        self.tree.decrease_allocated(request.queue_path, request.resource)
        if request.first_allocation:
            self.tree.app_stopped(request.queue_path, request.application_id)

    def release(self, request: AdmissionRequest, *, last_allocation: bool) -> None:
        """Give back an allocation; the application stops running with its last allocation."""
        self.tree.decrease_allocated(request.queue_path, request.resource)
        if last_allocation:
            self.tree.app_stopped(request.queue_path, request.application_id)

    def set_cluster_resource(self, total: Resource) -> None:
        """The sum of node capacities changed: it is the root max (M-1)."""
        self.tree.set_cluster_resource(total)

    def dump_state(self) -> dict[str, Any]:
        """The queue tree's deterministic state."""
        return self.tree.dump_state()
