"""Fair-sharing preemption (KQ-S5 … KQ-S8) with the documented outcomes of Kueue's own table
(``pkg/scheduler/preemption/preemption_fair_test.go`` ``TestFairPreemptions``): cohort ``all`` of
ClusterQueues ``a``, ``b``, ``c`` (nominal 3 cpu each, ``withinClusterQueue: LowerPriority``,
``reclaimWithinCohort: Any``) and ``preemptible`` (nominal 0), as leaves of the root whose total is the
cluster (9 cpu). Every workload is admitted at the same time; an incoming workload waits its
``preemption.delay`` (1 s here; Kueue has none) and is then admitted with exactly Kueue's victims."""

from __future__ import annotations

import re
from typing import Any

import pytest

from quotaplane.config.identity import UserGroup
from quotaplane.partition import Partition
from tests.fairsharing.helpers import partition
from tests.preemption.helpers import Recorder

U = UserGroup("u")
POLICIES = "preemption.withinclusterqueue: LowerPriority, preemption.reclaimwithincohort: Any"


def _base(weights: dict[str, str] | None = None, queues: str = "abc", preemptible: bool = True) -> str:
    weights = weights or {}
    out = []
    for q in queues:
        w = f", fairsharing.weight: \"{weights[q]}\"" if q in weights else ""
        out.append(f"- name: {q}\n  resources: {{guaranteed: {{vcore: 3}}}}\n"
                   f"  properties: {{{POLICIES}{w}}}\n")
    if preemptible:
        out.append("- name: preemptible\n")
    return "".join(out)


def _run(admitted: list[tuple[str, str, float, int]], incoming: tuple[str, float, int], *,
         strategies: str = "", weights: dict[str, str] | None = None, queues: str = "abc",
         cluster: int = 9) -> tuple[Partition, list[dict[str, Any]]]:
    fs = "{enabled: true" + (f", preemptionstrategies: [{strategies}]" if strategies else "") + "}"
    p, clock = partition(_base(weights, queues), nodes={"vcore": cluster * 1000}, fairsharing=fs,
                         extra="    preemption: {enabled: true}\n")
    for q in (*queues, "preemptible"):
        p.add_application(q, U, queue=f"root.{q}")
    for key, q, cpus, prio in admitted:
        assert p.allocate(q, key, {"vcore": int(cpus * 1000)}, priority=prio), key
    rec = Recorder(p)
    q, cpus, prio = incoming
    p.add_ask(q, "incoming", {"vcore": int(cpus * 1000)}, priority=prio)
    assert p.allocation("incoming") is None
    clock.advance(31)                       # the default preemption.delay (PR-Y3) has passed
    p.check_timeouts()
    p.schedule()
    return p, rec.of("preempted")


def _victims(preempted: list[dict[str, Any]]) -> dict[str, str]:
    """victim key → Kueue's reason, from the reason's message."""
    out: dict[str, str] = {}
    for n in preempted:
        assert n["reason"]["code"] == "queue.fairsharing" and n["preemptor"] == "incoming"
        for key, why in re.findall(r"(\S+) \((In\w+), root\.\S+?\)", n["reason"]["message"]):
            out[key] = why
    return out


def _units(q: str, n: int, start: int = 1) -> list[tuple[str, str, float, int]]:
    return [(f"{q}{i}", q, 1, 0) for i in range(start, start + n)]


