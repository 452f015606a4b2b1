"""Temporary test fakes for engines whose real module has not landed yet (removed once it has).

Only ``quotaplane.policies.queue.QueuePolicy`` (owned by the queues engineer) is faked: a minimal
adapter over :class:`quotaplane.queues.QueueTree` with the agreed semantics.
"""

from __future__ import annotations

from typing import Any

from quotaplane.policy import AdmissionRequest, Violation


class FakeQueuePolicy:
    """Queue policy over a QueueTree: M-2 max, M-4 maxapplications at the first allocation."""

    name = "queue"

    def __init__(self, tree: Any) -> None:
        self.tree = tree

    def check(self, request: AdmissionRequest) -> list[Violation]:
        limits = list(self.tree.check_allocation(request.queue_path, request.resource))
        if request.first_allocation:
            limits.extend(self.tree.check_run_app(request.queue_path, request.application_id))
        return [Violation("queue", lim.code, lim.queue_path, lim.message, lim.shortfall) for lim in limits]

    def apply(self, request: AdmissionRequest) -> list[Violation]:
        found = self.check(request)
        if found:
            return found
        self.tree.increase_allocated(request.queue_path, request.resource)
        if request.first_allocation:
            self.tree.app_started(request.queue_path, request.application_id)
        return []

    def undo(self, request: AdmissionRequest) -> None:
        self.tree.decrease_allocated(request.queue_path, request.resource)
        if request.first_allocation:
            self.tree.app_stopped(request.queue_path, request.application_id)

    def release(self, request: AdmissionRequest, *, last_allocation: bool) -> None:
        self.tree.decrease_allocated(request.queue_path, request.resource)
        if last_allocation:
            self.tree.app_stopped(request.queue_path, request.application_id)


def install() -> None:
    """Make ``quotaplane.partition`` use the fake queue policy when the real one is missing."""
    try:
        import quotaplane.policies.queue  # noqa: F401
    except ImportError:
        import quotaplane.partition as partition

        partition._make_queue_policy = FakeQueuePolicy  # type: ignore[assignment]
