"""What a replay (or a recorded history) measures, per queue, user and quota — exactly, on event time.

A :class:`Recorder` hears every change — capacity, admissions, releases, asks that wait and get their
turn, refusals, preemptions — with its time, and keeps per queue level and per user:

- **usage**: the time integral between changes (usage is piecewise constant), so a mean over a
  window is exact and independent of any sample interval; the peak held for a positive time;
- **borrowed**: the time integral of usage above the queue's guaranteed (a queue without a
  guaranteed borrows all it uses);
- **lent**: the time integral of the queue's idle guaranteed that siblings were borrowing at that
  moment. Idle guarantees of one parent's children are lent in proportion to their size: when the
  siblings borrow ``B`` and the idle guarantees add up to ``I``, each idle child lends
  ``idle × min(1, B / I)``;
- **waiting demand**: the time integral of the resources of waiting asks;
- **waits** of asks (p50, p90, max), **refusals** by violation code and **preemptions** by reason.

Refusals are also counted per *quota*: the path and code of the violation that refused, e.g.
``root.dev queue.max`` — the limit that said no.

Both sides of a comparison use this one class: the replay feeds it from the simulator, and
:mod:`quotaplane.sim.recorded` feeds it from the journal of what actually happened, so "recorded"
and "replayed" are measured by the same code.

Extension point: a :class:`Collector` hears the same events through :meth:`Recorder.add_collector`
and adds its own section to the metrics (budget exhaustion and window effects will be collectors).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Cell", "Collector", "Recorder", "flat_metrics", "percentile", "wait_stats"]

Items = tuple[tuple[str, int], ...]
#: (guaranteed, max) of a queue path, as plain dicts (None when not configured)
Limits = Callable[[str], tuple[dict[str, int] | None, dict[str, int] | None]]


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted ``values`` (deterministic, no interpolation)."""
    rank = max(1, math.ceil(q * len(values)))
    return values[rank - 1]


def _r(x: float) -> float:
    return round(x, 6)


def wait_stats(waits_in: Iterable[float]) -> dict[str, Any]:
    """``count``, ``p50``, ``p90``, ``p95``, ``max`` and ``mean`` of waiting times (count only when none)."""
    waits = sorted(waits_in)
    out: dict[str, Any] = {"count": len(waits)}
    if waits:
        out.update(p50=_r(percentile(waits, 0.5)), p90=_r(percentile(waits, 0.9)),
                   p95=_r(percentile(waits, 0.95)), max=_r(waits[-1]), mean=_r(sum(waits) / len(waits)))
    return out


class _Family:
    """The children of one parent where at least one has a guaranteed: integrates their lending.

    ``borrowed``/``idle``: the children's usage above their guaranteed and idle guaranteed, summed
    (kept up to date by :meth:`change`); ``rate``: ∫ min(1, borrowed / idle) dt, the share of an idle
    guarantee that was lent. A child's lending is its idle amount times the growth of ``rate`` while
    that amount held, settled whenever the child changes — O(resources) per change.
    """

    __slots__ = ("borrowed", "children", "idle", "last", "rate")

    def __init__(self) -> None:
        self.children: list[Cell] = []
        self.borrowed: dict[str, int] = {}
        self.idle: dict[str, int] = {}
        self.rate: dict[str, float] = {}
        self.last = 0.0

    def touch(self, t: float) -> None:
        """Integrate the lending rate of the current state up to ``t`` (seconds since the start)."""
        dt = t - self.last
        if dt <= 0:
            return
        self.last = t
        rate, borrowed = self.rate, self.borrowed
        for r, idle in self.idle.items():
            b = borrowed.get(r, 0)
            if idle > 0 and b > 0:
                rate[r] = rate.get(r, 0.0) + min(1.0, b / idle) * dt

    def join(self, cell: Cell) -> None:
        """Add a child (its current usage counts from now on)."""
        self.children.append(cell)
        cell.family = self
        self._count(cell, 1, None)
        cell.rate_mark = dict(self.rate)

    def settle(self, cell: Cell) -> None:
        """Add the child's lending since its last change (call after :meth:`touch`)."""
        g = cell.guaranteed
        if g is None:
            return
        mark, rate, usage = cell.rate_mark, self.rate, cell.usage
        for r, gv in g.items():
            now = rate.get(r, 0.0)
            grown = now - mark.get(r, 0.0)
            if grown > 0 and (free := gv - usage.get(r, 0)) > 0:
                cell.lent[r] = cell.lent.get(r, 0.0) + free * grown
            mark[r] = now

    def _count(self, cell: Cell, sign: int, names: Iterable[str] | None) -> None:
        g = cell.guaranteed or {}
        usage = cell.usage
        for r in (names if names is not None else {*usage, *g}):
            v, gv = usage.get(r, 0), g.get(r, 0)
            if v > gv:
                self.borrowed[r] = self.borrowed.get(r, 0) + sign * (v - gv)
            elif gv > v:
                self.idle[r] = self.idle.get(r, 0) + sign * (gv - v)

    def before(self, cell: Cell, names: Iterable[str]) -> None:
        """``cell``'s usage of ``names`` is about to change: take its part out of the sums."""
        self._count(cell, -1, names)

    def after(self, cell: Cell, names: Iterable[str]) -> None:
        """``cell``'s usage of ``names`` changed: put its part back."""
        self._count(cell, 1, names)



