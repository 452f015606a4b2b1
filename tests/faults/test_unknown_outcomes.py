"""Issue 32 #3: an answer that says "nothing was changed" is only sent when nothing was; when a
commit's outcome cannot be known the answer says so, and a retry of the same request (the same
allocation key) is the same request.

Where an outcome becomes unknown: the connection to PostgreSQL breaks after an append was sent —
the server restarts, the network resets or freezes. The journal then says so
(:class:`~quotaplane.journal.OutcomeUnknownError`) and, before it does anything else, makes sure the
session that ran the append is gone, so what it reads next is final. The partition reads back where
its events would be and answers with what happened; only when the store cannot be read either is the
answer "may or may not have been applied" (502)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.errors import ConflictError
from quotaplane.journal import JournalError, MemoryJournal, OutcomeUnknownError, open_journal
from quotaplane.journal.group_commit import CommitFailedError
from quotaplane.journal.postgres import PostgresJournal
from quotaplane.server.app import create_app
from tests.faults.conftest import pg_base_url
from tests.partition.helpers import CONFIG, Clock

BOB = UserGroup("bob", ["ops"])
VCORE = Resource({"vcore": 1})


def _backend_gone(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(pg_base_url(), autocommit=True) as raw:
        while raw.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            assert time.monotonic() < deadline, f"backend {pid} still runs"
            time.sleep(0.02)


def _blocked_append(j: PostgresJournal, holder: str, raw: psycopg.Connection[Any]
                    ) -> tuple[threading.Thread, list[BaseException | int], int]:
    """Start a fenced append of ``j`` that blocks behind ``raw``'s lock on the lease row: it was
    sent and runs on the server. Returns the thread, its outcome list and its backend pid."""
    raw.execute(f'SELECT 1 FROM "{j.schema}".leases WHERE stream = %s FOR UPDATE', ("p",))
    assert j._conn is not None
    pid = j._conn.info.backend_pid
    outcome: list[BaseException | int] = []

    def run() -> None:
        try:
            outcome.append(j.append("p", [{"i": 2}], holder=holder))
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=run)
    t.start()
    with psycopg.connect(pg_base_url(), autocommit=True) as watch:
        deadline = time.monotonic() + 30
        while not watch.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
                                (pid,)).fetchone():
            assert time.monotonic() < deadline and t.is_alive(), outcome
            time.sleep(0.01)
    return t, outcome, pid


def test_an_append_whose_session_dies_after_it_was_sent_is_an_unknown_outcome(pg_url: str) -> None:
    j = open_journal(pg_url)
    assert isinstance(j, PostgresJournal)
    try:
        assert j.acquire_lease("p", "a", 30)
        j.append("p", [{"i": 1}], holder="a")
        with psycopg.connect(pg_base_url(), autocommit=False) as raw:
            t, outcome, pid = _blocked_append(j, "a", raw)
            with psycopg.connect(pg_base_url(), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            t.join(30)
            raw.rollback()
        assert len(outcome) == 1 and isinstance(outcome[0], OutcomeUnknownError), outcome
        assert j.last_seq("p") == 1                   # it did not land; the journal works again
    finally:
        j.close()


def test_an_append_the_server_refuses_on_a_live_connection_is_certain(pg_url: str) -> None:
    j = open_journal(pg_url + "&options=-c%20statement_timeout%3D200")
    assert isinstance(j, PostgresJournal)
    try:
        assert j.acquire_lease("p", "a", 30)
        with psycopg.connect(pg_base_url(), autocommit=False) as raw:
            t, outcome, _pid = _blocked_append(j, "a", raw)       # cancelled after 200 ms
            t.join(30)
            raw.rollback()
        assert len(outcome) == 1 and isinstance(outcome[0], JournalError), outcome
        assert not isinstance(outcome[0], OutcomeUnknownError)
        assert j.last_seq("p") == 0
    finally:
        j.close()


def test_after_an_unknown_outcome_the_journal_reads_only_once_the_session_that_appended_is_gone(
        pg_url: str) -> None:
    # a frozen network: this side gives up on the connection while the server's session still runs
    # the append; once unblocked it would commit. A read that came before would say "not there" and
    # be wrong a moment later — so the journal ends that session first.
    j = open_journal(pg_url)
    assert isinstance(j, PostgresJournal)
    try:
        assert j.acquire_lease("p", "a", 30)
        j.append("p", [{"i": 1}], holder="a")
        with psycopg.connect(pg_base_url(), autocommit=False) as raw:
            t, outcome, pid = _blocked_append(j, "a", raw)
            assert j._conn is not None
            sock = socket.fromfd(j._conn.pgconn.socket, socket.AF_INET, socket.SOCK_STREAM)   # a dup
            sock.shutdown(socket.SHUT_RDWR)                           # this side's end drops
            sock.close()
            t.join(30)
            assert len(outcome) == 1 and isinstance(outcome[0], OutcomeUnknownError), outcome
            first = j.last_seq("p")                   # what the journal says now …
            raw.commit()                              # … and the lock the append waited for goes
        _backend_gone(pid)
        assert j.last_seq("p") == first == 1          # … is final
    finally:
        j.close()


# -- the partition: read back, answer what happened ----------------------------------------------------

class AmbiguousJournal(MemoryJournal):
    """A memory journal whose next appends end like a broken connection: ``commits`` says whether
    each one was written before its acknowledgement was lost; reads fail while ``unreadable``."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: list[bool] = []
        self.unreadable = False

    def append(self, stream: str, events: Sequence[Mapping[str, Any]], *, holder: str | None = None) -> int:
        if not self.outcomes:
            return super().append(stream, events, holder=holder)
        if self.outcomes.pop(0):
            super().append(stream, events, holder=holder)
        raise OutcomeUnknownError("the connection broke after the append was sent")

    def read(self, stream: str, after: int = 0) -> Any:
        if self.unreadable:
            raise JournalError("connection refused")
        return super().read(stream, after)


