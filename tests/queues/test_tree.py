"""Queue quota rules M-1 … M-6, namespace tags N-1 … N-3, ACLs and config reload (seed 004, §1.13)."""

from __future__ import annotations

import json

import pytest

from quotaplane.config.identity import UserGroup
from quotaplane.errors import ConflictError, NotFoundError
from quotaplane.queues import DRAINING, QueueTree, parse_si_resource
from quotaplane.resources import Resource
from tests.queues.helpers import partition

CLUSTER = Resource({"vcore": 100_000, "memory": 1_000_000})


def seed_tree() -> QueueTree:
    """The seed's example: root.parent max 900 with child1 (no max), child2/child3 (750 each)."""
    cfg = partition({
        "submitacl": "*",
        "queues": [
            {"name": "parent", "max": {"memory": 900}, "queues": [
                {"name": "child1"},
                {"name": "child2", "max": {"memory": 750}},
                {"name": "child3", "max": {"memory": 750}},
            ]},
            {"name": "default"},
        ],
    })
    tree = QueueTree(cfg)
    tree.set_cluster_resource(CLUSTER)
    return tree


def si(**values: int) -> str:
    return json.dumps({"resources": {k: {"value": v} for k, v in values.items()}})


# ---------------------------------------------------------------------------------------------------
# structure
# ---------------------------------------------------------------------------------------------------
def test_tree_built_from_config_with_leaf_and_parent_flags() -> None:
    tree = seed_tree()
    assert tree.paths() == ["root", "root.default", "root.parent", "root.parent.child1",
                            "root.parent.child2", "root.parent.child3"]
    parent = tree.queue("root.parent")
    assert parent is not None and not parent.is_leaf and parent.managed
    child = tree.queue("ROOT.Parent.CHILD1")  # case-insensitive lookup (U10)
    assert child is not None and child.is_leaf and child.path == "root.parent.child1"
    assert tree.queue("root.nope") is None


def test_parent_flag_makes_empty_queue_a_parent() -> None:
    tree = QueueTree(partition({"queues": [{"name": "p", "parent": True}]}))
    q = tree.queue("root.p")
    assert q is not None and not q.is_leaf


def test_unknown_queue_raises_not_found() -> None:
    tree = seed_tree()
    with pytest.raises(NotFoundError):
        tree.check_allocation("root.missing", Resource({"memory": 1}))
    with pytest.raises(NotFoundError):
        tree.increase_allocated("root.missing", Resource({"memory": 1}))


# ---------------------------------------------------------------------------------------------------
# M-1 set / clear rules
# ---------------------------------------------------------------------------------------------------
def test_m1_strictly_positive_max_is_set_with_zero_types_kept() -> None:
    tree = QueueTree(partition({"queues": [{"name": "a", "max": {"vcore": 1, "nvidia.com/gpu": 0}}]}))
    q = tree.queue("root.a")
    assert q is not None and q.max is not None
    assert dict(q.max) == {"vcore": 1000, "nvidia.com/gpu": 0}
    tree.set_cluster_resource({"vcore": 10_000, "nvidia.com/gpu": 8})
    # a zero-valued type in max means "0 allowed"
    over = tree.check_allocation("root.a", Resource({"nvidia.com/gpu": 1}))
    assert [lim.code for lim in over] == ["queue.max"]


def test_m1_all_zero_max_is_ignored_and_clears_on_reload() -> None:
    tree = QueueTree(partition({"queues": [{"name": "a", "max": {"vcore": 0}}]}))
    q = tree.queue("root.a")
    assert q is not None and q.max is None  # all-zero max on an unset queue: ignored
    tree.update_config(partition({"queues": [{"name": "a", "max": {"vcore": 5}}]}))
    assert q.max == {"vcore": 5000}
    tree.update_config(partition({"queues": [{"name": "a", "max": {"vcore": 0}}]}))
    assert q.max is None  # all-zero on a set queue clears
    tree.update_config(partition({"queues": [{"name": "a", "max": {"vcore": 5},
                                              "guaranteed": {"vcore": 1}}]}))
    tree.update_config(partition({"queues": [{"name": "a"}]}))
    assert q.max is None and q.guaranteed is None  # removed from config: cleared


