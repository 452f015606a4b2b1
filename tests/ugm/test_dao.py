"""REST shapes of ``/usage/users`` and ``/usage/groups`` (reference §2.1, §2.2; decision U15)."""

from __future__ import annotations

import json

from quotaplane.ugm import Manager

from .helpers import R, from_yaml, lim, manager, ug

REFERENCE_CONFIG = """
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: default
            limits:
              - limit: "group"
                groups: [testgroup]
                maxresources: {cpu: "200"}
"""


def test_section_2_1_user_and_group_examples_exactly() -> None:
    m = from_yaml(REFERENCE_CONFIG)
    assert m.increase_tracked_resource("root.default", "app-1", R(vcore=1), ug("testuser", "testgroup"))
    user = json.loads("""{"userName":"testuser","groups":{"app-1":"testgroup"},
     "queues":{"queuePath":"root","resourceUsage":{"vcore":1},"runningApplications":["app-1"],
       "children":[{"queuePath":"root.default","resourceUsage":{"vcore":1},"runningApplications":["app-1"]}]}}""")
    group = json.loads("""{"groupName":"testgroup","applications":["app-1"],
     "queues":{"queuePath":"root","resourceUsage":{"vcore":1},"runningApplications":["app-1"],
       "children":[{"queuePath":"root.default","resourceUsage":{"vcore":1},"maxResources":{"cpu":200},
                    "runningApplications":["app-1"]}]}}""")
    assert m.user_usage("testuser") == user
    assert m.group_usage("testgroup") == group
    assert m.users_usage() == [user]
    assert m.groups_usage() == [group]
    json.dumps(m.users_usage())          # plain JSON data


def test_section_2_2_limits_shown_at_the_queue_where_they_apply() -> None:
    m = manager({"root.parent": [lim(users=["testuser"], apps=3)],
                 "root.parent.child1": [lim(users=["testuser"], res={"first": 123}, apps=2)]})
    usage = R(mem=10_000_000, vcore=10_000)
    assert m.increase_tracked_resource("root.parent.child1", "app", usage, ug("testuser"))
    assert m.user_usage("testuser") == {
        "userName": "testuser",
        "queues": {
            "queuePath": "root", "resourceUsage": {"mem": 10_000_000, "vcore": 10_000},
            "runningApplications": ["app"],
            "children": [{
                "queuePath": "root.parent", "resourceUsage": {"mem": 10_000_000, "vcore": 10_000},
                "runningApplications": ["app"], "maxApplications": 3,
                "children": [{
                    "queuePath": "root.parent.child1", "resourceUsage": {"mem": 10_000_000, "vcore": 10_000},
                    "runningApplications": ["app"], "maxResources": {"first": 123}, "maxApplications": 2,
                }],
            }],
        },
    }


def test_lists_are_empty_lists_when_nothing_is_tracked() -> None:
    m = Manager()
    assert m.users_usage() == []
    assert m.groups_usage() == []
    assert m.user_usage("nobody") is None
    assert m.group_usage("nobody") is None


def test_empty_fields_are_omitted() -> None:
    m = manager({"root": [lim(groups=["dev"], res={"vcore": 10})]})
    # no group link (user has no groups), zero usage, no limits on the user
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("sue"))
    m.decrease_tracked_resource("root.a", "app-1", R(vcore=1), False, ug("sue"))
    assert m.user_usage("sue") == {
        "userName": "sue",
        "queues": {"queuePath": "root", "runningApplications": ["app-1"],
                   "children": [{"queuePath": "root.a", "runningApplications": ["app-1"]}]},
    }


def test_none_group_links_are_not_listed_and_wildcard_group_is_shown() -> None:
    m = manager({"root": [lim(groups=["dev", "*"], res={"vcore": 100})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=1), ug("sue"))            # no groups → no link
    m.increase_tracked_resource("root.a", "app-2", R(vcore=1), ug("sue", "sales"))   # → "*"
    assert m.user_usage("sue")["groups"] == {"app-2": "*"}  # type: ignore[index]
    star = m.group_usage("*")
    assert star is not None and star["groupName"] == "*" and star["applications"] == ["app-2"]
    assert star["queues"]["maxResources"] == {"vcore": 100}


def test_output_is_sorted_and_deterministic() -> None:
    m = Manager()
    for name in ("zed", "amy", "mia"):
        for q in ("root.z", "root.b", "root.m"):
            m.increase_tracked_resource(q, f"{name}-{q}", R(vcore=1), ug(name))
    users = m.users_usage()
    assert [u["userName"] for u in users] == ["amy", "mia", "zed"]
    assert [c["queuePath"] for c in users[0]["queues"]["children"]] == ["root.b", "root.m", "root.z"]
    assert users[0]["queues"]["runningApplications"] == sorted(users[0]["queues"]["runningApplications"])
    assert json.dumps(m.users_usage()) == json.dumps(users)