def _shares(usage_mean: Mapping[str, float], of: Mapping[str, float]) -> dict[str, float]:
    """Mean usage as a share of ``of`` (a guaranteed or a max), per resource with a positive amount."""
    return {r: _r(usage_mean.get(r, 0.0) / g) for r, g in sorted(of.items()) if g > 0}

class Cell:
    """The measures of one queue level or one user.

    Time integrals use ``∫ usage dt = Σ amount × (end − start)`` over the allocations: a change at
    ``t`` (seconds since the window start) adds ``−sign × amount × t`` to ``acc``, and at the end
    ``acc + usage × T`` is the integral — one multiply per change, no walk over idle cells. Only a
    queue with a guaranteed integrates its borrowing interval by interval (``over``).
    """

    __slots__ = ("acc", "admitted", "demand", "demand_acc", "family", "guaranteed", "last", "lent", "max",
                 "name", "over", "peak", "preempted", "rate_mark", "refused", "usage", "waits")

    def __init__(self, name: str, guaranteed: dict[str, int] | None = None,
                 maximum: dict[str, int] | None = None) -> None:
        self.name = name
        self.guaranteed = guaranteed
        self.max = maximum
        self.usage: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.acc: dict[str, float] = {}
        self.demand: dict[str, int] = {}
        self.demand_acc: dict[str, float] = {}
        self.over: dict[str, float] = {}
        self.last = 0.0
        self.lent: dict[str, float] = {}
        self.rate_mark: dict[str, float] = {}
        self.waits: list[float] = []
        self.refused: dict[str, int] = {}
        self.preempted: dict[str, int] = {}
        self.admitted = 0
        #: the lending family this cell is a child in (None: no sibling has a guaranteed)
        self.family: _Family | None = None

    def touch_over(self, t: float) -> None:
        """Integrate the usage above the guaranteed up to ``t`` (before the usage changes)."""
        dt = t - self.last
        if dt <= 0:
            return
        self.last = t
        g = self.guaranteed
        if g is None:
            return
        for r, v in self.usage.items():
            over = v - g.get(r, 0)
            if over > 0:
                self.over[r] = self.over.get(r, 0.0) + over * dt

    def area(self, t: float) -> dict[str, float]:
        """∫ usage dt from the window start to ``t`` (no change after ``t``)."""
        return {r: a + self.usage.get(r, 0) * t for r, a in self.acc.items()}

    def demand_area(self, t: float) -> dict[str, float]:
        """∫ waiting demand dt from the window start to ``t``."""
        return {r: a + self.demand.get(r, 0) * t for r, a in self.demand_acc.items()}

    def summary(self, span: float) -> dict[str, Any]:
        """The cell's measures over a window of ``span`` seconds (means are time-weighted)."""
        def mean(area: Mapping[str, float], names: Iterable[str] = ()) -> dict[str, float]:
            """Means of ``area``; ``names`` are listed even when 0 (a measured zero, not unknown)."""
            keys = sorted({*area, *names})
            out = {r: _r(area.get(r, 0.0) / span) for r in keys} if span > 0 else {}
            return {r: v for r, v in out.items() if v or r in names}

        area = self.area(span)
        used = [r for r, v in self.peak.items() if v]
        usage_mean = mean(area)
        out: dict[str, Any] = {
            "usage_mean": usage_mean,
            "usage_peak": {r: self.peak[r] for r in sorted(self.peak) if self.peak[r]},
            # without a guaranteed, all usage is borrowed (from the parent's or the cluster's spare)
            "borrowed_mean": mean(self.over if self.guaranteed is not None else area, used),
            "demand_mean": mean(self.demand_area(span)),
            "wait": _pct(self.waits),
            "refused": {c: self.refused[c] for c in sorted(self.refused)},
            "preempted": {c: self.preempted[c] for c in sorted(self.preempted)},
        }
        if self.guaranteed is not None:
            out["guaranteed"] = dict(sorted(self.guaranteed.items()))
            out["lent_mean"] = mean(self.lent, self.guaranteed)
            out["of_guaranteed"] = _shares(usage_mean, self.guaranteed)
        if self.max is not None:
            out["max"] = dict(sorted(self.max.items()))
            out["of_max"] = _shares(usage_mean, self.max)
        return out