def test_m1_root_max_is_the_cluster_size() -> None:
    tree = seed_tree()
    assert tree.root.max == CLUSTER
    tree.set_cluster_resource(Resource({"vcore": 5}))
    assert tree.root.max == {"vcore": 5}
    # a reload does not touch the root max
    tree.update_config(partition({"submitacl": "*", "queues": [{"name": "default"}]}))
    assert tree.root.max == {"vcore": 5}


# ---------------------------------------------------------------------------------------------------
# M-2 enforcement leaf -> root
# ---------------------------------------------------------------------------------------------------
def test_m2_seed_example_parent_quota_caps_children() -> None:
    tree = seed_tree()
    # child1 has no max: limited by root.parent (900)
    assert tree.check_allocation("root.parent.child1", Resource({"memory": 900})) == []
    over = tree.check_allocation("root.parent.child1", Resource({"memory": 901}))
    assert [(lim.code, lim.queue_path) for lim in over] == [("queue.max", "root.parent")]
    assert over[0].shortfall == {"memory": 1}
    # child2 maxed out at 750, the left over 150 by child3
    tree.increase_allocated("root.parent.child2", Resource({"memory": 750}))
    assert tree.check_allocation("root.parent.child2", Resource({"memory": 1}))[0].queue_path == \
        "root.parent.child2"
    assert tree.check_allocation("root.parent.child3", Resource({"memory": 150})) == []
    over = tree.check_allocation("root.parent.child3", Resource({"memory": 151}))
    assert [lim.queue_path for lim in over] == ["root.parent"]


def test_m2_every_exceeded_queue_is_reported_leaf_to_root() -> None:
    tree = seed_tree()
    tree.set_cluster_resource(Resource({"memory": 800}))
    over = tree.check_allocation("root.parent.child2", Resource({"memory": 1000}))
    assert [(lim.code, lim.queue_path) for lim in over] == [
        ("queue.max", "root.parent.child2"),
        ("queue.max", "root.parent"),
        ("root.capacity", "root"),
    ]
    assert [lim.shortfall for lim in over] == [{"memory": 250}, {"memory": 100}, {"memory": 200}]
    assert "puts queue 'root.parent.child2' over maximum allocation" in over[0].message


def test_m2_types_missing_from_max_are_unlimited_but_root_is_strict() -> None:
    tree = seed_tree()
    # gpu is not in any queue max: unlimited below root, but no node provides it: root refuses
    over = tree.check_allocation("root.parent.child2", Resource({"nvidia.com/gpu": 1}))
    assert [(lim.code, lim.queue_path) for lim in over] == [("root.capacity", "root")]
    assert over[0].shortfall == {"nvidia.com/gpu": 1}
    assert tree.check_allocation("root.parent.child2", Resource({"vcore": 100_000})) == []


def test_m2_root_without_nodes_admits_nothing() -> None:
    tree = QueueTree(partition({"queues": [{"name": "a"}]}))
    over = tree.check_allocation("root.a", Resource({"vcore": 1}))
    assert [lim.code for lim in over] == ["root.capacity"]
    assert tree.check_allocation("root.a", Resource()) == []


def test_m2_only_requested_types_are_checked() -> None:
    tree = seed_tree()
    tree.increase_allocated("root.parent.child1", Resource({"memory": 900}))
    # memory is full, but a vcore-only request does not look at memory (AddOnlyExisting)
    assert tree.check_allocation("root.parent.child1", Resource({"vcore": 10})) == []
    assert tree.check_allocation("root.parent.child1", Resource({"vcore": 10, "memory": 1}))


def test_m2_check_changes_nothing_and_increase_decrease_roll_up() -> None:
    tree = seed_tree()
    before = tree.dump_state()
    tree.check_allocation("root.parent.child1", Resource({"memory": 5000}))
    assert tree.dump_state() == before
    tree.increase_allocated("root.parent.child1", Resource({"memory": 10, "vcore": 1}))
    tree.increase_allocated("root.parent.child2", Resource({"memory": 5}))
    for path, expected in [("root", {"memory": 15, "vcore": 1}), ("root.parent", {"memory": 15, "vcore": 1}),
                           ("root.parent.child1", {"memory": 10, "vcore": 1}),
                           ("root.parent.child2", {"memory": 5}), ("root.default", {})]:
        q = tree.queue(path)
        assert q is not None and q.allocated == expected, path
    tree.decrease_allocated("root.parent.child1", Resource({"memory": 10, "vcore": 1}))
    q = tree.queue("root.parent")
    assert q is not None and dict(q.allocated) == {"memory": 5}  # zero names pruned


