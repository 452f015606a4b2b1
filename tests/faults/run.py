"""The fault suite's runner: a cluster under concurrent writers through every instance, faults
injected one after another, then the checker's verdict (:mod:`tests.faults.checker`).

Short form: ``tests/faults/test_fault_suite.py`` (in ``make test``). Long form, by hand::

    make faults                                    # 100 faults of each kind, a PostgreSQL of its own
    .venv/bin/python -m tests.faults.run --each 20 --kinds kill,stop --store "$QUOTAPLANE_PG_URL"

Faults (each on a random instance unless said otherwise):

* ``kill`` — kill -9, started again after 0.5–2 s;
* ``stop`` — SIGSTOP for the lease's ttl plus 0.5–1.5 s (it wakes up deposed), then SIGCONT;
* ``pg`` — a PostgreSQL restart: the suite's own server really restarted (``immediate`` — as a
  crash — or ``fast``), or, on a shared server, what the instances see of one: every connection
  cut and none taken for 0.5–2 s (all proxies);
* ``reset`` — every connection of one instance (or of all) cut with a TCP reset;
* ``freeze`` — one instance's connections frozen (nothing moves, no error) for the ttl plus
  0.5–1.5 s, then thawed.

After every fault (and the pause that follows it) the writers are held, and once every partition is
led again what every instance serves is compared with the journal (the checker's "state vs journal").

Prints the figures as JSON and exits 1 when the verdict is not clean.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.faults.checker import (
    Verdict,
    check,
    journal_events,
    leadership_intervals,
    live_allocations,
    state_disagreements,
)
from tests.faults.cluster import LIMIT, Cluster, OwnServer
from tests.faults.workload import Workload

KINDS = ("kill", "stop", "pg", "reset", "freeze")


@dataclass
class Fault:
    """One injected fault: its kind, the instance it hit (or "all"), when it began and ended."""

    kind: str
    target: str
    start: float
    end: float


def inject(kind: str, cluster: Cluster, rnd: random.Random, server: OwnServer | None,
           answer_timeout: float = 120.0) -> Fault:
    """Inject one fault of ``kind`` and end it (see the module docstring)."""
    alive = [i for i in cluster.instances if i.alive()]
    inst = rnd.choice(alive or cluster.instances)
    ttl = cluster.ttl
    start = time.monotonic()
    target = inst.name
    if kind == "kill":
        inst.kill()
        time.sleep(rnd.uniform(0.5, 2.0))
        inst.start(cluster.config_file)
        cluster.wait_answering(inst, answer_timeout)
    elif kind == "stop":
        inst.signal(signal.SIGSTOP)
        time.sleep(ttl + rnd.uniform(0.5, 1.5))
        inst.signal(signal.SIGCONT)
    elif kind == "pg":
        target = "all"
        if server is not None:
            server.restart(rnd.choice(["immediate", "fast"]))
        else:
            down = rnd.uniform(0.5, 2.0)
            threads = [threading.Thread(target=i.proxy.restart, args=(down,)) for i in cluster.instances]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    elif kind == "reset":
        if rnd.random() < 0.3:
            target = "all"
            for i in cluster.instances:
                i.proxy.reset()
        else:
            inst.proxy.reset()
    elif kind == "freeze":
        inst.proxy.freeze()
        time.sleep(ttl + rnd.uniform(0.5, 1.5))
        inst.proxy.thaw()
    else:
        raise ValueError(f"unknown fault kind {kind!r} (known: {', '.join(KINDS)})")
    return Fault(kind, target, start, time.monotonic())


def leaderless_after(faults: list[Fault], spans: dict[str, list[tuple[str, float, float]]],
                     end: float) -> dict[str, dict[str, float]]:
    """Per fault kind: the longest and the median time, after a fault began, until every partition
    that lost its leader had one again (0 when none lost it)."""
    out: dict[str, list[float]] = {}
    for n, f in enumerate(faults):
        until = faults[n + 1].start if n + 1 < len(faults) else end
        worst = 0.0
        for partition_spans in spans.values():
            covered = sorted((s, e) for _, s, e in partition_spans if e > f.start and s < until)
            at = f.start
            for s, e in covered:
                if s > at:
                    worst = max(worst, s - at)
                at = max(at, e)
            if at < until:
                worst = max(worst, until - at)
        out.setdefault(f.kind, []).append(worst)
    return {k: {"faults": len(v), "p50 s": percentile(v, 0.5), "p99 s": percentile(v, 0.99),
                "longest s": round(max(v), 2)} for k, v in out.items()}


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` percentile of ``values`` (rounded to 10 ms)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 1))           # ceil(n q), at least the first
    return round(ordered[int(rank) - 1], 2)


def served_allocations(url: str, partition: str) -> dict[str, int] | None:
    """The allocations (key → slots) ``url`` serves of the application ``app`` in ``partition``,
    and under the key ``""`` the slots its queue ``root.q`` says it holds (the usage admissions are
    decided by, kept apart from the allocations); None when it does not answer them now (503 while
    it is not sure of its lease, no answer)."""
    import httpx

    try:
        app = httpx.get(f"{url}/ws/v1/partition/{partition}/application/app", timeout=10)
        queue = httpx.get(f"{url}/ws/v1/partition/{partition}/queue/root.q", timeout=10)
    except httpx.HTTPError:
        return None
    if app.status_code != 200 or queue.status_code != 200:
        return None
    served = {str(a["allocationKey"]): int(dict(a.get("resource") or {}).get("slots", 0))
              for a in app.json().get("allocations") or ()}
    served[""] = int(dict(queue.json().get("allocatedResource") or {}).get("slots", 0))
    return served


def compare_with_journal(cluster: Cluster, settle: float) -> list[str]:
    """With the writers held: wait until every partition is led, then until every live instance
    serves of every partition what the journal holds (a change decided before the hold may still be
    on its way to the store for up to the store's op_timeout: ``settle`` seconds are allowed for it).
    The disagreements left after that (empty when the state and the journal agree)."""
    try:
        cluster.wait_led(120)
    except RuntimeError as e:
        return [f"not led 120 s after the fault: {e}"]
    deadline = time.monotonic() + settle
    while True:
        found: list[str] = []
        events = journal_events(cluster.store, cluster.partitions)
        for inst in cluster.instances:
            if not inst.alive():
                continue
            for partition in cluster.partitions:
                served = served_allocations(inst.url, partition)
                if served is None:
                    found.append(f"{inst.name}/{partition}: not answered")
                    continue
                journalled = live_allocations(events[partition])
                journalled[""] = sum(journalled.values())      # the queue holds what its allocations do
                found += state_disagreements(f"{inst.name}/{partition}", served, journalled)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def run(store: str | None, *, kinds: list[str], each: int, instances: int = 3, partitions: int = 3,
        ttl: float = 2.0, op_timeout: float = 1.5, workers: int = 1, seed: int = 1, pause: tuple[float, float]
        = (1.0, 2.5), own_server: bool = False, workdir: Path | None = None, log: bool = False
        ) -> tuple[Verdict, dict[str, Any]]:
    """Run the suite; the verdict and the figures."""
    rnd = random.Random(seed)
    server = OwnServer() if own_server else None
    base = server.url if server is not None else store
    if base is None:
        raise SystemExit("give --store URL (a PostgreSQL) or --own-server")
    cluster = Cluster(base, instances=instances, partitions=partitions, ttl=ttl, op_timeout=op_timeout,
                      workdir=workdir)
    faults: list[Fault] = []
    disagreements: list[str] = []
    compared = 0
    try:
        with cluster:
            cluster.start()
            _setup(cluster)
            work = Workload({i.name: i.url for i in cluster.instances}, cluster.partitions, workers=workers,
                            seed=seed)
            window_start = time.monotonic()
            work.start()
            plan = [k for k in kinds for _ in range(each)]
            rnd.shuffle(plan)
            try:
                time.sleep(rnd.uniform(*pause))
                for n, kind in enumerate(plan, 1):
                    fault = inject(kind, cluster, rnd, server)
                    faults.append(fault)
                    if log:
                        print(f"[{n}/{len(plan)}] {kind} {fault.target} {fault.end - fault.start:.1f} s",
                              file=sys.stderr, flush=True)
                    time.sleep(rnd.uniform(*pause))
                    quiet = work.hold()
                    try:
                        found = compare_with_journal(cluster, settle=4 * ttl + 2 * op_timeout)
                    finally:
                        work.resume()
                    compared += 1
                    disagreements += [f"after fault {n} ({kind} {fault.target}"
                                      f"{'' if quiet else ', writers not quiet'}): {d}" for d in found]
                cluster.heal()
                cluster.wait_led(180)
                time.sleep(2 * ttl)             # the last writes after the faults, through every instance
            finally:
                work.stop()
            window_end = time.monotonic()
        # every instance stopped: nothing lands in the journal after this read
        events = journal_events(cluster.store, cluster.partitions)
        with (cluster.workdir / "records.jsonl").open("w") as out:     # for a look at the cases later
            for r in work.records:
                out.write(json.dumps(dataclasses.asdict(r)) + "\n")
        spans = leadership_intervals(cluster.leadership_log)
        from quotaplane.server.ha import default_margin

        margin = default_margin(ttl, max(0.2, min(1.0, ttl / 5)))
        verdict = check(work.records, events, limit=LIMIT, leadership=spans, margin=margin,
                        window=(window_start, window_end))
        verdict.state_vs_journal, verdict.state_checks = disagreements, compared
        figures = {"faults": {k: sum(1 for f in faults if f.kind == k) for k in kinds},
                   "seconds": round(window_end - window_start, 1),
                   "after a fault, until every partition is led again": leaderless_after(faults, spans,
                                                                                          window_end),
                   **verdict.summary()}
        return verdict, figures
    finally:
        cluster.drop()
        if server is not None:
            server.stop()


def _setup(cluster: Cluster) -> None:
    """A node and the application ``app`` in every partition (through the first instance: the writes
    for partitions led elsewhere are relayed)."""
    import httpx

    url = cluster.instances[0].url
    with httpx.Client(timeout=30) as http:
        for p in cluster.partitions:
            for _ in range(50):
                r = http.put(f"{url}/ws/v1/partition/{p}/node/n1", json={"capacity": {"slots": 100000}})
                if r.status_code in (200, 201, 409):
                    break
                time.sleep(0.2)
            for _ in range(50):
                r = http.post(f"{url}/ws/v1/partition/{p}/applications",
                              json={"applicationID": "app", "user": "sue", "groups": [], "queue": "root.q"})
                if r.status_code in (200, 201, 409):
                    break
                time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m tests.faults.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", default=os.environ.get("QUOTAPLANE_PG_URL"),
                    help="a PostgreSQL URL (a fresh schema is used and dropped); default $QUOTAPLANE_PG_URL")
    ap.add_argument("--own-server", action="store_true",
                    help="run a PostgreSQL of the suite's own (initdb in a temporary directory) and really "
                         "restart it for the pg faults")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    ap.add_argument("--each", type=int, default=100, help="faults of each kind")
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--ttl", type=float, default=3.0, help="the lease ttl (seconds)")
    ap.add_argument("--op-timeout", type=float, default=2.0, help="the store's op_timeout (seconds)")
    ap.add_argument("--workers", type=int, default=2, help="writers per instance")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, help="write the figures (JSON) there too")
    ap.add_argument("--workdir", type=Path, help="keep the instances' logs there")
    args = ap.parse_args(argv)
    # a bounded run (CI's timeout) ends with SIGTERM: exit through the finally blocks, so the
    # instances, the proxies and the suite's own PostgreSQL are stopped and its schema dropped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    kinds = [k for k in args.kinds.split(",") if k]
    verdict, figures = run(None if args.own_server else args.store, kinds=kinds, each=args.each,
                           instances=args.instances, partitions=args.partitions, ttl=args.ttl,
                           op_timeout=args.op_timeout, workers=args.workers, seed=args.seed,
                           own_server=args.own_server, workdir=args.workdir, log=True)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
