"""Placement rules P-1 … P-8 (seed 004, reference §1.14), run against a real QueueTree."""

from __future__ import annotations

import pytest

from quotaplane.config.identity import UserGroup
from quotaplane.config.model import FilterConfig, PlacementRuleConfig
from quotaplane.errors import RejectedError
from quotaplane.placement import Filter, PlacementError, PlacementManager, QueueView, replace_dot
from quotaplane.queues import QueueTree
from tests.queues.helpers import partition

ALICE = UserGroup("alice", ["devs", "ml.team"])
BOB = UserGroup("bob")


def tag(value: str, *, create: bool = False, parent: PlacementRuleConfig | None = None,
        filter_: FilterConfig | None = None) -> PlacementRuleConfig:
    return PlacementRuleConfig(name="tag", value=value, create=create, parent=parent, filter=filter_)


NS_RULE = tag("namespace", create=True)
PARENT_RULE = tag("namespace", create=True, parent=tag("namespace.parentqueue"))


def seed_queues(*, with_default: bool = True) -> QueueTree:
    queues = [
        {"name": "production", "parent": True},
        {"name": "development", "parent": True},
        {"name": "existing"},
        {"name": "restricted", "submitacl": "bob"},
        {"name": "restrictedparent", "parent": True, "submitacl": "bob"},
        {"name": "sandbox", "queues": [{"name": "inner"}]},
    ]
    if with_default:
        queues.append({"name": "default"})
    return QueueTree(partition({"submitacl": "*", "queues": queues}))


def acl_queues() -> QueueTree:
    # root allows nobody: only the queue ACLs grant access
    return QueueTree(partition({"queues": [
        {"name": "default", "submitacl": "*"},
        {"name": "restricted", "submitacl": "bob"},
        {"name": "restrictedparent", "parent": True, "submitacl": "bob"},
        {"name": "existing", "submitacl": "*"},
    ]}))


def test_queue_tree_is_a_queue_view() -> None:
    assert isinstance(seed_queues(), QueueView)


# P-1 -------------------------------------------------------------------------------------------------
def test_p1_tag_rule_needs_a_value() -> None:
    with pytest.raises(ValueError, match="tag name"):
        PlacementManager([tag("")])
    with pytest.raises(ValueError, match="unknown placement rule"):
        PlacementManager([PlacementRuleConfig(name="nosuchrule")])


def test_p1_tag_key_lookup_is_case_insensitive() -> None:
    pm = PlacementManager([tag("Namespace", create=True)])
    assert pm.place("app", ALICE, {"NAMESPACE": "Team1"}, seed_queues()) == "root.team1"


# P-2 -------------------------------------------------------------------------------------------------
def test_p2_missing_or_empty_tag_means_next_rule() -> None:
    fixed = PlacementRuleConfig(name="fixed", value="existing")
    pm = PlacementManager([tag("namespace", create=True), fixed])
    assert pm.place("app", ALICE, {}, seed_queues()) == "root.existing"
    assert pm.place("app", ALICE, {"namespace": ""}, seed_queues()) == "root.existing"


def test_p2_deny_filter_means_no_match() -> None:
    deny_alice = FilterConfig(type="deny", users=("alice",))
    pm = PlacementManager([tag("namespace", create=True, filter_=deny_alice)])
    assert pm.place("app", ALICE, {"namespace": "ns"}, seed_queues()) == "root.default"
    assert pm.place("app", BOB, {"namespace": "ns"}, seed_queues()) == "root.ns"


# P-3 -------------------------------------------------------------------------------------------------
def test_p3_fully_qualified_tag_value_skips_the_parent_rule() -> None:
    pm = PlacementManager([PARENT_RULE])
    tags = {"namespace": "root.development.ns1", "namespace.parentqueue": "root.production"}
    assert pm.place("app", ALICE, tags, seed_queues()) == "root.development.ns1"


def test_p3_fully_qualified_value_with_an_invalid_part_rejects() -> None:
    pm = PlacementManager([NS_RULE])
    with pytest.raises(RejectedError, match="invalid queue name"):
        pm.place("app", ALICE, {"namespace": "root.bad name"}, seed_queues())


# P-4 -------------------------------------------------------------------------------------------------
def test_p4_dots_become_dot_replacement() -> None:
    assert replace_dot("a.b.c") == "a_dot_b_dot_c"
    pm = PlacementManager([NS_RULE])
    assert pm.place("app", ALICE, {"namespace": "team.one"}, seed_queues()) == "root.team_dot_one"


