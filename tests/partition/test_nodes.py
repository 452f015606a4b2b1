"""Allocations on nodes (issue 15 #2): an allocation may name its node, given with it or set later;
node views list them; removing a node releases them (YuniKorn's removeNode), journalled and told as
events; a cordoned node keeps its allocations but leaves the cluster's capacity (reference
kubernetes-front.md §5.2, §5.3)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaplane import ConflictError, NotFoundError, Resource, UserGroup
from quotaplane.cluster import Scheduler
from tests.partition.helpers import Clock

CONFIG = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
"""

ALICE = UserGroup("alice", ("dev",))


def _v(n: int) -> Resource:
    return Resource({"vcore": n})


def _open(store: str | None = None) -> Scheduler:
    return Scheduler.from_yaml(CONFIG, store=store, clock=Clock())


def test_allocation_names_its_node_and_the_node_lists_it() -> None:
    p = _open().partition("default")
    p.add_node("n1", _v(10))
    p.add_node("n2", _v(10))
    p.add_application("app", ALICE, queue="root.a")
    assert p.allocate("app", "k1", _v(2), node="n1").allocated
    assert p.allocate("app", "k2", _v(3)).allocated            # no node: works as before
    assert p.allocate("app", "k3", _v(1), node="n1").allocated
    assert [a.allocation_key for a in p.node_allocations("n1")] == ["k1", "k3"]
    assert p.node_allocations("n2") == []
    assert p.allocation("k1").node == "n1" and p.allocation("k2").node is None
    assert p.allocation("k1").to_dict()["nodeID"] == "n1"
    assert "nodeID" not in p.allocation("k2").to_dict()


def test_unknown_node_is_refused_and_changes_nothing() -> None:
    p = _open().partition("default")
    p.add_node("n1", _v(10))
    p.add_application("app", ALICE, queue="root.a")
    before = p.dump_state()
    with pytest.raises(NotFoundError, match="node 'nx'"):
        p.allocate("app", "k1", _v(2), node="nx")
    with pytest.raises(NotFoundError, match="node 'nx'"):
        p.allocate_batch([{"applicationID": "app", "allocationKey": "k0", "resource": {"vcore": 1}},
                          {"applicationID": "app", "allocationKey": "k1", "resource": {"vcore": 1},
                           "nodeID": "nx"}])
    assert p.dump_state() == before


def test_bind_sets_and_moves_the_node() -> None:
    p = _open().partition("default")
    p.add_node("n1", _v(10))
    p.add_node("n2", _v(10))
    p.add_application("app", ALICE, queue="root.a")
    p.allocate("app", "k1", _v(2))
    seq = p.last_seq
    p.bind("k1", "n1")
    assert [a.allocation_key for a in p.node_allocations("n1")] == ["k1"]
    p.bind("k1", "n1")                  # the same node again: no event
    assert p.last_seq == seq + 1
    p.bind("k1", "n2")
    assert p.node_allocations("n1") == [] and [a.allocation_key for a in p.node_allocations("n2")] == ["k1"]
    with pytest.raises(NotFoundError, match="allocation 'kx'"):
        p.bind("kx", "n1")
    with pytest.raises(NotFoundError, match="node 'nx'"):
        p.bind("k1", "nx")


def test_removing_a_node_releases_its_allocations_and_tells_subscribers() -> None:
    p = _open().partition("default")
    p.add_node("n1", _v(10))
    p.add_node("n2", _v(10))
    p.add_application("app", ALICE, queue="root.a")
    p.allocate("app", "k1", _v(2), node="n1")
    p.allocate("app", "k2", _v(3), node="n2")
    p.allocate("app", "k3", _v(4))
    seen: list[dict[str, Any]] = []
    p.subscribe(seen.append)
    p.remove_node("n1")
    assert p.allocation("k1") is None and p.allocation("k2") is not None and p.allocation("k3") is not None
    assert p.queues.queue("root.a").allocated == {"vcore": 7}
    assert p.total_capacity() == _v(10)
    types = [(n["type"], n.get("allocationKey") or n.get("nodeID")) for n in seen]
    assert ("node_removed", "n1") in types and ("released", "k1") in types
    assert types.index(("node_removed", "n1")) < types.index(("released", "k1"))


def test_removing_the_node_of_the_last_allocation_completes_the_application() -> None:
    p = _open().partition("default")
    p.add_node("n1", _v(10))
    p.add_application("app", ALICE, queue="root.a")
    p.allocate("app", "k1", _v(2), node="n1")
    assert p.application("app").state == "Starting"
    assert [u["userName"] for u in p.users_usage()] == ["alice"]
    p.remove_node("n1")
    assert p.application("app").state == "Completing"
    assert p.users_usage() == []                       # alice's tracker is cleaned up (seed 001)
    assert not p.queues.queue("root.a").allocated


