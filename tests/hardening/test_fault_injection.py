"""Issue 14: random store failures under 8 concurrent clients, then a restart.

The invariant is the one of rule S1: what was acknowledged is there after a restart, nothing that was
refused is visible before or after, and nothing dies. The store (SQLite) fails at random appends
before anything is written — a full disk, a lost connection — and, now and then, at reads too, so a
partition that must be rebuilt from its journal sometimes cannot be at once and has to recover later.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quotaplane as qp
from quotaplane.journal import JournalError
from quotaplane.journal.sqlite import SQLiteJournal
from tests.hardening.helpers import TEAM_CONFIG

CONFIG = TEAM_CONFIG
CLIENTS = 8
#: injected append failures per run: 300 in `make test` (CI's ten minutes on two cores), the issue's
#: 1,000 in `make test-long`, which `.ci/run` runs after it (QUOTAPLANE_FAULT_COUNT)
FAILURES = int(os.environ.get("QUOTAPLANE_FAULT_COUNT", "300"))


class Injector:
    """Makes SQLite appends (and sometimes reads) fail at random, counting the failures."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.on = True
        self.append_failures = 0
        self.read_failures = 0

    def fail(self, rate: float) -> bool:
        with self.lock:
            return self.on and self.rng.random() < rate


def _inject(monkeypatch: pytest.MonkeyPatch, journal_class: Any, seed: int, append_error: str,
            read_error: str) -> Injector:
    """Make ``journal_class``'s appends (30 %) and reads (20 %) fail at random while faults are on."""
    inj = Injector(seed=seed)
    append, read = journal_class.append, journal_class.read

    def flaky_append(journal: Any, *a: Any, **k: Any) -> int:
        if inj.fail(0.3):
            with inj.lock:
                inj.append_failures += 1
            raise JournalError(append_error)
        return int(append(journal, *a, **k))

    def flaky_read(journal: Any, *a: Any, **k: Any) -> Any:
        if inj.fail(0.2):
            with inj.lock:
                inj.read_failures += 1
            raise JournalError(read_error)
        return read(journal, *a, **k)

    monkeypatch.setattr(journal_class, "append", flaky_append)
    monkeypatch.setattr(journal_class, "read", flaky_read)
    return inj


@pytest.fixture
def injector(monkeypatch: pytest.MonkeyPatch) -> Iterator[Injector]:
    yield _inject(monkeypatch, SQLiteJournal, 14, "injected: database or disk is full",
                  "injected: disk I/O error")


def _client(p: qp.Partition, n: int, stop: threading.Event, held: set[str], problems: list[str]) -> None:
    rng = random.Random(n)
    app = f"app-{n}"
    counter = 0
    while not stop.is_set():
        counter += 1
        try:
            if not held or rng.random() < 0.55:
                key = f"{app}-k{counter}"
                try:
                    ok = p.allocate(app, key, {"vcore": 1}).allocated
                except JournalError:
                    ok = False
                    if not p.recovering and p.allocation(key) is not None:
                        problems.append(f"refused allocation {key} is visible")
                if ok:
                    held.add(key)
            elif rng.random() < 0.7:
                key = rng.choice(sorted(held))
                try:
                    p.release(key)
                    held.discard(key)
                except JournalError:
                    if not p.recovering and p.allocation(key) is None:
                        problems.append(f"refused release of {key} is visible")
            else:
                keys = rng.sample(sorted(held), min(len(held), 3))
                try:
                    p.release_batch(keys)
                    held.difference_update(keys)
                except JournalError:
                    if not p.recovering and any(p.allocation(k) is None for k in keys):
                        problems.append(f"refused batch release of {keys} is visible")
        except Exception as exc:      # anything else is a defect
            problems.append(f"client {n}: {type(exc).__name__}: {exc}")
            return


def _seeded(url: str, injector: Injector) -> tuple[qp.Scheduler, qp.Partition]:
    """A scheduler on ``url`` with one large node and an application per client (no faults yet)."""
    injector.on = False
    s = qp.Scheduler.from_yaml(CONFIG, store=url, snapshot_every=200)
    p = s.partition("default")
    p.add_node("n1", {"vcore": 10**12})
    for n in range(CLIENTS):
        p.add_application(f"app-{n}", qp.UserGroup(f"user-{n}", []), queue="root.team")
    return s, p


def _run_clients(injector: Injector, client: Any, target: Any) -> tuple[list[set[str]], list[str]]:
    """Run ``client(target, n, stop, held, problems)`` in 8 threads with faults on, until at least
    :data:`FAILURES` appends failed (or a problem showed); faults off again. (held sets, problems)."""
    injector.on = True
    stop = threading.Event()
    helds: list[set[str]] = [set() for _ in range(CLIENTS)]
    problems: list[str] = []
    threads = [threading.Thread(target=client, args=(target, n, stop, helds[n], problems))
               for n in range(CLIENTS)]
    for t in threads:
        t.start()
    while injector.append_failures < FAILURES and not problems and all(t.is_alive() for t in threads):
        stop.wait(0.05)
    stop.set()
    for t in threads:
        t.join(60)
    injector.on = False
    return helds, problems


