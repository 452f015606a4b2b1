"""A scripted history touching every kind of journal event, for the journal-format fixture.

``run(store)`` drives a scheduler with all four policies through nodes, applications, allocations
(single and batch), asks, gang placeholders and their replacement, releases, timeouts (with elastic
reclaim), config reloads and removals. The fixture ``fixtures/journal_v1.json`` holds the events this
history wrote with the code of November 2026 and the state they rebuild; the test in
``test_journal_fixture.py`` replays them with today's code (the format must not drift) and runs the
same history again (today's producers must write the same events).
"""

from __future__ import annotations

from typing import Any

import quotaplane as qp
from tests.scenarios.world import ALICE, BOB, CAROL, CONFIG, config, tags

RELOADED = CONFIG.replace("max: {vcore: 10}", "max: {vcore: 12}")


class Clock:
    """A clock the history moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(store: Any) -> qp.Scheduler:
    """Play the history on ``store`` (a journal object or URL); return the scheduler (still open)."""
    clock = Clock()
    s = qp.Scheduler.from_yaml(CONFIG, store=store, clock=clock, snapshot_every=0,
                               partition_options={"placeholder_timeout": 50.0})
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 6000, "memory": 1000}))
    p.add_node("n2", qp.Resource({"vcore": 4000, "memory": 1000}))
    p.add_application("a1", ALICE, queue="root.a", tags=tags("team-a", "A"))
    p.add_application("b1", BOB, queue="root.b", tags=tags("team-b", "B"))
    p.add_application("c1", CAROL, queue="root.c", tags=tags("team-c"))
    p.add_application("g1", BOB, queue="root.b", tags=tags("team-b"), gang_style="hard")
    clock.now += 1
    p.allocate("a1", "a1-1", qp.Resource({"vcore": 1000}), priority=5)
    p.allocate("a1", "a1-2", qp.Resource({"vcore": 1000}), preemptible=False)
    p.allocate("a1", "a1-big", qp.Resource({"vcore": 9000}))           # refused: nothing journalled
    p.allocate_batch([{"applicationID": "b1", "allocationKey": "b1-1", "resource": {"vcore": 1000}},
                      {"applicationID": "b1", "allocationKey": "b1-2", "resource": {"vcore": 500},
                       "priority": 3},
                      {"applicationID": "c1", "allocationKey": "c1-1", "resource": {"vcore": 500}}])
    clock.now += 1
    p.allocate("g1", "ph-1", qp.Resource({"vcore": 500}), placeholder=True, task_group="tg")
    p.allocate("g1", "ph-2", qp.Resource({"vcore": 500}), placeholder=True, task_group="tg")
    p.replace_placeholder("ph-1", "g1-real", qp.Resource({"vcore": 400}))
    p.add_ask("c1", "c1-ask", qp.Resource({"vcore": 4000}), priority=2)    # waits
    p.add_ask("c1", "c1-ask2", qp.Resource({"vcore": 100}))                # fits at once
    p.add_ask("a1", "a1-ask", qp.Resource({"vcore": 7000}))
    p.remove_ask("a1-ask")
    clock.now += 1
    p.release("b1-1")
    p.release_batch(["c1-1"])
    s.update_config(RELOADED)
    p.add_node("n3", qp.Resource({"vcore": 2000}))
    p.remove_node("n3")
    clock.now += 100
    p.check_timeouts()                      # ph-2 times out (gang "hard" keeps its real allocation)
    p.add_application("d1", CAROL, queue="root.c", tags=tags("team-c"))
    p.allocate("d1", "d1-1", qp.Resource({"vcore": 100}))
    p.remove_application("d1")
    clock.now += 50
    p.check_timeouts()
    s.update_config(config(revoke_delay=5))
    clock.now += 1000
    p.check_timeouts()
    return s


def events_of(s: qp.Scheduler) -> dict[str, list[list[Any]]]:
    """Every journalled event, per stream, as ``[seq, event]`` pairs."""
    j = s.journal
    return {stream: [[seq, ev] for seq, ev in j.read(stream)] for stream in sorted(j.streams())}
