"""The replay engine: a validated trace through a real partition, on simulated time.

The partition is the library's own :class:`~quotaplane.partition.Partition`, built from the queue
configuration, with no journal (a plan needs no durability, and encoding every event for a journal
costs more than the decision itself) and with a clock that reads the simulated time. Every decision
is therefore exactly the one the service would give for the same events.

Time: trace events run in file order; the automatic release of an allocation with a ``duration`` is
a timer on a heap ordered by ``(time, order of creation)``. Timers due at or before an event's time run
first, so capacity released at ``t`` is free for events at ``t``. After the last trace event the
remaining timers run, so waiting asks get their turn. Pending asks are allocated by the partition's
own scheduling cycles (run after every release, node addition and ask); the simulator hears of each
through :meth:`Partition.subscribe` and measures the wait from the ``ask`` event.

Samples: the state at sample time ``s`` is the state after every event with time ``<= s``.

Time windows and budgets (docs/windows.md, docs/budgets.md): with either configured, the partition's
timer ticks during the replay as the service's does — at every window edge (the window opens or closes
there, as a configuration change), at every budget reset, and every :data:`TICK_EVERY` simulated
seconds while work runs (a ``preempt`` budget's grace, best-effort work given back, a lowered max's
quota preemption). An ask a budget holds is therefore admitted at the reset itself. After the trace the
ticks go on while asks wait, for at most :data:`DRAIN_DAYS` days.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from quotaplane.config.identity import UserGroup
from quotaplane.config.windows import WindowSpec, parse_windows
from quotaplane.errors import InputError, QuotaplaneError, RejectedError
from quotaplane.resources import Resource
from quotaplane.scheduling import SORT_POLICY_PROPERTY
from quotaplane.sim.metrics import AppCells, Recorder
from quotaplane.sim.trace import OPS, TraceEvent
from quotaplane.windows import edges

__all__ = ["DEFAULT_SAMPLES", "PROGRESS_EVERY", "SimulationResult", "Simulator"]

#: Samples over the expected span of the trace when no interval is given.
DEFAULT_SAMPLES = 200
#: Trace events between two progress reports at most (and at least every 1 % of the trace).
PROGRESS_EVERY = 10_000
_MAX_LISTED = 100          # rejections listed one by one in the summary
#: placement's fallback queue (P-6: used when no rule gives a usable queue)
DEFAULT_QUEUE = "root.default"
#: with windows or budgets, the partition's timer ticks this often (simulated seconds) while work runs
TICK_EVERY = 60.0
#: after the trace, the ticks go on while asks wait, this many days at most (a budget's next reset)
DRAIN_DAYS = 32


class _App:
    __slots__ = ("app_id", "asks", "cells", "direct", "finishing", "live", "moved", "queue", "user")

    def __init__(self, app_id: str, user: str, queue: str, direct: bool, cells: AppCells,
                 moved: bool = False) -> None:
        self.app_id = app_id
        self.user = user
        self.queue = queue
        # an ask may be tried at once when no other ask waits, unless the leaf is ``stateaware``
        # (there a New application may wait for another one that is Starting)
        self.direct = direct
        #: placement put it somewhere else than the queue it asked for (counted apart: issue 36)
        self.moved = moved
        #: the measures its allocations count in: every queue level (seed 004 M-2) and the user
        self.cells = cells
        self.live: dict[str, None] = {}      # live allocation keys, in admission order
        self.asks: dict[str, None] = {}      # waiting asks
        #: a ``when_done`` finish waiting for the application's work to end
        self.finishing: TraceEvent | None = None


class _Ask:
    __slots__ = ("app", "ev", "items", "resource")

    def __init__(self, app: _App, ev: TraceEvent, resource: Resource) -> None:
        self.app = app
        self.ev = ev
        self.resource = resource
        self.items = tuple(resource.items())


def _qualified(queue: str | None) -> str | None:
    """The full lower-case path a requested queue name stands for (a bare name is under ``root``)."""
    if queue is None:
        return None
    q = queue.strip().lower()
    return q if q == "root" or q.startswith("root.") else f"root.{q}"


def _round(x: float) -> float:
    return round(x, 6)


def _inc(counter: dict[str, int], name: str, n: int = 1) -> None:
    counter[name] = counter.get(name, 0) + n


def _sorted(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: d[k] for k in sorted(d)}


class SimulationResult:
    """What a run produced: the ``summary`` (summary.json), the timeline ``columns`` and ``rows``
    (timeline.csv), the ``samples`` behind them (for the plots) and the ``decisions`` when the run
    kept them (``Simulator(record_decisions=True)``: what happened to every allocation key)."""

    __slots__ = ("columns", "decisions", "resources", "rows", "samples", "summary", "top_queues")

    def __init__(self, summary: dict[str, Any], samples: list[dict[str, Any]], resources: list[str],
                 top_queues: list[str], decisions: list[tuple[float, str, str, str]] | None = None) -> None:
        self.summary = summary
        self.samples = samples
        self.resources = resources
        self.top_queues = top_queues
        self.decisions = decisions
        cols = ["t"]
        cols += [f"capacity:{r}" for r in resources]
        cols += [f"used:{r}" for r in resources]
        cols += [f"waiting:{r}" for r in resources]
        cols += [f"{q}:{r}" for q in top_queues for r in resources]
        cols += ["allocations", "pending_asks"]
        self.columns: list[str] = cols
        self.rows: list[list[Any]] = [_timeline_row(s, resources, top_queues) for s in samples]


def _timeline_row(s: Mapping[str, Any], resources: list[str], top_queues: list[str]) -> list[Any]:
    """One sample as a timeline.csv row, in the order of :attr:`SimulationResult.columns`."""
    row: list[Any] = [s["t"]]
    row += [s["capacity"].get(r, 0) for r in resources]
    row += [s["used"].get(r, 0) for r in resources]
    row += [s["demand"].get(r, 0) for r in resources]
    for q in top_queues:
        usage = s["queues"].get(q, {})
        row += [usage.get(r, 0) for r in resources]
    row += [s["allocations"], s["pending_asks"]]
    return row


class Simulator:
    """Replays trace events through one partition of a queue configuration.

    ``config_text`` is YuniKorn queue YAML (raises :class:`~quotaplane.errors.ConfigError`);
    ``partition`` names the partition the trace drives; ``sample_interval`` is the timeline step in
    simulated seconds (default: the expected span of the trace over :data:`DEFAULT_SAMPLES`).
    ``cycle_interval``: 0 (default) runs a scheduling cycle for the pending asks after every change,
    as the library does on its own; a positive value runs cycles only every that many simulated
    seconds (a periodic scheduler: an ask waits for the next cycle even when it fits).
    ``window``: ``(start, end)`` of the measures (default: from the first event to the last timer);
    ``record_decisions`` keeps every decision (``SimulationResult.decisions``) for comparisons.
    """

    def __init__(self, config_text: str, *, partition: str = "default",
                 sample_interval: float | None = None, cycle_interval: float = 0.0,
                 window: tuple[float, float] | None = None, record_decisions: bool = False) -> None:
        from quotaplane.config import load_config
        from quotaplane.partition import Partition

        config = load_config(config_text)
        names = [pc.name for pc in config.partitions]
        if partition.lower() not in names:
            raise InputError(f"partition {partition!r} is not in the configuration (partitions: "
                             f"{', '.join(names)})")
        if sample_interval is not None and not (math.isfinite(sample_interval) and sample_interval > 0):
            raise InputError(f"sample interval must be a positive number of seconds, got {sample_interval!r}")
        self.now = 0.0
        pc = config.partition(partition.lower())
        self.partition = Partition(pc, journal=None, clock=self._clock)
        #: the configuration text as the windows changed it, the windows, and their edges so far
        self._config_text = config_text
        self._windows = parse_windows(pc.extensions.get("windows"))
        self._window_changes: list[dict[str, Any]] = []
        #: the partition's timer ticks (windows, budgets) at ``_next_tick``; none without them
        self._ticking = _timed(pc, self._windows)
        self._next_tick = self._tick_limit = math.inf
        self.partition.subscribe(self._on_notice)
        self.sample_interval = sample_interval
        if not (math.isfinite(cycle_interval) and cycle_interval >= 0):
            raise InputError(f"cycle interval must be a non-negative number of seconds, "
                             f"got {cycle_interval!r}")
        self.cycle_interval = cycle_interval
        if cycle_interval > 0:
            # periodic scheduling cycles (like YuniKorn's scheduling loop) instead of a cycle after
            # every change: asks wait for the next cycle even when they fit
            self.partition.auto_schedule = False
        self.window = window
        self._cycle_no = 0
        self._next_cycle = math.inf
        self._cycles = 0
        self._ran = False
        self._apps: dict[str, _App] = {}
        self._rejected: dict[str, str] = {}
        self._live: dict[str, _App] = {}
        self._pending: dict[str, _Ask] = {}
        self._timers: list[tuple[float, int, str]] = []
        self._timed: set[str] = set()          # live keys whose end is on the timer heap
        self._recheck: list[_App] = []          # applications whose work the partition ended
        self._timer_seq = 0
        self.recorder: Recorder = Recorder([], _no_limits, 0.0)
        self._decisions: list[tuple[float, str, str, str]] | None = [] if record_decisions else None
        self._samples: list[dict[str, Any]] = []
        self._resources: set[str] = set()
        # counters
        self._by_op: dict[str, int] = dict.fromkeys(OPS, 0)
        self._skipped: dict[str, int] = {}
        self._admitted = 0
        self._refused = 0
        self._refused_code: dict[str, int] = {}
        self._refused_queue: dict[str, int] = {}
        self._refused_user: dict[str, int] = {}
        self._released = 0
        self._auto_released = 0
        self._release_noop = 0
        self._preempted = 0
        self._asks_allocated = 0
        self._asks_withdrawn = 0
        self._rejections: list[dict[str, Any]] = []
        self._accepted = 0
        self._moved: list[dict[str, Any]] = []
        self._moved_count = 0
        self._moved_to_default = 0
        self._moved_admitted = 0
        self._moved_refused = 0
        self._finished = 0
        self._deferred_finishes = 0
        self._timer_events = 0
        self._t0 = 0.0
        self._interval = 1.0
        self._sample_no = 0
        self._next_sample = 0.0

    def _clock(self) -> float:
        return self.now

    def _limits(self, path: str) -> tuple[dict[str, int] | None, dict[str, int] | None]:
        """A queue's guaranteed and max (the root's max is the cluster: measured as capacity)."""
        q = self.partition.queues.queue(path)
        if q is None:
            return None, None
        g = dict(q.guaranteed.items()) if q.guaranteed is not None else None
        m = dict(q.max.items()) if q.max is not None and not q.is_root else None
        return g, m

    def _decide(self, what: str, key: str, detail: str = "") -> None:
        if self._decisions is not None:
            self._decisions.append((self.now, what, key, detail))

    # ------------------------------------------------------------------------------------------------
    # the ledger: every admission and release goes to the recorder (the measures)

    def _admit(self, app: _App, key: str, resource: Resource, ask: bool) -> None:
        self._live[key] = app
        app.live[key] = None
        if ask:
            self.recorder.ask_allocated(self.now, key)
        else:
            self.recorder.admit(self.now, key, app.cells, tuple(resource.items()))
        self._decide("allocated", key)

    def _start_timer(self, key: str, ev: TraceEvent) -> None:
        duration = ev.duration
        if duration is None:
            return
        at = ev.end if ev.end is not None and self.now == ev.started else self.now + duration
        self._timer_seq += 1
        self._timed.add(key)
        heapq.heappush(self._timers, (at, self._timer_seq, key))

    def _unadmit(self, key: str, how: str = "released", detail: str = "") -> _App:
        app = self._live.pop(key)
        del app.live[key]
        self._timed.discard(key)
        if how == "preempted":
            self.recorder.preempt(self.now, [key], detail)
        else:
            self.recorder.release(self.now, key)
        self._decide(how, key, detail)
        return app

    def _on_notice(self, event: dict[str, Any]) -> None:
        """What the partition did on its own (runs under the partition lock): a cycle allocated a
        waiting ask, or a policy preempted allocations (for an allocation or in a cycle)."""
        kind = event["type"]
        if kind == "allocated":
            key = event["allocationKey"]
            ask = self._pending.pop(key, None)
            if ask is None:           # a direct allocation: admitted by its caller
                return
            del ask.app.asks[key]
            self._asks_allocated += 1
            self._admit(ask.app, key, ask.resource, True)
            self._start_timer(key, ask.ev)
        elif kind == "preempted":
            reason = str(event.get("reason", {}).get("code", "preempted"))
            for a in event["allocations"]:
                key = a["allocationKey"]
                if key in self._live:
                    self._preempted += 1
                    self._recheck.append(self._unadmit(key, "preempted", reason))
        elif kind == "released":
            key = event["allocationKey"]
            if key in self._live:        # released by the library on its own (ours are gone first)
                self._recheck.append(self._unadmit(key))

    def _rechecks(self) -> None:
        """Finishes that waited for work the partition ended on its own (outside its lock)."""
        while self._recheck:
            app = self._recheck.pop()
            if app.app_id in self._apps:
                self._after_end(app)

    def _after_end(self, app: _App) -> None:
        """An allocation or ask of ``app`` ended: a finish waiting for its work may run now."""
        if app.finishing is not None and not self._busy(app):
            self._finish_now(app)

    def _busy(self, app: _App) -> bool:
        """Work of ``app`` still to end: allocations with a known end, asks that ran when recorded."""
        return (any(k in self._timed for k in app.live)
                or any(self._pending[k].ev.duration is not None for k in app.asks))

    # ------------------------------------------------------------------------------------------------
    # time and samples

    def _until(self, t: float) -> None:
        """Run what falls due before the trace events at ``t``, in time order, and set the clock to ``t``.

        Timers at or before ``t``; periodic cycles and samples strictly before ``t`` (they belong after
        the events of their instant). At one instant: timers, trace events, the cycle, the sample.
        """
        p = self.partition
        while True:
            nt = self._next_due()
            nc = self._next_cycle
            ns = self._next_sample
            if nt <= t and nt <= nc and nt <= ns:
                self._fire_due(nt)
            elif nc < t and nc <= ns:
                if p.schedule_needed:
                    self._cycle(nc)
                else:
                    # nothing to schedule before the next change (a timer or an event)
                    self._skip_cycles_to(min(nt, t))
            elif ns < t:
                self.now = ns
                self._sample(ns)
                self._sample_no += 1
                self._next_sample = self._t0 + self._sample_no * self._interval
            else:
                break
        self.now = t

    def _next_due(self, *, draining: bool = False) -> float:
        """When the next timer or tick falls due (after the trace, ``draining``: a tick only while
        work runs or asks wait)."""
        timers = self._timers
        nt = timers[0][0] if timers else math.inf
        if draining and not (timers or self._pending or self._live):
            return nt
        return min(nt, self._next_tick)

    def _fire_due(self, at: float) -> None:
        """The timer due at ``at``, else the partition's tick (a timer first at one instant)."""
        timers = self._timers
        if timers and timers[0][0] <= at:
            self._fire_timer(at)
        else:
            self._tick(at)

    def _fire_timer(self, at: float) -> None:
        """The next timer (due at ``at``): its allocation ends (released, unless already gone)."""
        self.now = at
        _, _, key = heapq.heappop(self._timers)
        self._timer_events += 1
        if key in self._live:
            app = self._unadmit(key)      # first: the release runs a cycle that may admit asks
            self.partition.release(key)
            self._auto_released += 1
            self._after_end(app)
            if self._recheck:
                self._rechecks()

    def _tick(self, at: float) -> None:
        """The partition's timer at ``at``: the windows due open or close (a configuration change),
        then its timeouts (budget resets and their retries, a ``preempt`` budget's grace, …)."""
        self.now = at
        p = self.partition
        found = edges(self._config_text, at) if self._windows else None
        if found is not None:
            from quotaplane.config import load_config

            text, changed = found
            p.apply_config(load_config(text).partition(p.name), p.config_seq + 1, t=at)
            self._config_text = text
            self._window_changes.extend({"t": _round(at), "change": line} for line in changed)
        p.check_timeouts(at)
        if self._recheck:
            self._rechecks()
        self._next_tick = self._plan_tick(at)

    def _plan_tick(self, now: float) -> float:
        """When the timer ticks next after ``now``: the next window edge, the next budget reset, and
        every :data:`TICK_EVERY` seconds while work runs (or asks wait on a decaying budget)."""
        if not self._ticking:
            return math.inf
        out = min((e for w in self._windows if (e := _next_edge(w, now)) is not None), default=math.inf)
        reset, decayed = _next_reset(self.partition, now)
        out = min(out, reset)
        if self._live or (decayed and self._pending):
            out = min(out, now + TICK_EVERY)
        return out if out <= self._tick_limit else math.inf

    def _skip_cycles_to(self, x: float) -> None:
        ci = self.cycle_interval
        self._cycle_no = max(self._cycle_no + 1, math.ceil((x - self._t0) / ci))
        self._next_cycle = self._t0 + self._cycle_no * ci

    def _cycle(self, c: float) -> None:
        """The periodic scheduling cycle at grid time ``c`` (``cycle_interval`` > 0)."""
        self.now = c
        self.partition.schedule()
        self._cycles += 1
        self._cycle_no += 1
        self._next_cycle = self._t0 + self._cycle_no * self.cycle_interval

    def _sample(self, t: float) -> None:
        self._samples.append(self.recorder.sample(t))

    # ------------------------------------------------------------------------------------------------
    # the run

    def run(self, events: Sequence[TraceEvent],
            progress: Callable[[int, int], None] | None = None) -> SimulationResult:
        """Replay ``events`` (validated, in time order: :func:`~quotaplane.sim.trace.parse_events`).

        A simulator runs once (its partition holds the end state, for inspection). ``progress`` is
        called as ``progress(done, total)`` every 1 % of the trace (at most every
        :data:`PROGRESS_EVERY` events) and once with ``done == total`` at the end.
        """
        if self._ran:
            raise RuntimeError("a Simulator runs once; make a new one for another run")
        self._ran = True
        t0 = self._start(events)
        total = len(events)
        tick = max(1, min(PROGRESS_EVERY, total // 100)) if progress is not None else total + 1
        by_op = self._by_op
        handlers = self._HANDLERS
        for i, ev in enumerate(events, start=1):
            if i % tick == 0 and progress is not None:
                progress(i, total)
            self._advance(ev.t)
            by_op[ev.op] += 1
            handlers[ev.op](self, ev)
            self._after_event(ev.t)
        end = self._drain(t0)
        if progress is not None and (total == 0 or total % tick):
            progress(total, total)
        return self._result(events, t0, end)

    def _after_event(self, t: float) -> None:
        """Finishes the event allowed; with a timer, its next tick (work started or waits: it may be
        sooner)."""
        if self._recheck:
            self._rechecks()
        if self._ticking:
            self._next_tick = min(self._next_tick, self._plan_tick(t))

    def _start_ticks(self, events: Sequence[TraceEvent], t0: float) -> None:
        """The timer's first tick, and how long after the trace it may go on (with windows or budgets)."""
        if not self._ticking:
            return
        last = max((ev.t + (ev.duration or 0.0) for ev in events), default=t0)
        self._tick_limit = last + DRAIN_DAYS * 86_400.0
        self._next_tick = self._plan_tick(t0 - 0.001)

    def _start(self, events: Sequence[TraceEvent]) -> float:
        """Set the clock, the sampling interval, the measures and the resource names; return the start."""
        t0 = events[0].t if events else 0.0
        if self.window is not None:
            t0 = min(t0, self.window[0])
        span = max((ev.t + (ev.duration or 0.0) for ev in events), default=t0) - t0
        self._t0 = t0
        self._interval = self.sample_interval or (span / DEFAULT_SAMPLES if span > 0 else 1.0)
        self._sample_no = 0
        self._next_sample = t0
        self._cycle_no = 0
        self._next_cycle = t0 if self.cycle_interval > 0 else math.inf
        self.now = t0
        self._start_ticks(events, t0)
        paths = [q.path for q in _walk(self.partition.queues.root)]
        start, end = self.window if self.window is not None else (t0, None)
        self.recorder = Recorder(paths, self._limits, start, end)
        for ev in events:
            for res in (ev.resource, ev.capacity):
                if res is not None:
                    self._resources.update(res)
        return t0

    def _advance(self, t: float) -> None:
        """Move the clock to ``t``, running the timers, samples and cycles due before it."""
        due = self._next_due()
        if t != self.now:
            if due <= t or self._next_sample < t or self._next_cycle < t:
                self._until(t)
            else:
                self.now = t        # nothing falls due before t (the common case)
        elif due <= t:
            self._until(t)

    def _drain(self, t0: float) -> float:
        """After the trace: the remaining timers, the cycles the waiting asks still need, and the last
        samples; return the end time."""
        p = self.partition
        while True:
            # the timer goes on while work runs or asks wait (a window or a reset may admit them)
            nt = self._next_due(draining=True)
            nc = self._next_cycle if p.schedule_needed else math.inf
            if nt == math.inf and nc == math.inf:
                break
            if nt <= nc:
                self._until(nt)
            else:
                self._until(nc)
                self._cycle(nc)
        end = self.now
        self.recorder.close(end)
        while self._next_sample <= end:
            self._sample(self._next_sample)
            self._sample_no += 1
            self._next_sample = t0 + self._sample_no * self._interval
        if not self._samples or self._samples[-1]["t"] < _round(end):
            self._sample(end)
        return end

    def _request_of(self, ev: TraceEvent) -> tuple[_App, str, Resource] | None:
        """The application, key and resource of an allocate or ask event (None: skipped, counted)."""
        app = self._apps.get(ev.app)  # type: ignore[arg-type]
        if app is None:
            _inc(self._skipped, ev.op)
            return None
        assert ev.key is not None and ev.resource is not None
        return app, ev.key, ev.resource

    def _on_allocate(self, ev: TraceEvent) -> None:
        found = self._request_of(ev)
        if found is None:
            return
        app, key, res = found
        d = self.partition.allocate(app.app_id, key, res, priority=ev.priority, preemptible=ev.preemptible)
        if d.allocated:
            self._admitted += 1
            self._moved_admitted += app.moved
            self._admit(app, key, res, False)
            self._start_timer(key, ev)
            return
        self._refused += 1
        self._moved_refused += app.moved
        codes = sorted({v.code for v in d.reasons})
        for code in codes:
            _inc(self._refused_code, code)
        _inc(self._refused_queue, app.queue)
        _inc(self._refused_user, app.user)
        self.recorder.refuse(self.now, app.cells, [(v.code, v.path) for v in d.reasons])
        self._decide("refused", key, ",".join(codes))

    def _on_ask(self, ev: TraceEvent) -> None:
        found = self._request_of(ev)
        if found is None:
            return
        app, key, res = found
        p = self.partition
        ask = _Ask(app, ev, res)
        # registered first: the partition's cycle (inside add_ask or allocate) may allocate it at once
        self._pending[key] = ask
        app.asks[key] = None
        self.recorder.ask(self.now, key, app.cells, ask.items, ev.asked)
        self._decide("asked", key)
        if len(self._pending) == 1 and app.direct and self.cycle_interval == 0:
            # No other ask waits: the cycle add_ask runs would try this ask alone, through the same
            # admission path as allocate — so allocate directly (a cycle walks every application of
            # the tree; this is the simulator's hot path).
            d = p.allocate(app.app_id, key, res, priority=ev.priority, preemptible=ev.preemptible)
            if d.allocated:
                # the partition's notice admitted it as an ask (waited 0 s)
                assert key not in self._pending
                return
        p.add_ask(app.app_id, key, res, priority=ev.priority, preemptible=ev.preemptible)

    def _withdraw(self, key: str) -> _App:
        ask = self._pending.pop(key)
        del ask.app.asks[key]
        self.recorder.withdraw(self.now, key)
        self._asks_withdrawn += 1
        self._decide("withdrawn", key)
        return ask.app

    def _on_release(self, ev: TraceEvent) -> None:
        key = ev.key
        assert key is not None
        if key in self._live:
            app = self._unadmit(key)
            self.partition.release(key)
            self._released += 1
            self._after_end(app)
        elif key in self._pending:
            self.partition.remove_ask(key)
            self._after_end(self._withdraw(key))
        else:
            self._release_noop += 1      # refused, already auto-released, or skipped

    def _on_node(self, ev: TraceEvent) -> None:
        assert ev.node is not None and ev.capacity is not None
        self.partition.add_node(ev.node, ev.capacity)
        self.recorder.capacity(self.now, dict(self.partition.total_capacity().items()))

    def _on_remove_node(self, ev: TraceEvent) -> None:
        assert ev.node is not None
        self.partition.remove_node(ev.node)
        self.recorder.capacity(self.now, dict(self.partition.total_capacity().items()))

    def _submit(self, ev: TraceEvent) -> None:
        assert ev.app is not None and ev.user is not None
        try:
            path = self.partition.add_application(ev.app, UserGroup(ev.user, ev.groups), queue=ev.queue,
                                                  tags=ev.tags)
        except (RejectedError, ValueError, QuotaplaneError) as exc:
            self._rejected[ev.app] = str(exc)
            if len(self._rejections) < _MAX_LISTED:
                self._rejections.append({"line": ev.line, "app": ev.app, "user": ev.user,
                                         "queue": ev.queue or "", "reason": str(exc)})
            self._decide("rejected", ev.app)
            return
        requested = _qualified(ev.queue)
        moved = requested is not None and path != requested
        if moved:
            # placement put it elsewhere (a rule, or the root.default fallback of P-6): not an
            # acceptance of what was asked, and its refusals are told apart (issue 36)
            self._moved_count += 1
            self._moved_to_default += path == DEFAULT_QUEUE
            if len(self._moved) < _MAX_LISTED:
                self._moved.append({"line": ev.line, "app": ev.app, "user": ev.user,
                                    "requested": ev.queue, "placed": path})
        else:
            self._accepted += 1
        leaf = self.partition.queues.queue(path)
        policy = leaf.properties.get(SORT_POLICY_PROPERTY, "fifo").lower() if leaf is not None else ""
        self._apps[ev.app] = _App(ev.app, ev.user, path, policy != "stateaware",
                                  self.recorder.app(path, ev.user), moved)
        self._decide("placed", ev.app, path)

    def _finish(self, ev: TraceEvent) -> None:
        app = self._apps.get(ev.app)  # type: ignore[arg-type]
        if app is None:
            _inc(self._skipped, "finish")
            return
        if ev.when_done:
            # what never ran when recorded is withdrawn now, as the recorded finish withdrew it
            for key in [k for k in app.asks if self._pending[k].ev.duration is None]:
                self.partition.remove_ask(key)
                self._withdraw(key)
            if self._busy(app):
                app.finishing = ev
                self._deferred_finishes += 1
                return
        self._finish_now(app)

    def _finish_now(self, app: _App) -> None:
        del self._apps[app.app_id]
        app.finishing = None
        for key in list(app.asks):    # before the removal: its cycle must not admit them
            self._withdraw(key)
        for key in list(app.live):    # before the removal: its cycle may admit other asks
            self._unadmit(key)
            self._released += 1
        self.partition.remove_application(app.app_id)
        self._finished += 1

    #: the handler of each trace operation
    _HANDLERS: ClassVar[dict[str, Callable[[Simulator, TraceEvent], None]]] = {
        "allocate": _on_allocate, "ask": _on_ask, "release": _on_release, "submit": _submit,
        "finish": _finish, "node": _on_node, "remove_node": _on_remove_node,
    }

    # ------------------------------------------------------------------------------------------------
    # the summary

    def _result(self, events: Sequence[TraceEvent], t0: float, end: float) -> SimulationResult:
        resources = sorted(self._resources)
        top: set[str] = set()
        for s in self._samples:
            top.update(s["queues"])
        top_queues = sorted(top)
        metrics = self.recorder.summary()
        pending_codes: dict[str, int] = {}
        for key in self._pending:
            for code in sorted({v.code for v in self.partition.pending_reasons(key) or []}):
                _inc(pending_codes, code)
        series = [{"t": s["t"],
                   "utilisation": {r: _round(s["used"].get(r, 0) / s["capacity"][r])
                                   for r in resources if s["capacity"].get(r, 0) > 0}}
                  for s in self._samples]
        asks_total = self._by_op["ask"] - self._skipped.get("ask", 0)
        queues, users = metrics["queues"], metrics["users"]
        summary: dict[str, Any] = {
            "units": "internal: vcore in milli-cores, memory in bytes, other resources as given",
            "partition": self.partition.name,
            "time": {"start": _round(t0), "end": _round(end), "simulated_seconds": _round(end - t0),
                     "sample_interval": _round(self._interval), "samples": len(self._samples)},
            "events": {"trace": len(events), "by_op": dict(self._by_op), "timers": self._timer_events,
                       "periodic_cycles": self._cycles,
                       "skipped": _sorted(self._skipped)},
            "applications": {"submitted": self._by_op["submit"], "accepted": self._accepted,
                             "rejected": len(self._rejected), "finished": self._finished,
                             "rejections": self._rejections,
                             "moved_by_placement": {"count": self._moved_count,
                                                    "to_default": self._moved_to_default,
                                                    "moves": self._moved}},
            "allocations": {
                "requested": self._by_op["allocate"] - self._skipped.get("allocate", 0),
                "admitted": self._admitted,
                "refused": self._refused,
                "refused_by_code": _sorted(self._refused_code),
                "refused_by_queue": _sorted(self._refused_queue),
                "refused_by_user": _sorted(self._refused_user),
                "released": self._released, "auto_released": self._auto_released,
                "preempted": self._preempted, "release_noop": self._release_noop,
                "live_at_end": len(self._live),
                "of_moved_applications": {"admitted": self._moved_admitted, "refused": self._moved_refused},
            },
            "asks": {"submitted": asks_total, "allocated": self._asks_allocated,
                     "withdrawn": self._asks_withdrawn, "pending_at_end": len(self._pending),
                     "pending_by_code": _sorted(pending_codes), "wait_seconds": metrics["wait"]},
            "peak_usage": {
                "queues": {q: queues[q]["usage_peak"] for q in queues if queues[q]["usage_peak"]},
                "users": {u: users[u]["usage_peak"] for u in users if users[u]["usage_peak"]},
            },
            "capacity": {"peak": self._peak_capacity(resources),
                         "final": dict(sorted(self.partition.total_capacity().items()))},
            "utilisation": {"resources": metrics["utilisation"], "series": series},
            "metrics": metrics,
        }
        summary.update(self._timed_summary())
        return SimulationResult(summary, self._samples, resources, top_queues, self._decisions)

    def _timed_summary(self) -> dict[str, Any]:
        """With time windows: every edge the replay applied (``windows``)."""
        return {"windows": self._window_changes} if self._windows else {}

    def _peak_capacity(self, resources: list[str]) -> dict[str, int]:
        return {r: max((s["capacity"].get(r, 0) for s in self._samples), default=0) for r in resources}


def _next_edge(w: WindowSpec, now: float) -> float | None:
    """The first edge (opening or closing, seconds) of window ``w`` after ``now`` (None: none left)."""
    ms = now * 1000
    if w.cron is None:
        found = [e for e in (w.start_ms, w.end_ms) if e > ms]
        return min(found) / 1000 if found else None
    lo = datetime.fromtimestamp(now, UTC)
    for start, end in w.spans(lo, lo + timedelta(days=32)):
        if start > ms:
            return start / 1000
        if end > ms:
            return end / 1000
    return None


def _timed(pc: Any, windows: Sequence[WindowSpec]) -> bool:
    """The partition's timer ticks during a replay: the configuration has windows or budgets."""
    return bool(windows) or "budgets" in pc.extensions


def _next_reset(partition: Any, now: float) -> tuple[float, bool]:
    """The next end of a budget period after ``now`` (seconds; inf: none), and whether a budget
    decays instead (then it has no reset to wait for)."""
    out, decayed = math.inf, False
    for key, policy in partition.extensions():
        ledger = getattr(policy, "ledger", None) if key == "budgets" else None
        for scope in ledger.scopes.values() if ledger is not None else ():
            decayed = decayed or scope.spec.decayed
            end = scope.period(round(now * 1000))[1] / 1000
            if end > now:
                out = min(out, end)
    return out, decayed


def _walk(q: Any) -> Iterator[Any]:
    """A queue and every queue under it, parents first."""
    yield q
    for child in q.sorted_children():
        yield from _walk(child)


def _no_limits(path: str) -> tuple[dict[str, int] | None, dict[str, int] | None]:
    return None, None
