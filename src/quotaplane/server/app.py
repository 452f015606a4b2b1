"""The FastAPI application factory of the quotaplane service.

``create_app(scheduler, tokens=…)`` wires the routes (YuniKorn-compatible ones and quotaplane's own),
the error model (:mod:`quotaplane.server.errors`), bearer tokens (:mod:`quotaplane.server.auth`),
metrics (:mod:`quotaplane.server.metrics`) and, for a PostgreSQL store, leadership
(:mod:`quotaplane.server.ha`).

Handlers are ``async def`` and call the partition directly: partition calls are short and hold the
partition lock briefly; the journal append inside them is the only blocking part (decision S1 needs it
before the answer anyway). Measured 3x faster than sync handlers that go through the thread pool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from pydantic import BaseModel

from quotaplane.errors import NotFoundError, NotLeaderError
from quotaplane.journal.base import Journal, StoreUnavailableError
from quotaplane.server.auth import Tokens
from quotaplane.server.browser import BrowserPolicy, is_document_type
from quotaplane.server.durability import CommitBarrier, is_exempt, partition_of_path
from quotaplane.server.errors import install_error_handlers
from quotaplane.server.forwarding import Forwarder
from quotaplane.server.ha import Leadership
from quotaplane.server.ha_partitions import PartitionLeadership
from quotaplane.server.history import HISTORY_INTERVAL, MetricsHistory
from quotaplane.server.limits import Limits, LimitsCollector, StreamSlots
from quotaplane.server.metrics import Metrics
from quotaplane.server.outer import App, Outer
from quotaplane.server.write_routing import WriteRouter
from quotaplane.server.yunikorn_events import EventRecords
from quotaplane.windows import tick as window_tick

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.cluster import Scheduler
    from quotaplane.partition import Partition

__all__ = ["CLUSTER_ID", "Service", "create_app"]

#: the ``clusterId`` YuniKorn's partition answers carry (there, the resource manager's id)
CLUSTER_ID = "quotaplane"

_log = logging.getLogger("quotaplane.server")
class _TimedJournal:
    """Delegates to a journal; times every ``append`` (the durable part of a write)."""

    __slots__ = ("_observe", "inner")

    def __init__(self, inner: Journal, observe: Callable[[float], None]) -> None:
        self.inner = inner
        self._observe = observe

    def append(self, stream: str, events: Sequence[Mapping[str, Any]], *, holder: str | None = None,
               after: int | None = None) -> int:
        """``Journal.append``, timed."""
        start = time.perf_counter()
        try:
            if after is not None:
                return self.inner.append(stream, events, holder=holder, after=after)
            return self.inner.append(stream, events, holder=holder)
        finally:
            self._observe(time.perf_counter() - start)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Service:
    """What the routes share: the scheduler (swappable on fail-over), tokens, metrics, leadership.

    ``scheduler`` is replaced as a whole when a follower takes over (it is rebuilt from the store),
    so routes always read ``service.scheduler`` per request and never keep a partition object.
    """

    def __init__(self, scheduler: Scheduler, *, tokens: Tokens,
                 leadership: Leadership | PartitionLeadership | None = None,
                 cluster_id: str = CLUSTER_ID, limits: Limits | None = None,
                 browser: BrowserPolicy | None = None) -> None:
        self.tokens = tokens
        self.leadership = leadership
        #: what a client may make the service hold (issue 32): body size, batch size, streams …
        self.limits = limits or Limits()
        #: the Host allow-list and the origins that may send changes (issue 32 item 7)
        self.browser = browser or BrowserPolicy()
        #: event streams open at once, per client address and in total (both kinds of stream)
        self.stream_slots = StreamSlots(self.limits.max_streams, self.limits.max_streams_per_client)
        #: (method, path regex, media types) of the operations documenting a non-JSON body (a form)
        self.form_routes: list[tuple[str, re.Pattern[str], frozenset[str]]] = []
        #: the server's connection limits (:mod:`quotaplane.server.guard`), set by ``serve``
        self.connection_guard: Any = None
        self.metrics = Metrics(lambda: self)
        self.metrics.registry.register(LimitsCollector(self))
        self.started = time.time()
        #: YuniKorn's ``clusterId`` of every partition (the resource manager's id there)
        self.cluster_id = cluster_id
        #: YuniKorn's event records (``/ws/v1/events``) and sampled history (``/ws/v1/history``)
        self.events = EventRecords()
        self.history = MetricsHistory()
        self._watched: dict[int, tuple[Partition, Callable[[], None]]] = {}
        #: answers wait for their partition's group commit (issue 18); see :meth:`start_group_commit`
        self.barrier = CommitBarrier(lambda: self._scheduler)
        self._group_loop: asyncio.AbstractEventLoop | None = None
        self._group_owner: int | None = None
        #: the worker threads of offloaded commits (one per partition at most is busy at a time)
        self._commit_pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="quotaplane-commit")
        #: the thread that writes automatic snapshots (written on the loop, they would stall it)
        self._snapshot_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="qp-snapshot")
        self._instrument(scheduler)
        self._scheduler: Scheduler = scheduler
        self.watch_partitions()
        #: with partitions on several instances: writes for a partition led elsewhere are relayed to
        #: its leader (:mod:`quotaplane.server.write_routing`); None answers them 503 with the leader
        self.router: WriteRouter | None = None
        #: the one-leader lease, whose late renewal holds requests (quotaplane.server.outer)
        self.lease: Leadership | None = leadership if isinstance(leadership, Leadership) else None
        if isinstance(leadership, PartitionLeadership):
            self.router = WriteRouter(leadership, Forwarder(leadership.advertise))

    @property
    def scheduler(self) -> Scheduler:
        """The scheduler served now."""
        return self._scheduler

    @scheduler.setter
    def scheduler(self, value: Scheduler) -> None:
        self._instrument(value)
        self._scheduler = value
        self.sync_group_commit()
        self.watch_partitions()

    # -- group commit -----------------------------------------------------------------------------
    def start_group_commit(self, loop: asyncio.AbstractEventLoop) -> None:
        """Journal every partition this instance leads by group commit
        (:mod:`quotaplane.journal.group_commit`): changes decided in one turn of ``loop`` share a
        transaction. Every answer then waits for the commit of what it saw
        (:mod:`quotaplane.server.durability`). Also applied to a scheduler taken over. Call it on the
        loop's thread."""
        self._group_loop = loop
        self._group_owner = threading.get_ident()        # the loop's thread: calls made on it don't wait
        self.sync_group_commit()

    @property
    def group_commit_on(self) -> bool:
        """True while answers wait for group commits (between the app's start and stop)."""
        return self._group_loop is not None

    def stop_group_commit(self) -> None:
        """Commit what is queued and journal one change per append again (the app's shutdown)."""
        self._group_loop = None
        self._scheduler.stop_group_commit()
        self._snapshot_pool.submit(lambda: None).result()     # the snapshots under way are written

    def sync_group_commit(self) -> None:
        """Group commit on exactly the partitions this instance leads (a follower writes nothing);
        called after every leadership round. On the loop's thread."""
        if self._group_loop is None:
            return
        scheduler = self._scheduler
        if self.leadership is None or self.leadership.is_leader(None) or self.is_partitioned:
            # a remote store (PostgreSQL): commit on a worker thread, deciding goes on meanwhile; a
            # local SQLite commit is cheaper than the hand-over
            remote = str(getattr(scheduler.journal, "url", "")).startswith(("postgresql:", "postgres:"))
            scheduler.start_group_commit(schedule=self._group_loop.call_soon, owner=self._group_owner,
                                         offload=self._offload if remote else None,
                                         background=self._snapshot_pool.submit)
        for p in scheduler.partitions():
            if p.group is not None and not self.is_leader(p.name):
                p.stop_group_commit()

    def _offload(self, append: Callable[[], int], landed: Callable[[int | BaseException], None]) -> None:
        loop = self._group_loop
        assert loop is not None

        def done(fut: asyncio.Future[int]) -> None:
            if fut.cancelled():
                landed(StoreUnavailableError("the commit was cancelled (shutting down)"))
                return
            exc = fut.exception()
            landed(exc if exc is not None else fut.result())

        loop.run_in_executor(self._commit_pool, append).add_done_callback(done)

    @property
    def is_partitioned(self) -> bool:
        """True when partitions are led by several instances (``serve --partitions``)."""
        return isinstance(self.leadership, PartitionLeadership)

    async def refresh_for_read(self, method: str, path: str) -> None:
        """With partitions led by several instances: before a request about ``/ws/…`` state that is
        served here (not relayed to a leader), bring the partitions it shows that another instance
        leads up to their streams (one partition, or every one for a cluster-wide read). Such
        partitions are not replayed in the background (that would cost every instance the work of
        all the others), so this is where they catch up, and a read through any instance sees every
        change acknowledged before it. On the loop's thread; the replay runs on a worker thread."""
        leadership = self.leadership
        if (not isinstance(leadership, PartitionLeadership) or not path.startswith("/ws/")
                or is_exempt(path)):
            return
        scheduler = self._scheduler
        name = partition_of_path(path)
        leadership.check_read(name)     # a lease that may have expired: serve nothing of it (#32 4)
        if name is None:
            if method not in ("GET", "HEAD"):
                return
            await asyncio.to_thread(functools.partial(scheduler.catch_up, skip=leadership.led()))
        elif not leadership.is_leader(name):
            await asyncio.to_thread(scheduler.refresh, name)
        else:
            return
        self.watch_partitions()             # a partition restored from its snapshot is a new object

    def watch_partitions(self) -> None:
        """Feed the event records from every partition served (idempotent; called at start, after a
        fail-over or a configuration change, and on each timer round, so a new partition is watched)."""
        current = {id(p): p for p in self._scheduler.partitions()}
        for key in [k for k in self._watched if k not in current]:
            _, unsubscribe = self._watched.pop(key)
            unsubscribe()
        for key, p in current.items():
            if key not in self._watched:
                stop_records = p.listen(self.events.listener(p.name))
                stop_metrics = p.listen(functools.partial(self.metrics.events, p.name))

                def stop(a: Callable[[], None] = stop_records, b: Callable[[], None] = stop_metrics) -> None:
                    a()
                    b()
                self._watched[key] = (p, stop)

    def _instrument(self, scheduler: Scheduler) -> None:
        # Journal write latency (metrics): put a timing proxy where the scheduler and its partitions
        # hold the journal (journal classes are slotted, so their methods cannot be wrapped in place).
        current = scheduler.journal
        if isinstance(current, _TimedJournal):
            journal = current
        else:
            journal = _TimedJournal(current, self.metrics.journal_observe)
            scheduler.journal = cast(Journal, journal)      # a Journal by delegation
        for p in scheduler.partitions():
            if p.journal is journal.inner:
                p.journal = cast(Journal, journal)

    def form_types(self, method: str, path: str) -> frozenset[str]:
        """The media types besides JSON and YAML that the operation at ``method path`` documents
        for its body (the web page's login form), so a change in such a type is not refused."""
        for m, regex, kinds in self.form_routes:
            if m == method and regex.match(path):
                return kinds
        return frozenset()

    # -- leadership -------------------------------------------------------------------------------
    def is_leader(self, partition: str | None = None) -> bool:
        """True when this instance may write ``partition`` (None: the configuration); always without
        a shared store."""
        return self.leadership is None or bool(self.leadership.is_leader(partition))

    def ensure_writable(self, partition: str | None = None) -> None:
        """Raise :class:`NotLeaderError` (answered 503 with ``leader``) unless this instance writes
        ``partition`` (None: the configuration)."""
        if self.leadership is not None and not self.leadership.is_leader(partition):
            leader = self.leadership.leader_url(partition)
            what = "the configuration" if partition is None else f"partition {partition!r}"
            raise NotLeaderError(f"this instance does not lead {what}; the leader is {leader or 'unknown'}",
                                 leader=leader)

    # -- lookups ----------------------------------------------------------------------------------
    def partition(self, name: str) -> Partition:
        """The partition ``name``; :class:`NotFoundError` "Partition not found" otherwise."""
        try:
            p = self.scheduler.partition(name)
        except (NotFoundError, KeyError):
            raise NotFoundError("Partition not found") from None
        if p.recovering and not p.recover():
            # memory may hold a change the store refused: serve nothing of it (issue 14 #2)
            raise StoreUnavailableError(f"partition {p.name!r} is recovering from a store failure")
        return p


