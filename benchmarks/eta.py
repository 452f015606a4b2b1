"""ETA benchmark (issue 35, docs/eta.md): what a forecast and an explanation cost, and how accurate the
forecast is.

Figures (ratios against a baseline measured in the same process, quality.md):

- ``forecast``: the forecast of every waiting ask of a partition of ``--queues`` leaf queues (each full:
  ten running allocations of one core against a max of ten cores, each with a declared runtime; ten
  waiting asks of one core). The issue's bar: 10,000 waiting asks in 1,000 queues under 1 s. The
  baseline is the partition itself doing the same work: the same ends released at the same instants
  on a copy and its cycles run (``ratio`` = forecast / baseline); ``forecast_cpu_s`` is the forecast's
  CPU time (the process's: on a shared machine wall time counts the others' work). ``copy_s`` is the
  working copy's rebuild alone; ``history_s`` (``history_cpu_s``) the same forecast when no runtime is
  declared (three runs, one per quantile of the observed hold times; ``history_passes``: the passes
  over a copy they took — runs that agree share one).
- ``explain``: one request's "what would have to change" with ``--queues`` x 10 running allocations
  (the issue's bar: under 50 ms with 10,000); ``ratio`` against one ``what_if``.
- ``explain_timed``: the same explanation with four spent budgets and four windows on the request's
  path (every reset and window edge tried: the most copies an explanation could make), then asked
  again of the unchanged partition (the Kubernetes front explains its waiting pods every 30 s); wall
  and CPU time.
- ``accuracy``: a generated trace of Kueue's benchmark shape (``baseline``: cohorts x ClusterQueues x
  workload classes with creation intervals and runtimes, scaled by ``--fraction``) and the example
  trace (examples/trace.jsonl's asks, driven the same way), replayed on a virtual clock. For each ask
  that waits, the forecast taken when it began to wait is compared with when it actually started: the
  median absolute error (seconds, and as a share of the actual wait) and the share of actual starts
  inside the p10-p90 interval. Two modes: ``declared`` (every workload declares its runtime and runs
  exactly that long: the error comes only from later arrivals) and ``history`` (nothing declared: the
  hold times observed so far in the run, per queue and user).

Run: ``.venv/bin/python benchmarks/eta.py`` (``--queues 100`` for a quick look).
"""

from __future__ import annotations

import argparse
import copy
import heapq
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import write_results
from quotaplane.config.identity import UserGroup
from quotaplane.eta import HoldTimes, explain, forecast, tracker
from quotaplane.eta.copy import working_copy
from quotaplane.partition.facade import Partition
from quotaplane.resources import Resource
from quotaplane.scheduler import Scheduler

CORE = 1000
_HEAD = "partitions:\n- name: default\n  queues:\n  - name: root\n    submitacl: '*'\n    queues:\n"
TARGETS = {"forecast_10k_asks_1k_queues_s": 1.0, "explain_10k_running_ms": 50.0}