def _quantiles(waits_in: list[float]) -> list[float]:
    waits = sorted(waits_in)
    return [_r(percentile(waits, q / 100)) if q else _r(waits[0]) for q in range(101)] if waits else []


def _pct(waits: list[float]) -> dict[str, Any]:
    stats = wait_stats(waits)
    return {k: stats[k] for k in ("count", "p50", "p90", "max") if k in stats}


@runtime_checkable
class Collector(Protocol):
    """A further measure that hears what the :class:`Recorder` hears (the extension point).

    ``name`` is its section in the metrics; :meth:`summary` is called once, after the window closed,
    and :meth:`flat` gives the numbers for the variant × metric table. Budget exhaustion and window
    effects (issue 36) belong here: they need the same admissions and releases, with their times.
    """

    name: str

    def admitted(self, now: float, key: str, queue: str, user: str, items: Items) -> None:
        """An allocation was admitted (directly or for a waiting ask)."""

    def released(self, now: float, key: str, queue: str, user: str, items: Items) -> None:
        """An allocation ended (released, preempted, its application finished)."""

    def refused(self, now: float, queue: str, user: str, codes: Sequence[str]) -> None:
        """An allocation request was refused with these violation codes."""

    def summary(self, start: float, end: float) -> dict[str, Any]:
        """This collector's section of the metrics over the window ``[start, end]``."""

    def flat(self, summary: Mapping[str, Any]) -> dict[str, float]:
        """The numbers of the section, named for the variant × metric table."""


class AppCells:
    """The cells an application's allocations count in: its queue, every ancestor, and its user."""

    __slots__ = ("cells", "queue", "user")

    def __init__(self, queue: str, user: str, cells: tuple[Cell, ...]) -> None:
        self.queue = queue
        self.user = user
        self.cells = cells



def _family_before(fam: _Family, cell: Cell, t: float, items: Items) -> list[str]:
    """Bring a cell's family (its lending/borrowing accounts) up to ``t`` before its usage changes;
    the names of the resources that change."""
    names = [r for r, _ in items]
    fam.touch(t)
    fam.settle(cell)
    fam.before(cell, names)
    return names


def _add_usage(cell: Cell, items: Items, sign: int, t: float, measured: bool) -> None:
    """Add ``sign`` × ``items`` to a cell's usage at ``t`` (its usage-time area and, when measured,
    its peak)."""
    usage, acc, peak = cell.usage, cell.acc, cell.peak
    for r, v in items:
        sv = sign * v
        try:                      # the hot path: the cell has seen this resource before
            nv = usage[r] + sv
        except KeyError:
            nv = sv
            acc[r] = 0.0
            peak[r] = 0
        usage[r] = nv
        acc[r] -= sv * t
        if measured and nv > peak[r]:
            peak[r] = nv