def test_random_store_failures_lose_nothing_and_fake_nothing(tmp_path: Path, injector: Injector) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    s, p = _seeded(url, injector)
    helds, problems = _run_clients(injector, _client, p)
    assert not problems, problems[:5]
    assert injector.append_failures >= FAILURES
    # the partition recovers by itself once the store works, and agrees with every client
    assert p.recover()
    acknowledged = set().union(*helds)
    assert {a.allocation_key for a in p.allocations()} == acknowledged
    before = s.dump_state()
    s.close()
    # restart: exactly what was acknowledged
    again = qp.Scheduler.from_yaml(CONFIG, store=url)
    try:
        assert {a.allocation_key for a in again.partition("default").allocations()} == acknowledged
        assert again.dump_state() == before
    finally:
        again.close()


def _http_client(base: str, n: int, stop: threading.Event, held: set[str], problems: list[str]) -> None:
    import httpx

    rng = random.Random(100 + n)
    app = f"app-{n}"
    counter = 0
    with httpx.Client(base_url=base, timeout=30) as c:
        while not stop.is_set():
            counter += 1
            if not held or rng.random() < 0.55:
                key = f"{app}-k{counter}"
                r = c.post("/ws/v1/partition/default/allocations",
                           json={"applicationID": app, "allocationKey": key, "resource": {"vcore": 1}})
                if r.status_code == 201:
                    held.add(key)
                elif r.status_code != 503:
                    problems.append(f"allocate {key}: {r.status_code} {r.text}")
                    return
            else:
                key = rng.choice(sorted(held))
                r = c.delete(f"/ws/v1/partition/default/allocation/{key}")
                if r.status_code == 200:
                    held.discard(key)
                elif r.status_code != 503:
                    problems.append(f"release {key}: {r.status_code} {r.text}")
                    return
            if r.status_code == 503 and "internal" in r.text:
                problems.append(f"a 503 that leaks: {r.text}")
            # what this client was told is what the service shows (503 while it recovers)
            got = c.get(f"/ws/v1/partition/default/allocation/{key}")
            if got.status_code == 200 and key not in held:
                problems.append(f"refused {key} is visible")
            if got.status_code == 404 and key in held:
                problems.append(f"acknowledged {key} is gone")


def test_random_store_failures_under_8_http_clients(tmp_path: Path, injector: Injector) -> None:
    """The same over the real service: 8 HTTP clients, answers 201/200 or 503, nothing else. The
    service journals by group commit (issue 18): a failed commit fails its whole group and what was
    decided after it, and none of it is ever visible."""
    import socket

    import uvicorn

    from quotaplane.server.app import create_app

    url = f"sqlite:///{tmp_path / 'state.db'}"
    s, p = _seeded(url, injector)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(s, timeouts_interval=3600), host="127.0.0.1", port=port,
                                           log_level="critical", lifespan="on"))
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    while not server.started:
        time.sleep(0.02)
    helds, problems = _run_clients(injector, _http_client, f"http://127.0.0.1:{port}")
    group = p.group          # issue 18: the service committed the clients' changes through the committer
    # (not ``changes > groups``: a request whose body came whole runs to its commit barrier without
    # yielding, so it is alone and commits its own group in that turn (issue 38) — whether two of the
    # 8 clients' requests overlap depends on the machine's scheduling; tests/server/test_durability.py
    # pins that overlapping changes share one transaction)
    assert group is not None and group.epoch > 0 and group.changes >= group.groups > 0
    server.should_exit = True
    serving.join(30)
    assert not problems, problems[:5]
    assert injector.append_failures >= FAILURES
    acknowledged = set().union(*helds)
    assert p.recover()
    assert {a.allocation_key for a in p.allocations()} == acknowledged
    s.close()
    again = qp.Scheduler.from_yaml(CONFIG, store=url)
    try:
        assert {a.allocation_key for a in again.partition("default").allocations()} == acknowledged
    finally:
        again.close()


@pytest.fixture
def pg_injector(monkeypatch: pytest.MonkeyPatch) -> Iterator[Injector]:
    """The same faults on the PostgreSQL store (its commits run on a worker thread: offloaded)."""
    from quotaplane.journal.postgres import PostgresJournal

    yield _inject(monkeypatch, PostgresJournal, 18, "injected: connection to the database lost",
                  "injected: the database is in recovery")


def test_random_postgresql_failures_under_8_http_clients(pg_injector: Injector) -> None:
    """Issue 18 on PostgreSQL: group commits offloaded to a worker thread fail at random; answers are
    201/200 or 503, nothing refused is ever visible, and a restart holds exactly what was acknowledged."""
    import socket
    import uuid

    import uvicorn

    from quotaplane.server.app import create_app
    from tests.journal.conftest import drop_schema, pg_base_url, with_schema

    base = pg_base_url()
    schema = f"qp_fault_{uuid.uuid4().hex[:8]}"
    url = with_schema(base, schema)
    try:
        s, p = _seeded(url, pg_injector)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(create_app(s, timeouts_interval=3600), host="127.0.0.1",
                                               port=port, log_level="critical", lifespan="on"))
        serving = threading.Thread(target=server.run, daemon=True)
        serving.start()
        while not server.started:
            time.sleep(0.02)
        helds, problems = _run_clients(pg_injector, _http_client, f"http://127.0.0.1:{port}")
        group = p.group
        assert group is not None and group.epoch > 0 and group.changes > group.groups > 0
        server.should_exit = True
        serving.join(30)
        assert not problems, problems[:5]
        acknowledged = set().union(*helds)
        assert p.recover()
        assert {a.allocation_key for a in p.allocations()} == acknowledged
        s.close()
        again = qp.Scheduler.from_yaml(CONFIG, store=url)
        try:
            assert {a.allocation_key for a in again.partition("default").allocations()} == acknowledged
        finally:
            again.close()
    finally:
        drop_schema(base, schema)