def test_cordon_keeps_allocations_and_takes_the_capacity_out() -> None:
    p = _open().partition("default")
    p.add_node("n1", _v(10))
    p.add_node("n2", _v(10))
    p.add_application("app", ALICE, queue="root.a")
    p.allocate("app", "k1", _v(8), node="n1")
    p.update_node("n1", schedulable=False)
    assert not p.node_schedulable("n1") and p.node_schedulable("n2")
    assert p.total_capacity() == _v(10)
    assert [a.allocation_key for a in p.node_allocations("n1")] == ["k1"]
    assert not p.allocate("app", "k2", _v(3)).allocated     # 8 used of the 10 left
    p.update_node("n1", schedulable=True)
    assert p.total_capacity() == _v(20)
    assert p.allocate("app", "k2", _v(3)).allocated
    p.update_node("n2", capacity=_v(30))
    assert p.total_capacity() == _v(40)
    with pytest.raises(NotFoundError):
        p.update_node("nx", schedulable=False)
    with pytest.raises(ConflictError):
        p.add_node("n1", _v(1))


def test_a_cordoned_node_can_be_registered_and_bound_to() -> None:
    p = _open().partition("default")
    p.add_node("n1", _v(10))
    p.add_node("c1", _v(50), schedulable=False)
    assert p.total_capacity() == _v(10)
    p.add_application("app", ALICE, queue="root.a")
    p.allocate("app", "k1", _v(2))
    p.bind("k1", "c1")
    assert [a.allocation_key for a in p.node_allocations("c1")] == ["k1"]


def test_a_real_allocation_replacing_a_placeholder_keeps_its_node() -> None:
    p = _open().partition("default")
    p.add_node("n1", _v(10))
    p.add_application("app", ALICE, queue="root.a")
    p.allocate("app", "ph1", _v(2), placeholder=True, task_group="tg", node="n1")
    p.replace_placeholder("ph1", "real1", _v(2))
    assert [a.allocation_key for a in p.node_allocations("n1")] == ["real1"]
    assert p.allocation("real1").node == "n1"


def test_restart_and_snapshot_restore_keep_nodes_and_placements(tmp_path: Any) -> None:
    store = f"sqlite:///{tmp_path}/s.db"
    s = _open(store)
    p = s.partition("default")
    p.add_node("n1", _v(10))
    p.add_node("n2", _v(10))
    p.add_node("c1", _v(5), schedulable=False)
    p.add_application("app", ALICE, queue="root.a")
    p.allocate("app", "k1", _v(2), node="n1")
    p.allocate("app", "k2", _v(2))
    p.bind("k2", "n2")
    p.allocate("app", "k3", _v(1), node="c1")
    p.allocate("app", "k4", _v(1), node="n2")
    p.remove_node("n2")
    p.update_node("n1", schedulable=False)
    before = p.dump_state()
    assert before["unschedulable"] == ["c1", "n1"]
    s.close()
    s2 = _open(store)
    assert s2.partition("default").dump_state() == before
    s2.partition("default").take_snapshot()
    s2.close()
    s3 = _open(store)
    p3 = s3.partition("default")
    assert p3.dump_state() == before
    assert [a.allocation_key for a in p3.node_allocations("c1")] == ["k3"]
    s3.close()


_OPS = st.lists(st.tuples(st.sampled_from(["alloc", "alloc_on", "bind", "release", "remove", "add",
                                           "cordon", "uncordon"]),
                          st.integers(0, 3), st.integers(0, 9)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(_OPS)
def test_node_index_matches_allocations_and_replay_equals_state(ops: list[tuple[str, int, int]]) -> None:
    """After any sequence: every allocation naming a node is listed on exactly that node, no node lists
    anything else, the total is the sum of schedulable capacities, and a replay gives the same state."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/s.db"
        s = _open(store)
        p = s.partition("default")
        p.add_application("app", ALICE, queue="root.a")
        for n in range(4):
            p.add_node(f"n{n}", _v(5))
        for i, (op, n, k) in enumerate(ops):
            node, key = f"n{n}", f"k{k}"
            try:
                if op == "alloc":
                    p.allocate("app", f"{key}-{i}", _v(1))
                elif op == "alloc_on":
                    p.allocate("app", f"{key}-{i}", _v(1), node=node)
                elif op == "bind":
                    keys = [a.allocation_key for a in p.allocations()]
                    if keys:
                        p.bind(keys[k % len(keys)], node)
                elif op == "release":
                    keys = [a.allocation_key for a in p.allocations()]
                    if keys:
                        p.release(keys[k % len(keys)])
                elif op == "remove":
                    p.remove_node(node)
                elif op == "add":
                    p.add_node(node, _v(5))
                elif op == "cordon":
                    p.update_node(node, schedulable=False)
                else:
                    p.update_node(node, schedulable=True)
            except (NotFoundError, ConflictError):
                pass
        nodes = p.nodes()
        for name in nodes:
            on = [a.allocation_key for a in p.node_allocations(name)]
            assert on == [a.allocation_key for a in p.allocations() if a.node == name] or \
                sorted(on) == sorted(a.allocation_key for a in p.allocations() if a.node == name)
        assert all(a.node is None or a.node in nodes for a in p.allocations())
        total = sum(c.get("vcore", 0) for name, c in nodes.items() if p.node_schedulable(name))
        assert p.total_capacity().get("vcore", 0) == total
        used = sum(a.resource.get("vcore", 0) for a in p.allocations())
        assert p.queues.queue("root.a").allocated.get("vcore", 0) == used
        before = p.dump_state()
        s.close()
        s2 = _open(store)
        assert s2.partition("default").dump_state() == before
        s2.close()
