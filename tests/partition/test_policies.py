"""The ugm admission adapter (policies/ugm.py) and the extension registry (policies/registry.py)."""

from __future__ import annotations

from typing import Any

import pytest

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.config.model import LimitConfig, PartitionConfig, QueueConfig
from quotaplane.policies import registry
from quotaplane.policies.ugm import UgmPolicy
from quotaplane.policy import AdmissionRequest, QuotaPolicy, Violation
from quotaplane.ugm import Manager


def _config() -> PartitionConfig:
    leaf = QueueConfig(name="a", path="root.a", limits=(
        LimitConfig(limit="u", users=("alice",), max_resources=Resource({"vcore": 1000}), max_applications=1),
        LimitConfig(limit="g", groups=("dev",), max_resources=Resource({"vcore": 1500})),
    ))
    return PartitionConfig(name="default", root=QueueConfig(name="root", path="root", queues=(leaf,)))


def _req(app: str, vcore: int, *, first: bool = True, user: str = "alice") -> AdmissionRequest:
    return AdmissionRequest(app, f"{app}-k", "root.a", UserGroup(user, ["dev"]), Resource({"vcore": vcore}),
                            first_allocation=first)


def _policy() -> UgmPolicy:
    m = Manager()
    m.update_config(_config())
    return UgmPolicy(m)


def test_u1_check_maps_every_exceeded_limit_to_a_violation() -> None:
    """U1/H-2: a request over both the user and the group limit lists both, with codes and shortfall."""
    p = _policy()
    found = p.check(_req("app1", 2000))
    codes = sorted(v.code for v in found)
    assert codes == ["group.maxresources", "user.maxresources"]
    user_v = next(v for v in found if v.code == "user.maxresources")
    assert user_v.policy == "user" and user_v.path == "root.a"
    assert user_v.resource == Resource({"vcore": 1000})
    group_v = next(v for v in found if v.code == "group.maxresources")
    assert group_v.policy == "group" and group_v.resource == Resource({"vcore": 500})
    assert p.manager.get_user_resources(UserGroup("alice", ["dev"])) is None   # check changed nothing


def test_user_maxapplications_violation_for_second_app() -> None:
    """A-1/H-3: the second running application of alice exceeds user maxapplications 1."""
    p = _policy()
    assert p.apply(_req("app1", 100)) == []
    found = p.check(_req("app2", 100))
    assert [(v.policy, v.code, v.path) for v in found] == [("user", "user.maxapplications", "root.a")]
    assert found[0].resource is None
    assert p.check(_req("app1", 100, first=False)) == []       # an already running app is not blocked


def test_apply_refuses_atomically_and_undo_restores_exactly() -> None:
    """U1: apply refuses with the violations and changes nothing; undo of a first apply removes the app."""
    p = _policy()
    before = p.dump_state()
    refused = p.apply(_req("app1", 5000))
    assert refused and all(isinstance(v, Violation) for v in refused)
    assert p.dump_state() == before
    req = _req("app1", 600)
    assert p.apply(req) == []
    assert p.manager.get_user_resources(UserGroup("alice", ["dev"])) == Resource({"vcore": 600})
    p.undo(req)
    assert p.dump_state() == before


def test_release_last_allocation_ends_running_count() -> None:
    """Seed 001 running state exit: releasing the last allocation removes the app from the count."""
    p = _policy()
    p.apply(_req("app1", 300))
    p.apply(_req("app1", 200, first=False))
    p.release(_req("app1", 300, first=False), last_allocation=False)
    assert p.check(_req("app2", 100)) != []         # app1 still running: maxapplications 1 reached
    p.release(_req("app1", 200, first=False), last_allocation=True)
    assert p.check(_req("app2", 100)) == []


class _Dummy(QuotaPolicy):
    name = "dummy"

    def __init__(self, config: PartitionConfig) -> None:
        self.config = config

    def check(self, request: AdmissionRequest) -> list[Violation]:
        return []

    def apply(self, request: AdmissionRequest) -> list[Violation]:
        return []

    def undo(self, request: AdmissionRequest) -> None:
        return None

    def release(self, request: AdmissionRequest, *, last_allocation: bool) -> None:
        return None


def test_registry_register_build_and_order() -> None:
    """Extension keys map to builders with an order in the admission path; unknown keys raise."""
    def builder(config: PartitionConfig, ctx: registry.PolicyContext) -> Any:
        assert ctx.partition == "default"
        return _Dummy(config)

    registry.register("dummyext", builder, order=35)
    try:
        keys = dict(registry.registered_keys())
        assert keys["dummyext"] == 35 and keys["elasticquotas"] == 30 and keys["quotatrees"] == 40
        policy, order = registry.build_policy("dummyext", _config(),
                                              registry.PolicyContext("default", lambda: 0.0))
        assert isinstance(policy, _Dummy) and order == 35
    finally:
        registry.unregister("dummyext")
    with pytest.raises(KeyError):
        registry.build_policy("dummyext", _config(), registry.PolicyContext("default", lambda: 0.0))
    with pytest.raises(ValueError):
        registry.register("", builder, order=1)
