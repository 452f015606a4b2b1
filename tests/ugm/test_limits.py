"""Limit enforcement (seed 000; H-1 … H-6, W-1 … W-5; decisions U1, U2, U6, U11)."""

from __future__ import annotations

from quotaplane.resources import Resource

from .helpers import GIB, R, lim, manager, node, partition, ug

BIG = {"vcore": 10**9}


# -- H-1: headroom over the levels ----------------------------------------------------------------------
def test_h1_headroom_is_none_without_any_limit() -> None:
    m = manager({"root.a": [lim(users=["bob"], res={"vcore": 1})]})
    assert m.headroom("root.a", "app-1", ug("sue")) is None
    m.increase_tracked_resource("root.a", "app-1", R(vcore=100), ug("sue"))
    assert m.headroom("root.a", "app-1", ug("sue")) is None


def test_h1_headroom_is_the_componentwise_min_over_levels() -> None:
    m = manager({"root": [lim(users=["sue"], res={"vcore": 10_000, "memory": 8 * GIB})],
                 "root.a": [lim(users=["sue"], res={"vcore": 4000, "gpu": 2})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000, memory=GIB), ug("sue"))
    m.increase_tracked_resource("root.b", "app-2", R(vcore=6000), ug("sue"))
    # root: vcore 10000-7000=3000, memory 7G; root.a: vcore 4000-1000=3000, gpu 2
    assert m.headroom("root.a", "app-3", ug("sue")) == {"vcore": 3000, "memory": 7 * GIB, "gpu": 2}
    assert m.headroom("root.b", "app-3", ug("sue")) == {"vcore": 3000, "memory": 7 * GIB}


def test_h1_usage_of_an_unlimited_type_is_ignored() -> None:
    m = manager({"root": [lim(users=["sue"], res={"vcore": 5000})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000, unknown=77), ug("sue"))
    assert m.headroom("root.a", "app-1", ug("sue")) == {"vcore": 4000}


def test_h1_zero_limit_on_a_type_blocks_that_type_only() -> None:
    m = manager({"root": [lim(users=["*"], res={"memory": 100, "gpu": 0})]})
    assert not m.increase_tracked_resource("root.a", "app-1", R(memory=1, gpu=1), ug("sue"))
    assert m.increase_tracked_resource("root.a", "app-1", R(memory=100), ug("sue"))
    assert m.headroom("root.a", "app-1", ug("sue")) == {"memory": 0, "gpu": 0}


def test_h1_all_zero_limit_counts_as_no_limit() -> None:
    m = manager({"root": [lim(users=["*"], res={"memory": 0}, apps=1)]})
    assert m.increase_tracked_resource("root.a", "app-1", R(memory=10**9), ug("sue"))
    assert m.headroom("root.a", "app-1", ug("sue")) is None


# -- H-2 / U2: user and group both apply, tightest wins --------------------------------------------------
def test_h2_user_lower_than_group() -> None:
    m = manager({"root": [lim(users=["sue"], res={"vcore": 1000}), lim(groups=["dev"], res={"vcore": 5000})]})
    assert m.headroom("root.a", "app-1", ug("sue", "dev")) == {"vcore": 1000}
    assert not m.increase_tracked_resource("root.a", "app-1", R(vcore=1001), ug("sue", "dev"))
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue", "dev"))


def test_h2_group_lower_than_user() -> None:
    m = manager({"root": [lim(users=["sue"], res={"vcore": 5000}), lim(groups=["dev"], res={"vcore": 1000})]})
    assert m.headroom("root.a", "app-1", ug("sue", "dev")) == {"vcore": 1000}
    assert not m.increase_tracked_resource("root.a", "app-1", R(vcore=1001), ug("sue", "dev"))
    assert m.get_user_resources(ug("sue")) is None     # refused for the group: the user is unchanged too
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue", "dev"))


def test_h2_tightest_wins_per_resource_type() -> None:
    m = manager({"root": [lim(users=["sue"], res={"vcore": 1000, "memory": 100}),
                          lim(groups=["dev"], res={"vcore": 5000, "memory": 10})]})
    assert m.headroom("root.a", "app-1", ug("sue", "dev")) == {"vcore": 1000, "memory": 10}


def test_h2_group_usage_of_other_members_reduces_headroom() -> None:
    m = manager({"root": [lim(groups=["dev"], res={"vcore": 3000})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=2000), ug("ann", "dev"))
    assert m.headroom("root.b", "app-2", ug("bob", "dev")) == {"vcore": 1000}
    assert not m.increase_tracked_resource("root.b", "app-2", R(vcore=1500), ug("bob", "dev"))


# -- H-3 / H-4: running applications ---------------------------------------------------------------------
def test_h3_maxapplications_refuses_a_new_app_but_not_a_running_one() -> None:
    m = manager({"root.a": [lim(users=["sue"], apps=1, res=BIG)]})
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("sue"))
    assert m.can_run_app("root.a", "app-1", ug("sue"))
    assert not m.can_run_app("root.a", "app-2", ug("sue"))
    assert not m.increase_tracked_resource("root.a", "app-2", R(vcore=1), ug("sue"))
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("sue"))


def test_h3_every_level_must_admit_the_app() -> None:
    m = manager({"root": [lim(users=["sue"], apps=2, res=BIG)],
                 "root.a": [lim(users=["sue"], apps=5, res=BIG)]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("sue"))
    m.increase_tracked_resource("root.b", "app-2", R(vcore=1), ug("sue"))
    assert not m.can_run_app("root.a", "app-3", ug("sue"))       # root is full, root.a is not
    assert not m.increase_tracked_resource("root.a", "app-3", Resource(), ug("sue"))


def test_h4_can_run_app_is_user_and_group() -> None:
    m = manager({"root": [lim(groups=["dev"], apps=1, res=BIG)]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("ann", "dev"))
    assert not m.can_run_app("root.a", "app-2", ug("bob", "dev"))      # group full
    assert m.can_run_app("root.a", "app-2", ug("bob", "qa"))           # bob without dev: no group limit
    assert m.can_run_app("root.a", "app-1", ug("ann", "dev"))          # already running


def test_u11_maxapplications_zero_means_no_count_limit() -> None:
    m = manager({"root": [lim(users=["*"], apps=0, res=BIG)]})
    for i in range(30):
        assert m.increase_tracked_resource("root.a", f"app-{i}", R(vcore=1), ug("sue"))


# -- U1 / H-5: the increase enforces atomically ----------------------------------------------------------
def test_u1_refused_increase_changes_nothing_anywhere() -> None:
    m = manager({"root": [lim(users=["*"], res={"vcore": 10_000}), lim(groups=["dev"], res={"vcore": 3000})],
                 "root.a.b": [lim(users=["*"], res={"vcore": 2000})]})
    user = ug("sue", "dev")
    assert m.increase_tracked_resource("root.a.b", "app-1", R(vcore=1500), user)
    before = m.dump_state()
    # fits the group (3000) but not the user at the leaf (2000)
    assert not m.increase_tracked_resource("root.a.b", "app-2", R(vcore=1000), user)
    assert m.dump_state() == before
    # fits the user at root.a.c but not the group
    assert not m.increase_tracked_resource("root.a.c", "app-3", R(vcore=1600), ug("bob", "dev"))
    assert m.dump_state() == before


def test_u1_increase_that_exactly_fits_is_accepted() -> None:
    m = manager({"root": [lim(users=["*"], res={"vcore": 2000})]})
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=2000), ug("sue"))
    assert m.headroom("root.a", "app-1", ug("sue")) == {"vcore": 0}
    assert not m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("sue"))
    assert m.increase_tracked_resource("root.a", "app-1", R(memory=1), ug("sue"))   # other type: fine


