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

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import best_of, write_results  # noqa: E402

import quotaplane as qp  # noqa: E402
from quotaplane.sim import Simulator, generate_trace, leaf_queues, parse_jsonl, trace_to_jsonl  # noqa: E402

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


def main() -> None:
    queues = leaf_queues(CONFIG)
    raw = generate_trace(42, N_APPS, queues=queues, users=200, groups=["ml", "eng", "research"], nodes=80,
                         arrival_rate=2.0, mean_duration=120.0)
    text = trace_to_jsonl(raw)
    t = time.perf_counter()
    events = parse_jsonl(text)
    parse_s = time.perf_counter() - t
    n_trace = len(events)
    assert n_trace >= 100_000, n_trace

    runs: list[tuple[float, dict[str, object]]] = []
    for _ in range(3):
        sim = Simulator(CONFIG)
        t = time.perf_counter()
        summary = sim.run(events).summary
        runs.append((time.perf_counter() - t, summary))
    replay_s, summary = min(runs, key=lambda r: r[0])
    a, k = summary["allocations"], summary["asks"]       # type: ignore[index]
    timers = summary["events"]["timers"]                 # type: ignore[index]
    n_events = n_trace + timers
    allocs = a["admitted"] + k["allocated"]              # type: ignore[index]
    decisions = a["requested"] + k["submitted"]          # type: ignore[index]

    # baseline: bare allocate + release pairs on a partition without journal, same process
    from quotaplane.partition import Partition

    def baseline() -> None:
        p = Partition(qp.load_config(CONFIG).partition("default"))
        p.add_node("n", {"vcore": 10 ** 9, "memory": 10 ** 18})
        p.add_application("app", qp.UserGroup("u", ["ml"]), queue="root.eng.platform.build")
        r = qp.Resource({"vcore": 4000, "memory": 8 * 1024 ** 3})
        for i in range(allocs):
            key = f"k{i}"
            p.allocate("app", key, r)
            p.release(key)

    base_s = best_of(baseline, repeat=3)
    results = {
        "trace_events": n_trace,
        "timer_events": timers,
        "allocations_made": allocs,
        "decisions": decisions,
        "refused": a["refused"],                                      # type: ignore[index]
        "ask_wait_p95_s": k["wait_seconds"].get("p95"),               # type: ignore[index]
        "replay_seconds": round(replay_s, 3),
        "events_per_s": round(n_events / replay_s),
        "trace_events_per_s": round(n_trace / replay_s),
        "parse_events_per_s": round(n_trace / parse_s),
        "baseline_bare_pairs": allocs,
        "baseline_seconds": round(base_s, 3),
        "baseline_ops_per_s": round(2 * allocs / base_s),
        "ratio_vs_bare_partition": round(replay_s / base_s, 2),
        "floor_events_per_s": 50_000,
        "goal_events_per_s": 200_000,
    }
    write_results("sim", results)


if __name__ == "__main__":
    main()
