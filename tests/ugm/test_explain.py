"""``explain_increase``: every limit an increase would exceed, user and group, every level (U1)."""

from __future__ import annotations

import dataclasses

import pytest

from quotaplane.resources import Resource
from quotaplane.ugm import LimitExceeded

from .helpers import R, lim, manager, partition, ug


def test_explain_lists_every_exceeded_limit_user_then_group_leaf_to_root() -> None:
    m = manager({
        "root": [lim(users=["*"], res={"vcore": 3000}, apps=1),
                 lim(groups=["dev"], res={"vcore": 2000}, apps=1)],
        "root.a.b": [lim(users=["sue"], res={"vcore": 1000, "memory": 10})],
    })
    sue = ug("sue", "dev")
    assert m.increase_tracked_resource("root.a.b", "app-1", R(vcore=500), sue)
    before = m.dump_state()
    out = m.explain_increase("root.a.b", "app-2", R(vcore=2800, memory=20), sue)
    assert m.dump_state() == before
    assert [(e.kind, e.name, e.limit, e.queue_path) for e in out] == [
        ("user", "sue", "maxresources", "root.a.b"),
        ("user", "sue", "maxresources", "root"),
        ("user", "sue", "maxapplications", "root"),
        ("group", "dev", "maxresources", "root"),
        ("group", "dev", "maxapplications", "root"),
    ]
    leaf = out[0]
    assert leaf.limit_resources == {"vcore": 1000, "memory": 10}
    assert leaf.usage == {"vcore": 500}
    assert leaf.shortfall == {"vcore": 2300, "memory": 10}
    assert not leaf.wildcard
    assert leaf.code == "user.maxresources"
    root_user = out[1]
    assert root_user.wildcard and root_user.shortfall == {"vcore": 300}
    assert out[2].shortfall is None and out[2].limit_applications == 1 and out[2].running_applications == 1
    assert out[3].shortfall == {"vcore": 1300}
    assert out[4].code == "group.maxapplications"
    for e in out:
        assert e.message.endswith(".")
        assert e.name in e.message and e.queue_path in e.message
    assert not m.increase_tracked_resource("root.a.b", "app-2", R(vcore=2800, memory=20), sue)


def test_explain_is_empty_when_the_increase_fits() -> None:
    m = manager({"root": [lim(users=["*"], res={"vcore": 3000})]})
    assert m.explain_increase("root.a", "app-1", R(vcore=3000), ug("sue")) == []
    assert m.increase_tracked_resource("root.a", "app-1", R(vcore=3000), ug("sue"))
    assert m.explain_increase("root.a", "app-1", R(memory=1), ug("sue")) == []


def test_explain_for_the_wildcard_group_names_star() -> None:
    m = manager({"root": [lim(groups=["dev", "*"], res={"vcore": 10})]})
    out = m.explain_increase("root.x", "app-1", R(vcore=11), ug("eve", "sales"))
    assert [(e.kind, e.name, e.shortfall) for e in out] == [("group", "*", Resource({"vcore": 1}))]
    assert out[0].message.startswith("group '*'")


def test_explain_shortfall_with_negative_headroom_is_request_minus_headroom() -> None:
    m = manager({"root": [lim(users=["*"], res={"vcore": 4000})]})
    m.increase_tracked_resource("root.a", "app-1", R(vcore=3000), ug("sue"))
    m.update_config(partition({"root": [lim(users=["*"], res={"vcore": 1000})]}))
    (e,) = m.explain_increase("root.a", "app-1", R(vcore=500), ug("sue"))
    assert e.shortfall == {"vcore": 2500}        # 500 - (1000 - 3000)


def test_explain_zero_limit_blocks_type() -> None:
    m = manager({"root": [lim(users=["*"], res={"memory": 100, "gpu": 0})]})
    (e,) = m.explain_increase("root.a", "app-1", R(gpu=1, memory=5), ug("sue"))
    assert e.shortfall == {"gpu": 1}


def test_explain_on_untracked_user_uses_config_and_creates_nothing() -> None:
    m = manager({"root.a": [lim(users=["*"], res={"vcore": 1})]})
    (e,) = m.explain_increase("root.a.b", "app-1", R(vcore=2), ug("sue"))
    assert e.queue_path == "root.a" and e.usage == Resource()
    assert m.tracked_users() == []


def test_limit_exceeded_is_frozen() -> None:
    m = manager({"root": [lim(users=["*"], res={"vcore": 1})]})
    (e,) = m.explain_increase("root.a", "app-1", R(vcore=2), ug("sue"))
    assert isinstance(e, LimitExceeded)
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.name = "x"  # type: ignore[misc]