def test_u1_decrease_is_never_refused_even_above_a_limit() -> None:
    m = manager({"root": [lim(users=["*"], res={"vcore": 2000})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=2000), ug("sue"))
    m.update_config(partition({"root": [lim(users=["*"], res={"vcore": 500})]}))
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=1000), False, ug("sue"))
    assert m.get_user_resources(ug("sue")) == {"vcore": 1000}


def test_u1_a_negative_delta_in_an_increase_is_never_refused() -> None:
    """A-2: resizing an allocation calls increase with a signed delta; lowering usage always fits."""
    m = manager({"root": [lim(users=["*"], res={"vcore": 2000})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=2000), ug("sue"))
    m.update_config(partition({"root": [lim(users=["*"], res={"vcore": 100})]}))
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=-500), ug("sue"))
    assert m.get_user_resources(ug("sue")) == {"vcore": 1500}


# -- H-6 / U6: limits lowered below usage ----------------------------------------------------------------
def test_h6_u6_reload_below_usage_keeps_usage_and_refuses_new_increases() -> None:
    m = manager({"root": [lim(users=["sue"], res={"vcore": 4000, "memory": 100})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=3000, memory=10), ug("sue"))
    m.update_config(partition({"root": [lim(users=["sue"], res={"vcore": 1000, "memory": 100})]}))
    assert m.get_user_resources(ug("sue")) == {"vcore": 3000, "memory": 10}
    assert m.headroom("root.a", "app-1", ug("sue")) == {"vcore": -2000, "memory": 90}
    assert not m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("sue"))
    assert m.increase_tracked_resource("root.a", "app-1", R(memory=5), ug("sue"))
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=2500), False, ug("sue"))
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=500), ug("sue"))


# -- W-1 … W-5: wildcards --------------------------------------------------------------------------------
def test_w1_wildcard_user_limit_is_a_per_user_copy() -> None:
    m = manager({"root.a": [lim(users=["*"], res={"vcore": 1000})]})
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("u1"))
    assert m.increase_tracked_resource("root.a", "app-2", R(vcore=1000), ug("u2"))
    assert not m.increase_tracked_resource("root.a", "app-3", R(vcore=1), ug("u1"))
    assert node(m, "user", "u2", "root.a")["maxResources"] == {"vcore": 1000}  # type: ignore[index]


