"""Property-based invariants of the queue tree (quality.md "Invariants"):

- the usage of every queue equals the sum of the admitted, unreleased allocations below it;
- an increase admitted by ``check_allocation`` never takes a queue over its max (root: the cluster);
- a check never changes state; the DAO and the state dump are deterministic.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from quotaplane.queues import QueueTree
from quotaplane.resources import Resource
from tests.queues.helpers import partition

NAMES = ("vcore", "memory", "gpu")
CLUSTER = {"vcore": 40, "memory": 60}  # no gpu: the root refuses any gpu (strict)

CONFIG = partition({"submitacl": "*", "queues": [
    {"name": "a", "max": {"vcore": 20}, "maxapplications": 3, "queues": [
        {"name": "a1", "max": {"vcore": 12, "memory": 30}},
        {"name": "a2", "max": {"gpu": 2}}]},
    {"name": "b", "parent": True, "childtemplate": {"max": {"memory": 10}}},
    {"name": "c"},
]})
# A reload target: root.c disappears (drains), a1's max is lowered below possible usage (Q3), root.d appears.
CONFIG_B = partition({"submitacl": "*", "queues": [
    {"name": "a", "max": {"vcore": 20}, "maxapplications": 3, "queues": [
        {"name": "a1", "max": {"vcore": 2, "memory": 30}},
        {"name": "a2", "max": {"gpu": 2}}]},
    {"name": "b", "parent": True, "childtemplate": {"max": {"memory": 10}}},
    {"name": "d", "max": {"memory": 5}},
]})
STATIC_LEAVES = ("root.a.a1", "root.a.a2", "root.c", "root.d")

resources = st.dictionaries(st.sampled_from(NAMES), st.integers(0, 25), min_size=1, max_size=3).map(Resource)


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tree = QueueTree(CONFIG)
        self.tree.set_cluster_resource(CLUSTER)
        self.leaves: list[str] = list(STATIC_LEAVES)
        self.allocations: list[tuple[str, Resource]] = []
        self.running: dict[str, str] = {}

    @rule(name=st.sampled_from(["x", "y", "z"]))
    def dynamic_leaf(self, name: str) -> None:
        path = f"root.b.{name}"
        q = self.tree.ensure_dynamic_queue(path)
        assert q.max == {"memory": 10}
        if path not in self.leaves:
            self.leaves.append(path)

    @rule(use_b=st.booleans())
    def reload(self, use_b: bool) -> None:
        self.tree.update_config(CONFIG_B if use_b else CONFIG)
        for qpath in self.tree.paths():
            q = self.tree.queue(qpath)
            assert q is not None
            if q.is_draining:  # a draining queue is only kept while it holds something
                assert not q.is_empty(), qpath

    @rule(data=st.data(), resource=resources)
    def allocate(self, data: st.DataObject, resource: Resource) -> None:
        path = data.draw(st.sampled_from(self.leaves))
        if self.tree.queue(path) is None:
            return
        before = json.dumps(self.tree.dump_state())
        limits = self.tree.check_allocation(path, resource)
        assert json.dumps(self.tree.dump_state()) == before  # a check changes nothing
        if not limits:
            self.tree.increase_allocated(path, resource)
            if any(resource.values()):
                # an all-zero allocation leaves no usage behind: the tree need not keep a queue for it
                # (in a partition the application keeps its queue; hypothesis found this case)
                self.allocations.append((path, resource))
            # the admitted increase did not take any queue on the path over its max (M-2)
            q = self.tree.queue(path)
            while q is not None:
                for name in resource:
                    used = q.allocated.get(name, 0)
                    if q.is_root:
                        assert used <= CLUSTER.get(name, 0)
                    elif q.max is not None and name in q.max:
                        assert used <= q.max[name], (q.path, name)
                q = q.parent
        else:
            for lim in limits:
                assert lim.shortfall and all(v > 0 for v in lim.shortfall.values())
                assert lim.code == ("root.capacity" if lim.queue_path == "root" else "queue.max")

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        if not self.allocations:
            return
        index = data.draw(st.integers(0, len(self.allocations) - 1))
        path, resource = self.allocations.pop(index)
        self.tree.decrease_allocated(path, resource)
        self.tree.remove_if_empty(path)

    @rule(data=st.data(), app=st.sampled_from(["app1", "app2", "app3", "app4"]))
    def start_app(self, data: st.DataObject, app: str) -> None:
        if app in self.running:
            return
        path = data.draw(st.sampled_from(self.leaves))
        if self.tree.queue(path) is None:
            return
        if not self.tree.check_run_app(path, app):
            self.tree.app_started(path, app)
            self.running[app] = path

    @rule(app=st.sampled_from(["app1", "app2", "app3", "app4"]))
    def stop_app(self, app: str) -> None:
        path = self.running.pop(app, None)
        if path is not None:
            self.tree.app_stopped(path, app)
            self.tree.remove_if_empty(path)

    @invariant()
    def usage_is_the_sum_below(self) -> None:
        for qpath in self.tree.paths():
            expected: dict[str, int] = {}
            for path, resource in self.allocations:
                if path == qpath or path.startswith(qpath + "."):
                    for k, v in resource.items():
                        expected[k] = expected.get(k, 0) + v
            q = self.tree.queue(qpath)
            assert q is not None
            assert q.allocated == expected, qpath

    @invariant()
    def root_never_exceeds_the_cluster(self) -> None:
        assert all(v <= CLUSTER.get(k, 0) for k, v in self.tree.root.allocated.items())

    @invariant()
    def every_allocation_still_has_its_queue(self) -> None:
        for path, _ in self.allocations:
            assert self.tree.queue(path) is not None, path
        for app, path in self.running.items():
            assert self.tree.queue(path) is not None, (app, path)

    @invariant()
    def running_apps_counted_everywhere_and_within_limits(self) -> None:
        assert sorted(self.tree.root.running_apps) == sorted(self.running)
        for qpath in self.tree.paths():
            q = self.tree.queue(qpath)
            assert q is not None
            below = {a for a, p in self.running.items() if p == qpath or p.startswith(qpath + ".")}
            assert set(q.running_apps) == below
            if q.max_applications:
                assert len(q.running_apps) <= q.max_applications


QueueMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
TestQueueMachine = QueueMachine.TestCase


def _replay(ops: list[tuple[str, str, dict[str, int]]]) -> QueueTree:
    tree = QueueTree(CONFIG)
    tree.set_cluster_resource(CLUSTER)
    for op, path, values in ops:
        if op == "dyn":
            tree.ensure_dynamic_queue(path)
        elif op == "alloc" and tree.queue(path) is not None and not tree.check_allocation(path, values):
            tree.increase_allocated(path, values)
    return tree


ops_strategy = st.lists(st.tuples(
    st.sampled_from(["dyn", "alloc"]),
    st.sampled_from([*STATIC_LEAVES, "root.b.x", "root.b.y"]),
    st.dictionaries(st.sampled_from(NAMES), st.integers(0, 10), min_size=1, max_size=2)), max_size=25)


@settings(max_examples=50, deadline=None)
@given(ops=ops_strategy)
def test_same_operations_give_byte_identical_dao_and_state(
        ops: list[tuple[str, str, dict[str, int]]]) -> None:
    a, b = _replay(ops), _replay(ops)
    assert json.dumps(a.dao(partition="default")) == json.dumps(b.dao(partition="default"))
    assert json.dumps(a.dump_state()) == json.dumps(b.dump_state())