class Clock:
    """A clock the benchmark moves by hand."""

    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _full_partition(queues: int, *, declared: bool, waiting: bool = True) -> tuple[Partition, Clock]:
    leaves = (f"    - {{name: q{i}, resources: {{max: {{vcore: 10}}}}}}\n" for i in range(queues))
    text = _HEAD + "".join(leaves)
    clock = Clock()
    p = Scheduler.from_yaml(text, clock=clock, snapshot_every=0).partition("default")
    p.add_node("n1", Resource({"vcore": queues * 100 * CORE}))
    for i in range(queues):
        p.add_application(f"a{i}", UserGroup(f"u{i % 50}", ["g"]), queue=f"root.q{i}")
    for j in range(10 * queues):
        p.allocate(f"a{j % queues}", f"r{j}", Resource({"vcore": CORE}),
                   max_runtime=(60 + (j * 7919) % 600) if declared else None)
    if waiting:
        for j in range(10 * queues):
            p.add_ask(f"a{j % queues}", f"w{j}", Resource({"vcore": CORE}),
                      max_runtime=(60 + (j * 104729) % 600) if declared else None)
    return p, clock


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _cpu(fn: Callable[[], Any]) -> tuple[float, Any]:
    """The process's CPU time of ``fn`` (on a shared machine the wall time counts the others' work)."""
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def _replay_baseline(p: Partition, clock: Clock) -> float:
    """The partition itself doing the forecast's work: a copy (made outside the timing) releases each
    end in time order and its own incremental cycles allocate what fits; the new allocations' ends
    are pushed as they start (heard from its commits, as the forecast hears them)."""
    import quotaplane.events as E

    replica = working_copy(p, clock)
    replica.schedule()
    replica.auto_schedule = True
    ends = [(a.time + (a.max_runtime or 0), a.allocation_key) for a in replica.allocations()]
    heapq.heapify(ends)
    runtime = {a.allocation_key: a.max_runtime or 0.0 for a in replica.pending()}
    made: list[str] = []
    replica.hooks.after_commit(lambda events, _seq: made.extend(
        ev.key for ev in events if isinstance(ev, E.Allocated)))
    waiting = replica.state.waiting.asks
    start = time.perf_counter()
    while ends and len(waiting):
        at = ends[0][0]
        keys = []
        while ends and ends[0][0] == at:
            keys.append(heapq.heappop(ends)[1])
        clock.t = at
        replica.release_batch(keys)
        for key in made:
            heapq.heappush(ends, (at + runtime[key], key))
        made.clear()
    took = time.perf_counter() - start
    clock.t = 1_000_000.0
    return took


def forecast_section(queues: int) -> dict[str, Any]:
    """The forecast of 10 waiting asks per queue (module docstring)."""
    p, clock = _full_partition(queues, declared=True)
    copy_s = min(_timed(lambda: working_copy(p, clock))[0] for _ in range(2))
    took, f = _timed(lambda: forecast(p, HoldTimes(), clock.t))
    cpu = min(_cpu(lambda: forecast(p, HoldTimes(), clock.t))[0] for _ in range(2))
    known = sum(1 for e in f.asks.values() if e.known)
    base = _replay_baseline(p, clock)
    hp, hclock = _full_partition(queues, declared=False)
    holds = HoldTimes()
    for i in range(queues):
        for s in (60, 120, 300, 600, 900):
            holds.add(f"root.q{i}", f"u{i % 50}", s)
    history_s, hf = _timed(lambda: forecast(hp, holds, hclock.t))
    history_cpu = min(_cpu(lambda: forecast(hp, holds, hclock.t))[0] for _ in range(2))
    return {"queues": queues, "waiting": len(f.asks), "running": 10 * queues, "known": known,
            "forecast_s": round(took, 3), "forecast_cpu_s": round(cpu, 3), "copy_s": round(copy_s, 3),
            "baseline_s": round(base, 3),
            "ratio": round(took / base, 2) if base else None, "history_runs": hf.runs,
            "history_passes": hf.passes, "history_s": round(history_s, 3),
            "history_cpu_s": round(history_cpu, 3),
            "history_known": sum(1 for e in hf.asks.values() if e.known)}


def explain_section(queues: int) -> dict[str, Any]:
    """One refused request's explanation with ``queues`` x 10 running allocations."""
    p, _clock = _full_partition(queues, declared=True, waiting=False)
    req = Resource({"vcore": 3 * CORE})
    what_if = min(_timed(lambda: p.what_if("a0", req))[0] for _ in range(20))
    took, e = min((_timed(lambda: explain(p, "a0", req)) for _ in range(3)), key=lambda x: x[0])
    cpu = min(_cpu(lambda: explain(p, "a0", req))[0] for _ in range(3))
    assert e.releases is not None and len(e.releases) == 3, e.to_dict()
    return {"running": 10 * queues, "explain_ms": round(took * 1000, 1),
            "explain_cpu_ms": round(cpu * 1000, 1),
            "what_if_ms": round(what_if * 1000, 3), "ratio": round(took / what_if),
            "releases": len(e.releases), "limits": len(e.limits or [])}


