"""The incremental cycle equals the full cycle with Kueue's fair sharing on (docs/queueing.md
"Incremental cycles", docs/fair-sharing.md): the same random histories as
``tests/queueing/test_incremental.py`` on the same tree, with queues ordered by their shares and
fair-sharing preemption instead of YuniKorn's — same journal, same waiting asks and reasons after every
step."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane.partition import Partition
from quotaplane.scheduler import Scheduler
from tests.partition.helpers import Clock
from tests.queueing.test_cycle import _count_tries
from tests.queueing.test_incremental import _STEP, ALICE, CONFIG, Twin, _run, _v

FAIR = CONFIG.replace("- name: default\n", "- name: default\n  fairsharing: {enabled: true}\n", 1).replace(
    "    submitacl: '*'\n",
    "    submitacl: '*'\n    properties: {preemption.withinclusterqueue: LowerPriority, "
    "preemption.reclaimwithincohort: Any, preemption.delay: 1s}\n", 1)


def test_the_fair_configuration_turns_fair_sharing_on() -> None:
    twin = Twin(FAIR)
    assert all(p.queues.fair is not None for p in twin.parts)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_STEP, min_size=1, max_size=40), st.integers(4, 12))
def test_incremental_cycles_equal_full_cycles_with_fair_sharing(
        steps: list[tuple[str, int, int, int, int, int]], cluster: int) -> None:
    twin = Twin(FAIR)
    twin.each(lambda p: p.add_node("n0", _v(cluster)))
    _run(twin, steps)


TEAMS = """
partitions:
- name: default
  fairsharing: {enabled: true}
  queues:
  - name: root
    submitacl: '*'
    queues:
""" + "".join(f"""    - name: t{i}
      resources: {{guaranteed: {{vcore: 2}}}}
      queues:
      - {{name: x, resources: {{max: {{vcore: 2}}}}}}
      - {{name: y, resources: {{max: {{vcore: 2}}}}}}
""" for i in range(4))


def _teams(monkeypatch: pytest.MonkeyPatch) -> tuple[Partition, list[str]]:
    p = Scheduler.from_yaml(TEAMS, clock=Clock()).partition("default")
    p.add_node("n", _v(100))
    for i in range(4):
        for leaf in ("x", "y"):
            app = f"t{i}{leaf}"
            p.add_application(app, ALICE, queue=f"root.t{i}.{leaf}")
            assert p.allocate(app, f"fill-{app}", _v(2)).allocated
            for j in range(2):
                p.add_ask(app, f"{app}-{j}", _v(1))
    return p, _count_tries(p, monkeypatch)


def test_a_release_retries_the_subtree_whose_order_it_can_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """A release in t2.x wakes t2.x's asks alone: their order against each other is their leaf's, so
    the other seven full leaves — each with asks whose heads weigh in the tournament elsewhere — are not
    tried (with fair sharing on an incremental cycle used to try every ask of the tree)."""
    p, tried = _teams(monkeypatch)
    p.release("fill-t2x")
    assert tried == ["t2x-0", "t2x-1"]


def test_releases_in_two_teams_retry_those_teams_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Woken asks in t1.x and t3.y meet at the root: each team's place there depends on its head, which
    can be its other leaf's ask, so t1 and t3 are retried whole — and t0, t2 are not tried."""
    p, tried = _teams(monkeypatch)
    p.release_batch(["fill-t1x", "fill-t3y"])          # one change, one incremental cycle
    assert {k[:2] for k in tried} == {"t1", "t3"}
    assert {k for k in tried if k.startswith(("t1x", "t3y"))} == {"t1x-0", "t1x-1", "t3y-0", "t3y-1"}
