"""Simulator replay speed (quality.md: ≥ 50,000 events/s, goal 200,000/s).

A generated trace of ≥ 100,000 events (nodes, submissions, allocations and asks with durations,
explicit releases, finishes) over a 3-level queue tree with user and group limits is replayed through
:class:`quotaplane.sim.Simulator`. Two figures:

* ``events_per_s``: trace events plus the automatic releases (timers) the simulator runs, per second
  of replay — every one is a decision or a state change of the partition;
* ``trace_events_per_s``: trace lines only.

Baseline, same process: the same number of bare ``Partition.allocate`` + ``Partition.release`` calls
(no journal) as the replay made allocations and releases, so ``ratio_vs_bare_partition`` is the cost
of the simulator around the library (trace dispatch, timers, ledger, samples, asks).
Trace parsing/validation is timed separately (``parse_events_per_s``).

Sweep (issue 36): 16 variants (a 4 × 4 grid of ``--vary`` settings) of one trace, run one after the
other (``run_local(workers=1)``) and on 2 local processes; ``sweep.ratio_parallel_vs_serial`` must be at
most 0.6 on 2 cores (ideal 0.5). Each variant's summary equals the serial one's (checked).

Recorded history (issue 36): a workload journalled by the library on a SQLite store is read back
(``from_store.extract_events_per_s``: journal events per second of :func:`load_recorded`) and replayed
under the configuration in force (``from_store.replay_events_per_s``), against the bare replay of the
same workload (``from_store.ratio_vs_bare_replay``); the replay must reproduce every decision.
"""

from __future__ import annotations

import heapq
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quotaplane as qp
from _bench import best_of, write_results
from quotaplane.partition import Partition
from quotaplane.sim import (
    Simulator,
    TraceEvent,
    generate_trace,
    leaf_queues,
    parse_jsonl,
    trace_to_jsonl,
)

CONFIG = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        limits:
          - limit: per-user cap
            users: ["*"]
            maxresources: {vcore: 120}
        queues:
          - name: eng
            resources:
              guaranteed: {vcore: 2000, memory: 8000Gi}
              max: {vcore: 3000, memory: 16000Gi}
            queues:
              - name: platform
                queues:
                  - name: build
                  - name: test
              - name: ml
                limits:
                  - limit: ml groups
                    groups: ["ml"]
                    maxresources: {vcore: 300}
                queues:
                  - name: train
                  - name: serve
          - name: research
            resources:
              max: {vcore: 1400}
            queues:
              - name: batch
              - name: interactive
          - name: default
