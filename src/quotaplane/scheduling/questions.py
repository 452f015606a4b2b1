"""What the waiting-ask scheduler and the preemptors ask of a partition's state: where an ask is held
back and which reservations hold a request back (issue 13), whether an application cannot start for a
reason no free quota cures, the certain refusal of M-2, an ask's wake keys, when it may preempt, why
it waits, and the preemption victims' requests. Questions, not changes: functions of the read-only
:class:`~quotaplane.scheduling.view.StateView`, which the state's handlers ask too."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from quotaplane.admission import check_all
from quotaplane.application import ACTIVE_STATES, Allocation, Application
from quotaplane.policies.protocol import AdmissionRequest, Violation
from quotaplane.scheduling.asks import Ask
from quotaplane.scheduling.guarantees import may_preempt_for_guarantee, preemption_delay
from quotaplane.scheduling.order import stateaware_holds_back
from quotaplane.scheduling.wake import ANY, HeldSummary, ask_keys, chain_places

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.queues.queue import Queue
    from quotaplane.scheduling.view import StateView

__all__ = ["allocations_of", "cannot_start", "explain_ask", "held", "held_at", "may_preempt",
           "over_queue_max", "preempt_at", "reasons_of", "reservation_holds", "still_held", "still_held_test",
           "surely_held", "surely_over", "victims_of", "wait_keys"]


def held_at(view: StateView, app: Application, ask: Ask) -> list[tuple[str, str]]:
    """Where ``ask`` is held back now: the queues whose max it exceeds, else the user and group
    limits it exceeds, else the queues of its chain with a max (or the cluster) — (wake key, queue
    path) pairs; issue 13."""
    over = view.queues.over_max(app.queue_path, ask.resource)
    if over:
        return [("q:" + path, path) for path in over]
    out = _limits_held_at(view, app, ask)
    if out:
        return out
    # it fits the limits now (another reservation may hold it, or no cycle ran yet): it watches the
    # queues of its chain that have a max, else the cluster — where later requests can overtake it
    leaf = view.queues.queue(app.queue_path)
    limited = [q.path for q in leaf.chain if q.max is not None and q.parent is not None] \
        if leaf is not None else []
    return [("q:" + path, path) for path in limited or ["root"]]


def _limits_held_at(view: StateView, app: Application, ask: Ask) -> list[tuple[str, str]]:
    """The user and group ``maxresources`` limits ``ask`` exceeds, as (wake key, queue path) pairs."""
    req = view.request(app, ask.allocation_key, ask.resource, ask.priority, ask.preemptible)
    out: list[tuple[str, str]] = []
    for v in view.policies.ugm.check(req):
        if v.code == "user.maxresources":
            out.append((f"u:{app.user.user}:{v.path}", v.path))
        elif v.code == "group.maxresources":
            out.append(("g:" + v.path, v.path))
    return out


def held(view: StateView, request: AdmissionRequest) -> list[Violation]:
    """The reservations holding ``request`` back (``queue.reserved``; issue 13)."""
    reservations = view.reservations
    if not reservations.active:
        return []
    leaf = view.queues.queue(request.queue_path)
    if leaf is None:
        return []
    ask = view.waiting.asks.get(request.allocation_key) if request.allocation_key else None
    return reservations.held(chain_places(leaf, request.user.user), request.priority,
                             ask.seq if ask is not None else math.inf, request.resource, view.clock(),
                             functools.partial(cannot_start, view))


def cannot_start(view: StateView, ask: Ask) -> bool:
    """The application of the waiting ``ask`` cannot start now for a reason no free quota cures:
    it is inactive, or not yet running and kept out by a ``maxapplications`` limit (queue, user or
    group) or by ``stateaware``. Its reservation then holds nothing back — the held-back work may be
    what keeps it from starting (an application with waiting asks stays in the running count)."""
    app = view.apps.get(ask.application_id)
    if app is None or app.state not in ACTIVE_STATES:
        return True
    if app.counted:
        return False
    leaf = view.queues.queue(app.queue_path)
    if leaf is None:
        return True
    return bool(view.queues.check_run_app(app.queue_path, app.application_id)) or \
        not view.ugm.can_run_app(app.queue_path, app.application_id, app.user) or \
        stateaware_holds_back(view.waiting.asks, leaf, view.apps, app)


def allocations_of(view: StateView, leaf: Queue) -> Iterator[Allocation]:
    """The allocations of the applications placed in ``leaf`` (preemption victims' candidates)."""
    for aid in leaf.applications:
        app = view.apps.get(aid)
        if app is not None:
            yield from app.allocations.values()


def victims_of(view: StateView, keys: Sequence[str]) -> list[AdmissionRequest]:
    """The admission requests of live allocations ``keys`` (a preemption trial)."""
    out: list[AdmissionRequest] = []
    for key in keys:
        alloc = view.allocs[key]
        app = view.apps[alloc.application_id]
        out.append(view.request(app, key, alloc.resource, alloc.priority, alloc.preemptible))
    return out


def over_queue_max(view: StateView, ask: Ask) -> bool:
    """M-2 alone: the ask would put a queue of its chain over its max (or the root over the
    cluster). The queue policy is always part of admission and never preempts, so this refusal
    is certain; checking it first spares the full check and its messages."""
    return bool(surely_over(view, ask))


def surely_over(view: StateView, ask: Ask) -> list[str]:
    """The queues whose max the ask exceeds when that refusal is certain (it may not preempt
    either); ``[]`` when it is not (see :meth:`over_queue_max`)."""
    app = view.apps.get(ask.application_id)
    if app is None or ask.placeholder or ask.task_group is not None:
        return []                   # (a task-group ask may replace a placeholder instead)
    over = view.queues.over_max(app.queue_path, ask.resource)
    if not over:
        return over
    leaf = view.queues.queue(app.queue_path)
    # an ask that may preempt to restore its queue's guaranteed must be tried (PR-Y)
    if leaf is not None and may_preempt_for_guarantee(ask, leaf, view.clock(),
                                                      view.config.preemption.enabled):
        return []
    return over


def surely_held(view: StateView, ask: Ask) -> list[Violation]:
    """The reservations in force that hold the waiting ``ask`` back now (``queue.reserved``), when
    that refusal is certain and its attempt would change nothing; ``[]`` when it is not.

    Exactly the check its admission makes (:func:`held`), so the refusal is certain. Its attempt could
    not preempt either: a ``queue.reserved`` reason is of the queue policy and not a queue maximum,
    so neither an extension policy alone (E6) nor queue maxima alone (PR-Y) refused it. Not for a
    real task-group ask (it may replace a placeholder instead, past any reservation) nor with resource
    flavors (their search decides the request first, docs/flavors.md)."""
    reservations = view.reservations
    if not reservations.active or ask.placeholder or ask.task_group is not None or view.flavors is not None:
        return []
    app = view.apps.get(ask.application_id)
    leaf = view.queues.queue(app.queue_path) if app is not None else None
    if app is None or leaf is None:
        return []
    return reservations.held(chain_places(leaf, app.user.user), ask.priority, ask.seq, ask.resource,
                             view.clock(), functools.partial(cannot_start, view))


def still_held(view: StateView, path: str, summary: HeldSummary) -> bool:
    """A reservation in force at queue ``path`` holds back every ask of ``summary``
    (:func:`~quotaplane.scheduling.wake.held_summary`) now, as :func:`surely_held` would find: one
    that is older than all of them, of a priority at least theirs, requesting a type each of them
    requests, and whose application may start. False when unsure (resource flavors)."""
    if summary is None or view.flavors is not None:
        return False
    seq, priority, names = summary
    return view.reservations.holds_all("q:" + path, seq, priority, names, view.clock(),
                                       functools.partial(cannot_start, view))


def _first_holding(view: StateView) -> Callable[[str, int, tuple[str, ...]], int | None]:
    """``first(place, priority, names)``: the arrival number of the oldest reservation in force at
    ``place`` that holds back later requests of ``priority`` or lower for one of ``names``
    (:meth:`~quotaplane.scheduling.reservations.Reservations.first_holding`), each looked up once:
    for one wake, while nothing is allocated (issue 38)."""
    reservations = view.reservations
    now = view.clock()
    idle = functools.partial(cannot_start, view)
    found: dict[tuple[str, int, tuple[str, ...]], int | None] = {}

    def first(place: str, priority: int, names: tuple[str, ...]) -> int | None:
        k = (place, priority, names)
        if k in found:
            return found[k]
        oldest = found[k] = reservations.first_holding(place, priority, names, now, idle)
        return oldest

    return first


def reservation_holds(view: StateView) -> Callable[[Queue, HeldSummary], str | None] | None:
    """``holds(queue, summary)``: the path of a reservation in force at a queue of ``queue``'s chain
    that holds back every ask of ``summary`` now, as :func:`surely_held` would find for each; None
    when none does (or unknown). None instead of a function when no reservation is in force or
    resource flavors decide (as :func:`still_held`)."""
    if not view.reservations.active or view.flavors is not None:
        return None
    first = _first_holding(view)

    def holds(q: Queue, summary: HeldSummary) -> str | None:
        if summary is None:
            return None
        seq, priority, names = summary
        for c in q.chain:
            oldest = first("q:" + c.path, priority, names)
            if oldest is not None and oldest < seq:
                return c.path
        return None

    return holds


def still_held_test(view: StateView) -> Callable[[str, HeldSummary], bool] | None:
    """:func:`still_held` for one wake (``test(path, summary)``), each reservation looked up once;
    None when no reservation is in force or resource flavors decide (nothing is held then)."""
    if not view.reservations.active or view.flavors is not None:
        return None
    first = _first_holding(view)

    def test(path: str, summary: HeldSummary) -> bool:
        if summary is None:
            return False
        oldest = first("q:" + path, summary[1], summary[2])
        return oldest is not None and oldest < summary[0]

    return test


def wait_keys(view: StateView, ask: Ask, over: list[str] | None = None) -> list[str]:
    """The wake keys of a refused ask (:func:`quotaplane.scheduling.wake.ask_keys`); ``over``: the
    queues whose max it exceeds, when the caller knows them already."""
    app = view.apps.get(ask.application_id)
    leaf = view.queues.queue(app.queue_path) if app is not None else None
    if app is None or leaf is None:
        return [ANY]
    if over is None:
        over = [] if ask.reasons is not None else view.queues.over_max(app.queue_path, ask.resource)
    return ask_keys(ask, app.user.user, leaf, active=app.state in ACTIVE_STATES,
                    preemption=view.config.preemption.enabled, now=view.clock(), over_max=over)


def preempt_at(view: StateView, ask: Ask) -> float | None:
    """When ``ask`` may first try YuniKorn preemption (PR-Y3), or None when preemption is off."""
    app = view.apps.get(ask.application_id)
    leaf = view.queues.queue(app.queue_path) if app is not None else None
    if leaf is None or not view.config.preemption.enabled:
        return None
    return ask.created + preemption_delay(leaf)


def may_preempt(view: StateView, ask: Ask) -> bool:
    """``ask`` may try YuniKorn preemption now (PR-Y1, PR-Y3)."""
    app = view.apps.get(ask.application_id)
    leaf = view.queues.queue(app.queue_path) if app is not None else None
    return leaf is not None and may_preempt_for_guarantee(ask, leaf, view.clock(),
                                                          view.config.preemption.enabled)


#: the reasons of a waiting ask counted per flavor, from the flavor search its attempt makes
#: (:func:`quotaplane.scheduling.flavoring.ask_reasons`, set by that module: it imports this one
#: through the preemption planner, so this one cannot import it)
flavored_reasons: Callable[[StateView, Application, Ask, float], list[Violation] | None] | None = None


def explain_ask(view: StateView, ask: Ask) -> list[Violation]:
    """Why ``ask`` waits now: exactly what its admission would answer ([] when its application
    takes no allocations now); ``what_if`` of the same request, but for reservations, which hold
    back only requests later than the reserving ask."""
    app = view.apps.get(ask.application_id)
    if app is None or app.state not in ACTIVE_STATES or view.queues.queue(app.queue_path) is None:
        return []
    if view.flavors is not None and flavored_reasons is not None:   # the flavor search's reasons
        flavored = flavored_reasons(view, app, ask, view.clock())
        if flavored is not None:
            return flavored
    # its own key: a reservation holds it back only when it is later than the reserving ask, and an
    # elastic quota counts it once (PR-K2) — exactly as its admission will
    req = view.request(app, ask.allocation_key, ask.resource, ask.priority, ask.preemptible,
                       first=not app.counted)
    return check_all(view.policies, req)


def reasons_of(view: StateView, ask: Ask, at: int) -> list[Violation]:
    """The ask's reasons: those of its last attempt while nothing was journalled since (``at``: the
    journal position now), else explained now (:func:`explain_ask`) and kept."""
    if ask.reasons is None or ask.reasons_at != at:
        ask.reasons = explain_ask(view, ask)
        ask.reasons_at = at
    return ask.reasons
