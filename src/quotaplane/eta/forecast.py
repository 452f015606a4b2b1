"""When will each waiting ask start: the present simulated forward with the real engines on a copy.

Method (docs/eta.md "How the forecast is made"):

1. a working copy of the partition (:func:`~quotaplane.eta.copy.working_copy`) on a simulated clock
   that starts at ``now``, the time the forecast is asked for (never read from the wall clock here);
2. every running allocation gets an end: its declared runtime (``max_runtime``, counted from its own
   start; one already past it ends at ``now``), else the ``q``-quantile of the hold times observed in
   its queue (or of its user) among the holds longer than it has already run
   (:class:`~quotaplane.eta.holds.HoldTimes`), else none — it never ends in the forecast;
3. a scheduling cycle runs at ``now``, then at every end in time order: the ends due are released
   together and the partition's own cycle allocates what fits — queue order, priorities, fairness,
   reservations, guarantees and preemption are the engines' own. An ask started in the copy gets an
   end the same way (its declared runtime, else its queue's unconditional quantile);
4. an ask's start is the time of the cycle that allocated it; one never allocated is "unknown".

The forecast runs once per quantile (p10, p50, p90) — or once, when every end is a declared runtime —
and is cached per partition until the partition changes (:class:`~quotaplane.eta.tracker.EtaTracker`).
The quantiles' runs share one copy and one pass while they would make the same calls on the engines
(:class:`_Run`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import quotaplane.events as E
from quotaplane.application import Allocation
from quotaplane.eta.copy import working_copy
from quotaplane.eta.ends import _end_of, _Estimates, _needs_quantiles, _outlives
from quotaplane.eta.holds import HoldTimes
from quotaplane.eta.instants import Instants, Repeats
from quotaplane.eta.never import never_fits
from quotaplane.eta.ticks import (
    _first_tries,
    _never_preempting,
    _next_timer,
    _no_timeouts,
    _quiet,
    _reserves_by_no_delay,
    _time_silent,
    _timeouts_harmless,
)
from quotaplane.partition import gcfreeze
from quotaplane.partition.facade import Partition
from quotaplane.scheduling.guarantees import PREEMPT_ATTEMPT_EVERY

__all__ = ["MAX_STEPS", "QUANTILES", "AskEta", "Forecast", "forecast"]

#: the quantiles of the hold times each forecast run takes (the p10, p50 and p90 starts)
QUANTILES = (0.1, 0.5, 0.9)
#: the instants (ends, timer dues) one forecast run takes at most: the forecast's cost is bounded, and
#: an ask not started within them is unknown ("beyond the horizon"), never guessed
MAX_STEPS = 2000
#: a settled partition's copy starts from the partition's own wake index rather than a full cycle
#: (:meth:`_Run.run`; off: the reference the tests compare it with)
ADOPT_KEYS = True
#: the bases named with an answer at most (the rest are counted)
_MAX_BASES = 3


@dataclass(frozen=True, slots=True)
class AskEta:
    """The forecast start of one waiting ask: ``p10``/``p50``/``p90`` times (None: unknown) and the
    ``basis`` of the p50 answer (the ends that let it start, or why it is unknown)."""

    allocation_key: str
    application_id: str
    queue: str
    waiting_since: float
    p10: float | None
    p50: float | None
    p90: float | None
    basis: tuple[str, ...]

    @property
    def known(self) -> bool:
        """True when the median start is known."""
        return self.p50 is not None

    def to_dict(self, as_of: float) -> dict[str, Any]:
        """The REST shape: times in seconds since the epoch and seconds from ``as_of`` (null: unknown)."""
        def rel(t: float | None) -> float | None:
            return None if t is None else round(max(0.0, t - as_of), 3)
        return {"allocationKey": self.allocation_key, "applicationID": self.application_id,
                "queue": self.queue, "waitingSince": self.waiting_since, "known": self.known,
                "start": {"p10": self.p10, "p50": self.p50, "p90": self.p90},
                "inSeconds": {"p10": rel(self.p10), "p50": rel(self.p50), "p90": rel(self.p90)},
                "basis": list(self.basis)}


@dataclass(slots=True)
class Forecast:
    """The forecast of every waiting ask of a partition at ``as_of``."""

    partition: str
    as_of: float
    asks: dict[str, AskEta] = field(default_factory=dict)
    #: how many simulated runs it took (1 when every end is a declared runtime)
    runs: int = 0
    #: how many passes over a working copy the runs took: the runs whose instants agree share one
    passes: int = 0
    #: the earliest end the forecast counted on, or the first time a running allocation outlives a
    #: hold its end was estimated from: from it on the forecast is stale
    next_end: float = math.inf
    #: a run stopped at its horizon (:data:`MAX_STEPS`) with asks still waiting
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The REST shape: ``{partition, asOf, asks: [...]}`` in the partition's arrival order."""
        return {"partition": self.partition, "asOf": self.as_of,
                "asks": [e.to_dict(self.as_of) for e in self.asks.values()]}