#: the budgets and windows of the timed explanation (``explain_timed``): four budget scopes on queue q0's
#: chain, each spent and each with its own period, and four windows raising q0's max at different
#: times — the request is refused by both q0's max and its budgets, so no reset and no window edge
#: alone admits it and every one of them is tried (the most copies an explanation makes)
_TIMED = """  budgets:
  - {queue: root.q0, resourcehours: {vcore: 1}, period: month}
  - {queue: root.q0, user: u0, resourcehours: {vcore: 1}, period: week}
  - {queue: root.q0, group: g, resourcehours: {vcore: 1}, period: day}
  - {queue: root, resourcehours: {vcore: 1}, period: 30d}
  windows:
  - {name: evening, queue: root.q0, cron: "0 18 * * *", duration: 5h, max: {vcore: 20}}
  - {name: night, queue: root.q0, cron: "0 23 * * *", duration: 5h, max: {vcore: 20}}
  - {name: morning, queue: root.q0, cron: "0 6 * * *", duration: 2h, max: {vcore: 20}}
  - {name: noon, queue: root.q0, cron: "0 12 * * *", duration: 1h, max: {vcore: 20}}
"""


def _timed_partition(queues: int) -> tuple[Partition, Clock]:
    """``queues`` full queues (10 running allocations each, no declared runtime) with :data:`_TIMED`'s
    budgets and windows, an hour later: every budget spent."""
    leaves = (f"    - {{name: q{i}, resources: {{max: {{vcore: 10}}}}}}\n" for i in range(queues))
    clock = Clock()
    text = _HEAD + "".join(leaves) + _TIMED
    p = Scheduler.from_yaml(text, clock=clock, snapshot_every=0).partition("default")
    p.add_node("n1", Resource({"vcore": queues * 100 * CORE}))
    for i in range(queues):
        p.add_application(f"a{i}", UserGroup(f"u{i % 50}", ["g"]), queue=f"root.q{i}")
    for j in range(10 * queues):
        assert p.allocate(f"a{j % queues}", f"r{j}", Resource({"vcore": CORE})).allocated
    clock.t += 3600.0
    return p, clock


def explain_timed_section(queues: int) -> dict[str, Any]:
    """One refused request's explanation with budgets and windows configured (each reset and each
    window edge tried on a copy) with ``queues`` x 10 running allocations; twice in a row (the second
    asks the same of an unchanged partition, as the Kubernetes front does every 30 s)."""
    p, _clock = _timed_partition(queues)
    req = Resource({"vcore": 3 * CORE})
    codes = sorted({v.code for v in p.what_if("a0", req).reasons})
    assert codes == ["budget.exhausted", "queue.max"], codes
    cpu0 = time.process_time()
    took, e = _timed(lambda: explain(p, "a0", req))
    cpu = time.process_time() - cpu0
    cpu1 = time.process_time()
    again, e2 = _timed(lambda: explain(p, "a0", req))
    cpu_again = time.process_time() - cpu1
    assert e2.to_dict() == e.to_dict()
    tried = [n for n in e.notes if "not reported" in n]
    return {"running": 10 * queues, "explain_s": round(took, 3), "explain_cpu_s": round(cpu, 3),
            "again_s": round(again, 3), "again_cpu_s": round(cpu_again, 3),
            "resets": e.resets is not None, "windows": e.windows is not None, "tried_notes": len(tried)}


# -- accuracy ----------------------------------------------------------------------------------------------

#: Kueue's ``baseline`` generator (test/performance/scheduler/configs/baseline): 5 cohorts x 6 queues,
#: nominal 20 cores, borrowing limit 100; (count per queue, creation interval ms, runtime ms, priority,
#: cores) per workload class
KUEUE_BASELINE = (5, 6, 20, 100, ((350, 100, 200, 50, 1), (100, 500, 500, 100, 5), (50, 1200, 1000, 200, 20)))


