"""A planned preemption applied through the partition's transaction (E6, PR-Y; docs/preemption.md).

:mod:`quotaplane.scheduling.preemption` plans on a read-only view; the flavor choice
(:mod:`quotaplane.scheduling.flavoring`) picks the flavor to plan for with that planner. This module
sits above both: it asks the flavor choice, plans, then releases the victims and admits the request in
one commit (or, while the partition holds what it preempts, only marks the victims).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import quotaplane.events as E
from quotaplane.admission import AllocationSpec
from quotaplane.policies.protocol import Decision
from quotaplane.scheduling.flavoring import for_preemption
from quotaplane.scheduling.preemption import plan

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.scheduling.asks import Ask
    from quotaplane.scheduling.view import Transaction

__all__ = ["preempt_for"]


def preempt_for(tx: Transaction, spec: AllocationSpec, refused: Decision, ask: Ask | None) -> Decision:
    """Try to admit a refused request by preemption (E6, PR-Y); the refusal when nothing may go.

    Held preemption (``hold_preempted``): the victims are only marked (they stay charged until
    released) and the request is refused with them in ``preempted``; it waits for their room.

    The victims are planned (:func:`plan`), then released and the request admitted through ``tx``;
    both are committed together (``preempted`` with this preemptor, then ``allocated``), after what
    ``tx`` applied before (keeping the journal in decision order). A failed commit rebuilds the
    partition from its journal (the victims cannot be given back step by step).
    """
    state = tx.state
    now = tx.clock()
    flavored = for_preemption(state, spec, refused)
    if flavored is None:
        return refused      # no flavor of it may preempt (docs/flavors.md)
    spec, why = flavored
    found = plan(state, state.apps[spec.application_id], spec.allocation_key, spec.resource, spec.priority,
                 spec.preemptible, why, ask, now)
    if found is None:
        return refused
    keys, eviction = found
    tx.commit()
    if state.hold_preempted:
        # issue 31 #3: the victims stay charged until released; the request waits for their room (a
        # synchronous one as an ask: the caller queues it, YuniKorn's ask that triggered preemption)
        tx.hold(keys, eviction.reason.reason(), spec.allocation_key)
        tx.commit()         # the noted decision
        return Decision(False, list(refused.reasons), list(keys), queue=refused.queue,
                        allocation_key=refused.allocation_key, flavor_attempts=refused.flavor_attempts)
    allocs = state.allocs
    tx.apply(E.Preempted(keys=keys, apps=tuple(allocs[k].application_id for k in keys),
                         reason=eviction.reason.reason(), preemptor=spec.allocation_key, t=now))
    decision = tx.admit(spec, ask)
    tx.commit()
    if not decision.allocated:              # cannot happen: plan() checked that it fits
        return decision
    return Decision(True, [], list(keys), queue=decision.queue, allocation_key=decision.allocation_key,
                    flavors=decision.flavors, flavor_attempts=refused.flavor_attempts)
