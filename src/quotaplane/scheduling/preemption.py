"""Which allocations a refused request may preempt, and whether it is then admitted (docs/preemption.md).

Two kinds of preemption make room for a request (decision P2):

- **inner-quota** (Koordinator PostFilter, E6 / PR-K6): a request, pending or synchronous, refused only by
  its own elastic quota's runtime asks the policy that refused it (:meth:`QuotaPolicy.victims_for`);
- **to restore guaranteed resources** (YuniKorn, PR-Y): a pending ask that has waited its queue's
  ``preemption.delay``, refused only by queue maxima, may take allocations of queues above their
  guaranteed (:mod:`quotaplane.scheduling.guarantees`).

Whatever proposed the victims, :func:`admitted_without` then checks the request against every policy
as if they were gone, changing nothing (PR-Y9, PR-S3): if any policy still refuses, nothing is
preempted. The partition journals the victims (``preempted``, with the preemptor's key) and the
allocation in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from quotaplane.admission import PolicySet, check_all
from quotaplane.policy import AdmissionRequest, Eviction, QuotaPolicy, Violation
from quotaplane.scheduling.guarantees import PREEMPT_ATTEMPT_EVERY, guarantee_victims, preemption_delay

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Allocation
    from quotaplane.queues.queue import Queue
    from quotaplane.scheduling.asks import Ask

__all__ = ["QUEUE_CODES", "admitted_without", "find_victims", "may_preempt_for_guarantee"]

#: refusals that YuniKorn preemption may lift (PR-Y2: queue headroom, node capacity)
QUEUE_CODES = frozenset({"queue.max", "root.capacity"})


def may_preempt_for_guarantee(ask: Ask, leaf: Queue, now: float, enabled: bool) -> bool:
    """PR-Y1/PR-Y3: preemption is on, the ask has waited its leaf's ``preemption.delay`` and has not
    tried within the last 15 s."""
    return enabled and now >= ask.created + preemption_delay(leaf) and now >= ask.preempt_after


def find_victims(policies: PolicySet, request: AdmissionRequest, reasons: Sequence[Violation], *,
                 ask: Ask | None, leaf: Queue, now: float, guarantees_on: bool,
                 allocations_of: Callable[[Queue], Iterable[Allocation]]) -> Eviction | None:
    """The victims that could make room for ``request`` refused for ``reasons``, or None (P2).

    Inner-quota preemption when one extension policy alone refused it; YuniKorn preemption for a
    pending ``ask`` refused only by queue maxima. Never for user/group limits or maxapplications.
    """
    if not reasons:
        return None
    by = {v.policy for v in reasons}
    if len(by) == 1:
        for policy in policies.extension_policies:
            if policy.name in by:
                found = policy.victims_for(request, list(reasons))
                if found is not None:
                    return found
    if ask is not None and all(v.code in QUEUE_CODES for v in reasons) and \
            may_preempt_for_guarantee(ask, leaf, now, guarantees_on):
        ask.preempt_after = now + PREEMPT_ATTEMPT_EVERY
        return guarantee_victims(leaf, request.resource, request.priority, allocations_of)
    return None


def admitted_without(policies: PolicySet, request: AdmissionRequest,
                     victims: Sequence[AdmissionRequest]) -> list[Violation]:
    """Every violation of ``request`` as if ``victims`` were released; changes nothing (PR-Y9).

    Each policy takes the victims out (:meth:`QuotaPolicy.withdraw`), every policy checks, and the
    victims are put back exactly, newest first (:meth:`QuotaPolicy.restore`).
    """
    withdrawn: list[tuple[QuotaPolicy, object]] = []
    try:
        for victim in victims:
            for policy in reversed(policies.all):
                withdrawn.append((policy, policy.withdraw(victim)))
        return check_all(policies, request)
    finally:
        for policy, token in reversed(withdrawn):
            policy.restore(token)