def test_m2_decrease_below_zero_is_refused_without_change() -> None:
    tree = seed_tree()
    tree.increase_allocated("root.parent.child1", Resource({"memory": 10}))
    before = tree.dump_state()
    with pytest.raises(ValueError, match="larger than the allocation"):
        tree.decrease_allocated("root.parent.child1", Resource({"memory": 11}))
    assert tree.dump_state() == before


def test_q3_lowering_max_below_usage_blocks_new_allocations_only() -> None:
    tree = seed_tree()
    tree.increase_allocated("root.parent.child2", Resource({"memory": 700}))
    tree.update_config(partition({"submitacl": "*", "queues": [
        {"name": "parent", "max": {"memory": 900}, "queues": [
            {"name": "child1"}, {"name": "child2", "max": {"memory": 500}}, {"name": "child3"}]},
        {"name": "default"}]}))
    q = tree.queue("root.parent.child2")
    assert q is not None and q.allocated == {"memory": 700}  # nothing evicted
    over = tree.check_allocation("root.parent.child2", Resource({"memory": 1}))
    assert [lim.queue_path for lim in over] == ["root.parent.child2"]
    assert over[0].shortfall == {"memory": 201}
    tree.decrease_allocated("root.parent.child2", Resource({"memory": 300}))
    assert tree.check_allocation("root.parent.child2", Resource({"memory": 100})) == []


# ---------------------------------------------------------------------------------------------------
# M-3 headroom
# ---------------------------------------------------------------------------------------------------
def test_m3_headroom_min_of_path() -> None:
    tree = seed_tree()
    tree.set_cluster_resource(Resource({"memory": 2000, "vcore": 10}))
    tree.increase_allocated("root.parent.child2", Resource({"memory": 600, "vcore": 2}))
    assert tree.headroom("root.parent.child2") == {"memory": 150, "vcore": 8}
    assert tree.headroom("root.parent.child3") == {"memory": 300, "vcore": 8}
    assert tree.headroom("root.parent.child1") == {"memory": 300, "vcore": 8}
    assert tree.headroom("root.default") == {"memory": 1400, "vcore": 8}
    # max headroom ignores the cluster size; nil when no queue sets a max
    assert tree.max_headroom("root.parent.child2") == {"memory": 150}
    assert tree.max_headroom("root.default") is None
    assert tree.effective_max("root.parent.child2") == {"memory": 750, "vcore": 10}
    assert tree.max_queue_set("root.parent.child2") == {"memory": 750}
    assert tree.max_queue_set("root.default") is None


def test_m3_headroom_merges_types_from_levels() -> None:
    tree = QueueTree(partition({"queues": [{"name": "a", "max": {"vcore": 4}, "queues": [
        {"name": "b", "max": {"memory": 100}}]}]}))
    assert tree.headroom("root.a.b") == {"vcore": 4000, "memory": 100}  # no nodes: root has no max
    tree.increase_allocated("root.a.b", Resource({"vcore": 5000}))
    assert tree.headroom("root.a.b") == {"vcore": -1000, "memory": 100}


# ---------------------------------------------------------------------------------------------------
# M-4 maxapplications
# ---------------------------------------------------------------------------------------------------
def test_m4_maxapplications_counts_running_apps_up_the_tree() -> None:
    tree = QueueTree(partition({"queues": [{"name": "p", "maxapplications": 2, "queues": [
        {"name": "a", "maxapplications": 2}, {"name": "b", "maxapplications": 1}]}]}))
    assert tree.check_run_app("root.p.a", "app1") == []
    tree.app_started("root.p.a", "app1")
    tree.app_started("root.p.b", "app2")
    limits = tree.check_run_app("root.p.b", "app3")
    assert [(lim.code, lim.queue_path) for lim in limits] == [
        ("queue.maxapplications", "root.p.b"), ("queue.maxapplications", "root.p")]
    assert limits[1].max_applications == 2 and limits[1].running_applications == 2
    # a running application always fits again
    assert tree.check_run_app("root.p.a", "app1") == []
    tree.app_stopped("root.p.b", "app2")
    assert tree.check_run_app("root.p.a", "app3") == []
    p = tree.queue("root.p")
    assert p is not None and list(p.running_apps) == ["app1"]


