"""Gang placeholders replaced by real allocations (seed 001, YuniKorn YUNIKORN-982).

The real allocation may differ in size from its placeholder: queue and user/group usage move by the
difference (an increase is checked like an allocation, a decrease is given back). Extension policies
(elastic, forest), which track allocations one by one, see the placeholder released and the real
allocation admitted. :meth:`Replacement.check` runs the checks of a live replacement and
:meth:`Replacement.apply` applies it — after a check, or as the recorded outcome on replay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from quotaplane.admission import PolicySet, Preempted
from quotaplane.application import Allocation, Application
from quotaplane.errors import JournalReplayError
from quotaplane.policies.protocol import AdmissionRequest, Violation
from quotaplane.resources import Resource

__all__ = ["Replacement", "positive_part"]

RequestOf = Callable[[Application, str, Resource, int, bool], AdmissionRequest]


def positive_part(a: Mapping[str, int], b: Mapping[str, int]) -> tuple[Resource, Resource]:
    """(max(a-b, 0), max(b-a, 0)) per name: the increase and the decrease from ``b`` to ``a``."""
    up: dict[str, int] = {}
    down: dict[str, int] = {}
    for k in sorted(set(a) | set(b)):
        d = a.get(k, 0) - b.get(k, 0)
        if d > 0:
            up[k] = d
        elif d < 0:
            down[k] = -d
    return Resource.of(up), Resource.of(down)


class Replacement:
    """Placeholder ``ph`` of ``app`` replaced by allocation ``key`` of ``resource``, through ``policies``.

    ``up``/``down`` requests carry the size difference for the core policies (queue, user/group);
    ``placeholder``/``real`` the whole allocations for the extension policies.
    """

    __slots__ = ("down", "placeholder", "policies", "real", "staged", "up")

    def __init__(self, policies: PolicySet, request_of: RequestOf, app: Application, ph: Allocation,
                 key: str, resource: Resource, t: float = 0.0) -> None:
        up, down = positive_part(resource, ph.resource)
        self.policies = policies
        self.up = request_of(app, key, up, ph.priority, ph.preemptible)
        self.down = request_of(app, ph.allocation_key, down, ph.priority, ph.preemptible)
        self.placeholder = request_of(app, ph.allocation_key, ph.resource, ph.priority, ph.preemptible)
        self.real = request_of(app, key, resource, ph.priority, ph.preemptible)._replace(time=t)
        #: after a passing check: the extensions that cannot check in place hold the placeholder released
        self.staged = False

    def check(self) -> list[Violation]:
        """Every violation of the replacement (live). A refusal changes nothing; a pass stages it.

        A policy that ``checks_replacement`` (the forest: a release and re-apply would move the
        placeholder to the end of its node's consumer list, decision F1) checks in place. The others
        see the placeholder released and, on refusal, applied again. Engines are independent, so
        releasing the former only once admitted gives the same state as the replay.
        """
        reasons: list[Violation] = []
        for policy in self.policies.core:
            reasons.extend(policy.check(self.up))
        ext = self.policies.extension_policies
        for policy in reversed(ext):
            if not policy.checks_replacement:
                policy.release(self.placeholder, last_allocation=False)
        for policy in ext:
            reasons.extend(policy.check_replacement(self.placeholder, self.real) if policy.checks_replacement
                           else policy.check(self.real))
        if reasons:
            for policy in ext:
                if not policy.checks_replacement:        # the placeholder back: the state before
                    policy.apply(self.placeholder)
            return reasons
        self.staged = True
        return []

    def apply(self) -> list[Preempted]:
        """Move the usage from the placeholder to the real allocation; return what was preempted."""
        for policy in reversed(self.policies.extension_policies):
            if not self.staged or policy.checks_replacement:
                policy.release(self.placeholder, last_allocation=False)
        # Checked under the lock: the applies below cannot refuse unless an engine misbehaves.
        for policy in self.policies.core:
            if policy.apply(self.up):
                raise JournalReplayError(f"{policy.name} refused placeholder replacement "
                                      f"{self.real.allocation_key!r} after its check passed")
        for policy in reversed(self.policies.core):
            policy.release(self.down, last_allocation=False)
        preempted: list[Preempted] = []
        for policy in self.policies.extension_policies:
            if policy.apply(self.real):
                raise JournalReplayError(f"{policy.name} refused placeholder replacement "
                                      f"{self.real.allocation_key!r} after its check passed")
            preempted.extend((policy, key) for key in policy.take_preempted())
        return preempted
