"""Config updates (seed 000 "Configuration updates and storage"; C-1 … C-8; decisions U6, U7, U8)."""

from __future__ import annotations

import threading

import pytest

from quotaplane.config.model import PartitionConfig, QueueConfig
from quotaplane.ugm import LimitEntry, LimitTable, Manager, QueueTracker

from .helpers import R, lim, manager, node, partition, ug

BIG = {"vcore": 10**9}


def usage_only(m: Manager) -> dict[str, object]:
    """dump_state without the limits: what a reload must never change."""
    state = m.dump_state()
    for kind in ("users", "groups"):
        for tracker in state[kind].values():
            for n in tracker["queues"].values():
                del n["maxResources"], n["maxApplications"]
    del state["limits"]
    return state


def test_u8_config_creates_no_trackers() -> None:
    m = manager({"root": [lim(users=["sue", "*"], res=BIG), lim(groups=["dev", "*"], res=BIG)]})
    assert m.users_usage() == [] and m.groups_usage() == []
    assert m.dump_state()["users"] == {}


def test_u8_limits_are_looked_up_when_a_node_is_created() -> None:
    m = manager({"root.a": [lim(users=["*"], res={"vcore": 100})], "root.b": [lim(users=["*"], apps=4)]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("sue"))
    assert node(m, "user", "sue", "root.b") is None
    m.increase_tracked_resource("root.b", "app-2", R(vcore=1), ug("sue"))
    assert node(m, "user", "sue", "root.b")["maxApplications"] == 4  # type: ignore[index]


def test_c2_named_user_limit_removed_clears_the_limit_and_keeps_usage() -> None:
    m = manager({"root.a": [lim(users=["sue"], res={"vcore": 2000}, apps=2)]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=2000), ug("sue"))
    before = usage_only(m)
    m.update_config(partition(queues=["root.a"]))
    assert usage_only(m) == before
    n = node(m, "user", "sue", "root.a")
    assert n is not None and n["maxResources"] is None and n["maxApplications"] == 0
    assert m.headroom("root.a", "app-1", ug("sue")) is None
    assert m.increase_tracked_resource("root.a", "app-2", R(vcore=5000), ug("sue"))


def test_c5_wildcard_update_reaches_every_existing_tracker_at_that_queue() -> None:
    m = manager({"root.a": [lim(users=["*"], res={"vcore": 1000})]})
    users = [ug(f"u{i}") for i in range(5)]
    for i, u in enumerate(users):
        m.increase_tracked_resource("root.a", f"app-{i}", R(vcore=500), u)
    m.update_config(partition({"root.a": [lim(users=["*"], res={"vcore": 600})]}))
    for u in users:
        assert m.headroom("root.a", "x", u) == {"vcore": 100}
    m.update_config(partition({"root.a": [lim(users=["u0"], res={"vcore": 700}),
                                          lim(users=["*"], res={"vcore": 900})]}))
    assert m.headroom("root.a", "x", users[0]) == {"vcore": 200}
    assert m.headroom("root.a", "x", users[1]) == {"vcore": 400}


def test_c5_wildcard_removed_clears_wildcard_limits_but_keeps_named_ones() -> None:
    """Unlike YuniKorn's stale-limit quirk (C-5 [inferred]), removing * clears every derived limit."""
    m = manager({"root.a": [lim(users=["sue"], res={"vcore": 700}), lim(users=["*"], res={"vcore": 900})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=100), ug("sue"))
    m.increase_tracked_resource("root.a", "app-2", R(vcore=100), ug("bob"))
    m.update_config(partition({"root.a": [lim(users=["sue"], res={"vcore": 700})]}))
    assert m.headroom("root.a", "x", ug("sue")) == {"vcore": 600}
    assert m.headroom("root.a", "x", ug("bob")) is None


def test_c5_removing_all_limits_resets_everyone() -> None:
    m = manager({"root": [lim(users=["*"], res={"vcore": 1}, apps=1), lim(groups=["dev"], res={"vcore": 1})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("sue", "dev"))
    m.update_config(partition(queues=["root.a"]))
    assert m.headroom("root.a", "app-2", ug("sue", "dev")) is None
    assert m.can_run_app("root.a", "app-2", ug("sue", "dev"))
    assert m.dump_state()["limits"] == {}


def test_c6_group_limit_changed_in_place_keeps_usage() -> None:
    m = manager({"root": [lim(groups=["dev"], res={"vcore": 3000}, apps=5)]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=2000), ug("ann", "dev"))
    before = usage_only(m)
    m.update_config(partition({"root": [lim(groups=["dev"], res={"vcore": 2500}, apps=1)]}))
    assert usage_only(m) == before
    assert m.headroom("root.a", "app-2", ug("bob", "dev")) == {"vcore": 500}
    assert not m.can_run_app("root.a", "app-2", ug("bob", "dev"))


def test_c6_limit_added_where_none_was_applies_to_existing_nodes_only() -> None:
    m = manager(queues=["root.a", "root.b"])
    m.increase_tracked_resource("root.a", "app-1", R(vcore=2000), ug("sue"))
    m.update_config(partition({"root.a": [lim(users=["sue"], res={"vcore": 1000})],
                               "root.b": [lim(users=["sue"], res={"vcore": 1000})]}))
    assert node(m, "user", "sue", "root.a")["maxResources"] == {"vcore": 1000}  # type: ignore[index]
    assert node(m, "user", "sue", "root.b") is None        # seed 000: no queue is created by config
    assert m.headroom("root.b", "app-2", ug("sue")) == {"vcore": 1000}


def test_partition_limits_are_the_root_limits() -> None:
    """V-11: partition limits are copied onto root; a hand-built model with only partition limits works."""
    root = QueueConfig(name="root", path="root", parent=True)
    m = Manager()
    m.update_config(PartitionConfig(name="default", root=root, limits=(lim(users=["*"], res={"vcore": 5}),)))
    assert m.headroom("root.x", "app-1", ug("sue")) == {"vcore": 5}


def test_reload_never_loses_usage_over_many_reloads() -> None:
    configs = [partition({"root": [lim(users=["*"], res={"vcore": 10**6}),
                                   lim(groups=["dev", "*"], res=BIG)]}),
               partition({"root.a": [lim(groups=["qa"], res={"vcore": 1})]}),
               partition()]
    m = Manager()
    m.update_config(configs[0])
    for i in range(20):
        user = ug(f"u{i % 4}", "dev", "qa")
        m.increase_tracked_resource(f"root.q{i % 3}", f"app-{i}", R(vcore=10 + i), user)
    before = usage_only(m)
    for cfg in configs * 3:
        m.update_config(cfg)
        assert usage_only(m) == before


def test_c7_reload_is_applied_in_one_step_under_concurrent_reads() -> None:
    """Quality: a reload applied in one step — no reader sees half of the old and half of the new limits."""
    a = partition({"root": [lim(users=["*"], res={"vcore": 1000})],
                   "root.q": [lim(users=["*"], res={"vcore": 1000})]})
    b = partition({"root": [lim(users=["*"], res={"vcore": 2000})],
                   "root.q": [lim(users=["*"], res={"vcore": 2000})]})
    m = Manager()
    m.update_config(a)
    for i in range(50):
        m.increase_tracked_resource("root.q", f"app-{i}", R(vcore=100), ug(f"u{i}"))
    stop = threading.Event()
    seen: set[int] = set()
    bad: list[object] = []

    def reader() -> None:
        while not stop.is_set():
            for i in range(0, 60, 7):
                h = m.headroom("root.q", "x", ug(f"u{i}"))
                used = 100 if i < 50 else 0
                assert h is not None
                limit = h["vcore"] + used
                if limit not in (1000, 2000):
                    bad.append(h)
                seen.add(limit)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for k in range(200):
        m.update_config(a if k % 2 else b)
    stop.set()
    for t in threads:
        t.join()
    assert bad == []
    assert seen <= {1000, 2000}


def test_queue_tracker_setters_set_change_and_clear() -> None:
    """Seed 000 setters: no difference between setting a new value and changing one; None clears."""
    qt = QueueTracker()
    assert qt.max_resources is None and qt.max_applications == 0
    assert qt.set_limit(LimitEntry({"vcore": 5}, 2))
    assert qt.max_resources == {"vcore": 5} and qt.max_applications == 2
    assert not qt.set_limit(LimitEntry({"vcore": 5}, 2))       # equal: no change
    assert qt.set_limit(LimitEntry({"vcore": 6}, 0))
    assert qt.max_resources == {"vcore": 6} and qt.max_applications == 0
    assert qt.set_limit(None)
    assert qt.max_resources is None and qt.max_applications == 0


def test_limit_table_lookups_and_description() -> None:
    table = LimitTable.from_partition(partition({
        "root": [lim(users=["sue"], res={"vcore": 1}), lim(users=["*"], apps=2),
                 lim(groups=["dev", "qa"], res={"vcore": 3}), lim(groups=["*"], res={"vcore": 9})]}))
    assert table.user_limit("root", "sue") == LimitEntry({"vcore": 1}, 0)
    assert table.user_limit("root", "bob") == LimitEntry(None, 2, wildcard=True)
    assert table.group_limit("root", "dev") == LimitEntry({"vcore": 3}, 0)
    assert table.group_limit("root", "*") == LimitEntry({"vcore": 9}, 0, wildcard=True)
    assert table.group_limit("root", "other") is None
    assert table.user_limit("root.a", "sue") is None
    assert table.describe() == {"root": {
        "users": {"sue": {"maxResources": {"vcore": 1}}, "*": {"maxApplications": 2}},
        "groups": {"dev": {"maxResources": {"vcore": 3}}, "qa": {"maxResources": {"vcore": 3}},
                   "*": {"maxResources": {"vcore": 9}}}}}


def test_c1_empty_names_in_limit_lists_are_skipped() -> None:
    m = manager({"root": [lim(users=["", "sue"], res={"vcore": 5}),
                          lim(groups=["", "dev"], res={"vcore": 7})]})
    assert m.limit_table.describe() == {"root": {"users": {"sue": {"maxResources": {"vcore": 5}}},
                                                 "groups": {"dev": {"maxResources": {"vcore": 7}}}}}
    assert m.headroom("root.a", "app-1", ug("bob")) is None


def test_c1_first_entry_for_a_name_wins_within_one_queue() -> None:
    """V-3 rejects duplicates in a loaded config; a hand-built model keeps the first entry."""
    m = manager({"root": [lim(users=["sue"], res={"vcore": 5}), lim(users=["sue"], res={"vcore": 9})]})
    assert m.headroom("root.a", "app-1", ug("sue")) == {"vcore": 5}


def test_c3_users_with_running_apps_are_kept_when_their_limits_go() -> None:
    m = manager({"root": [lim(users=["sue"], res={"vcore": 5000})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue"))
    m.update_config(partition())
    assert m.tracked_users() == ["sue"]
    assert m.get_user_resources(ug("sue")) == {"vcore": 1000}


def test_c8_u6_reload_below_usage_is_not_an_error() -> None:
    m = manager({"root": [lim(groups=["dev"], res={"vcore": 5000})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=4000), ug("sue", "dev"))
    m.update_config(partition({"root": [lim(groups=["dev"], res={"vcore": 1000})]}))   # no exception
    assert m.headroom("root.a", "app-1", ug("sue", "dev")) == {"vcore": -3000}


def test_c9_u3_one_manager_per_partition_is_independent() -> None:
    """U3: one manager per partition; YuniKorn's global singleton let partitions overwrite each other."""
    a = manager({"root": [lim(users=["*"], res={"vcore": 1})]})
    b = manager({"root": [lim(users=["*"], res={"vcore": 100})]})
    assert not a.increase_tracked_resource("root.x", "app-1", R(vcore=50), ug("sue"))
    assert b.increase_tracked_resource("root.x", "app-1", R(vcore=50), ug("sue"))
    assert a.tracked_users() == [] and b.tracked_users() == ["sue"]


def test_k2_trackers_are_removed_only_by_decreases() -> None:
    """K-2 as adapted: a reload never removes a tracker (usage is never lost); decreases do (U9)."""
    m = manager({"root": [lim(users=["sue"], res={"vcore": 5000})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1000), ug("sue"))
    m.update_config(partition())
    m.update_config(partition({"root": [lim(users=["*"], res={"vcore": 1})]}))
    assert m.tracked_users() == ["sue"]
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=1000), True, ug("sue"))
    assert m.tracked_users() == []


def test_update_config_rejects_a_non_partition() -> None:
    with pytest.raises(TypeError):
        Manager().update_config({"root": []})  # type: ignore[arg-type]
