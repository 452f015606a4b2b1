"""Scenarios through the public API on a partition running queue + user/group + elastic + forest.

Decision Q2 (all checked before any is applied, a denial lists every policy's violations), S1 (a
restart from the journal reproduces the acknowledged state), Q3 (a max lowered below usage), E2 (the
elastic runtime follows the other groups' usage), F2 (a forest preemption changes the trees exactly).
"""

from __future__ import annotations

import pytest

import quotaplane as qp
from tests.scenarios.world import ALICE, BOB, CAROL, CONFIG, canon, config, tags


def _restart_equals(s: qp.Scheduler, store: str, text: str = CONFIG) -> None:
    want = canon(s)
    s.close()
    again = qp.Scheduler.from_yaml(text, store=store)
    try:
        assert canon(again) == want
    finally:
        again.close()


def test_q2_one_denial_lists_queue_user_elastic_and_forest_violations_and_changes_nothing(
        store: str) -> None:
    """Q2: a request over the queue max, alice's user limit, team-a's elastic runtime and the quota
    tree node A at once is refused with four violations (right codes, paths and shortfalls); the state,
    journal included, is unchanged."""
    s = qp.Scheduler.from_yaml(CONFIG, store=store)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 8000}))
    assert p.add_application("a1", ALICE, queue="root.a", tags=tags("team-a", "A")) == "root.a"
    assert p.allocate("a1", "k1", qp.Resource({"vcore": 2500})).allocated
    before = canon(s)
    seq = p.last_seq
    d = p.allocate("a1", "k2", qp.Resource({"vcore": 4000}))
    assert not d.allocated and d.preempted == []
    got = [(v.policy, v.code, v.path, v.resource) for v in d.reasons]
    assert got == [
        ("queue", "queue.max", "root.a", qp.Resource({"vcore": 500})),             # 2500+4000-6000
        ("user", "user.maxresources", "root.a", qp.Resource({"vcore": 3500})),     # 6500-3000
        ("elastic", "elastic.runtime", "team-a", qp.Resource({"vcore": 1500})),    # 6500-runtime 5000
        ("forest", "forest.quota", "T/A", qp.Resource({"vcore": 1500})),           # 6500-5000
    ]
    assert all(v.message for v in d.reasons)
    assert canon(s) == before and p.last_seq == seq
    # what_if gives the same reasons and also changes nothing
    w = p.what_if("a1", qp.Resource({"vcore": 4000}))
    assert [(v.policy, v.code, v.path, v.resource) for v in w.reasons] == got
    assert canon(s) == before
    # batch: the same refusal inside a batch, next to an admitted entry
    ds = p.allocate_batch([{"application_id": "a1", "allocation_key": "k3", "resource": {"vcore": 4000}},
                           {"application_id": "a1", "allocation_key": "k4", "resource": {"vcore": 500}}])
    assert [x.allocated for x in ds] == [False, True]
    assert [(v.policy, v.code) for v in ds[0].reasons] == [(g[0], g[1]) for g in got]
    assert p.queues.queue("root.a").allocated == qp.Resource({"vcore": 3000})
    assert p.policies()[2].manager.used("team-a") == qp.Resource({"vcore": 3000})
    _restart_equals(s, store)


