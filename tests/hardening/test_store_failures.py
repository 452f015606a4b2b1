"""Issue 14 #2: a change the store cannot take changes nothing, the fault is visible, and the
partition recovers by itself once the store works again.

Before, a release whose journal append failed (disk full) was answered 503 "nothing changed" while
the allocation already read 404 and the queue's usage had dropped (a restart brought it back); every
later write answered 400 even with room on the disk again, and the healthcheck still said Healthy.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.journal import JournalError
from quotaplane.journal.sqlite import SQLiteJournal
from quotaplane.server.app import create_app
from tests.server.conftest import CONFIG, add_node


class Store:
    """Switches a SQLite journal class's appends (and optionally reads) into failing, like a full disk."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = False
        self.unreadable = False
        append, read, snap = SQLiteJournal.append, SQLiteJournal.read, SQLiteJournal.load_snapshot
        store = self

        def failing_append(journal: SQLiteJournal, *a: Any, **k: Any) -> int:
            if store.full:
                raise JournalError("database or disk is full")
            return append(journal, *a, **k)

        def failing_read(journal: SQLiteJournal, *a: Any, **k: Any) -> Any:
            if store.unreadable:
                raise JournalError("disk I/O error")
            return read(journal, *a, **k)

        def failing_snapshot(journal: SQLiteJournal, *a: Any, **k: Any) -> Any:
            if store.unreadable:
                raise JournalError("disk I/O error")
            return snap(journal, *a, **k)

        monkeypatch.setattr(SQLiteJournal, "append", failing_append)
        monkeypatch.setattr(SQLiteJournal, "read", failing_read)
        monkeypatch.setattr(SQLiteJournal, "load_snapshot", failing_snapshot)


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Store:
    return Store(monkeypatch)


@pytest.fixture
def served(tmp_path: Path, store: Store) -> Iterator[tuple[qp.Scheduler, TestClient, str]]:
    url = f"sqlite:///{tmp_path / 'j.db'}"
    s = qp.Scheduler.from_yaml(CONFIG, store=url)
    with TestClient(create_app(s, timeouts_interval=3600), raise_server_exceptions=False) as c:
        add_node(c)
        r = c.post("/ws/v1/partition/default/applications",
                   json={"applicationID": "a1", "user": "alice", "queue": "root.default"})
        assert r.status_code == 201, r.text
        for key in ("k1", "k2"):
            r = c.post("/ws/v1/partition/default/allocations",
                       json={"applicationID": "a1", "allocationKey": key, "resource": {"vcore": 1000}})
            assert r.status_code == 201, r.text
        yield s, c, url
    s.close()


def _used(c: TestClient) -> int:
    q = c.get("/ws/v1/partition/default/queue/root.default").json()
    return int((q.get("allocatedResource") or {}).get("vcore", 0))


def _healthy(c: TestClient) -> bool:
    return bool(c.get("/ws/v1/scheduler/healthcheck").json()["Healthy"])


def test_a_release_the_store_refuses_changes_nothing(served: tuple[qp.Scheduler, TestClient, str],
                                                     store: Store) -> None:
    s, c, url = served
    assert _healthy(c)
    store.full = True
    r = c.delete("/ws/v1/partition/default/allocation/k1")
    assert r.status_code == 503, r.text
    # nothing changed: the allocation is there, the usage too
    assert c.get("/ws/v1/partition/default/allocation/k1").status_code == 200
    assert _used(c) == 2000
    assert not _healthy(c)
    store.full = False
    # the disk has room again: writes work, without a restart
    assert c.delete("/ws/v1/partition/default/allocation/k1").status_code == 200
    assert _used(c) == 1000
    assert _healthy(c)
    # and a restart agrees with what was acknowledged
    before = s.dump_state()
    s.close()
    again = qp.Scheduler.from_yaml(CONFIG, store=url)
    try:
        assert again.dump_state() == before
        assert again.partition("default").allocation("k1") is None
        assert again.partition("default").allocation("k2") is not None
    finally:
        again.close()


