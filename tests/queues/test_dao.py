"""Queue DAO (reference §2.3): keys, omitempty rules, subtree, determinism."""

from __future__ import annotations

import json

from quotaplane.queues import QueueTree
from quotaplane.resources import Resource
from tests.queues.helpers import partition
from tests.queues.test_tree import seed_tree, template_tree

INT32_MIN = -(2**31)


def test_dao_root_with_subtree_and_partition_only_on_top() -> None:
    tree = seed_tree()
    dao = tree.dao(partition="default")
    assert dao["queuename"] == "root" and dao["partition"] == "default" and dao["status"] == "Active"
    assert dao["maxResource"] == {"memory": 1_000_000, "vcore": 100_000}  # root: cluster size
    assert "parent" not in dao  # omitempty
    assert dao["childNames"] == ["root.default", "root.parent"]
    assert [c["queuename"] for c in dao["children"]] == ["root.default", "root.parent"]
    assert all(c["partition"] == "" for c in dao["children"])
    grandchildren = dao["children"][1]["children"]
    assert [c["queuename"] for c in grandchildren] == [
        "root.parent.child1", "root.parent.child2", "root.parent.child3"]
    assert grandchildren[0]["parent"] == "root.parent"


def test_dao_without_subtree_has_child_names_but_no_children() -> None:
    dao = seed_tree().dao("root.parent", subtree=False)
    assert "children" not in dao
    assert dao["childNames"] == ["root.parent.child1", "root.parent.child2", "root.parent.child3"]


def test_dao_omitempty_and_always_present_fields() -> None:
    tree = seed_tree()
    dao = tree.dao("root.parent.child1", subtree=False)
    for absent in ("maxResource", "guaranteedResource", "allocatedResource", "pendingResource",
                   "children", "childNames", "absUsedCapacity", "maxRunningApps", "runningApps",
                   "properties", "template", "priorityOffset", "quotaPreemptionDelay",
                   "allocatingAcceptedApps", "preemptingResource"):
        assert absent not in dao, absent
    for present in ("queuename", "partition", "isLeaf", "isManaged", "currentPriority",
                    "prioritySorting", "preemptionEnabled", "isPreemptionFence", "isPriorityFence"):
        assert present in dao, present
    assert dao["currentPriority"] == INT32_MIN  # nothing pending
    assert dao["isLeaf"] is True and dao["isManaged"] is True
    assert dao["sortingPolicy"] == "fifo" and dao["preemptionDelay"] == "30s"


def test_dao_usage_fields_and_abs_used_capacity() -> None:
    tree = seed_tree()
    tree.increase_allocated("root.parent.child2", Resource({"memory": 300, "vcore": 7}))
    tree.app_started("root.parent.child2", "app-1")
    dao = tree.dao("root.parent.child2", subtree=False)
    assert dao["allocatedResource"] == {"memory": 300, "vcore": 7}
    assert dao["maxResource"] == {"memory": 750}
    assert dao["absUsedCapacity"] == {"memory": 40}  # only the names of max
    assert dao["headroom"] == {"memory": 450, "vcore": 99_993}
    assert dao["runningApps"] == 1


def test_dao_abs_used_capacity_edge_cases() -> None:
    tree = QueueTree(partition({"queues": [{"name": "a", "max": {"vcore": 1, "x": 0}}]}))
    tree.set_cluster_resource({"vcore": 10_000, "x": 10})
    tree.increase_allocated("root.a", Resource({"vcore": 3000, "x": 2}))
    # used > max: over 100; max 0 with usage: 100
    assert tree.dao("root.a")["absUsedCapacity"] == {"vcore": 300, "x": 100}


def test_dao_properties_template_and_policies() -> None:
    tree = QueueTree(partition({"properties": {"preemption.delay": "1h"}, "queues": [
        {"name": "p", "parent": True,
         "properties": {"preemption.policy": "fence", "priority.policy": "fence", "priority.offset": "5",
                        "application.sort.priority": "disabled", "quota.preemption.delay": "90s"},
         "childtemplate": {"maxapplications": 2, "properties": {"a": "b"}},
         "queues": [{"name": "leaf", "properties": {"application.sort.policy": "fair"}}]}]}))
    p = tree.dao("root.p", subtree=False)
    assert p["isPreemptionFence"] is True and p["isPriorityFence"] is True
    assert p["priorityOffset"] == 5 and p["prioritySorting"] is False
    assert p["preemptionDelay"] == "1h0m0s" and p["quotaPreemptionDelay"] == "1m30s"
    assert p["template"] == {"maxApplications": 2, "properties": {"a": "b"}}
    assert p["sortingPolicy"] == "fair"  # parents always sort fair
    leaf = tree.dao("root.p.leaf")
    assert "template" not in leaf
    # fences and the offset are not inherited (filterParentProperty); the other properties are
    assert leaf["isPriorityFence"] is False and "priorityOffset" not in leaf
    assert leaf["isPreemptionFence"] is False and leaf["preemptionEnabled"] is True
    assert leaf["sortingPolicy"] == "fair" and leaf["prioritySorting"] is False
    assert leaf["properties"]["priority.offset"] == "0"
    assert leaf["properties"]["preemption.policy"] == "default"


def test_dao_dynamic_queue() -> None:
    tree = template_tree()
    tree.ensure_dynamic_queue("root.tenants.x")
    dao = tree.dao("root.tenants.x")
    assert dao["isManaged"] is False and dao["maxRunningApps"] == 3
    assert dao["maxResource"] == {"vcore": 4000} and dao["guaranteedResource"] == {"vcore": 1000}
    assert tree.dao("root.tenants", subtree=False)["template"]["maxResource"] == {"vcore": 4000}


def test_dao_and_dump_state_are_deterministic() -> None:
    def build(order: list[str]) -> QueueTree:
        tree = template_tree()
        for name in order:
            tree.ensure_dynamic_queue(f"root.plain.{name}")
        return tree
    a, b = build(["b", "a", "c"]), build(["c", "b", "a"])
    assert json.dumps(a.dao()) == json.dumps(b.dao())
    assert json.dumps(a.dump_state()) == json.dumps(b.dump_state())
    json.dumps(a.dump_state())  # JSON-able
