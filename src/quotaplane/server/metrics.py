"""Prometheus metrics of the service (``GET /metrics`` and ``/ws/v1/metrics``); ``docs/metrics.md``.

Counters and histograms are updated on the request path (a few microseconds each) or from the
journalled events (preemptions); the quantities (queues, users, groups, capacity, elastic quotas,
quota trees) are produced at scrape time by a collector that reads the partitions, so the hot path
pays nothing for them. Every app gets its own registry so several apps can live in one process.

The families follow YuniKorn's and Kueue's conventions: one family per object kind with a ``state``
label for the quantities (YuniKorn's ``yunikorn_queue_resource{state=…}``), a decision counted once
with its outcome and first reason (Kueue's ``admission_attempts_total{result}``), an admission
latency histogram, evictions by reason, build info, and the process and platform collectors.

Beside quotaplane's own families, the ``yunikorn_…`` families that YuniKorn's scheduler serves and
its Grafana dashboard (yunikorn-k8shim ``deployments/grafana-dashboard``) reads, with YuniKorn's names,
types, labels and buckets: ``yunikorn_scheduler_application_total{state}``,
``…_application_submission_total{result}``, ``…_container_allocation_attempt_total{state}``,
``…_scheduling_latency_milliseconds`` (observed in seconds, as YuniKorn does despite the name),
``…_node{state}``, ``…_<resource>_node_usage_total{range}`` (nodes per tenth of use), and per queue
``yunikorn_queue_app{queue,state}`` and ``yunikorn_queue_resource{queue,state,resource}`` — also under
the per-queue names the dashboard's queue panels select (``yunikorn_root_<queue>_queue_app``,
``…_queue_resource``). A ``partition`` label is added to the queue families, so two partitions with
the same queue path stay apart.
"""

from __future__ import annotations

import bisect
import platform
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

import quotaplane.events as E
from quotaplane.policies.protocol import Decision

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_ADMISSION_BUCKETS = (0.00002, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1)
_JOURNAL_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0)
#: YuniKorn's buckets for its scheduler latencies: prometheus.ExponentialBuckets(0.0001, 10, 8)
_YUNIKORN_BUCKETS = tuple(0.0001 * 10**i for i in range(8))
#: YuniKorn's node usage ranges (pkg/metrics/scheduler.go), a tenth of use each
_USAGE_RANGES = ("[0,10%]", "(10%,20%]", "(20%,30%]", "(30%,40%]", "(40%,50%]", "(50%,60%]", "(60%,70%]",
                 "(70%,80%]", "(80%,90%]", "(90%,100%]")


#: a tally adds what it holds to its metric at least this often (bounded memory between scrapes)
_FOLD_EVERY = 4096


class _Tally:
    """The observations of one histogram or counter (a labelled child or an unlabelled metric), kept
    in a deque and added to it in one step at scrape time (:class:`_Registry`) or every
    :data:`_FOLD_EVERY` of them.

    Why (issue 38, the service path): prometheus_client's ``observe`` takes a lock and walks the
    buckets in Python — ~6,000 instructions, and an allocation made four observations and three
    increments (46,000 of its 536,000 instructions in-process, callgrind); a deque append is atomic
    and a few hundred. Nothing is lost or counted twice from any thread: values are taken out one
    ``popleft`` at a time under the fold's lock, and whatever is appended meanwhile stays for the
    next fold. The exposition is the metric's own, unchanged (a test compares it with observing
    directly)."""

    __slots__ = ("_bounds", "_metric", "_queue")

    def __init__(self, metric: Any, histogram: bool) -> None:
        self._metric = metric
        #: a histogram's upper bounds, ``+Inf`` last (prometheus_client's, read once); None: a counter
        self._bounds: list[float] | None = list(metric._upper_bounds) if histogram else None
        self._queue: deque[float] = deque()

    def observe(self, value: float) -> None:
        """One observation (a histogram) or increment by ``value`` (a counter)."""
        queue = self._queue
        queue.append(value)
        if len(queue) >= _FOLD_EVERY:
            self.fold()

    def inc(self, amount: float = 1) -> None:
        """A counter's increment (:meth:`observe`)."""
        self.observe(amount)

    def fold(self) -> None:
        """Add what was observed to the metric."""
        queue = self._queue
        with _FOLD_LOCK:
            values = [queue.popleft() for _ in range(len(queue))]
        if not values:
            return
        metric, bounds = self._metric, self._bounds
        if bounds is None:
            metric.inc(sum(values))
            return
        # a value counts in the first bucket whose bound is >= it (prometheus_client's observe)
        counts: dict[int, int] = {}
        for v in values:
            i = bisect.bisect_left(bounds, v)
            counts[i] = counts.get(i, 0) + 1
        buckets = metric._buckets
        for i, n in counts.items():
            buckets[i].inc(n)
        metric._sum.inc(sum(values))


