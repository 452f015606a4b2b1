"""Which allocations a refused request may preempt, and whether it is then admitted (docs/preemption.md).

Two kinds of preemption make room for a request (decision P2):

- **inner-quota** (Koordinator PostFilter, E6 / PR-K6): a request, pending or synchronous, refused only by
  its own elastic quota's runtime asks the policy that refused it (:meth:`QuotaPolicy.victims_for`);
- **to restore guaranteed resources** (YuniKorn, PR-Y): a pending ask that has waited its queue's
  ``preemption.delay``, refused only by queue maxima, may take allocations of queues above their
  guaranteed (:mod:`quotaplane.scheduling.guarantees`).

Whatever proposed the victims, :func:`admitted_without` then checks the request against every policy
as if they were gone, changing nothing (PR-Y9, PR-S3): if any policy still refuses, nothing is
preempted. :func:`plan` plans on a read-only view of the state and changes nothing;
:func:`quotaplane.scheduling.preempting.preempt_for` applies the plan through the partition's
transaction: the victims (``preempted``, with the preemptor's key) and the allocation, committed together.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from quotaplane.admission import PolicySet, check_all
from quotaplane.policies.protocol import AdmissionRequest, Decision, Eviction, QuotaPolicy, Violation
from quotaplane.resources import Resource
from quotaplane.scheduling.fair_preemption import fair_victims
from quotaplane.scheduling.guarantees import (
    PREEMPT_ATTEMPT_EVERY,
    QUEUE_CODES,
    guarantee_victims,
    may_preempt_for_guarantee,
)
from quotaplane.scheduling.questions import allocations_of, victims_of

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Allocation, Application
    from quotaplane.queues.queue import Queue
    from quotaplane.scheduling.asks import Ask
    from quotaplane.scheduling.view import StateView

__all__ = ["QUEUE_CODES", "admitted_without", "find_victims", "plan"]


def find_victims(policies: PolicySet, request: AdmissionRequest, reasons: Sequence[Violation], *,
                 ask: Ask | None, leaf: Queue, now: float, guarantees_on: bool,
                 allocations_of: Callable[[Queue], Iterable[Allocation]]) -> Eviction | None:
    """The victims that could make room for ``request`` refused for ``reasons``, or None (P2).

    Inner-quota preemption when one extension policy alone refused it; YuniKorn preemption for a
    pending ``ask`` refused only by queue maxima. Never for user/group limits or maxapplications.
    """
    if not reasons:
        return None
    found = _inner_quota_victims(policies, request, reasons)
    if found is not None:
        return found
    if ask is not None and all(v.code in QUEUE_CODES for v in reasons) and \
            may_preempt_for_guarantee(ask, leaf, now, guarantees_on):
        ask.preempt_after = now + PREEMPT_ATTEMPT_EVERY
        first = policies.best_effort_at(now)       # issue 34: best-effort work is the first preempted
        if leaf.fair is not None:       # Kueue's fair-sharing preemption instead (docs/fair-sharing.md)
            return fair_victims(policies.queue.tree, leaf, _positive(request.resource), request.priority,
                                ask.created, reasons, allocations_of, first)
        return guarantee_victims(leaf, request.resource, request.priority, allocations_of,
                                 policies.queue.tree.limits, first)
    return None


def _positive(resource: Resource) -> dict[str, int]:
    return {k: v for k, v in resource._values.items() if v > 0}


def _inner_quota_victims(policies: PolicySet, request: AdmissionRequest,
                         reasons: Sequence[Violation]) -> Eviction | None:
    """E6: the victims the one extension policy that alone refused the request proposes, or None."""
    by = {v.policy for v in reasons}
    if len(by) != 1:
        return None
    for policy in policies.extension_policies:
        if policy.name in by:
            found = policy.victims_for(request, list(reasons))
            if found is not None:
                return found
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


def plan(view: StateView, app: Application, key: str, resource: Resource, priority: int, preemptible: bool,
         refused: Decision, ask: Ask | None, now: float) -> tuple[tuple[str, ...], Eviction] | None:
    """The victims a refused request would preempt and why, checked against every policy as if they
    were gone (PR-Y9); None when nothing may be preempted. Plans on ``view``; changes nothing."""
    leaf = view.queues.queue(app.queue_path)
    enabled = view.config.preemption.enabled
    if leaf is None or not _may_find_victims(view.policies, refused.reasons, ask, leaf, now, enabled):
        return None
    req = view.request(app, key, resource, priority, preemptible, first=not app.counted, t=now)
    found = find_victims(view.policies, req, refused.reasons, ask=ask, leaf=leaf, now=now,
                         guarantees_on=enabled, allocations_of=functools.partial(_candidates, view))
    if found is None:
        return None
    keys = _admitting_victims(view, req, found)
    return None if keys is None else (keys, found)


def _candidates(view: StateView, leaf: Queue) -> Iterator[Allocation]:
    """The allocations of ``leaf`` a preemption may choose: not those held already (they are going)
    nor those whose preemption was given up (issue 31: the next preemption picks others)."""
    going, spared = view.preempting, view.spared
    for alloc in allocations_of(view, leaf):
        if alloc.allocation_key not in going and alloc.allocation_key not in spared:
            yield alloc


def _admitting_victims(view: StateView, req: AdmissionRequest, found: Eviction) -> tuple[str, ...] | None:
    """The proposed victims when they may all go and every policy then admits the request (PR-Y9);
    None otherwise."""
    keys = _takeable(view, found)
    if not keys or admitted_without(view.policies, req, victims_of(view, keys)):
        return None
    held = [k for k in view.preempting if k in view.allocs]
    if held and not admitted_without(view.policies, req, victims_of(view, held)):
        return None         # the allocations already going make the room: preempt nothing more
    return keys


def _takeable(view: StateView, found: Eviction) -> tuple[str, ...]:
    """The proposed victims when every one of them may go, else ``()`` (PR-S3 / item 7: never a
    non-preemptible victim, nor one already being preempted or whose preemption was given up)."""
    allocs = view.allocs
    preempting, spared = view.preempting, view.spared
    keys = tuple(k for k in found.keys
                 if k in allocs and allocs[k].preemptible and k not in preempting and k not in spared)
    return keys if len(keys) == len(found.keys) else ()