def test_w2_named_user_beats_wildcard_at_the_same_queue_both_ways() -> None:
    m = manager({"root": [lim(users=["big"], res={"vcore": 5000}), lim(users=["small"], res={"vcore": 100}),
                          lim(users=["*"], res={"vcore": 1000})]})
    assert m.headroom("root.a", "x", ug("big")) == {"vcore": 5000}
    assert m.headroom("root.a", "x", ug("small")) == {"vcore": 100}
    assert m.headroom("root.a", "x", ug("other")) == {"vcore": 1000}
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=3000), ug("big"))
    assert not m.increase_tracked_resource("root.a", "app-2", R(vcore=200), ug("small"))


def test_w2_named_user_with_count_only_replaces_the_wildcard_entirely() -> None:
    m = manager({"root": [lim(users=["sue"], apps=3), lim(users=["*"], res={"vcore": 1000})]})
    assert m.headroom("root.a", "x", ug("sue")) is None
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=50_000), ug("sue"))


def test_w2_precedence_is_per_queue_path() -> None:
    """A user named only at root.p.c still gets the wildcard at root.p."""
    m = manager({"root.p": [lim(users=["*"], res={"vcore": 1000})],
                 "root.p.c": [lim(users=["sue"], res={"vcore": 5000})]})
    assert m.headroom("root.p.c", "x", ug("sue")) == {"vcore": 1000}
    assert not m.increase_tracked_resource("root.p.c", "app-1", R(vcore=2000), ug("sue"))


def test_w4_group_wildcard_is_not_applied_to_named_group_trackers() -> None:
    m = manager({"root": [lim(groups=["dev"], res=BIG), lim(groups=["*"], res={"vcore": 100})],
                 "root.a": [lim(groups=["qa"], res=BIG)]})
    # joe resolves to qa at root.a (leaf first); the root's * group limit is not copied onto qa
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=5000), ug("joe", "qa"))
    assert m.app_group("app-1", ug("joe", "qa")) == "qa"
    qa = m.group_usage("qa")
    assert qa is not None and "maxResources" not in qa["queues"]
    # while someone who falls into * at root is limited by it
    assert not m.increase_tracked_resource("root.b", "app-2", R(vcore=101), ug("eve", "qa"))


def test_w5_wildcard_matches_only_when_no_earlier_entry_matches() -> None:
    """W-5 ordering is a validation rule (config loader); the manager gives named entries precedence."""
    m = manager({"root": [lim(users=["sue"], res={"vcore": 10}), lim(users=["*"], res={"vcore": 99})]})
    assert m.headroom("root.a", "x", ug("sue")) == {"vcore": 10}
    assert m.headroom("root.a", "x", ug("ann")) == {"vcore": 99}


def test_limit_is_per_named_user_not_combined() -> None:
    """Seed 000: a limit entry naming sue and bob gives each their own limit."""
    m = manager({"root": [lim(users=["sue", "bob"], apps=2, res={"vcore": 10_000, "memory": 250 * 10**9})]})
    for user in ("sue", "bob"):
        assert m.increase_tracked_resource("root.a", f"{user}-1", R(vcore=10_000), ug(user))
        assert m.increase_tracked_resource("root.a", f"{user}-2", R(memory=10), ug(user))
        assert not m.increase_tracked_resource("root.a", f"{user}-3", R(memory=10), ug(user))
    assert m.increase_tracked_resource("root.a", "other-1", R(vcore=10**6), ug("carl"))


def test_u1_running_app_on_its_own_path_is_still_checked_for_user_and_group() -> None:
    """The steady-state path (an app already running on the path) enforces user and group limits."""
    m = manager({"root": [lim(groups=["dev"], res={"vcore": 3000})],
                 "root.a.b": [lim(users=["*"], res={"vcore": 2500, "memory": 10})]})
    sue = ug("sue", "dev")
    assert m.increase_tracked_resource("root.a.b", "app-1", R(vcore=1000), sue)
    assert m.increase_tracked_resource("root.a", "app-2", R(vcore=1500), ug("bob", "dev"))
    before = m.dump_state()
    assert not m.increase_tracked_resource("root.a.b", "app-1", R(vcore=600), sue)       # group: 3100
    assert not m.increase_tracked_resource("root.a.b", "app-1", R(memory=11), sue)       # user leaf
    assert m.dump_state() == before
    assert m.increase_tracked_resource("root.a.b", "app-1", R(vcore=500, memory=10), sue)
    assert m.get_group_resources("dev") == {"vcore": 3000, "memory": 10}


def test_h6_u6_count_limit_lowered_below_running_apps_refuses_only_new_apps() -> None:
    m = manager({"root": [lim(users=["*"], res={"vcore": 100})]})
    for i in range(3):
        assert m.increase_tracked_resource("root.a", f"app-{i}", R(vcore=1), ug("u0"))
    m.update_config(partition({"root": [lim(users=["*"], res={"vcore": 100}, apps=2)]}))
    assert m.increase_tracked_resource("root.a", "app-0", R(vcore=1), ug("u0"))
    assert m.can_run_app("root.a", "app-1", ug("u0"))
    assert not m.can_run_app("root.a", "app-3", ug("u0"))
    assert not m.increase_tracked_resource("root.a", "app-3", R(vcore=1), ug("u0"))