def test_m4_zero_is_unlimited() -> None:
    tree = QueueTree(partition({"queues": [{"name": "a"}]}))
    for i in range(50):
        tree.app_started("root.a", f"app{i}")
    assert tree.check_run_app("root.a", "another") == []


# ---------------------------------------------------------------------------------------------------
# M-6 dynamic queues and child templates
# ---------------------------------------------------------------------------------------------------
def template_tree() -> QueueTree:
    return QueueTree(partition({"submitacl": "*", "queues": [
        {"name": "tenants", "parent": True, "childtemplate": {
            "maxapplications": 3, "max": {"vcore": 4}, "guaranteed": {"vcore": 1},
            "properties": {"application.sort.policy": "fair"}},
         "queues": [{"name": "deep", "parent": True}]},
        {"name": "zero", "parent": True, "childtemplate": {"max": {"vcore": 0}, "maxapplications": 1}},
        {"name": "plain", "parent": True},
        {"name": "leaf"},
    ]}))


def test_m6_dynamic_leaf_takes_the_parent_template() -> None:
    tree = template_tree()
    q = tree.ensure_dynamic_queue("root.tenants.Team-A")
    assert q.path == "root.tenants.team-a" and q.is_leaf and not q.managed
    assert q.max == {"vcore": 4000} and q.guaranteed == {"vcore": 1000} and q.max_applications == 3
    assert q.properties["application.sort.policy"] == "fair"
    assert tree.ensure_dynamic_queue("root.tenants.team-a") is q  # idempotent


def test_m6_template_inherited_from_nearest_ancestor() -> None:
    tree = template_tree()
    q = tree.ensure_dynamic_queue("root.tenants.deep.x")
    assert q.max == {"vcore": 4000}
    # a new dynamic parent in between: the template still comes from root.tenants
    q2 = tree.ensure_dynamic_queue("root.tenants.newparent.y")
    parent = tree.queue("root.tenants.newparent")
    assert parent is not None and not parent.is_leaf and not parent.managed and parent.max is None
    assert q2.max == {"vcore": 4000} and q2.max_applications == 3


def test_m6_zero_template_max_ignored_and_no_template_means_no_limits() -> None:
    tree = template_tree()
    q = tree.ensure_dynamic_queue("root.zero.z")
    assert q.max is None and q.max_applications == 1
    q = tree.ensure_dynamic_queue("root.plain.p")
    assert q.max is None and q.guaranteed is None and q.max_applications == 0


def test_m6_dynamic_queue_errors() -> None:
    tree = template_tree()
    with pytest.raises(ConflictError):
        tree.ensure_dynamic_queue("root.leaf.below")  # under a leaf
    with pytest.raises(ConflictError):
        tree.ensure_dynamic_queue("root.tenants")  # a parent is not a leaf
    with pytest.raises(ValueError):
        tree.ensure_dynamic_queue("tenants.x")  # not fully qualified
    with pytest.raises(ValueError):
        tree.ensure_dynamic_queue("root.tenants.bad name")
    assert tree.queue("root.leaf.below") is None


def test_dynamic_queue_removed_when_empty() -> None:
    tree = template_tree()
    tree.ensure_dynamic_queue("root.plain.dyn.leaf")
    tree.add_application("root.plain.dyn.leaf", "app1")
    tree.remove_if_empty("root.plain.dyn.leaf")
    assert tree.queue("root.plain.dyn.leaf") is not None  # still has an application
    tree.app_started("root.plain.dyn.leaf", "app1")
    tree.remove_application("root.plain.dyn.leaf", "app1")
    # leaf and its empty dynamic parent are gone, the managed parent stays
    assert tree.queue("root.plain.dyn.leaf") is None and tree.queue("root.plain.dyn") is None
    assert tree.queue("root.plain") is not None
    assert not tree.root.running_apps