"""

N_APPS = 13_000          # × ~8 events each ≥ 100,000 trace events


def _loose(config: str) -> str:
    """The same tree with limits that do not bind (the light scenario)."""
    return (config.replace("maxresources: {vcore: 120}", "maxresources: {vcore: 100000}")
            .replace("maxresources: {vcore: 300}", "maxresources: {vcore: 100000}")
            .replace("max: {vcore: 3000, memory: 16000Gi}", "max: {vcore: 100000, memory: 16000Gi}")
            .replace("max: {vcore: 1400}", "max: {vcore: 100000}"))


def _end(ev: TraceEvent, start: float) -> float:
    """When an allocation made at ``start`` ends: its recorded end when it starts on time (a workload
    from a store, exactly as the simulator does), else after its duration."""
    if ev.end is not None and ev.started == start:
        return ev.end
    assert ev.duration is not None
    return start + ev.duration


def bare_replay(config: str, events: list[TraceEvent]) -> None:
    """Baseline: the same trace as direct partition calls (durations on a heap), nothing else —
    no ledger, samples, wait times or refusal accounting."""
    p = Partition(qp.load_config(config).partition("default"))
    now = [0.0]
    p.clock = lambda: now[0]
    timers: list[tuple[float, int, str]] = []
    live: set[str] = set()
    pending: set[str] = set()
    n = 0

    def on_alloc(ev: dict[str, object]) -> None:
        key = str(ev["allocationKey"])
        pending.discard(key)
        live.add(key)
    p.subscribe(on_alloc)
    durations = {ev.key: ev.duration for ev in events if ev.op == "ask"}
    for ev in events:
        while timers and timers[0][0] <= ev.t:
            now[0], _, key = heapq.heappop(timers)
            if key in live:
                live.discard(key)
                p.release(key)
        now[0] = ev.t
        op = ev.op
        if op == "allocate":
            if p.allocate(ev.app, ev.key, ev.resource).allocated:   # type: ignore[arg-type]
                live.add(ev.key)                                     # type: ignore[arg-type]
                if ev.duration:
                    n += 1
                    heapq.heappush(timers, (_end(ev, ev.t), n, ev.key))      # type: ignore[arg-type]
        elif op == "ask":
            # the simulator's own shortcut: with no ask waiting, an ask is admitted directly
            if not pending and p.allocate(ev.app, ev.key, ev.resource).allocated:   # type: ignore[arg-type]
                live.add(ev.key)                                     # type: ignore[arg-type]
            else:
                pending.add(ev.key)                                  # type: ignore[arg-type]
                p.add_ask(ev.app, ev.key, ev.resource)               # type: ignore[arg-type]
            if ev.key in live and durations[ev.key]:
                n += 1
                heapq.heappush(timers, (_end(ev, ev.t), n, ev.key))          # type: ignore[arg-type]
        elif op == "release":
            if ev.key in live:
                live.discard(ev.key)                                 # type: ignore[arg-type]
                p.release(ev.key)                                    # type: ignore[arg-type]
            elif ev.key in pending:
                pending.discard(ev.key)                              # type: ignore[arg-type]
                p.remove_ask(ev.key)                                 # type: ignore[arg-type]
        elif op == "submit":
            p.add_application(ev.app, qp.UserGroup(ev.user, ev.groups), queue=ev.queue)  # type: ignore[arg-type]
        elif op == "finish":
            p.remove_application(ev.app)                             # type: ignore[arg-type]
        elif op == "node":
            p.add_node(ev.node, ev.capacity)                         # type: ignore[arg-type]
        else:
            p.remove_node(ev.node)                                   # type: ignore[arg-type]
    while timers:
        now[0], _, key = heapq.heappop(timers)
        if key in live:
            live.discard(key)
            p.release(key)


def replay(config: str, events: list[TraceEvent], repeat: int, cycle_interval: float = 0.0
           ) -> tuple[float, dict[str, Any]]:
    runs = []
    for _ in range(repeat):
        sim = Simulator(config, cycle_interval=cycle_interval)
        t = time.perf_counter()
        summary = sim.run(events).summary
        runs.append((time.perf_counter() - t, summary))
    return min(runs, key=lambda r: r[0])


def figures(seconds: float, summary: dict[str, Any], n_trace: int) -> dict[str, Any]:
    a, k, e = summary["allocations"], summary["asks"], summary["events"]
    return {
        "replay_seconds": round(seconds, 3),
        "events_per_s": round((n_trace + e["timers"]) / seconds),
        "trace_events_per_s": round(n_trace / seconds),
        "timer_events": e["timers"],
        "allocations_made": a["admitted"] + k["allocated"],
        "refused": a["refused"],
        "asks_allocated": k["allocated"],
        "ask_wait_p95_s": k["wait_seconds"].get("p95"),
        "periodic_cycles": e["periodic_cycles"],
        "utilisation_vcore_mean": summary["utilisation"]["resources"].get("vcore", {}).get("mean"),
    }


SWEEP_VARY = ["root.eng.resources.guaranteed.vcore=500,1000,1500,2000",
              "root.research.resources.max.vcore=700,1000,1400,2000"]


def sweep(queues: list[str]) -> dict[str, Any]:
    """16 variants serially and on 2 processes: the ratio, and that each variant gives the same."""
    from quotaplane.sim.sweep import Workload, apply_settings, run_local, variants

    events = parse_jsonl(trace_to_jsonl(generate_trace(
        7, N_APPS // 20, queues=queues, users=200, groups=["ml", "eng", "research"], nodes=60,
        arrival_rate=2.0, mean_duration=120.0)))
    configs = [(v.name, apply_settings(CONFIG, "default", v)) for v in variants(SWEEP_VARY)]
    assert len(configs) == 16
    workload = Workload(events)
    t = time.perf_counter()
    serial = run_local(workload, configs, workers=1)
    serial_s = time.perf_counter() - t
    t = time.perf_counter()
    parallel = run_local(workload, configs, workers=2)
    parallel_s = time.perf_counter() - t
    assert [r.summary for r in parallel] == [r.summary for r in serial]
    waits = [r.summary["metrics"]["wait"].get("p90") for r in serial]
    return {"variants": 16, "trace_events": len(events), "serial_seconds": round(serial_s, 3),
            "parallel_2_processes_seconds": round(parallel_s, 3),
            "ratio_parallel_vs_serial": round(parallel_s / serial_s, 3), "ceiling_ratio": 0.6,
            "wait_p90_first_last_variant": [waits[0], waits[-1]]}


def from_store(queues: list[str]) -> dict[str, Any]:
    """Journal a workload on SQLite through the library, read it back, replay it under its own config."""
    import tempfile

    from quotaplane.sim.compare import replay as replay_recorded
    from quotaplane.sim.compare import reproduction
    from quotaplane.sim.recorded import load_recorded

    raw = generate_trace(11, N_APPS // 10, queues=queues, users=200, groups=["ml", "eng", "research"],
                         nodes=100, arrival_rate=2.0, mean_duration=120.0, explicit_release_share=1.0)
    trace = parse_jsonl(trace_to_jsonl(raw))
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/history.db?synchronous=off"
        _journal(_loose(CONFIG), trace, url)
        t = time.perf_counter()
        rec = load_recorded(url)
        extract_s = time.perf_counter() - t
    t = time.perf_counter()
    result = replay_recorded(rec)
    replay_s = time.perf_counter() - t
    assert reproduction(rec, result).exact
    bare_s = best_of(lambda: bare_replay(rec.config_text, rec.events), repeat=1)
    n = len(rec.events)
    return {"journal_events": rec.counts["journal_events"], "workload_events": n,
            "extract_seconds": round(extract_s, 3),
            "extract_events_per_s": round(rec.counts["journal_events"] / extract_s),
            "replay_seconds": round(replay_s, 3), "replay_events_per_s": round(n / replay_s),
            "bare_replay_seconds": round(bare_s, 3), "ratio_vs_bare_replay": round(replay_s / bare_s, 2),
            "reproduced_exactly": True}


def _journal(config: str, events: list[TraceEvent], url: str) -> None:
    """Run a trace through a journalled partition (the simulator's time, explicit releases only)."""
    now = [0.0]
    sched = qp.Scheduler.from_yaml(config, store=url, clock=lambda: now[0])
    p = sched.partition("default")
    timers: list[tuple[float, int, str]] = []
    live: set[str] = set()
    n = 0
    for ev in events:
        while timers and timers[0][0] <= ev.t:
            now[0], _, key = heapq.heappop(timers)
            if key in live:
                live.discard(key)
                p.release(key)
        now[0] = ev.t
        if ev.op == "submit":
            p.add_application(ev.app, qp.UserGroup(ev.user, ev.groups), queue=ev.queue)  # type: ignore[arg-type]
        elif ev.op == "node":
            p.add_node(ev.node, ev.capacity)                                    # type: ignore[arg-type]
        elif ev.op == "allocate" and p.allocate(ev.app, ev.key, ev.resource).allocated:  # type: ignore[arg-type]
            live.add(ev.key)                                                    # type: ignore[arg-type]
            if ev.duration:
                n += 1
                heapq.heappush(timers, (ev.t + ev.duration, n, ev.key))         # type: ignore[arg-type]
        elif ev.op == "ask":
            p.add_ask(ev.app, ev.key, ev.resource)                              # type: ignore[arg-type]
        elif ev.op == "release" and ev.key in live:
            live.discard(ev.key)                                                # type: ignore[arg-type]
            p.release(ev.key)                                                   # type: ignore[arg-type]
        elif ev.op == "finish":
            p.remove_application(ev.app)                                        # type: ignore[arg-type]
    sched.close(snapshot=False)


def main() -> None:
    queues = leaf_queues(CONFIG)
    light_raw = generate_trace(42, N_APPS, queues=queues, users=200, groups=["ml", "eng", "research"],
                               nodes=100, arrival_rate=2.0, mean_duration=120.0)
    text = trace_to_jsonl(light_raw)
    t = time.perf_counter()
    light = parse_jsonl(text)
    parse_s = time.perf_counter() - t
    n_trace = len(light)
    assert n_trace >= 100_000, n_trace
    # asks waiting make every scheduling cycle walk the queue tree: a smaller trace keeps the run short
    pressure = parse_jsonl(trace_to_jsonl(generate_trace(
        42, N_APPS // 4, queues=queues, users=200, groups=["ml", "eng", "research"], nodes=80,
        arrival_rate=2.0, mean_duration=120.0)))
    loose = _loose(CONFIG)

    light_s, light_summary = replay(loose, light, 2)
    bare_s = best_of(lambda: bare_replay(loose, light), repeat=1)
    allocs = light_summary["allocations"]["admitted"] + light_summary["asks"]["allocated"]

    def pairs() -> None:
        p = Partition(qp.load_config(loose).partition("default"))
        p.add_node("n", {"vcore": 10 ** 9, "memory": 10 ** 18})
        p.add_application("app", qp.UserGroup("u", ["ml"]), queue="root.eng.platform.build")
        r = qp.Resource({"vcore": 4000, "memory": 8 * 1024 ** 3})
        for i in range(allocs):
            key = f"k{i}"
            p.allocate("app", key, r)
            p.release(key)

    pairs_s = best_of(pairs, repeat=1)
    pressure_s, pressure_summary = replay(CONFIG, pressure, 1)
    periodic_s, periodic_summary = replay(CONFIG, pressure, 1, cycle_interval=1.0)
    light_fig = figures(light_s, light_summary, n_trace)
    results = {
        "trace_events": n_trace,
        "parse_events_per_s": round(n_trace / parse_s),
        "light": light_fig,
        "pressure_cycle_after_every_change": figures(pressure_s, pressure_summary, len(pressure)),
        "pressure_cycle_every_1s": figures(periodic_s, periodic_summary, len(pressure)),
        "baseline_bare_replay_seconds": round(bare_s, 3),
        "baseline_bare_replay_events_per_s": round((n_trace + light_fig["timer_events"]) / bare_s),
        "ratio_light_vs_bare_replay": round(light_s / bare_s, 2),
        "baseline_bare_pairs": allocs,
        "baseline_bare_pairs_seconds": round(pairs_s, 3),
        "ratio_light_vs_bare_pairs": round(light_s / pairs_s, 2),
        "floor_events_per_s": 50_000,
        "goal_events_per_s": 200_000,
        "sweep": sweep(queues),
        "from_store": from_store(queues),
    }
    write_results("sim", results)


if __name__ == "__main__":
    main()