def test_p4_invalid_name_after_replacement_rejects() -> None:
    pm = PlacementManager([NS_RULE, PlacementRuleConfig(name="fixed", value="existing")])
    with pytest.raises(PlacementError):
        pm.place("app", ALICE, {"namespace": "bad name"}, seed_queues())


def test_p4_parent_rule_leaf_is_an_error_and_no_match_is_no_match() -> None:
    pm = PlacementManager([PARENT_RULE])
    with pytest.raises(RejectedError, match=r"parent rule returned a leaf queue: root\.existing"):
        pm.place("app", ALICE, {"namespace": "ns", "namespace.parentqueue": "existing"}, seed_queues())
    # parent rule without its tag: no match, falls back to root.default
    assert pm.place("app", ALICE, {"namespace": "ns"}, seed_queues()) == "root.default"


# P-5 -------------------------------------------------------------------------------------------------
def test_p5_create_false_needs_an_existing_queue() -> None:
    pm = PlacementManager([tag("namespace", create=False)])
    assert pm.place("app", ALICE, {"namespace": "existing"}, seed_queues()) == "root.existing"
    assert pm.place("app", ALICE, {"namespace": "newone"}, seed_queues()) == "root.default"
    with pytest.raises(RejectedError, match="no placement rule matched"):
        pm.place("app", ALICE, {"namespace": "newone"}, seed_queues(with_default=False))


# P-6 -------------------------------------------------------------------------------------------------
def test_p6_existing_queue_must_be_a_leaf() -> None:
    pm = PlacementManager([NS_RULE])
    # root.production is a parent: next rule, then root.default
    assert pm.place("app", ALICE, {"namespace": "production"}, seed_queues()) == "root.default"


def test_p6_submit_acl_of_existing_queue() -> None:
    pm = PlacementManager([NS_RULE])
    queues = acl_queues()
    assert pm.place("app", BOB, {"namespace": "restricted"}, queues) == "root.restricted"
    assert pm.place("app", ALICE, {"namespace": "restricted"}, queues) == "root.default"


def test_p6_new_queue_checks_the_first_existing_ancestor() -> None:
    pm = PlacementManager([tag("namespace", create=True, parent=tag("parent"))])
    queues = acl_queues()
    tags = {"namespace": "x", "parent": "restrictedparent"}
    assert pm.place("app", BOB, tags, queues) == "root.restrictedparent.x"
    assert pm.place("app", ALICE, tags, queues) == "root.default"
    # root allows nobody in this tree: a new queue directly under root is refused
    assert pm.place("app", BOB, {"namespace": "brandnew"}, queues) == "root.default"


def test_p6_new_queue_below_a_leaf_is_not_usable() -> None:
    pm = PlacementManager([PlacementRuleConfig(name="fixed", value="existing.below", create=True)])
    assert pm.place("app", ALICE, {}, seed_queues()) == "root.default"


def test_p6_draining_queue_is_skipped() -> None:
    queues = seed_queues()
    queues.add_application("root.existing", "other")
    queues.update_config(partition({"submitacl": "*", "queues": [{"name": "default"}]}))
    assert queues.is_draining("root.existing")
    pm = PlacementManager([tag("namespace")])
    assert pm.place("app", ALICE, {"namespace": "existing"}, queues) == "root.default"


def test_p6_default_fallback_needs_access() -> None:
    queues = QueueTree(partition({"queues": [{"name": "default", "submitacl": "bob"}]}))
    pm = PlacementManager([NS_RULE])
    assert pm.place("app", BOB, {}, queues) == "root.default"
    with pytest.raises(RejectedError, match="application rejected: no placement rule matched"):
        pm.place("app", ALICE, {}, queues)


def test_p6_first_matching_rule_wins() -> None:
    fixed = PlacementRuleConfig(name="fixed", value="existing")
    pm = PlacementManager([PlacementRuleConfig(name="user"), fixed])
    queues = QueueTree(partition({"submitacl": "*", "queues": [{"name": "alice"}, {"name": "existing"}]}))
    assert pm.place("app", ALICE, {}, queues) == "root.alice"
    assert pm.place("app", BOB, {}, queues) == "root.existing"


# P-7 -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("annotation", ["root.production", "production", "ROOT.Production"])
def test_p7_namespace_grouped_under_parent_queue(annotation: str) -> None:
    pm = PlacementManager([PARENT_RULE])
    tags = {"namespace": "finance", "namespace.parentqueue": annotation}
    assert pm.place("app", ALICE, tags, seed_queues()) == "root.production.finance"


