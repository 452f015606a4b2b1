"""Usage history endpoints under ``/ws/v1/partition/{p}/history/`` (issue 33, docs/history.md).

* ``GET …/history/usage`` — per scope (``groupBy`` queue, user, group, quota, tree, application) and
  step (minute, hour, day, week, month in the history's time zone): used, borrowed, lent and waiting
  resource-milliseconds, the guarantee and max at the step's end, waits (count, p50, p90, max in ms),
  preemptions and refusals by reason code. JSON, or CSV with ``format=csv`` (or ``Accept: text/csv``).
* ``GET …/history/cost`` — the bill of a range per scope (``history.prices``, ``borrowedprices``).

A range is ``start``/``end`` (``2026-11-01``, ``2026-11-01T08:00`` in the history's time zone, an
offset, or seconds since the epoch) or a named ``period`` (``last-month``, ``this-week``, ``last-7d`` …);
default: the last 24 hours. Bad parameters are a 400 naming the parameter.

The rows are written by :func:`history_writer_loop` on the instance that leads each partition: every
few seconds the rows of the periods that ended go to the store, and once an hour each resolution is
pruned to its retention. Another instance keeps the rows its catch-ups computed for a while, in case
the leader dies before writing them.
"""

from __future__ import annotations

import asyncio
import csv
import io
import logging
import threading
import time
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from quotaplane.history.calendar import RESOLUTIONS, Calendar
from quotaplane.history.engine import KINDS
from quotaplane.history.partition import PartitionHistory
from quotaplane.history.query import HistoryQuery, QueryError, Series, run_query
from quotaplane.history.report import bill, iso, money, named_period, parse_time
from quotaplane.history.store import HistoryStore, open_history_store
from quotaplane.server.common import errors, json
from quotaplane.server.errors import ApiError

__all__ = ["FOLLOWER_HOLD", "HISTORY_WRITE_INTERVAL", "HistoryCollector", "history_writer_loop", "router",
           "series_of", "write_round"]

_log = logging.getLogger("quotaplane.history")

#: seconds between two rounds of writing ended periods' rows to the store
HISTORY_WRITE_INTERVAL = 5.0
#: seconds between two rounds of pruning every resolution to its retention
PRUNE_INTERVAL = 3600.0
#: seconds an instance that does not lead a partition keeps the rows it computed: a live leader has
#: written the same rows within HISTORY_WRITE_INTERVAL, a dead one is replaced within its lease
FOLLOWER_HOLD = 120.0

_stores: dict[int, HistoryStore] = {}
_stores_lock = threading.Lock()


def history_store(service: Any) -> HistoryStore:
    """The history store beside the journal of the scheduler served now (one per journal)."""
    journal = service.scheduler.journal
    with _stores_lock:
        store = _stores.get(id(journal))
        if store is None:
            store = _stores[id(journal)] = open_history_store(journal)
        return store


def history_of(p: Any) -> PartitionHistory:
    """A partition's history (the state holds it; recovery replaces the state and it with it)."""
    h: PartitionHistory = p.history
    return h


def flush(service: Any, p: Any) -> int:
    """Write the rows of ``p``'s ended periods to the store (its leader only); how many."""
    h = history_of(p)
    with p.lock:
        rows = h.take_rows()
    if not rows:
        return 0
    history_store(service).write(p.name, rows)
    h.written(rows)
    return len(rows)


async def history_writer_loop(service: Any, interval: float = HISTORY_WRITE_INTERVAL) -> None:
    """Every ``interval`` s, :func:`write_round`; prune every resolution to its retention hourly."""
    pruned_at = 0.0
    while True:
        await asyncio.sleep(interval)
        prune = time.monotonic() - pruned_at >= PRUNE_INTERVAL
        await write_round(service, prune, time.monotonic())
        if prune:
            pruned_at = time.monotonic()


async def write_round(service: Any, prune: bool, now: float) -> None:
    """On each partition's leader: write its ended periods' rows (and prune them when ``prune``). On
    an instance that does not lead it: keep the rows its catch-ups computed for
    :data:`FOLLOWER_HOLD` s (``now``: monotonic seconds) — its leader writes the same rows, but if the
    leader dies before its next write this instance, taking the partition over, writes them."""
    for p in service.scheduler.partitions():
        try:
            if not service.is_leader(p.name):
                with p.lock:
                    history_of(p).hold(now, FOLLOWER_HOLD)
                continue
            await asyncio.to_thread(flush, service, p)
            if prune:
                await asyncio.to_thread(_prune, service, p)
        except Exception:  # a store hiccup: the rows stay pending (and in the next snapshot)
            _log.warning("history rows of partition %s not written", getattr(p, "name", "?"),
                         exc_info=True)