_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}

#: the answers of the outer layer, possible for every operation (403) or every one with a body
_EXTRA_ERRORS = {
    403: "the role or queue ACL does not allow this, the Host is not allowed, or a change comes from "
         "another origin's page",
    413: "the body is larger than max-body-bytes (or a batch longer than max-batch)",
    415: "a change whose Content-Type is not JSON or YAML",
}


def _fix_openapi(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace FastAPI's 422 responses by the documented 400 error body (S3)."""
    for path_item in schema.get("paths", {}).values():
        for op in path_item.values():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            responses = op["responses"]
            responses.pop("422", None)
            # every operation: a Host outside the allow-list or a change from another origin (issue 32
            # item 7); with a body: too large, or of a type that is not JSON or YAML
            responses.setdefault("403", {"description": _EXTRA_ERRORS[403]})
            if "requestBody" in op:
                responses.setdefault("413", {"description": _EXTRA_ERRORS[413]})
                responses.setdefault("415", {"description": _EXTRA_ERRORS[415]})
            for code, resp in list(responses.items()):
                if code.startswith(("4", "5")):
                    resp.setdefault("content", {"application/json": {"schema": _ERROR_REF}})
    comps = schema.get("components", {}).get("schemas", {})
    comps.pop("HTTPValidationError", None)
    comps.pop("ValidationError", None)
    return schema


def _form_routes(app: FastAPI) -> list[tuple[str, re.Pattern[str], frozenset[str]]]:
    """(method, path regex, media types) of every operation whose body is documented in a type that
    is neither JSON nor YAML: a FastAPI ``Form`` body or ``openapi_extra`` content types."""
    from fastapi.routing import APIRoute

    def every(routes: Sequence[Any]) -> Iterator[Any]:
        for route in routes:            # an included router may be kept as one entry
            inner = getattr(route, "original_router", None)
            yield from every(inner.routes) if inner is not None else (route,)

    out: list[tuple[str, re.Pattern[str], frozenset[str]]] = []
    for route in every(app.routes):
        if not isinstance(route, APIRoute):
            continue
        kinds: set[str] = set()
        field = route.body_field
        if field is not None:
            kinds.add(str(getattr(field.field_info, "media_type", "application/json")))
        body = (route.openapi_extra or {}).get("requestBody")
        if isinstance(body, dict):
            kinds.update(str(k) for k in body.get("content", {}))
        kinds = {k.lower() for k in kinds if not is_document_type(k.lower())}
        if kinds:
            for method in route.methods or ():
                out.append((method, route.path_regex, frozenset(kinds)))
    return out


def _add_metrics_route(app: FastAPI, service: Service) -> None:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    from quotaplane.server.common import errors

    @app.get("/metrics", response_model=None, tags=["operations"],
             dependencies=service.tokens.dependencies("read"),
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "Prometheus text format"}, **errors(auth=True)})
    async def metrics() -> Response:
        """Prometheus metrics: decisions, usage gauges, request and journal latency."""
        return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz", response_model=None, tags=["operations"],
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "the process answers"}, **errors()})
    async def healthz() -> Response:
        """Liveness (open, for probes): the process answers."""
        return Response("ok\n", media_type="text/plain")

    @app.get("/readyz", response_model=None, tags=["operations"],
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "ready to serve"},
                        **errors(),
                        503: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "not ready: the reason"}})
    async def readyz() -> Response:
        """Readiness (open, for probes): every partition is consistent with its store (none is
        recovering from a store failure) and the store takes writes; 503 with the reason otherwise."""
        problems = []
        for p in service.scheduler.partitions():
            if p.recovering and not p.recover():
                problems.append(f"partition {p.name}: recovering from a store failure")
            elif not p.healthy:
                problems.append(f"partition {p.name}: the store refuses writes")
        if problems:
            return Response("\n".join(problems) + "\n", 503, media_type="text/plain")
        return Response("ok\n", media_type="text/plain")

    @app.get("/ws/v1/metrics", response_model=None, tags=["yunikorn"],
             dependencies=service.tokens.dependencies("read"),
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "Prometheus text format"}, **errors(auth=True)})
    async def ws_metrics() -> Response:
        """The same metrics where YuniKorn serves them (its shipped Prometheus config scrapes here)."""
        return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)


