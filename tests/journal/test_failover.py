"""Fail-over on PostgreSQL, store side (issue 7, decision S1): a leader process holding the lease is
killed (or frozen) and a follower takes over — nothing the old leader acknowledged is lost, and a frozen
old leader that wakes up cannot write any more (fencing). Skipped unless QUOTAPLANE_PG_URL is set."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from quotaplane.journal import Journal, open_journal

CHILD = Path(__file__).with_name("_leader_child.py")
TTL = 1.0


class Leader:
    """A leader child process and the seqs it acknowledged (collected by a reader thread)."""

    def __init__(self, url: str, holder: str) -> None:
        self.proc = subprocess.Popen([sys.executable, str(CHILD), url, holder, str(TTL)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.leading = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line == "leader":
                self.leading.set()
            self.lines.append(line)

    def acked(self) -> list[int]:
        return [int(x) for x in list(self.lines) if x.isdigit()]

    def wait_acks(self, n: int, timeout: float = 20) -> None:
        end = time.monotonic() + timeout
        while len(self.acked()) < n:
            assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""
            assert time.monotonic() < end, "leader made no progress"
            time.sleep(0.01)

    def finish(self, timeout: float = 20) -> int:
        rc = self.proc.wait(timeout=timeout)
        self._reader.join(timeout)
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.finish()


def take_over(j: Journal, holder: str, limit: float = 10.0) -> float:
    """Poll acquire_lease like a follower would; return the seconds it took (fails after ``limit``)."""
    start = time.monotonic()
    while not j.acquire_lease("p", holder, 30):
        assert time.monotonic() - start < limit, "follower could not take over within 10 s"
        time.sleep(0.05)
    return time.monotonic() - start


def test_follower_takes_over_after_the_leader_is_killed(pg_url: str) -> None:
    follower = open_journal(pg_url)
    leader = Leader(pg_url, "node-a")
    try:
        assert leader.leading.wait(20)
        assert not follower.acquire_lease("p", "node-b", 30)  # the leader's lease is live
        assert follower.lease_holder("p") == "node-a"
        leader.wait_acks(30)
        # the follower tails the journal while the leader writes
        tailed = [s for s, _ in follower.read("p")]
        assert tailed == list(range(1, len(tailed) + 1))
        os.kill(leader.proc.pid, signal.SIGKILL)
        leader.finish()
        acked = leader.acked()
        take_over(follower, "node-b")
        stored = list(follower.read("p"))
        assert [s for s, _ in stored] == list(range(1, len(stored) + 1))
        assert max(acked) <= len(stored), "an acknowledged append of the old leader is missing"
        assert all(e == {"by": "node-a"} for _, e in stored)
        assert follower.append("p", [{"by": "node-b"}], holder="node-b") == len(stored) + 1
    finally:
        leader.kill()
        follower.close()


def test_a_frozen_leader_is_fenced_when_it_wakes_up(pg_url: str) -> None:
    """SIGSTOP the leader (a long GC pause / VM freeze), let the lease expire, take over, SIGCONT:
    the old leader's next write is refused and every seq it acknowledged is really its own."""
    follower = open_journal(pg_url)
    leader = Leader(pg_url, "node-a")
    try:
        assert leader.leading.wait(20)
        leader.wait_acks(20)
        os.kill(leader.proc.pid, signal.SIGSTOP)
        take_over(follower, "node-b")
        first_b = follower.append("p", [{"by": "node-b"}], holder="node-b")
        os.kill(leader.proc.pid, signal.SIGCONT)
        rc = leader.finish()
        assert rc in (2, 3), f"old leader kept writing (exit {rc}, last lines {leader.lines[-3:]})"
        assert leader.lines[-1] in ("fenced", "lost")
        follower.append("p", [{"by": "node-b"}], holder="node-b")
        stored = dict(follower.read("p"))
        acked_a = leader.acked()
        assert all(stored[s] == {"by": "node-a"} for s in acked_a)  # no ack was overwritten or lost
        assert max(acked_a) < first_b  # nothing of node-a after the take-over
        assert all(e == {"by": "node-b"} for s, e in stored.items() if s >= first_b)
        assert sorted(stored) == list(range(1, len(stored) + 1))
    finally:
        if leader.proc.poll() is None:
            os.kill(leader.proc.pid, signal.SIGCONT)
        leader.kill()
        follower.close()

