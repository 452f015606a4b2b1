"""Crash recovery (decision S1, quality.md "Crash"): a child process writing allocations and releases
to a durable store is killed with SIGKILL at random points; reopening the store restores exactly the
acknowledged state (at most the one call in flight may or may not have been applied).

SQLite always; PostgreSQL when QUOTAPLANE_PG_URL names a reachable server (skipped with a message
otherwise).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from tests.partition.helpers import CONFIG

ROOT = Path(__file__).resolve().parents[2]
PG_ENV = "QUOTAPLANE_PG_URL"


def _run_and_kill(url: str, seed: int, lines: int) -> tuple[set[str], set[str], str | None]:
    """Run the child until it printed ``lines`` lines, SIGKILL it; return (acked live, acked released,
    key of the call in flight)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tests.scheduler._crash_child", url, str(seed)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    live: set[str] = set()
    released: set[str] = set()
    in_flight: str | None = None
    assert proc.stdout is not None
    try:
        count = 0
        for line in proc.stdout:
            parts = line.split()
            if parts[0] == "TRY":
                in_flight = parts[2]
            elif parts[0] == "ACK":
                in_flight = None
                if parts[1] == "allocate":
                    live.add(parts[2])
                else:
                    live.discard(parts[2])
                    released.add(parts[2])
            elif parts[0] == "REFUSED":
                in_flight = None
            count += 1
            if count == lines:
                # kill now, then keep reading: every ACK the child printed before dying was an answer
                proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    if count < lines:
        err = proc.stderr.read() if proc.stderr else ""
        raise AssertionError(f"child ended early: {err[-2000:]}")
    return live, released, in_flight


def _check_recovery(url: str, rounds: int, seed0: int) -> None:
    rnd = random.Random(seed0)
    acked: set[str] = set()
    checked: list[int] = []
    for r in range(rounds):
        # each round continues on the restored store: the child picks up the live allocations
        live, released, in_flight = _run_and_kill(url, seed0 + r, rnd.randrange(10, 120))
        assert live or released, "the child acknowledged nothing before it was killed"
        s = Scheduler.from_yaml(CONFIG, store=url)
        try:
            p = s.partition("default")
            got = {a.allocation_key for a in p.allocations()}
            acked = (acked - released) | live
            extra = got - acked
            missing = acked - got
            if in_flight is not None:
                extra.discard(in_flight)
                missing.discard(in_flight)
            assert not missing, f"acknowledged allocations lost: {sorted(missing)[:5]}"
            assert not extra, f"unacknowledged allocations present: {sorted(extra)[:5]}"
            acked = got
            checked.append(len(got))
            total: dict[str, int] = {}
            for a in p.allocations():
                for k, v in a.resource.items():
                    total[k] = total.get(k, 0) + v
            assert p.queues.queue("root").allocated == Resource(total)
        finally:
            s.close()
    assert len(checked) == rounds and checked[-1] > 0


def test_sigkill_sqlite_nothing_acknowledged_lost(tmp_path: Path) -> None:
    _check_recovery(f"sqlite:///{tmp_path}/crash.db", rounds=5, seed0=11)


@pytest.fixture
def pg_url() -> Iterator[str]:
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"PostgreSQL crash test skipped: set {PG_ENV}=postgresql://user:pw@host:port/db "
                    "to run it")
    try:
        import psycopg

        with psycopg.connect(base, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        pytest.skip(f"PostgreSQL crash test skipped: {PG_ENV} is set but the server is unreachable ({exc})")
    schema = f"qp_sched_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    yield base + ("&" if "?" in base else "?") + f"schema={schema}"
    import psycopg

    with psycopg.connect(base, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_sigkill_postgres_nothing_acknowledged_lost(pg_url: str) -> None:
    _check_recovery(pg_url, rounds=3, seed0=21)


def test_postgres_replay_reproduces_dump_state(pg_url: str) -> None:
    s = Scheduler.from_yaml(CONFIG, store=pg_url, snapshot_every=5)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 50000}))
    from quotaplane.config.identity import UserGroup

    p.add_application("a", UserGroup("bob", ["ops"]), queue="root.b")
    for i in range(12):
        p.allocate("a", f"k{i}", Resource({"vcore": 100}))
    for i in range(0, 12, 3):
        p.release(f"k{i}")
    want = s.dump_state()
    s.close()
    again = Scheduler.from_yaml(CONFIG, store=pg_url)
    try:
        assert again.dump_state() == want
    finally:
        again.close()
