"""Asking the history: integrals, borrowed and lent, waits and counts per scope and period.

A query names a partition, a kind of scope (``group_by``: queue, user, group, quota, tree,
application), a range and a step (minute, hour, day, week, month in the history's time zone, or
``total``: one step for the whole range, read at the coarsest resolution its ends fall on). The
answer, per scope and step, comes from the integrals *at the step boundaries*: the integral over a
step is ``C(end) − C(start)``, where ``C(T)`` is the newest row at or before ``T`` (at the step's
resolution) plus its level times the time since — exact, because a scope writes a row at the end of
every period in which it changed. Rows come from the store, from the rows not yet written and, for
the open period, from the engine's live state. So a year by month reads 13 boundaries per scope,
whatever happened in between.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from quotaplane.errors import InputError
from quotaplane.history.calendar import RESOLUTIONS, Calendar
from quotaplane.history.engine import APPLICATION, KINDS, METRICS, Accounting, Row, Scope
from quotaplane.history.sketch import WaitSketch
from quotaplane.history.store import HistoryStore

__all__ = ["HistoryQuery", "Point", "QueryError", "Series", "run_query"]

#: a step's resolution index
_RES = {name: i for i, name in enumerate(RESOLUTIONS)}


@dataclass(slots=True)
class Point:
    """One scope over one step: integrals (resource-ms), level averages, waits and counts."""

    start: int
    end: int
    integrals: dict[str, dict[str, int]] = field(default_factory=dict)   # metric -> resource -> ms
    guaranteed: dict[str, int] | None = None
    max: dict[str, int] | None = None
    waits: WaitSketch = field(default_factory=WaitSketch)
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class Series:
    """A scope's points, oldest first."""

    kind: str
    name: str
    points: list[Point]


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """What to ask (validated by :func:`run_query`)."""

    group_by: str
    start: int          # ms
    end: int            # ms (clamped to now)
    step: str
    names: tuple[str, ...] | None = None
    resource: str | None = None


class QueryError(InputError):
    """A query that cannot be answered as asked (the message says what to change)."""


RowSource = Callable[[int, str, int, int, Sequence[str] | None], list[Row]]


def _value(row: Row | None, key: str, at: int) -> tuple[dict[str, int], dict[str, int]]:
    """The integrals and levels of metric ``key`` at ``at`` from ``row`` (the newest at or before)."""
    if row is None:
        return {}, {}
    cells = row.data.get(key) or {}
    dt = at - row.t
    return ({r: int(c[0]) + int(c[1]) * dt for r, c in cells.items()},
            {r: int(c[1]) for r, c in cells.items()})


def _check(q: HistoryQuery) -> None:
    if q.group_by not in KINDS:
        raise QueryError(f"groupBy must be one of {', '.join(KINDS)}, got {q.group_by!r}")
    if q.step not in _RES and q.step != "total":
        raise QueryError(f"step must be one of {', '.join(RESOLUTIONS)} or total, got {q.step!r}")
    if q.start >= q.end:
        raise QueryError("the range is empty: start must be before end")


def _total_bounds(q: HistoryQuery, calendar: Calendar, end: int, now: int) -> tuple[int, list[int]]:
    """One step for the whole range, read at the coarsest resolution both ends fall on (a range that
    does not start or end on a minute is widened to whole minutes)."""
    grain = "hour" if q.group_by == APPLICATION else "minute"
    start = calendar.floor(grain, q.start)
    if end != now and not calendar.is_boundary(grain, end):
        end = min(calendar.next(grain, end), now)

    def fits(i: int) -> bool:
        return calendar.is_boundary(RESOLUTIONS[i], start) and (
            end == now or calendar.is_boundary(RESOLUTIONS[i], end))

    res = next(i for i in range(len(RESOLUTIONS) - 1, -1, -1) if fits(i))
    return res, [start, end]


def _step_bounds(step: str, calendar: Calendar, q_start: int, end: int) -> tuple[int, list[int]]:
    """The step's boundaries from the step that holds ``q_start`` to ``end``."""
    start = calendar.floor(step, q_start)
    bounds = calendar.boundaries(step, start, end)
    if not bounds or bounds[0] != start:
        bounds.insert(0, start)
    if bounds[-1] != end:
        bounds.append(end)
    return _RES[step], bounds


