"""The ``/ui/history`` page: usage over time, drawn (issue 33, "a picture").

* **Per queue**, one chart per queue for the chosen resource: its average use per step (an area),
  its waiting demand per step (a dashed line), and its guaranteed and max as they were in each step
  (step lines). Borrowed use is the part of the area above the guaranteed line.
* **Top consumers** of the range: users (or queues, groups …) ranked by resource-hours, as bars,
  borrowed hours marked inside each bar.

Everything comes from the same query as ``GET /ws/v1/partition/{p}/history/usage``
(:func:`quotaplane.server.routes_history.series_of`): exact integrals, not samples. Charts are SVG
with the values as attributes (no inline style or script: the page's CSP forbids both), each with a
``<title>`` a reader can hover and an ``aria-label`` a screen reader reads. The choices (range,
step, resource, who to rank) are a plain GET form, so the page works without script.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from quotaplane.history.calendar import Calendar
from quotaplane.history.query import Point, Series
from quotaplane.history.report import PERIODS, iso
from quotaplane.server.errors import ApiError
from quotaplane.server.routes_history import series_of
from quotaplane.units import amount

__all__ = ["history_page"]

#: the steps offered, and the ranking kinds
_STEPS = ("hour", "day", "week", "month")
_RANK = ("user", "queue", "group", "quota", "application")
#: the chart's drawing box (viewBox units; the stylesheet scales it to the page's width)
_W, _H, _PAD = 600.0, 120.0, 4.0
#: at most this many queue charts and ranked consumers on one page
_MAX_CHARTS, _TOP = 40, 10


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _avg(pt: Point, metric: str, resource: str) -> float:
    span = pt.end - pt.start
    return pt.integrals.get(metric, {}).get(resource, 0) / span if span > 0 else 0.0


def _sum(points: Sequence[Point], metric: str, resource: str) -> int:
    return sum(p.integrals.get(metric, {}).get(resource, 0) for p in points)


def _finite(v: float | int | None) -> bool:
    # a max at or above 2**62 is quotaplane's "unlimited": nothing to draw
    return v is not None and v < 2**62


class _Canvas:
    """Maps step ``i`` and value ``v`` to the chart's viewBox, values clipped at ``top``."""

    def __init__(self, steps: int, top: float) -> None:
        self.n, self.top, self.dx = steps, top, (_W - 2 * _PAD) / steps

    def y(self, v: float) -> float:
        return round(_H - _PAD - (_H - 2 * _PAD) * min(v, self.top) / self.top, 2)

    def x(self, i: int) -> float:
        return round(_PAD + i * self.dx, 2)

    def area(self, values: Sequence[float]) -> str:
        """A step shape standing on the axis, one flat segment per step."""
        corners = [f"{self.x(0)},{self.y(0)}"]
        for i, v in enumerate(values):
            corners += [f"{self.x(i)},{self.y(v)}", f"{self.x(i + 1)},{self.y(v)}"]
        corners.append(f"{self.x(self.n)},{self.y(0)}")
        return f'<polygon class="used" points="{" ".join(corners)}"/>'

    def steps(self, values: Sequence[float | int | None], cls: str) -> list[str]:
        """Step lines of ``values``, broken where a value is missing (or an unlimited max)."""
        lines: list[str] = []
        seg: list[str] = []
        for i, v in enumerate(values):
            if v is None or not _finite(v):
                lines += self._polyline(seg, cls)
                seg = []
            else:
                seg += [f"{self.x(i)},{self.y(v)}", f"{self.x(i + 1)},{self.y(v)}"]
        return lines + self._polyline(seg, cls)

    @staticmethod
    def _polyline(seg: Sequence[str], cls: str) -> list[str]:
        return [f'<polyline class="{cls}" points="{" ".join(seg)}"/>'] if len(seg) > 1 else []


def _title(name: str, resource: str, points: Sequence[Point], peak: float,
           guar: Sequence[int | None], mx: Sequence[int | None]) -> tuple[str, float, float]:
    """The chart's hover title, with the range's used and borrowed hours."""
    total_h = _sum(points, "used", resource) / 3_600_000
    borrowed_h = _sum(points, "borrowed", resource) / 3_600_000
    parts = [f"{name}: {total_h:,.1f} {_unit(resource)}-hours used"]
    if borrowed_h:
        parts.append(f"{borrowed_h:,.1f} borrowed")
    parts.append(f"peak step average {amount(resource, round(peak))}")
    last_guar, last_max = guar[-1] if guar else None, mx[-1] if mx else None
    if last_guar:
        parts.append(f"guaranteed {amount(resource, last_guar)}")
    if last_max is not None and _finite(last_max):
        parts.append(f"max {amount(resource, last_max)}")
    return ", ".join(parts), total_h, borrowed_h


