"""The forecast service of a partition (issue 35, docs/eta.md "Cost and caching"): its hold times,
observed from its commits, and its last forecast, kept until the partition changes or an instant the
forecast counted on passes."""

from __future__ import annotations

import threading
import weakref

from quotaplane.eta.forecast import AskEta, Forecast, forecast
from quotaplane.eta.holds import HoldTimes
from quotaplane.partition.facade import Partition

__all__ = ["EtaTracker", "tracker"]


class EtaTracker:
    """The forecast service of one partition: its hold times (observed from when it is made) and the
    last forecast, kept until the partition changes or an end it counted on passes."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        self.holds = HoldTimes()
        self.holds.attach(partition)
        self._lock = threading.Lock()
        self._cached: tuple[tuple[int, int], Forecast] | None = None

    def forecast(self, now: float | None = None) -> Forecast:
        """The forecast at ``now`` (default: the partition's clock), cached per change of the partition."""
        p = self.partition
        at = p.clock() if now is None else float(now)
        with self._lock:
            key = (self.holds.commits, p.config_seq)
            cached = self._cached
            if cached is not None and cached[0] == key and cached[1].as_of <= at < cached[1].next_end:
                return cached[1]
            result = forecast(p, self.holds, at)
            self._cached = (key, result)
            return result

    def of(self, allocation_key: str, now: float | None = None) -> AskEta | None:
        """The forecast of one waiting ask (None: no such ask waits)."""
        return self.forecast(now).asks.get(allocation_key)


_TRACKERS: weakref.WeakKeyDictionary[Partition, EtaTracker] = weakref.WeakKeyDictionary()
_TRACKERS_LOCK = threading.Lock()


def tracker(partition: Partition) -> EtaTracker:
    """The one :class:`EtaTracker` of ``partition`` (made and attached on first use)."""
    with _TRACKERS_LOCK:
        found = _TRACKERS.get(partition)
        if found is None:
            found = _TRACKERS[partition] = EtaTracker(partition)
        return found

