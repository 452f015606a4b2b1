"""Benchmark: quota-forest allocate / deallocate cost (quality.md, seed 003, reference §11).

Workload (the reference's Go measurement): balanced Soft trees of 111 (fan-out 10, depth 2), 1,111
(fan-out 10, depth 3) and 8,421 nodes (fan-out 20, depth 3) with 2,000 / 10,000 / 20,000 consumers of
1–4 cpu and 1–16 memory, priorities 0–2, each in a random leaf; leaf quotas are set so the total
request is 20 % above the root quota (internal quotas = sum of the children). The manager is in Normal
mode; every consumer is allocated once (in random order, the public ``QuotaManager.allocate``), then
every allocated consumer is de-allocated (random order, ``QuotaManager.deallocate``).

Baseline, in the same process: a plain dict walk that adds (then subtracts) the request vector to every
node on the consumer's gNode→root path — the bare counter updates any hierarchical quota must do.
Reported: µs per allocate and per deallocate, the ratio to the baseline, and the Go library's figures
from the reference for comparison. Best of ``REPEAT`` runs; each run builds a fresh manager (not timed).

Run: ``.venv/bin/python benchmarks/forest.py`` (≈ 1–2 minutes on 2 cores).
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _bench import write_results
from quotaplane.forest import ConsumerInfo, Mode, QuotaManager

REPEAT = 5
# CPU time of this process: robust against other load on the shared 2-core machine (the wall-clock
# figure is reported too).
clock = time.process_time
CASES: list[tuple[str, int, int, int, float, float]] = [
    # name, fan-out, depth, consumers, Go allocate µs, Go deallocate µs (reference §11)
    ("111 nodes / 2,000 consumers", 10, 2, 2_000, 3.8, 1.3),
    ("1,111 nodes / 10,000 consumers", 10, 3, 10_000, 6.1, 1.7),
    ("8,421 nodes / 20,000 consumers", 20, 3, 20_000, 6.5, 2.4),
]


def make_tree(fanout: int, depth: int, leaf_quota: tuple[int, int]) -> tuple[dict[str, Any], list[str],
                                                                             dict[str, list[str]]]:
    """A balanced Soft tree; returns the JSON object, the leaf ids and each leaf's path to the root."""
    nodes: dict[str, Any] = {}
    paths: dict[str, list[str]] = {}
    leaves: list[str] = []

    def add(name: str, parent: str, level: int, up: list[str]) -> tuple[int, int]:
        path = [name, *up]
        if level == depth:
            cpu, mem = leaf_quota
            leaves.append(name)
            paths[name] = path
        else:
            cpu = mem = 0
            for i in range(fanout):
                c, m = add(f"{name}.{i}", name, level + 1, path)
                cpu += c
                mem += m
        nodes[name] = {"parent": parent, "hard": "false", "quota": {"cpu": str(cpu), "memory": str(mem)}}
        return cpu, mem

    add("root", "nil", 0, [])
    doc = {"kind": "QuotaTree", "metadata": {"name": "bench"},
           "spec": {"resourceNames": ["cpu", "memory"], "nodes": nodes}}
    return doc, leaves, paths


def make_consumers(n: int, leaves: list[str], rng: random.Random) -> list[tuple[str, str, int, int, int]]:
    """``n`` random consumers: (id, leaf, cpu 1–4, memory 1–16, priority 0–2)."""
    return [(f"c{i}", rng.choice(leaves), rng.randint(1, 4), rng.randint(1, 16), rng.randint(0, 2))
            for i in range(n)]


