"""Group selection and group tracking (seed 001 "Group limitations"; G-1 … G-7; decisions U4, U5, U7)."""

from __future__ import annotations

from quotaplane.ugm import LimitTable

from .helpers import R, lim, manager, partition, ug

BIG = {"vcore": 10**9}


# -- G-1: at most one group per application ------------------------------------------------------------------
def test_g1_usage_is_tracked_against_one_group_only() -> None:
    m = manager({"root": [lim(groups=["dev", "test"], res=BIG)]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("joe", "test", "dev"))
    assert m.get_group_resources("dev") == {"vcore": 1}
    assert m.get_group_resources("test") is None


def test_g1_apps_of_one_user_may_use_different_groups() -> None:
    m = manager({"root.a": [lim(groups=["dev"], res=BIG)], "root.b": [lim(groups=["test"], res=BIG)]})
    user = ug("joe", "dev", "test")
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), user)
    m.increase_tracked_resource("root.b", "app-2", R(vcore=2), user)
    assert m.app_group("app-1", user) == "dev"
    assert m.app_group("app-2", user) == "test"
    assert m.get_group_resources("dev") == {"vcore": 1}
    assert m.get_group_resources("test") == {"vcore": 2}


# -- G-3: which group ------------------------------------------------------------------------------------
def test_g3_user_without_groups_is_not_group_tracked_even_with_a_wildcard() -> None:
    m = manager({"root": [lim(groups=["dev", "*"], res={"vcore": 1})]})
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=5), ug("nogroups"))
    assert m.groups_usage() == []
    assert m.headroom("root.a", "app-2", ug("nogroups")) is None


def test_g3_config_order_decides_not_the_users_group_order() -> None:
    m = manager({"root": [lim(groups=["test"], res=BIG), lim(groups=["dev"], res=BIG)]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("joe", "dev", "test"))
    m.increase_tracked_resource("root.a", "app-2", R(vcore=1), ug("ann", "test", "dev"))
    assert m.app_group("app-1", ug("joe", "dev", "test")) == "test"
    assert m.app_group("app-2", ug("ann", "test", "dev")) == "test"


def test_g3_leaf_level_is_searched_before_the_root() -> None:
    m = manager({"root": [lim(groups=["dev"], res=BIG)], "root.a.b": [lim(groups=["test"], res=BIG)]})
    m.increase_tracked_resource("root.a.b", "app-1", R(vcore=1), ug("joe", "dev", "test"))
    assert m.app_group("app-1", ug("joe", "dev", "test")) == "test"
    # a queue outside root.a.b only sees the root's dev limit
    m.increase_tracked_resource("root.c", "app-2", R(vcore=1), ug("joe", "dev", "test"))
    assert m.app_group("app-2", ug("joe", "dev", "test")) == "dev"


def test_g3_wildcard_of_a_level_applies_when_no_named_group_matches_there() -> None:
    m = manager({"root": [lim(groups=["dev", "*"], res=BIG)]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("eve", "sales"))
    assert m.app_group("app-1", ug("eve", "sales")) == "*"
    m.increase_tracked_resource("root.a", "app-2", R(vcore=1), ug("dan", "sales", "dev"))
    assert m.app_group("app-2", ug("dan", "sales", "dev")) == "dev"


def test_g3_no_matching_group_and_no_wildcard_means_no_group() -> None:
    m = manager({"root": [lim(groups=["dev"], res=BIG)]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("eve", "sales"))
    assert m.app_group("app-1", ug("eve", "sales")) is None
    assert m.tracked_groups() == []


def test_g4_wildcard_at_a_lower_level_beats_a_named_group_higher_up() -> None:
    m = manager({"root": [lim(groups=["dev"], res={"vcore": 1})],
                 "root.a": [lim(groups=["other", "*"], res=BIG)]})
    user = ug("joe", "dev")
    m.increase_tracked_resource("root.a", "app-1", R(vcore=5), user)
    assert m.app_group("app-1", user) == "*"
    # so dev's root limit of 1 never applies to this app (the documented side effect)
    assert m.get_group_resources("dev") is None


def test_g4_a_group_named_only_below_the_apps_queue_is_not_seen() -> None:
    m = manager({"root.a.b": [lim(groups=["dev"], res=BIG)]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("joe", "dev"))
    assert m.app_group("app-1", ug("joe", "dev")) is None


def test_limit_table_resolve_group_directly() -> None:
    table = LimitTable.from_partition(partition({"root": [lim(groups=["g1", "*"], res=BIG)],
                                                 "root.x": [lim(groups=["g2"], res=BIG)]}))
    assert table.resolve_group(("root", "root.x"), ("g1", "g2")) == "g2"
    assert table.resolve_group(("root", "root.x"), ("g9",)) == "*"
    assert table.resolve_group(("root", "root.x"), ()) is None


# -- G-5 / U5: the * group is one shared tracker ---------------------------------------------------------
def test_g5_wildcard_group_is_one_cumulative_budget() -> None:
    m = manager({"root": [lim(groups=["dev"], res=BIG), lim(groups=["*"], res={"vcore": 3000})]})
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=2000), ug("u1", "x"))
    assert m.increase_tracked_resource("root.b", "app-2", R(vcore=1000), ug("u2", "y"))
    assert m.get_group_resources("*") == {"vcore": 3000}
    assert not m.increase_tracked_resource("root.a", "app-3", R(vcore=1), ug("u3", "z"))
    # a dev member is not in the * budget
    assert m.increase_tracked_resource("root.a", "app-4", R(vcore=5000), ug("u4", "dev"))
    assert m.groups_usage()[0]["groupName"] == "*"
    assert m.groups_usage()[0]["applications"] == ["app-1", "app-2"]


# -- G-2 / G-6 / U4: when the group is chosen, and immutability ------------------------------------------
def test_u4_headroom_before_first_increase_uses_the_group_the_increase_would_choose() -> None:
    m = manager({"root": [lim(groups=["dev"], res={"vcore": 2000})]})
    user = ug("joe", "dev")
    assert m.headroom("root.a", "app-1", user) == {"vcore": 2000}
    assert m.app_group("app-1", user) is None and m.tracked_users() == []
    m.increase_tracked_resource("root.a", "app-0", R(vcore=1500), ug("ann", "dev"))
    assert m.headroom("root.a", "app-1", user) == {"vcore": 500}


def test_g2_u4_group_chosen_at_first_increase_not_at_headroom() -> None:
    """YuniKorn links at the first Headroom call (G-2); quotaplane at the first increase (U4)."""
    m = manager({"root": [lim(groups=["dev"], res=BIG)]})
    user = ug("joe", "dev", "test")
    m.headroom("root.a", "app-1", user)
    m.update_config(partition({"root": [lim(groups=["test"], res=BIG), lim(groups=["dev"], res=BIG)]}))
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), user)
    assert m.app_group("app-1", user) == "test"


