"""The pending-ask scheduler of a partition: its cycles and their journal chunks.

:class:`PendingAsks` sits beside the partition's state (Kueue's scheduler holds its queues and its
cache side by side): it plans on a read-only view of the state and applies what it decides through the
partition's transaction (:mod:`quotaplane.scheduling.view`). The asks and the notes of what a cycle must
retry are the state's (:class:`~quotaplane.scheduling.waiting.Waiting`); the scheduler keeps only its
switches (:attr:`PendingAsks.auto_schedule`, :attr:`PendingAsks.incremental`), the last error of an
automatic cycle and the preemptions tried per queue in the current change. A long cycle commits its
allocations every :data:`CYCLE_FLUSH_EVERY` (subscribers hear of each allocation once it is journalled).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING

from quotaplane.admission import AllocationSpec
from quotaplane.application import ACTIVE_STATES
from quotaplane.policies.protocol import Decision
from quotaplane.scheduling.asks import Ask
from quotaplane.scheduling.cycle import dominates, placeholder_of, run_cycle
from quotaplane.scheduling.gates import Gates
from quotaplane.scheduling.guarantees import PREEMPT_ATTEMPT_EVERY, QUEUE_CODES, may_preempt_for_guarantee
from quotaplane.scheduling.order import SORT_POLICY_PROPERTY, order_applications
from quotaplane.scheduling.preempting import preempt_for
from quotaplane.scheduling.questions import (
    may_preempt,
    preempt_at,
    reservation_holds,
    still_held_test,
    surely_held,
    surely_over,
    wait_keys,
)
from quotaplane.scheduling.waiting import AppTimers
from quotaplane.scheduling.wake import ANY, ROOT_KEY, Need, bands_of, held_summary, need_of, reserved_keys

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.queues.queue import Queue
    from quotaplane.scheduling.view import StateView, Transaction
    from quotaplane.scheduling.waiting import Waiting

__all__ = ["CYCLE_FLUSH_EVERY", "MAX_PREEMPTIONS_PER_QUEUE", "SKIP_SEARCHES_IN_VAIN", "PendingAsks"]

#: A long cycle journals its allocations in transactions of this many (then tells subscribers):
#: few commits, bounded undo state, and the first allocation notices leave early.
CYCLE_FLUSH_EVERY = 1000

#: a change runs cycles until none gives quota back, at most this many (then the timer goes on)
MAX_CYCLES_PER_CHANGE = 50

#: at most this many preemptions per leaf queue in one cycle (PR-Y3 ``maxPreemptionsPerQueue``; PR-S2)
MAX_PREEMPTIONS_PER_QUEUE = 10

#: a refused ask does not search for guarantee victims where a smaller one of its application found
#: none in the same cycle with nothing allocated since (:meth:`PendingAsks._in_vain`; issue 35: the
#: forecast retried ~20 refused asks per allocation, each with a preemption plan). False: every one
#: searches — the reference it is tested against (tests/queueing/test_searches_in_vain.py).
SKIP_SEARCHES_IN_VAIN = True


class PendingAsks:
    """The cycles that allocate a partition's waiting asks (docs/queueing.md)."""

    __slots__ = ("_gates", "_held", "_made", "_passed", "_searched", "_skipped", "auto_schedule",
                 "incremental", "preempt_tries", "schedule_error")

    def __init__(self, *, auto_schedule: bool = True) -> None:
        #: Automatic cycles retry only the asks a change could have unblocked (issue 13); False: every
        #: automatic cycle is a full one (the reference the incremental cycle is tested against).
        self.incremental = True
        #: Run a cycle right after anything that frees capacity or quota (and after an ask is added).
        self.auto_schedule = auto_schedule
        #: The error of the last automatic cycle that failed (None: none failed).
        self.schedule_error: Exception | None = None
        #: preemptions per leaf queue in the current change's cycles (PR-Y3)
        self.preempt_tries: dict[str, int] = {}
        #: allocations made by the current cycle, and the victim searches of its refused asks that
        #: found nothing: (application, priority, preemptible) -> (resource, allocations made then, seq)
        self._made = 0
        self._searched: dict[tuple[str, int, bool], tuple[dict[str, int], int, int]] = {}
        #: ask key -> its wake keys, for the asks the current cycle passed over as held back by a
        #: reservation (their reasons are explained when read; their keys are known now)
        self._held: dict[str, list[str]] = {}
        #: ask key -> the queues whose max it exceeds, for the asks the current cycle passed over (their
        #: wake keys, not looked up again when the cycle re-indexes their applications)
        self._passed: dict[str, list[str]] = {}
        #: the incremental cycle's gates to fill (scheduling/gates.py): one empty dict kept for the
        #: common release that wakes nothing, rather than a new one per release
        self._gates: dict[str, list[tuple[Queue, Need]] | None] = {}
        #: application -> the last ask of it the current cycle passed over (_surely_refused)
        self._skipped: dict[str, Ask] = {}

    # -- cycles ---------------------------------------------------------------------------------------
    def schedule(self, tx: Transaction) -> list[Ask]:
        """A full cycle — and another while one ends early because quota came back (at most
        :data:`MAX_CYCLES_PER_CHANGE`); return the asks allocated (committed per
        :data:`CYCLE_FLUSH_EVERY`)."""
        self.preempt_tries = {}
        made = self._schedule_once(tx)
        for _ in range(MAX_CYCLES_PER_CHANGE - 1):
            if not tx.state.waiting.full_due:
                break
            made += self._schedule_once(tx)
        return made

    def _schedule_once(self, tx: Transaction) -> list[Ask]:
        waiting = tx.state.waiting
        waiting.woken.clear()
        waiting.due.clear()
        waiting.full_due = False
        if not len(waiting.asks):
            waiting.asks.dirty = False
            waiting.index.clear()
            waiting.timed = AppTimers()
            return []
        root = tx.state.queues.queue("root")
        if root is None:
            return []
        made = self._run(tx, root, None)
        self._reindex_all(tx)
        self._held.clear()
        self._passed.clear()
        waiting.full_due = waiting.asks.dirty    # it stopped after quota came back: the next is full too
        return made

    def schedule_incremental(self, tx: Transaction) -> list[Ask]:
        """One incremental cycle: retry only the applications whose wake keys were freed since the last
        cycle, those waiting on :data:`~quotaplane.scheduling.wake.ANY`, those marked due and those
        with an ask that may now preempt for the first time. Same allocations, same order, as
        :meth:`schedule` (the contract in :mod:`quotaplane.scheduling.wake`)."""
        state = tx.state
        waiting = state.waiting
        asks = waiting.asks
        if waiting.full_due:
            return self._schedule_once(tx)
        # per woken application, the q: keys (queue, need) that woke it, re-tested at its turn (Gates);
        # the applications to retry (an ordered set), the notes consumed: those waiting on a key freed
        # since the last cycle or on ANY, those marked due, those with an ask that may now preempt
        gates = self._gates
        if gates:
            self._gates = gates = {}            # (a Gates of the last cycle may hold it)
        woken = waiting.index.woken(waiting.woken, state.queues.queue, still_held_test, state, gates,
                                    reservation_holds)      # (positional: the release's hot path)
        waiting.woken.clear()
        due = waiting.due
        if due:
            woken.update(due)
            gates.update(due)
            due.clear()
        timed = waiting.timed
        now = tx.clock()
        if timed.due_by(now):
            fired = dict.fromkeys(timed.due(now))       # _retried drops those left without asks
            woken.update(fired)
            gates.update(fired)
        if not woken:               # the common release: nothing waits on what it freed
            asks.dirty = False
            return []
        return self._retry(tx, woken, gates)

    def _retry(self, tx: Transaction, woken: Mapping[str, None],
               gates: dict[str, list[tuple[Queue, Need]] | None]) -> list[Ask]:
        """The incremental cycle over the ``woken`` applications that still have asks."""
        state = tx.state
        waiting = state.waiting
        root = state.queues.queue("root")
        only = self._retried(state, woken, gates) if len(waiting.asks) and root is not None else {}
        if root is None or not only:
            waiting.asks.dirty = False
            return []
        # not with Kueue's fair sharing, whose tournament retries whole subtrees
        gated = Gates(gates, only, waiting.index, lambda: reservation_holds(state)) \
            if root.fair is None or root.is_leaf else None
        made = self._run(tx, root, only, gated)
        self._reindex_retried(state, only, gated)
        return made

    def _reindex_retried(self, state: StateView, only: Mapping[str, Queue], gated: Gates | None) -> None:
        """After an incremental cycle: re-index the applications it retried (not those its gates
        passed over: their asks were not looked at, their keys stand)."""
        waiting = state.waiting
        ended_early = waiting.asks.dirty
        for app_id in only:
            looked = gated is None or gated.looked_at(app_id)
            if ended_early:             # the cycle stopped after quota came back: try them all again
                if looked:
                    waiting.due[app_id] = None
                else:                   # (those its gates passed over: when their room fits again)
                    waiting.woken.update(gated.keys_of(app_id) if gated is not None else ())
            else:
                waiting.due.pop(app_id, None)      # its state changes in this cycle were seen by it
            if looked:
                self._reindex(state, app_id, self._held, self._passed)
        self._held.clear()
        self._passed.clear()

    @staticmethod
    def _retried(state: StateView, woken: Mapping[str, None],
                 gates: dict[str, list[tuple[Queue, Need]] | None] | None = None) -> dict[str, Queue]:
        """The woken applications that still have asks, with their leaves (the others leave the index);
        one of a ``stateaware`` leaf is always retried whole (its leaf's order takes every one)."""
        waiting = state.waiting
        only: dict[str, Queue] = {}
        for app_id in woken:
            if not waiting.asks.has_application(app_id):
                waiting.index.drop(app_id)
                continue
            app = state.apps.get(app_id)
            leaf = state.queues.queue(app.queue_path) if app is not None else None
            if leaf is not None:
                only[app_id] = leaf
                if gates is not None and gates.get(app_id) is not None and \
                        leaf.properties.get(SORT_POLICY_PROPERTY, "fifo").lower() == "stateaware":
                    gates[app_id] = None
        return only

    def _run(self, tx: Transaction, root: Queue, only: Mapping[str, Queue] | None,
             gated: Gates | None = None) -> list[Ask]:
        state = tx.state
        self._held.clear()
        self._passed.clear()
        self._skipped.clear()
        try:
            made = run_cycle(state.waiting.asks, root, state.apps, lambda ask: self._try_ask(tx, ask),
                             functools.partial(self._surely_refused, state),
                             functools.partial(may_preempt, state), only, state.history.rank(), gated)
        finally:
            self._searched.clear()        # a search's answer holds within its cycle only
        tx.commit()
        self._stamp_reasons(tx, only if gated is None or only is None else gated.looked_at_in(only))
        return made

    def _surely_refused(self, state: StateView, ask: Ask) -> bool:
        """The cycle's cheap refusal test: the ask exceeds a queue max (M-2) or a reservation in force
        holds it back, and its attempt would change nothing (issue 38: in a cohort where a
        reservation holds the freed quota, every later ask of a lower priority is passed over).
        An ask that needs at least what the last one of its application passed over needed, at its
        priority, is passed over for the same reasons without the test (a cycle only consumes, a
        reservation that holds one holds the later; one over a max tried only if it may preempt)."""
        last = self._skipped.get(ask.application_id)
        if last is not None and dominates(ask, last) and (
                last.allocation_key in self._held or not may_preempt(state, ask)):
            key = last.allocation_key
            if key in self._held:
                self._held[ask.allocation_key] = self._held[key]
            self._passed[ask.allocation_key] = self._passed[key]
            self._skipped[ask.application_id] = ask
            return True
        if self._refused_over(state, ask):
            self._skipped[ask.application_id] = ask
            return True
        return False

    def _refused_over(self, state: StateView, ask: Ask) -> bool:
        """:meth:`_surely_refused`'s test itself."""
        over = surely_over(state, ask)
        held = surely_held(state, ask)
        if held:
            # it waits on the reservations and on the queues whose max it exceeds: a release there
            # under a reservation in force that holds back all its application's asks does not wake
            # it (wake.WakeIndex.woken), and when the reservation ends it is retried only if its
            # need fits those queues (gates.Gates; issue 38)
            # (an ask that fits the queues now waits on the cluster's room too: once the reservation
            # ends it is refused while the root has no room for it)
            self._held[ask.allocation_key] = reserved_keys(held) if over else [*reserved_keys(held), ROOT_KEY]
            self._passed[ask.allocation_key] = over
            return True
        if not over:
            return False
        self._passed[ask.allocation_key] = over
        return True

    # -- the wake index -------------------------------------------------------------------------------
    @staticmethod
    def _reindex(state: StateView, application_id: str, held: Mapping[str, list[str]] | None = None,
                 passed: Mapping[str, list[str]] | None = None) -> None:
        """Index ``application_id`` by its asks' wake keys (``held``: ask key → its keys, for the asks
        the cycle passed over as held back by a reservation; ``passed``: ask key → the queues whose
        max it exceeds, for the asks the cycle passed over — known, so not looked up again)."""
        waiting = state.waiting
        keys: list[str] = []
        at: dict[str, list[Ask]] = {}        # q: and r: key -> the asks waiting on it
        now = state.clock()
        timed = state.config.preemption.enabled
        mine = waiting.asks.of_application_unsorted(application_id)
        bounded = True
        for ask in mine:
            bounded = _collect_keys(state, ask, keys, at, held, passed) and bounded
            if timed:
                _retime(waiting, ask, now)
        if keys or not waiting.asks.has_application(application_id):
            waiting.index.set(application_id, keys, {key: need_of([a.resource._values for a in found])
                                                     if key[0] == "q" else held_summary(found)
                                                     for key, found in at.items()},
                              bands_of(mine), bounded=bounded)
        else:                   # cannot happen (a refused ask has keys); retry it every time then
            waiting.index.set(application_id, [ANY])

    def _reindex_all(self, tx: Transaction) -> None:
        state = tx.state
        waiting = state.waiting
        waiting.index.clear()
        for app_id in waiting.asks.applications():
            self._reindex(state, app_id, self._held, self._passed)
        self._retime_all(tx)

    def adopt(self, tx: Transaction, keys: Mapping[str, tuple[str, ...]]) -> None:
        """What a full cycle that allocates nothing leaves, without trying an ask: each waiting
        application waits on its ``keys`` (none: on :data:`~quotaplane.scheduling.wake.ANY`), the
        preemption timers are set as a full cycle sets them, the notes are consumed. For a working
        copy of a settled partition (the forecast, eta/forecast.py): the source's keys are those its
        own cycles left, and its incremental cycles are full ones (this module's contract), so the
        copy's first full cycle would allocate nothing and leave them; tests/eta/test_forecast.py
        pins the forecast made so to one whose copy runs that cycle."""
        state = tx.state
        waiting = state.waiting
        waiting.woken.clear()
        waiting.due.clear()
        waiting.full_due = False
        waiting.index.clear()
        for app_id in waiting.asks.applications():
            waiting.index.set(app_id, keys.get(app_id) or (ANY,))
        self._retime_all(tx)
        waiting.asks.dirty = False

    @staticmethod
    def _retime_all(tx: Transaction) -> None:
        state = tx.state
        now = tx.clock()
        timed = state.waiting.timed = AppTimers()
        for ask in state.waiting.asks.unsorted():
            at = preempt_at(state, ask)
            if at is not None:
                at = max(at, ask.preempt_after)     # its next preemption attempt (PR-Y3)
            if at is not None and at > now:
                ask.timer_at = timed.add(at, ask.application_id)

    # -- after a change -------------------------------------------------------------------------------
    def after_add(self, tx: Transaction, ask: Ask, was_dirty: bool, *, demand_moves: bool = False) -> None:
        """The automatic cycle after ``ask`` was added (and committed). ``demand_moves``: a policy
        counts waiting asks as demand (an elastic quota), so the new ask may move others' quota and
        every ask that waits on another policy is retried."""
        asks = tx.state.waiting.asks
        if was_dirty or demand_moves or not self.auto_schedule:
            asks.dirty = True
            self.run_if_needed(tx)
            return
        asks.dirty = False
        try:
            self._try_new(tx, ask)
        except Exception as exc:    # the ask is journalled: it waits, the timer retries
            tx.rollback()
            self.schedule_error = exc
            tx.state.waiting.asks.dirty = True

    def freed(self, tx: Transaction, *, full: bool = False) -> None:
        """Capacity or quota may have been freed: mark for a cycle and run one when automatic.

        The cycle retries what the freed keys (:meth:`~quotaplane.scheduling.waiting.Waiting.wake`)
        could have unblocked; ``full``: the change cannot be told by keys (a config, a recovery), so
        the next cycle tries every ask."""
        waiting = tx.state.waiting
        if full:
            waiting.full_due = True
        waiting.asks.dirty = True
        self.run_if_needed(tx)

    def cluster_grew(self, tx: Transaction) -> None:
        """A node was added or changed: the cluster (the root's max, every extension policy's total)
        may have grown. Only asks held back by the cluster size (``q:root``) or by another policy
        (:data:`~quotaplane.scheduling.wake.ANY`) can be unblocked by that: no queue ``max`` below
        the root, user or group limit, guaranteed or reservation depends on the nodes (issue 39:
        this ran a full cycle, linear in every waiting ask)."""
        tx.state.waiting.wake(("q:root",))
        self.freed(tx)

    def run_if_needed(self, tx: Transaction) -> None:
        """The automatic cycle after a change. It runs again (up to :data:`MAX_CYCLES_PER_CHANGE` in
        all) when a cycle gave quota back itself (preemption, a smaller placeholder replacement, a
        reservation that ended). It never makes the change that triggered it look failed: the change
        is committed already, so a failing cycle is kept in :attr:`schedule_error` and left due (the
        service's timer retries it)."""
        waiting = tx.state.waiting
        if not (self.auto_schedule and waiting.schedule_needed):
            return
        self.preempt_tries = {}         # PR-Y3: per leaf, for all the cycles of one change
        for _ in range(MAX_CYCLES_PER_CHANGE):
            try:
                if self.incremental:
                    self.schedule_incremental(tx)
                else:
                    self._schedule_once(tx)
            except Exception as exc:
                tx.rollback()               # the failed chunk is undone; earlier chunks stand
                self.schedule_error = exc
                waiting.asks.dirty = True
                return
            if not waiting.schedule_needed:
                return

    def _try_new(self, tx: Transaction, ask: Ask) -> None:
        """The automatic cycle after an ask is added, when nothing freed quota since the last cycle.

        Then no other pending ask fits (a cycle leaves none that fits, and since then quota was only
        consumed), and trying the new ask cannot change that: a full cycle would allocate the new
        ask or nothing. So only the new ask is tried — O(1) instead of O(pending) per submission —
        unless its queue's ``stateaware`` policy holds its application back.
        """
        state = tx.state
        waiting = state.waiting
        app = state.apps[ask.application_id]
        leaf = state.queues.queue(app.queue_path)
        if leaf is None:
            return
        if leaf.properties.get(SORT_POLICY_PROPERTY, "fifo").lower() == "stateaware" and all(
                a is not app for a in order_applications(waiting.asks, leaf, state.apps)):
            return
        over = surely_over(state, ask)
        if over:
            # certainly refused, and it may not preempt: no attempt (its reasons are explained when
            # read, exactly as what_if); it waits on the queues whose max it exceeds
            ask.reasons = None
            waiting.index.add(ask.application_id, wait_keys(state, ask, over), ask.resource._values,
                              bands_of((ask,)), known=_known(state, ask))
            waiting.due.pop(ask.application_id, None)
            return
        waiting.asks.cycle_freed = False
        self.preempt_tries = {}
        decision = self._try_ask(tx, ask)
        tx.commit()
        if not decision.allocated and ask.allocation_key in waiting.asks:
            ask.reasons, ask.reasons_at = list(decision.reasons), tx.head
            # a new ask tried alone and refused: its application also waits on its keys
            waiting.index.add(ask.application_id, wait_keys(state, ask, None), ask.resource._values,
                              bands_of((ask,)), known=_known(state, ask))
            waiting.due.pop(ask.application_id, None)
        if decision.preempted or waiting.asks.cycle_freed:
            self.freed(tx)                     # quota was given back: the others get a cycle

    def _try_ask(self, tx: Transaction, ask: Ask) -> Decision:
        """Admit ``ask`` in memory (journalled at the cycle's next commit point)."""
        state = tx.state
        app = state.apps.get(ask.application_id)
        if app is None or app.state not in ACTIVE_STATES or state.queues.queue(app.queue_path) is None:
            return Decision(False, [])           # cannot take allocations now: keeps waiting
        if ask.task_group is not None and not ask.placeholder:
            placeholder = placeholder_of(app, ask.task_group)
            if placeholder is not None:
                return self._replace_for(tx, ask, placeholder)
        spec = AllocationSpec(ask.application_id, ask.allocation_key, ask.resource, ask.priority,
                              ask.preemptible, ask.placeholder, ask.task_group, tags=ask.tags,
                              constraints=ask.constraints, max_runtime=ask.max_runtime)
        decision = tx.admit(spec, ask)
        if decision.allocated:
            self._made += 1
            if tx.uncommitted >= CYCLE_FLUSH_EVERY:
                tx.commit()
            return decision
        return self._preempt_for(tx, spec, decision, ask, app.queue_path) if decision.reasons else decision

    def _preempt_for(self, tx: Transaction, spec: AllocationSpec, refused: Decision, ask: Ask,
                     leaf: str) -> Decision:
        """Preemption for a refused ask (docs/preemption.md): committed at once, after what the cycle
        made so far; at most :data:`MAX_PREEMPTIONS_PER_QUEUE` per leaf in one change (PR-Y3)."""
        tries = self.preempt_tries.get(leaf, 0)
        if tries >= MAX_PREEMPTIONS_PER_QUEUE:
            return refused
        mark = self._in_vain(tx.state, refused, ask, leaf)
        if mark is not None:
            ask.preempt_after = mark        # as its own search would have marked it (PR-Y3)
            return refused
        before = ask.preempt_after
        decision = preempt_for(tx, spec, refused, ask)
        if not decision.allocated and not decision.preempted and ask.preempt_after != before:
            # it searched for guarantee victims (PR-Y3) and found none (held preemption marks some)
            self._searched[(ask.application_id, ask.priority, ask.preemptible)] = \
                (ask.resource._values, self._made, ask.seq)
        if decision.allocated:
            self.preempt_tries[leaf] = tries + 1
            tx.state.waiting.asks.cycle_freed = True    # the victims may have freed more than the ask took
        return decision

    def _in_vain(self, state: StateView, refused: Decision, ask: Ask, leaf: str) -> float | None:
        """When ``ask``'s search for guarantee victims would find none: a smaller ask of its
        application (same priority and preemptibility, earlier) searched in vain in this cycle, and
        nothing was allocated since — the victims must free at least as much for a larger request,
        from the same candidates. Then the mark its search would leave (PR-Y3), else None. Only
        where the search is YuniKorn's (refused by queue maxima alone, no resource flavors, no fair
        sharing: Kueue's victims depend on the preemptor's own creation time)."""
        if not SKIP_SEARCHES_IN_VAIN:
            return None
        found = self._searched.get((ask.application_id, ask.priority, ask.preemptible))
        if found is None or found[1] != self._made or ask.seq <= found[2] or ask.placeholder:
            return None
        q = state.queues.queue(leaf)
        if q is None or q.fair is not None or state.flavors is not None:
            return None
        if not all(v.code in QUEUE_CODES for v in refused.reasons):
            return None
        now = state.clock()
        if not may_preempt_for_guarantee(ask, q, now, state.config.preemption.enabled):
            return None
        mine = ask.resource._values
        if not all(mine.get(name, 0) >= amount for name, amount in found[0].items()):
            return None
        return now + PREEMPT_ATTEMPT_EVERY

    def _replace_for(self, tx: Transaction, ask: Ask, placeholder: str) -> Decision:
        """Gang scheduling (seed 001, YUNIKORN-982): a real ask of a task group that holds an
        allocated placeholder replaces that placeholder instead of allocating anew."""
        tx.commit()                             # keep the journal (and the notices) in cycle order
        before = tx.state.allocs[placeholder].resource
        decision = tx.replace(placeholder, ask.allocation_key, ask.resource)
        if decision.allocated:
            self._made += 1
        if decision.allocated and any(ask.resource.get(name, 0) < amount for name, amount in before.items()):
            tx.state.waiting.asks.cycle_freed = True   # a smaller real allocation gave quota back
        return decision

    # -- reasons --------------------------------------------------------------------------------------
    @staticmethod
    def _stamp_reasons(tx: Transaction, only: Mapping[str, Queue] | None = None) -> None:
        """The reasons given during the cycle hold at its end: stamp them with the journal position."""
        at = tx.head
        asks = tx.state.waiting.asks
        found = asks.unsorted() if only is None else \
            [a for app_id in only for a in asks.of_application_unsorted(app_id)]
        for ask in found:
            if ask.reasons_at == -1:
                ask.reasons_at = at