class _Lines:
    """One queue's values per step for one resource: average use, use plus waiting demand,
    guaranteed and max as they were in each step."""

    def __init__(self, points: Sequence[Point], resource: str) -> None:
        self.used = [_avg(p, "used", resource) for p in points]
        self.waiting = [_avg(p, "waiting", resource) for p in points]
        self.demand = [u + w for u, w in zip(self.used, self.waiting, strict=True)]
        self.guar = [(p.guaranteed or {}).get(resource) for p in points]
        self.max = [(p.max or {}).get(resource) for p in points]

    def top(self) -> float:
        """The chart's height: the highest value drawn (an unlimited max is not drawn)."""
        finite = [v for v in (*self.guar, *self.max) if v is not None and _finite(v)]
        return max([*self.demand, *finite, 1.0])


def _chart(name: str, resource: str, points: Sequence[Point], calendar: Calendar) -> str:
    """One queue's chart: average used (area), waiting demand (line), guaranteed and max (steps)."""
    lines = _Lines(points, resource)
    canvas = _Canvas(len(points), lines.top())
    parts = [f'<rect class="frame" x="0" y="0" width="{_W}" height="{_H}"/>', canvas.area(lines.used)]
    if any(lines.waiting):
        parts += canvas.steps(lines.demand, "waiting")
    parts += canvas.steps(lines.guar, "guar") + canvas.steps(lines.max, "max")
    title, total_h, borrowed_h = _title(name, resource, points, max(lines.used, default=0.0),
                                        lines.guar, lines.max)
    first, last = iso(points[0].start, calendar), iso(points[-1].end, calendar)
    borrowed = f' · <span class="b">{_e(f"{borrowed_h:,.1f}")} borrowed</span>' if borrowed_h else ""
    return (f'<figure class="hchart" data-queue="{_e(name)}"><figcaption><b>{_e(name)}</b> '
            f'<span class="muted">{_e(f"{total_h:,.1f}")} {_e(_unit(resource))}-hours{borrowed}'
            f'</span></figcaption><svg viewBox="0 0 {_W} {_H}" preserveAspectRatio="none" role="img" '
            f'aria-label="{_e(title)}"><title>{_e(title)}</title>{"".join(parts)}</svg>'
            f'<div class="axis"><span>{_e(first[:16])}</span><span>{_e(last[:16])}</span></div></figure>')


def _unit(resource: str) -> str:
    return {"vcore": "core", "nvidia.com/gpu": "GPU", "memory": "byte"}.get(resource, resource)


def _ranking(series: Sequence[Series], resource: str, kind: str) -> str:
    """The top consumers of the range as horizontal bars (borrowed part marked)."""
    totals = []
    for s in series:
        used, borrowed = _sum(s.points, "used", resource), _sum(s.points, "borrowed", resource)
        if used > 0:
            totals.append((used, borrowed, s.name))
    totals.sort(key=lambda t: (-t[0], t[2]))
    totals = totals[:_TOP]
    if not totals:
        return f'<p class="muted">no {_e(kind)} used {_e(_unit(resource))}s in this range</p>'
    best = totals[0][0]
    rows = []
    for used, borrowed, name in totals:
        w = round(100.0 * used / best, 2)
        b = round(100.0 * borrowed / best, 2)
        hours = f"{used / 3_600_000:,.1f} {_unit(resource)}-hours" + (
            f", {borrowed / 3_600_000:,.1f} borrowed" if borrowed else "")
        rows.append(f'<li data-name="{_e(name)}"><span class="who">{_e(name)}</span>'
                    '<svg viewBox="0 0 100 10" preserveAspectRatio="none" role="img" '
                    f'aria-label="{_e(hours)}"><title>{_e(name)}: {_e(hours)}</title>'
                    f'<rect class="used" x="0" y="0" width="{w}" height="10"/>'
                    + (f'<rect class="borrowed" x="{round(w - b, 2)}" y="0" width="{b}" height="10"/>'
                       if borrowed else "")
                    + f'</svg><span class="n">{_e(hours)}</span></li>')
    return f'<ol class="top">{"".join(rows)}</ol>'


def _select(name: str, options: Sequence[str], chosen: str) -> str:
    opts = "".join(f'<option{" selected" if o == chosen else ""}>{_e(o)}</option>' for o in options)
    return f'<label>{_e(name)} <select name="{_e(name)}">{opts}</select></label>'


