"""What the waiting-ask scheduler and the preemptors ask of a partition's state: where an ask is held
back and which reservations hold a request back (issue 13), whether an application cannot start for
a reason no free quota cures, the preemption triggers (PR-Y3, PR-Q) and victims, the certain refusal
of M-2, an ask's wake keys, and why it waits. Questions, not changes (but for the trigger times, which
live in memory only). Mixed into :class:`~quotaplane.state.PartitionState`, which keeps the one
handler per event that changes the state."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from quotaplane.admission import PolicySet, check_all
from quotaplane.application import ACTIVE_STATES, Allocation, Application
from quotaplane.policy import AdmissionRequest, Eviction, Violation
from quotaplane.resources import Resource
from quotaplane.scheduling.asks import Ask
from quotaplane.scheduling.guarantees import PREEMPT_ATTEMPT_EVERY, preemption_delay
from quotaplane.scheduling.order import stateaware_holds_back
from quotaplane.scheduling.preemption import may_preempt_for_guarantee
from quotaplane.scheduling.wake import ANY, ask_keys, chain_places

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.config.model import PartitionConfig
    from quotaplane.queues import QueueTree
    from quotaplane.queues.queue import Queue
    from quotaplane.scheduling.quota_preemption import QuotaPreemption
    from quotaplane.scheduling.reservations import Reservations
    from quotaplane.scheduling.runner import PendingAsks
    from quotaplane.ugm import Manager

__all__ = ["StateAskQueries"]


class _Host(Protocol):
    """What the questions use of the state."""

    config: PartitionConfig
    clock: Callable[[], float]
    queues: QueueTree
    ugm: Manager
    policies: PolicySet
    reservations: Reservations
    apps: dict[str, Application]
    allocs: dict[str, Allocation]
    quota_preemption: QuotaPreemption
    preempt_due: float
    pending: PendingAsks

    def request(self, app: Application, key: str, resource: Resource, priority: int = 0,
                preemptible: bool = True, first: bool = False, t: float = 0.0) -> AdmissionRequest: ...

    def cannot_start(self, ask: Ask) -> bool: ...

    def allocations_of(self, leaf: Queue) -> Iterator[Allocation]: ...

    def surely_over(self, ask: Ask) -> list[str]: ...


class StateAskQueries:
    """The questions about waiting asks (see the module docstring)."""

    def _held_at(self: _Host, app: Application, ask: Ask) -> list[tuple[str, str]]:
        """Where ``ask`` is held back now: the queues whose max it exceeds, else the user and group
        limits it exceeds, else the queues of its chain with a max (or the cluster) — (wake key, queue
        path) pairs; issue 13."""
        over = self.queues.over_max(app.queue_path, ask.resource)
        if over:
            return [("q:" + path, path) for path in over]
        req = self.request(app, ask.allocation_key, ask.resource, ask.priority, ask.preemptible)
        out: list[tuple[str, str]] = []
        for v in self.policies.ugm.check(req):
            if v.code == "user.maxresources":
                out.append((f"u:{app.user.user}:{v.path}", v.path))
            elif v.code == "group.maxresources":
                out.append(("g:" + v.path, v.path))
        if out:
            return out
        # it fits the limits now (another reservation may hold it, or no cycle ran yet): it watches the
        # queues of its chain that have a max, else the cluster — where later requests can overtake it
        leaf = self.queues.queue(app.queue_path)
        limited = [q.path for q in leaf.chain if q.max is not None and q.parent is not None] \
            if leaf is not None else []
        return [("q:" + path, path) for path in limited or ["root"]]

    def held(self: _Host, request: AdmissionRequest) -> list[Violation]:
        """The reservations holding ``request`` back (``queue.reserved``; issue 13)."""
        reservations = self.reservations
        if not reservations.active:
            return []
        leaf = self.queues.queue(request.queue_path)
        if leaf is None:
            return []
        ask = self.pending.asks.get(request.allocation_key) if request.allocation_key else None
        return reservations.held(chain_places(leaf, request.user.user), request.priority,
                                 ask.seq if ask is not None else math.inf, request.resource, self.clock(),
                                 self.cannot_start)

    def cannot_start(self: _Host, ask: Ask) -> bool:
        """The application of the waiting ``ask`` cannot start now for a reason no free quota cures:
        it is inactive, or not yet running and kept out by a ``maxapplications`` limit (queue, user or
        group) or by ``stateaware``. Its reservation then holds nothing back — the held-back work may be
        what keeps it from starting (an application with waiting asks stays in the running count)."""
        app = self.apps.get(ask.application_id)
        if app is None or app.state not in ACTIVE_STATES:
            return True
        if app.counted:
            return False
        leaf = self.queues.queue(app.queue_path)
        if leaf is None:
            return True
        return bool(self.queues.check_run_app(app.queue_path, app.application_id)) or \
            not self.ugm.can_run_app(app.queue_path, app.application_id, app.user) or \
            stateaware_holds_back(self.pending.asks, leaf, self.apps, app)

    def preemption_due(self: _Host, now: float) -> bool:
        """True when a waiting ask may try preemption now (PR-Y3); the next try is 15 s later."""
        if now < self.preempt_due:
            return False
        self.preempt_due = now + PREEMPT_ATTEMPT_EVERY if len(self.pending.asks) else math.inf
        return True

    def allocations_of(self: _Host, leaf: Queue) -> Iterator[Allocation]:
        """The allocations of the applications placed in ``leaf`` (preemption victims' candidates)."""
        for aid in leaf.applications:
            app = self.apps.get(aid)
            if app is not None:
                yield from app.allocations.values()

    def quota_preemption_tick(self: _Host, now: float) -> list[Eviction]:
        """PR-Q: the queues due for quota preemption at ``now`` and their victims (changes nothing but
        the trigger times, which live in memory only)."""
        if not self.config.preemption.quota_preemption_enabled:
            self.quota_preemption.due_at.clear()
            return []
        queues = [q for path in sorted(self.queues.paths()) if (q := self.queues.queue(path)) is not None]
        return self.quota_preemption.tick(queues, now, self.allocations_of)

    def victims_of(self: _Host, keys: Sequence[str]) -> list[AdmissionRequest]:
        """The admission requests of live allocations ``keys`` (a preemption trial)."""
        out: list[AdmissionRequest] = []
        for key in keys:
            alloc = self.allocs[key]
            app = self.apps[alloc.application_id]
            out.append(self.request(app, key, alloc.resource, alloc.priority, alloc.preemptible))
        return out

    def over_queue_max(self: _Host, ask: Ask) -> bool:
        """M-2 alone: the ask would put a queue of its chain over its max (or the root over the
        cluster). The queue policy is always part of admission and never preempts, so this refusal
        is certain; checking it first spares the full check and its messages."""
        return bool(self.surely_over(ask))

    def surely_over(self: _Host, ask: Ask) -> list[str]:
        """The queues whose max the ask exceeds when that refusal is certain (it may not preempt
        either); ``[]`` when it is not (see :meth:`over_queue_max`)."""
        app = self.apps.get(ask.application_id)
        if app is None or ask.placeholder or ask.task_group is not None:
            return []                   # (a task-group ask may replace a placeholder instead)
        over = self.queues.over_max(app.queue_path, ask.resource)
        if not over:
            return over
        leaf = self.queues.queue(app.queue_path)
        # an ask that may preempt to restore its queue's guaranteed must be tried (PR-Y)
        if leaf is not None and may_preempt_for_guarantee(ask, leaf, self.clock(),
                                                          self.config.preemption.enabled):
            return []
        return over

    def wait_keys(self: _Host, ask: Ask, over: list[str] | None = None) -> list[str]:
        """The wake keys of a refused ask (:func:`quotaplane.scheduling.wake.ask_keys`); ``over``: the
        queues whose max it exceeds, when the caller knows them already."""
        app = self.apps.get(ask.application_id)
        leaf = self.queues.queue(app.queue_path) if app is not None else None
        if app is None or leaf is None:
            return [ANY]
        if over is None:
            over = [] if ask.reasons is not None else self.queues.over_max(app.queue_path, ask.resource)
        return ask_keys(ask, app.user.user, leaf, active=app.state in ACTIVE_STATES,
                        preemption=self.config.preemption.enabled, now=self.clock(), over_max=over)

    def preempt_at(self: _Host, ask: Ask) -> float | None:
        """When ``ask`` may first try YuniKorn preemption (PR-Y3), or None when preemption is off."""
        app = self.apps.get(ask.application_id)
        leaf = self.queues.queue(app.queue_path) if app is not None else None
        if leaf is None or not self.config.preemption.enabled:
            return None
        return ask.created + preemption_delay(leaf)

    def may_preempt(self: _Host, ask: Ask) -> bool:
        """``ask`` may try YuniKorn preemption now (PR-Y1, PR-Y3)."""
        app = self.apps.get(ask.application_id)
        leaf = self.queues.queue(app.queue_path) if app is not None else None
        return leaf is not None and may_preempt_for_guarantee(ask, leaf, self.clock(),
                                                              self.config.preemption.enabled)

    def explain_ask(self: _Host, ask: Ask) -> list[Violation]:
        """Why ``ask`` waits now: exactly what its admission would answer ([] when its application
        takes no allocations now); ``what_if`` of the same request, but for reservations, which hold
        back only requests later than the reserving ask."""
        app = self.apps.get(ask.application_id)
        if app is None or app.state not in ACTIVE_STATES or self.queues.queue(app.queue_path) is None:
            return []
        # its own key: a reservation holds it back only when it is later than the reserving ask, and an
        # elastic quota counts it once (PR-K2) — exactly as its admission will
        req = self.request(app, ask.allocation_key, ask.resource, ask.priority, ask.preemptible,
                           first=not app.counted)
        return check_all(self.policies, req)
