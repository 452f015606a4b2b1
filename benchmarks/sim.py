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
                    heapq.heappush(timers, (ev.t + ev.duration, n, ev.key))   # type: ignore[arg-type]
        elif op == "ask":
            # the simulator's own shortcut: with no ask waiting, an ask is admitted directly
            if not pending and p.allocate(ev.app, ev.key, ev.resource).allocated:   # type: ignore[arg-type]
                live.add(ev.key)                                     # type: ignore[arg-type]
            else:
                pending.add(ev.key)                                  # type: ignore[arg-type]
                p.add_ask(ev.app, ev.key, ev.resource)               # type: ignore[arg-type]
            if ev.key in live and durations[ev.key]:
                n += 1
                heapq.heappush(timers, (ev.t + durations[ev.key], n, ev.key))  # type: ignore[arg-type,operator]
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
    }
    write_results("sim", results)


if __name__ == "__main__":
    main()