class _Choices:
    """The page's choices from its query string (``period`` or ``start``/``end``, ``step``,
    ``resource``, ``rank``), defaults filled in."""

    def __init__(self, partition: str, params: Mapping[str, str]) -> None:
        self.partition = partition
        self.start, self.end = params.get("start") or None, params.get("end") or None
        # the last week unless a range is given
        self.period = params.get("period") or ("" if self.start or self.end else "last-7d")
        self.step = params.get("step") or "hour"
        self.rank = params.get("rank") or "user"
        self.resource = params.get("resource") or ""

    def check(self) -> None:
        """Raises :class:`ApiError` naming a step or a ranking kind the page does not offer."""
        if self.step not in _STEPS:
            raise ApiError(400, f"step: {self.step!r} is not one of {', '.join(_STEPS)}")
        if self.rank not in _RANK:
            raise ApiError(400, f"rank: {self.rank!r} is not one of {', '.join(_RANK)}")

    def form(self, resource: str) -> str:
        """The GET form, with ``resource`` the resource selector (empty before it is known)."""
        return ('<form class="hform" method="get" action="/ui/history">'
                f'<input type="hidden" name="partition" value="{_e(self.partition)}">'
                + _select("period", ["", *PERIODS], self.period)
                + f'<label>start <input name="start" value="{_e(self.start or "")}" '
                'placeholder="2026-11-01"></label>'
                f'<label>end <input name="end" value="{_e(self.end or "")}" placeholder="2026-12-01"></label>'
                + _select("step", _STEPS, self.step) + resource + _select("rank", _RANK, self.rank)
                + '<button type="submit">show</button></form>')


def _resources(queues: Sequence[Series]) -> list[str]:
    """Every resource the queues used, waited for or were guaranteed in the range."""
    found: set[str] = set()
    for s in queues:
        for p in s.points:
            found.update(p.guaranteed or {})
            for per_resource in p.integrals.values():
                found.update(per_resource)
    return sorted(found)


_LEGEND = ('<p class="legend"><span class="k used"></span> average use per step '
           '<span class="k waitl"></span> use + waiting demand <span class="k guar"></span> guaranteed '
           '<span class="k maxl"></span> max</p>')


def _query(service: Any, c: _Choices) -> tuple[Calendar, int, int, list[Series], list[Series]]:
    """The queues per step and the ranked scopes over the whole range (:func:`series_of`)."""
    c.check()
    period = c.period or None
    _, calendar, lo, hi, queues, _ = series_of(service, c.partition, "queue", c.step, c.start, c.end,
                                                period, None, None)
    _, _, _, _, consumers, _ = series_of(service, c.partition, c.rank, "total", c.start, c.end,
                                         period, None, None)
    return calendar, lo, hi, queues, consumers


def _preferred(names: Sequence[str]) -> str:
    """The resource drawn unless one is chosen: GPUs, else cores, else the first there is."""
    for r in ("nvidia.com/gpu", "vcore"):
        if r in names:
            return r
    return names[0] if names else "vcore"


def _charts(queues: Sequence[Series], resource: str, calendar: Calendar) -> str:
    drawn = [s for s in queues if s.points][:_MAX_CHARTS]
    if not drawn:
        return '<p class="muted">nothing happened in this range</p>'
    return "".join(_chart(s.name, resource, s.points, calendar) for s in drawn)


def history_page(service: Any, partition: str, params: Mapping[str, str]) -> str:
    """The page's body for ``partition`` with the query's choices (``period`` or ``start``/``end``,
    ``step``, ``resource``, ``rank``); a bad choice is said on the page, never a 500."""
    c = _Choices(partition, params)
    try:
        calendar, lo, hi, queues, consumers = _query(service, c)
    except ApiError as exc:
        return c.form("") + f'<p class="bad">{_e(exc.message)}</p>'
    names = _resources(queues)
    resource = c.resource or _preferred(names)
    head = (f'<p class="summary">{_e(iso(lo, calendar))} → {_e(iso(hi, calendar))} '
            f'<span class="muted">({_e(calendar.name)}; per {_e(c.step)}; exact integrals of the journal)'
            '</span></p>')
    return (c.form(_select("resource", names or [resource], resource)) + head
            + f'<h2>Top {_e(c.rank)}s by {_e(_unit(resource))}-hours</h2>'
            + _ranking(consumers, resource, c.rank) + "<h2>Queues over time</h2>" + _LEGEND
            + f'<div class="hcharts">{_charts(queues, resource, calendar)}</div>')
