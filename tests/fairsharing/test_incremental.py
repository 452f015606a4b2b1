"""The incremental cycle equals the full cycle with Kueue's fair sharing on (docs/queueing.md
"Incremental cycles", docs/fair-sharing.md): the same random histories as
``tests/queueing/test_incremental.py`` on the same tree, with queues ordered by their shares and
fair-sharing preemption instead of YuniKorn's — same journal, same waiting asks and reasons after every
step."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.queueing.test_incremental import _STEP, CONFIG, Twin, _run, _v

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