_Starts = dict[str, float]
_Why = dict[str, tuple[str, ...]]


class _Track:
    """What one quantile's run knows: its ends (a heap of ``(time, key)``), their bases, its clock and
    the starts it saw."""

    __slots__ = ("at", "basis", "first_end", "heap", "q", "starts", "why", "why_now")

    def __init__(self, q: float, now: float) -> None:
        self.q = q
        self.at = now
        self.heap: list[tuple[float, str]] = []
        self.basis: dict[str, str] = {}
        self.starts: _Starts = {}
        self.why: _Why = {}
        self.first_end = math.inf
        #: the bases of the ends of the present instant (why what starts now starts)
        self.why_now: tuple[str, ...] = ()

    def pop_group(self) -> tuple[float, list[str]]:
        """The next instant's keys (popped), in key order."""
        heap = self.heap
        at = heap[0][0]
        keys: list[str] = []
        while heap and heap[0][0] == at:
            keys.append(heapq.heappop(heap)[1])
        return at, keys


class _Run:
    """The forward runs of the quantiles ``qs`` on one working copy (the module docstring's steps 1-4).

    The copy follows the first quantile's run (the leader). The others follow along — they take the
    copy's starts at their own clocks — while their runs would make the very same calls on the
    engines: each releases the same allocations at each of its instants, and nothing in the copy
    reads the clock to decide (:func:`_quiet`, :meth:`_timeless`). A run that would differ (another
    group of ends, a timeout that falls due) leaves at that step, before the copy takes it, and
    :func:`forecast` runs it on its own copy from the start; the others' answers are the ones their
    own runs give (tests/eta/test_forecast.py pins them to separate runs)."""

    def __init__(self, partition: Partition, holds: HoldTimes, now: float, qs: Sequence[float],
                 max_steps: int = MAX_STEPS, estimates: _Estimates | None = None) -> None:
        self.holds = holds
        self.estimates: _Estimates = {} if estimates is None else estimates
        #: the instants (ends, timers) the run may take at most; past it the rest is unknown
        self.steps_left = max_steps
        self.truncated = False
        self.clock = now
        #: the wake keys of a settled partition's waiting applications (empty: not settled)
        self.keys: dict[str, tuple[str, ...]] = {}
        self.copy = working_copy(partition, lambda: self.clock, keys=self.keys)
        self.state = self.copy.state
        #: window edges and budget resets (:mod:`quotaplane.eta.instants`): the next one and its bases
        self.instants = Instants(self.state, now)
        #: each waiting ask's preemption mark before :func:`_never_preempting` (None: no window sets
        #: a guaranteed, so the configuration that decides which ask may preempt never changes)
        self.marks = {ask.allocation_key: ask.preempt_after for ask in self.state.waiting.asks.unsorted()} \
            if self.instants.sets_guarantees else None
        _never_preempting(self.state)
        self.quiet = _quiet(self.state)
        #: no application timeout can change a decision of the copy (:func:`_timeouts_harmless`)
        self.harmless = self.quiet and _timeouts_harmless(self.state)
        self.tracks = [_Track(q, now) for q in qs]
        self.lead = self.tracks[0]
        self.edge, self.edge_why = self.instants.next(now) if self.instants else (math.inf, ())
        # a window due now that the service's timer (every 2 s) has not written yet: its edge is now
        due = self.instants.due(now)
        if due:
            self.edge, self.edge_why = now, due
        #: the first edge: from it on the forecast is stale, as from an end it counted on
        self.first_edge = self.edge
        #: the quantiles that left the copy (their runs would differ from the leader's)
        self.left: list[float] = []
        if len(self.tracks) > 1 and not (self.quiet and _reserves_by_no_delay(self.state, now)):
            self._leave(self.tracks[1:])         # before their ends are worked out: they run alone
        for track in self.tracks:
            track.heap = [entry for key, a in self.state.allocs.items()
                          if (entry := self._ends(track, key, a, now, None, track is self.lead))]
            heapq.heapify(track.heap)
            # an end at ``now`` (a declared runtime already overdue) is no event to wait for: the
            # forecast holds until its release is committed, not only until the clock moves
            track.first_end = min((t for t, _ in track.heap if t > now), default=math.inf)
        keys = sorted(k for _, k in self.lead.heap)
        self._leave([t for t in self.tracks[1:] if sorted(k for _, k in t.heap) != keys])
        self.starts = self.lead.starts
        self.why = self.lead.why
        # what the copy's own cycles allocate, heard from its commits: the cycles that follow a
        # release or a timer are the partition's incremental ones (they retry only the asks the change
        # may unblock), as in the service — a full cycle at every end would try every waiting ask
        self.made: list[str] = []
        #: commits the copy heard that changed something (a tick that commits none changed nothing)
        self.commits = 0
        self.copy.hooks.after_commit(self._heard)
        #: the last timer tick changed nothing, and nothing happened since: the next tick that can
        #: change anything is the next time-bound trigger (:meth:`_idle_until`), when ``silent``
        self.idle = False
        self.silent = _time_silent(self.state)
        #: when each waiting ask may first try preemption (PR-Y3) or its reservation comes into force
        #: by its delay, in time order (the copy adds no ask, and both are fixed when an ask enters);
        #: ``_passed`` of them are behind the clock
        self.triggers = sorted(_first_tries(self.state))
        self._passed = 0
        #: ends taken, and the edges met since the run last changed (:meth:`_onward`)
        self.ended = 0
        self.repeats = Repeats()

    def _heard(self, events: Sequence[Any], _seq: int) -> None:
        # a tick of a partition with a budget journals its Timeouts event every time: alone, it found
        # nothing due (what a timeout changes is told by the Noted events that follow it)
        if any(not isinstance(ev, E.Timeouts) for ev in events):
            self.commits += 1
        self.made.extend(ev.key for ev in events if isinstance(ev, E.Allocated))

    @property
    def first_end(self) -> float:
        """The earliest end the leader's run counted on."""
        return self.lead.first_end

    def _leave(self, tracks: Sequence[_Track]) -> None:
        for track in tracks:
            if track in self.tracks:
                self.tracks.remove(track)
                self.left.append(track.q)

    def _ends(self, track: _Track, key: str, a: Allocation, at: float,
              start: float | None, noted: bool = True) -> tuple[float, str] | None:
        """When ``a`` ends in ``track``'s run (None: never), its basis noted (``noted``: the leader's;
        the answer's bases are the leader's, the p50 run's)."""
        end, why = _end_of(a, self.state, self.holds, at, track.q, start, self.estimates, noted)
        if end is None:
            return None
        if noted:
            track.basis[key] = why
        return (max(end, at), key)

    def _started(self, bases: tuple[str, ...] | None) -> None:
        """The copy's allocations since the last step started at each run's clock; ``bases`` the why
        of every run (None: each run's ends of this step)."""
        allocs = self.state.allocs
        leader = self.lead
        at = leader.at
        why = bases if bases is not None else leader.why_now
        for key in self.made:
            a = allocs.get(key)
            if a is None:                # pragma: no cover - preempted in the same change
                continue
            leader.starts[key] = at
            leader.why[key] = why
            lead = self._ends(leader, key, a, at, at)
            if lead is not None:
                heapq.heappush(leader.heap, lead)
            for track in self.tracks[1:]:
                track.starts[key] = track.at
                entry = self._ends(track, key, a, track.at, track.at, False)
                if (entry is None) != (lead is None):
                    self._leave([track])         # it ends in one run and never in the other
                elif entry is not None:
                    heapq.heappush(track.heap, entry)
        self.made.clear()

    def run(self) -> None:
        """Run until no ask waits, nothing ends any more or the timers start nothing."""
        if ADOPT_KEYS and self.keys and self.quiet and _reserves_by_no_delay(self.state, self.clock):
            # the partition is settled and nothing in the copy decides by the clock: its first full
            # cycle would allocate nothing and index what the partition's own cycles indexed
            with self.copy.write() as tx:
                tx.core.scheduler.adopt(tx, self.keys)
        else:
            self.copy.schedule()         # the copy was rebuilt: its first cycle tries every ask
        self._started(("fits now",))
        self.copy.auto_schedule = True
        while len(self.state.waiting.asks) and self._step():
            self.steps_left -= 1
            if self.steps_left <= 0:
                self.truncated = bool(len(self.state.waiting.asks))
                break

    def _timeless(self) -> bool:
        """Nothing in the copy decides by the clock: the timers are quiet, and no application timeout
        waits (a Starting, Completing or Completed application, an unreplaced placeholder) or none
        can change a decision (:func:`_timeouts_harmless`) — when it falls due does not matter."""
        return self.quiet and (self.harmless or _no_timeouts(self.state))

    def _step(self) -> bool:
        timeless = self._timeless()
        if len(self.tracks) > 1 and not timeless:
            self._leave(self.tracks[1:])
        timer = self._idle_until() if self.idle and self.silent else \
            _next_timer(self.state, self.clock, timeless)
        lead = self.lead
        decay = self.instants.decay(self.copy) if self.instants.decaying else (math.inf, ())
        if decay[0] < self.edge:
            self.edge, self.edge_why = decay
        edge = self.edge
        top = lead.heap[0][0] if lead.heap else math.inf
        if len(self.tracks) > 1 and math.isfinite(edge):
            # a follower whose next end falls on the other side of the edge would meet the edge at
            # another point of its run: it leaves (the edge is at the same instant in every run)
            first = top <= edge
            self._leave([t for t in self.tracks[1:]
                         if ((t.heap[0][0] if t.heap else math.inf) <= edge) != first])
        # at one instant the ends come first, then the timer's tick (a window's edge, a reset): the
        # order the replay of a trace takes (sim/engine.py ``_until``: the allocations' timers, then
        # the partition's tick) — a window closing as the work it let in ends leaves that room to the
        # asks its max admitted, for the cycle of the release
        if lead.heap and top <= timer and top <= edge:
            self._catch_up(top)
            at, keys = lead.pop_group()
            if len(self.tracks) > 1:
                self._follow(keys)
            self._end(at, keys)
            self.idle = False
            self.ended += 1
            return True
        if math.isfinite(edge) and edge <= timer:
            self._catch_up(edge)
            self._edge(edge)
            self.idle = False
            return self._onward(edge, timer)
        if not math.isfinite(timer):
            return False
        # a preemption delay passes (PR-Y3) or a timeout falls due before the next end: the
        # partition's own timers act then, as the service's timer loop makes them (a follower has
        # left: a timer is never quiet)
        self.clock = lead.at = timer
        before, commits = len(self.starts), self.commits
        self.copy.check_timeouts(timer)
        self._started(("a preemption delay passed",))
        self.idle = self.commits == commits
        if self.silent:
            return True         # the next step finds the next instant, or none
        return bool(lead.heap) or len(self.starts) > before or math.isfinite(self.edge)

    def _catch_up(self, at: float) -> None:
        """Before an instant at ``at`` that follows skipped ticks, the last of them (on the timer's 15 s
        grid, before ``at``): each skipped tick retried the same asks and found nothing, but marked
        each one's next attempt 15 s on (PR-Y3) — an ask marked earlier would try preemption at the
        instant's own cycle. The last tick leaves exactly the marks they all would have."""
        if not (self.idle and self.silent):
            return
        grid = self.state.preempt_due
        if not grid < at:
            return
        while grid + PREEMPT_ATTEMPT_EVERY < at:        # added up as the ticks themselves add it
            grid += PREEMPT_ATTEMPT_EVERY
        self.clock = self.lead.at = grid
        self.copy.check_timeouts(grid)
        self._started(("a preemption delay passed",))

    def _idle_until(self) -> float:
        """After a tick that changed nothing, the first tick of the partition's timer (its 15 s grid,
        PR-Y3) at or after the next time-bound trigger: an ask's first preemption attempt, an
        application's timeout, a reservation coming into force. Between them every tick retries the
        same asks against the same state and finds what the last found — nothing (the copy's state
        changes only at its own instants: ends, edges, ticks that commit). inf: none."""
        clock, state = self.clock, self.state
        triggers, i = self.triggers, self._passed
        while i < len(triggers) and triggers[i] <= clock:
            i += 1
        self._passed = i
        trigger = min(triggers[i] if i < len(triggers) else math.inf, state.due.earliest())
        if not math.isfinite(trigger):
            return math.inf
        grid = state.preempt_due
        if not math.isfinite(grid) or grid <= clock:
            grid = clock + PREEMPT_ATTEMPT_EVERY
        while grid < trigger:                   # added up as the ticks themselves add it
            grid += PREEMPT_ATTEMPT_EVERY
        return grid

    def _edge(self, at: float) -> None:
        """A window's edge or a budget's reset at ``at``: the configuration the edge leaves applied (as
        the service's window timer writes it, followed by a cycle for every waiting ask), then the
        partition's timeouts — a budget's new period admits what it refused (docs/eta.md)."""
        self.clock = at
        for track in self.tracks:
            track.at = at
        config = self.instants.config_at(at)
        if config is not None:
            marks = self.marks
            if marks is not None:
                # a window's guaranteed may let an ask marked as never preempting preempt (PR-Y2):
                # each gets its own mark back for the edge's cycle, and is marked again under the
                # configuration the edge leaves — the timers then are the ones of that configuration
                for ask in self.state.waiting.asks.unsorted():
                    if ask.preempt_after == math.inf:
                        ask.preempt_after = marks.get(ask.allocation_key, ask.preempt_after)
            seq = self.copy.config_seq + 1
            self.copy.apply_config(config, seq, t=at)
            self.copy.record_config(seq)
            if marks is not None:
                _never_preempting(self.state)
                self._retime()
        self.copy.check_timeouts(at)
        self._started(self.edge_why)
        self.edge, self.edge_why = self.instants.next(at)

    def _onward(self, at: float, timer: float) -> bool:
        """After the edge at ``at``: False when the run can only repeat itself (:class:`Repeats`)."""
        to = self.repeats.onward(self.instants, at, (len(self.starts), len(self.state.allocs), self.ended),
                                 bool(self.lead.heap) or math.isfinite(timer))
        if to is not None:      # past the edges that would find nothing, to the next reset
            self.edge, self.edge_why = self.instants.next_reset(at)
        return to is None or math.isfinite(to)

    def _retime(self) -> None:
        """What decides by the clock, again under a new configuration (a window's guaranteed)."""
        state = self.state
        self.quiet = _quiet(state)
        self.harmless = self.quiet and _timeouts_harmless(state)
        self.silent = _time_silent(state)
        self.triggers = sorted(_first_tries(state))
        self._passed = 0

    def _follow(self, keys: list[str]) -> None:
        """Each follower takes its next instant: the same keys, or it leaves."""
        for track in self.tracks[1:]:
            if not track.heap:
                self._leave([track])
                continue
            at, mine = track.pop_group()
            if mine != keys:
                self._leave([track])
            else:
                track.at = at

    def _end(self, at: float, popped: list[str]) -> None:
        allocs = self.state.allocs
        keys = [k for k in popped if k in allocs]     # a preemption in the copy may have ended it already
        if not keys:
            return
        self.clock = at
        self.lead.why_now = _bases(self.lead.basis[k] for k in keys)
        self.lead.at = at
        self.copy.release_batch(keys)
        self.copy.check_timeouts(at)
        self._started(None)