#: a trace: the queue YAML, the creations (t, app, key, cores, priority, runtime), the cluster's cores
#: and each application's queue
Trace = tuple[str, list[tuple[float, str, str, int, int, float]], int, dict[str, str]]


def _kueue_trace(fraction: float) -> Trace:
    """Kueue's baseline shape scaled by ``fraction``."""
    cohorts, queues, nominal, borrow, classes = KUEUE_BASELINE
    lines = [_HEAD.rstrip("\n")]
    out: list[tuple[float, str, str, int, int, float]] = []
    queue_of: dict[str, str] = {}
    for c in range(cohorts):
        lines += [f"    - name: cohort{c}", "      queues:"]
        for q in range(queues):
            lines.append(f"      - {{name: cq{q}, resources: {{guaranteed: {{vcore: {nominal}}}, "
                         f"max: {{vcore: {nominal + borrow}}}}}}}")
            queue_of[f"c{c}q{q}"] = f"root.cohort{c}.cq{q}"
            for ci, (count, every, runtime, prio, cores) in enumerate(classes):
                for i in range(max(1, round(count * fraction))):
                    out.append((i * every / 1000, f"c{c}q{q}", f"c{c}q{q}-{ci}-{i}", cores, prio,
                                runtime / 1000))
    out.sort()
    # the cluster is smaller than the sum of the maxima, so workloads wait for each other
    return "\n".join(lines) + "\n", out, cohorts * queues * nominal // 2, queue_of


def _example_trace() -> Trace:
    """examples/trace.jsonl's requests as creations (allocations and asks alike wait when refused),
    each running its ``duration`` (60 s when the trace gives none)."""
    import json

    root = Path(__file__).resolve().parents[1] / "examples"
    apps: dict[str, str] = {}
    out: list[tuple[float, str, str, int, int, float]] = []
    cores = 0
    for line in (root / "trace.jsonl").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        ev = json.loads(line)
        if ev["op"] == "node":
            cores += int(ev["capacity"]["vcore"])
        elif ev["op"] == "submit":
            apps[ev["app"]] = ev["queue"]
        elif ev["op"] in ("allocate", "ask"):
            out.append((float(ev["t"]), ev["app"], ev["key"], int(ev["resource"]["vcore"]), 0,
                        float(ev.get("duration", 60))))
    lines = [_HEAD.rstrip("\n")]
    lines += [f"    - name: {q.split('.')[-1]}" for q in sorted(set(apps.values()))]
    # the example's queues without their limits: the wait comes from the cluster's size
    return "\n".join(lines) + "\n", out, cores, {a: f"root.{q.split('.')[-1]}" for a, q in apps.items()}