def test_g6_link_never_changes_for_a_running_app_after_reload() -> None:
    m = manager({"root": [lim(groups=["dev", "*"], res=BIG)]})
    user = ug("joe", "qa")
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), user)
    assert m.app_group("app-1", user) == "*"
    m.update_config(partition({"root": [lim(groups=["qa", "*"], res=BIG)]}))
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), user)
    assert m.app_group("app-1", user) == "*"
    assert m.get_group_resources("*") == {"vcore": 2}
    # a new application resolves with the new config
    m.increase_tracked_resource("root.a", "app-2", R(vcore=1), user)
    assert m.app_group("app-2", user) == "qa"


def test_g6_a_none_link_is_kept_too() -> None:
    m = manager()
    user = ug("joe", "qa")
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), user)
    m.update_config(partition({"root": [lim(groups=["qa"], res={"vcore": 1})]}))
    # app-1 stays without a group, so the new qa limit does not refuse it
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=5), user)
    assert m.get_group_resources("qa") is None
    assert not m.increase_tracked_resource("root.a", "app-2", R(vcore=5), user)


def test_g6_link_released_by_remove_app_and_resolved_again() -> None:
    m = manager({"root": [lim(groups=["dev"], res=BIG)]})
    user = ug("joe", "dev", "test")
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), user)
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=1), True, user)
    m.update_config(partition({"root": [lim(groups=["test"], res=BIG)]}))
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), user)
    assert m.app_group("app-1", user) == "test"


# -- G-7 / U8: group trackers come from increases, not from config ---------------------------------------
def test_g7_u8_config_creates_no_group_tracker() -> None:
    m = manager({"root": [lim(groups=["dev", "*"], res=BIG)]})
    assert m.groups_usage() == []
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("joe", "dev"))
    assert m.tracked_groups() == ["dev"]


# -- U7: a group limit removed by reload keeps the link and the usage ------------------------------------
def test_u7_group_limit_removed_keeps_link_and_usage_and_clears_limit() -> None:
    m = manager({"root.a": [lim(groups=["dev"], res={"vcore": 5000})]})
    user = ug("joe", "dev")
    m.increase_tracked_resource("root.a", "app-1", R(vcore=3000), user)
    m.update_config(partition(queues=["root.a"]))
    assert m.app_group("app-1", user) == "dev"
    assert m.get_group_resources("dev") == {"vcore": 3000}
    dev = m.group_usage("dev")
    assert dev is not None and "maxResources" not in dev["queues"]["children"][0]
    # the cleared limit no longer refuses, and usage continues from where it was (no wipe, unlike C-4)
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=4000), user)
    assert m.get_group_resources("dev") == {"vcore": 7000}
    # a new application resolves with the new config: no group
    m.increase_tracked_resource("root.a", "app-2", R(vcore=1), user)
    assert m.app_group("app-2", user) is None
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=7000), True, user)
    assert m.get_group_resources("dev") is None