def _bases(items: Any) -> tuple[str, ...]:
    seen = sorted(set(items))
    if len(seen) > _MAX_BASES:
        return (*seen[:_MAX_BASES], f"and {len(seen) - _MAX_BASES} more")
    return tuple(seen)


def forecast(partition: Partition, holds: HoldTimes, now: float, *, max_steps: int = MAX_STEPS,
             share: bool = True) -> Forecast:
    """The forecast start of every waiting ask of ``partition`` at ``now`` (see the module docstring),
    each run taking at most ``max_steps`` instants. ``share``: the quantiles' runs share one pass while
    they agree (:class:`_Run`); False runs each on its own copy (the answer is the same; the tests pin
    the shared pass to it)."""
    with partition.lock:
        state = partition.state
        waiting = [(ask.allocation_key, ask.application_id, ask.created) for ask in state.waiting.asks.all()]
        queues = {ask.application_id: app.queue_path for ask in state.waiting.asks.all()
                  if (app := state.apps.get(ask.application_id)) is not None}
        quantiles: Sequence[float] = QUANTILES if _needs_quantiles(state) else (0.5,)
        outlives = _outlives(state, holds, now) if waiting else math.inf
    out = Forecast(partition.name, now, next_end=outlives)
    if not waiting:
        return out
    runs = _runs(partition, holds, now, quantiles, max_steps, share, out)
    started = runs.get(0.5, next(iter(runs.values())))[1]
    never = never_fits(partition, [key for key, _, _ in waiting if key not in started])
    _answer(out, runs, waiting, queues, max_steps, never)
    return out