#: Seconds between two rounds of partition timeouts (placeholders, Completing → Completed, Starting →
#: Running, Completed → Expired; elastic reclaim). The shortest default timeout is 30 s.
TIMEOUTS_INTERVAL = 2.0


async def timeouts_loop(service: Service, interval: float = TIMEOUTS_INTERVAL) -> None:
    """On the leader, apply every partition's due timeouts (journalled by the partition) each round."""
    while True:
        await asyncio.sleep(interval)
        service.watch_partitions()
        open_and_close_windows(service)
        for p in service.scheduler.partitions():
            if not service.is_leader(p.name):
                continue
            try:
                p.check_timeouts()
            except Exception:  # a journal hiccup or a lost lease: try again next round
                _log.warning("timeouts of partition %s failed", getattr(p, "name", "?"), exc_info=True)


def open_and_close_windows(service: Service) -> list[str]:
    """On the configuration's leader, open and close the time windows due now (docs/windows.md): each
    edge is a configuration change, journalled; a failure is logged and retried next round."""
    if not service.is_leader(None):
        return []
    scheduler = service.scheduler
    try:
        changed = window_tick(scheduler.config_text, scheduler.update_config, scheduler.clock())
    except Exception:  # a journal hiccup or a lost lease: try again next round
        _log.warning("time windows could not be applied", exc_info=True)
        return []
    for line in changed:
        _log.info("%s", line)
    return changed