def test_managed_queue_never_removed_by_remove_if_empty() -> None:
    tree = template_tree()
    tree.remove_if_empty("root.leaf")
    assert tree.queue("root.leaf") is not None


# ---------------------------------------------------------------------------------------------------
# N-1 … N-3 namespace tags
# ---------------------------------------------------------------------------------------------------
def test_n2_tags_applied_to_dynamic_leaf() -> None:
    tree = template_tree()
    tree.ensure_dynamic_queue("root.plain.ns")
    tree.apply_namespace_tags("root.plain.ns", {
        "namespace.resourcequota": si(vcore=5000, memory=64_000_000),
        "namespace.resourceguaranteed": si(vcore=1000),
        "namespace.resourcemaxapps": "7",
    })
    q = tree.queue("root.plain.ns")
    assert q is not None
    assert q.max == {"vcore": 5000, "memory": 64_000_000}
    assert q.guaranteed == {"vcore": 1000}
    assert q.max_applications == 7


def test_n2_guaranteed_only_clears_template_max() -> None:
    tree = template_tree()
    tree.ensure_dynamic_queue("root.tenants.ns")
    tree.apply_namespace_tags("root.tenants.ns", {"namespace.resourceguaranteed": si(vcore=500)})
    q = tree.queue("root.tenants.ns")
    assert q is not None and q.max is None and q.guaranteed == {"vcore": 500}
    assert q.max_applications == 3  # maxApps tag absent: template value kept


def test_n1_bad_or_zero_tags_are_ignored() -> None:
    tree = template_tree()
    tree.ensure_dynamic_queue("root.tenants.ns")
    tree.apply_namespace_tags("root.tenants.ns", {
        "namespace.resourcequota": "expecting JSON object",
        "namespace.resourceguaranteed": si(vcore=0),
        "namespace.resourcemaxapps": "-5",
    })
    q = tree.queue("root.tenants.ns")
    assert q is not None and q.max == {"vcore": 4000} and q.guaranteed == {"vcore": 1000}
    assert q.max_applications == 3
    tree.apply_namespace_tags("root.tenants.ns", {"namespace.resourcemaxapps": "error"})
    assert q.max_applications == 3


def test_n3_managed_queues_ignore_tags() -> None:
    tree = QueueTree(partition({"queues": [{"name": "limited", "max": {"vcore": 1},
                                            "maxapplications": 2}]}))
    tree.apply_namespace_tags("root.limited", {"namespace.resourcequota": si(vcore=9000),
                                               "namespace.resourcemaxapps": "9"})
    q = tree.queue("root.limited")
    assert q is not None and q.max == {"vcore": 1000} and q.max_applications == 2


def test_parse_si_resource_formats() -> None:
    assert parse_si_resource(si(vcore=5000, memory=64_000_000)) == {"vcore": 5000, "memory": 64_000_000}
    assert parse_si_resource('{"resources":{"vcore":{}}}') == {"vcore": 0}
    assert parse_si_resource('{"resources":{"vcore":{"value":"12"}}}') == {"vcore": 12}
    for bad in (None, "", "[]", "{}", '{"resources":[]}', '{"resources":{"vcore":5}}',
                '{"resources":{"vcore":{"value":1.5}}}', "not json"):
        assert parse_si_resource(bad) is None, bad


# ---------------------------------------------------------------------------------------------------
# ACLs
# ---------------------------------------------------------------------------------------------------
def acl_tree() -> QueueTree:
    return QueueTree(partition({"queues": [
        {"name": "open", "submitacl": "*"},
        {"name": "team", "submitacl": "alice,bob devs", "adminacl": "carol", "queues": [
            {"name": "x"}, {"name": "y", "submitacl": " ops"}]},
        {"name": "closed", "submitacl": ""},
        {"name": "groupstar", "submitacl": " *"},
    ]}))