CASES: dict[str, tuple[list[tuple[str, str, float, int]], tuple[str, float, int], dict[str, str]]] = {
    "reclaim nominal from user using the most": (
        _units("a", 3) + _units("b", 5) + _units("c", 1), ("c", 1, 0), {"b1": "InCohortReclamation"}),
    "can reclaim from queue using less, if taking the latest workload from user using the most isn't "
    "enough": (
        [("a1", "a", 3, 0), ("a2", "a", 1, 0), ("b1", "b", 2, 0), ("b2", "b", 3, 0)], ("c", 3, 0),
        {"a1": "InCohortReclamation"}),
    "reclaim borrowable quota from user using the most": (
        _units("a", 3) + _units("b", 5) + _units("c", 1), ("a", 1, 0), {"b1": "InCohortFairSharing"}),
    "preempt one from each CQ borrowing": (
        [("a1", "a", .5, 0), ("a2", "a", .5, 0), ("a3", "a", 3, 0), ("b1", "b", .5, 0), ("b2", "b", .5, 0),
         ("b3", "b", 3, 0)], ("c", 2, 0), {"a1": "InCohortReclamation", "b1": "InCohortReclamation"}),
    "can't preempt when everyone under nominal": (
        _units("a", 3) + _units("b", 3) + _units("c", 3), ("c", 1, 0), {}),
    "can't preempt when it would switch the imbalance": (
        _units("a", 3) + _units("b", 5), ("a", 2, 0), {}),
    "can preempt lower priority workloads from same CQ": (
        [("a1_low", "a", 1, -1), ("a2_low", "a", 1, -1), ("a3", "a", 1, 0), ("a4", "a", 1, 0),
         *_units("b", 5)], ("a", 2, 0), {"a1_low": "InClusterQueue", "a2_low": "InClusterQueue"}),
    "can preempt a combination of same CQ and highest user": (
        [("a_low", "a", 1, -1), ("a2", "a", 1, 0), ("a3", "a", 1, 0), *_units("b", 6)], ("a", 2, 0),
        {"a_low": "InClusterQueue", "b1": "InCohortFairSharing"}),
    "preempt huge workload if there is no other option, as long as the target CQ gets a lower share": (
        [("b1", "b", 9, 0)], ("a", 2, 0), {"b1": "InCohortReclamation"}),
    "can't preempt huge workload if the incoming is also huge": (
        [("a1", "a", 2, 0), ("b1", "b", 7, 0)], ("a", 5, 0), {}),
    "can't preempt 2 smaller workloads if the incoming is huge": (
        [("b1", "b", 2, 0), ("b2", "b", 2, 0), ("b3", "b", 3, 0)], ("a", 6, 0), {}),
    "preempt from target and others even if over nominal": (
        [("a1_low", "a", 2, -1), ("a2_low", "a", 1, -1), ("b1", "b", 3, 0), ("b2", "b", 3, 0)], ("a", 4, 0),
        {"a1_low": "InClusterQueue", "b1": "InCohortFairSharing"}),
    "prefer to preempt workloads that don't make the target CQ have the biggest share": (
        [("b1", "b", 2, 0), ("b2", "b", 1, 0), ("b3", "b", 2, 0), ("c1", "c", 1, 0)], ("a", 3.5, 0),
        {"b2": "InCohortFairSharing"}),
    "preempt from different cluster queues if the end result has a smaller max share": (
        [("b1", "b", 2, 0), ("b2", "b", 2.5, 0), ("c1", "c", 2, 0), ("c2", "c", 2.5, 0)], ("a", 3.5, 0),
        {"b1": "InCohortFairSharing", "c1": "InCohortFairSharing"}),
    "scenario above does not flap": (
        [("a1", "a", 3.5, 0), ("b2", "b", 2.5, 0), ("c2", "c", 2.5, 0)], ("b", 2, 0), {}),
    "cannot preempt if it would make the candidate CQ go under nominal after preempting one element": (
        [("b1", "b", 3, 0), ("b2", "b", 3, 0), ("c1", "c", 3, 0)], ("a", 4, 0), {}),
    "workloads under priority threshold not capriciously preempted": (
        _units("a", 3) + _units("b", 3) + [(f"preemptible{i}", "preemptible", 1, -3) for i in (1, 2, 3)],
        ("a", 2, 0), {}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_kueue_fair_preemptions(name: str) -> None:
    admitted, incoming, want = CASES[name]
    p, preempted = _run(admitted, incoming)
    assert _victims(preempted) == want
    assert (p.allocation("incoming") is not None) == bool(want)
    for key in want:
        assert p.allocation(key) is None


@pytest.mark.parametrize(("strategy", "want"), [
    ("LessThanInitialShare", {"b_low": "InCohortFairSharing"}),          # preempt lower priority first
    ("LessThanOrEqualToFinalShare", {"b_high": "InCohortFairSharing"}),  # no transfer of the imbalance
])
def test_one_strategy(strategy: str, want: dict[str, str]) -> None:
    """KQ-S7: "preempt lower priority first, even if big" / "preempt workload that doesn't transfer the
    imbalance, even if high priority"."""
    _, preempted = _run([("a1", "a", 3, 0), ("b_low", "b", 5, 0), ("b_high", "b", 1, 1)], ("a", 1, 0),
                        strategies=strategy)
    assert _victims(preempted) == want


def test_higher_weight_can_preempt_more() -> None:
    """"CQ with higher weight can preempt more": a (weight 2) takes two of b's."""
    _, preempted = _run(_units("a", 3) + _units("b", 6), ("a", 2, 0), weights={"a": "2"})
    assert _victims(preempted) == {"b1": "InCohortFairSharing", "b2": "InCohortFairSharing"}


def test_anything_borrowed_by_a_zero_weight_queue_may_go() -> None:
    """"can preempt anything borrowing from CQ with 0 weight" (KQ-S2: its share is infinite)."""
    _, preempted = _run(_units("a", 3) + _units("b", 6), ("a", 3, 0), weights={"b": "0"})
    assert _victims(preempted) == {f"b{i}": "InCohortFairSharing" for i in (1, 2, 3)}


def test_nominal_of_a_zero_weight_queue_is_kept() -> None:
    """"can't preempt nominal from CQ with 0 weight": b does not borrow, so gives nothing."""
    p, preempted = _run(_units("a", 3) + _units("b", 3), ("a", 1, 0), weights={"b": "0"}, queues="ab",
                        cluster=6)
    assert preempted == [] and p.allocation("incoming") is None


def test_off_without_reclaim_policy() -> None:
    """KQ-O2: ``reclaimWithinCohort`` defaults to Never — without it no other queue's work is a candidate."""
    p, clock = partition(_base().replace(", preemption.reclaimwithincohort: Any", ""), nodes={"vcore": 9000})
    for q in "ab":
        p.add_application(q, U, queue=f"root.{q}")
    for key, q, _, _ in _units("a", 3) + _units("b", 6):
        assert p.allocate(q, key, {"vcore": 1000})
    p.add_ask("a", "incoming", {"vcore": 1000})
    clock.advance(31)
    p.schedule()
    assert p.allocation("incoming") is None and len(p.allocations()) == 9
