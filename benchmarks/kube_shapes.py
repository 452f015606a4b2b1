"""The Kubernetes front at Kueue's published shapes (issue 38 item 4), against the API server emulator.

Kueue publishes two scheduler performance runs (``test/performance/scheduler/configs`` in
kubernetes-sigs/kueue): the **baseline** — 15,000 workloads over 30 ClusterQueues in 5 cohorts, about
43 admissions/s — and the **large-scale** one — 50,000 workloads over 1,000 ClusterQueues in 10 cohorts,
about 42/s. Here each workload is a pod carrying the admission gate (as the webhook leaves it), with
Kueue's three classes (small 1 core, medium 5, large 20; priorities 50, 100, 200); a cohort is a parent
queue and a ClusterQueue a leaf (``guaranteed`` its nominal quota, ``max`` nominal + borrowing limit),
named by the pod's ``yunikorn.apache.org/queue`` annotation. Quotas are sized so that every workload is
admitted (the figure is the time to admit them all, not Kueue's run-and-finish cycle).

The pods are seeded into the emulator, then the front (``quotaplane.kube.controller.Controller``) starts
and is timed until every pod is ungated on the API server: it lists the pods, makes one ask per pod,
admits them, and for each pod sends the ungate patch, the ``QuotaAdmitted`` condition and an
``Admitted`` Event. Reported per shape:

* ``admitted_per_s`` and the mean time from the front's start to a pod's ungating, against Kueue's
  published rate;
* ``front_cpu_us_per_pod``: CPU of the front's own thread (the asyncio loop running the controller and
  the engine) per admitted pod — the emulator runs in another thread of the same process, so this is the
  front's cost alone, and ``1e6 / front_cpu_us_per_pod`` is the rate the front could sustain with an API
  server that cost nothing;
* ``emulator_cpu_share``: the share of the process's CPU that was not the front's thread (the emulator:
  a Python HTTP server — the limit here, not the front);
* ``rss_mib_per_1k_pods``: the process's resident memory growth per 1,000 pods over the run (front and
  emulator objects together: an upper bound for the front).

``--fraction`` scales the workloads per queue of both shapes (the queues stay as published; the full
size is 1; the default 0.1 takes a few minutes on a shared
2-core machine). Run: ``nice -n 10 .venv/bin/python benchmarks/kube_shapes.py [--fraction 1]``.
Results go to ``benchmarks/results/kube_shapes.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
from _bench import write_results  # noqa: E402

GATE = "quotaplane.io/admission"
#: a run with no pod ungated for this long has failed (a benchmark never waits forever) — after the
#: front's start-up sync, and before it (the sync lists and decides every pod before any is ungated)
STALL_S = 300.0
SYNC_S = 1800.0


@dataclass(frozen=True)
class Shape:
    """One of Kueue's published runs: cohorts x ClusterQueues, workloads per queue in three classes."""

    name: str
    cohorts: int
    queues: int                                  # per cohort
    #: (workloads per queue, cores, priority) of the small, medium and large classes
    classes: tuple[tuple[int, int, int], ...]
    published_per_s: float

    @property
    def workloads(self) -> int:
        return self.cohorts * self.queues * sum(c[0] for c in self.classes)

    def config(self, per_queue_cores: int) -> str:
        lines = ["partitions:", "- name: default", "  placementrules:", "  - name: provided",
                 "  queues:", "  - name: root", "    submitacl: '*'", "    queues:"]
        for c in range(self.cohorts):
            lines += [f"    - name: cohort{c}", "      queues:"]
            for q in range(self.queues):
                lines.append(f"      - {{name: cq{q}, resources: {{guaranteed: {{vcore: {per_queue_cores}}}, "
                             f"max: {{vcore: {2 * per_queue_cores}}}}}}}")
        return "\n".join(lines) + "\n"


#: 5 cohorts x 6 queues, 500 workloads each (350 small, 100 medium, 50 large): 15,000
BASELINE = Shape("baseline", 5, 6, ((350, 1, 50), (100, 5, 100), (50, 20, 200)), 43.0)
#: 10 cohorts x 100 queues, 50 workloads each (Kueue's class mix): 50,000
LARGE = Shape("large-scale", 10, 100, ((33, 1, 50), (12, 5, 100), (5, 20, 200)), 42.0)


