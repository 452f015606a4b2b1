"""A frozen connection to PostgreSQL (packets dropped silently: no error, no answer) never hangs a
call for longer than the journal's ``op_timeout``: the connection is cut, an append whose outcome
is then unknown says so (and is read back once the store answers), a read fails as a store error.
Without it a frozen network held the service's writes — and its leases' renewals — for as long as
TCP takes to give up (issue 32 #4: 15 s and more)."""

from __future__ import annotations

import threading
import time
from urllib.parse import urlsplit, urlunsplit

from quotaplane.journal import JournalError, OutcomeUnknownError, open_journal
from tests.faults.proxy import FaultProxy


def _through(url: str, proxy: FaultProxy) -> str:
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{proxy.host}:{proxy.port}"))


def test_a_call_on_a_frozen_connection_is_cut_after_the_op_timeout(pg_url: str) -> None:
    parts = urlsplit(pg_url)
    with FaultProxy(parts.hostname or "127.0.0.1", parts.port or 5432) as proxy:
        j = open_journal(_through(pg_url, proxy), op_timeout=0.5)
        try:
            assert j.acquire_lease("p", "a", 60)
            assert j.append("p", [{"i": 1}], holder="a") == 1
            proxy.freeze()
            outcome: list[BaseException | int] = []

            def append() -> None:
                try:
                    outcome.append(j.append("p", [{"i": 2}], holder="a"))
                except BaseException as exc:
                    outcome.append(exc)

            t = threading.Thread(target=append, daemon=True)
            t.start()
            t.join(120)                       # without the cut: blocked until the thaw below
            frozen = t.is_alive()
            proxy.thaw()
            t.join(30)
            assert not frozen, "the append hung on the frozen connection"
            assert len(outcome) == 1 and isinstance(outcome[0], OutcomeUnknownError), outcome
            # the query waited in the frozen network and may have reached the server at the thaw:
            # either way, what the journal reads now is final — its session was ended first
            first = j.last_seq("p")
            assert first in (1, 2)
            time.sleep(0.5)
            assert j.last_seq("p") == first
            proxy.freeze()
            reads: list[BaseException | int] = []
            r = threading.Thread(target=lambda: _catch(reads, lambda: j.last_seq("p")), daemon=True)
            r.start()
            r.join(120)
            still = r.is_alive()
            proxy.thaw()
            r.join(30)
            assert not still, "the read hung on the frozen connection"
            assert len(reads) == 1 and isinstance(reads[0], JournalError), reads
            assert j.append("p", [{"i": 3}], holder="a") == first + 1
        finally:
            proxy.thaw()
            j.close()


def _catch(out: list[BaseException | int], call: object) -> None:
    try:
        out.append(call())  # type: ignore[operator]
    except BaseException as exc:
        out.append(exc)


def test_op_timeout_is_a_url_option_and_a_bad_one_is_named() -> None:
    import pytest

    from quotaplane.journal import parse_store_url

    parsed = parse_store_url("postgresql://u@h/db?op_timeout=2.5&sslmode=disable")
    assert parsed.options["op_timeout"] == "2.5"
    assert "op_timeout" not in parse_store_url("postgresql://u@h/db?op_timeout=2.5").dsn
    for bad in ("abc", "0", "-1", "inf"):
        with pytest.raises(ValueError, match="op_timeout must be a positive number"):
            parse_store_url(f"postgresql://u@h/db?op_timeout={bad}")
