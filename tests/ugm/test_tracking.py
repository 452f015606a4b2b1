"""Usage tracking (seed 001; reference T-1 … T-7, A-1, K-*; decisions U8, U9, U10, U14)."""

from __future__ import annotations

import pytest

from quotaplane.resources import Resource
from quotaplane.ugm import Manager, UserTracker, split_queue_path

from .helpers import R, lim, manager, node, ug


# -- T-1 / U14: empty arguments ------------------------------------------------------------------
@pytest.mark.parametrize("path, app", [("", "app-1"), ("root.a", "")])
def test_t1_u14_empty_arguments_raise_and_change_nothing(path: str, app: str) -> None:
    m = Manager()
    m.increase_tracked_resource("root.a", "app-0", R(vcore=1), ug("sue"))
    before = m.dump_state()
    with pytest.raises(ValueError):
        m.increase_tracked_resource(path, app, R(vcore=1), ug("sue"))
    with pytest.raises(ValueError):
        m.decrease_tracked_resource(path, app, R(vcore=1), True, ug("sue"))
    with pytest.raises(ValueError):
        m.headroom(path, app, ug("sue"))
    with pytest.raises(ValueError):
        m.can_run_app(path, app, ug("sue"))
    with pytest.raises(ValueError):
        m.explain_increase(path, app, R(vcore=1), ug("sue"))
    assert m.dump_state() == before


def test_u14_empty_user_name_raises_at_construction() -> None:
    with pytest.raises(ValueError):
        ug("")


def test_u14_empty_group_name_raises() -> None:
    with pytest.raises(ValueError):
        Manager().get_group_resources("")


def test_t1_empty_usage_is_allowed_and_counts_the_app() -> None:
    """An empty usage Resource is allowed (contract); the app runs from its first increase (A-1)."""
    m = Manager()
    assert m.increase_tracked_resource("root.a", "app-1", Resource(), ug("sue"))
    assert m.get_user_resources(ug("sue")) == Resource()
    assert m.get_user_resources(ug("sue")) is not None
    assert node(m, "user", "sue", "root.a")["running"] == ["app-1"]  # type: ignore[index]


@pytest.mark.parametrize("path", ["a.b", "root..a", "root.", ".root", "default"])
def test_malformed_queue_paths_raise(path: str) -> None:
    with pytest.raises(ValueError):
        Manager().increase_tracked_resource(path, "app-1", R(vcore=1), ug("sue"))


def test_split_queue_path_levels_root_first() -> None:
    assert split_queue_path("root.A.b") == ("root", "root.a", "root.a.b")
    assert split_queue_path("root") == ("root",)


# -- T-2: the whole path is tracked ----------------------------------------------------------------
def test_t2_increase_tracks_every_level_of_the_path() -> None:
    m = Manager()
    assert m.increase_tracked_resource("root.parent.leaf", "app-1", R(vcore=1000, memory=10), ug("sue"))
    for path in ("root", "root.parent", "root.parent.leaf"):
        n = node(m, "user", "sue", path)
        assert n is not None
        assert n["usage"] == {"memory": 10, "vcore": 1000}
        assert n["running"] == ["app-1"]
    assert m.get_user_resources(ug("sue")) == {"vcore": 1000, "memory": 10}


def test_t2_siblings_are_separate_and_root_sums_them() -> None:
    m = Manager()
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue"))
    m.increase_tracked_resource("root.b", "app-2", R(vcore=500, memory=1), ug("sue"))
    assert node(m, "user", "sue", "root.a")["usage"] == {"vcore": 1000}  # type: ignore[index]
    assert node(m, "user", "sue", "root.b")["usage"] == {"vcore": 500, "memory": 1}  # type: ignore[index]
    assert node(m, "user", "sue", "root")["usage"] == {"vcore": 1500, "memory": 1}  # type: ignore[index]
    assert node(m, "user", "sue", "root")["running"] == ["app-1", "app-2"]  # type: ignore[index]