def _bounds(q: HistoryQuery, calendar: Calendar, now: int, pruned: Mapping[int, int] | None
            ) -> tuple[int, list[int]]:
    """The resolution read and the boundaries of the steps; a range the rows cannot answer raises."""
    end = min(q.end, now)
    step = q.step
    if q.group_by == APPLICATION and step == "minute":
        step = "hour"          # applications are kept by hour and day
    res, bounds = (_total_bounds(q, calendar, end, now) if step == "total"
                   else _step_bounds(step, calendar, q.start, end))
    if bounds[-1] <= bounds[0]:
        raise QueryError("the range starts in the future")
    if q.group_by == APPLICATION and res > 2:
        res = 2         # applications roll up to days; weeks and months are whole days
    cutoff = (pruned or {}).get(res)
    if cutoff is not None and bounds[0] < cutoff:
        raise QueryError(f"{RESOLUTIONS[res]} rows are kept from {cutoff} ms on (retention); ask from there "
                         "or with a longer step")
    return res, bounds


def _merge(memory_rows: Sequence[Row], res: int, kind: str, wanted: set[str] | None, start: int,
           end: int, first: dict[str, Row], later: list[Row]) -> None:
    """Add the rows not yet in the store to ``first`` (the newest at or before ``start``) and
    ``later`` (after ``start``, up to ``end``)."""
    for r in memory_rows:
        if r.resolution != res or r.kind != kind or (wanted is not None and r.name not in wanted):
            continue
        if r.t > start:
            if r.t <= end:
                later.append(r)
            continue
        have = first.get(r.name)
        if have is None or have.t <= r.t:
            first[r.name] = r


def _rows(q: HistoryQuery, partition: str, store: HistoryStore | None, memory_rows: Sequence[Row],
          res: int, start: int, end: int) -> tuple[dict[str, Row], dict[str, list[Row]]]:
    """Every row that matters, per scope: the newest at or before ``start`` and all after it up to
    ``end`` (by time, one per time), from the store and the rows not yet in it."""
    kind = q.group_by
    names = list(q.names) if q.names is not None else None
    first: dict[str, Row] = {}
    later: list[Row] = []
    if store is not None:
        first = store.latest(partition, res, kind, start, names)
        later = store.rows(partition, res, kind, start, end, names)
    _merge(memory_rows, res, kind, set(names) if names is not None else None, start, end, first, later)
    by_name: dict[str, list[Row]] = {}
    for r in later:
        by_name.setdefault(r.name, []).append(r)
    return first, {n: sorted({r.t: r for r in rs}.values(), key=lambda r: r.t) for n, rs in by_name.items()}


def _live_names(q: HistoryQuery, engine: Accounting) -> set[str]:
    """The scopes of the kind asked for that hold something in the engine now."""
    engine.propagate()
    wanted = set(q.names) if q.names is not None else None
    return {n for (k, n), s in engine.scopes.items()
            if k == q.group_by and (wanted is None or n in wanted) and (s.u or s.w or s.l or s.counts)}


def run_query(q: HistoryQuery, *, partition: str, calendar: Calendar, store: HistoryStore | None,
              memory_rows: Sequence[Row], engine: Accounting | None, now: int,
              pruned: Mapping[int, int] | None = None) -> list[Series]:
    """Answer ``q`` (see the module docstring). ``memory_rows``: rows not yet in ``store``;
    ``engine``: the live accounting (for the open period); ``now``: the current time (ms);
    ``pruned``: per resolution, the time before which its rows were pruned."""
    _check(q)
    res, bounds = _bounds(q, calendar, now, pruned)
    first, by_name = _rows(q, partition, store, memory_rows, res, bounds[0], bounds[-1])
    scope_names = set(first) | set(by_name)
    if engine is not None:
        scope_names |= _live_names(q, engine)
    out: list[Series] = []
    for name in sorted(scope_names):
        live = engine.scopes.get((q.group_by, name)) if engine is not None else None
        points = _points(bounds, res, first.get(name), by_name.get(name, []), live, engine, q.resource)
        if live is not None or any(p.integrals or p.counts or p.waits.count for p in points):
            out.append(Series(q.group_by, name, points))
    return out


#: (metric, its key in a row)
_KEYS = tuple(METRICS.items())
_NONE: dict[str, int] = {}

