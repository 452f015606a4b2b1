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


def run_query(q: HistoryQuery, *, partition: str, calendar: Calendar, store: HistoryStore | None,
              memory_rows: Sequence[Row], engine: Accounting | None, now: int,
              pruned: Mapping[int, int] | None = None) -> list[Series]:
    """Answer ``q`` (see the module docstring). ``memory_rows``: rows not yet in ``store``;
    ``engine``: the live accounting (for the open period); ``now``: the current time (ms);
    ``pruned``: per resolution, the time before which its rows were pruned."""
    if q.group_by not in KINDS:
        raise QueryError(f"groupBy must be one of {', '.join(KINDS)}, got {q.group_by!r}")
    if q.step not in _RES and q.step != "total":
        raise QueryError(f"step must be one of {', '.join(RESOLUTIONS)} or total, got {q.step!r}")
    if q.start >= q.end:
        raise QueryError("the range is empty: start must be before end")
    end = min(q.end, now)
    step = q.step
    if q.group_by == APPLICATION and step == "minute":
        step = "hour"          # applications are kept by hour and day
    if step == "total":
        # one step for the whole range, read at the coarsest resolution both ends fall on (a range
        # that does not start or end on a minute is widened to whole minutes)
        grain = "hour" if q.group_by == APPLICATION else "minute"
        start = calendar.floor(grain, q.start)
        if end != now and not calendar.is_boundary(grain, end):
            end = min(calendar.next(grain, end), now)
        res = next(i for i in range(len(RESOLUTIONS) - 1, -1, -1)
                   if calendar.is_boundary(RESOLUTIONS[i], start)
                   and (end == now or calendar.is_boundary(RESOLUTIONS[i], end)))
        bounds = [start, end]
    else:
        res = _RES[step]
        start = calendar.floor(step, q.start)
        bounds = calendar.boundaries(step, start, end)
        if not bounds or bounds[0] != start:
            bounds.insert(0, start)
        if bounds[-1] != end:
            bounds.append(end)
    if end <= start:
        raise QueryError("the range starts in the future")
    if q.group_by == APPLICATION and res > 2:
        res = 2         # applications roll up to days; weeks and months are whole days
    cutoff = (pruned or {}).get(res)
    if cutoff is not None and start < cutoff:
        raise QueryError(f"{RESOLUTIONS[res]} rows are kept from {cutoff} ms on (retention); ask from there "
                         "or with a longer step")
    kind = q.group_by
    names = list(q.names) if q.names is not None else None
    # every row that matters: the newest at or before the first boundary, and all after it
    first: dict[str, Row] = store.latest(partition, res, kind, start, names) if store is not None else {}
    later: list[Row] = store.rows(partition, res, kind, start, end, names) if store is not None else []
    wanted = set(names) if names is not None else None
    for r in memory_rows:
        if r.resolution != res or r.kind != kind or (wanted is not None and r.name not in wanted):
            continue
        if r.t <= start:
            have = first.get(r.name)
            if have is None or have.t <= r.t:
                first[r.name] = r
        elif r.t <= end:
            later.append(r)
    by_name: dict[str, list[Row]] = {}
    for r in later:
        by_name.setdefault(r.name, []).append(r)
    scope_names = set(first) | set(by_name)
    if engine is not None:
        engine.propagate()
        for (k, n), s in engine.scopes.items():
            if k == kind and (wanted is None or n in wanted) and (s.u or s.w or s.l or s.counts):
                scope_names.add(n)
    out: list[Series] = []
    for name in sorted(scope_names):
        rows = sorted({r.t: r for r in by_name.get(name, [])}.values(), key=lambda r: r.t)
        live = engine.scopes.get((kind, name)) if engine is not None else None
        points = _points(bounds, res, first.get(name), rows, live, engine, q.resource)
        if any(p.integrals or p.counts or p.waits.count for p in points) or live is not None:
            out.append(Series(kind, name, points))
    return out


#: (metric, its key in a row)
_KEYS = tuple(METRICS.items())
_NONE: dict[str, int] = {}

#: the open waits of a period of each resolution: its own and those of the finer open periods
_OPEN = {0: (0,), 1: (1, 0), 2: (2, 1, 0), 3: (3, 2, 1, 0), 4: (4, 2, 1, 0)}

_State = tuple[dict[str, dict[str, int]], dict[str, int], Any, Any]


def _points(bounds: list[int], res: int, anchor: Row | None, rows: list[Row], live: Scope | None,
            engine: Accounting | None, resource: str | None) -> list[Point]:
    """The points of one scope between consecutive ``bounds``."""
    live_at = engine.now if engine is not None else None
    i = 0
    current = anchor

    def state(t: int) -> _State:
        """Integrals, counters, guarantee and max at ``t``."""
        nonlocal i, current
        while i < len(rows) and rows[i].t <= t:
            current = rows[i]
            i += 1
        if live is not None and engine is not None and live_at is not None and t >= live_at:
            # after the engine's last event: its own cells are exact up to any later time
            rel = t - engine.origin
            return ({m: live.integral(m, rel) for m in METRICS}, dict(live.counts), live.guar, live.max)
        if current is None:
            return {}, {}, None, None
        data = current.data
        dt = t - current.t
        ints: dict[str, dict[str, int]] = {}
        for m, key in _KEYS:
            cells = data.get(key)
            if cells:
                ints[m] = {r: c[0] + c[1] * dt for r, c in cells.items()}
        return ints, data.get("c") or {}, data.get("g"), data.get("x")

    out: list[Point] = []
    before = state(bounds[0])
    for lo, hi in itertools.pairwise(bounds):
        first_row = i
        after = state(hi)
        p = Point(lo, hi, guaranteed=after[2], max=after[3])
        olds = before[0]
        for m, now_ in after[0].items():
            old = olds.get(m, _NONE)
            d = {r: v - old.get(r, 0) for r, v in now_.items()
                 if (resource is None or r == resource) and v != old.get(r, 0)}
            if d:
                p.integrals[m] = d
        was = before[1]
        if after[1] is not was:
            p.counts = {c: v - was.get(c, 0) for c, v in sorted(after[1].items()) if v != was.get(c, 0)}
        for r_ in rows[first_row:i]:
            if r_.data.get("s"):
                p.waits.merge(WaitSketch.from_json(r_.data["s"]))
        # the waits of the open periods happened at or after the last boundary the engine passed,
        # at or before its last event: they belong to the step holding that event
        holds_last = live_at is not None and lo <= live_at and (live_at < hi or hi == bounds[-1])
        if live is not None and holds_last:
            for j in _OPEN[res]:
                sk = live.open[j]
                if sk is not None:
                    p.waits.merge(sk)
        out.append(p)
        before = after
    return out