def _pod(name: str, queue: str, cores: int, priority: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}",
                         "annotations": {"yunikorn.apache.org/user.info":
                                         '{"user":"alice","groups":["dev"]}',
                                         "yunikorn.apache.org/queue": queue}},
            "spec": {"schedulingGates": [{"name": GATE}], "priority": priority,
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": str(cores)}}}]}}


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _scaled(shape: Shape, fraction: float) -> Shape:
    """The shape with ``fraction`` of its workloads per queue (at least one per class): the queues
    and cohorts stay as published."""
    if fraction >= 1:
        return shape
    classes = tuple((max(1, round(n * fraction)), cores, prio) for n, cores, prio in shape.classes)
    return Shape(shape.name, shape.cohorts, shape.queues, classes, shape.published_per_s)


def run(shape: Shape) -> dict[str, Any]:
    """Seed the shape's gated pods, run the front until all are ungated; the figures."""
    from tests.kube.emulator import Emulator

    from quotaplane.kube.api import KubeApi, client_config
    from quotaplane.kube.controller import Controller, ControllerOptions
    from quotaplane.scheduler import Scheduler

    per_queue = sum(n * cores for n, cores, _ in shape.classes)      # every workload of a queue fits
    total = shape.workloads
    emulator = Emulator().start()
    try:
        state = emulator.state
        emulator.call(lambda: state.put("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": "bench"}}))
        emulator.call(lambda: state.put("nodes", {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": str(per_queue * shape.cohorts * shape.queues * 2),
                                       "memory": "100Ti", "pods": str(total * 2)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}))
        pods = [_pod(f"c{c}q{q}-{ci}-{i}", f"root.cohort{c}.cq{q}", cores, prio)
                for c in range(shape.cohorts) for q in range(shape.queues)
                for ci, (count, cores, prio) in enumerate(shape.classes) for i in range(count)]
        for start in range(0, len(pods), 200):     # small batches: each call has the emulator's 10 s
            batch = pods[start:start + 200]
            emulator.call(lambda batch=batch: [state.put("pods", p) for p in batch])   # type: ignore[misc]
        del pods
        rss_before = _rss()
        cpu_before = time.process_time()
        ungated_at: list[float] = []
        sync_s = [0.0]
        done = threading.Event()

        async def main() -> tuple[float, float, float]:
            api = KubeApi(client_config(server=emulator.url))
            real_patch = api.patch_json

            async def counting(kind: str, obj: Any, patch: Any) -> None:
                await real_patch(kind, obj, patch)
                if "schedulingGates" in json.dumps(patch):
                    ungated_at.append(time.perf_counter())
                    if len(ungated_at) == total:
                        done.set()
            api.patch_json = counting  # type: ignore[method-assign]
            controller = Controller(Scheduler.from_yaml(shape.config(per_queue * 1000)), api,
                                    ControllerOptions(reasons_every=5.0, timeouts_every=None))
            thread_before = time.thread_time()
            start = time.perf_counter()
            task = asyncio.create_task(controller.run())
            seen, last_progress = 0, time.perf_counter()
            synced_at: float | None = None
            while not done.is_set():
                await asyncio.sleep(0.05)
                if synced_at is None and controller.synced.is_set():
                    synced_at = last_progress = time.perf_counter()
                if len(ungated_at) != seen:
                    seen, last_progress = len(ungated_at), time.perf_counter()
                elif time.perf_counter() - last_progress > (STALL_S if synced_at else SYNC_S):
                    task.cancel()
                    raise RuntimeError(f"no pod ungated for {time.perf_counter() - last_progress:.0f} s "
                                       f"({'after' if synced_at else 'before'} the front's start-up "
                                       f"sync): {seen} of {total} admitted")
            sync_s[0] = (synced_at or time.perf_counter()) - start
            elapsed = time.perf_counter() - start
            front_cpu = time.thread_time() - thread_before
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await api.close()
            return start, elapsed, front_cpu

        started, elapsed, front_cpu = asyncio.run(main())
        process_cpu = time.process_time() - cpu_before
        rss_growth = _rss() - rss_before
    finally:
        emulator.stop()
    rate = total / elapsed
    return {"workloads": total, "queues": shape.cohorts * shape.queues, "cohorts": shape.cohorts,
            # both to the hundredth: the mean is never above the whole, and rounded apart it could be
            # (0.104 s → 0.1 against a mean of 0.105 → 0.11, on a loaded machine)
            "seconds_to_admit_all": round(elapsed, 2), "admitted_per_s": round(rate, 1),
            "published_kueue_per_s": shape.published_per_s,
            "ratio_vs_kueue": round(rate / shape.published_per_s, 2),
            # every pod waits from the front's start (all were created before it)
            "mean_seconds_to_admission": round(sum(t - started for t in ungated_at) / total, 2),
            # the start-up sync: every pod listed (in pages) and decided before the first is ungated
            "startup_sync_s": round(sync_s[0], 1),
            "front_cpu_us_per_pod": round(1e6 * front_cpu / total, 1),
            "front_bound_pods_per_s": round(total / front_cpu, 1) if front_cpu else None,
            "emulator_cpu_share": round(1 - front_cpu / process_cpu, 2) if process_cpu else None,
            "rss_mib_per_1k_pods": round(rss_growth / 2**20 / (total / 1000), 2)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Both shapes at ``--fraction``; write ``benchmarks/results/kube_shapes.json``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fraction", type=float, default=0.1, help="1 = Kueue's published sizes")
    ap.add_argument("--only", default="baseline,large-scale")
    args = ap.parse_args(argv)
    results: dict[str, Any] = {"fraction": args.fraction}
    for shape in (BASELINE, LARGE):
        if shape.name in args.only.split(","):
            results[shape.name] = run(_scaled(shape, args.fraction))
            print(f"  {shape.name}: {results[shape.name]}", flush=True)
    write_results("kube_shapes", results)
    return results


if __name__ == "__main__":
    main()
