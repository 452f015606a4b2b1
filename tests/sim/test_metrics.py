"""The measures per queue, user and quota (issue 36 item 1), checked by hand on a small trace."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from quotaplane.sim import Simulator, generate_trace, parse_events, simulate
from quotaplane.sim.metrics import Recorder, flat_metrics

CONFIG = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              guaranteed: {vcore: 4}
              max: {vcore: 7}
          - name: b
            resources:
              guaranteed: {vcore: 2}
"""

TRACE: list[dict[str, Any]] = [
    {"t": 0, "op": "node", "node": "n1", "capacity": {"vcore": 8}},
    {"t": 0, "op": "submit", "app": "A", "user": "ua", "queue": "root.a"},
    {"t": 0, "op": "submit", "app": "B", "user": "ub", "queue": "root.b"},
    {"t": 0, "op": "allocate", "app": "A", "key": "a1", "resource": {"vcore": 6}, "duration": 8},
    {"t": 5, "op": "allocate", "app": "B", "key": "b1", "resource": {"vcore": 1}, "duration": 5},
    {"t": 6, "op": "ask", "app": "B", "key": "b2", "resource": {"vcore": 2}, "duration": 2},   # 1 core free
    {"t": 7, "op": "allocate", "app": "A", "key": "a2", "resource": {"vcore": 2}},   # a: 8 > max 7
]


def test_measures_per_queue_user_and_quota_by_hand() -> None:
    m = simulate(CONFIG, TRACE).summary["metrics"]
    assert m["window"] == {"start": 0.0, "end": 10.0, "seconds": 10.0}
    # used 6 over [0,5), 7 over [5,8), 3 over [8,10) of 8 cores: 57 / 80
    assert m["utilisation"] == {"vcore": {"mean": 0.7125, "peak": 0.875}}
    a, b = m["queues"]["root.a"], m["queues"]["root.b"]
    # a: 6 cores over [0,8): 48 core-s / 10 s; 2 above its guaranteed 4 over [0,8)
    assert a["usage_mean"] == {"vcore": 4800.0} and a["usage_peak"] == {"vcore": 6000}
    assert a["borrowed_mean"] == {"vcore": 1600.0}
    assert a["of_guaranteed"] == {"vcore": 1.2} and a["of_max"] == {"vcore": round(4800 / 7000, 6)}
    # over [8,10) a is idle (4 guaranteed) while b borrows 1: a lends min(1, 1/4) × 4 = 1 core
    assert a["lent_mean"] == {"vcore": 200.0}
    # b: 1 core over [5,8), 3 over [8,10); borrows 1 over [8,10);
    # lends its idle 2 over [0,5) (a borrows 2) and its idle 1 over [5,8): 10 + 3 core-s
    assert b["usage_mean"] == {"vcore": 900.0} and b["borrowed_mean"] == {"vcore": 200.0}
    assert b["lent_mean"] == {"vcore": 1300.0}
    # b2 asked at 6, allocated at 8 when a1 ended
    assert b["wait"] == {"count": 1, "p50": 2.0, "p90": 2.0, "max": 2.0}
    assert m["users"]["ub"]["wait"] == b["wait"] and m["users"]["ua"]["wait"] == {"count": 0}
    assert b["demand_mean"] == {"vcore": 400.0}            # 2 cores waiting over [6,8)
    # a2 (2 more cores at 7): over root.a's max (8 > 7) and over the cluster (9 > 8) — the quotas that
    # said no, each named
    both = {"queue.max": 1, "root.capacity": 1}
    assert a["refused"] == both and m["queues"]["root"]["refused"] == both
    assert m["refused_by_quota"] == {"root.a queue.max": 1, "root root.capacity": 1} and m["refused"] == 1
    assert m["users"]["ua"]["refused"] == both
    flat = flat_metrics(m)
    assert flat["queue[root.b].wait.p90"] == 2.0 and flat["refused[root.a queue.max]"] == 1
    assert flat["queue[root.b].lent.vcore"] == 1300.0 and flat["utilisation.vcore"] == 0.7125


class _Counting:
    """A collector (the extension point): counts what it hears."""

    name = "counting"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def admitted(self, now: float, key: str, queue: str, user: str, items: Any) -> None:
        self.seen.append(f"+{key}@{now:g}")

    def released(self, now: float, key: str, queue: str, user: str, items: Any) -> None:
        self.seen.append(f"-{key}@{now:g}")

    def refused(self, now: float, queue: str, user: str, codes: Any) -> None:
        self.seen.append(f"x{queue}@{now:g}")

    def summary(self, start: float, end: float) -> dict[str, Any]:
        return {"events": len(self.seen), "window": [start, end]}

    def flat(self, summary: Any) -> dict[str, float]:
        return {"events": summary["events"]}


