"""Flavors and fair sharing benchmark (issue: "an allocation choosing among 4 flavors, against one
flavor, aiming for ≤ 1.5×; and the fair-sharing preemption decision with 10,000 allocations in 1,000
queues, against a same-run baseline").

- ``flavor_choice``: one GPU allocated and released, in a queue whose request is searched over 4 flavors,
  against the same in a partition with 1 flavor and one with none (same run). Two cases of 4 flavors:
  ``first_fits`` (the first flavor admits it: the usual case) and ``last_fits`` (the first three are at
  their queue max: every flavor is evaluated, each by the full admission check).
- ``fair_preemption``: 10 parents × 100 leaves, each leaf guaranteed 5 cores and holding 10 allocations
  of 1 core (10,000 allocations, every leaf borrowing), a full cluster, fair sharing on with
  ``reclaimwithincohort: Any``; one ask of 3 cores in its own leaf (guaranteed 10) that waited its delay.
  Timed: the fair-sharing victim search alone (:func:`fair_victims`) and the whole decision (victims,
  then every policy checked with them withdrawn and put back). Baselines, same run: one ``what_if`` of
  the ask, and YuniKorn's restore-guaranteed decision on the same tree with fair sharing off.
- ``fair_incremental``: 10 parents (guaranteed 1 core each) × 100 leaves (max 1 core), each leaf full
  with 10 asks of 1 core waiting (10,000); one release at a time in one leaf, automatic cycles on: its
  incremental cycle admits that leaf's next ask. With fair sharing on, against the same with it off.
- ``flavored_heads``: 10 parents × 20 leaves (flavors a100, h100; each leaf full), 5 asks of one plain GPU
  waiting in each (1,000): a full cycle with fair sharing on, each head charged under the flavor it would
  get, against the same cycle with the heads counted as asked (same run).

Run: ``.venv/bin/python benchmarks/flavors.py [--small]`` (CPU time, best of several).
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import write_results
from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.partition import Partition
from quotaplane.policy import Decision
from quotaplane.scheduler import Scheduler
from quotaplane.scheduling.fair_preemption import fair_victims
from quotaplane.scheduling.preemption import plan
from quotaplane.scheduling.questions import allocations_of

GPU = "nvidia.com/gpu"
USER = UserGroup("u", ["dev"])
_clock = time.process_time


def _best(fn: Any, repeat: int = 5, inner: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = _clock()
        for _ in range(inner):
            fn()
        best = min(best, (_clock() - start) / inner)
    return best


# -- flavor choice -------------------------------------------------------------------------------------
def _flavor_partition(flavors: int, full: int) -> Partition:
    names = [f"f{i}" for i in range(flavors)]
    lines = ["partitions:", "- name: default"]
    if flavors:
        lines.append("  resourceflavors:")
        lines += [f"    - {{name: {n}, resources: [{GPU}], nodelabels: {{gpu: {n}}}}}" for n in names]
    lines += ["  queues:", "  - name: root", "    submitacl: '*'", "    queues:", "    - name: train"]
    if flavors:
        lines.append(f"      flavors: [{', '.join(names)}]")
        caps = ", ".join(f"{GPU}@{n}: {1 if i < full else 64}" for i, n in enumerate(names))
        lines.append(f"      resources: {{max: {{{caps}}}}}")
    s = Scheduler.from_yaml("\n".join(lines) + "\n", store=MemoryJournal(), clock=lambda: 0.0)
    p = s.partition("default")
    for n in names or ["plain"]:
        p.add_node(f"node-{n}", {GPU: 64, "vcore": 64_000}, labels={"gpu": n})
    p.add_application("app", USER, queue="root.train")
    for i in range(full):                       # fill the first flavors to their max
        d = p.allocate("app", f"fill{i}", {GPU: 1}, node_selector={"gpu": names[i]})
        assert d.allocated, d.reasons
    return p


def _cycle(p: Partition, expect: str | None) -> Any:
    def run() -> None:
        d = p.allocate("app", "k", {GPU: 1, "vcore": 1000})
        assert d.allocated and (expect is None or d.flavors == {GPU: expect}), (d.flavors, d.reasons)
        p.release("k")
    return run


def _flavor_choice(inner: int) -> dict[str, Any]:
    none = _best(_cycle(_flavor_partition(0, 0), None), inner=inner)
    one = _best(_cycle(_flavor_partition(1, 0), "f0"), inner=inner)
    first = _best(_cycle(_flavor_partition(4, 0), "f0"), inner=inner)
    last = _best(_cycle(_flavor_partition(4, 3), "f3"), inner=inner)
    return {"no_flavors_us": round(none * 1e6, 1), "one_flavor_us": round(one * 1e6, 1),
            "four_flavors_first_fits_us": round(first * 1e6, 1),
            "four_flavors_last_fits_us": round(last * 1e6, 1),
            "ratio_four_first_vs_one": round(first / one, 2), "ratio_four_last_vs_one": round(last / one, 2),
            "ratio_one_vs_none": round(one / none, 2)}


# -- fair-sharing preemption ---------------------------------------------------------------------------
def _tree(parents: int, leaves: int, fair: bool) -> str:
    lines = ["partitions:", "- name: default"]
    if fair:
        lines.append("  fairsharing: {enabled: true}")
    lines += ["  queues:", "  - name: root", "    submitacl: '*'",
              "    properties: {preemption.reclaimwithincohort: Any, preemption.delay: 1s}", "    queues:",
              "    - name: asker", "      resources: {guaranteed: {vcore: 10}}"]
    for i in range(parents):
        lines += [f"    - name: p{i}", "      queues:"]
        lines += [f"      - {{name: l{j}, resources: {{guaranteed: {{vcore: 5}}}}}}" for j in range(leaves)]
    return "\n".join(lines) + "\n"


def _decision(parents: int, leaves: int, per_leaf: int, fair: bool, repeat: int) -> dict[str, Any]:
    clock = [0.0]
    p = Scheduler.from_yaml(_tree(parents, leaves, fair), store=MemoryJournal(),
                            clock=lambda: clock[0]).partition("default")
    p.auto_schedule = False
    n = parents * leaves * per_leaf
    p.add_node("n1", Resource({"vcore": n * 1000}))
    for i in range(parents):
        for j in range(leaves):
            app = f"a{i}-{j}"
            p.add_application(app, USER, queue=f"root.p{i}.l{j}")
            for k in range(per_leaf):
                clock[0] += 0.001
                assert p.allocate(app, f"{app}-{k}", Resource({"vcore": 1000}))
    p.add_application("asker", USER, queue="root.asker")
    ask = p.add_ask("asker", "ask", Resource({"vcore": 3000}))
    clock[0] += 60
    state = p._core.state
    app = state.apps["asker"]
    refused = p.what_if("asker", ask.resource)
    assert not refused.allocated

    def decide() -> None:
        ask.preempt_after = 0.0
        why = Decision(False, refused.reasons)
        found = plan(state, app, "ask", ask.resource, 0, True, why, ask, clock[0])
        assert found is not None and len(found[0]) == 3, found

    out: dict[str, Any] = {"allocations": n, "queues": parents * leaves + parents + 2,
                           "decision_ms": round(_best(decide, repeat) * 1e3, 2)}
    if fair:
        leaf = p.queues.queue("root.asker")
        assert leaf is not None

        def search() -> None:
            found = fair_victims(p.queues, leaf, {"vcore": 3000}, 0, ask.created, refused.reasons,
                                 functools.partial(allocations_of, state))
            assert found is not None and len(found.keys) == 3
        out["victim_search_ms"] = round(_best(search, repeat) * 1e3, 2)
    out["what_if_ms"] = round(_best(lambda: p.what_if("asker", ask.resource), repeat) * 1e3, 3)
    return out


def _fair_preemption(parents: int, leaves: int, per_leaf: int, repeat: int) -> dict[str, Any]:
    fair = _decision(parents, leaves, per_leaf, True, repeat)
    yunikorn = _decision(parents, leaves, per_leaf, False, repeat)
    return {"fair": fair, "yunikorn_restore_guaranteed": yunikorn,
            "ratio_fair_decision_vs_what_if": round(fair["decision_ms"] / fair["what_if_ms"], 1),
            "ratio_fair_decision_vs_yunikorn_decision":
                round(fair["decision_ms"] / yunikorn["decision_ms"], 2)}


# -- incremental cycles with fair sharing ----------------------------------------------------------------
def _incremental_tree(parents: int, leaves: int, fair: bool) -> str:
    lines = ["partitions:", "- name: default"]
    if fair:
        lines.append("  fairsharing: {enabled: true}")
    lines += ["  queues:", "  - name: root", "    submitacl: '*'", "    queues:"]
    for i in range(parents):
        lines += [f"    - name: p{i}", "      resources: {guaranteed: {vcore: 1}}", "      queues:"]
        lines += [f"      - {{name: l{j}, resources: {{max: {{vcore: 1}}}}}}" for j in range(leaves)]
    return "\n".join(lines) + "\n"


def _incremental(parents: int, leaves: int, per_leaf: int, fair: bool, releases: int) -> float:
    """CPU time of one release (automatic cycles on) in a full leaf that has asks waiting: its
    incremental cycle admits the leaf's next ask, while every other leaf — full too, ``per_leaf`` asks
    waiting in each — has nothing to gain."""
    p = Scheduler.from_yaml(_incremental_tree(parents, leaves, fair), store=MemoryJournal(),
                            clock=lambda: 0.0).partition("default")
    p.auto_schedule = False
    p.add_node("n1", Resource({"vcore": 10 * parents * leaves * 1000}))
    for i in range(parents):
        for j in range(leaves):
            app = f"a{i}-{j}"
            p.add_application(app, USER, queue=f"root.p{i}.l{j}")
            assert p.allocate(app, f"{app}-run-0", Resource({"vcore": 1000}))
            for k in range(per_leaf):
                p.add_ask(app, f"{app}-{k}", Resource({"vcore": 1000}))
    p.schedule()
    p.auto_schedule = True
    pending = len(p.pending())
    start = _clock()
    for r in range(releases):
        app = f"a{r % parents}-{(r // parents) % leaves}"
        running = [a.allocation_key for a in p.allocations() if a.application_id == app]
        p.release(running[0])
    took = _clock() - start
    assert len(p.pending()) == pending - releases, (len(p.pending()), pending, releases)
    return took / releases


def _fair_incremental(parents: int, leaves: int, per_leaf: int, releases: int) -> dict[str, Any]:
    fair = _incremental(parents, leaves, per_leaf, True, releases)
    plain = _incremental(parents, leaves, per_leaf, False, releases)
    return {"leaves": parents * leaves, "waiting": parents * leaves * per_leaf,
            "release_fair_sharing_ms": round(fair * 1e3, 3), "release_without_ms": round(plain * 1e3, 3),
            "ratio_fair_vs_without": round(fair / plain, 2)}


# -- heads charged under their flavors in the fair-sharing tournament -----------------------------------
def _flavored_tree(parents: int, leaves: int) -> str:
    lines = ["partitions:", "- name: default", "  fairsharing: {enabled: true}", "  resourceflavors:",
             f"    - {{name: a100, resources: [{GPU}], nodelabels: {{gpu: a100}}}}",
             f"    - {{name: h100, resources: [{GPU}], nodelabels: {{gpu: h100}}}}",
             "  queues:", "  - name: root", "    submitacl: '*'", "    queues:"]
    for i in range(parents):
        lines += [f"    - name: p{i}", "      flavors: [a100, h100]", "      queues:"]
        lines += [f"      - {{name: l{j}, resources: {{guaranteed: {{{GPU}@a100: 1}}, max: {{{GPU}: 1}}}}}}"
                  for j in range(leaves)]
    return "\n".join(lines) + "\n"


def _flavored_heads(parents: int, leaves: int, per_leaf: int, repeat: int) -> dict[str, Any]:
    """A full cycle over ``per_leaf`` waiting asks (plain GPUs, 2 flavors) in each full leaf: with
    each head charged under the flavors it would get (KQ-S4), against the same cycle with the heads
    counted as asked (the tournament's hook switched off, same run)."""
    from quotaplane.scheduling import nomination, order

    p = Scheduler.from_yaml(_flavored_tree(parents, leaves), store=MemoryJournal(),
                            clock=lambda: 0.0).partition("default")
    for f in ("a100", "h100"):
        p.add_node(f, {GPU: 10 * parents * leaves}, labels={"gpu": f})
    p.auto_schedule = False
    for i in range(parents):
        for j in range(leaves):
            app = f"a{i}-{j}"
            p.add_application(app, USER, queue=f"root.p{i}.l{j}")
            assert p.allocate(app, f"{app}-run", {GPU: 1}).allocated
            for k in range(per_leaf):
                p.add_ask(app, f"{app}-{k}", {GPU: 1})
    charged = _best(p.schedule, repeat)
    real = order.head_charger
    order.head_charger = lambda fair: nomination.AsAsked()
    try:
        plain = _best(p.schedule, repeat)
    finally:
        order.head_charger = real
    return {"waiting": len(p.pending()), "cycle_heads_charged_ms": round(charged * 1e3, 2),
            "cycle_heads_as_asked_ms": round(plain * 1e3, 2), "ratio": round(charged / plain, 2)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    small = "--small" in (argv if argv is not None else sys.argv[1:])
    results = {
        "flavor_choice": _flavor_choice(inner=50 if small else 400),
        "fair_preemption": _fair_preemption(2, 10, 10, 2) if small else _fair_preemption(10, 100, 10, 5),
        "fair_incremental": _fair_incremental(2, 10, 5, 10) if small else _fair_incremental(10, 100, 10, 50),
        "flavored_heads": _flavored_heads(2, 5, 2, 2) if small else _flavored_heads(10, 20, 5, 5),
    }
    write_results("flavors-small" if small else "flavors", results)
    return results


if __name__ == "__main__":
    main()