class Recorder:
    """Measures per queue level and user between ``start`` and ``end`` (None: until :meth:`close`).

    ``queues`` lists the queue paths known at the start (with their guaranteed and max from
    ``limits``); queues that appear later (dynamic queues) are added when first used. Times must not
    go back. Changes after ``end`` are applied (the state stays right) but no longer measured.
    """

    def __init__(self, queues: Iterable[str], limits: Limits, start: float, end: float | None = None) -> None:
        self.start = start
        self.end = end
        self._limits = limits
        self._queues: dict[str, Cell] = {}
        self._users: dict[str, Cell] = {}
        self._families: dict[str, _Family] = {}
        self._live: dict[str, tuple[AppCells, Items]] = {}
        self._pending: dict[str, tuple[AppCells, Items, float]] = {}
        self._t = 0.0                      # the last change, in seconds since start (clipped to end)
        self._cap: dict[str, int] = {}
        # cluster utilisation: capacity is constant between node changes, so ∫ used/cap dt over such a
        # segment is (∫ used dt) / cap — the root's integral at the segment's ends
        self._seg_start = 0.0
        self._seg_area: dict[str, float] = {}
        self._cluster_time: dict[str, float] = {}
        self._cluster_ratio_area: dict[str, float] = {}
        self._cluster_ratio_peak: dict[str, float] = {}
        self._refused_by_quota: dict[str, int] = {}
        self._refused = 0
        self._preempted = 0
        self._waits: list[float] = []
        self._collectors: list[Collector] = []
        for path in sorted(queues, key=lambda p: (p.count("."), p)):
            self._queue(path)
        self._root = self._queue("root")

    # -- cells ----------------------------------------------------------------------------------------

    def _rel(self, now: float) -> float:
        """``now`` in seconds since the window start, clipped to the window (a change before the
        start counts as the state the window starts with)."""
        end = self.end
        t = (now if end is None or now < end else end) - self.start
        if t < 0:
            t = 0.0
        if t > self._t:
            self._t = t
        return t

    def _queue(self, path: str) -> Cell:
        cell = self._queues.get(path)
        if cell is None:
            g, m = self._limits(path)
            cell = Cell(path, g, m)
            cell.last = self._t
            self._queues[path] = cell
            parent, _, _ = path.rpartition(".")
            if parent:
                self._queue(parent)
                fam = self._families.get(parent)
                if fam is None and g is not None:
                    fam = _Family()
                    fam.last = self._t
                    self._families[parent] = fam
                    for p, c in self._queues.items():
                        if p.rpartition(".")[0] == parent:
                            fam.join(c)
                elif fam is not None:
                    fam.touch(self._t)
                    fam.join(cell)
        return cell

    def app(self, queue: str, user: str) -> AppCells:
        """The cells of an application in leaf ``queue`` submitted by ``user`` (created when new)."""
        parts = queue.split(".")
        chain = [self._queue(".".join(parts[: i + 1])) for i in range(len(parts))]
        ucell = self._users.get(user)
        if ucell is None:
            ucell = self._users[user] = Cell(user)
        return AppCells(queue, user, (*chain, ucell))

    def add_collector(self, collector: Collector) -> None:
        """Let ``collector`` hear every later change; its summary joins :meth:`summary`."""
        self._collectors.append(collector)

    # -- changes --------------------------------------------------------------------------------------

    def _close_segment(self, t: float) -> None:
        """End the current capacity segment at ``t``: add its used/capacity integral."""
        dt = t - self._seg_start
        area = self._root.area(t)
        if dt > 0:
            for r, c in self._cap.items():
                if c > 0:
                    used = area.get(r, 0.0) - self._seg_area.get(r, 0.0)
                    self._cluster_ratio_area[r] = self._cluster_ratio_area.get(r, 0.0) + used / c
                    self._cluster_time[r] = self._cluster_time.get(r, 0.0) + dt
        self._seg_start = t
        self._seg_area = area

    def _peak_ratio(self) -> None:
        used = self._root.usage
        peak = self._cluster_ratio_peak
        for r, c in self._cap.items():
            if c > 0:
                ratio = used.get(r, 0) / c
                if ratio > peak.get(r, -1.0):
                    peak[r] = ratio

    def _in(self, now: float) -> bool:
        """Whether ``now`` is inside the window (what happens there is counted)."""
        return self.start <= now and (self.end is None or now <= self.end)

    def capacity(self, now: float, cap: Mapping[str, int]) -> None:
        """The cluster's capacity is ``cap`` from ``now`` on."""
        t = self._rel(now)
        self._close_segment(t)
        self._cap = dict(cap)
        if self._in(now):
            self._peak_ratio()

    def _use(self, now: float, app: AppCells, items: Items, sign: int) -> None:
        t = self._rel(now)
        measured = self._in(now)
        for cell in app.cells:
            fam = cell.family
            if fam is not None:
                names = _family_before(fam, cell, t, items)
            if cell.guaranteed is not None:
                cell.touch_over(t)
            _add_usage(cell, items, sign, t, measured)
            if fam is not None:
                fam.after(cell, names)
        if sign > 0 and measured:
            self._cluster_peak(items)

    def _cluster_peak(self, items: Items) -> None:
        """Raise the cluster's peak usage ratio per resource after an allocation."""
        used, cap, rp = self._root.usage, self._cap, self._cluster_ratio_peak
        for r, _ in items:
            c = cap.get(r, 0)
            if c > 0 and (ratio := used[r] / c) > rp.get(r, -1.0):
                rp[r] = ratio

    def _demand(self, now: float, app: AppCells, items: Items, sign: int) -> None:
        t = self._rel(now)
        for cell in app.cells:
            demand, acc = cell.demand, cell.demand_acc
            for r, v in items:
                demand[r] = demand.get(r, 0) + sign * v
                acc[r] = acc.get(r, 0.0) - sign * v * t

    def admit(self, now: float, key: str, app: AppCells, items: Items) -> None:
        """Allocation ``key`` of ``items`` runs from ``now`` on."""
        self._use(now, app, items, 1)
        self._live[key] = (app, items)
        for cell in app.cells:
            cell.admitted += 1
        for col in self._collectors:
            col.admitted(now, key, app.queue, app.user, items)

    def release(self, now: float, key: str) -> bool:
        """Allocation ``key`` ends at ``now``; False when it is not running."""
        found = self._live.pop(key, None)
        if found is None:
            return False
        app, items = found
        self._use(now, app, items, -1)
        for col in self._collectors:
            col.released(now, key, app.queue, app.user, items)
        return True

    def running(self, key: str) -> bool:
        """Whether allocation ``key`` is running."""
        return key in self._live

    def ask(self, now: float, key: str, app: AppCells, items: Items, asked: float | None = None) -> None:
        """Ask ``key`` waits from ``asked`` (default ``now``): its resources count as waiting demand."""
        self._demand(now, app, items, 1)
        self._pending[key] = (app, items, now if asked is None else asked)

    def ask_allocated(self, now: float, key: str) -> float | None:
        """Waiting ask ``key`` got its allocation at ``now``: its wait counts; return it (None: unknown)."""
        found = self._pending.pop(key, None)
        if found is None:
            return None
        app, items, asked = found
        self._demand(now, app, items, -1)
        wait = now - asked
        if self._in(now):
            self._waits.append(wait)
            for cell in app.cells:
                cell.waits.append(wait)
        self.admit(now, key, app, items)
        return wait

    def withdraw(self, now: float, key: str) -> bool:
        """Waiting ask ``key`` is withdrawn at ``now``; False when it was not waiting."""
        found = self._pending.pop(key, None)
        if found is None:
            return False
        app, items, _ = found
        self._demand(now, app, items, -1)
        return True

    def refuse(self, now: float, app: AppCells, violations: Iterable[tuple[str, str]]) -> None:
        """An allocation request of ``app`` was refused at ``now``; ``violations``: (code, path) pairs."""
        if not self._in(now):
            return
        pairs = sorted(set(violations))
        codes = sorted({c for c, _ in pairs})
        self._refused += 1
        for cell in app.cells:
            for code in codes:
                cell.refused[code] = cell.refused.get(code, 0) + 1
        for code, path in pairs:
            name = f"{path} {code}" if path else code
            self._refused_by_quota[name] = self._refused_by_quota.get(name, 0) + 1
        for col in self._collectors:
            col.refused(now, app.queue, app.user, codes)

    def preempt(self, now: float, keys: Iterable[str], reason: str) -> None:
        """Allocations ``keys`` were taken away at ``now`` for ``reason`` (a violation code)."""
        for key in keys:
            found = self._live.get(key)
            if found is None:
                continue
            if self._in(now):
                self._preempted += 1
                for cell in found[0].cells:
                    cell.preempted[reason] = cell.preempted.get(reason, 0) + 1
            self.release(now, key)

    # -- reading --------------------------------------------------------------------------------------

    @property
    def live(self) -> int:
        """Allocations running now."""
        return len(self._live)

    @property
    def waiting(self) -> int:
        """Asks waiting now."""
        return len(self._pending)

    def usage(self, path: str) -> dict[str, int]:
        """The current usage of queue ``path`` (empty when unknown)."""
        cell = self._queues.get(path)
        return {r: v for r, v in cell.usage.items() if v} if cell is not None else {}

    def demand(self, path: str) -> dict[str, int]:
        """The current waiting demand under queue ``path``."""
        cell = self._queues.get(path)
        return {r: v for r, v in cell.demand.items() if v} if cell is not None else {}

    def top_queues(self) -> list[str]:
        """The top-level queue paths known so far, sorted."""
        return sorted(p for p in self._queues if p.count(".") == 1)

    def sample(self, t: float) -> dict[str, Any]:
        """The state now, as one timeline sample (time ``t``)."""
        root = self._queues.get("root")
        top = self.top_queues()
        return {"t": _r(t), "capacity": dict(self._cap),
                "used": {r: v for r, v in sorted(root.usage.items()) if v} if root is not None else {},
                "demand": {r: v for r, v in sorted(root.demand.items()) if v} if root is not None else {},
                "queues": {q: dict(sorted(self.usage(q).items())) for q in top},
                "queue_demand": {q: dict(sorted(self.demand(q).items())) for q in top},
                "refused": dict(sorted(root.refused.items())) if root is not None else {},
                "allocations": len(self._live), "pending_asks": len(self._pending)}

    def close(self, now: float) -> None:
        """End the window at ``now`` (or at ``end`` when that comes first): integrate up to it."""
        t = self._rel(now)
        if self.end is None:
            self.end = self.start + t
        self._close_segment(t)
        for fam in self._families.values():
            fam.touch(t)
            for cell in fam.children:
                fam.settle(cell)
        for cell in self._queues.values():
            cell.touch_over(t)

    def summary(self) -> dict[str, Any]:
        """The metrics over the window (call :meth:`close` first)."""
        start = self.start
        end = self.end if self.end is not None else start
        span = max(0.0, end - start)
        util = {r: {"mean": _r(self._cluster_ratio_area[r] / tm), "peak": _r(self._cluster_ratio_peak[r])}
                for r in sorted(self._cluster_time) if (tm := self._cluster_time[r]) > 0}
        out: dict[str, Any] = {
            "window": {"start": _r(start), "end": _r(end), "seconds": _r(span)},
            "utilisation": util,
            "wait": wait_stats(self._waits),
            # the distribution of the waits, for plots: the 0th, 1st, …, 100th percentile
            "wait_quantiles": _quantiles(self._waits),
            "refused": self._refused,
            "refused_by_quota": {k: self._refused_by_quota[k] for k in sorted(self._refused_by_quota)},
            "preempted": self._preempted,
            "queues": {p: self._queues[p].summary(span) for p in sorted(self._queues)},
            "users": {u: self._users[u].summary(span) for u in sorted(self._users)},
        }
        for col in self._collectors:
            out[col.name] = col.summary(start, end)
        return out

    def flat(self, summary: Mapping[str, Any]) -> dict[str, float]:
        """:func:`flat_metrics` plus the collectors' own numbers."""
        out = flat_metrics(summary)
        for col in self._collectors:
            if col.name in summary:
                out.update({f"{col.name}.{k}": v for k, v in col.flat(summary[col.name]).items()})
        return out