def _runs(partition: Partition, holds: HoldTimes, now: float, quantiles: Sequence[float], max_steps: int,
          share: bool, out: Forecast) -> dict[float, tuple[_Starts, _Why]]:
    """Each quantile's starts and their bases; ``out``'s passes, horizon and next end noted."""
    runs: dict[float, tuple[_Starts, _Why]] = {}
    # the median leads: the other quantiles follow it on its copy while their runs agree
    # (:class:`_Run`); one that leaves is run again on its own copy
    todo = [sorted(quantiles, key=lambda q: (q != 0.5, q))] if share else [[q] for q in quantiles]
    estimates: _Estimates = {}
    while todo:
        # a run builds a copy of the whole state and lives its future: every object it makes survives
        # until the run ends, so the collections its allocations trigger walk them all and free
        # nothing — 40 % of a run's CPU at 10,000 running and 10,000 waiting (docs/eta.md "Figures").
        # The collector is paused for the run alone (as a restore does) and the copy dropped after
        # (its cycles are collected by the next young collection, within the forecast: ~0.05 s then)
        with gcfreeze.paused():
            run = _Run(partition, holds, now, todo.pop(0), max_steps, estimates)
            run.run()
        out.passes += 1
        out.truncated = out.truncated or run.truncated
        for track in run.tracks:
            runs[track.q] = (track.starts, track.why)
            out.next_end = min(out.next_end, track.first_end, run.first_edge)
        todo.extend([q] for q in run.left)
        del run
    out.runs = len(quantiles)
    return runs


