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

import quotaplane.events as E
from quotaplane.admission import AllocationSpec, AllocationUndo, PolicySet, check_all
from quotaplane.policy import AdmissionRequest, Decision, Eviction, QuotaPolicy, Violation
from quotaplane.resources import Resource
from quotaplane.scheduling.guarantees import (
    PREEMPT_ATTEMPT_EVERY,
    QUEUE_CODES,
    guarantee_victims,
    preemption_delay,
)

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Allocation, Application
    from quotaplane.queues.queue import Queue
    from quotaplane.scheduling.asks import Ask
    from quotaplane.state.handlers import PartitionState

__all__ = ["QUEUE_CODES", "Preemptor", "admitted_without", "find_victims", "may_preempt_for_guarantee"]

#: the partition's in-memory admission: the decision, its ``allocated`` event and its undo
Admit = Callable[[AllocationSpec], tuple[Decision, E.Allocated | None, AllocationUndo | None]]



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


def _may_find_victims(policies: PolicySet, reasons: Sequence[Violation], ask: Ask | None, leaf: Queue,
                      now: float, guarantees_on: bool) -> bool:
    """:func:`find_victims` could propose victims (it is not refused by its switches alone): the
    cheap test that spares building a request for the common refusal that may preempt nothing."""
    if not reasons:
        return False
    first = reasons[0].policy
    if all(v.policy == first for v in reasons) and any(p.name == first for p in policies.extension_policies):
        return True
    return ask is not None and all(v.code in QUEUE_CODES for v in reasons) and \
        may_preempt_for_guarantee(ask, leaf, now, guarantees_on)


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


class Preemptor:
    """A partition's preemption decisions: :meth:`plan` (changing nothing) and :meth:`preempt_for`.

    It sees the partition through its state, its clock, its in-memory admission (``admit``: the
    decision, the ``allocated`` event, its undo) and its journal (``record``).
    """

    __slots__ = ("admit", "clock", "record", "state")

    def __init__(self, state: PartitionState, *, clock: Callable[[], float], admit: Admit,
                 record: Callable[[list[E.Event]], None]) -> None:
        self.state = state
        self.clock = clock
        self.admit = admit
        self.record = record

    def plan(self, app: Application, key: str, resource: Resource, priority: int, preemptible: bool,
             refused: Decision, ask: Ask | None, now: float) -> tuple[tuple[str, ...], Eviction] | None:
        """The victims a refused request would preempt and why, checked against every policy as if
        they were gone (PR-Y9); None when nothing may be preempted. Changes nothing."""
        state = self.state
        leaf = state.queues.queue(app.queue_path)
        if leaf is None or not _may_find_victims(state.policies, refused.reasons, ask, leaf, now,
                                                  state.config.preemption.enabled):
            return None
        req = state.request(app, key, resource, priority, preemptible, first=not app.counted, t=now)
        found = find_victims(state.policies, req, refused.reasons, ask=ask, leaf=leaf, now=now,
                             guarantees_on=state.config.preemption.enabled,
                             allocations_of=state.allocations_of)
        if found is None:
            return None
        # PR-S3 / item 7: never a non-preemptible victim (nor one already being preempted)
        keys = tuple(k for k in found.keys if k in state.allocs and state.allocs[k].preemptible
                     and k not in state.preempting)
        if not keys or len(keys) != len(found.keys) or \
                admitted_without(state.policies, req, state.victims_of(keys)):
            return None
        held = [k for k in state.preempting if k in state.allocs]
        if held and not admitted_without(state.policies, req, state.victims_of(held)):
            return None         # the allocations already going make the room: preempt nothing more
        return keys, found

    def preempt_for(self, spec: AllocationSpec, refused: Decision, ask: Ask | None,
                    before: Callable[[], None] | None = None) -> Decision:
        """Try to admit a refused request by preemption (E6, PR-Y); the refusal when nothing may go.

        The victims are planned (:meth:`plan`), then released and the request admitted; both are
        journalled together (``preempted`` with this preemptor, then ``allocated``). ``before`` runs
        first when something will be preempted (a batch journals what it admitted so far, keeping the
        journal in decision order). A journal failure here stops the partition (the victims cannot be
        given back): it must be restored from the journal.
        """
        state = self.state
        now = self.clock()
        if state.hold_preempted and ask is None:
            return refused      # held victims go later: only a waiting ask can wait for them
        plan = self.plan(state.apps[spec.application_id], spec.allocation_key, spec.resource, spec.priority,
                         spec.preemptible, refused, ask, now)
        if plan is None:
            return refused
        keys, found = plan
        if before is not None:
            before()
        if state.hold_preempted:
            # issue 31 #3: the victims stay charged until released; the ask waits for their room
            state.hold(keys, found.reason.reason(), spec.allocation_key, now)
            self.record([])     # the noted decision
            return refused
        taken = E.Preempted(keys=keys, apps=tuple(state.allocs[k].application_id for k in keys),
                            reason=found.reason.reason(), preemptor=spec.allocation_key, t=now)
        state.preempted(taken)
        decision, ev, _undo = self.admit(spec)
        self.record([taken] if ev is None else [taken, ev])     # not recoverable: the victims are gone
        if ev is None:                      # cannot happen: plan() checked that it fits
            return decision
        return Decision(True, [], list(keys), queue=decision.queue, allocation_key=decision.allocation_key)

    def preempt_ask(self, ask: Ask, refused: Decision, before: Callable[[], None]) -> Decision:
        """:meth:`preempt_for` of a pending ask (in a cycle)."""
        spec = AllocationSpec(ask.application_id, ask.allocation_key, ask.resource, ask.priority,
                              ask.preemptible, ask.placeholder, ask.task_group, tags=ask.tags)
        return self.preempt_for(spec, refused, ask, before)