def flat_metrics(m: Mapping[str, Any]) -> dict[str, float]:
    """The headline numbers of a metrics section as one flat ``name → value`` mapping (a table row).

    Cluster utilisation and waits, refusals (total, by code and by quota), preemptions (by reason),
    and per top-level queue and per user: waits, mean usage, borrowed and lent.
    """
    out: dict[str, float] = {f"utilisation.{r}": u["mean"] for r, u in m["utilisation"].items()}
    w = m["wait"]
    out["wait.count"] = w["count"]
    out.update((f"wait.{k}", w[k]) for k in ("p50", "p90", "max") if k in w)
    out["refused"] = m["refused"]
    for name, n in m["refused_by_quota"].items():
        out[f"refused[{name}]"] = n
    out["preempted"] = m["preempted"]
    root = m["queues"].get("root")
    if root is not None:
        _flat_root(out, root)
    for kind, cells in (("queue", {p: c for p, c in m["queues"].items() if p.count(".") == 1}),
                        ("user", m["users"])):
        for name, c in cells.items():
            _flat_cell(out, f"{kind}[{name}]", c)
    return out


def _flat_root(out: dict[str, float], root: Mapping[str, Any]) -> None:
    """The root queue's refusals by code and preemptions by reason."""
    out.update((f"refused.{code}", n) for code, n in root["refused"].items())
    out.update((f"preempted.{reason}", n) for reason, n in root["preempted"].items())


def _flat_cell(out: dict[str, float], pre: str, c: Mapping[str, Any]) -> None:
    """One top-level queue's or user's waits, mean usage, borrowed and lent, named under ``pre``."""
    for k in ("p50", "p90", "max"):
        if k in c["wait"]:
            out[f"{pre}.wait.{k}"] = c["wait"][k]
    for field in ("usage_mean", "borrowed_mean", "lent_mean"):
        for r, v in c.get(field, {}).items():
            out[f"{pre}.{field.removesuffix('_mean')}.{r}"] = v
