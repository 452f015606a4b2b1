"""The forecast's third kind of instant: a time window's edge or a budget period's reset (issue 35,
docs/eta.md "Windows and budgets").

Besides the ends of running work and the partition's own timers, the configuration itself changes in
time: a window opens (its overrides are written into the configuration) or closes (the values it saved
are put back), and a budget's period ends (its consumption starts again from zero). The service's
timer applies both as they fall due (:func:`quotaplane.windows.tick`, the budget policy's timeouts), so
the forecast's copy must meet them at the same instants or it tells a start that the partition will not
give — or none when the window's opening would give one.

:class:`Instants` tells the run when the next such instant comes, what it is (the bases an ask started
by it is told) and the configuration in force then: the partition's configuration with every window
whose state then differs from its state now toggled (:func:`~quotaplane.eta.later.windowed`; windows on
one setting of one scope never overlap, validation refuses that, so the order of toggling does not
matter). A decaying budget (``halflife``) has no reset: its consumption falls continuously, and the
instant is the first time it stops refusing a waiting ask (:meth:`Instants.decay`, asked at every step:
what runs sets the level its consumption decays toward).
Edges are looked for within :data:`~quotaplane.eta.later.HORIZON_DAYS` of the forecast's ``now``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from quotaplane.config.model import PartitionConfig
from quotaplane.config.windows import WindowSpec
from quotaplane.eta.later import HORIZON_DAYS, _budget_times, _parsed, windowed
from quotaplane.partition.facade import Partition
from quotaplane.policies.budgets import BudgetPolicy
from quotaplane.state.handlers import PartitionState

__all__ = ["Instants", "Repeats"]


def _boundary(w: WindowSpec, ms: int, limit: int) -> int | None:
    """The first opening or closing of ``w`` after ``ms`` and no later than ``limit`` (None: none)."""
    lo = datetime.fromtimestamp(ms / 1000, UTC)
    hi = datetime.fromtimestamp(limit / 1000, UTC) + timedelta(days=1)
    for start, end in w.spans(lo - timedelta(days=1), hi):
        for edge in (start, end):
            if ms < edge <= limit:
                return edge
    return None


class Instants:
    """The window edges and budget resets of one forecast run (see the module docstring)."""

    __slots__ = ("_applied", "base", "budget", "decaying", "limit", "windows")

    def __init__(self, state: PartitionState, now: float) -> None:
        raw = state.config.extensions.get("windows")
        self.windows: tuple[WindowSpec, ...] = _parsed(raw) if raw else ()
        self.budget = next((pol for _, pol in state.policies.extensions if isinstance(pol, BudgetPolicy)),
                           None)
        #: the paths of the budgets that decay (``halflife``) instead of resetting
        self.decaying = {spec.path for spec in self.budget.ledger.specs if spec.decayed} \
            if self.budget is not None else set()
        self.base: PartitionConfig = state.config
        self._applied: PartitionConfig = state.config
        #: the last instant looked for (ms): the horizon from the forecast's ``now``
        self.limit = round((now + HORIZON_DAYS * 86_400) * 1000)

    def __bool__(self) -> bool:
        return bool(self.windows) or self.budget is not None

    @property
    def sets_guarantees(self) -> bool:
        """Some window sets a ``guaranteed``: at its edges which waiting ask may preempt changes."""
        return any("guaranteed" in w.overrides for w in self.windows)

    def phase(self, t: float) -> tuple[tuple[bool, ...], bool]:
        """At instant ``t``: which windows are toggled from the configuration copied, and whether a
        budget's period ends then (its consumption starts again from zero)."""
        ms = round(t * 1000)
        windows = tuple(w.active_at(ms) != w.active for w in self.windows)
        scopes = self.budget.ledger.scopes.values() if self.budget is not None else ()
        return windows, any(not s.spec.decayed and s.period(ms - 1)[1] == ms for s in scopes)

    @property
    def resets(self) -> bool:
        """Some budget resets (a calendar or duration period, not a half-life)."""
        return self.budget is not None and any(not spec.decayed for spec in self.budget.ledger.specs)

    def ahead(self, after: float, until: float = math.inf) -> list[tuple[int, tuple[bool, ...]]]:
        """Each window edge after ``after`` and no later than ``until`` (seconds) within the horizon:
        its time (ms) and the windows toggled then (:meth:`phase`)."""
        out: list[tuple[int, tuple[bool, ...]]] = []
        ms = round(after * 1000)
        limit = min(self.limit, round(until * 1000)) if math.isfinite(until) else self.limit
        while True:
            edges = [e for w in self.windows if (e := _boundary(w, ms, limit)) is not None]
            if not edges:
                return out
            ms = min(edges)
            out.append((ms, tuple(w.active_at(ms) != w.active for w in self.windows)))

    def period(self, at: float) -> tuple[object, ...]:
        """What the budget period beginning at ``at`` (a reset) brings until the next reset: the
        windows toggled then, every resetting scope's time into its own period, and each window edge's
        offset and windows — equal for two resets, the periods they begin find the same."""
        ms = round(at * 1000)
        scopes = sorted(self.budget.ledger.scopes.items()) if self.budget is not None else []
        into = tuple(ms - s.period(ms)[0] for _, s in scopes if not s.spec.decayed)
        upto = self.next_reset(at)[0]
        return (self.phase(at)[0], into, *((e - ms, w) for e, w in self.ahead(at, upto)))

    def periods_ahead(self, at: float) -> set[tuple[object, ...]]:
        """:meth:`period` of every reset after ``at`` within the horizon."""
        out: set[tuple[object, ...]] = set()
        t = self.next_reset(at)[0]
        while math.isfinite(t):
            out.add(self.period(t))
            t = self.next_reset(t)[0]
        return out

    def next_reset(self, after: float) -> tuple[float, tuple[str, ...]]:
        """The first budget reset after ``after`` within the horizon and its bases (inf: none)."""
        found = self._resets(round(after * 1000))
        if not found:
            return math.inf, ()
        first = min(t for t, _ in found)
        return first / 1000, tuple(sorted({why for t, why in found if t == first}))

    def next(self, after: float) -> tuple[float, tuple[str, ...]]:
        """The first instant after ``after`` (seconds; inf: none within the horizon) and the bases of
        what happens then, one per window edge or budget reset."""
        ms = round(after * 1000)
        found = [*self._edges(ms), *self._resets(ms)]
        if not found:
            return math.inf, ()
        first = min(t for t, _ in found)
        return first / 1000, tuple(sorted({why for t, why in found if t == first}))

    def _edges(self, ms: int) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        for w in self.windows:
            edge = _boundary(w, ms, self.limit)
            if edge is not None:
                verb = "opens" if w.active_at(edge) else "closes"
                out.append((edge, f"window {w.name} {verb} on {w.scope}"))
        return out

    def _resets(self, ms: int) -> list[tuple[int, str]]:
        if self.budget is None:
            return []
        out: list[tuple[int, str]] = []
        for scope in list(self.budget.ledger.scopes.values()):
            end = 0 if scope.spec.decayed else scope.period(ms)[1]
            if ms < end <= self.limit:
                out.append((end, f"budget of {scope.label} resets"))
        return out

    def decay(self, copy: Partition) -> tuple[float, tuple[str, ...]]:
        """When a decaying budget first stops refusing a waiting ask of ``copy`` by itself — its
        consumption decayed enough for the ask, every decaying budget on its chain at once, given what
        runs now (the explanation's :func:`~quotaplane.eta.later._budget_times`) — and the basis
        (inf: none). Asked at each step of the run: what runs changes the decay's level."""
        if not self.decaying:
            return math.inf, ()
        state = copy.state
        seen: dict[tuple[object, ...], tuple[float, tuple[str, ...]]] = {}
        first: tuple[float, tuple[str, ...]] = (math.inf, ())
        for ask in list(state.waiting.asks.unsorted()):
            app = state.apps.get(ask.application_id)
            if app is None:
                continue
            runtime = round(ask.max_runtime * 1000) or None if ask.max_runtime is not None else None
            key = (app.queue_path, app.user.user, tuple(app.user.groups), ask.resource, runtime)
            found = seen.get(key)
            if found is None:
                times = _budget_times(copy, app.application_id, ask.resource, self.decaying, runtime)
                found = seen[key] = (max(x.at for x in times), tuple(sorted(
                    f"budget of {x.scope} decays" for x in times))) if times else (math.inf, ())
            first = min(first, found)
        return first

    def due(self, t: float) -> tuple[str, ...]:
        """The edges due at ``t`` that the configuration does not hold yet (a window that should be
        open, or closed, at ``t``; the service's window timer writes it within its period)."""
        ms = round(t * 1000)
        return tuple(sorted(f"window {w.name} {'opens' if w.active_at(ms) else 'closes'} on {w.scope}"
                            for w in self.windows if w.active_at(ms) != w.active))

    def config_at(self, t: float) -> PartitionConfig | None:
        """The configuration in force at ``t`` when it differs from the one applied last (None: the
        same), remembered as applied."""
        ms = round(t * 1000)
        config = self.base
        for w in self.windows:
            if w.active_at(ms) != w.active:
                config = windowed(config, w)
        if config == self._applied:
            return None
        self._applied = config
        return config


