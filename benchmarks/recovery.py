"""Recovery benchmark, store side (quality.md "Recovery: restart after 1,000,000 journalled events").

Measures, per store (in memory = the baseline, SQLite, and PostgreSQL when ``QUOTAPLANE_PG_URL`` is set):

* ``append_single_per_s``   — events/s with one event per ``append`` (one durable transaction each);
* ``append_batched_per_s``  — events/s appending 1,000,000 small events in batches;
* ``read_all_s``            — time to read every event back (what a restart without snapshot costs the
                              store; the partition's replay cost comes on top);
* ``snapshot_tail_s``       — time to load a snapshot plus a short tail (restart with snapshots).

Ratios are against the in-memory journal measured in the same process (same JSON encoding/decoding),
so they show what the durable store adds.

The script is modular: :func:`fill`, :func:`read_all`, :func:`snapshot_tail` and :func:`bench_store`
take any :class:`~quotaplane.journal.Journal`; the partition's full-state replay can be added as another
step (``extra_steps``) of :func:`bench_store` without touching the store measurements.

    .venv/bin/python benchmarks/recovery.py [--events 1000000] [--batch 1000] [--tail 1000] [--no-pg]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from _bench import write_results
from quotaplane.journal import Journal, open_journal

STREAM = "default"
TARGET_RESTART_S = 60.0   # quality.md: must reach
GOAL_RESTART_S = 10.0     # quality.md: goal (snapshots)

Step = Callable[[Journal, dict[str, Any]], None]


def make_event(i: int) -> dict[str, Any]:
    """A small, realistic partition event (~150 bytes of JSON)."""
    return {"type": "allocation.added", "application_id": f"app-{i % 1000}", "allocation_key": f"a-{i}",
            "resource": {"memory": 1 << 20, "pods": 1, "vcore": 100}, "priority": i % 3}


def events(start: int, n: int) -> Iterator[dict[str, Any]]:
    """Events ``start .. start+n-1``."""
    return (make_event(i) for i in range(start, start + n))


def fill(journal: Journal, stream: str, n: int, batch: int) -> float:
    """Append ``n`` events in batches of ``batch``; return events/s (event creation included)."""
    start = time.perf_counter()
    done = 0
    while done < n:
        k = min(batch, n - done)
        journal.append(stream, list(events(done, k)))
        done += k
    return n / (time.perf_counter() - start)


def single_appends(journal: Journal, stream: str, n: int) -> float:
    """Append ``n`` events one per call (one transaction each); return events/s."""
    evs = list(events(0, n))
    start = time.perf_counter()
    for ev in evs:
        journal.append(stream, [ev])
    return n / (time.perf_counter() - start)


def read_all(journal: Journal, stream: str, after: int = 0) -> tuple[float, int]:
    """Read every event after ``after``; return (seconds, events read)."""
    start = time.perf_counter()
    count = 0
    for _ in journal.read(stream, after):
        count += 1
    return time.perf_counter() - start, count


def make_state(n_allocations: int) -> dict[str, Any]:
    """A snapshot state of the size a partition with ``n_allocations`` live allocations would write."""
    return {"allocations": {f"a-{i}": make_event(i) for i in range(n_allocations)},
            "config": "x" * 10_000}


def snapshot_tail(journal: Journal, stream: str, tail: int, state: dict[str, Any]) -> tuple[float, float]:
    """Save ``state`` as a snapshot ``tail`` events before the end; return (save seconds, load seconds),
    where load = load_snapshot + read of the tail."""
    at = max(0, journal.last_seq(stream) - tail)
    start = time.perf_counter()
    journal.save_snapshot(stream, at, state)
    saved = time.perf_counter() - start
    start = time.perf_counter()
    snap = journal.load_snapshot(stream)
    assert snap is not None and snap[0] == at
    _, count = read_all(journal, stream, snap[0])
    loaded = time.perf_counter() - start
    assert count == journal.last_seq(stream) - at
    return saved, loaded


def bench_store(name: str, open_fn: Callable[[], Journal], *, n_events: int, batch: int, tail: int,
                n_single: int, state: dict[str, Any], extra_steps: dict[str, Step] | None = None,
                reopen: bool = True) -> dict[str, Any]:
    """Run every store measurement on fresh journals from ``open_fn``; return the figures.

    ``reopen`` closes and reopens the store before reading (a real restart for durable stores).
    ``extra_steps`` (name → fn(journal, results)) run after the store measurements on the filled
    journal, e.g. a full-state replay through the partition.
    """
    res: dict[str, Any] = {"events": n_events, "batch": batch}
    j = open_fn()
    try:
        res["append_single_per_s"] = round(single_appends(j, "single", n_single))
        res["append_single_n"] = n_single
        res["append_batched_per_s"] = round(fill(j, STREAM, n_events, batch))
        if reopen:
            j.close()
            start = time.perf_counter()
            j = open_fn()
            res["open_s"] = round(time.perf_counter() - start, 4)
        seconds, count = read_all(j, STREAM)
        assert count == n_events, (count, n_events)
        res["read_all_s"] = round(seconds, 3)
        res["read_all_per_s"] = round(count / seconds)
        saved, loaded = snapshot_tail(j, STREAM, tail, state)
        res["snapshot_save_s"] = round(saved, 4)
        res["snapshot_tail_s"] = round(loaded, 4)
        res["tail"] = tail
        for step_name, step in (extra_steps or {}).items():
            step(j, res)
            res.setdefault("steps", []).append(step_name)
    finally:
        j.close()
    print(f"  {name}: {res}", flush=True)
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark over memory, SQLite and (when configured) PostgreSQL; write the results."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--tail", type=int, default=1000)
    ap.add_argument("--snapshot-allocations", type=int, default=10_000)
    ap.add_argument("--baseline-events", type=int, default=200_000,
                    help="events for the in-memory baseline (ratios compare per-event rates)")
    ap.add_argument("--no-pg", action="store_true", help="skip PostgreSQL even if QUOTAPLANE_PG_URL is set")
    args = ap.parse_args(argv)
    state = make_state(args.snapshot_allocations)
    common = {"n_events": args.events, "batch": args.batch, "tail": args.tail, "state": state}
    results: dict[str, Any] = {"targets": {"restart_must_s": TARGET_RESTART_S,
                                           "restart_goal_s": GOAL_RESTART_S}}

    print("memory (baseline)", flush=True)
    mem = open_journal("memory://")
    results["memory"] = bench_store("memory", lambda: mem, n_single=20_000, reopen=False,
                                    **{**common, "n_events": min(args.events, args.baseline_events)})

    with tempfile.TemporaryDirectory() as tmp:
        for sync, n_single in (("normal", 5000), ("full", 300)):
            url = f"sqlite:///{tmp}/bench-{sync}.db?synchronous={sync}"
            print(f"sqlite synchronous={sync}", flush=True)
            key = f"sqlite_{sync}"
            if sync == "normal":
                results[key] = bench_store(key, lambda u=url: open_journal(u), n_single=n_single, **common)
            else:  # FULL only changes the cost of each commit: measure single appends only
                j = open_journal(url)
                try:
                    results[key] = {"append_single_per_s": round(single_appends(j, "single", n_single)),
                                    "append_single_n": n_single}
                finally:
                    j.close()
                print(f"  {key}: {results[key]}", flush=True)
            size = sum(p.stat().st_size for p in Path(tmp).glob(f"bench-{sync}.db*"))
            results[key]["file_mb"] = round(size / 2**20, 1)

    pg = os.environ.get("QUOTAPLANE_PG_URL")
    if pg and not args.no_pg:
        schema = f"qp_bench_{uuid.uuid4().hex[:8]}"
        url = pg + ("&" if "?" in pg else "?") + f"schema={schema}"
        print("postgresql", flush=True)
        try:
            results["postgresql"] = bench_store("postgresql", lambda: open_journal(url), n_single=1000,
                                                **common)
        finally:
            j = open_journal(url)
            drop = getattr(j, "drop_schema", None)
            if drop is not None:
                drop()
            j.close()
    else:
        results["postgresql"] = "skipped (set QUOTAPLANE_PG_URL to measure)"

    base = results["memory"]
    ratios: dict[str, Any] = {}
    for key in ("sqlite_normal", "postgresql"):
        r = results.get(key)
        if isinstance(r, dict):
            ratios[key] = {
                # per-event cost relative to the in-memory journal (same JSON work): >1 = slower
                "read_all_vs_memory": round(base["read_all_per_s"] / r["read_all_per_s"], 2),
                "append_batched_vs_memory": round(base["append_batched_per_s"] / r["append_batched_per_s"],
                                                  2),
                "append_single_vs_memory": round(base["append_single_per_s"] / r["append_single_per_s"], 2),
                "snapshot_tail_vs_memory": round(r["snapshot_tail_s"] / base["snapshot_tail_s"], 2),
                "read_all_within_target": r["read_all_s"] <= TARGET_RESTART_S,
                "snapshot_tail_within_goal": r["snapshot_tail_s"] <= GOAL_RESTART_S,
            }
    results["ratios"] = ratios
    write_results("recovery", results)
    return results


if __name__ == "__main__":
    main()
