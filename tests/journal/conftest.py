"""Fixtures for the journal tests: one factory per store kind (memory, SQLite, PostgreSQL).

PostgreSQL tests run when ``QUOTAPLANE_PG_URL`` names a reachable server (CI sets it); each test gets its
own schema ``qp_test_<pid>_<random>`` which is dropped afterwards, so runs never collide.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from quotaplane.journal import Journal, open_journal

PG_ENV = "QUOTAPLANE_PG_URL"
_pg_state: dict[str, str | None] = {}


def pg_base_url() -> str:
    """The PostgreSQL URL from the environment, or skip the test saying why."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"PostgreSQL tests skipped: set {PG_ENV}=postgresql://user:pw@host:port/db to run them")
    if "error" not in _pg_state:
        try:
            import psycopg

            with psycopg.connect(url, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            _pg_state["error"] = None
        except Exception as exc:  # any failure to reach the server means: skip, with the reason
            _pg_state["error"] = f"{type(exc).__name__}: {exc}"
    if _pg_state["error"]:
        pytest.skip(f"PostgreSQL tests skipped: {PG_ENV} is set but the server is unreachable "
                    f"({_pg_state['error']})")
    return url


def with_schema(url: str, schema: str) -> str:
    """``url`` with ``schema=<schema>`` added to its query string."""
    return url + ("&" if "?" in url else "?") + f"schema={schema}"


def drop_schema(url: str, schema: str) -> None:
    """Drop a test schema (tear-down)."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL store URL with a fresh schema for this test (dropped afterwards)."""
    base = pg_base_url()
    schema = f"qp_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    yield with_schema(base, schema)
    drop_schema(base, schema)


class Store:
    """Opens journals on one store; ``reopen()`` closes the open ones and opens the same store again."""

    def __init__(self, kind: str, url: str | None) -> None:
        self.kind = kind
        self.url = url
        self.opened: list[Journal] = []
        self._memory: Journal | None = None

    @property
    def durable(self) -> bool:
        """True when data survives close/reopen (SQLite, PostgreSQL)."""
        return self.kind != "memory"

    def open(self, **options: Any) -> Journal:
        """A journal on this store (the memory store has a single instance)."""
        if self.kind == "memory":
            if self._memory is None:
                self._memory = open_journal(self.url, **options)
            return self._memory
        j = open_journal(self.url, **options)
        self.opened.append(j)
        return j

    def reopen(self, **options: Any) -> Journal:
        """Close every journal opened here and open the store again (memory: the same instance)."""
        if self.kind != "memory":
            self.close_all()
        return self.open(**options)

    def close_all(self) -> None:
        """Close every journal opened here."""
        for j in self.opened:
            j.close()
        self.opened.clear()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The same store-level tests over every backend."""
    kind = request.param
    if kind == "memory":
        s = Store("memory", "memory://")
    elif kind == "sqlite":
        s = Store("sqlite", f"sqlite:///{tmp_path}/journal.db")  # absolute path → four slashes
    else:
        s = Store("postgres", request.getfixturevalue("pg_url"))
    yield s
    s.close_all()
    if s._memory is not None:
        s._memory.close()


@pytest.fixture(params=["sqlite", "postgres"])
def durable_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The durable backends only (crash and reopen tests)."""
    if request.param == "sqlite":
        s = Store("sqlite", f"sqlite:///{tmp_path}/journal.db")
    else:
        s = Store("postgres", request.getfixturevalue("pg_url"))
    yield s
    s.close_all()


OpenFn = Callable[..., Journal]