class Repeats:
    """When a run's edges can only repeat themselves (:meth:`onward`)."""

    __slots__ = ("_mark", "periods", "phases")

    def __init__(self) -> None:
        #: the windows toggled at each edge since the run last changed or a budget last reset
        self.phases: set[tuple[bool, ...]] = set()
        #: what each budget period begun since the run last changed brings (:meth:`Instants.period`)
        self.periods: set[tuple[object, ...]] = set()
        self._mark: tuple[int, ...] = ()

    def onward(self, instants: Instants, at: float, mark: tuple[int, ...], busy: bool) -> float | None:
        """After the edge (or reset) at ``at``: None to go on, inf when the run can only repeat itself,
        or the time of the next reset to go to, past edges that would find nothing. ``mark`` counts
        what the run did (starts, allocations, ends): unchanged since the last edge, nothing started,
        ended or left, and the copy's state is the one it had then — only the windows in force, the
        budgets' consumption and the clock differ. ``busy``: an end or a timer is still ahead.

        Within one budget period the consumption of running work that never ends only grows: an edge
        that brings the windows an earlier edge of the period brought finds what that one found —
        nothing — and so does every later edge that brings windows met already: once the edges ahead
        in the period bring none new, the run goes to the next reset (none: it stops). A reset that
        begins a period like one begun since (the same windows at the same offsets from its start,
        every budget as far into its own period) finds what that one found: the run goes to the next
        reset, and stops when every period ahead is like one met. Without this the run walked every
        edge within the horizon, each a full cycle: 64 for one daily window, 7.6 s of CPU with 10,000
        waiting asks that no edge admits (25.8 s with a budget besides)."""
        if mark != self._mark:
            self._mark = mark
            self.phases.clear()
            self.periods.clear()
        if busy or instants.decaying:
            return None
        windows, reset = instants.phase(at)
        if reset:
            period = instants.period(at)
            if period not in self.periods:
                self.periods.add(period)
                self.phases = {windows}
                return None
            return math.inf if instants.periods_ahead(at) <= self.periods else instants.next_reset(at)[0]
        if windows not in self.phases:
            self.phases.add(windows)
            return None
        upto = instants.next_reset(at)[0]
        if {w for _, w in instants.ahead(at, upto)} <= self.phases:
            return upto
        return None
