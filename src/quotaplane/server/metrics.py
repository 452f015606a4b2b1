"""Prometheus metrics of the service (``GET /metrics``).

Counters and histograms are updated on the request path (a few microseconds each); the usage gauges
(queues, users, groups, capacity) are produced at scrape time by a collector that reads the
partitions, so the hot path pays nothing for them. Every app gets its own registry so several apps
can live in one process (tests).

Metric names:

* ``quotaplane_http_requests_total{method,route,status}`` and
  ``quotaplane_http_request_duration_seconds{method,route}`` (histogram)
* ``quotaplane_decisions_total{result,policy}`` — ``result`` is ``allocated`` or ``refused``; a refusal
  counts once per policy among its reasons; an admission counts with ``policy="none"``
* ``quotaplane_whatif_total{result}``
* ``quotaplane_journal_write_seconds`` (histogram of journal appends, when the store is reachable)
* ``quotaplane_queue_allocated{partition,queue,resource}``, ``quotaplane_queue_max{…}``,
  ``quotaplane_queue_pending{…}`` (YuniKorn ``pendingResource``: what waiting asks want),
  ``quotaplane_user_usage{partition,user,resource}``, ``quotaplane_group_usage{partition,group,resource}``,
  ``quotaplane_partition_capacity{partition,resource}``, ``quotaplane_partition_used{partition,resource}``,
  ``quotaplane_applications{partition}``, ``quotaplane_leader{partition}`` (1 when this instance leads)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from quotaplane.policy import Decision

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_JOURNAL_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0)


class Metrics:
    """The metric objects of one app."""

    def __init__(self, state_source: Callable[[], Any] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter("quotaplane_http_requests", "HTTP requests served",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("quotaplane_http_request_duration_seconds", "HTTP request latency",
                                 ["method", "route"], buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.decisions = Counter("quotaplane_decisions", "admission decisions by result and policy",
                                 ["result", "policy"], registry=self.registry)
        self.whatif = Counter("quotaplane_whatif", "what-if decisions by result", ["result"],
                              registry=self.registry)
        self.journal_write = Histogram("quotaplane_journal_write_seconds", "journal append latency",
                                       buckets=_JOURNAL_BUCKETS, registry=self.registry)
        self._allocated = self.decisions.labels("allocated", "none")
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
        """Count one admission decision."""
        if decision.allocated:
            self._allocated.inc()
            return
        seen: list[str] = []
        for v in decision.reasons:
            if v.policy not in seen:
                seen.append(v.policy)
        for policy in seen or ["unknown"]:
            self.decisions.labels("refused", policy).inc()

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
        q_alloc = GaugeMetricFamily("quotaplane_queue_allocated", "allocated resources per queue",
                                    labels=["partition", "queue", "resource"])
        q_max = GaugeMetricFamily("quotaplane_queue_max", "max resources per queue",
                                  labels=["partition", "queue", "resource"])
        q_pending = GaugeMetricFamily("quotaplane_queue_pending",
                                      "resources the waiting asks want, per queue",
                                      labels=["partition", "queue", "resource"])
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
        for p in scheduler.partitions():
            name = p.name
            with p.lock:
                queue_dao = p.queues.dao(None, subtree=True, partition=name)
                user_list = p.ugm.users_usage()
                group_list = p.ugm.groups_usage()
                total = p.total_capacity()
                in_use = p.used_capacity()
                n_apps = len(p.applications())
            _queue_samples(name, queue_dao, q_alloc, q_max, q_pending)
            _tracker_samples(name, user_list, "userName", users, user_apps)
            _tracker_samples(name, group_list, "groupName", groups, None)
            for res, amount in _resource_items(total):
                cap.add_metric([name, res], amount)
            for res, amount in _resource_items(in_use):
                used.add_metric([name, res], amount)
            apps.add_metric([name], n_apps)
            leader.add_metric([name], 1.0 if service.is_leader(name) else 0.0)
        yield from (q_alloc, q_max, q_pending, users, user_apps, groups, cap, used, apps, leader)


def _queue_samples(partition: str, dao: Mapping[str, Any], allocated: GaugeMetricFamily,
                   maximum: GaugeMetricFamily, pending: GaugeMetricFamily) -> None:
    for q in _walk_queue(dao):
        qname = str(q.get("queuename", ""))
        for res, amount in _resource_items(q.get("pendingResource")):
            pending.add_metric([partition, qname, res], amount)
        for res, amount in _resource_items(q.get("allocatedResource")):
            allocated.add_metric([partition, qname, res], amount)
        for res, amount in _resource_items(q.get("maxResource")):
            maximum.add_metric([partition, qname, res], amount)


def _tracker_samples(partition: str, trackers: list[dict[str, Any]], key: str, usage: GaugeMetricFamily,
                     running: GaugeMetricFamily | None) -> None:
    """Root-level usage (and running applications) of each user or group tracker."""
    for t in trackers:
        root = t.get("queues") or {}
        for res, amount in _resource_items(root.get("resourceUsage")):
            usage.add_metric([partition, t[key], res], amount)
        if running is not None:
            running.add_metric([partition, t[key]], len(root.get("runningApplications") or ()))
