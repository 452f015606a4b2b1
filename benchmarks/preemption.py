"""Preemption benchmark: one victim search with 10,000 allocations in 1,000 queues, and one reclaim tick
of the elastic over-use monitor with 1,000 elastic quotas.

- ``victim_search``: 10 parents x 100 leaves, each leaf guaranteed 5 cores and holding 10 allocations of
  1 core (10,000 allocations, every leaf above its guaranteed); a full cluster; one ask of 3 cores in its
  own leaf (guaranteed 10) refused by the cluster size, so the fence root is the root and every leaf is
  searched (PR-Y). Timed: the victim search alone (:func:`guarantee_victims`), and the whole decision
  (victims, then the every-policy check with the victims withdrawn and put back). Baseline: one
  ``what_if`` of the same ask (the admission check the decision is built on).
- ``reclaim_tick``: 1,000 elastic quotas (min 1, max 4 cores) with 4 assigned pods each; ``revoke`` at a
  time when none is due (the steady tick), and when every quota is due with victims. Baseline: reading
  ``used`` and ``runtime`` of every quota once (the least a tick that looks at every quota must do).

Run: ``.venv/bin/python benchmarks/preemption.py`` (seconds); ``--small`` is the test suite's smoke size.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import write_results
from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.elastic import ElasticQuotaManager
from quotaplane.journal import MemoryJournal
from quotaplane.scheduler import Scheduler
from quotaplane.scheduling.guarantees import guarantee_victims
from quotaplane.scheduling.preemption import plan
from quotaplane.scheduling.questions import allocations_of

PARENTS = 10
LEAVES = 100
PER_LEAF = 10
QUOTAS = 1000
REPEAT = 5
USER = UserGroup("u", ["dev"])
_clock = time.process_time


def _best(fn: Any) -> float:
    best = float("inf")
    for _ in range(REPEAT):
        start = _clock()
        fn()
        best = min(best, _clock() - start)
    return best


def _queues() -> str:
    lines = ["partitions:", "- name: default", "  queues:", "  - name: root", "    submitacl: '*'",
             "    queues:", "    - name: asker", "      resources: {guaranteed: {vcore: 10}}"]
    for i in range(PARENTS):
        lines += [f"    - name: p{i}", "      queues:"]
        for j in range(LEAVES):
            lines += [f"      - name: l{j}", "        resources: {guaranteed: {vcore: 5}}"]
    return "\n".join(lines) + "\n"


def _victim_search() -> dict[str, Any]:
    clock = [0.0]
    s = Scheduler.from_yaml(_queues(), store=MemoryJournal(), clock=lambda: clock[0])
    p = s.partition("default")
    p.auto_schedule = False
    n = PARENTS * LEAVES * PER_LEAF
    p.add_node("n1", Resource({"vcore": n * 1000}))
    for i in range(PARENTS):
        for j in range(LEAVES):
            app = f"a{i}-{j}"
            p.add_application(app, USER, queue=f"root.p{i}.l{j}")
            for k in range(PER_LEAF):
                clock[0] += 0.001
                assert p.allocate(app, f"{app}-{k}", Resource({"vcore": 1000}))
    p.add_application("asker", USER, queue="root.asker")
    ask = p.add_ask("asker", "ask", Resource({"vcore": 3000}))
    clock[0] += 60
    leaf = p.queues.queue("root.asker")
    assert leaf is not None
    state = p.state
    of_leaf = functools.partial(allocations_of, state)
    found = guarantee_victims(leaf, ask.resource, 0, of_leaf)
    assert found is not None and len(found.keys) == 3, found
    search = _best(lambda: guarantee_victims(leaf, ask.resource, 0, of_leaf))
    refused = p.what_if("asker", ask.resource)
    assert not refused.allocated

    def decide() -> None:
        ask.preempt_after = 0.0
        planned = plan(state, state.apps["asker"], "ask", ask.resource, 0, True, refused, ask, clock[0])
        assert planned is not None and len(planned[0]) == 3

    decision = _best(decide)
    baseline = _best(lambda: p.what_if("asker", ask.resource))
    return {"allocations": n, "queues": PARENTS * LEAVES + PARENTS + 1,
            "victim_search_ms": round(search * 1e3, 2), "decision_ms": round(decision * 1e3, 2),
            "baseline_what_if_ms": round(baseline * 1e3, 3),
            "ratio_victim_search_vs_what_if": round(search / baseline, 1),
            "ratio_decision_vs_what_if": round(decision / baseline, 1)}


def _reclaim_tick() -> dict[str, Any]:
    m = ElasticQuotaManager({"vcore": QUOTAS * 2000})
    for i in range(QUOTAS):
        m.upsert(f"q{i}", min={"vcore": 1000}, max={"vcore": 4000})
        for k in range(4):
            m.add_pod(f"q{i}", f"q{i}-{k}", {"vcore": 1000}, priority=k, assigned=True, start_time=float(k))
    m.revoke(0.0)                           # every quota's clock starts (within its runtime)
    steady = _best(lambda: m.revoke(1.0))

    def read_all() -> None:
        for i in range(QUOTAS):
            m.used(f"q{i}")
            m.runtime(f"q{i}")

    baseline = _best(read_all)
    # shrink the total: every quota is over its runtime; after the delay every one is due
    m.set_total({"vcore": QUOTAS * 1000})
    m.revoke(2.0)
    due_t = float("inf")
    victims = 0
    for r in range(REPEAT):
        m.restore_monitor({f"q{i}": 0.0 for i in range(QUOTAS)})
        start = _clock()
        found = m.revoke_groups(1000.0 + r)
        due_t = min(due_t, _clock() - start)
        victims = sum(len(v) for _, v in found)
    assert victims > 0
    return {"elastic_quotas": QUOTAS, "tick_none_due_ms": round(steady * 1e3, 2),
            "tick_all_due_ms": round(due_t * 1e3, 2), "victims_when_all_due": victims,
            "baseline_read_every_quota_ms": round(baseline * 1e3, 2),
            "ratio_tick_none_due_vs_read": round(steady / baseline, 2),
            "ratio_tick_all_due_vs_read": round(due_t / baseline, 2)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run both sections and write ``benchmarks/results/preemption[-small].json``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="a tiny size, for the smoke test")
    args = ap.parse_args(argv)
    if args.small:
        global PARENTS, LEAVES, QUOTAS, REPEAT
        PARENTS, LEAVES, QUOTAS, REPEAT = 2, 5, 20, 1
    results = {"victim_search": _victim_search(), "reclaim_tick": _reclaim_tick()}
    write_results("preemption-small" if args.small else "preemption", results)
    return results


if __name__ == "__main__":
    main()
