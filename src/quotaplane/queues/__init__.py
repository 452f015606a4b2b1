"""Hierarchical queue quotas of one partition (seed 004, reference §1.13: rules M-1 … M-6, N-1 … N-3).

``QueueTree(partition_config)`` builds the queue tree of a partition; it enforces ``max`` from leaf to
root (the root strictly against the cluster size), counts running applications against
``maxapplications``, computes headroom, checks submit/admin ACLs and creates dynamic queues from child
templates. It imports only ``quotaplane.resources``, ``quotaplane.config`` and ``quotaplane.errors``.
"""

from __future__ import annotations

from quotaplane.queues.acl import ACL
from quotaplane.queues.properties import parse_si_resource
from quotaplane.queues.queue import ACTIVE, DRAINING, QUEUE_NAME, Queue, QueueLimit, invalid_queue_path
from quotaplane.queues.tree import TAG_MAX_APPS, TAG_RESOURCE_GUARANTEED, TAG_RESOURCE_QUOTA, QueueTree

__all__ = [
    "ACL",
    "ACTIVE",
    "DRAINING",
    "QUEUE_NAME",
    "TAG_MAX_APPS",
    "TAG_RESOURCE_GUARANTEED",
    "TAG_RESOURCE_QUOTA",
    "Queue",
    "QueueLimit",
    "QueueTree",
    "invalid_queue_path",
    "parse_si_resource",
]