def test_t2_group_is_tracked_alongside_the_user() -> None:
    m = manager({"root": [lim(groups=["dev"], res={"vcore": 10_000})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue", "dev"))
    assert m.get_group_resources("dev") == {"vcore": 1000}
    assert node(m, "group", "dev", "root.a")["running"] == ["app-1"]  # type: ignore[index]
    assert m.dump_state()["groups"]["dev"]["applications"] == {"app-1": "sue"}


def test_t2_no_group_tracked_without_group_limits() -> None:
    """Seed 001: if no group limits are defined in the hierarchy, usage is not tracked for a group."""
    m = Manager()
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue", "dev"))
    assert m.get_group_resources("dev") is None
    assert m.groups_usage() == []


def test_u10_queue_paths_are_case_insensitive() -> None:
    m = manager({"root.Parent": [lim(users=["sue"], res={"vcore": 1000})]})
    assert m.increase_tracked_resource("ROOT.parent.Leaf", "app-1", R(vcore=1000), ug("sue"))
    assert node(m, "user", "sue", "root.parent.leaf") is not None
    assert node(m, "user", "sue", "root.parent")["maxResources"] == {"vcore": 1000}  # type: ignore[index]
    assert not m.increase_tracked_resource("root.PARENT", "app-2", R(vcore=1), ug("sue"))


# -- T-4: decrease ------------------------------------------------------------------------------------
def test_t4_decrease_of_an_untracked_user_is_a_noop() -> None:
    m = Manager()
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=1), True, ug("bob"))
    assert m.get_user_resources(ug("bob")) is None
    assert m.dump_state()["users"] == {}


def test_t4_decrease_subtracts_on_every_level_and_keeps_running_app() -> None:
    m = Manager()
    m.increase_tracked_resource("root.a.b", "app-1", R(vcore=3000), ug("sue"))
    m.decrease_tracked_resource("root.a.b", "app-1", R(vcore=1000), False, ug("sue"))
    for path in ("root", "root.a", "root.a.b"):
        assert node(m, "user", "sue", path)["usage"] == {"vcore": 2000}  # type: ignore[index]
        assert node(m, "user", "sue", path)["running"] == ["app-1"]  # type: ignore[index]


def test_t4_remove_app_decreases_the_group_read_before_the_link_is_dropped() -> None:
    m = manager({"root": [lim(groups=["dev"], res={"vcore": 10_000})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue", "dev"))
    m.increase_tracked_resource("root.a", "app-2", R(vcore=500), ug("bob", "dev"))
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=1000), True, ug("sue", "dev"))
    assert m.get_group_resources("dev") == {"vcore": 500}
    assert m.get_user_resources(ug("sue")) is None
    assert m.dump_state()["groups"]["dev"]["applications"] == {"app-2": "bob"}


def test_t6_decrease_below_a_missing_level_changes_only_the_levels_above_the_last_existing_one() -> None:
    """T-6 for an application the user's tracker does not know: the last existing level (root.a, whose
    child is missing) returns early and changes nothing; its ancestors subtract. (For an application
    that runs on root.a, the same call is refused: decision U16.)"""
    m = Manager()
    m.increase_tracked_resource("root.a", "app-1", R(vcore=3000), ug("sue"))
    m.decrease_tracked_resource("root.a.missing", "app-2", R(vcore=1000), False, ug("sue"))
    assert node(m, "user", "sue", "root")["usage"] == {"vcore": 2000}  # type: ignore[index]
    assert node(m, "user", "sue", "root.a")["usage"] == {"vcore": 3000}  # type: ignore[index]
    assert node(m, "user", "sue", "root.a.missing") is None


def test_t7_usage_can_go_negative_and_only_exact_zero_is_pruned() -> None:
    m = Manager()
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000, memory=5), ug("sue"))
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=1500, memory=5), False, ug("sue"))
    assert m.get_user_resources(ug("sue")) == {"vcore": -500}
    assert "memory" not in node(m, "user", "sue", "root")["usage"]  # type: ignore[index]


def test_t3_increase_accepts_resource_types_without_any_limit() -> None:
    m = manager({"root": [lim(users=["*"], res={"vcore": 1000})]})
    assert m.increase_tracked_resource("root.a", "app-1", R(memory=10**12, gpu=99), ug("sue"))
    assert m.get_user_resources(ug("sue")) == {"memory": 10**12, "gpu": 99}