def test_p7_parent_rule_without_create_needs_an_existing_parent() -> None:
    pm = PlacementManager([PARENT_RULE])
    tags = {"namespace": "finance", "namespace.parentqueue": "root.marketing"}
    assert pm.place("app", ALICE, tags, seed_queues()) == "root.default"
    # with create on the parent rule, the parent may be created too
    pm2 = PlacementManager([tag("namespace", create=True, parent=tag("namespace.parentqueue", create=True))])
    assert pm2.place("app", ALICE, tags, seed_queues()) == "root.marketing.finance"


# P-8 -------------------------------------------------------------------------------------------------
def test_p8_default_namespace_rule_maps_namespace_to_queue() -> None:
    pm = PlacementManager([NS_RULE])
    assert pm.place("app", ALICE, {"namespace": "development-2"}, seed_queues()) == "root.development-2"


# other rules -------------------------------------------------------------------------------------------
def test_provided_rule_and_no_rules_configured() -> None:
    queues = seed_queues()
    for pm in (PlacementManager(), PlacementManager([PlacementRuleConfig(name="provided")])):
        assert pm.place("app", ALICE, {}, queues, "root.existing") == "root.existing"
        assert pm.place("app", ALICE, {}, queues, "existing") == "root.existing"
        assert pm.place("app", ALICE, {}, queues, "sandbox.inner") == "root.sandbox.inner"
        assert pm.place("app", ALICE, {}, queues, "root.missing") == "root.default"
        assert pm.place("app", ALICE, {}, queues, None) == "root.default"
        assert pm.place("app", ALICE, {}, queues, "production") == "root.default"  # a parent
    with pytest.raises(RejectedError):
        PlacementManager().place("app", ALICE, {}, seed_queues(with_default=False), "root.missing")


def test_provided_rule_with_create_and_parent() -> None:
    fixed = PlacementRuleConfig(name="fixed", value="development")
    pm = PlacementManager([PlacementRuleConfig(name="provided", create=True, parent=fixed)])
    assert pm.place("app", ALICE, {}, seed_queues(), "mine") == "root.development.mine"
    assert pm.place("app", ALICE, {}, seed_queues(), "root.existing") == "root.existing"


def test_user_rule_replaces_dots() -> None:
    pm = PlacementManager([PlacementRuleConfig(name="user", create=True)])
    assert pm.place("app", UserGroup("john.doe"), {}, seed_queues()) == "root.john_dot_doe"


def test_group_rules() -> None:
    queues = QueueTree(partition({"submitacl": "*",
                                  "queues": [{"name": "ml_dot_team"}, {"name": "default"}]}))
    pm = PlacementManager([PlacementRuleConfig(name="group", create=True)])
    assert pm.place("app", ALICE, {}, queues) == "root.devs"  # primary group
    assert pm.place("app", BOB, {}, queues) == "root.default"  # no group: no match
    pm2 = PlacementManager([PlacementRuleConfig(name="secondarygroup")])
    assert pm2.place("app", ALICE, {}, queues) == "root.ml_dot_team"


def test_fixed_rule() -> None:
    pm = PlacementManager([PlacementRuleConfig(name="fixed", value="root.sandbox.inner")])
    assert pm.place("app", ALICE, {}, seed_queues()) == "root.sandbox.inner"
    with pytest.raises(ValueError):
        PlacementManager([PlacementRuleConfig(name="fixed")])


def test_filters_by_name_group_and_regexp() -> None:
    allow_devs = Filter(FilterConfig(type="allow", groups=("devs",)))
    assert allow_devs.allow_user(ALICE) and not allow_devs.allow_user(BOB)
    regexp = Filter(FilterConfig(type="allow", users=("^a.*",)))
    assert regexp.allow_user(ALICE) and not regexp.allow_user(BOB)
    deny = Filter(FilterConfig(type="deny", users=("bob",)))
    assert deny.allow_user(ALICE) and not deny.allow_user(BOB)
    assert Filter(None).allow_user(BOB) and Filter(FilterConfig()).allow_user(BOB)
    with pytest.raises(ValueError):
        Filter(FilterConfig(users=("a(",)))


def test_update_rules_is_all_or_nothing() -> None:
    pm = PlacementManager([NS_RULE])
    with pytest.raises(ValueError):
        pm.update_rules([PlacementRuleConfig(name="user"), tag("")])
    assert [r.name for r in pm.rules] == ["tag"]
    pm.update_rules([PlacementRuleConfig(name="user", create=True)])
    assert pm.place("app", BOB, {}, seed_queues()) == "root.bob"
