"""History benchmark (issue 33): what accounting costs the admission path.

Measured (ratios against a baseline measured in the same process, quality.md):

- ``admission``: allocate + release pairs per second through ``Partition.allocate`` / ``release``
  with the usage accounting on and off, in memory and on SQLite; ``ratio_*`` = on cost / off cost
  (the issue's bar: at most 1.2). The tree is four deep with guarantees at two levels, three
  resources, a user in a group. ``admission_memory`` and ``admission_sqlite``: every queue stays
  within its guarantee (the common case); ``admission_memory_borrowing``: team a borrows above its
  guarantee the whole time, so every event moves its borrowed level and team b's lending (the
  engine's most expensive case). Runs alternate on/off and the best of seven of each is kept, in
  CPU time of the process (on a shared machine wall time swings with the others' load).
- ``query_year``: a one-year question over 1,000 queues from a SQLite store holding a year of their
  rollups (every queue changed every hour: a row per queue and hour — the last 14 days kept at
  hour resolution here, 90 by default —, day, week and month), answered by ``run_query`` as the REST
  route does, by month (13 boundaries per queue), by week (53) and as one total. The bar: under
  200 ms. ``by_day`` (366 points per queue, 366,000 in all) and ``by_hour_14_days`` (the hour rows
  kept) are measured for the note. By hour over the whole year (hour rows kept a year: 8,760 points
  per queue, 8.76 million for 1,000 queues) is measured on 10 queues; its cost per point gives the
  1,000 queues' estimate.
- ``store``: the rows and bytes the store takes per million events: the engine fed 200,000
  allocations and releases over 100 queues and 2,000 applications, ten a second (a busy cluster;
  extrapolated linearly to a million), its rows written to a fresh SQLite store; and the share of
  the rows that minute and hour resolution take (pruned after 2 and 90 days by default).

Run: ``.venv/bin/python benchmarks/history.py`` (a few minutes; ``--admission``: only the admission
figures, merged into the last results).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import write_results
from quotaplane.config.identity import UserGroup
from quotaplane.scheduler import Scheduler

CONFIG = """
partitions:
- name: default
  limits:
  - limit: dev
    groups: [dev]
    maxresources: {vcore: 900000, memory: 900Ti, nvidia.com/gpu: 90000}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: dept
      resources:
        guaranteed: {vcore: 1000, memory: 1Ti, nvidia.com/gpu: 100}
        max: {vcore: 100000, memory: 100Ti, nvidia.com/gpu: 10000}
      queues:
      - name: a
        resources:
          guaranteed: {vcore: 500, memory: 500Gi, nvidia.com/gpu: 50}
        queues:
        - name: jobs
      - name: b
        resources:
          guaranteed: {vcore: 500, memory: 500Gi, nvidia.com/gpu: 50}
        queues:
        - name: jobs