def _retime(waiting: Waiting, ask: Ask, now: float) -> None:
    """An ask that tried preemption may again only at its ``preempt_after`` (PR-Y3), and waits on no
    guaranteed until then (wake.ask_keys): the timer retries it instead of every change."""
    if ask.preempt_after > now and ask.timer_at != ask.preempt_after:
        ask.timer_at = waiting.timed.add(ask.preempt_after, ask.application_id)


def _known(state: StateView, ask: Ask) -> bool:
    """:meth:`WakeIndex.add`'s ``known`` for a new ``ask`` refused alone: its application's other
    waiting asks are indexed (it is), or it has none."""
    app_id = ask.application_id
    waiting = state.waiting
    return bool(waiting.index.keys_of(app_id)) or waiting.asks.count_of(app_id) == 1


def _collect_keys(state: StateView, ask: Ask, keys: list[str], at: dict[str, list[Ask]],
                  held: Mapping[str, list[str]] | None, passed: Mapping[str, list[str]] | None) -> bool:
    """Add ``ask``'s wake keys to ``keys`` and the ask to ``at`` under each of its ``q:`` and ``r:``
    keys; whether one of them is a ``q:`` key."""
    over = passed.get(ask.allocation_key) if passed and ask.reasons is None else None
    mine = wait_keys(state, ask, over)
    if held and ask.reasons is None:
        mine = mine + held.get(ask.allocation_key, [])
    keys.extend(mine)
    queue = False
    for key in mine:
        if key[0] == "q" or key[0] == "r":
            at.setdefault(key, []).append(ask)
            queue = queue or key[0] == "q"
    return queue