def _partition(j: MemoryJournal) -> tuple[Scheduler, Any]:
    s = Scheduler.from_yaml(CONFIG, store=j, clock=Clock())
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100}))
    p.add_application("app1", BOB, queue="root.b")
    return s, p


def _journalled(j: MemoryJournal) -> list[str]:
    return [ev["key"] for _, ev in j.read("default") if ev.get("type") == "allocated"]


@pytest.mark.parametrize("committed", [True, False])
def test_a_group_whose_acknowledgement_was_lost_is_read_back_and_answered_as_it_ended(committed: bool
                                                                                      ) -> None:
    j = AmbiguousJournal()
    s, p = _partition(j)
    group = p.start_group_commit(owner=threading.get_ident())
    p.allocate("app1", "k1", VCORE)
    told: list[BaseException | None] = []
    group.notify(group.submitted, told.append)
    j.outcomes = [committed]
    if committed:
        p.flush()
        assert told == [None] and not p.recovering          # durable: it was read back
    else:
        with pytest.raises(CommitFailedError):
            p.flush()
        assert isinstance(told[0], CommitFailedError)       # certain now: 503, nothing changed
        assert not isinstance(told[0], OutcomeUnknownError)
    assert _journalled(j) == (["k1"] if committed else [])
    p.allocate("app1", "k2", VCORE)
    p.flush()
    assert {a.allocation_key for a in p.allocations()} == {*(["k1"] if committed else []), "k2"}
    assert Scheduler.from_yaml(CONFIG, store=j).partition("default").dump_state() == p.dump_state()
    s.stop_group_commit()