def _prune(service: Any, p: Any) -> None:
    h = history_of(p)
    engine = h.engine
    if engine is None or engine.now is None:
        return
    store = history_store(service)
    for i, res in enumerate(RESOLUTIONS):
        keep = h.settings.retention.get(res, 0)
        if keep > 0:
            store.prune(p.name, i, engine.now - keep)


def _bad(what: str) -> ApiError:
    return ApiError(400, what)


def _time(which: str, text: str, calendar: Calendar) -> int:
    try:
        return parse_time(text, calendar)
    except ValueError as exc:
        raise _bad(f"{which}: {exc}") from None


def _range(h: PartitionHistory, calendar: Calendar, start: str | None, end: str | None,
           period: str | None, now: int) -> tuple[int, int]:
    """The range asked for: ``start``/``end``, or a named ``period`` (both: the part of the period
    between them). It may be empty (then the answer has no points)."""
    hi = _time("end", end, calendar) if end is not None else now
    lo = _time("start", start, calendar) if start is not None else hi - 24 * 3_600_000
    if period is not None:
        try:
            p_lo, p_hi = named_period(period, now, calendar)
        except ValueError as exc:
            raise _bad(f"period: {exc}") from None
        lo = max(lo, p_lo) if start is not None else p_lo
        hi = min(hi, p_hi) if end is not None else p_hi
    return lo, min(hi, now)


def series_of(service: Any, partition: str, group_by: str, step: str, start: str | None, end: str | None,
            period: str | None, resource: str | None, names: Sequence[str] | None
            ) -> tuple[Any, Calendar, int, int, list[Series], int]:
    """The answer to a usage query: partition, calendar, range (ms), series and now (ms); an
    :class:`ApiError` (400/404/503) naming what is wrong otherwise (the REST routes and the
    ``/ui/history`` page both ask here)."""
    p = service.partition(partition)
    if resource is not None:
        _check_resource(p, resource)
    h = history_of(p)
    if h.engine is None:
        if h.error is not None:
            raise ApiError(503, f"the history of partition {partition!r} stopped: {h.error!r}")
        raise ApiError(404, f"history is switched off for partition {partition!r} (history.enabled)")
    now = round(time.time() * 1000)
    with p.lock:
        engine = h.engine
        calendar = engine.calendar
        lo, hi = _range(h, calendar, start, end, period, now)
        if engine.now is not None:
            now = max(now, engine.now)
        if lo >= hi or lo >= now:        # an empty range, or one in the future: nothing happened in it
            return p, calendar, lo, max(lo, hi), [], now
        memory = list(h.pending) + list(engine.outbox)
        store = history_store(service)
        try:
            q = HistoryQuery(group_by, lo, hi, step, tuple(names) if names else None, resource)
            series = run_query(q, partition=p.name, calendar=calendar, store=store, memory_rows=memory,
                               engine=engine, now=now)
        except QueryError as exc:
            raise _bad(str(exc)) from None
    return p, calendar, lo, hi, series, now


def _check_resource(p: Any, resource: str) -> None:
    """A 404 naming ``resource`` and the ones partition ``p`` knows when it knows no such resource (not
    found, like an unknown queue: the request is well formed, what it names does not exist)."""
    known = _known_resources(p)
    if resource not in known:
        raise ApiError(404, f"unknown resource {resource!r}: partition {p.name!r} knows "
                            f"{', '.join(sorted(known)) or 'none (no node, no queue limit)'}")


def _known_resources(p: Any) -> set[str]:
    """The resources a partition knows: its nodes' and its queues' limits (a filter on any other name
    is a typing mistake — ``gpu`` for ``nvidia.com/gpu`` — not a resource nobody used)."""
    with p.lock:
        names = set(p.total_capacity())
        todo = [p.state.config.root]
        while todo:
            q = todo.pop()
            for r in (q.max, q.guaranteed):
                names.update(r or ())
            todo.extend(q.queues)
    return names


def _point_json(pt: Any, calendar: Calendar) -> dict[str, Any]:
    out: dict[str, Any] = {"start": iso(pt.start, calendar), "end": iso(pt.end, calendar)}
    for m in ("used", "borrowed", "lent", "waiting"):
        out[m] = dict(sorted(pt.integrals.get(m, {}).items()))
    span = pt.end - pt.start
    used = sorted(pt.integrals.get("used", {}).items())
    out["average"] = {r: round(v / span, 6) for r, v in used} if span else {}
    out["guaranteed"] = pt.guaranteed
    out["max"] = pt.max
    w = pt.waits
    out["waits"] = {"count": w.count, "p50": w.quantile("0.5"), "p90": w.quantile("0.9"),
                    "max": w.max if w.count else None}
    out["preempted"] = {k.split(":", 1)[1]: v for k, v in pt.counts.items() if k.startswith("preempted:")}
    out["refused"] = {k.split(":", 1)[1]: v for k, v in pt.counts.items() if k.startswith("refused:")}
    return out


