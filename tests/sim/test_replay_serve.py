"""Replaying a journal that a real ``quotaplane serve`` recorded (issue 36 "Done when", first test).

The service runs as a subprocess on a SQLite store (and on PostgreSQL when ``QUOTAPLANE_PG_URL`` is
set); a client drives a workload with direct allocations, asks that wait and get their turn, a
refused request, a withdrawn ask, an application removed while it runs, and work still running at
the end. Replayed under the configuration the service ran with, the replay makes the same decisions
at the same times and gives the same usage timeline.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import quotaplane as qp
from quotaplane.client import Client
from quotaplane.sim.compare import replay, reproduction
from quotaplane.sim.recorded import load_recorded
from tests.e2e.conftest import ServerProcess, pg_url  # noqa: F401  (pg_url: a fixture)

CONFIG = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              guaranteed: {vcore: 4}
              max: {vcore: 6}
          - name: b
            resources:
              max: {vcore: 4}
"""


def _workload(c: Client) -> None:
    pause = 0.02          # real time passes between calls: the journal's times are the service's clock
    c.add_node("n1", {"vcore": 8000})
    c.add_application("A", qp.UserGroup("alice", ["eng"]), queue="root.a")
    c.add_application("B", qp.UserGroup("bob", ["eng"]), queue="root.b")
    for app, key, cores in (("A", "a1", 4), ("A", "a2", 2), ("B", "b1", 2)):
        assert c.allocate(app, key, {"vcore": cores * 1000}).allocated
        time.sleep(pause)
    c.add_ask("A", "a3", {"vcore": 2000})       # a: 6 + 2 > max 6: waits
    time.sleep(pause)
    c.add_ask("B", "b2", {"vcore": 2000})       # root full: waits
    time.sleep(pause)
    c.release("a1")                             # both fit now: allocated by the cycle
    time.sleep(pause)
    assert not c.allocate("A", "a4", {"vcore": 3000}).allocated     # refused: leaves no event
    c.add_ask("B", "b3", {"vcore": 3000})       # b: 4 + 3 > max 4: waits ...
    time.sleep(pause)
    c.remove_ask("B", "b3")                     # ... until withdrawn
    time.sleep(pause)
    c.release("a2")
    time.sleep(pause)
    c.remove_application("A")                   # a3 still runs: released by the removal
    time.sleep(pause)
    c.add_node("n2", {"vcore": 4000})
    c.add_application("C", qp.UserGroup("carol", ["ops"]), queue="root.a")
    assert c.allocate("C", "c1", {"vcore": 3000}).allocated
    time.sleep(pause)
    c.add_ask("C", "c2", {"vcore": 4000})       # a: 3 + 4 > max 6: waits
    time.sleep(pause)
    assert c.allocate("C", "c3", {"vcore": 1000}).allocated
    time.sleep(pause)
    c.release("c1")                             # c2 fits now
    time.sleep(pause)
    c.release("c3")
    time.sleep(pause)
    assert not c.allocate("B", "b4", {"vcore": 1000}).allocated      # b: 4 + 1 > max 4
    c.remove_node("n2")                         # b2 and c2 run on past the end


def _record(store: str, tmp_path: Path) -> None:
    cfg = tmp_path / "queues.yaml"
    cfg.write_text(CONFIG)
    srv = ServerProcess(config=cfg, store=store, cwd=tmp_path).start()
    try:
        with Client(srv.url) as c:
            _workload(c)
    finally:
        assert srv.stop() == 0, srv.output()


def _check(store: str) -> None:
    rec = load_recorded(store)
    assert rec.config_text == CONFIG                  # the configuration in force, from the journal
    result = replay(rec)
    rep = reproduction(rec, result)
    assert rep.exact, rep.differences
    assert rep.matched == len(rec.decisions) >= 20
    kinds = {d[1] for d in rec.decisions}
    assert kinds == {"placed", "asked", "allocated", "released", "withdrawn"}
    # the usage timeline: the same on every sample of the window
    replayed = {s["t"]: s for s in result.samples if s["t"] <= rec.until}
    shared = [s for s in rec.samples if s["t"] in replayed]
    assert len(shared) >= 150
    for s in shared:
        r = replayed[s["t"]]
        for k in ("used", "demand", "queues", "queue_demand", "capacity", "allocations", "pending_asks"):
            assert r[k] == s[k], (s["t"], k, r[k], s[k])
    assert any(s["queues"]["root.a"] for s in shared) and any(s["demand"] for s in shared)
    # and the measures, computed from the journal and from the replay by the same code, agree
    m, want = result.summary["metrics"], rec.metrics
    for k in ("utilisation", "wait", "preempted", "queues", "users", "window"):
        assert _close(m[k], want[k]), k
    assert rec.counts["unknown_duration"] == 3           # b1, b2 and c2 still run
    assert any("still ran at the end" in c for c in rec.caveats)
    assert want["queues"]["root.a"]["wait"]["count"] == 2 and want["wait"]["count"] == 3


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))
    return bool(a == b)


def test_replay_of_a_sqlite_journal_reproduces_its_decisions(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'state.db'}"
    _record(store, tmp_path)
    _check(store)


def test_replay_of_a_postgresql_journal_reproduces_its_decisions(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    _record(pg_url, tmp_path)
    _check(pg_url)

