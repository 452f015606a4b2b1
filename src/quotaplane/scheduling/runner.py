"""The pending-ask scheduler of a partition: cycles and their journal batches.

:class:`PendingAsks` is composed into the partition (not mixed in): it sees the partition only
through :class:`CycleHost`, a handful of callables, and owns the asks, the automatic cycle after a
change (:meth:`PendingAsks.freed`), the batching of a cycle's allocations into journal transactions
(:data:`CYCLE_FLUSH_EVERY`); subscribers hear of each allocation once it is journalled.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from quotaplane.application import ACTIVE_STATES
from quotaplane.events import Allocated, Event
from quotaplane.policy import Decision, Violation
from quotaplane.scheduling.asks import Ask, AskQueue
from quotaplane.scheduling.cycle import CycleBatch, placeholder_of, run_cycle
from quotaplane.scheduling.order import SORT_POLICY_PROPERTY, order_applications
from quotaplane.scheduling.wake import ANY, WakeIndex

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.admission import AllocationUndo
    from quotaplane.application import Allocation, Application
    from quotaplane.queues.queue import Queue

__all__ = ["CYCLE_FLUSH_EVERY", "MAX_PREEMPTIONS_PER_QUEUE", "CycleHost", "PendingAsks"]

#: A long cycle journals its allocations in transactions of this many (then tells subscribers):
#: few commits, bounded undo state, and the first allocation notices leave early.
CYCLE_FLUSH_EVERY = 1000

#: a change runs cycles until none gives quota back, at most this many (then the timer goes on)
MAX_CYCLES_PER_CHANGE = 50

#: at most this many preemptions per leaf queue in one cycle (PR-Y3 ``maxPreemptionsPerQueue``; PR-S2)
MAX_PREEMPTIONS_PER_QUEUE = 10


@dataclass(frozen=True, slots=True)
class CycleHost:
    """What the scheduler may do with its partition (all under the partition lock)."""

    name: str
    apps: Mapping[str, Application]
    allocations: Mapping[str, Allocation]
    queue: Callable[[str], Queue | None]
    #: admit an ask in memory: (decision, the event to journal, how to undo it)
    admit: Callable[[Ask], tuple[Decision, Allocated | None, AllocationUndo | None]]
    undo: Callable[[Allocated, AllocationUndo], None]
    #: try to admit a refused ask by preemption (journalled at once; runs ``before`` first if it will)
    preempt: Callable[[Ask, Decision, Callable[[], None]], Decision]
    #: replace a gang placeholder by the ask (journalled at once)
    replace: Callable[[str, str, Any], Decision]
    record: Callable[[list[Event]], None]
    explain: Callable[[Ask], list[Violation]]
    over_queue_max: Callable[[Ask], bool]
    #: the queues whose max the ask certainly exceeds (it may not preempt either); [] when it fits them
    surely_over: Callable[[Ask], list[str]]
    last_seq: Callable[[], int]
    replaying: Callable[[], bool]
    #: an ask refused only by queue maxima may preempt now (PR-Y1, PR-Y3)
    may_preempt: Callable[[Ask], bool]
    #: the wake keys of a waiting ask (:mod:`quotaplane.scheduling.wake`)
    wait_keys: Callable[[Ask, list[str] | None], list[str]]
    #: when a waiting ask may first preempt (PR-Y3), None when it never may
    preempt_at: Callable[[Ask], float | None]
    now: Callable[[], float]


class PendingAsks:
    """The asks of one partition and the cycles that allocate them (docs/queueing.md)."""

    __slots__ = ("_timed", "asks", "auto_schedule", "due", "full_due", "host", "incremental", "index",
                 "preempt_tries", "schedule_error", "woken")

    def __init__(self, host: CycleHost, *, auto_schedule: bool = True) -> None:
        self.host = host
        self.asks = AskQueue()
        #: Automatic cycles retry only the asks a change could have unblocked (issue 13); False: every
        #: automatic cycle is a full one (the reference the incremental cycle is tested against).
        self.incremental = True
        #: wake key → applications waiting on it (:mod:`quotaplane.scheduling.wake`)
        self.index = WakeIndex()
        #: keys freed since the last cycle
        self.woken: set[str] = set()
        #: applications to retry in the next cycle whatever their keys (new asks, state changes)
        self.due: dict[str, None] = {}
        #: the next automatic cycle must be a full one (config, nodes, timeouts)
        self.full_due = False
        #: (time an ask may first preempt, its seq, its key): asks that become able to preempt (PR-Y3)
        self._timed: list[tuple[float, int, str]] = []
        #: Run a cycle right after anything that frees capacity or quota (and after an ask is added).
        self.auto_schedule = auto_schedule
        #: The error of the last automatic cycle that failed (None: none failed).
        self.schedule_error: Exception | None = None
        #: preemptions per leaf queue in the current cycle (PR-Y3)
        self.preempt_tries: dict[str, int] = {}

    @property
    def schedule_needed(self) -> bool:
        """True when asks are pending and something changed since the last cycle."""
        return self.asks.dirty and len(self.asks) > 0

    # -- cycles ---------------------------------------------------------------------------------------
    def schedule(self) -> list[Ask]:
        """A full cycle — and another while one ends early because quota came back (at most
        :data:`MAX_CYCLES_PER_CHANGE`); return the asks allocated (journalled per
        :data:`CYCLE_FLUSH_EVERY`)."""
        self.preempt_tries = {}
        made = self._schedule_once()
        for _ in range(MAX_CYCLES_PER_CHANGE - 1):
            if not self.full_due:
                break
            made += self._schedule_once()
        return made

    def _schedule_once(self) -> list[Ask]:
        self.woken.clear()
        self.due.clear()
        self.full_due = False
        if not len(self.asks):
            self.asks.dirty = False
            self.index.clear()
            self._timed = []
            return []
        root = self.host.queue("root")
        if root is None:
            return []
        made = self._run(root, None)
        self._reindex_all()
        self.full_due = self.asks.dirty         # it stopped after quota came back: the next is full too
        return made

    def schedule_incremental(self) -> list[Ask]:
        """One incremental cycle: retry only the applications whose wake keys were freed since the last
        cycle, those waiting on :data:`~quotaplane.scheduling.wake.ANY`, those marked due and those
        with an ask that may now preempt for the first time. Same allocations, same order, as
        :meth:`schedule` (the contract in :mod:`quotaplane.scheduling.wake`)."""
        asks = self.asks
        if self.full_due:
            return self._schedule_once()
        woken = self.index.woken(self.woken)
        woken.update(self.due)
        self.woken.clear()
        self.due.clear()
        timed = self._timed
        if timed:
            now = self.host.now()
            while timed and timed[0][0] <= now:
                ask = asks.get(heapq.heappop(timed)[2])
                if ask is not None:
                    woken[ask.application_id] = None
        root = self.host.queue("root")
        if not len(asks) or root is None:
            asks.dirty = False
            return []
        only: dict[str, Queue] = {}
        apps, queue = self.host.apps, self.host.queue
        for app_id in woken:
            if not asks.has_application(app_id):
                self.index.drop(app_id)
                continue
            app = apps.get(app_id)
            leaf = queue(app.queue_path) if app is not None else None
            if leaf is not None:
                only[app_id] = leaf
        if not only:
            asks.dirty = False
            return []
        made = self._run(root, only)
        ended_early = asks.dirty
        for app_id in only:
            if ended_early:             # the cycle stopped after quota came back: try them all again
                self.due[app_id] = None
            else:
                self.due.pop(app_id, None)         # its state changes in this cycle were seen by it
            self._reindex(app_id)
        return made

    def _run(self, root: Queue, only: Mapping[str, Queue] | None) -> list[Ask]:
        batch = CycleBatch()
        try:
            made = run_cycle(self.asks, root, self.host.apps, lambda ask: self._try_ask(ask, batch),
                             self.host.over_queue_max, self.host.may_preempt, only)
        except BaseException:
            self._rollback(batch)
            raise
        self._flush(batch)
        self._stamp_reasons(only)
        return made

    # -- the wake index -------------------------------------------------------------------------------
    def wake(self, keys: Iterable[str]) -> None:
        """``keys`` were freed (a release): the applications waiting on them are retried next cycle."""
        if len(self.asks):
            self.woken.update(keys)

    def touch(self, application_id: str) -> None:
        """Retry ``application_id`` in the next cycle (its state changed, or it has untried asks)."""
        self.due[application_id] = None

    def _reindex(self, application_id: str) -> None:
        wait_keys = self.host.wait_keys
        keys: list[str] = []
        for ask in self.asks.of_application_unsorted(application_id):
            keys.extend(wait_keys(ask, None))
        if keys or not self.asks.has_application(application_id):
            self.index.set(application_id, keys)
        else:                   # cannot happen (a refused ask has keys); retry it every time then
            self.index.set(application_id, [ANY])

    def _reindex_all(self) -> None:
        self.index.clear()
        for app_id in self.asks.applications():
            self._reindex(app_id)
        now = self.host.now()
        preempt_at = self.host.preempt_at
        timed: list[tuple[float, int, str]] = []
        for ask in self.asks.unsorted():
            at = preempt_at(ask)
            if at is not None and at > now:
                timed.append((at, ask.seq, ask.allocation_key))
        heapq.heapify(timed)
        self._timed = timed

    def entered(self, ask: Ask) -> None:
        """``ask`` now waits (added, replayed, or put back): its application is retried next cycle, and
        again once the ask may preempt (PR-Y3)."""
        self.due[ask.application_id] = None
        at = self.host.preempt_at(ask)
        if at is not None:
            heapq.heappush(self._timed, (at, ask.seq, ask.allocation_key))

    def after_add(self, ask: Ask, was_dirty: bool, *, demand_moves: bool = False) -> None:
        """The automatic cycle after ``ask`` was added (and journalled). ``demand_moves``: a policy
        counts waiting asks as demand (an elastic quota), so the new ask may move others' quota and
        every ask that waits on another policy is retried."""
        if was_dirty or demand_moves or not self.auto_schedule or self.host.replaying():
            self.asks.dirty = True
            self.run_if_needed()
            return
        self.asks.dirty = False
        try:
            self._try_new(ask)
        except Exception as exc:    # the ask is journalled: it waits, the timer retries
            self.schedule_error = exc
            self.asks.dirty = True

    def freed(self, *, full: bool = False) -> None:
        """Capacity or quota may have been freed: mark for a cycle and run one when automatic.

        The cycle retries what the freed keys (:meth:`wake`) could have unblocked; ``full``: the change
        cannot be told by keys (a config, a node, a timeout), so the next cycle tries every ask."""
        if full:
            self.full_due = True
        self.asks.dirty = True
        self.run_if_needed()

    def run_if_needed(self) -> None:
        """The automatic cycle after a change. It runs again (up to :data:`MAX_CYCLES_PER_CHANGE` in
        all) when a cycle gave quota back itself (preemption, a smaller placeholder replacement, a
        reservation that ended). It never makes the change that
        triggered it look failed: the change is journalled already, so a failing cycle is kept in
        :attr:`schedule_error` and left due (the service's timer retries it)."""
        self.preempt_tries = {}         # PR-Y3: per leaf, for all the cycles of one change
        for _ in range(MAX_CYCLES_PER_CHANGE):
            if not (self.schedule_needed and self.auto_schedule and not self.host.replaying()):
                return
            try:
                if self.incremental:
                    self.schedule_incremental()
                else:
                    self._schedule_once()
            except Exception as exc:
                self.schedule_error = exc
                self.asks.dirty = True
                return

    def _try_new(self, ask: Ask) -> None:
        """The automatic cycle after an ask is added, when nothing freed quota since the last cycle.

        Then no other pending ask fits (a cycle leaves none that fits, and since then quota was only
        consumed), and trying the new ask cannot change that: a full cycle would allocate the new
        ask or nothing. So only the new ask is tried — O(1) instead of O(pending) per submission —
        unless its queue's ``stateaware`` policy holds its application back.
        """
        app = self.host.apps[ask.application_id]
        leaf = self.host.queue(app.queue_path)
        if leaf is None:
            return
        if leaf.properties.get(SORT_POLICY_PROPERTY, "fifo").lower() == "stateaware" and all(
                a is not app for a in order_applications(self.asks, leaf, self.host.apps)):
            return
        over = self.host.surely_over(ask)
        if over:
            # certainly refused, and it may not preempt: no attempt (its reasons are explained when
            # read, exactly as what_if); it waits on the queues whose max it exceeds
            ask.reasons = None
            self.index.add(ask.application_id, self.host.wait_keys(ask, over))
            self.due.pop(ask.application_id, None)
            return
        batch = CycleBatch()
        self.asks.cycle_freed = False
        self.preempt_tries = {}
        try:
            decision = self._try_ask(ask, batch)
        except BaseException:
            self._rollback(batch)
            raise
        self._flush(batch)
        if not decision.allocated and ask.allocation_key in self.asks:
            ask.reasons, ask.reasons_at = list(decision.reasons), self.host.last_seq()
            # a new ask tried alone and refused: its application also waits on its keys
            self.index.add(ask.application_id, self.host.wait_keys(ask, None))
            self.due.pop(ask.application_id, None)
        if decision.preempted or self.asks.cycle_freed:
            self.freed()                       # quota was given back: the others get a cycle

    def _try_ask(self, ask: Ask, batch: CycleBatch) -> Decision:
        """Admit ``ask`` in memory (journalled when the cycle's batch is flushed)."""
        app = self.host.apps.get(ask.application_id)
        if app is None or app.state not in ACTIVE_STATES or self.host.queue(app.queue_path) is None:
            return Decision(False, [])           # cannot take allocations now: keeps waiting
        if ask.task_group is not None and not ask.placeholder:
            placeholder = placeholder_of(app, ask.task_group)
            if placeholder is not None:
                return self._replace_for(ask, placeholder, batch)
        decision, done, undo = self.host.admit(ask)
        if done is not None and undo is not None:
            batch.events.append(done)
            batch.undos.append(undo)
            batch.asks.append(ask)
            if len(batch.events) >= CYCLE_FLUSH_EVERY:
                self._flush(batch)
        elif decision.reasons and self.preempt_tries.get(app.queue_path, 0) < MAX_PREEMPTIONS_PER_QUEUE:
            # preemption (docs/preemption.md): journalled at once, after what the cycle made so far
            decision = self.host.preempt(ask, decision, lambda: self._flush(batch))
            if decision.allocated:
                self.preempt_tries[app.queue_path] = self.preempt_tries.get(app.queue_path, 0) + 1
                self.asks.cycle_freed = True       # the victims may have freed more than the ask took
        return decision

    def _replace_for(self, ask: Ask, placeholder: str, batch: CycleBatch) -> Decision:
        """Gang scheduling (seed 001, YUNIKORN-982): a real ask of a task group that holds an
        allocated placeholder replaces that placeholder instead of allocating anew."""
        self._flush(batch)                      # keep the journal (and the notices) in cycle order
        before = self.host.allocations[placeholder].resource
        decision = self.host.replace(placeholder, ask.allocation_key, ask.resource)
        if decision.allocated:
            if any(ask.resource.get(name, 0) < amount for name, amount in before.items()):
                self.asks.cycle_freed = True   # a smaller real allocation gave quota back
            self.asks.remove(ask.allocation_key)   # (the replaced event removes it on replay too)
        return decision

    # -- journal batches ------------------------------------------------------------------------------
    def _flush(self, batch: CycleBatch) -> None:
        """Journal the batch's allocations in one transaction (subscribers hear of them then)."""
        if not batch.events:
            return
        try:
            self.host.record(list(batch.events))
        except BaseException:
            self._rollback(batch)
            raise
        batch.clear()

    def _rollback(self, batch: CycleBatch) -> None:
        """Undo the batch's (unjournalled) allocations, newest first; their asks wait again."""
        for done, undo, ask in zip(reversed(batch.events), reversed(batch.undos), reversed(batch.asks),
                                   strict=True):
            self.host.undo(done, undo)
            if ask.allocation_key not in self.host.allocations and ask.allocation_key not in self.asks:
                ask.reasons = None
                self.asks.add(ask)
                self.entered(ask)
        batch.clear()

    # -- reasons --------------------------------------------------------------------------------------
    def _stamp_reasons(self, only: Mapping[str, Queue] | None = None) -> None:
        """The reasons given during the cycle hold at its end: stamp them with the journal position."""
        at = self.host.last_seq()
        found = self.asks.unsorted() if only is None else \
            [a for app_id in only for a in self.asks.of_application_unsorted(app_id)]
        for ask in found:
            if ask.reasons_at == -1:
                ask.reasons_at = at

    def reasons_of(self, ask: Ask) -> list[Violation]:
        """The ask's reasons, recomputed (``what_if``) when anything was journalled since."""
        at = self.host.last_seq()
        if ask.reasons is None or ask.reasons_at != at:
            ask.reasons = self.host.explain(ask)
            ask.reasons_at = at
        return ask.reasons