def _wants_csv(request: Request, fmt: str | None) -> bool:
    if fmt is not None:
        return fmt == "csv"
    return "text/csv" in request.headers.get("accept", "")


def _csv(header: list[str], rows: list[list[Any]]) -> Response:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return Response(buf.getvalue(), media_type="text/csv; charset=utf-8")


_group_q = Query(alias="groupBy", description=f"the scopes: {', '.join(KINDS)}")
_step_q = Query(description=f"the step: {', '.join(RESOLUTIONS)} (in the history's time zone), or total "
                            "(one step for the whole range)")
_period_q = Query(description="a named range (with start or end: the part of it between them)")
#: the times a range may be given in (a date, a time of day with an optional offset, epoch seconds),
#: as the OpenAPI document describes them: days 01-28 only, so that every string it matches is a time
#: (a generator of schema-valid values meets no 30 February). Documented, not enforced: the 29th to
#: the 31st are times too, and a string that is not one is a 400 saying so in words
#: (:func:`quotaplane.history.report.parse_time`), not by quoting this expression
TIME_PATTERN = (r"^([0-9]{1,11}(\.[0-9]{1,3})?|[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])"
                r"(T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9])?)?)$")
_start_q = Query(json_schema_extra={"pattern": TIME_PATTERN}, description=(
    "range start: 2026-11-01, 2026-11-01T08:00 (history time zone), an offset such as …+01:00, or "
    "seconds since the epoch"))
_end_q = Query(json_schema_extra={"pattern": TIME_PATTERN}, description="range end (as start; default now)")
_name_q = Query(alias="name", description="only these scopes (repeat the parameter)")
_top_q = Query(ge=1, le=10_000, description="only the scopes that used the most of ``resource`` (without "
                                            "it: of every resource, as shares of the partition's capacity)")
_resource_q = Query(description="only this resource")
_format_q = Query(alias="format", description="json (default) or csv (also Accept: text/csv)")

Kind = Literal["queue", "user", "group", "quota", "tree", "application"]
Period = Literal["today", "yesterday", "this-week", "last-week", "this-month", "last-month", "last-24h",
                 "last-7d", "last-30d"]
Step = Literal["minute", "hour", "day", "week", "month", "total"]
Format = Literal["json", "csv"]


class HistoryCollector:
    """``quotaplane_queue_resource_seconds_total{partition, queue, resource, metric}``: per queue the
    integral since history began, in resource-seconds (quotaplane's units: vcore milli-cores, memory
    bytes), of ``used``, ``borrowed``, ``lent`` and ``waiting``; read at scrape time from the partitions
    this instance leads (their usage keeps growing between events: level × time since)."""

    def __init__(self, service: Any) -> None:
        self._service = service

    def describe(self) -> list[Any]:
        """Nothing up front (the registry does not auto-describe)."""
        return []

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily("quotaplane_queue_resource_seconds",
                                     "per queue, resource and metric (used, borrowed, lent, waiting): the "
                                     "integral over time since history began, in resource-seconds",
                                     labels=["partition", "queue", "resource", "metric"])
        service = self._service
        scheduler = getattr(service, "scheduler", None)
        now = round(time.time() * 1000)
        for p in scheduler.partitions() if scheduler is not None else ():
            if not service.is_leader(p.name):
                continue
            with p.lock:
                engine = history_of(p).engine
                if engine is None or engine.now is None:
                    continue
                engine.propagate()
                at = max(now, engine.now) - engine.origin
                for (kind, name), scope in sorted(engine.scopes.items()):
                    if kind != "queue":
                        continue
                    for metric in ("used", "borrowed", "lent", "waiting"):
                        for res, ms in sorted(scope.integral(metric, at).items()):
                            family.add_metric([p.name, name, res, metric], ms / 1000)
        yield family


