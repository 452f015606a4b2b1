"""Quota trees and forests (seed 003): MCAD's hierarchical quota manager, in Python.

``qp.forest.QuotaManager`` holds quota trees built from ``QuotaTree`` JSON, consumers parsed from
``Consumer`` JSON (:class:`ConsumerInfo`), forests of trees, and allocates consumers with soft/hard
borrowing, priorities, preemption, slide up/down and try/undo (reference ``mcad-quota-forest.md``
§1–§8, decisions F1–F4). See ``docs/quota-trees.md``.
"""

from __future__ import annotations

from quotaplane.forest._model import (
    DEFAULT_RESOURCE_NAMES,
    AllocationResponse,
    ConsumerInfo,
    ConsumerTreeSpec,
    Mode,
    QuotaError,
    TreeCache,
)
from quotaplane.forest.manager import QuotaManager

__all__ = [
    "DEFAULT_RESOURCE_NAMES",
    "AllocationResponse",
    "ConsumerInfo",
    "ConsumerTreeSpec",
    "Mode",
    "QuotaError",
    "QuotaManager",
    "TreeCache",
]
