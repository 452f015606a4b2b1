"""Store fixture for the scenarios: every restart scenario runs on SQLite and on PostgreSQL.

PostgreSQL runs when ``QUOTAPLANE_PG_URL`` names a reachable server (each test in a fresh schema,
dropped afterwards); otherwise that variant is skipped with the reason (tests/journal/conftest.py).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.journal.conftest import drop_schema, pg_base_url, with_schema


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A durable store URL, empty at the start of the test."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'journal.db'}"
        return
    base = pg_base_url()
    schema = f"qp_scn_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    yield with_schema(base, schema)
    drop_schema(base, schema)