def _answer(out: Forecast, runs: dict[float, tuple[_Starts, _Why]], waiting: list[tuple[str, str, float]],
            queues: dict[str, str], max_steps: int, never: dict[str, str]) -> None:
    """Every waiting ask's interval and basis in ``out``, from the quantiles' ``runs`` and ``never``."""
    median = runs.get(0.5, next(iter(runs.values())))
    low, mid, high = (runs.get(q, median)[0] for q in QUANTILES)
    why = median[1]
    horizon = max_steps if out.truncated else None
    asks = out.asks
    for key, app_id, created in waiting:
        p10, p50, p90 = _interval(low.get(key), mid.get(key), high.get(key))
        found = never.get(key)
        bases = why.get(key) or ((found,) if found is not None else _unknown_basis(key, horizon))
        asks[key] = AskEta(key, app_id, queues.get(app_id, ""), created, p10, p50, p90, bases)


def _interval(p10: float | None, p50: float | None,
              p90: float | None) -> tuple[float | None, float | None, float | None]:
    """The p10, p50 and p90 starts from the three runs: each run is consistent, but an earlier-ending
    run may still start an ask later (a different order of ends), so the interval is ordered, not its
    runs; an ask some run never starts keeps each run's answer."""
    if p10 is None or p50 is None or p90 is None:
        return p10, p50, p90
    if p10 > p50:
        p10, p50 = p50, p10
    if p50 > p90:
        p50, p90 = p90, p50
    if p10 > p50:
        p10, p50 = p50, p10
    return p10, p50, p90


def _unknown_basis(key: str, horizon: int | None) -> tuple[str, ...]:
    if horizon is not None:
        return (f"unknown: {key} does not start within the forecast's horizon of {horizon:,} instants",)
    return (f"unknown: no end of running work that is known (declared or observed) lets {key} start",)