def run_case(fanout: int, depth: int, n: int, seed: int) -> dict[str, Any]:
    """One case, best of REPEAT runs."""
    rng = random.Random(seed)
    n_leaves = fanout ** depth
    probe = make_consumers(n, ["x"], random.Random(seed))
    total_cpu = sum(c[2] for c in probe)
    total_mem = sum(c[3] for c in probe)
    # 20 % over-subscribed: total request = 1.2 × root quota
    leaf_quota = (max(1, round(total_cpu / 1.2 / n_leaves)), max(1, round(total_mem / 1.2 / n_leaves)))
    doc, leaves, paths = make_tree(fanout, depth, leaf_quota)
    consumers = make_consumers(n, leaves, rng)
    tree_json = json.dumps(doc)
    infos = [ConsumerInfo.from_dict({"kind": "Consumer", "spec": {"id": cid, "trees": [
        {"treeName": "bench", "groupID": leaf, "request": {"cpu": cpu, "memory": mem}, "priority": prio}]}})
        for cid, leaf, cpu, mem, prio in consumers]
    order = list(range(n))
    rng.shuffle(order)

    best_alloc = best_dealloc = best_base_a = best_base_d = float("inf")
    allocated_count = preempted_count = success_count = 0
    for _ in range(REPEAT):
        qm = QuotaManager()
        qm.add_tree_from_string(tree_json)
        qm.set_mode(Mode.NORMAL)
        for info in infos:
            qm.add_consumer(info)
        ids = [consumers[i][0] for i in order]
        allocate = qm.allocate
        responses = []
        keep = responses.append
        t0 = clock()
        for cid in ids:
            keep(allocate("bench", cid))
        t1 = clock()
        best_alloc = min(best_alloc, (t1 - t0) / n)
        still = qm.allocated_consumers("bench")
        allocated_count = len(still)
        success_count = sum(1 for r in responses if r.allocated)
        preempted_count = sum(len(r.preempted_ids) for r in responses)
        rng2 = random.Random(seed + 1)
        rng2.shuffle(still)
        deallocate = qm.deallocate
        t0 = clock()
        for cid in still:
            deallocate("bench", cid)
        t1 = clock()
        best_dealloc = min(best_dealloc, (t1 - t0) / max(1, len(still)))
        assert all(v == 0 for v in qm.node_allocated("bench", "root").values())

        # baseline: plain dict walk along the same paths
        alloc: dict[str, list[int]] = {name: [0, 0] for name in doc["spec"]["nodes"]}
        walks = [(paths[consumers[i][1]], consumers[i][2], consumers[i][3]) for i in order]
        t0 = clock()
        for path, cpu, mem in walks:
            for node in path:
                v = alloc[node]
                v[0] += cpu
                v[1] += mem
        t1 = clock()
        for path, cpu, mem in walks:
            for node in path:
                v = alloc[node]
                v[0] -= cpu
                v[1] -= mem
        t2 = clock()
        best_base_a = min(best_base_a, (t1 - t0) / n)
        best_base_d = min(best_base_d, (t2 - t1) / n)
    return {
        "nodes": len(doc["spec"]["nodes"]),
        "consumers": n,
        "allocated_at_end": allocated_count,
        "successful_allocate_calls": success_count,
        "preempted": preempted_count,
        "allocate_us": round(best_alloc * 1e6, 2),
        "deallocate_us": round(best_dealloc * 1e6, 2),
        "baseline_allocate_us": round(best_base_a * 1e6, 3),
        "baseline_deallocate_us": round(best_base_d * 1e6, 3),
        "allocate_ratio_to_baseline": round(best_alloc / best_base_a, 1),
        "deallocate_ratio_to_baseline": round(best_dealloc / best_base_d, 1),
    }


def main() -> None:
    """Run every case and write benchmarks/results/forest.json."""
    started = time.perf_counter()
    results: dict[str, Any] = {"cases": {}}
    for name, fanout, depth, n, go_a, go_d in CASES:
        r = run_case(fanout, depth, n, seed=20231218)
        r["go_allocate_us"] = go_a
        r["go_deallocate_us"] = go_d
        r["allocate_vs_go"] = round(r["allocate_us"] / go_a, 1)
        r["deallocate_vs_go"] = round(r["deallocate_us"] / go_d, 1)
        results["cases"][name] = r
    target = results["cases"]["1,111 nodes / 10,000 consumers"]
    results["quality_target_1111"] = {
        "allocate_us": target["allocate_us"], "must_reach_us": 60, "goal_us": 18,
        "deallocate_us": target["deallocate_us"], "must_reach_dealloc_us": 20, "goal_dealloc_us": 6,
    }
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    write_results("forest", results)


if __name__ == "__main__":
    main()