def accuracy(trace: Trace, *, declared: bool, warm: HoldTimes | None = None) -> dict[str, Any]:
    """Replay ``trace`` on a virtual clock; the forecast of each ask when it began to wait against its
    actual start. ``warm``: hold times observed before (a cluster with a history), taken as the start
    of the tracker's."""
    text, creations, cores, queue_of = trace
    clock = Clock(0.0)
    p = Scheduler.from_yaml(text, clock=clock, snapshot_every=0).partition("default")
    p.add_node("n0", Resource({"vcore": cores * CORE}))
    for app, queue in queue_of.items():
        p.add_application(app, UserGroup(f"user-{app}"), queue=queue)
    t = tracker(p)
    if warm is not None:
        t.holds.queues, t.holds.users = copy.deepcopy(warm.queues), copy.deepcopy(warm.users)
    events: list[tuple[float, int, str, str, float]] = []
    for n, (at, _app, key, _c, _prio, runtime) in enumerate(creations):
        heapq.heappush(events, (at, n, "create", key, runtime))
    spec = {key: (app, c, prio, runtime) for _, app, key, c, prio, runtime in creations}
    predicted: dict[str, tuple[float | None, float | None, float | None, float]] = {}
    started: dict[str, float] = {}
    fresh: list[str] = []
    p.subscribe(lambda n: fresh.append(n["allocationKey"]) if n["type"] == "allocated" else None)
    n = len(creations)
    while events:
        at, _, kind, key, runtime = heapq.heappop(events)
        clock.t = max(clock.t, at)
        if kind == "create":
            app, c, prio, _ = spec[key]
            p.add_ask(app, key, Resource({"vcore": c * CORE}), priority=prio,
                      max_runtime=runtime if declared else None)
            if p.get_ask(key) is not None:          # it waits: forecast now
                e = t.forecast(clock.t).asks.get(key)
                if e is not None:
                    predicted[key] = (e.p10, e.p50, e.p90, clock.t)
        else:
            p.release(key)
        for k in fresh:
            started[k] = clock.t
            n += 1
            heapq.heappush(events, (clock.t + spec[k][3], n, "finish", k, 0.0))
        fresh.clear()
    errors, rel, inside, unknown = [], [], 0, 0
    for key, (p10, p50, p90, since) in predicted.items():
        actual = started[key]
        if p50 is None:
            unknown += 1
            continue
        errors.append(abs(p50 - actual))
        rel.append(abs(p50 - actual) / max(actual - since, 1e-9))
        if p10 is not None and p90 is not None and p10 - 1e-6 <= actual <= p90 + 1e-6:
            inside += 1
    known = len(errors)
    accuracy.last_holds = t.holds     # type: ignore[attr-defined]
    return {"workloads": len(creations), "waited": len(predicted), "unknown": unknown,
            "median_abs_error_s": round(statistics.median(errors), 3) if errors else None,
            "median_rel_error": round(statistics.median(rel), 3) if rel else None,
            "inside_p10_p90": round(inside / known, 3) if known else None}


def _previous() -> dict[str, Any]:
    import json

    path = Path(__file__).resolve().parent / "results" / "eta.json"
    try:
        found = json.loads(path.read_text())["results"]
    except (OSError, ValueError, KeyError):
        return {}
    return found if isinstance(found, dict) else {}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the chosen sections; write ``benchmarks/results/eta.json``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queues", type=int, default=1000, help="1000 = the issue's size")
    ap.add_argument("--fraction", type=float, default=0.02,
                    help="of Kueue's baseline workloads (0.02: docs/eta.md's figures)")
    ap.add_argument("--only", default="forecast,explain,explain_timed,accuracy")
    args = ap.parse_args(argv)
    sections = set(args.only.split(","))
    # the sections not run keep their last figures (a long section can be run on its own)
    results: dict[str, Any] = _previous()
    results["targets"] = TARGETS
    if "explain" in sections:
        results["explain"] = explain_section(args.queues)
        print(f"  explain: {results['explain']}", flush=True)
    if "explain_timed" in sections:
        results["explain_timed"] = explain_timed_section(args.queues)
        print(f"  explain_timed: {results['explain_timed']}", flush=True)
    if "forecast" in sections:
        results["forecast"] = forecast_section(args.queues)
        print(f"  forecast: {results['forecast']}", flush=True)
    if "accuracy" in sections:
        kueue = _kueue_trace(args.fraction)
        example = _example_trace()
        results["accuracy"] = {}
        results["accuracy_fraction"] = args.fraction
        for name, trace in (("kueue_baseline", kueue), ("example", example)):
            results["accuracy"][f"{name}_declared"] = accuracy(trace, declared=True)
            # the history mode on a cluster that ran the same trace once before: a cold start has no
            # hold times, and its answers are all "unknown" (also measured)
            results["accuracy"][f"{name}_history_cold"] = accuracy(trace, declared=False)
            warm = accuracy.last_holds       # type: ignore[attr-defined]
            results["accuracy"][f"{name}_history"] = accuracy(trace, declared=False, warm=warm)
        print(f"  accuracy: {results['accuracy']}", flush=True)
    write_results("eta", results)
    return results


if __name__ == "__main__":
    main()