def test_forest_preemption_releases_the_victim_everywhere_and_restart_reproduces_it(store: str) -> None:
    """F1/F2: hi's allocation at hard node A pushes the tree root over 8000; bob's allocation that
    borrowed beyond soft node B is preempted. The Decision names it and the partition has released it
    through every policy (queue, user, elastic used, forest); a restart reproduces the state."""
    s = qp.Scheduler.from_yaml(CONFIG, store=store)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 12000}))      # the tree, not the cluster, is the bottleneck
    p.add_application("low", BOB, queue="root.b", tags=tags("team-b", "B"))
    assert p.allocate("low", "l1", qp.Resource({"vcore": 3000})).allocated
    assert p.allocate("low", "l2", qp.Resource({"vcore": 3000})).allocated   # borrows at the tree root
    p.add_application("hi", CAROL, queue="root.a", tags=tags("team-a", "A"))
    w = p.what_if("hi", qp.Resource({"vcore": 3500}))
    assert w.allocated and w.preempted == []        # what_if preempts nothing
    assert p.allocation("l2") is not None
    d = p.allocate("hi", "h1", qp.Resource({"vcore": 3500}))
    assert d.allocated and d.preempted == ["l2"]
    assert p.allocation("l2") is None and p.allocation("l1") is not None
    assert p.queues.queue("root.b").allocated == qp.Resource({"vcore": 3000})
    assert p.queues.queue("root").allocated == qp.Resource({"vcore": 6500})
    assert p.ugm.get_user_resources(BOB) == qp.Resource({"vcore": 3000})
    elastic = p.policies()[2].manager
    assert elastic.used("team-b") == qp.Resource({"vcore": 3000})
    assert elastic.used("team-a") == qp.Resource({"vcore": 3500})
    forest = p.policies()[3].manager
    assert forest.consumer_ids() == ["h1", "l1"]
    assert forest.node_allocated("T", "root")["vcore"] == 6500
    assert p.used_capacity() == qp.Resource({"vcore": 6500})
    # releasing the victim key now is an unknown allocation, nothing counted twice
    with pytest.raises(qp.NotFoundError):      # a preempted allocation is gone
        p.release("l2")
    _restart_equals(s, store)


def test_reload_drains_a_queue_lowers_a_max_below_usage_changes_limits_then_restart(store: str) -> None:
    """Q3/U6: a reload removes root.b (bob's app still runs there: the queue drains), lowers root.a's
    max below its usage and tightens alice's limit; running usage stays, new allocations in root.a are
    refused until usage drops; a restart from the journal gives the same state."""
    s = qp.Scheduler.from_yaml(CONFIG, store=store)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 12000}))
    p.add_application("a1", ALICE, queue="root.a", tags=tags("team-a"))
    p.add_application("b1", BOB, queue="root.b", tags=tags("team-b"))
    assert p.allocate("a1", "a-1", qp.Resource({"vcore": 1500})).allocated
    assert p.allocate("a1", "a-2", qp.Resource({"vcore": 1500})).allocated
    assert p.allocate("b1", "b-1", qp.Resource({"vcore": 2000})).allocated
    new_queues = """
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      resources:
        max: {vcore: 2}
      limits:
      - limit: alice
        users: [alice]
        maxresources: {vcore: 1}
    - name: c
"""
    text2 = config(new_queues)
    s.update_config(text2)
    assert p is s.partition("default")
    b = p.queues.queue("root.b")
    assert b is not None and b.allocated == qp.Resource({"vcore": 2000})
    assert p.queues.queue("root.a").allocated == qp.Resource({"vcore": 3000})     # Q3: nothing evicted
    d = p.allocate("a1", "a-3", qp.Resource({"vcore": 100}))
    assert not d.allocated
    assert {(v.code, v.path) for v in d.reasons} == {("queue.max", "root.a"), ("user.maxresources", "root.a")}
    # a new application cannot go to the removed queue
    with pytest.raises(qp.QuotaplaneError):    # a draining queue takes no new application
        p.add_application("b2", BOB, queue="root.b", tags=tags("team-b"))
    p.release("a-1")
    p.release("a-2")
    assert p.allocate("a1", "a-4", qp.Resource({"vcore": 1000})).allocated     # fits the new limits
    p.release("b-1")
    p.remove_application("b1")
    _restart_equals(s, store, text2)


