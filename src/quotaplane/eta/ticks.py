"""What in the forecast's copy acts by the clock (issue 35, docs/eta.md "Windows, budgets and the
timer"): whether the partition's timer can change anything at its ticks, when it ticks next, and which
asks can never preempt. The run (:mod:`quotaplane.eta.forecast`) takes a tick only when it may act."""

from __future__ import annotations

import math

from quotaplane.config.budgets import BESTEFFORT, PREEMPT
from quotaplane.policies.budgets import BudgetPolicy
from quotaplane.scheduling.guarantees import PREEMPT_ATTEMPT_EVERY, guarantee_blockers, preemption_delay
from quotaplane.scheduling.order import SORT_POLICY_PROPERTY
from quotaplane.state.handlers import PartitionState

__all__: list[str] = []


def _quiet(state: PartitionState) -> bool:
    """True when the copy's timers can do nothing: no waiting ask may ever preempt (all marked by
    :func:`_never_preempting`; an ask's mark moves only when it tries), no extension policy (a reclaim,
    a budget's clock), no quota preemption (PR-Q's cut times) and no fair share with memory. Then a
    timer's tick is a cycle that retries nothing and times nothing out while no application timeout
    waits, and the runs skip it: their instants are the ends (and the horizon counts those)."""
    if state.policies.extension_policies or state.config.preemption.quota_preemption_enabled:
        return False
    if state.history.rank() is not None:
        return False
    return all(ask.preempt_after == math.inf for ask in state.waiting.asks.unsorted())


def _time_silent(state: PartitionState) -> bool:
    """True when, the copy's state held, a timer's tick can change something only at a time-bound
    trigger :meth:`_Run._idle_until` knows: no quota preemption (PR-Q's cut times), no fair share with
    memory, and no extension policy other than budgets that hold what they refuse (a window's edge, a
    budget's reset and the time a decaying budget admits an ask are the run's own instants; a budget
    that preempts after a grace, or takes best-effort work back, acts when its consumption crosses
    its limit, with the clock; an elastic quota's revocation waits a delay)."""
    if state.config.preemption.quota_preemption_enabled or state.history.rank() is not None:
        return False
    for policy in state.policies.extension_policies:
        if not isinstance(policy, BudgetPolicy):
            return False
        if any(spec.mode in (PREEMPT, BESTEFFORT) for spec in policy.ledger.specs):
            return False
    return True


def _first_tries(state: PartitionState) -> list[float]:
    """When each waiting ask that may preempt first may try it (PR-Y3: created + its leaf's delay), and
    when each reservation by delay comes into force."""
    out = [ask.reserve_at for ask in state.waiting.asks.unsorted() if math.isfinite(ask.reserve_at)]
    if not state.config.preemption.enabled:
        return out
    queues, apps = state.queues, state.apps
    for ask in state.waiting.asks.unsorted():
        if ask.preempt_after == math.inf:
            continue
        app = apps.get(ask.application_id)
        leaf = queues.queue(app.queue_path) if app is not None else None
        if leaf is not None:
            out.append(ask.created + preemption_delay(leaf))
    return out


def _no_timeouts(state: PartitionState) -> bool:
    """True when no application has a timeout to wait for (each whose state or placeholders may time
    out has an entry in ``state.due``; an entry whose application moved on is stale, and
    ``any_due(inf)`` drops the stale ones it meets and stops at the first real one)."""
    return not len(state.due) or not state.due.any_due(math.inf)


def _timeouts_harmless(state: PartitionState) -> bool:
    """True when no application timeout can change what a cycle of the copy decides, whenever it
    falls due: no leaf orders by ``stateaware`` (the only order that reads Starting against Running)
    and no gang (a placeholder's timeout releases it). The others are harmless: Starting and Running
    both take allocations and count alike; a Completing application left the running count with its
    last allocation and Completed takes none (the copy adds no ask); an expired one has no ask, no
    allocation and no count, and so neither has the empty queue it may take along."""
    queues = state.queues
    for path in queues.paths():
        q = queues.queue(path)
        if q is not None and str(q.properties.get(SORT_POLICY_PROPERTY, "")).strip().lower() == "stateaware":
            return False
    if any(app.placeholder_since is not None for app in state.apps.values()):
        return False
    if any(a.placeholder or a.task_group is not None for a in state.allocs.values()):
        return False
    return not any(ask.placeholder or ask.task_group is not None for ask in state.waiting.asks.unsorted())


def _reserves_by_no_delay(state: PartitionState, now: float) -> bool:
    """True when no waiting ask's reservation comes into force by its delay after ``now``
    (``reservation.delay``: the moment differs between runs on different clocks)."""
    return all(ask.reserve_at <= now or ask.reserve_at == math.inf for ask in state.waiting.asks.unsorted())


def _never_preempting(state: PartitionState) -> None:
    """Mark the copy's asks that can never preempt as never trying (PR-Y2): no queue of their chain
    has a guaranteed and their leaf does not share fairly, so YuniKorn preemption finds no victim for
    them whatever the others hold, and the copy's configuration never changes. The partition retries
    them every 15 s (PR-Y3) only to find nothing; in the forecast those retries would be most of its
    cost (each a full admission and a preemption plan) and change no start. With YuniKorn preemption
    off (``preemption: {enabled: false}``) no ask of a leaf that does not share fairly ever tries it."""
    queues = state.queues
    enabled = state.config.preemption.enabled
    for ask in state.waiting.asks.unsorted():
        app = state.apps.get(ask.application_id)
        leaf = queues.queue(app.queue_path) if app is not None else None
        if leaf is not None and leaf.fair is None and \
                (not enabled or guarantee_blockers(leaf, ask.resource) is None):
            ask.preempt_after = math.inf


def _next_timer(state: PartitionState, after: float, idle: bool = False) -> float:
    """The first time after ``after`` the partition's timer runs a cycle for the waiting asks (PR-Y3:
    the first preemption delay to pass, then every 15 s while asks wait): inf when it will not, or when
    the tick would change nothing (``idle``: :meth:`_Run._timeless`).

    An ask's own next attempt (``waiting.timed``) is not such a time: the asks due are retried by the
    next cycle, which the timer runs only at its own ticks (partition/timers.py) — stepping to an
    ask's time ran no cycle, and a stale one hid the next tick (an ask then preempted a tick late)."""
    due = state.preempt_due
    if not math.isfinite(due) or idle:
        return math.inf
    # the timers' own clock moves in whole steps of a cycle: never before or at the present
    return due if due > after else after + PREEMPT_ATTEMPT_EVERY
