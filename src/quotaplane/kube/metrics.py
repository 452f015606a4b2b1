"""The front's own metrics, served with the REST service's on ``/metrics`` (docs/kubernetes.md
"Retries"): what its API calls did and what its reconcile loop had to repair.

* ``quotaplane_kube_api_calls_total{call, result}`` — calls by type (``list``, ``watch``, ``get``,
  ``create``, ``patch``, ``status``, ``event``, ``evict``) and result (``ok``, ``failed``: after the
  retry policy gave up, or at once for an answer no retry changes);
* ``quotaplane_kube_api_retries_total{call, code}`` — retries by the answer that caused them (``none``:
  no answer);
* ``quotaplane_kube_reconcile_failures_total{call}`` — pod reconciles that failed (tried again later);
* ``quotaplane_kube_resync_repairs_total`` — pods the periodic resync found different from the decision;
* ``quotaplane_kube_evictions_total{result}`` — ``evicted``, ``blocked`` (refused, retried),
  ``abandoned`` (given up after ``eviction_timeout``);
* ``quotaplane_kube_evictions_blocked`` — victims whose eviction is refused right now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from quotaplane.kube.api import ApiStats
from quotaplane.kube.controller import FrontStats

__all__ = ["FrontCollector"]


class FrontCollector:
    """A Prometheus collector over the API's and the controller's counters (read at scrape time)."""

    def __init__(self, api: ApiStats, front: Callable[[], FrontStats | None]) -> None:
        self.api = api
        self.front = front

    def describe(self) -> list[Metric]:
        """No up-front description: the families are produced at scrape time."""
        return []

    def collect(self) -> Iterator[Metric]:
        """The families of the module docstring."""
        calls = CounterMetricFamily("quotaplane_kube_api_calls", "Kubernetes API calls by type and result",
                                    labels=["call", "result"])
        for (call, result), n in sorted(self.api.calls.items()):
            calls.add_metric([call, result], n)
        yield calls
        retries = CounterMetricFamily("quotaplane_kube_api_retries", "Kubernetes API calls retried, by the "
                                      "answer that caused the retry", labels=["call", "code"])
        for (call, code), n in sorted(self.api.retries.items()):
            retries.add_metric([call, code], n)
        yield retries
        stats = self.front()
        if stats is None:
            return
        failures = CounterMetricFamily("quotaplane_kube_reconcile_failures", "pod reconciles that failed "
                                       "(tried again after a backoff)", labels=["call"])
        for call, n in sorted(stats.failed.items()):
            failures.add_metric([call], n)
        yield failures
        yield CounterMetricFamily("quotaplane_kube_resync_repairs", "pods the periodic resync found "
                                  "different from the decision", value=stats.repaired)
        evictions = CounterMetricFamily("quotaplane_kube_evictions", "evictions of preempted pods by "
                                        "result", labels=["result"])
        for result, n in sorted(stats.evictions.items()):
            evictions.add_metric([result], n)
        yield evictions
        yield GaugeMetricFamily("quotaplane_kube_evictions_blocked", "victims whose eviction is refused "
                                "now (a PodDisruptionBudget, a failing API)", value=len(stats.blocked))