@pytest.mark.parametrize("change", ["release_batch", "remove_application", "remove_ask"])
def test_other_changes_the_store_refuses_change_nothing(served: tuple[qp.Scheduler, TestClient, str],
                                                        store: Store, change: str) -> None:
    s, _c, _url = served
    p = s.partition("default")
    p.add_ask("a1", "ask1", {"vcore": 10**9})
    before = p.dump_state()
    store.full = True
    with pytest.raises(JournalError):
        if change == "release_batch":
            p.release_batch(["k1", "k2"])
        elif change == "remove_application":
            p.remove_application("a1")
        else:
            p.remove_ask("ask1")
    assert p.dump_state() == before
    assert p.healthy is False
    store.full = False
    assert p.healthy is True or p.recover()


def test_while_the_store_cannot_even_be_read_the_partition_answers_503_then_recovers(
        served: tuple[qp.Scheduler, TestClient, str], store: Store) -> None:
    s, c, _url = served
    store.full = store.unreadable = True
    assert c.delete("/ws/v1/partition/default/allocation/k1").status_code == 503
    # memory may be ahead of the journal: nothing of it is served
    r = c.get("/ws/v1/partition/default/allocation/k1")
    assert r.status_code == 503, r.text
    assert "recover" in r.json()["message"]
    assert not _healthy(c)
    store.full = store.unreadable = False
    # the next request finds the store working: the partition is rebuilt from the journal
    assert c.get("/ws/v1/partition/default/allocation/k1").status_code == 200
    assert _used(c) == 2000
    assert not s.partition("default").recovering
    # healthy again once a write reaches the store
    assert c.delete("/ws/v1/partition/default/allocation/k2").status_code == 200
    assert _healthy(c)
    assert s.partition("default").healthy


def test_subscribers_and_settings_survive_a_recovery(served: tuple[qp.Scheduler, TestClient, str],
                                                     store: Store) -> None:
    s, _c, _url = served
    p = s.partition("default")
    heard: list[dict[str, Any]] = []
    p.subscribe(heard.append)
    p.auto_schedule = False
    store.full = store.unreadable = True
    with pytest.raises(JournalError):
        p.release("k1")
    store.full = store.unreadable = False
    assert p.recover()
    assert p.auto_schedule is False
    p.release("k1")
    # the refused release was never announced; the one that was journalled was, once (with group
    # commit the service's event loop delivers notices just after the commit: give it a moment)
    deadline = time.monotonic() + 5
    while not any(n["type"] == "released" for n in heard) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [n["allocationKey"] for n in heard if n["type"] == "released"] == ["k1"]
    assert p.allocation("k1") is None


def test_a_config_committed_to_the_store_is_in_force_even_when_a_partition_marker_fails() -> None:
    """The scheduler stream's config event is the commit point of a configuration: once it is
    journalled a restart applies it, so it must be in force now too (not answered as refused)."""
    from collections.abc import Mapping, Sequence

    from quotaplane.journal import MemoryJournal

    class Flaky(MemoryJournal):
        fail_partition = 0

        def append(self, stream: str, events: Sequence[Mapping[str, Any]], *,
                   holder: str | None = None) -> int:
            if stream != "scheduler" and self.fail_partition > 0:
                self.fail_partition -= 1
                raise JournalError("injected: disk full")
            return super().append(stream, events, holder=holder)

    j = Flaky()
    s = qp.Scheduler.from_yaml(CONFIG, store=j)
    p = s.partition("default")
    p.add_node("n1", {"vcore": 16000})
    changed = CONFIG.replace("vcore: 4\n", "vcore: 6\n")
    assert changed != CONFIG
    j.fail_partition = 1          # the partition's marker fails once; its recovery then succeeds
    s.update_config(changed)
    assert s.config_text == changed
    assert p.config_seq == s.config_seq
    assert p.queues.queue("root.small").max == {"vcore": 6000}
    again = qp.Scheduler.from_yaml(changed, store=j)
    assert again.dump_state() == s.dump_state()
