"""The :class:`~quotaplane.cluster.Scheduler` under its module's first name, kept so that code written
against ``quotaplane.scheduler`` keeps working: it lives in :mod:`quotaplane.cluster` (the cluster: every
partition, the configuration, recovery), apart from :mod:`quotaplane.scheduling` (the waiting asks).
Nothing in quotaplane imports this module (tests/test_architecture.py)."""

from quotaplane.cluster import SCHEDULER_STREAM, Scheduler

__all__ = ["SCHEDULER_STREAM", "Scheduler"]
