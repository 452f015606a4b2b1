"""Queueing benchmark: one scheduling cycle over 10,000 pending asks in 1,000 leaf queues.

Setup (outside the timings): 10 parent queues x 100 leaf queues (each leaf with a ``guaranteed`` and a
``max``, half of them ``fair``-sorted), one application per leaf (100 users, a ``*`` user limit at the
parents), 10 pending asks per application of 1 vcore + 1 GiB, priorities 0-2; the partition's
``auto_schedule`` is off so the cycle is timed alone. Every timing is the best of ``REPEAT`` runs on a
fresh partition (memory journal: every allocation is still journalled as an event; automatic
snapshots are off so that one does not land inside a timed run).

Scenarios (``Partition.schedule()``: one cycle, the fair order of queues, applications and asks):

- ``all_fit``: every ask fits -> 10,000 allocations in one cycle. Baseline: the same 10,000
  allocations through direct ``Partition.allocate`` calls (same order, same partition shape), so
  ``ratio_all_fit`` is the cost of queueing + ordering on top of the admission path.
- ``half_fit``: each leaf ``max`` lets 5 of its 10 asks in -> 5,000 allocations and 5,000 refusals
  (each refused ask keeps the reasons of its attempt).
- ``none_fit``: the queues are full -> 10,000 refusals (what a cycle costs when nothing frees up).
  Baseline: 10,000 direct ``Partition.what_if`` calls for the same requests. The asks of one
  application at one priority are equal, so after the first refusal the others are refused without
  an attempt (a cycle only consumes). ``none_fit_mixed``: every ask smaller than the one before it,
  so that shortcut never applies (each ask is still checked against the queue maxima first, which
  is what refuses them here), against the same what_if baseline.
- ``submit_auto``: 10,000 ``add_ask`` calls with automatic cycles on, into full queues: each
  submission tries only the new ask (nothing was freed since the last cycle). Baseline: 10,000
  refused direct ``allocate`` calls.
- ``release``: 1,000 releases one by one in queue ``root.spare`` (automatic cycles on) while 10,000
  asks wait in the 1,000 other, full, leaf queues: the incremental cycle retries none of them (issue
  13). Baseline: the same releases with nothing waiting. ``release_with_full_cycles_ms``: what one
  release costs when every automatic cycle is a full one (``Partition.incremental = False``).

Run: ``.venv/bin/python benchmarks/queueing.py`` (well under a minute).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import write_results
from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.partition import Partition
from quotaplane.scheduler import Scheduler

PARENTS = 10
LEAVES = 100          # per parent: 1,000 leaf queues
ASKS = 10             # per application (one application per leaf): 10,000 asks
USERS = [UserGroup(f"user{i}", ["dev"]) for i in range(100)]
ASK = Resource({"vcore": 1000, "memory": 1 << 30})
REPEAT = 3

#: CPU seconds of this process: the benchmark is single-threaded without I/O (memory journal), so
#: this is its wall time on an idle machine, and it is far less disturbed by other processes on a
#: shared 2-core machine than ``perf_counter`` (ratios are what the figures are compared by).
_clock = time.process_time


def _config(leaf_max: int) -> str:
    """The queue YAML; ``leaf_max`` in cores (config vcore units)."""
    lines = ["partitions:", "- name: default", "  queues:", "  - name: root", "    submitacl: '*'",
             "    queues:"]
    lines += ["    - name: spare"]
    for p in range(PARENTS):
        lines += [f"    - name: p{p}",
                  "      limits: [{limit: u, users: ['*'], maxresources: {vcore: 10000000}}]",
                  "      queues:"]
        for leaf in range(LEAVES):
            policy = "fair" if leaf % 2 else "fifo"
            guaranteed = min(leaf_max, 1 + leaf % 5)
            lines.append(f"      - {{name: q{leaf}, resources: {{guaranteed: {{vcore: {guaranteed}}}, "
                         f"max: {{vcore: {leaf_max}}}}}, "
                         f"properties: {{application.sort.policy: {policy}}}}}")
    return "\n".join(lines) + "\n"


def _requests(mixed: bool = False) -> list[tuple[str, str, int, Resource]]:
    """(application, key, priority, resource) in arrival order: round-robin over applications.

    ``mixed``: every ask of an application is smaller than the one before it, so no refused ask
    spares the attempt of a later one (the cycle's worst case)."""
    out = []
    for i in range(ASKS):
        res = Resource({"vcore": (ASKS - i) * 1000, "memory": 1 << 30}) if mixed else ASK
        for p in range(PARENTS):
            for leaf in range(LEAVES):
                out.append((f"app-{p}-{leaf}", f"k-{p}-{leaf}-{i}", i % 3, res))
    return out


def _partition(leaf_max: int, *, full: bool = False) -> Partition:
    s = Scheduler.from_yaml(_config(leaf_max), snapshot_every=0)
    p = s.partition("default")
    p.auto_schedule = False
    p.add_node("n1", Resource({"vcore": 10**12, "memory": 10**18}))
    n = 0
    for par in range(PARENTS):
        for leaf in range(LEAVES):
            app = f"app-{par}-{leaf}"
            p.add_application(app, USERS[n % len(USERS)], queue=f"root.p{par}.q{leaf}")
            n += 1
            if full:
                assert p.allocate(app, f"fill-{app}", Resource({"vcore": leaf_max * 1000})).allocated
    return p


def _with_asks(leaf_max: int, *, full: bool = False, mixed: bool = False) -> Partition:
    p = _partition(leaf_max, full=full)
    for app, key, prio, res in _requests(mixed):
        p.add_ask(app, key, res, priority=prio)
    return p


def _cycle(leaf_max: int, *, full: bool = False, mixed: bool = False, repeat: int = 1
           ) -> tuple[float, int, int]:
    best, made, left = float("inf"), 0, 0
    for _ in range(repeat):
        p = _with_asks(leaf_max, full=full, mixed=mixed)
        start = _clock()
        allocations = p.schedule()
        best = min(best, _clock() - start)
        made, left = len(allocations), len(p.pending())
    return best, made, left


def _direct_allocate(leaf_max: int, repeat: int = 1) -> tuple[float, int]:
    best, made = float("inf"), 0
    for _ in range(repeat):
        p = _partition(leaf_max)
        reqs = _requests()
        start = _clock()
        made = sum(p.allocate(app, key, res, priority=prio).allocated for app, key, prio, res in reqs)
        best = min(best, _clock() - start)
    return best, made


def _direct_what_if(leaf_max: int, mixed: bool = False, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        p = _partition(leaf_max, full=True)
        reqs = _requests(mixed)
        start = _clock()
        for app, _key, prio, res in reqs:
            p.what_if(app, res, priority=prio)
        best = min(best, _clock() - start)
    return best


def _submit(leaf_max: int, repeat: int = 1) -> tuple[float, float]:
    """10,000 ``add_ask`` calls with automatic cycles on, into full queues (each waits), against
    10,000 refused direct ``allocate`` calls on the same full partition."""
    best, base = float("inf"), float("inf")
    for _ in range(repeat):
        p = _partition(leaf_max, full=True)
        p.auto_schedule = True
        reqs = _requests()
        start = _clock()
        for app, key, prio, res in reqs:
            p.add_ask(app, key, res, priority=prio)
        best = min(best, _clock() - start)
        assert len(p.pending()) == len(reqs)
        q = _partition(leaf_max, full=True)
        start = _clock()
        for app, key, prio, res in reqs:
            q.allocate(app, key, res, priority=prio)
        base = min(base, _clock() - start)
    return best, base


RELEASES = 1000


def _releases(*, waiting: bool, incremental: bool = True, count: int = RELEASES) -> float:
    """``count`` releases, one by one, in queue ``root.spare`` (automatic cycles on), with every leaf
    of ``p0…p9`` full and — ``waiting`` — 10,000 asks waiting in them, or none."""
    p = _partition(1, full=True)
    p.auto_schedule = True
    p.incremental = incremental
    if waiting:
        for app, key, prio, res in _requests():
            p.add_ask(app, key, res, priority=prio)
        assert len(p.pending()) == PARENTS * LEAVES * ASKS
    p.add_application("spare-app", USERS[0], queue="root.spare")
    keys = [f"spare-{i}" for i in range(count)]
    for key in keys:
        assert p.allocate("spare-app", key, ASK).allocated
    start = _clock()
    for key in keys:
        p.release(key)
    took = _clock() - start
    assert len(p.pending()) == (PARENTS * LEAVES * ASKS if waiting else 0)
    return took / count


def main() -> dict[str, Any]:
    """Run the scenarios; write ``benchmarks/results/queueing.json``."""
    n = PARENTS * LEAVES * ASKS
    unlimited = ASKS
    inf = float("inf")
    all_t = half_t = none_t = mixed_t = base_alloc_t = base_what_if_t = base_mixed_t = inf
    submit_t = submit_base_t = inf
    release_t = release_base_t = release_full_t = inf
    # Interleaved rounds (each scenario next to its baseline), best of REPEAT: the machine is noisy.
    for _ in range(REPEAT):
        t, made, left = _cycle(unlimited)
        assert made == n and left == 0, (made, left)
        all_t = min(all_t, t)
        t, made = _direct_allocate(unlimited)
        assert made == n
        base_alloc_t = min(base_alloc_t, t)
        t, made, left = _cycle(ASKS // 2)
        assert made == n // 2 and left == n // 2, (made, left)
        half_t = min(half_t, t)
        t, made, left = _cycle(1, full=True)
        assert made == 0 and left == n, (made, left)
        none_t = min(none_t, t)
        base_what_if_t = min(base_what_if_t, _direct_what_if(1))
        t, made, left = _cycle(1, full=True, mixed=True)
        assert made == 0 and left == n, (made, left)
        mixed_t = min(mixed_t, t)
        base_mixed_t = min(base_mixed_t, _direct_what_if(1, mixed=True))
        t, tb = _submit(1)
        submit_t, submit_base_t = min(submit_t, t), min(submit_base_t, tb)
        release_t = min(release_t, _releases(waiting=True))
        release_base_t = min(release_base_t, _releases(waiting=False))
    release_full_t = _releases(waiting=True, incremental=False, count=5)
    all_made, half_made = n, n // 2
    results = {
        "pending_asks": n,
        "leaf_queues": PARENTS * LEAVES,
        "all_fit_cycle_s": round(all_t, 4),
        "all_fit_allocations_per_s": round(all_made / all_t),
        "half_fit_cycle_s": round(half_t, 4),
        "half_fit_allocations_per_s": round(half_made / half_t),
        "half_fit_asks_tried_per_s": round(n / half_t),
        "none_fit_cycle_s": round(none_t, 4),
        "none_fit_asks_tried_per_s": round(n / none_t),
        "baseline_direct_allocate_s": round(base_alloc_t, 4),
        "baseline_direct_allocate_per_s": round(n / base_alloc_t),
        "baseline_direct_what_if_s": round(base_what_if_t, 4),
        "ratio_all_fit_vs_direct_allocate": round(all_t / base_alloc_t, 2),
        "ratio_none_fit_vs_direct_what_if": round(none_t / base_what_if_t, 2),
        "none_fit_mixed_cycle_s": round(mixed_t, 4),
        "none_fit_mixed_asks_tried_per_s": round(n / mixed_t),
        "baseline_direct_what_if_mixed_s": round(base_mixed_t, 4),
        "ratio_none_fit_mixed_vs_direct_what_if": round(mixed_t / base_mixed_t, 2),
        "submit_auto_10k_s": round(submit_t, 4),
        "submit_auto_per_ask_us": round(submit_t / n * 1e6, 1),
        "baseline_refused_allocate_10k_s": round(submit_base_t, 4),
        "ratio_submit_vs_refused_allocate": round(submit_t / submit_base_t, 2),
        "release_with_10k_waiting_elsewhere_ms": round(release_t * 1e3, 4),
        "baseline_release_nothing_waiting_ms": round(release_base_t * 1e3, 4),
        "ratio_release_waiting_vs_nothing_waiting": round(release_t / release_base_t, 2),
        "release_with_full_cycles_ms": round(release_full_t * 1e3, 2),
    }
    write_results("queueing", results)
    return results


if __name__ == "__main__":
    main()
