"""The bounded history behind ``/ws/v1/history/apps`` and ``/history/containers`` (YuniKorn's
``InternalMetricsHistory``).

YuniKorn samples once a minute and keeps the last 1,440 samples (a day): the number of applications
running and the number of containers (allocations) held, over every partition. The Dashboard draws
its two charts from them. quotaplane does the same: :meth:`MetricsHistory.sample` runs from the
service's timer, on the leader and on followers alike (each reports what it serves).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from quotaplane.application import RUNNING
from quotaplane.partition import Partition

__all__ = ["HISTORY_INTERVAL", "HISTORY_LIMIT", "MetricsHistory", "MetricsRecord"]

#: YuniKorn's defaults: one sample a minute, 1,440 kept
HISTORY_INTERVAL = 60.0
HISTORY_LIMIT = 1440


@dataclass(frozen=True, slots=True)
class MetricsRecord:
    """One sample: when, applications running, containers (allocations) held."""

    timestamp: float
    total_applications: int
    total_containers: int


class MetricsHistory:
    """The last ``limit`` samples, oldest first."""

    def __init__(self, limit: int = HISTORY_LIMIT, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._records: deque[MetricsRecord] = deque(maxlen=limit)
        self._lock = threading.Lock()

    def sample(self, partitions: Iterable[Partition]) -> MetricsRecord:
        """Record the applications in state Running and the allocations held across ``partitions``."""
        apps = containers = 0
        for p in partitions:
            with p.lock:
                apps += sum(1 for a in p.applications() if a.state == RUNNING)
                containers += len(p.allocations())
        record = MetricsRecord(self.clock(), apps, containers)
        with self._lock:
            self._records.append(record)
        return record

    def records(self) -> list[MetricsRecord]:
        """The samples kept, oldest first."""
        with self._lock:
            return list(self._records)
