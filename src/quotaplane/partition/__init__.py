"""A partition: nodes, queues, users and groups, applications, and the one write path.

:class:`Partition` (:mod:`quotaplane.partition.facade`) is what callers hold; the modules beside it
hold its parts.
"""

from __future__ import annotations

from quotaplane.partition.facade import (
    Allocation,
    Application,
    JournalReplayError,
    Partition,
    PartitionOptions,
)

__all__ = ["Allocation", "Application", "JournalReplayError", "Partition", "PartitionOptions"]
