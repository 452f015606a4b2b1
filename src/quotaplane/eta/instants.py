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

    def phases_ahead(self, after: float) -> set[tuple[bool, ...]]:
        """The windows toggled (:meth:`phase`) at each edge after ``after`` within the horizon."""
        out: set[tuple[bool, ...]] = set()
        ms = round(after * 1000)
        while True:
            edges = [e for w in self.windows if (e := _boundary(w, ms, self.limit)) is not None]
            if not edges:
                return out
            ms = min(edges)
            out.add(tuple(w.active_at(ms) != w.active for w in self.windows))

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

    __slots__ = ("_mark", "_reset_idle", "phases")

    def __init__(self) -> None:
        #: the windows toggled at each edge since the run last changed
        self.phases: set[tuple[bool, ...]] = set()
        self._mark: tuple[int, ...] = ()
        self._reset_idle = False

    def onward(self, instants: Instants, at: float, mark: tuple[int, ...], busy: bool) -> bool:
        """After the edge (or reset) at ``at``: False when the run can only repeat itself. ``mark``
        counts what the run did (starts, allocations, ends): unchanged since the last edge, nothing
        started, ended or left, and the copy's state is the one it had then — only the windows in
        force (and the clock) differ. ``busy``: an end or a timer is still ahead (the run goes on).

        With windows alone, once every combination of windows the edges ahead (within the horizon)
        bring was met since then, each later edge finds what an earlier one found: nothing. With
        budgets alone, a second reset finds what the first found (running work that never ends
        consumes each period alike, and within one only consumes more). With both, the run walks on
        to the horizon. Without this the run walked every edge within the horizon, each a full
        cycle: 64 for one daily window, 7.6 s of CPU with 10,000 waiting asks that no edge admits."""
        if mark != self._mark:
            self._mark = mark
            self.phases.clear()
            self._reset_idle = False
        if busy or instants.decaying or (instants.windows and instants.resets):
            return True
        windows, reset = instants.phase(at)
        if reset:
            if self._reset_idle:
                return False
            self._reset_idle = True
            return True
        if windows not in self.phases:
            self.phases.add(windows)
            return True
        return not instants.phases_ahead(at) <= self.phases