async def history_loop(service: Service, interval: float = HISTORY_INTERVAL) -> None:
    """YuniKorn's internal metrics collector: one history sample each ``interval`` seconds."""
    while True:
        await asyncio.sleep(interval)
        partitions = service.scheduler.partitions()
        if service.is_partitioned:
            # the partitions led elsewhere are sampled by their leaders (their copies here are only
            # brought up to date by a read, and one may be replaying on a worker thread right now)
            partitions = [p for p in partitions if service.is_leader(p.name)]
        try:
            service.history.sample(partitions)
        except Exception:  # a partition being rebuilt: the next round samples again
            _log.warning("history sample failed", exc_info=True)


def create_app(scheduler: Scheduler, *, tokens: Tokens | None = None,
               leadership: Leadership | PartitionLeadership | None = None,
               loopback_only: bool = False, title: str = "quotaplane", fast_path: bool = True,
               timeouts_interval: float = TIMEOUTS_INTERVAL,
               schedule_interval: float | None = None,
               history_interval: float = HISTORY_INTERVAL, group_commit: bool = True,
               limits: Limits | None = None, allowed_hosts: Sequence[str] | None = None,
               allowed_origins: Sequence[str] = ()) -> FastAPI:
    """Build the service app around ``scheduler`` (a :class:`quotaplane.Scheduler`).

    ``tokens``: bearer tokens per role (none: every request is accepted). ``leadership``: the
    fail-over helper of :mod:`quotaplane.server.ha` (None: this instance always leads).
    ``loopback_only``: refuse non-loopback clients (``serve`` sets it when no token is configured).
    ``fast_path``: serve ``POST …/allocations`` from the middleware (same behaviour, less overhead).
    ``timeouts_interval``: seconds between the leader's ``Partition.check_timeouts`` rounds.
    ``schedule_interval``: seconds between two rounds of the timer's scheduling cycle (a partition
    whose waiting asks may fit now gets a cycle even with ``auto_schedule`` off); None: every half
    second.
    ``history_interval``: seconds between two samples of ``/ws/v1/history`` (YuniKorn: a minute).
    ``group_commit``: journal concurrent changes of a partition in one transaction while the app
    runs (:mod:`quotaplane.journal.group_commit`); every answer still waits for its commit (S1).
    ``limits``: body and batch sizes, event streams (:mod:`quotaplane.server.limits`; the
    connection limits are the server's, :mod:`quotaplane.server.guard`). ``allowed_hosts``: the
    ``Host`` allow-list (None: any host; ``serve`` gives loopback names when no token is configured);
    ``allowed_origins``: origins besides the service's own whose pages may send changes and read
    answers (:mod:`quotaplane.server.browser`).
    """
    from quotaplane.server import (
        routes_asks,
        routes_budgets,
        routes_core,
        routes_elastic,
        routes_eta,
        routes_forest,
        routes_history,
        routes_yunikorn,
        routes_yunikorn_apps,
        routes_yunikorn_cluster,
        ui,
    )

    service = Service(scheduler, tokens=tokens or Tokens(), leadership=leadership, limits=limits,
                      browser=BrowserPolicy(allowed_hosts, allowed_origins))

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> Any:
        if group_commit:
            service.start_group_commit(asyncio.get_running_loop())
        if leadership is not None:
            await leadership.start(service)
        # the timer side of the scheduling cycle (queueing): pending asks are retried periodically
        loop_task = asyncio.create_task(routes_asks.scheduling_loop(
            service, routes_asks.SCHEDULE_INTERVAL if schedule_interval is None else schedule_interval))
        # the clock of the application lifecycle (seed 001 timeouts) and of elastic reclaim (E5)
        timeouts_task = asyncio.create_task(timeouts_loop(service, timeouts_interval))
        history_task = asyncio.create_task(history_loop(service, history_interval))
        # usage history (issue 33): the leader writes the rows of ended periods to the store
        rollup_task = asyncio.create_task(routes_history.history_writer_loop(service))
        try:
            yield
        finally:
            loop_task.cancel()
            timeouts_task.cancel()
            history_task.cancel()
            rollup_task.cancel()
            if leadership is not None:
                await leadership.stop()
            if service.router is not None:
                await service.router.forwarder.aclose()
            if group_commit:
                service.stop_group_commit()

    app = App(title=title, version="0.1.0", lifespan=lifespan,
                  description="quotaplane: quota decisions for shared clusters (YuniKorn-compatible "
                              "endpoints under /ws/v1/). Every error is {status_code, message, description}.",
                  docs_url="/docs", redoc_url=None)
    app.state.service = service
    install_error_handlers(app)
    for module in (routes_yunikorn, routes_yunikorn_cluster, routes_yunikorn_apps, routes_core, routes_asks,
                   routes_elastic, routes_forest, routes_history, routes_eta, routes_budgets, ui):
        app.include_router(module.router(service))
    _add_metrics_route(app, service)
    service.form_routes = _form_routes(app)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            from quotaplane.server.common import DOCUMENTED_BODIES
            from quotaplane.server.models import ErrorBody

            comps = schema.setdefault("components", {}).setdefault("schemas", {})
            models: list[type[BaseModel]] = [ErrorBody, *DOCUMENTED_BODIES.values()]
            for model in models:
                doc = model.model_json_schema(ref_template="#/components/schemas/{model}")
                comps.update(doc.pop("$defs", {}))
                comps[model.__name__] = doc
            batch = comps.get("BatchBody", {}).get("properties", {}).get("allocations")
            if isinstance(batch, dict):
                batch["maxItems"] = service.limits.max_batch       # the configured max-batch
            app.openapi_schema = _fix_openapi(schema)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    app.add_middleware(Outer, service=service, loopback_only=loopback_only, fast=fast_path)
    if fast_path:
        app.fast = Outer(app.router, service=service, loopback_only=loopback_only, fast=True)
    return app