"""

#: the same tree with guarantees of a fraction of a core: team a's 20 held allocations (2 cores) are
#: above its 0.5 and the department's 1, so every event moves a borrowed level and team b's lending
BORROWING = CONFIG.replace("guaranteed: {vcore: 500,", "guaranteed: {vcore: 500m,").replace(
    "guaranteed: {vcore: 1000,", "guaranteed: {vcore: 1000m,")

PAIRS = 4000
_R = {"vcore": 100, "memory": 2**30, "nvidia.com/gpu": 1}


def _admission(store: str | None, on: bool, config: str = CONFIG) -> float:
    """allocate + release pairs per second."""
    now = [1_764_000_000.0]
    s = Scheduler.from_yaml(config, store=store, clock=lambda: now[0], snapshot_every=0)
    try:
        p = s.partition("default")
        if not on:
            p.history.engine = None      # the baseline: accounting off
        p.add_node("n", {"vcore": 10**9, "memory": 10**15, "nvidia.com/gpu": 10**6})
        user = UserGroup("alice", ("dev",))
        p.add_application("a", user, queue="root.dept.a.jobs")
        p.add_application("b", user, queue="root.dept.b.jobs")
        p.allocate_batch([{"application_id": "a", "allocation_key": f"held{i}", "resource": _R}
                          for i in range(20)])     # 2 cores: within CONFIG's guarantees, not BORROWING's
        # this process's CPU time: the machine is shared, and wall time swings with the others' load
        start = time.process_time()
        for i in range(PAIRS):
            now[0] += 0.05
            app = "a" if i % 2 else "b"
            p.allocate(app, f"k{i}", _R)
            p.release(f"k{i}")
        return PAIRS / (time.process_time() - start)
    finally:
        s.close(snapshot=False)


def _compare(store: Any, config: str = CONFIG) -> dict[str, float]:
    on_best = off_best = 0.0
    for _ in range(7):
        off_best = max(off_best, _admission(store(), False, config))
        on_best = max(on_best, _admission(store(), True, config))
    return {"on_pairs_per_s": round(on_best), "off_pairs_per_s": round(off_best),
            "ratio": round(off_best / on_best, 3)}


_H = 3_600_000
_YEAR_START = 1_735_689_600_000          # 2025-01-01T00:00Z


def _fill_year(path: str, queues: int = 1000, hourly_days: int = 14) -> tuple[Any, Any, int]:
    """A SQLite store with a year of rollups of ``queues`` queues that changed every hour."""
    from quotaplane.history.calendar import Calendar
    from quotaplane.history.engine import Row
    from quotaplane.history.store import SQLiteHistoryStore

    cal = Calendar("UTC")
    store = SQLiteHistoryStore(path)
    end = cal.next("month", _YEAR_START + 360 * 24 * _H)            # 2026-01-01
    names = [f"root.dept{i // 50}.team{i}" for i in range(queues)]

    def rows(res: int, step: str, since: int) -> None:
        batch: list[Row] = []
        b = cal.next(step, since - 1) if not cal.is_boundary(step, since) else since
        while b <= end:
            hours_in = (b - _YEAR_START) // _H
            for i, n in enumerate(names):
                level = 1000 * (1 + i % 7)
                batch.append(Row(res, b, "queue", n, {"u": {"vcore": [level * hours_in * _H, level]},
                                                      "g": {"vcore": 4000}}))
            if len(batch) >= 50_000:
                store.write("default", batch)
                batch = []
            b = cal.next(step, b)
        store.write("default", batch)

    rows(1, "hour", end - hourly_days * 24 * _H)
    for res, step in ((2, "day"), (3, "week"), (4, "month")):
        rows(res, step, _YEAR_START)
    return store, cal, end


def _timed(store: Any, cal: Any, lo: int, end: int, step: str, repeat: int) -> dict[str, Any]:
    """The best of ``repeat`` answers to a queue query by ``step`` over ``lo``..``end``, as REST asks."""
    from quotaplane.history.query import HistoryQuery, run_query

    best, series = float("inf"), []
    for _ in range(repeat):
        # CPU time of this process (the store is a local file in the page cache: reading it is CPU
        # too); on a shared machine wall time swings with the others' load
        t0 = time.process_time()
        series = run_query(HistoryQuery("queue", lo, end, step), partition="default", calendar=cal,
                           store=store, memory_rows=[], engine=None, now=end)
        best = min(best, time.process_time() - t0)
    points = sum(len(s.points) for s in series)
    return {"ms": round(best * 1000, 1), "queues": len(series), "points": points,
            "us_per_point": round(best * 1e6 / max(points, 1), 1)}


def _query_year() -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        store, cal, end = _fill_year(f"{tmp}/year.db")
        out["fill_seconds"] = round(time.perf_counter() - start, 1)
        out["rows"] = store.count()
        for step in ("month", "week", "total", "day"):
            out[f"by_{step}"] = _timed(store, cal, _YEAR_START, end, step, 3 if step != "day" else 1)
        # by hour: the 14 days kept at hour resolution (336 points per queue)
        out["by_hour_14_days"] = _timed(store, cal, end - 14 * 24 * _H, end, "hour", 1)
        store.close()
        # by hour over the whole year (8,760 points per queue, hour rows kept a year): 8.76 million
        # points for 1,000 queues — not held in memory here; measured on 10 queues, and the cost per
        # point (which does not depend on the number of queues) gives the 1,000's
        start = time.perf_counter()
        store, cal, end = _fill_year(f"{tmp}/hourly.db", queues=10, hourly_days=366)
        out["hourly_year_fill_seconds"] = round(time.perf_counter() - start, 1)
        year = _timed(store, cal, _YEAR_START, end, "hour", 1)
        out["by_hour_year_10_queues"] = year
        out["by_hour_year_1000_queues_estimated_s"] = round(year["us_per_point"] * 1000 * 8760 / 1e6, 1)
        store.close()
    return out


def _store_size(events: int = 200_000, per_second: float = 10.0) -> dict[str, Any]:
    import os

    import quotaplane.events as E
    from quotaplane.history.engine import Accounting
    from quotaplane.history.store import SQLiteHistoryStore
    from quotaplane.resources import Resource

    queues = [f"root.d{i // 10}.q{i}" for i in range(100)]

    class View:
        def guarantees(self) -> dict[str, Any]:
            table: dict[str, Any] = {"root": (None, None, None)}
            for q in queues:
                d = q.rpartition(".")[0]
                table[d] = ({"vcore": 20_000}, "root", None)
                table[q] = ({"vcore": 2_000}, d, None)
            return {"queue": table, "quota": {}, "tree": {}}

        def cluster_bound(self) -> dict[str, Any]:
            return {"queue": {"root": (None, None, None)}}

        def timezone(self) -> str:
            return "UTC"

        def half_life(self) -> int:
            return 0

        def queue_info(self, path: str) -> Any:
            return self.guarantees()["queue"].get(path, (None, None, None))

        def group_of(self, *_: Any) -> str:
            return "dev"

        def quota_of(self, *_: Any) -> None:
            return None

        def tree_targets(self, *_: Any) -> list[Any]:
            return []

    a = Accounting(View())
    a.observe([E.ConfigApplied(seq=1)])
    t = 1_764_000_000.0
    apps = [f"app{i}" for i in range(2000)]
    a.observe([E.AppAdded(app=x, user=f"u{i % 50}", groups=("dev",), queue=queues[i % 100], t=t)
               for i, x in enumerate(apps)])
    span = events / per_second              # a busy cluster: ``per_second`` events a second
    r = Resource({"vcore": 500, "memory": 2**30, "nvidia.com/gpu": 1})
    live: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteHistoryStore(f"{tmp}/rows.db")
        start = time.perf_counter()
        for i in range(events // 2):
            t += span / (events // 2)
            key = f"k{i}"
            a.observe([E.Allocated(app=apps[(i * 7919) % 2000], key=key, resource=r, t=t)])
            live.append(key)
            if len(live) > 600:
                a.observe([E.Released(key=live.pop(0), t=t)])
            if len(a.outbox) > 20_000:
                store.write("default", a.take_rows())
        elapsed = time.perf_counter() - start
        store.write("default", a.take_rows())
        rows = store.count()
        fine = store._conn.execute("SELECT COUNT(*) FROM history_rows WHERE res <= 1").fetchone()[0]
        store.close()
        size = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp))
    scale = 1_000_000 / events
    return {"events": events, "engine_events_per_s": round(events / elapsed),
            "rows_per_million_events": round(rows * scale),
            "minute_and_hour_share": round(fine / rows, 3) if rows else 0,
            "mb_per_million_events": round(size * scale / 2**20, 1)}


def _admissions() -> dict[str, Any]:
    results: dict[str, Any] = {}
    results["admission_memory"] = _compare(lambda: None)
    results["admission_memory_borrowing"] = _compare(lambda: None, BORROWING)
    with tempfile.TemporaryDirectory() as tmp:
        n = [0]

        def sqlite() -> str:
            n[0] += 1
            return f"sqlite:///{tmp}/h{n[0]}.db"

        results["admission_sqlite"] = _compare(sqlite)
    return results


def main() -> None:
    if "--admission" in sys.argv:       # only the admission figures, merged into the last results
        path = Path(__file__).resolve().parent / "results" / "history.json"
        results: dict[str, Any] = json.loads(path.read_text())["results"] if path.exists() else {}
        results.update(_admissions())
        write_results("history", results)
        return
    results = {"query_year": _query_year(), "store": _store_size()}
    results.update(_admissions())
    write_results("history", results)


if __name__ == "__main__":
    main()
