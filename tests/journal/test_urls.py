"""Store URL parsing and open_journal dispatch (contract "CLI": store URLs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaplane.journal import MemoryJournal, SQLiteJournal, mask_url, open_journal, parse_store_url


@pytest.mark.parametrize("url", [None, "", "memory://"])
def test_memory_urls(url: str | None) -> None:
    parsed = parse_store_url(url)
    assert parsed.kind == "memory"
    j = open_journal(url)
    assert isinstance(j, MemoryJournal) and j.url == "memory://"


def test_sqlite_relative_path_is_relative_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    assert parse_store_url("sqlite:///sub/state.db").path == "sub/state.db"
    j = open_journal("sqlite:///sub/state.db")
    try:
        assert isinstance(j, SQLiteJournal)
        assert j.path == tmp_path / "sub" / "state.db"
        assert j.url == "sqlite:///sub/state.db"
        j.append("s", [{"a": 1}])
    finally:
        j.close()
    assert (tmp_path / "sub" / "state.db").exists()


def test_sqlite_absolute_path(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/abs.db"  # tmp_path starts with "/" → four slashes
    assert url.startswith("sqlite:////")
    assert parse_store_url(url).path == f"{tmp_path}/abs.db"
    with open_journal(url) as j:  # type: ignore[attr-defined]
        assert j.path == tmp_path / "abs.db"
    assert os.path.exists(tmp_path / "abs.db")


def test_sqlite_options(tmp_path: Path) -> None:
    p = parse_store_url(f"sqlite:///{tmp_path}/x.db?synchronous=full&compact=true")
    assert p.options == {"synchronous": "FULL", "compact": "true"}
    j = open_journal(f"sqlite:///{tmp_path}/x.db?synchronous=extra")
    try:
        assert isinstance(j, SQLiteJournal) and j.synchronous == "EXTRA"
    finally:
        j.close()


def test_postgres_url_keeps_libpq_params_and_strips_schema() -> None:
    p = parse_store_url("postgresql://u:secret@db.example:5433/qp?schema=blue&sslmode=require")
    assert p.kind == "postgresql"
    assert p.options == {"schema": "blue"}
    assert p.dsn == "postgresql://u:secret@db.example:5433/qp?sslmode=require"
    assert parse_store_url("postgres://u@h/db").kind == "postgresql"


@pytest.mark.parametrize(("query", "key", "value"), [
    ("options=-c%20search_path%3Dtour", "options", "-c search_path=tour"),
    ("application_name=qp%26co", "application_name", "qp&co"),
    ("application_name=a+b", "application_name", "a+b"),          # libpq keeps '+' (no form decoding)
    ("sslrootcert=%2Fetc%2Fcerts%2Fmy%20ca.pem", "sslrootcert", "/etc/certs/my ca.pem"),
])
def test_postgres_url_passes_escaped_libpq_params_on_as_they_were_meant(query: str, key: str,
                                                                        value: str) -> None:
    """A libpq URI's query values are percent-encoded ('=', '&', spaces): libpq must read the same
    value from the DSN the schema option is stripped from (once decoded, ``options=-c search_path=x``
    made libpq refuse the URL with "extra key/value separator")."""
    from psycopg.conninfo import conninfo_to_dict

    p = parse_store_url(f"postgresql://u@db.example/qp?schema=blue&{query}")
    assert p.options == {"schema": "blue"}
    assert conninfo_to_dict(p.dsn)[key] == value


@pytest.mark.parametrize(("url", "needle"), [
    ("mysql://u@h/db", "'mysql'"),
    ("redis://localhost", "'redis'"),
    ("state.db", "state.db"),
    ("sqlite://relative.db", "three slashes"),
    ("sqlite:///", "no database file"),
    ("sqlite:///dir/", "no database file"),
    ("sqlite:///:memory:", "memory://"),
    ("sqlite:///x.db?synchronous=sometimes", "synchronous"),
    ("sqlite:///x.db?compact=maybe", "compact"),
    ("sqlite:///x.db?colour=red", "colour"),
    ("memory://something", "memory://"),
    ("postgresql://u@h:notaport/db", "PostgreSQL"),
    ("postgresql://u@h/db?schema=bad-name", "schema"),
    ("postgresql://u@h/db?schema=x;drop", "schema"),
])
def test_bad_urls_raise_value_error_naming_them(url: str, needle: str) -> None:
    with pytest.raises(ValueError) as err:
        open_journal(url)
    assert needle in str(err.value)


def test_non_string_url() -> None:
    with pytest.raises(ValueError, match="string"):
        parse_store_url(42)  # type: ignore[arg-type]


def test_errors_never_show_the_password() -> None:
    with pytest.raises(ValueError) as err:
        open_journal("postgresql://u:hunter2@h:99999/db")
    assert "hunter2" not in str(err.value)
    assert mask_url("postgresql://u:hunter2@h/db") == "postgresql://u:***@h/db"
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert mask_url("memory://") == "memory://"


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.text(max_size=40),
    st.builds(lambda scheme, rest: f"{scheme}://{rest}",
              st.sampled_from(["sqlite", "postgresql", "postgres", "memory", "SQLite", "x"]),
              st.text(max_size=40)),
))
def test_fuzzed_urls_raise_only_value_error(url: str) -> None:
    """Any text either parses or raises ValueError (never another exception) — quality.md "Bad input"."""
    try:
        parsed = parse_store_url(url)
    except ValueError as exc:
        assert str(exc)
    else:
        assert parsed.kind in ("memory", "sqlite", "postgresql")
        if parsed.kind == "sqlite":
            assert parsed.path