def test_acl_wildcard_users_groups_and_nobody() -> None:
    tree = acl_tree()
    alice, dev, eve = UserGroup("alice"), UserGroup("zed", ["devs"]), UserGroup("eve", ["x"])
    assert tree.check_submit_acl("root.open", eve)
    assert tree.check_submit_acl("root.team", alice)
    assert tree.check_submit_acl("root.team", dev)
    assert not tree.check_submit_acl("root.team", eve)
    assert not tree.check_submit_acl("root.closed", alice)  # "" allows nobody
    assert not tree.check_submit_acl("root", alice)  # root without an ACL: nobody
    assert tree.check_submit_acl("root.groupstar", eve)  # wildcard group list


def test_acl_walks_up_to_ancestors() -> None:
    tree = acl_tree()
    # root.team.x has no ACL of its own: root.team allows alice
    assert tree.check_submit_acl("root.team.x", UserGroup("alice"))
    assert not tree.check_submit_acl("root.team.x", UserGroup("eve"))
    # groups-only ACL on y, plus the parent's users
    assert tree.check_submit_acl("root.team.y", UserGroup("olga", ["ops"]))
    assert tree.check_submit_acl("root.team.y", UserGroup("bob"))
    # a queue that does not exist yet: checked from its deepest existing ancestor
    assert tree.check_submit_acl("root.team.new.leaf", UserGroup("alice"))
    assert not tree.check_submit_acl("root.closed.new", UserGroup("alice"))


def test_admin_acl_implies_submit_and_walks_up() -> None:
    tree = acl_tree()
    carol = UserGroup("carol")
    assert tree.check_submit_acl("root.team.x", carol)  # admin implies submit
    assert tree.check_admin_acl("root.team.x", carol)
    assert not tree.check_admin_acl("root.team.x", UserGroup("alice"))
    assert not tree.check_admin_acl("root.open", carol)


# ---------------------------------------------------------------------------------------------------
# config reload: draining
# ---------------------------------------------------------------------------------------------------
def test_reload_removed_queue_with_usage_drains_then_goes() -> None:
    tree = seed_tree()
    tree.increase_allocated("root.parent.child3", Resource({"memory": 10}))
    tree.app_started("root.parent.child3", "app1")
    tree.update_config(partition({"submitacl": "*", "queues": [
        {"name": "parent", "max": {"memory": 900}, "queues": [{"name": "child1"}]},
        {"name": "default"}, {"name": "new"}]}))
    assert tree.queue("root.parent.child2") is None  # empty: removed at once
    q = tree.queue("root.parent.child3")
    assert q is not None and q.status == DRAINING and tree.is_draining("root.parent.child3")
    assert q.allocated == {"memory": 10} and tree.root.allocated == {"memory": 10}
    assert tree.queue("root.new") is not None
    tree.decrease_allocated("root.parent.child3", Resource({"memory": 10}))
    tree.remove_if_empty("root.parent.child3")
    assert q.status == DRAINING and tree.queue("root.parent.child3") is not None  # app still running
    tree.app_stopped("root.parent.child3", "app1")
    tree.remove_if_empty("root.parent.child3")
    assert tree.queue("root.parent.child3") is None


def test_reload_brings_a_draining_queue_back() -> None:
    tree = seed_tree()
    tree.add_application("root.default", "app1")
    tree.update_config(partition({"submitacl": "*", "queues": []}))
    assert tree.is_draining("root.default")
    tree.update_config(partition({"submitacl": "*", "queues": [{"name": "default"}]}))
    q = tree.queue("root.default")
    assert q is not None and q.status == "Active" and "app1" in q.applications


def test_reload_draining_parent_drains_dynamic_children() -> None:
    tree = template_tree()
    tree.ensure_dynamic_queue("root.plain.dyn")
    tree.add_application("root.plain.dyn", "a")
    tree.update_config(partition({"submitacl": "*", "queues": [{"name": "leaf"}]}))
    assert tree.is_draining("root.plain") and tree.is_draining("root.plain.dyn")
    assert tree.queue("root.tenants") is None
    tree.remove_application("root.plain.dyn", "a")
    assert tree.queue("root.plain.dyn") is None and tree.queue("root.plain") is None