def test_a_collector_hears_every_change_and_joins_the_metrics() -> None:
    rec = Recorder(["root", "root.a"], lambda p: (None, None), 0.0, 10.0)
    col = _Counting()
    rec.add_collector(col)
    cells = rec.app("root.a", "u")
    rec.capacity(0, {"vcore": 4})
    rec.admit(1, "k", cells, (("vcore", 2),))
    rec.refuse(2, cells, [("queue.max", "root.a")])
    rec.release(3, "k")
    rec.close(10)
    m = rec.summary()
    assert col.seen == ["+k@1", "xroot.a@2", "-k@3"]
    assert m["counting"] == {"events": 3, "window": [0.0, 10.0]}
    assert rec.flat(m)["counting.events"] == 3
    # 2 cores over [1,3) of 4: 4 / 40
    assert m["utilisation"]["vcore"]["mean"] == 0.1


def test_changes_after_the_window_end_are_applied_but_not_measured() -> None:
    rec = Recorder(["root", "root.a"], lambda p: (None, None), 0.0, 5.0)
    cells = rec.app("root.a", "u")
    rec.capacity(0, {"vcore": 4})
    rec.admit(4, "k", cells, (("vcore", 4),))
    rec.admit(6, "late", cells, (("vcore", 4),))
    rec.release(7, "k")
    rec.close(9)
    m = rec.summary()
    assert m["window"]["end"] == 5.0
    assert m["queues"]["root.a"]["usage_mean"] == {"vcore": 0.8}       # 4 over [4,5) / 5 s
    assert m["queues"]["root.a"]["usage_peak"] == {"vcore": 4}
    assert rec.usage("root.a") == {"vcore": 4}                          # "late" still runs


PROPERTY_CONFIG = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              guaranteed: {vcore: 3}
              max: {vcore: 8}
          - name: b
            resources:
              guaranteed: {vcore: 4}
          - name: c
"""


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), ask_share=st.sampled_from([0.0, 0.5, 1.0]))
def test_measures_agree_with_the_decisions(seed: int, ask_share: float) -> None:
    """Property: each queue's time-weighted usage is Σ resource × time held, from the decision log;
    borrowing never exceeds usage, lending never exceeds the guarantee, utilisation stays in [0, peak]."""
    raw = generate_trace(seed, 15, queues=["root.a", "root.b", "root.c"], nodes=1,
                         node_capacity={"vcore": 10}, ask_share=ask_share, mean_duration=20)
    events = parse_events(enumerate(raw, start=1))
    result = Simulator(PROPERTY_CONFIG, record_decisions=True).run(events)
    m = result.summary["metrics"]
    start, end = m["window"]["start"], m["window"]["end"]
    span = end - start
    res = {ev.key: ev.resource for ev in events if ev.key is not None and ev.resource is not None}
    queue = {ev.app: ev.queue for ev in events if ev.op == "submit"}
    app_of = {ev.key: ev.app for ev in events if ev.key is not None and ev.app is not None}
    began: dict[str, float] = {}
    area: dict[str, float] = {}
    assert result.decisions is not None
    for t, what, key, _ in result.decisions:
        if what == "allocated":
            began[key] = t
        elif what in ("released", "preempted") and key in began:
            q = queue[app_of[key]]
            area[q] = area.get(q, 0.0) + res[key].get("vcore", 0) * (t - began.pop(key))
    for key, t in began.items():
        q = queue[app_of[key]]
        area[q] = area.get(q, 0.0) + res[key].get("vcore", 0) * (end - t)
    for q in ("root.a", "root.b", "root.c"):
        cell = m["queues"][q]
        want = area.get(q, 0.0) / span if span > 0 else 0.0
        assert abs(cell["usage_mean"].get("vcore", 0.0) - want) <= 1e-3 * max(1.0, want), q
        assert cell["borrowed_mean"].get("vcore", 0.0) <= cell["usage_mean"].get("vcore", 0.0) + 1e-6
        if "lent_mean" in cell:
            assert cell["lent_mean"]["vcore"] <= cell["guaranteed"]["vcore"] + 1e-6
    u = m["utilisation"].get("vcore")
    if u is not None:
        assert 0.0 <= u["mean"] <= u["peak"] + 1e-9