#: the open waits of a period of each resolution: its own and those of the finer open periods
_OPEN = {0: (0,), 1: (1, 0), 2: (2, 1, 0), 3: (3, 2, 1, 0), 4: (4, 2, 1, 0)}

_State = tuple[dict[str, dict[str, int]], dict[str, int], Any, Any]


class _Cursor:
    """One scope's state at increasing times ``t``: from the newest row at or before ``t`` — or, at
    or after the engine's last event, from the engine's own cells (exact up to any later time)."""

    __slots__ = ("current", "engine", "i", "live", "live_at", "rows")

    def __init__(self, anchor: Row | None, rows: list[Row], live: Scope | None,
                 engine: Accounting | None) -> None:
        self.current, self.rows, self.i = anchor, rows, 0
        self.engine = engine if live is not None else None
        self.live = live
        self.live_at = engine.now if engine is not None else None

    def at(self, t: int) -> _State:
        """Integrals, counters, guarantee and max at ``t``."""
        rows = self.rows
        while self.i < len(rows) and rows[self.i].t <= t:
            self.current = rows[self.i]
            self.i += 1
        live, engine = self.live, self.engine
        if live is not None and engine is not None and self.live_at is not None and t >= self.live_at:
            return _from_live(live, t - engine.origin)
        return _from_row(self.current, t)


def _from_row(row: Row | None, t: int) -> _State:
    """Integrals, counters, guarantee and max at ``t`` from ``row``, the newest at or before it."""
    if row is None:
        return {}, {}, None, None
    data = row.data
    dt = t - row.t
    ints: dict[str, dict[str, int]] = {}
    for m, key in _KEYS:
        cells = data.get(key)
        if cells:
            ints[m] = {r: c[0] + c[1] * dt for r, c in cells.items()}
    return ints, data.get("c") or {}, data.get("g"), data.get("x")


def _from_live(live: Scope, rel: int) -> _State:
    """The engine's own cells at ``rel`` ms after its origin (after its last event)."""
    return {m: live.integral(m, rel) for m in METRICS}, dict(live.counts), live.guar, live.max


def _counts(was: dict[str, int], now: dict[str, int]) -> dict[str, int]:
    """What each counter grew by."""
    return {c: v - was.get(c, 0) for c, v in sorted(now.items()) if v != was.get(c, 0)}


def _row_waits(p: Point, rows: Sequence[Row]) -> None:
    """Add the waits the ``rows`` recorded (each its period's) to ``p``."""
    for r in rows:
        if r.data.get("s"):
            p.waits.merge(WaitSketch.from_json(r.data["s"]))


def _integrals(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]], resource: str | None
               ) -> dict[str, dict[str, int]]:
    """Per metric, what each resource's integral grew by (``resource`` only, when given)."""
    out: dict[str, dict[str, int]] = {}
    for m, now_ in after.items():
        old = before.get(m, _NONE)
        d = {r: v - old.get(r, 0) for r, v in now_.items()
             if (resource is None or r == resource) and v != old.get(r, 0)}
        if d:
            out[m] = d
    return out


def _open_waits(p: Point, live: Scope, res: int) -> None:
    """Add the waits of the engine's open periods (those at resolution ``res`` and finer) to ``p``."""
    for j in _OPEN[res]:
        sk = live.open[j]
        if sk is not None:
            p.waits.merge(sk)


def _points(bounds: list[int], res: int, anchor: Row | None, rows: list[Row], live: Scope | None,
            engine: Accounting | None, resource: str | None) -> list[Point]:
    """The points of one scope between consecutive ``bounds``."""
    cursor = _Cursor(anchor, rows, live, engine)
    live_at = cursor.live_at
    out: list[Point] = []
    before = cursor.at(bounds[0])
    for lo, hi in itertools.pairwise(bounds):
        first_row = cursor.i
        after = cursor.at(hi)
        p = Point(lo, hi, guaranteed=after[2], max=after[3])
        p.integrals = _integrals(before[0], after[0], resource)
        if after[1] is not before[1]:
            p.counts = _counts(before[1], after[1])
        _row_waits(p, rows[first_row:cursor.i])
        # the waits of the open periods happened at or after the last boundary the engine passed,
        # at or before its last event: they belong to the step holding that event
        if live is not None and live_at is not None and lo <= live_at and (live_at < hi or hi == bounds[-1]):
            _open_waits(p, live, res)
        out.append(p)
        before = after
    return out
