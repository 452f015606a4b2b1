"""A reload that leaves quota-tree consumers unplaceable (the tree emptied; reference seed 003 §7
update: consumers with no node left are dropped) releases those allocations everywhere at once.

Found by this review: the forest policy dropped the consumers and queued their keys in
``take_preempted``, but the partition only collected them at the *next* successful allocation — so
queue, user and elastic usage kept counting them, and an unrelated allocation (another queue, no tree)
was reported as having preempted them.
"""

from __future__ import annotations

import copy
import json

import pytest

import quotaplane as qp
from tests.scenarios import world
from tests.scenarios.world import ALICE, BOB, CONFIG, canon, config, tags


def _emptied_tree_config() -> str:
    empty = copy.deepcopy(world.TREE)
    empty["spec"]["nodes"] = {}
    return config().replace(json.dumps(world.TREE), json.dumps(empty))


@pytest.mark.parametrize("snapshot", [True, False])
def test_reload_dropping_forest_consumers_releases_them_everywhere_and_restarts_identically(
        store: str, snapshot: bool) -> None:
    s = qp.Scheduler.from_yaml(CONFIG, store=store)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 12000}))
    p.add_application("bo", BOB, queue="root.b", tags=tags("team-b", "B"))
    p.add_application("x", ALICE, queue="root.c", tags=tags("team-c"))
    assert p.allocate("bo", "b1", qp.Resource({"vcore": 2000})).allocated
    assert p.allocate("x", "x1", qp.Resource({"vcore": 1000})).allocated
    text = _emptied_tree_config()
    s.update_config(text)
    forest = p.policies()[3].manager
    assert forest.consumer_ids() == []
    # the dropped consumer's allocation is gone from every policy at the reload
    assert p.allocation("b1") is None
    assert p.queues.queue("root.b").allocated == qp.Resource({"vcore": 0})
    assert p.ugm.get_user_resources(BOB) in (None, qp.Resource({}))
    assert p.policies()[2].manager.used("team-b") == qp.Resource({"vcore": 0})
    assert p.application("bo").state == "Completing"
    assert p.allocation("x1") is not None
    # an unrelated allocation preempts nothing
    d = p.allocate("x", "x2", qp.Resource({"vcore": 500}))
    assert d.allocated and d.preempted == []
    want = canon(s)
    s.close(snapshot=snapshot)
    again = qp.Scheduler.from_yaml(text, store=store)
    try:
        assert canon(again) == want
    finally:
        again.close()
