"""Helpers shared by the elastic tests."""

from __future__ import annotations

from quotaplane.elastic import ElasticQuotaManager


def assert_consistent(e: ElasticQuotaManager) -> None:
    """E2: every runtime read through the incremental path equals a full recompute."""
    full = e.full_recompute()
    for name in e.quota_names():
        assert e.runtime(name) == full[name], name
