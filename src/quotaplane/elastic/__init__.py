"""Elastic quota (seed 002): Koordinator's multi-hierarchy quota groups as a self-contained engine.

Quota groups with min, max, shared weight and lending, any depth; the runtime quota computed top-down with
weighted borrowing and largest-remainder rounding; min scaling; system and default groups; the webhook's
configuration rules; admission against the runtime; over-use reclaim. See ``docs/elastic-quota.md``.
"""

from __future__ import annotations

from quotaplane.elastic.calculator import hamilton_split, redistribute, scale_mins
from quotaplane.elastic.errors import QuotaValidationError
from quotaplane.elastic.manager import DEFAULT_REVOKE_DELAY, ElasticQuotaManager
from quotaplane.elastic.model import (
    API_VERSION,
    DEFAULT_QUOTA,
    KIND,
    PREFIX,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    QuotaSpec,
    parse_elastic_quotas,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_QUOTA",
    "DEFAULT_REVOKE_DELAY",
    "KIND",
    "PREFIX",
    "ROOT_QUOTA",
    "SYSTEM_QUOTA",
    "ElasticQuotaManager",
    "QuotaSpec",
    "QuotaValidationError",
    "hamilton_split",
    "parse_elastic_quotas",
    "redistribute",
    "scale_mins",
]