def test_reload_updates_acls_maxapps_and_properties() -> None:
    tree = seed_tree()
    tree.update_config(partition({"submitacl": "", "properties": {"application.sort.policy": "fair"},
                                  "queues": [{"name": "default", "maxapplications": 4, "submitacl": "bob",
                                              "properties": {"priority.offset": "3"}}]}))
    q = tree.queue("root.default")
    assert q is not None and q.max_applications == 4
    assert tree.check_submit_acl("root.default", UserGroup("bob"))
    assert not tree.check_submit_acl("root.default", UserGroup("alice"))
    assert q.properties == {"application.sort.policy": "fair", "priority.offset": "3"}  # own wins


def test_invalid_queue_path_appendix_b() -> None:
    from quotaplane.queues import invalid_queue_path

    assert invalid_queue_path("root.a-b_c:d#e@f/g") is None
    assert invalid_queue_path("root." + "x" * 64) is None
    for bad in ("root." + "x" * 65, "root..a", "root.a b", "root.ä", ""):
        message = invalid_queue_path(bad)
        assert message is not None and message.startswith("invalid queue name"), bad
    assert invalid_queue_path("root.a\n") is not None  # no trailing newline sneaks through "$"


def test_m5_queues_over_max_only_with_quota_preemption_delay() -> None:
    cfg = {"submitacl": "*", "queues": [
        {"name": "p", "properties": {"quota.preemption.delay": "1m"}, "queues": [
            {"name": "a", "max": {"vcore": 4}}, {"name": "b", "max": {"vcore": 4},
                                                  "properties": {"quota.preemption.delay": "0"}}]},
        {"name": "c", "max": {"vcore": 4}}]}
    tree = QueueTree(partition(cfg))
    tree.set_cluster_resource({"vcore": 100_000})
    for leaf in ("root.p.a", "root.p.b", "root.c"):
        tree.increase_allocated(leaf, Resource({"vcore": 3000}))
    assert tree.queues_over_max() == []
    lowered = {"submitacl": "*", "queues": [
        {"name": "p", "properties": {"quota.preemption.delay": "1m"}, "queues": [
            {"name": "a", "max": {"vcore": 1}}, {"name": "b", "max": {"vcore": 1},
                                                  "properties": {"quota.preemption.delay": "0"}}]},
        {"name": "c", "max": {"vcore": 1}}]}
    tree.update_config(partition(lowered))
    # a inherits the delay from p; b switched it off; c never had it (Q3: nothing evicted)
    assert tree.queues_over_max() == [("root.p.a", Resource({"vcore": 2000}), 60.0)]
    assert tree.quota_preemption_delay("root.p.a") == 60.0 and tree.quota_preemption_delay("root.c") == 0.0


def test_reload_turns_a_dynamic_queue_into_a_managed_one_keeping_usage() -> None:
    tree = template_tree()
    tree.set_cluster_resource({"vcore": 100_000})
    tree.ensure_dynamic_queue("root.tenants.team")
    tree.increase_allocated("root.tenants.team", Resource({"vcore": 3000}))
    tree.app_started("root.tenants.team", "app1")
    tree.update_config(partition({"submitacl": "*", "queues": [
        {"name": "tenants", "parent": True, "queues": [{"name": "team", "max": {"vcore": 2}}]}]}))
    q = tree.queue("root.tenants.team")
    assert q is not None and q.managed and q.status == "Active"
    assert q.max == {"vcore": 2000} and q.guaranteed is None and q.max_applications == 0
    assert q.allocated == {"vcore": 3000} and list(q.running_apps) == ["app1"]
    assert tree.root.allocated == {"vcore": 3000}
    # Q3: over its new max, new allocations are refused
    assert [lim.queue_path for lim in tree.check_allocation("root.tenants.team", {"vcore": 1})] == [
        "root.tenants.team"]


def test_unmanaged_queue_under_a_kept_parent_stays_active_on_reload() -> None:
    tree = template_tree()
    tree.ensure_dynamic_queue("root.plain.dyn")
    tree.update_config(partition({"submitacl": "*", "queues": [{"name": "plain", "parent": True}]}))
    q = tree.queue("root.plain.dyn")
    assert q is not None and q.status == "Active" and not q.managed