# -- running applications --------------------------------------------------------------------------
def test_a1_app_counts_from_first_increase_until_remove_app() -> None:
    m = manager({"root": [lim(users=["*"], apps=2, res={"vcore": 10**6})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("sue"))
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=1), False, ug("sue"))
    # zero usage but still running: it still counts
    assert node(m, "user", "sue", "root")["running"] == ["app-1"]  # type: ignore[index]
    m.increase_tracked_resource("root.a", "app-2", R(vcore=1), ug("sue"))
    assert not m.can_run_app("root.a", "app-3", ug("sue"))
    m.decrease_tracked_resource("root.a", "app-1", Resource(), True, ug("sue"))
    assert m.can_run_app("root.a", "app-3", ug("sue"))
    assert node(m, "user", "sue", "root")["running"] == ["app-2"]  # type: ignore[index]


def test_a1_repeated_increases_count_the_app_once() -> None:
    m = Manager()
    for _ in range(5):
        m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("sue"))
    assert node(m, "user", "sue", "root")["running"] == ["app-1"]  # type: ignore[index]
    assert m.get_user_resources(ug("sue")) == {"vcore": 5}


def test_a1_many_apps_on_one_node_switch_to_a_set_and_back() -> None:
    m = Manager()
    apps = [f"app-{i:02d}" for i in range(20)]
    for a in apps:
        m.increase_tracked_resource("root.a", a, R(vcore=1), ug("sue"))
    assert node(m, "user", "sue", "root.a")["running"] == apps  # type: ignore[index]
    for a in apps[:-1]:
        m.decrease_tracked_resource("root.a", a, R(vcore=1), True, ug("sue"))
    assert node(m, "user", "sue", "root.a")["running"] == apps[-1:]  # type: ignore[index]


# -- U9 / T-5 / K-*: clean-up ------------------------------------------------------------------------------
def test_u9_tracker_removed_when_usage_zero_and_no_running_apps() -> None:
    m = Manager()
    m.increase_tracked_resource("root.a.b", "app-1", R(vcore=1000), ug("sue"))
    m.decrease_tracked_resource("root.a.b", "app-1", R(vcore=1000), True, ug("sue"))
    assert m.get_user_resources(ug("sue")) is None
    assert m.users_usage() == []


def test_u9_tracker_kept_while_an_app_runs_with_zero_usage() -> None:
    m = Manager()
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue"))
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=1000), False, ug("sue"))
    assert m.get_user_resources(ug("sue")) == Resource()
    assert m.tracked_users() == ["sue"]


def test_u9_tracker_kept_while_usage_remains_after_remove_app() -> None:
    m = Manager()
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue"))
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=400), True, ug("sue"))
    assert m.get_user_resources(ug("sue")) == {"vcore": 600}


def test_u9_empty_queue_nodes_inside_a_tracker_are_removed() -> None:
    m = Manager()
    m.increase_tracked_resource("root.a.x", "app-1", R(vcore=1), ug("sue"))
    m.increase_tracked_resource("root.b", "app-2", R(vcore=1), ug("sue"))
    m.decrease_tracked_resource("root.a.x", "app-1", R(vcore=1), True, ug("sue"))
    nodes = m.dump_state()["users"]["sue"]["queues"]
    assert sorted(nodes) == ["root", "root.b"]
    assert nodes["root"]["children"] == 1


