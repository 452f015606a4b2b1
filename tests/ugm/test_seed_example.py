"""Seed 000 "Example configuration", exercised user by user through the real YAML loader.

    sue                  → her own limit (25G / 5 vcore)
    development / test   → the user catch-all (10G / 1 vcore) per user, and 100G / 10 vcore per group
    anyone else          → the user catch-all, and the cumulative ``*`` group (50G / 10 vcore)
    a user with no groups→ the user catch-all only (G-3: no groups, no group tracking)
"""

from __future__ import annotations

import pytest

from quotaplane.config.identity import UserGroup
from quotaplane.ugm import Manager

from .helpers import R, from_yaml, ug

SEED_EXAMPLE = """
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: shared
          - name: other
        limits:
          - limit: "specific user"
            users:
              - "sue"
            maxresources: {memory: 25G, vcore: 5}
          - limit: "specific groups"
            groups:
              - "development"
              - "test"
            maxresources: {memory: 100G, vcore: 10}
          - limit: "user catch all"
            users:
              - "*"
            maxresources: {memory: 10G, vcore: 1}
          - limit: "group catch all"
            groups:
              - "*"
            maxresources: {memory: 50G, vcore: 10}
"""
G = 10**9


def DEV(name: str) -> UserGroup:
    """A member of development."""
    return ug(name, "development")


@pytest.fixture
def m() -> Manager:
    return from_yaml(SEED_EXAMPLE)


def test_sue_has_her_own_limit(m: Manager) -> None:
    sue = ug("sue")
    assert m.headroom("root.shared", "sue-1", sue) == {"memory": 25 * G, "vcore": 5000}
    assert m.increase_tracked_resource("root.shared", "sue-1", R(vcore=5000, memory=20 * G), sue)
    assert not m.increase_tracked_resource("root.other", "sue-2", R(vcore=1), sue)
    assert not m.increase_tracked_resource("root.other", "sue-2", R(memory=5 * G + 1), sue)
    assert m.increase_tracked_resource("root.other", "sue-2", R(memory=5 * G), sue)


def test_sue_in_development_is_also_bound_by_the_group(m: Manager) -> None:
    sue = ug("sue", "development")
    assert m.increase_tracked_resource("root.shared", "dev-x", R(vcore=1000), ug("dev0", "development"))
    for i in range(8):
        assert m.increase_tracked_resource("root.shared", f"m{i}", R(memory=10 * G), DEV(f"mem{i}"))
    # user 25G/5 vs group 100G-80G / 10-1 vcore
    assert m.headroom("root.shared", "sue-1", sue) == {"memory": 20 * G, "vcore": 5000}
    assert m.increase_tracked_resource("root.shared", "sue-1", R(vcore=5000), sue)
    assert m.get_group_resources("development") == {"vcore": 6000, "memory": 80 * G}


def test_a_development_member_gets_the_user_catch_all_and_the_group_limit(m: Manager) -> None:
    bob = ug("bob", "development")
    assert m.headroom("root.shared", "bob-1", bob) == {"memory": 10 * G, "vcore": 1000}
    assert m.increase_tracked_resource("root.shared", "bob-1", R(vcore=1000), bob)
    assert not m.increase_tracked_resource("root.shared", "bob-2", R(vcore=1), bob)
    assert m.app_group("bob-1", bob) == "development"
    # ten members of development fill the group's 10 vcore; the eleventh is refused by the group
    for i in range(9):
        assert m.increase_tracked_resource("root.shared", f"d{i}", R(vcore=1000), DEV(f"dev{i}"))
    refusal = m.explain_increase("root.shared", "d-last", R(vcore=1000), DEV("dev-last"))
    assert [(e.kind, e.name, e.queue_path) for e in refusal] == [("group", "development", "root")]
    assert not m.increase_tracked_resource("root.shared", "d-last", R(vcore=1000), DEV("dev-last"))


def test_a_test_member_has_a_separate_group_budget(m: Manager) -> None:
    for i in range(10):
        assert m.increase_tracked_resource("root.shared", f"d{i}", R(vcore=1000), DEV(f"dev{i}"))
    tess = ug("tess", "test")
    assert m.headroom("root.shared", "t-1", tess) == {"memory": 10 * G, "vcore": 1000}
    assert m.increase_tracked_resource("root.shared", "t-1", R(vcore=1000), tess)
    assert m.get_group_resources("test") == {"vcore": 1000}
    assert m.get_group_resources("development") == {"vcore": 10_000}


def test_a_member_of_development_and_test_is_tracked_against_development(m: Manager) -> None:
    """G-3: the first configured group in config order, whatever the user's own order."""
    both = ug("duo", "test", "development")
    m.increase_tracked_resource("root.shared", "duo-1", R(vcore=1), both)
    assert m.app_group("duo-1", both) == "development"


def test_another_user_counts_toward_the_cumulative_wildcard_group(m: Manager) -> None:
    for i in range(10):
        assert m.increase_tracked_resource("root.other", f"o{i}", R(vcore=1000), ug(f"other{i}", "sales"))
    assert m.get_group_resources("*") == {"vcore": 10_000}
    carl = ug("carl", "marketing")
    assert m.headroom("root.other", "c-1", carl) == {"memory": 10 * G, "vcore": 0}
    refusal = m.explain_increase("root.other", "c-1", R(vcore=1000), carl)
    assert [(e.kind, e.name) for e in refusal] == [("group", "*")]
    assert not m.increase_tracked_resource("root.other", "c-1", R(vcore=1000), carl)
    # the user catch-all is per user: carl alone would be fine
    assert m.increase_tracked_resource("root.other", "c-1", R(memory=G), carl)


def test_a_user_with_no_groups_gets_only_the_user_catch_all(m: Manager) -> None:
    for i in range(10):
        m.increase_tracked_resource("root.other", f"o{i}", R(vcore=1000), ug(f"other{i}", "sales"))
    nog = ug("nogroups")
    assert m.headroom("root.shared", "n-1", nog) == {"memory": 10 * G, "vcore": 1000}
    assert m.increase_tracked_resource("root.shared", "n-1", R(vcore=1000, memory=10 * G), nog)
    assert m.app_group("n-1", nog) is None
    assert m.get_group_resources("*") == {"vcore": 10_000}
    assert not m.increase_tracked_resource("root.shared", "n-1", R(memory=1), nog)


def test_rest_view_of_the_example(m: Manager) -> None:
    m.increase_tracked_resource("root.shared", "sue-1", R(vcore=2000), ug("sue"))
    m.increase_tracked_resource("root.shared", "bob-1", R(vcore=1000), ug("bob", "development"))
    users = m.users_usage()
    assert [u["userName"] for u in users] == ["bob", "sue"]
    assert users[1]["queues"]["maxResources"] == {"memory": 25 * G, "vcore": 5000}
    assert users[0]["queues"]["maxResources"] == {"memory": 10 * G, "vcore": 1000}
    assert users[0]["groups"] == {"bob-1": "development"}
    assert "groups" not in users[1]
    groups = m.groups_usage()
    assert groups == [{"groupName": "development", "applications": ["bob-1"], "queues": {
        "queuePath": "root", "resourceUsage": {"vcore": 1000}, "runningApplications": ["bob-1"],
        "maxResources": {"memory": 100 * G, "vcore": 10_000},
        "children": [{"queuePath": "root.shared", "resourceUsage": {"vcore": 1000},
                      "runningApplications": ["bob-1"]}]}}]