def test_a_group_whose_outcome_cannot_be_read_back_says_so_and_the_later_ones_are_refused() -> None:
    j = AmbiguousJournal()
    s, p = _partition(j)
    group = p.start_group_commit(owner=threading.get_ident(), max_events=1)
    p.allocate("app1", "k1", VCORE)
    first: list[BaseException | None] = []
    group.notify(group.submitted, first.append)
    p.allocate("app1", "k2", VCORE)                  # decided after it: never sent
    second: list[BaseException | None] = []
    group.notify(group.submitted, second.append)
    j.outcomes = [True]
    j.unreadable = True
    with pytest.raises(OutcomeUnknownError):
        p.flush()
    assert isinstance(first[0], OutcomeUnknownError)                 # 502: may or may not
    assert isinstance(second[0], CommitFailedError) and not isinstance(second[0], OutcomeUnknownError)
    assert p.recovering
    j.unreadable = False
    assert p.recover()
    assert {a.allocation_key for a in p.allocations()} == {"k1"}     # what the journal holds
    s.stop_group_commit()


def test_without_group_commit_an_unknown_outcome_is_rebuilt_never_undone() -> None:
    # a change the caller could roll back (an allocation) was rolled back on any append error; when
    # the append had committed, memory lost it and a retry of the same key was journalled twice
    j = AmbiguousJournal()
    s, p = _partition(j)
    j.outcomes = [True]
    j.unreadable = True
    with pytest.raises(OutcomeUnknownError):
        p.allocate("app1", "k1", VCORE)
    j.unreadable = False
    with pytest.raises(ConflictError):                                # the retry: the same request
        p.allocate("app1", "k1", VCORE)
    assert _journalled(j) == ["k1"]
    assert Scheduler.from_yaml(CONFIG, store=j).partition("default").dump_state() == p.dump_state()
    s.close()


def test_without_group_commit_a_lost_acknowledgement_is_read_back() -> None:
    j = AmbiguousJournal()
    s, p = _partition(j)
    j.outcomes = [True]
    assert p.allocate("app1", "k1", VCORE).allocated
    j.outcomes = [False]
    with pytest.raises(JournalError) as err:
        p.allocate("app1", "k2", VCORE)
    assert not isinstance(err.value, OutcomeUnknownError)
    assert {a.allocation_key for a in p.allocations()} == {"k1"} == set(_journalled(j))
    s.close()


# -- the answer ----------------------------------------------------------------------------------------

def _service(j: MemoryJournal) -> TestClient:
    s, _p = _partition(j)
    return TestClient(create_app(s, timeouts_interval=3600), raise_server_exceptions=False)


def _post(c: TestClient, key: str) -> Any:
    return c.post("/ws/v1/partition/default/allocations",
                  json={"applicationID": "app1", "allocationKey": key, "resource": {"vcore": 1}})


def test_the_answer_to_a_write_whose_outcome_is_unknown_says_so_never_nothing_changed() -> None:
    j = AmbiguousJournal()
    with _service(j) as c:
        j.outcomes = [True]
        assert _post(c, "lost-ack").status_code == 201          # read back: it was written
        j.outcomes = [False]
        r = _post(c, "not-written")                              # read back: it was not
        assert r.status_code == 503 and "nothing was changed" in r.json()["message"]
        assert c.get("/ws/v1/partition/default/nodes").status_code == 200    # rebuilt from the journal
        j.outcomes, j.unreadable = [True], True
        r = _post(c, "unknown")                                  # cannot be read back
        assert r.status_code == 502, r.text
        assert r.json()["outcome"] == "unknown"
        assert "may or may not have been applied" in r.json()["message"]
        assert "nothing was changed" not in r.text
        j.unreadable = False
        assert _post(c, "unknown").status_code == 409            # it was: the retry is refused
        found = {k: c.get(f"/ws/v1/partition/default/allocation/{k}").status_code
                 for k in ("lost-ack", "not-written", "unknown")}
    assert found == {"lost-ack": 200, "not-written": 404, "unknown": 200}
    assert set(_journalled(j)) == {"lost-ack", "unknown"}
