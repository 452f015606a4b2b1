"""The over-use monitor of elastic quotas (seed 002 "revoke", decision E5): when to reclaim.

A quota whose used stays above its runtime continuously for longer than the delay (DelayEvictTime)
is due for reclaim; which pods go is :mod:`quotaplane.elastic.victims`'s answer. The monitor keeps,
per quota, the last tick at which it was within its runtime; a triggered quota's clock restarts.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["OveruseMonitor"]


class OveruseMonitor:
    """Per quota, the last monitor tick at which its used fitted its runtime."""

    __slots__ = ("delay", "last_under")

    def __init__(self, delay: float) -> None:
        #: seconds a quota may stay over its runtime before it is reclaimed (E5)
        self.delay = delay
        self.last_under: dict[str, float] = {}

    def due(self, quota: str, now: float, within: bool) -> bool:
        """Record a tick at ``now`` for ``quota`` (``within``: its used fits its runtime); True when it
        has been over for longer than the delay (its clock then restarts at ``now``)."""
        last = self.last_under.setdefault(quota, now)
        if within or now - last > self.delay:
            self.last_under[quota] = now
            return not within
        return False

    def forget(self, quota: str) -> None:
        """The quota was deleted."""
        self.last_under.pop(quota, None)

    def state(self) -> dict[str, float]:
        """The clock per quota, sorted (snapshots and dumps)."""
        return {k: self.last_under[k] for k in sorted(self.last_under)}

    def restore(self, state: Mapping[str, float]) -> None:
        """Set the clock as :meth:`state` gave it (snapshot restore)."""
        self.last_under = {str(k): float(v) for k, v in sorted(state.items())}