def router(service: Any) -> APIRouter:
    """The history routes bound to ``service`` (and the per-queue counters on its metrics registry)."""
    registry = getattr(getattr(service, "metrics", None), "registry", None)
    if registry is not None:
        registry.register(HistoryCollector(service))
    r = APIRouter(tags=["history"])
    read = service.tokens.dependencies("read")

    @r.get("/ws/v1/partition/{partition}/history/usage", response_model=None, dependencies=read,
           responses={200: {"content": {"application/json": {}, "text/csv": {}},
                            "description": "per scope and step"}, **errors(404, 503, auth=True)})
    async def usage(request: Request, partition: str,
                    group_by: Annotated[Kind, _group_q] = "queue",
                    step: Annotated[Step, _step_q] = "day",
                    start: Annotated[str | None, _start_q] = None,
                    end: Annotated[str | None, _end_q] = None,
                    period: Annotated[Period | None, _period_q] = None,
                    resource: Annotated[str | None, _resource_q] = None,
                    names: Annotated[list[str] | None, _name_q] = None,
                    top: Annotated[int | None, _top_q] = None,
                    fmt: Annotated[Format | None, _format_q] = None) -> Response:
        """Usage per scope and step (resource-milliseconds in quotaplane's units: vcore milli-cores,
        memory bytes); with ``top``, the top consumers of ``resource`` over the range."""
        p, calendar, lo, hi, series, _ = await asyncio.to_thread(
            series_of, service, partition, group_by, step, start, end, period, resource, names)
        if top is not None:
            # by the resource asked for, else by all resources as shares of the partition's capacity
            capacity = dict(p.total_capacity().items())
            total = {s.name: (sum(pt.integrals.get("used", {}).get(resource, 0) for pt in s.points)
                              if resource is not None else
                              sum(v / capacity[r] for pt in s.points
                                  for r, v in pt.integrals.get("used", {}).items() if capacity.get(r)))
                     for s in series}
            series = sorted(series, key=lambda s: (-total[s.name], s.name))[:top]
        if _wants_csv(request, fmt):
            rows = []
            for s in series:
                for pt in s.points:
                    res_names = sorted({r for d in pt.integrals.values() for r in d})
                    w = pt.waits
                    for rname in res_names:
                        rows.append([s.name, iso(pt.start, calendar), iso(pt.end, calendar), rname,
                                     *(pt.integrals.get(m, {}).get(rname, 0)
                                       for m in ("used", "borrowed", "lent", "waiting")),
                                     (pt.guaranteed or {}).get(rname, ""), (pt.max or {}).get(rname, ""),
                                     w.count, w.quantile("0.5") or "", w.quantile("0.9") or "",
                                     w.max if w.count else ""])
            return _csv([group_by, "start", "end", "resource", "used_ms", "borrowed_ms", "lent_ms",
                         "waiting_ms", "guaranteed", "max", "waits", "wait_p50_ms", "wait_p90_ms",
                         "wait_max_ms"], rows)
        return json({"partition": p.name, "groupBy": group_by, "step": step, "timeZone": calendar.name,
                     "start": iso(lo, calendar), "end": iso(hi, calendar), "unit": "resource-milliseconds",
                     "series": [{"name": s.name, "points": [_point_json(pt, calendar) for pt in s.points]}
                                for s in series]})

    @r.get("/ws/v1/partition/{partition}/history/cost", response_model=None, dependencies=read,
           responses={200: {"content": {"application/json": {}, "text/csv": {}},
                            "description": "the bill per scope"}, **errors(404, 503, auth=True)})
    async def cost(request: Request, partition: str,
                   group_by: Annotated[Kind, _group_q] = "queue",
                   start: Annotated[str | None, _start_q] = None,
                   end: Annotated[str | None, _end_q] = None,
                   period: Annotated[Period | None, _period_q] = None,
                   names: Annotated[list[str] | None, _name_q] = None,
                   fmt: Annotated[Format | None, _format_q] = None) -> Response:
        """The bill of a range per scope: resource-hours (core, GiB, GPU) times ``history.prices``; the
        part above the guarantee times ``history.borrowedprices`` where set."""
        p, calendar, lo, hi, series, _ = await asyncio.to_thread(
            series_of, service, partition, group_by, "total", start, end, period, None, names)
        h = history_of(p)
        settings = h.settings
        engine = h.engine
        b = bill(series, settings.prices, settings.borrowed_prices, settings.currency,
                 (lambda n: engine.parent_of(group_by, n)) if engine is not None else None)
        lines = [{"name": ln.name, "resource": ln.resource, "hours": str(round(float(ln.hours), 6)),
                  "borrowedHours": str(round(float(ln.borrowed_hours), 6)),
                  "guaranteedCost": str(money(ln.guaranteed_cost)),
                  "borrowedCost": str(money(ln.borrowed_cost)),
                  "total": str(money(ln.total))} for ln in b.lines]
        if _wants_csv(request, fmt):
            return _csv([group_by, "resource", "hours", "borrowed_hours", "guaranteed_cost", "borrowed_cost",
                         "total", "currency"],
                        [[x["name"], x["resource"], x["hours"], x["borrowedHours"], x["guaranteedCost"],
                          x["borrowedCost"], x["total"], b.currency] for x in lines])
        return json({"partition": p.name, "groupBy": group_by, "start": iso(lo, calendar),
                     "end": iso(hi, calendar), "timeZone": calendar.name, "currency": b.currency,
                     "prices": {k: str(v) for k, v in sorted(settings.prices.items())},
                     "borrowedPrices": {k: str(v) for k, v in sorted(settings.borrowed_prices.items())},
                     "lines": lines, "totals": {k: str(money(v)) for k, v in sorted(b.by_scope().items())},
                     "total": str(money(b.total)), "totalOf": sorted(b.counted)})

    return r
