"""Properties of fair-sharing preemption on random flat cohorts (KQ-S5 … KQ-S9): planning changes
nothing, the victims let the ask fit, every victim of another queue comes from a queue that borrowed,
and a victim resubmitted at once never takes back, by fair sharing, the workload that preempted it (no
ping-pong, docs/fair-sharing.md "Why it cannot loop")."""

from __future__ import annotations

import functools
import re

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.partition import Partition
from quotaplane.policy import Violation
from quotaplane.scheduler import Scheduler
from quotaplane.scheduling.fair_preemption import fair_victims
from quotaplane.scheduling.questions import allocations_of
from tests.partition.helpers import Clock

U = UserGroup("u")
NAMES = "abcd"

queue = st.tuples(st.integers(0, 4), st.sampled_from(["0.5", "1", "2"]),
                  st.lists(st.tuples(st.integers(1, 3), st.integers(0, 1)), max_size=5))
world = st.tuples(st.lists(queue, min_size=2, max_size=4), st.integers(0, 3), st.integers(0, 3),
                  st.integers(1, 4), st.integers(0, 1),
                  st.sampled_from(["LessThanOrEqualToFinalShare", "LessThanInitialShare",
                                   "LessThanOrEqualToFinalShare, LessThanInitialShare"]))


def _partition(queues: list[tuple[int, str, list[tuple[int, int]]]], strategies: str) -> Partition:
    lines = ["partitions:", "- name: default", f"  fairsharing: {{enabled: true, preemptionstrategies: "
             f"[{strategies}]}}", "  queues:", "  - name: root", "    submitacl: '*'",
             "    properties: {preemption.withinclusterqueue: LowerPriority, "
             "preemption.reclaimwithincohort: Any}", "    queues:"]
    for name, (g, w, _) in zip(NAMES, queues, strict=False):
        lines.append(f"    - {{name: {name}, resources: {{guaranteed: {{vcore: {g}}}}}, "
                     f"properties: {{fairsharing.weight: \"{w}\"}}}}")
    s = Scheduler.from_yaml("\n".join(lines) + "\n", store=MemoryJournal(), clock=Clock())
    p = s.partition("default")
    p.add_node("n", {"vcore": max(1, sum(g for g, _, _ in queues)) * 1000})
    for name, (_, _, allocs) in zip(NAMES, queues, strict=False):
        p.add_application(name, U, queue=f"root.{name}")
        for i, (size, prio) in enumerate(allocs):
            p.allocate(name, f"{name}{i}", {"vcore": size * 1000}, priority=prio)
    return p


def _usage(p: Partition) -> dict[str, dict[str, int]]:
    return {path: dict(p.queues.queue(path).allocated) for path in p.queues.paths()}  # type: ignore[union-attr]


def _plan(p: Partition, leaf_name: str, size: int, prio: int
          ) -> tuple[list[tuple[str, str]], list[Violation]]:
    request = {"vcore": size * 1000}
    reasons = [Violation("queue", "root.capacity", "root", "full", None)]
    leaf = p.queues.queue(f"root.{leaf_name}")
    assert leaf is not None
    found = fair_victims(p.queues, leaf, request, prio, 0.0, reasons,
                         functools.partial(allocations_of, p._core.state))
    if found is None:
        return [], reasons
    taken = re.findall(r"(\S+) \((In\w+), root\.\S+?\)", found.reason.message)
    assert [k for k, _ in taken] == list(found.keys)
    return taken, reasons


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world)
# found by this test: b loses two workloads to c's ask (its share 429 or 357 above c's 286 each time: by
# LessThanInitialShare, or by LessThanOrEqualToFinalShare then LessThanInitialShare) and ends at 143, so
# a workload of b resubmitted takes c's back once
@example(([(2, "0.5", []), (1, "2", [(1, 0), (3, 0), (3, 0)]), (0, "2", []), (4, "0.5", [])], 2, 0, 4, 0,
          "LessThanInitialShare"))
@example(([(2, "0.5", []), (1, "2", [(1, 0), (3, 0), (3, 0)]), (0, "2", []), (4, "0.5", [])], 2, 0, 4, 0,
          "LessThanOrEqualToFinalShare, LessThanInitialShare"))
def test_fair_preemption_properties(w: tuple[list[tuple[int, str, list[tuple[int, int]]]], int, int, int, int,
                                             str]) -> None:
    queues, asker, _, size, prio, strategies = w
    asker %= len(queues)
    p = _partition(queues, strategies)
    name = NAMES[asker]
    if p.what_if(name, {"vcore": size * 1000}).allocated:
        return                                      # it fits: nothing to preempt for
    fair = p.queues.fair
    assert fair is not None
    borrowing = {path for path in p.queues.paths()
                 if fair.share(p.queues.queue(path)).borrowing}  # type: ignore[arg-type]
    before = _usage(p)
    taken, _ = _plan(p, name, size, prio)
    assert _usage(p) == before                      # planning changes nothing
    if not taken:
        return
    for key, why in taken:
        alloc = p.allocation(key)
        assert alloc is not None
        if alloc.application_id != name:            # another queue's: it borrowed (KQ-S5)
            assert f"root.{alloc.application_id}" in borrowing
        else:
            assert why == "InClusterQueue" and alloc.priority < prio
    # apply: the victims go, the ask is admitted
    victims = {key: p.allocation(key) for key, _ in taken}
    for key in victims:
        p.release(key)
    d = p.allocate(name, "incoming", {"vcore": size * 1000}, priority=prio)
    assert d.allocated, d.reasons                   # the victims made room
    # no ping-pong (KQ-S9): a fair-sharing victim resubmitted never takes "incoming" by a strategy when its
    # queue lost only that one. A queue that lost several (LessThanInitialShare took one of them) may end
    # below the preemptor and take the room back once, as in Kueue (docs/fair-sharing.md)
    lost: dict[str, int] = {}
    for key, why in taken:
        owner = victims[key].application_id  # type: ignore[union-attr]
        lost[owner] = lost.get(owner, 0) + (why == "InCohortFairSharing")
    for key, why in taken:
        alloc = victims[key]
        assert alloc is not None
        if why != "InCohortFairSharing" or lost[alloc.application_id] > 1:
            continue
        back, _ = _plan(p, alloc.application_id, int(alloc.resource.get("vcore", 0) // 1000), alloc.priority)
        assert ("incoming", "InCohortFairSharing") not in back, (taken, back)


def test_a_takeback_after_several_victims_is_not_taken_back_again() -> None:
    """The case docs/fair-sharing.md describes: b loses two workloads to c's ask and takes the room back
    with one of them; c's workload, resubmitted, cannot take it again."""
    queues = [(2, "0.5", []), (1, "2", [(1, 0), (3, 0), (3, 0)]), (0, "2", []), (4, "0.5", [])]
    p = _partition(queues, "LessThanOrEqualToFinalShare, LessThanInitialShare")
    taken, _ = _plan(p, "c", 4, 0)
    assert taken == [("b0", "InCohortFairSharing"), ("b1", "InCohortFairSharing")]
    for key, _ in taken:
        p.release(key)
    assert p.allocate("c", "incoming", {"vcore": 4000})
    back, _ = _plan(p, "b", 1, 0)
    assert back == [("incoming", "InCohortFairSharing")]
    p.release("incoming")
    assert p.allocate("b", "b0-again", {"vcore": 1000})
    again, _ = _plan(p, "c", 4, 0)
    assert again == []