_FOLD_LOCK = threading.Lock()


class _Registry(CollectorRegistry):
    """A registry that folds its tallies (:class:`_Tally`) into their metrics before every collection
    (a scrape, ``get_sample_value``)."""

    def __init__(self) -> None:
        super().__init__(auto_describe=False)
        self.tallies: list[_Tally] = []
        self._tallies_lock = threading.Lock()

    def tally(self, metric: Any, histogram: bool) -> _Tally:
        """A new tally of ``metric``, folded before each collection."""
        t = _Tally(metric, histogram)
        with self._tallies_lock:
            self.tallies = [*self.tallies, t]
        return t

    def collect(self) -> Iterator[Metric]:
        """Fold every tally, then collect as prometheus_client does."""
        for t in self.tallies:
            t.fold()
        yield from super().collect()


class Metrics:
    """The metric objects of one app. The hot path's observations go through tallies
    (:class:`_Tally`), folded in at scrape time."""

    def __init__(self, state_source: Callable[[], Any] | None = None) -> None:
        self.registry = _Registry()
        self.requests = Counter("quotaplane_http_requests", "HTTP requests served",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("quotaplane_http_request_duration_seconds", "HTTP request latency",
                                 ["method", "route"], buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.decisions = Counter("quotaplane_admission_decisions",
                                 "admission decisions, each counted once: result and first reason code",
                                 ["result", "reason"], registry=self.registry)
        self.admission_seconds = Histogram("quotaplane_admission_duration_seconds",
                                           "time to decide one allocation (every policy checked and applied)",
                                           buckets=_ADMISSION_BUCKETS, registry=self.registry)
        self.preempted = Counter("quotaplane_preempted_allocations",
                                 "allocations taken away, by partition and reason code",
                                 ["partition", "reason"], registry=self.registry)
        build = Gauge("quotaplane_build_info", "1, labelled with the version and the Python running it",
                      ["version", "python"], registry=self.registry)
        from quotaplane import __version__

        build.labels(__version__, platform.python_version()).set(1)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.whatif = Counter("quotaplane_whatif", "what-if decisions by result", ["result"],
                              registry=self.registry)
        self.journal_write = Histogram("quotaplane_journal_write_seconds", "journal append latency",
                                       buckets=_JOURNAL_BUCKETS, registry=self.registry)
        # YuniKorn's own families (docs/metrics.md "YuniKorn's families")
        self.yk_attempts = Counter("yunikorn_scheduler_container_allocation_attempt",
                                   "Total number of attempts to allocate containers. State of the attempt "
                                   "includes `allocated`, `rejected`, `error`, `released`",
                                   ["state"], registry=self.registry)
        self.yk_submissions = Counter("yunikorn_scheduler_application_submission",
                                      "Total number of application submissions. State of the attempt "
                                      "includes `new`, `accepted` and `rejected`.", ["result"],
                                      registry=self.registry)
        self.yk_latency = Histogram("yunikorn_scheduler_scheduling_latency_milliseconds",
                                    "Latency of the main scheduling routine, in seconds.",
                                    buckets=_YUNIKORN_BUCKETS, registry=self.registry)
        for state in ("allocated", "rejected", "released"):
            self.yk_attempts.labels(state)
        for result in ("new", "accepted", "rejected"):
            self.yk_submissions.labels(result)
        # children bound once: a label lookup costs more than the increment (once per decision)
        self._yk_rejected = self.yk_attempts.labels("rejected")
        self._yk_allocated = self.yk_attempts.labels("allocated")
        self._yk_released = self.yk_attempts.labels("released")
        self._yk_new = self.yk_submissions.labels("new")
        self._yk_accepted = self.yk_submissions.labels("accepted")
        tally = self.registry.tally
        #: one decision's time, observed in quotaplane's histogram and in YuniKorn's
        self.admission = _Observers(tally(self.admission_seconds, True), tally(self.yk_latency, True))
        #: one journal append's time (``_TimedJournal``)
        self.journal_observe = tally(self.journal_write, True).observe
        self._allocated = tally(self.decisions.labels("allocated", "none"), False)
        self._yk_allocated_tally = tally(self._yk_allocated, False)
        self._yk_released_tally = tally(self._yk_released, False)
        self._refused: dict[str, Any] = {}
        self._latency_children: dict[tuple[str, str], Any] = {}
        self._request_children: dict[tuple[str, str, int], Any] = {}
        if state_source is not None:
            self.registry.register(_UsageCollector(state_source))

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Record one served request (children cached: label lookup is the slow part)."""
        key = (method, route)
        child = self._latency_children.get(key)
        if child is None:
            child = self._latency_children[key] = self.registry.tally(
                self.latency.labels(method, route), True)
        child.observe(seconds)
        rkey = (method, route, status)
        rchild = self._request_children.get(rkey)
        if rchild is None:
            rchild = self._request_children[rkey] = self.registry.tally(
                self.requests.labels(method, route, str(status)), False)
        rchild.inc()

    def observe_decision(self, decision: Decision) -> None:
        """Count one admission decision, once: ``allocated``, or ``refused`` with its first reason."""
        if decision.allocated:
            self._allocated.inc()
            return
        self._yk_rejected.inc()
        code = decision.reasons[0].code if decision.reasons else "unknown"
        child = self._refused.get(code)
        if child is None:
            child = self._refused[code] = self.decisions.labels("refused", code)
        child.inc()

    def events(self, partition: str, events: Sequence[E.Event], _t: float) -> None:
        """A partition's journalled events (``Partition.listen``): count what was preempted, by
        reason (elastic reclaim, queue and quota preemption, quota-tree preemption)."""
        allocated = released = added = 0
        for ev in events:
            kind = type(ev)
            if kind is E.Allocated:
                allocated += 1
            elif kind is E.Released:
                released += 1
            elif kind is E.AppAdded:
                added += 1
            elif type(ev) is E.Preempted:
                self.preempted.labels(partition, ev.reason.get("code", "")).inc(len(ev.keys))
            elif type(ev) is E.Noted and ev.notice.get("type") == "preempted":
                reason = (ev.notice.get("reason") or {}).get("code", "")
                self.preempted.labels(partition, str(reason)).inc(len(ev.notice.get("allocations") or ()))
        self._count(allocated, released, added)

    def _count(self, allocated: int, released: int, added: int) -> None:
        """YuniKorn's allocation attempts and application submissions of one commit."""
        if allocated:                      # asks a cycle allocated count too, as in YuniKorn
            self._yk_allocated_tally.inc(allocated)
        if released:
            self._yk_released_tally.inc(released)
        if added:                          # an application placed is a submission accepted
            self._yk_new.inc(added)
            self._yk_accepted.inc(added)

    def observe_decisions(self, decisions: Iterable[Decision]) -> int:
        """Count a batch's decisions (one counter step for all the admitted ones); return how many
        were admitted."""
        allocated = 0
        for decision in decisions:
            if decision.allocated:
                allocated += 1
            else:
                self.observe_decision(decision)
        if allocated:
            self._allocated.inc(allocated)
        return allocated

    def observe_whatif(self, decision: Decision) -> None:
        """Count one what-if answer."""
        self.whatif.labels("allocated" if decision.allocated else "refused").inc()


class _Observers:
    """Several histograms observed as one (``observe``)."""

    __slots__ = ("_targets",)

    def __init__(self, *targets: _Tally) -> None:
        self._targets = targets

    def observe(self, value: float) -> None:
        """Observe ``value`` in every target."""
        for t in self._targets:
            t.observe(value)


def _resource_items(r: Mapping[str, int] | None) -> Iterator[tuple[str, int]]:
    if not r:
        return
    for name in sorted(r):
        yield name, int(r[name])


def _walk_queue(dao: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield dao
    for child in dao.get("children") or ():
        yield from _walk_queue(child)


class _UsageCollector:
    """Reads the partitions at scrape time (under each partition's lock)."""

    def __init__(self, state_source: Callable[[], Any]) -> None:
        self._source = state_source

    def collect(self) -> Iterator[Metric]:
        service = self._source()
        scheduler = getattr(service, "scheduler", None)
        if scheduler is None:
            return
        q_res = GaugeMetricFamily("quotaplane_queue_resource",
                                  "per queue and resource: guaranteed, max, allocated, pending",
                                  labels=["partition", "queue", "state", "resource"])
        q_asks = GaugeMetricFamily("quotaplane_queue_pending_asks", "waiting asks per leaf queue",
                                   labels=["partition", "queue"])
        q_share = GaugeMetricFamily("quotaplane_queue_weighted_share", "Kueue's fair sharing: the weighted "
                                    "dominant resource share per queue (docs/fair-sharing.md)",
                                    labels=["partition", "queue"])
        elastic = GaugeMetricFamily("quotaplane_elastic_quota",
                                    "per elastic quota and resource: min, max, runtime, used, request",
                                    labels=["partition", "quota", "state", "resource"])
        tree = GaugeMetricFamily("quotaplane_quota_tree_node",
                                 "per quota-tree node and resource: quota, allocated (its subtree)",
                                 labels=["partition", "tree", "node", "state", "resource"])
        users = GaugeMetricFamily("quotaplane_user_usage", "resource usage per user (whole partition)",
                                  labels=["partition", "user", "resource"])
        user_apps = GaugeMetricFamily("quotaplane_user_running_applications", "running apps per user",
                                      labels=["partition", "user"])
        groups = GaugeMetricFamily("quotaplane_group_usage", "resource usage per group",
                                   labels=["partition", "group", "resource"])
        cap = GaugeMetricFamily("quotaplane_partition_capacity", "registered node capacity",
                                labels=["partition", "resource"])
        used = GaugeMetricFamily("quotaplane_partition_used", "used capacity",
                                 labels=["partition", "resource"])
        apps = GaugeMetricFamily("quotaplane_applications", "applications known", labels=["partition"])
        leader = GaugeMetricFamily("quotaplane_leader", "1 when this instance leads the partition",
                                   labels=["partition"])
        commits = CounterMetricFamily("quotaplane_group_commits", "journal transactions of group commit "
                                      "(since group commit started on this partition)", labels=["partition"])
        committed = CounterMetricFamily("quotaplane_group_committed_changes", "changes those transactions "
                                        "held (changes per commit: this / quotaplane_group_commits_total)",
                                        labels=["partition"])
        if getattr(service, "is_partitioned", False):
            # partitions led by another instance: their leader reports them (a sum over the instances
            # counts each once); here only that this one does not lead them
            served = [p for p in scheduler.partitions() if service.is_leader(p.name)]
            for name in sorted({pc.name for pc in scheduler.config.partitions}
                               | {p.name for p in scheduler.partitions()}):
                if not service.is_leader(name):
                    leader.add_metric([name], 0.0)
        else:
            served = scheduler.partitions()
        plugged: dict[str, GaugeMetricFamily] = {}      # the policies' own (plug-in protocol)
        for p in served:
            name = p.name
            group = p.group
            if group is not None:
                commits.add_metric([name], group.groups)
                committed.add_metric([name], group.changes)
            with p.lock:
                queue_dao = p.queues.dao(None, subtree=True, partition=name)
                shares = p.queues.weighted_shares()
                user_list = p.ugm.users_usage()
                group_list = p.ugm.groups_usage()
                total = p.total_capacity()
                in_use = p.used_capacity()
                n_apps = len(p.applications())
                asks: dict[str, int] = {}
                for ask in p.pending():
                    app = p.application(ask.application_id)
                    if app is not None:
                        asks[app.queue_path] = asks.get(app.queue_path, 0) + 1
                _extension_samples(p, elastic, tree)
                _policy_samples(p, plugged)
            _queue_samples(name, queue_dao, q_res)
            for queue, count in sorted(asks.items()):
                q_asks.add_metric([name, queue], count)
            for queue, value in shares:
                q_share.add_metric([name, queue], value)
            _tracker_samples(name, user_list, "userName", users, user_apps)
            _tracker_samples(name, group_list, "groupName", groups, None)
            for res, amount in _resource_items(total):
                cap.add_metric([name, res], amount)
            for res, amount in _resource_items(in_use):
                used.add_metric([name, res], amount)
            apps.add_metric([name], n_apps)
            leader.add_metric([name], 1.0 if service.is_leader(name) else 0.0)
        yield from (q_res, q_asks, q_share, elastic, tree, users, user_apps, groups, cap, used, apps, leader,
                    commits, committed)
        yield from (plugged[k] for k in sorted(plugged))
        yield from _yunikorn_families(served)


_QUEUE_STATES = (("guaranteed", "guaranteedResource"), ("max", "maxResource"),
                 ("allocated", "allocatedResource"), ("pending", "pendingResource"))


def _queue_samples(partition: str, dao: Mapping[str, Any], family: GaugeMetricFamily) -> None:
    for q in _walk_queue(dao):
        qname = str(q.get("queuename", ""))
        for state, key in _QUEUE_STATES:
            for res, amount in _resource_items(q.get(key)):
                family.add_metric([partition, qname, state, res], amount)


def _extension_samples(p: Any, elastic: GaugeMetricFamily, tree: GaugeMetricFamily) -> None:
    """The elastic quotas' and quota trees' quantities (partition lock held)."""
    from quotaplane.server.extensions import policy_of

    pol = policy_of(p, "elastic")
    if pol is not None:
        for qname in sorted(pol.engine().quota_names()):
            view = pol.engine().describe(qname)
            for state in ("min", "max", "runtime", "used", "request"):
                for res, amount in _resource_items(view.get(state)):
                    elastic.add_metric([p.name, qname, state, res], amount)
    pol = policy_of(p, "forest")
    if pol is not None:
        qm = pol.engine()
        for tname in sorted(qm.tree_names()):
            for node in qm.node_ids(tname):
                for state, amounts in (("quota", qm.node_quota(tname, node)),
                                       ("allocated", qm.node_allocated(tname, node))):
                    for res, amount in _resource_items(amounts):
                        tree.add_metric([p.name, tname, node, state, res], amount)


def _policy_samples(p: Any, families: dict[str, GaugeMetricFamily]) -> None:
    """Each extension policy's own samples (``QuotaPolicy.metrics``): gauge ``quotaplane_policy_<name>``
    labelled by partition, policy and the sample's labels (partition lock held)."""
    for key, policy in p.extensions():
        for s in policy.metrics():
            names = [k for k, _ in s.labels]
            family = families.get(s.name)
            if family is None:
                family = families[s.name] = GaugeMetricFamily(f"quotaplane_policy_{s.name}", s.help,
                                                              labels=["partition", "policy", *names])
            family.add_metric([p.name, key, *(v for _, v in s.labels)], s.value)


def _tracker_samples(partition: str, trackers: list[dict[str, Any]], key: str, usage: GaugeMetricFamily,
                     running: GaugeMetricFamily | None) -> None:
    """Root-level usage (and running applications) of each user or group tracker."""
    for t in trackers:
        root = t.get("queues") or {}
        for res, amount in _resource_items(root.get("resourceUsage")):
            usage.add_metric([partition, t[key], res], amount)
        if running is not None:
            running.add_metric([partition, t[key]], len(root.get("runningApplications") or ()))


# -- YuniKorn's families --------------------------------------------------------------------------------
def _metric_name(text: str) -> str:
    """YuniKorn's formatMetricName: every byte outside [a-zA-Z0-9_:] becomes ``_``; a leading digit gets
    a ``_`` in front."""
    out = "".join(c if c.isascii() and (c.isalnum() or c in "_:") else "_" for c in text)
    return "_" + out if out[:1].isdigit() else out


def _usage_range(used: int, capacity: int) -> int:
    """The index of YuniKorn's node usage range for ``used`` of ``capacity``: [0,10%] is 0, (10%,20%] 1 …"""
    if capacity <= 0 or used <= 0:
        return 0
    tenths = -(-used * 10 // capacity)          # ceil(used / capacity * 10)
    return max(0, min(9, tenths - 1))


def _yunikorn_families(partitions: Sequence[Any]) -> Iterator[Metric]:
    """The quantities of YuniKorn's families, read at scrape time (each partition's lock held briefly)."""
    app_states: dict[str, int] = {}
    nodes = GaugeMetricFamily("yunikorn_scheduler_node",
                              "Total number of nodes. State of the node includes `active` and `failed`.",
                              labels=["state"])
    node_states = {"active": 0, "draining": 0}
    usage: dict[str, list[int]] = {}
    queue_app = GaugeMetricFamily("yunikorn_queue_app", "Queue application metrics. State of the application "
                                  "includes `new`, `accepted`, `rejected`, `running`, `failing`, `failed`, "
                                  "`resuming`, `completing`, `completed`.",
                                  labels=["queue", "state", "partition"])
    queue_res = GaugeMetricFamily("yunikorn_queue_resource", "Queue resource metrics. State of the resource "
                                  "includes `guaranteed`, `max`, `allocated`, `pending`, `preempting`, "
                                  "`maxRunningApps`.", labels=["queue", "state", "resource", "partition"])
    per_queue: list[Metric] = []
    for p in partitions:
        with p.lock:
            dao = p.queues.dao(None, subtree=True, partition=p.name)
            by_queue: dict[str, dict[str, int]] = {}
            for app in p.applications():
                state = str(app.state).lower()
                app_states[state] = app_states.get(state, 0) + 1
                counts = by_queue.setdefault(app.queue_path, {})
                counts[state] = counts.get(state, 0) + 1
            for node_id, capacity in p.nodes().items():
                node_states["active" if p.node_schedulable(node_id) else "draining"] += 1
                on: dict[str, int] = {}
                for a in p.node_allocations(node_id):
                    for k, v in a.resource.items():
                        on[k] = on.get(k, 0) + v
                for res, cap in capacity.items():
                    usage.setdefault(res, [0] * len(_USAGE_RANGES))[_usage_range(on.get(res, 0), cap)] += 1
        for q in _walk_queue(dao):
            path = str(q.get("queuename", ""))
            name = _metric_name(path)
            apps = GaugeMetricFamily(f"yunikorn_{name}_queue_app", f"Queue {path} application metrics.",
                                     labels=["state", "partition"])
            res = GaugeMetricFamily(f"yunikorn_{name}_queue_resource", f"Queue {path} resource metrics.",
                                    labels=["state", "resource", "partition"])
            for state, count in sorted(by_queue.get(path, {}).items()):
                queue_app.add_metric([path, state, p.name], count)
                apps.add_metric([state, p.name], count)
            for state, key in _QUEUE_STATES:
                for rname, amount in _resource_items(q.get(key)):
                    queue_res.add_metric([path, state, rname, p.name], amount)
                    res.add_metric([state, rname, p.name], amount)
            if q.get("maxRunningApps"):
                queue_res.add_metric([path, "maxRunningApps", "", p.name], int(q["maxRunningApps"]))
                res.add_metric(["maxRunningApps", "", p.name], int(q["maxRunningApps"]))
            per_queue += [apps, res]
    total = GaugeMetricFamily("yunikorn_scheduler_application_total", "Total number of applications. State "
                              "of the application includes `running`, `resuming`, `failing`, `completing`, "
                              "`completed` and `failed`.", labels=["state"])
    for state, count in sorted(app_states.items()):
        total.add_metric([state], count)
    for node_state, n in node_states.items():
        nodes.add_metric([node_state], n)
    yield from (total, nodes, queue_app, queue_res)
    for res_name, in_range in sorted(usage.items()):
        fam = GaugeMetricFamily(f"yunikorn_scheduler_{_metric_name(res_name)}_node_usage_total",
                                "Total resource usage of node, by resource name.", labels=["range"])
        for label, n_nodes in zip(_USAGE_RANGES, in_range, strict=True):
            fam.add_metric([label], n_nodes)
        yield fam
    yield from per_queue
