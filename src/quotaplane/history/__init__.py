"""Usage over time: accounting, rollups, reports, chargeback and decayed fair share (issue 33).

* :mod:`~quotaplane.history.engine` — the exact, event-fed accounting of every scope;
* :mod:`~quotaplane.history.partition` — the engine wired to a partition's write path;
* :mod:`~quotaplane.history.calendar` — period boundaries in a time zone;
* :mod:`~quotaplane.history.sketch` — wait-time distributions in bounded space.

See ``docs/history.md``.
"""

from quotaplane.history.calendar import Calendar
from quotaplane.history.engine import KINDS, METRICS, Accounting, Row
from quotaplane.history.partition import PartitionHistory
from quotaplane.history.sketch import WaitSketch

__all__ = ["KINDS", "METRICS", "Accounting", "Calendar", "PartitionHistory", "Row", "WaitSketch"]
