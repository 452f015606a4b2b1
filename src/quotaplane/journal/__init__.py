"""quotaplane.journal — a durable, append-only event journal with snapshots and leases (decision S1).

    from quotaplane.journal import open_journal
    j = open_journal("sqlite:///state.db")          # or None / "memory://", "postgresql://…"
    j.append("default", [{"type": "node.added", "node": "n1"}])   # -> 1, durable on return
    for seq, event in j.read("default", after=0): ...
    j.save_snapshot("default", 1, state); j.load_snapshot("default")  # -> (1, state)

The journal never interprets events. It imports nothing of the engines.
"""

from __future__ import annotations

from typing import Any

from quotaplane.journal.base import (
    SCHEMA_VERSION,
    Journal,
    JournalCompactedError,
    JournalError,
    JournalLockedError,
    OutcomeUnknownError,
    StoreUnavailableError,
    StoreURL,
    canonical_json,
    mask_url,
    parse_store_url,
)
from quotaplane.journal.memory import MemoryJournal
from quotaplane.journal.sqlite import SQLiteJournal

__all__ = [
    "SCHEMA_VERSION",
    "Journal",
    "JournalCompactedError",
    "JournalError",
    "JournalLockedError",
    "MemoryJournal",
    "OutcomeUnknownError",
    "PostgresJournal",
    "SQLiteJournal",
    "StoreURL",
    "StoreUnavailableError",
    "canonical_json",
    "mask_url",
    "open_journal",
    "parse_store_url",
]


def __getattr__(name: str) -> Any:
    """``PostgresJournal`` is imported on first use, so psycopg is only needed with PostgreSQL."""
    if name == "PostgresJournal":
        from quotaplane.journal.postgres import PostgresJournal

        return PostgresJournal
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_journal(url: str | None, **options: Any) -> Journal:
    """Open the journal named by a store URL (see :func:`parse_store_url` for the forms and options).

    ``None`` / ``"memory://"`` → :class:`MemoryJournal`; ``sqlite:///relative.db`` (relative to the working
    directory) / ``sqlite:////absolute.db`` → :class:`SQLiteJournal`; ``postgresql://user:pw@host:port/db``
    → :class:`~quotaplane.journal.postgres.PostgresJournal` (psycopg 3). Keyword ``options`` are passed
    to the constructor and override URL options (e.g. ``clock=`` for memory/SQLite leases,
    ``synchronous="FULL"``, ``compact_on_snapshot=True``, ``schema="name"``).

    Raises ``ValueError`` naming the URL for an unknown scheme or a malformed URL;
    :class:`JournalLockedError` when a SQLite store is in use by another writer; :class:`JournalError`
    when the store cannot be opened.
    """
    parsed = parse_store_url(url)
    if parsed.kind == "memory":
        return MemoryJournal(**options)
    if parsed.kind == "sqlite":
        kwargs: dict[str, Any] = {}
        if "synchronous" in parsed.options:
            kwargs["synchronous"] = parsed.options["synchronous"]
        if "compact" in parsed.options:
            kwargs["compact_on_snapshot"] = parsed.options["compact"] == "true"
        if "accept_loss" in parsed.options:
            kwargs["accept_loss"] = parsed.options["accept_loss"] == "true"
        kwargs.update(options)
        return SQLiteJournal(parsed.path, url=parsed.url, **kwargs)
    # postgresql: imported lazily so that psycopg is only needed when used (extra [postgres])
    try:
        from quotaplane.journal.postgres import PostgresJournal
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise JournalError("PostgreSQL store needs psycopg 3: pip install 'quotaplane[postgres]'") from exc
    kwargs = {}
    if "schema" in parsed.options:
        kwargs["schema"] = parsed.options["schema"]
    if "op_timeout" in parsed.options:
        kwargs["op_timeout"] = float(parsed.options["op_timeout"])
    kwargs.update(options)
    return PostgresJournal(parsed.dsn, url=parsed.url, **kwargs)