def test_u9_group_tracker_removed_when_it_has_no_applications() -> None:
    m = manager({"root": [lim(groups=["dev"], res={"vcore": 10_000})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue", "dev"))
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=1000), False, ug("sue", "dev"))
    assert m.tracked_groups() == ["dev"]         # still has app-1
    m.decrease_tracked_resource("root.a", "app-1", Resource(), True, ug("sue", "dev"))
    assert m.tracked_groups() == []
    assert m.get_group_resources("dev") is None


def test_u9_limits_do_not_keep_empty_trackers_alive() -> None:
    """Unlike YuniKorn (T-5, K-3) a tracker whose nodes carry limits is still removed when empty (U9)."""
    m = manager({"root": [lim(users=["sue"], res={"vcore": 10_000}, apps=3)]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue"))
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=1000), True, ug("sue"))
    assert m.tracked_users() == []
    # and the limit is looked up again when the tracker comes back (U8)
    m.increase_tracked_resource("root.a", "app-2", R(vcore=1000), ug("sue"))
    assert node(m, "user", "sue", "root")["maxResources"] == {"vcore": 10_000}  # type: ignore[index]


def test_k1_headroom_and_can_run_app_create_nothing() -> None:
    """K-1 is changed by U1/U4: headroom/can_run_app never create trackers, nodes or links."""
    m = manager({"root": [lim(users=["*"], res={"vcore": 1000}), lim(groups=["dev"], res={"vcore": 5})]})
    before = m.dump_state()
    assert m.headroom("root.a", "app-1", ug("sue", "dev")) == {"vcore": 5}
    assert m.can_run_app("root.a", "app-1", ug("sue", "dev"))
    assert m.explain_increase("root.a", "app-1", R(vcore=10), ug("sue", "dev"))
    assert m.dump_state() == before
    assert m.users_usage() == [] and m.groups_usage() == []


# -- seed 001 user tracker link helpers ------------------------------------------------------------------
def test_seed001_set_group_for_app_is_immutable_even_for_none() -> None:
    ut = UserTracker("sue")
    assert not ut.has_group_for_app("app-1")
    ut.set_group_for_app("app-1", None, "root.a")
    assert ut.has_group_for_app("app-1")
    ut.set_group_for_app("app-1", "dev", "root.a")
    assert ut.group_for_app("app-1") is None
    ut.set_group_for_app("app-2", "dev", "root.a")
    ut.set_group_for_app("app-2", "test", "root.a")
    assert ut.group_for_app("app-2") == "dev"


def test_reset_forgets_trackers_but_keeps_limits() -> None:
    m = manager({"root": [lim(users=["*"], res={"vcore": 1000})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue"))
    m.reset()
    assert m.tracked_users() == []
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue"))
    assert not m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("sue"))


def test_usage_may_be_a_plain_mapping() -> None:
    m = Manager()
    assert m.increase_tracked_resource("root.a", "app-1", {"vcore": 5}, ug("sue"))  # type: ignore[arg-type]
    assert m.get_user_resources(ug("sue")) == {"vcore": 5}
    with pytest.raises(TypeError):
        m.increase_tracked_resource("root.a", "app-1", {"vcore": 1.5}, ug("sue"))  # type: ignore[dict-item,arg-type]


def test_undo_of_a_first_increase_restores_the_exact_state() -> None:
    """The admission path undoes an applied increase: remove_app when it was the app's first one."""
    m = manager({"root": [lim(groups=["dev"], res={"vcore": 10}, apps=2)]})
    user = ug("sue", "dev")
    m.increase_tracked_resource("root.a", "app-0", R(vcore=1), user)
    before = m.dump_state()
    assert not m.is_tracked_app("app-1", user)
    assert m.increase_tracked_resource("root.a.b", "app-1", R(vcore=2), user)
    assert m.is_tracked_app("app-1", user)
    m.decrease_tracked_resource("root.a.b", "app-1", R(vcore=2), True, user)
    assert m.dump_state() == before
    # not a first increase: undo without remove_app
    assert m.increase_tracked_resource("root.a", "app-0", R(vcore=3), user)
    m.decrease_tracked_resource("root.a", "app-0", R(vcore=3), False, user)
    assert m.dump_state() == before


# -- U16: a release names the application's own queue ---------------------------------------------
@pytest.mark.parametrize("path", ["root.b", "root.a.deeper", "root"])
def test_u16_a_release_naming_another_queue_than_the_applications_is_refused(path: str) -> None:
    """The application runs on root.a: a decrease naming any other queue (a sibling, a queue below,
    an ancestor) is refused with a ReleaseError naming both, and changes nothing — it would subtract
    from queues the application's usage was never added to."""
    from quotaplane.errors import ReleaseError

    m = Manager()
    m.increase_tracked_resource("root.a", "app-1", R(vcore=3), ug("sue", "dev"))
    m.increase_tracked_resource("root.b", "app-2", R(vcore=2), ug("sue", "dev"))
    before = m.dump_state()
    with pytest.raises(ReleaseError) as err:
        m.decrease_tracked_resource(path, "app-1", R(vcore=1), False, ug("sue", "dev"))
    assert "app-1" in str(err.value) and "root.a" in str(err.value) and path in str(err.value)
    assert isinstance(err.value, ValueError)
    assert m.dump_state() == before
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=3), True, ug("sue", "dev"))
    assert m.get_user_resources(ug("sue")) == R(vcore=2)
