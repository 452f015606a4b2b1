"""Fixtures of the fault tests: a PostgreSQL store of their own (a fresh schema, dropped after)."""

from __future__ import annotations

from tests.journal.conftest import pg_base_url, pg_url

__all__ = ["pg_base_url", "pg_url"]
