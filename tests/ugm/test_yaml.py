"""The manager fed through the real config loader (``qp.load_config``): YAML in, limits out."""

from __future__ import annotations

import pytest

import quotaplane as qp
from quotaplane.ugm import Manager

from .helpers import R, from_yaml, ug

HIERARCHY = """
partitions:
  - name: default
    limits:
      - limit: everyone
        users: ["*"]
        maxresources: {vcore: 10, memory: 10Gi}
        maxapplications: 4
    queues:
      - name: root
        queues:
          - name: Parent
            limits:
              - limit: dev
                groups: [dev]
                maxresources: {vcore: 4}
                maxapplications: 2
              - limit: users
                users: ["*"]
                maxresources: {vcore: 3}
                maxapplications: 2
            queues:
              - name: Child
"""


def test_yaml_partition_limits_apply_at_root_and_queue_names_are_lower_case() -> None:
    m = from_yaml(HIERARCHY)
    sue = ug("sue", "dev")
    assert m.headroom("root.parent.child", "app-1", sue) == {"vcore": 3000, "memory": 10 * 2**30}
    assert m.increase_tracked_resource("root.PARENT.child", "app-1", R(vcore=3000), sue)
    assert not m.increase_tracked_resource("root.parent.child", "app-2", R(vcore=1), sue)
    assert m.increase_tracked_resource("root.other", "app-3", R(vcore=7000), sue)
    usage = m.user_usage("sue")
    assert usage is not None
    assert usage["queues"]["maxApplications"] == 4
    parent = next(c for c in usage["queues"]["children"] if c["queuePath"] == "root.parent")
    assert parent["maxResources"] == {"vcore": 3000} and parent["maxApplications"] == 2


def test_yaml_count_limits_at_two_levels() -> None:
    m = from_yaml(HIERARCHY)
    for i in range(2):
        assert m.increase_tracked_resource("root.parent.child", f"p{i}", R(vcore=1), ug(f"u{i}", "dev"))
    refusal = m.explain_increase("root.parent.child", "p2", R(vcore=1), ug("u2", "dev"))
    assert [(e.code, e.name, e.queue_path) for e in refusal] == [
        ("group.maxapplications", "dev", "root.parent")]


def test_yaml_reload_and_a_rejected_config_leaves_the_manager_untouched() -> None:
    m = from_yaml(HIERARCHY)
    m.increase_tracked_resource("root.parent.child", "app-1", R(vcore=2000), ug("sue", "dev"))
    before = m.dump_state()
    only_wildcard_group = HIERARCHY.replace("groups: [dev]", 'groups: ["*"]')
    with pytest.raises(qp.ConfigError):
        m.update_config(qp.load_config(only_wildcard_group).partition("default"))    # V-5
    assert m.dump_state() == before
    relaxed = HIERARCHY.replace("maxresources: {vcore: 3}", "maxresources: {vcore: 9}")
    m.update_config(qp.load_config(relaxed).partition("default"))
    assert m.headroom("root.parent.child", "app-1", ug("sue", "dev")) == {"vcore": 2000,
                                                                          "memory": 10 * 2**30}
    assert m.get_user_resources(ug("sue")) == {"vcore": 2000}


def test_qp_ugm_is_reachable_lazily() -> None:
    assert qp.ugm.Manager is Manager
