"""One scheduling cycle over the pending asks (seed 004: quotas are enforced on consumption).

Every pending ask is tried at most once per cycle, in :mod:`~quotaplane.scheduling.order`; an ask that
fits at its turn is always allocated, so no ask that fits is skipped by later ones. A cycle only
consumes, never frees, so an ask refused in a cycle still does not fit at its end: after a cycle no
pending ask fits. (A preemption, a smaller real allocation replacing a gang placeholder, or the end of
a reservation gives quota back: the cycle then ends at once and another is due.) Two consequences keep
cycles cheap:
within a cycle an ask that needs at least what a refused ask of its application needed is refused
without an attempt, and an ask over a queue max (M-2, which never preempts) is refused without the
full check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from quotaplane.policies.protocol import Decision
from quotaplane.scheduling.asks import Ask, AskQueue
from quotaplane.scheduling.guarantees import QUEUE_CODES
from quotaplane.scheduling.order import Rank, candidates
from quotaplane.scheduling.reservations import RESERVED

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Application
    from quotaplane.queues.queue import Queue
    from quotaplane.scheduling.gates import Gates

__all__ = ["dominates", "placeholder_of", "run_cycle"]


def run_cycle(asks: AskQueue, root: Queue, apps: Mapping[str, Application],
              try_ask: Callable[[Ask], Decision],
              surely_refused: Callable[[Ask], bool] | None = None,
              may_preempt: Callable[[Ask], bool] | None = None,
              only: Mapping[str, Queue] | None = None, rank: Rank | None = None,
              gates: Gates | None = None) -> list[Ask]:
    """One scheduling cycle: try every pending ask once in order; return the asks allocated.

    ``try_ask`` runs the partition's admission for the ask (allocating it when it fits) and returns
    the decision; a refused ask keeps waiting with the decision's reasons. An allocation that
    preempted others (a quota forest) freed quota: the queue stays ``dirty`` so another cycle runs
    (no ask refused earlier in this cycle is left behind). ``surely_refused`` is an optional cheap
    test (e.g. the queue maxima alone) that answers True only for asks the admission would refuse:
    those are not tried, and their reasons are explained when read. ``may_preempt`` answers whether
    an ask refused only by queue maxima may preempt now (PR-Y): such an ask is always tried. ``only``
    (application id → leaf) restricts the cycle to those applications (the incremental cycle);
    ``gates`` passes over, at its turn, an application of ``only`` whose waking room is used up, and
    ends the cycle once every one left is such (:class:`~quotaplane.scheduling.gates.Gates`).

    Both shortcuts are exact: an ask they pass over would have been refused without any change, so
    which shortcuts fire (they depend on what else the cycle tried) never changes the outcome.
    """
    allocated: list[Ask] = []
    refused: list[Ask] = []
    stale = 0                      # refused[:stale] were refused before the cycle's last allocation
    seen: set[str] = set()
    freed = False
    asks.cycle_freed = False
    # The last refused ask of each application: a later ask of it that asks for at least as much
    # (same priority and preemptibility) is refused too, since a cycle only consumes quota; it is
    # not tried again (its reasons are explained lazily). Preemption frees quota: see ``freed``.
    last_refused: dict[str, Ask] = {}
    # The cheap refusal test runs only below a queue where an attempt of this cycle was refused — its
    # leaf, and the queues whose max refused it (issue 38: in a cohort whose freed quota is used up,
    # every later ask at least as large is refused there, whatever its leaf, without an attempt);
    # where asks fit, it would only repeat what the admission checks anyway.
    refused_in: set[str] = set()
    hot: dict[str, bool] = {}           # leaf path -> its chain holds a queue of refused_in
    skip: Callable[[Queue, Ask], bool] | None = None
    if surely_refused is not None:
        test = surely_refused

        def skip(leaf: Queue, ask: Ask) -> bool:
            below = hot.get(leaf.path)
            if below is None:
                below = hot[leaf.path] = any(q.path in refused_in for q in leaf.chain)
            return below and test(ask)

    gate: Callable[[str], bool] | None = None
    if gates is not None:
        opens = gates.open

        def gate(application_id: str) -> bool:
            return opens(application_id, len(allocated))

    # an incremental cycle whose woken applications all have their room used up already (a reservation
    # that ended while the cluster is full) tries none
    found = candidates(asks, root, apps, skip, only, rank, gate) \
        if gates is None or not gates.exhausted(0) else iter(())
    for leaf, ask in found:
        key = ask.allocation_key
        if key in seen or key not in asks:
            continue
        seen.add(key)
        worse = last_refused.get(ask.application_id)
        if worse is not None and not freed and not asks.cycle_freed and dominates(ask, worse) and \
                not (may_preempt is not None and _queue_only(worse) and may_preempt(ask)):
            ask.reasons = None
            refused.append(ask)
            continue
        decision = try_ask(ask)
        if decision.allocated:
            allocated.append(ask)
            stale = len(refused)
            if decision.preempted or asks.cycle_freed:
                # quota came back (victims, a smaller real allocation, a reservation ended): the cycle
                # ends here and another starts, so that every ask sees it in the order of a new cycle
                freed = True
                break
            if gates is not None and gates.exhausted(len(allocated)):
                break           # the room that woke the others is used up: each would be refused
        else:
            ask.reasons = list(decision.reasons)
            ask.reasons_at = -1
            refused.append(ask)
            last_refused[ask.application_id] = ask
            if leaf.path not in refused_in:
                refused_in.add(leaf.path)
                hot.clear()
            for v in decision.reasons:
                if (v.code in QUEUE_CODES or v.code == RESERVED) and v.path not in refused_in:
                    refused_in.add(v.path)
                    hot.clear()
    # Reasons must equal what_if at the end of the cycle: those given before a later allocation
    # changed the usage are recomputed lazily (pending() explains an ask whose reasons are None).
    for ask in refused[:stale]:
        ask.reasons = None
    asks.dirty = freed or asks.cycle_freed
    return allocated


def _queue_only(refused: Ask) -> bool:
    """The refused ask was held back by queue maxima alone (what YuniKorn preemption may lift)."""
    return bool(refused.reasons) and all(v.code in QUEUE_CODES for v in refused.reasons or ())


def dominates(ask: Ask, refused: Ask) -> bool:
    """``ask`` needs at least what ``refused`` needed, per resource, with the same priority and
    preemptibility (so every quota check that refused ``refused`` refuses ``ask`` as well)."""
    if ask.priority != refused.priority or ask.preemptible != refused.preemptible:
        return False
    if ask.placeholder != refused.placeholder or (ask.task_group is not None and not ask.placeholder):
        return False                    # a real task-group ask may replace a placeholder instead
    mine = ask.resource._values
    return all(mine.get(name, 0) >= amount for name, amount in refused.resource._values.items())


def placeholder_of(app: Application, task_group: str) -> str | None:
    """The oldest allocated placeholder of ``task_group`` in ``app`` (admission order), or None."""
    for key, alloc in app.allocations.items():
        if alloc.placeholder and alloc.task_group == task_group:
            return key
    return None

