"""Prometheus metrics of the service (``GET /metrics`` and ``/ws/v1/metrics``); ``docs/metrics.md``.

Counters and histograms are updated on the request path (a few microseconds each) or from the
journalled events (preemptions); the quantities (queues, users, groups, capacity, elastic quotas,
quota trees) are produced at scrape time by a collector that reads the partitions, so the hot path
pays nothing for them. Every app gets its own registry so several apps can live in one process.

The families follow YuniKorn's and Kueue's conventions: one family per object kind with a ``state``
label for the quantities (YuniKorn's ``yunikorn_queue_resource{state=…}``), a decision counted once
with its outcome and first reason (Kueue's ``admission_attempts_total{result}``), an admission
latency histogram, evictions by reason, build info, and the process and platform collectors.
"""

from __future__ import annotations

import platform
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
from quotaplane.policy import Decision

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_ADMISSION_BUCKETS = (0.00002, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1)
_JOURNAL_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0)


class Metrics:
    """The metric objects of one app."""

    def __init__(self, state_source: Callable[[], Any] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter("quotaplane_http_requests", "HTTP requests served",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("quotaplane_http_request_duration_seconds", "HTTP request latency",
                                 ["method", "route"], buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.decisions = Counter("quotaplane_admission_decisions",
                                 "admission decisions, each counted once: result and first reason code",
                                 ["result", "reason"], registry=self.registry)
        self.admission = Histogram("quotaplane_admission_duration_seconds",
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
        self._allocated = self.decisions.labels("allocated", "none")
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
            child = self._latency_children[key] = self.latency.labels(method, route)
        child.observe(seconds)
        rkey = (method, route, status)
        rchild = self._request_children.get(rkey)
        if rchild is None:
            rchild = self._request_children[rkey] = self.requests.labels(method, route, str(status))
        rchild.inc()

    def observe_decision(self, decision: Decision) -> None:
        """Count one admission decision, once: ``allocated``, or ``refused`` with its first reason."""
        if decision.allocated:
            self._allocated.inc()
            return
        code = decision.reasons[0].code if decision.reasons else "unknown"
        child = self._refused.get(code)
        if child is None:
            child = self._refused[code] = self.decisions.labels("refused", code)
        child.inc()

    def events(self, partition: str, events: Sequence[E.Event], _t: float) -> None:
        """A partition's journalled events (``Partition.listen``): count what was preempted, by
        reason (elastic reclaim, queue and quota preemption, quota-tree preemption)."""
        for ev in events:
            if type(ev) is E.Preempted:
                self.preempted.labels(partition, ev.reason.get("code", "")).inc(len(ev.keys))
            elif type(ev) is E.Noted and ev.notice.get("type") == "preempted":
                reason = (ev.notice.get("reason") or {}).get("code", "")
                self.preempted.labels(partition, str(reason)).inc(len(ev.notice.get("allocations") or ()))

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
        for p in served:
            name = p.name
            group = p.group
            if group is not None:
                commits.add_metric([name], group.groups)
                committed.add_metric([name], group.changes)
            with p.lock:
                queue_dao = p.queues.dao(None, subtree=True, partition=name)
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
            _queue_samples(name, queue_dao, q_res)
            for queue, count in sorted(asks.items()):
                q_asks.add_metric([name, queue], count)
            _tracker_samples(name, user_list, "userName", users, user_apps)
            _tracker_samples(name, group_list, "groupName", groups, None)
            for res, amount in _resource_items(total):
                cap.add_metric([name, res], amount)
            for res, amount in _resource_items(in_use):
                used.add_metric([name, res], amount)
            apps.add_metric([name], n_apps)
            leader.add_metric([name], 1.0 if service.is_leader(name) else 0.0)
        yield from (q_res, q_asks, elastic, tree, users, user_apps, groups, cap, used, apps, leader, commits,
                    committed)


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
        for qname in sorted(pol.manager.quota_names()):
            view = pol.manager.describe(qname)
            for state in ("min", "max", "runtime", "used", "request"):
                for res, amount in _resource_items(view.get(state)):
                    elastic.add_metric([p.name, qname, state, res], amount)
    pol = policy_of(p, "forest")
    if pol is not None:
        qm = pol.manager
        for tname in sorted(qm.tree_names()):
            for node in qm.node_ids(tname):
                for state, amounts in (("quota", qm.node_quota(tname, node)),
                                       ("allocated", qm.node_allocated(tname, node))):
                    for res, amount in _resource_items(amounts):
                        tree.add_metric([p.name, tname, node, state, res], amount)


def _tracker_samples(partition: str, trackers: list[dict[str, Any]], key: str, usage: GaugeMetricFamily,
                     running: GaugeMetricFamily | None) -> None:
    """Root-level usage (and running applications) of each user or group tracker."""
    for t in trackers:
        root = t.get("queues") or {}
        for res, amount in _resource_items(root.get("resourceUsage")):
            usage.add_metric([partition, t[key], res], amount)
        if running is not None:
            running.add_metric([partition, t[key]], len(root.get("runningApplications") or ()))
