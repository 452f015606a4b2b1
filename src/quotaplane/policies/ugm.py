"""The user/group admission policy: the user group manager behind the QuotaPolicy protocol.

Second in the admission path (decision Q2: queue → user/group → elastic → forest). ``check`` asks the
manager which user and group limits an increase would exceed (:meth:`Manager.explain_increase`) and
maps each :class:`~quotaplane.ugm.manager.LimitExceeded` to a :class:`~quotaplane.policies.Violation`:
``policy`` is ``"user"`` or ``"group"``, ``code`` ``user.maxresources`` / ``user.maxapplications`` /
``group.maxresources`` / ``group.maxapplications``, ``path`` the queue where the limit is set and
``resource`` the shortfall. ``apply`` is the manager's own atomic check-then-increase (decision U1),
so it may still refuse and then changes nothing. Running-application counting follows seed 001:
the application enters at its first allocation (the first increase) and leaves when the partition
releases its last allocation (``remove_app``).
"""

from __future__ import annotations

from typing import Any

from quotaplane.policies.protocol import AdmissionRequest, QuotaPolicy, Violation
from quotaplane.ugm import Manager

__all__ = ["UgmPolicy", "violations_of"]


def violations_of(exceeded: list[Any]) -> list[Violation]:
    """Map ``LimitExceeded`` records (kind, limit, queue_path, shortfall, message) to Violations."""
    out: list[Violation] = []
    for e in exceeded:
        out.append(Violation(policy=e.kind, code=f"{e.kind}.{e.limit}", path=e.queue_path,
                             message=e.message, resource=e.shortfall))
    return out


class UgmPolicy(QuotaPolicy):
    """Adapter from the admission protocol to one partition's :class:`quotaplane.ugm.Manager`."""

    __slots__ = ("manager",)

    def __init__(self, manager: Manager) -> None:
        self.name = "ugm"
        self.manager = manager

    def check(self, request: AdmissionRequest) -> list[Violation]:
        """Every user and group limit the request would exceed (U1); changes nothing."""
        return violations_of(self.manager.explain_increase(
            request.queue_path, request.application_id, request.resource, request.user))

    def apply(self, request: AdmissionRequest) -> list[Violation]:
        """Track the request for the user and the application's group; refuse atomically (U1)."""
        if self.admit(request):
            return []
        return self.refusal(request)

    def admit(self, request: AdmissionRequest) -> bool:
        """Check and apply in one pass: track the request unless a user or group limit refuses it.

        The manager's own atomic check-then-increase (U1): ``False`` means refused and nothing
        changed (:meth:`refusal` says why). Lets the partition skip a separate :meth:`check` walk
        when every other policy has already admitted the request (Q2 fast path).
        """
        return self.manager.increase_tracked_resource(request.queue_path, request.application_id,
                                                      request.resource, request.user)

    def refusal(self, request: AdmissionRequest) -> list[Violation]:
        """The violations of a request :meth:`admit` refused (never empty)."""
        found = self.check(request)
        if found:
            return found
        # The manager refused but can no longer say why (a concurrent change): still a refusal.
        return [Violation("user", "user.maxresources", request.queue_path,
                          f"user {request.user.user!r} limits refused the allocation", None)]

    def undo(self, request: AdmissionRequest) -> None:
        """Reverse :meth:`apply`; the first allocation also takes the application out again (A-1)."""
        self.manager.decrease_tracked_resource(request.queue_path, request.application_id,
                                               request.resource, request.first_allocation, request.user)

    def release(self, request: AdmissionRequest, *, last_allocation: bool) -> None:
        """Give back an allocation; the last one ends the application's running count (seed 001)."""
        self.manager.decrease_tracked_resource(request.queue_path, request.application_id,
                                               request.resource, last_allocation, request.user)

    def restore(self, token: object) -> None:
        """Undo :meth:`withdraw` exactly, without checking limits (the allocation was admitted, and a
        lowered limit must not lose it)."""
        assert isinstance(token, AdmissionRequest)
        self.manager.restore_tracked_resource(token.queue_path, token.application_id, token.resource,
                                              token.user)

    def dump_state(self) -> dict[str, Any]:
        """The manager's deterministic state."""
        return self.manager.dump_state()
