"""What a partition does as time passes (:meth:`~quotaplane.partition.facade.Partition.check_timeouts`):
gang placeholders, application states and terminated applications time out
(:mod:`quotaplane.state.timeouts`), elastic quotas over their runtime too long are reclaimed (E5),
queues over a lowered max too long are cut back (PR-Q), and asks whose preemption delay passed get a
cycle (PR-Y3) — one write of the partition's transaction."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import quotaplane.events as E
from quotaplane.partition import gcfreeze
from quotaplane.partition.txn import Txn
from quotaplane.policies.protocol import Eviction
from quotaplane.scheduling.guarantees import PREEMPT_ATTEMPT_EVERY
from quotaplane.scheduling.questions import allocations_of
from quotaplane.state.handlers import PartitionState

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Allocation
    from quotaplane.queues.queue import Queue

__all__ = ["check_timeouts"]


def _preemption_due(state: PartitionState, now: float) -> bool:
    """True when a waiting ask may try preemption now (PR-Y3); the next try is 15 s later."""
    if now < state.preempt_due:
        return False
    state.preempt_due = now + PREEMPT_ATTEMPT_EVERY if len(state.waiting.asks) else math.inf
    return True


def _quota_cuts(state: PartitionState, now: float) -> list[Eviction]:
    """PR-Q: the queues due for quota preemption at ``now`` and their victims (changes nothing but the
    trigger times, which live in memory only)."""
    if not state.config.preemption.quota_preemption_enabled:
        state.quota_preemption.due_at.clear()
        return []
    queues = [q for path in sorted(state.queues.paths()) if (q := state.queues.queue(path)) is not None]
    return state.quota_preemption.tick(queues, now, functools.partial(_cut_candidates, state),
                                       state.policies.best_effort_at(now))


def _cut_candidates(state: PartitionState, leaf: Queue) -> Iterator[Allocation]:
    """A leaf's allocations a quota cut may take: not those whose held preemption was given up (issue
    31: the cut picks others). Held ones stay candidates: the cut chooses them again, and holding
    them again is a no-op — so nothing more is taken while they go."""
    spared = state.spared
    return (a for a in allocations_of(state, leaf) if a.allocation_key not in spared)


def _evict(tx: Txn, found: Eviction, t: float) -> list[str]:
    """Take (or, with held preemption, hold) the victims of a reclaim or a quota cut due at ``t``;
    what happened to each."""
    state = tx.state
    reason = found.reason
    # a victim whose held preemption was given up is not taken again (issue 31)
    keys = tuple(k for k in found.keys if k in state.allocs and k not in state.spared)
    if state.hold_preempted:            # issue 31 #3: charged until released
        held = tx.hold(keys, reason.reason(), None, t)
        return [f"{k}: held for preemption by {reason.policy} ({reason.path})" for k in held]
    if not keys:
        return []
    tx.apply(E.Preempted(keys=keys, apps=tuple(state.allocs[k].application_id for k in keys),
                         reason=reason.reason(), t=t))
    verb = "revoked" if reason.code == "elastic.revoked" else "preempted"
    return [f"{k}: {verb} by {reason.policy} ({reason.path})" for k in keys]


def check_timeouts(tx: Txn, t: float) -> list[str]:
    """Apply every timeout due at ``t``; what happened, in order."""
    gcfreeze.settle_pending()       # a serving process after a rebuild or a takeover (issue 39)
    if _preemption_due(tx.state, t):
        tx.core.scheduler.freed(tx)      # asks whose preemption delay passed get a cycle (PR-Y3)
    state = tx.state
    quota_cuts = _quota_cuts(state, t)
    out: list[str] = []
    reclaims: list[Eviction] = []
    if state.due.any_due(t) or state.policies.reclaiming():     # what is due, not every app (issue 39)
        tx.apply(E.Timeouts(t=t))
        out = list(state.timed_out)
        reclaims = state.due_reclaims
        for policy in state.policies.reclaiming():      # what the tick tells (a budget's warnings)
            state.notes.extend(getattr(policy, "take_notes", list)())
    for found in [*reclaims, *quota_cuts]:
        out.extend(_evict(tx, found, t))
    if not tx.uncommitted and not state.notes:
        return []
    # the freed quota goes to the waiting asks now (E5: "B's asks are allocated"), in a cycle for what
    # changed (issue 39: it was a full one, linear in every waiting ask): each release woke the keys of
    # its chain, an application leaving the running count woke ``apps``; the asks a state change can
    # concern (an application that takes no allocation, a stateaware queue) wait on ``*`` already, and
    # an application that moved is retried itself
    waiting = state.waiting
    for app in state.moved:
        if waiting.asks.has_application(app.application_id):
            waiting.touch(app.application_id)
    tx.after(tx.core.scheduler.freed)
    return out