def test_an_ask_waiting_on_the_elastic_runtime_is_allocated_when_a_sibling_group_releases() -> None:
    """E2 + queueing: team-a and team-c share parent dept (max 5 cores). With team-a at 3000 and team-c
    at 2000, team-a's runtime is 3000, so its ask waits with an elastic.runtime reason; when team-c's
    usage drops, team-a's runtime grows and the ask is allocated through every policy."""
    s = qp.Scheduler.from_yaml(CONFIG)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 12000}))
    p.add_application("a", CAROL, queue="root.c", tags=tags("team-a"))
    p.add_application("c", BOB, queue="root.c", tags=tags("team-c"))
    assert p.allocate("a", "a1", qp.Resource({"vcore": 3000})).allocated
    assert p.allocate("c", "c1", qp.Resource({"vcore": 2000})).allocated
    p.add_ask("a", "a2", qp.Resource({"vcore": 1000}))
    assert [a.allocation_key for a in p.pending()] == ["a2"]
    reasons = p.pending_reasons("a2")
    assert reasons is not None
    assert [(v.code, v.path, v.resource) for v in reasons] == [
        ("elastic.runtime", "team-a", qp.Resource({"vcore": 1000}))]
    assert p.schedule() == [] and p.allocation("a2") is None
    p.release("c1")
    p.schedule()
    assert p.pending() == [] and p.allocation("a2") is not None
    assert p.policies()[2].manager.used("team-a") == qp.Resource({"vcore": 4000})
    assert p.queues.queue("root.c").allocated == qp.Resource({"vcore": 4000})


def test_elastic_min_parent_quota_and_unknown_tree_reasons() -> None:
    """E2/§2.9: a non-preemptible request over min reports elastic.min with the shortfall
    (non-preemptible used + request - min); an application tagged to a parent quota is refused
    (reference §3.4); tags naming an unknown tree or node are forest.quota refusals — and what_if
    gives exactly allocate's reasons in each case, changing nothing."""
    s = qp.Scheduler.from_yaml(CONFIG)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 10000}))
    p.add_application("ca", CAROL, queue="root.c", tags=tags("team-a"))
    assert p.allocate("ca", "x1", qp.Resource({"vcore": 600}), preemptible=False).allocated
    p.add_application("pp", CAROL, queue="root.c", tags=tags("dept"))
    p.add_application("tt", CAROL, queue="root.c", tags=tags("team-a", "nope"))
    p.add_application("uu", CAROL, queue="root.c", tags={"quotaplane.io/tree.Nope": "A"})
    cases = [("ca", False, [("elastic.min", "team-a", qp.Resource({"vcore": 200}))]),
             ("pp", True, [("elastic.runtime", "dept", None)]),
             ("tt", True, [("forest.quota", "T/nope", None)]),
             ("uu", True, [("forest.quota", "Nope", None)])]
    for n, (app, preemptible, want) in enumerate(cases):
        before = canon(s)
        w = p.what_if(app, qp.Resource({"vcore": 600}), preemptible=preemptible)
        d = p.allocate(app, f"k{n}", qp.Resource({"vcore": 600}), preemptible=preemptible)
        assert [(v.code, v.path, v.resource) for v in d.reasons] == want
        assert [(v.code, v.path, v.message) for v in w.reasons] == [(v.code, v.path, v.message)
                                                                   for v in d.reasons]
        assert canon(s) == before


def test_batch_entry_preempting_an_earlier_entry_of_the_same_batch(store: str) -> None:
    """allocate_batch admits entries in order: a later entry's forest preemption may take back an earlier
    entry of the same batch; its Decision names it, the partition has released it everywhere, and the
    journalled batch replays to the same state."""
    s = qp.Scheduler.from_yaml(CONFIG, store=store)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 12000}))
    p.add_application("low", BOB, queue="root.b", tags=tags("team-b", "B"))
    p.add_application("hi", CAROL, queue="root.a", tags=tags("team-a", "A"))
    assert p.allocate("low", "l1", qp.Resource({"vcore": 3000})).allocated
    ds = p.allocate_batch([
        {"application_id": "low", "allocation_key": "l2", "resource": {"vcore": 3000}},
        {"application_id": "hi", "allocation_key": "h1", "resource": {"vcore": 3500}}])
    assert [(d.allocated, d.preempted) for d in ds] == [(True, []), (True, ["l2"])]
    assert p.allocation("l2") is None
    assert p.queues.queue("root.b").allocated == qp.Resource({"vcore": 3000})
    _restart_equals(s, store)
