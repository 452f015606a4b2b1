"""QueuePolicy: the queue tree behind the QuotaPolicy protocol (codes queue.max, root.capacity,
queue.maxapplications; path = the queue where the limit is set; resource = the shortfall)."""

from __future__ import annotations

from quotaplane.config.identity import UserGroup
from quotaplane.policies.queue import QueuePolicy
from quotaplane.policy import AdmissionRequest, QuotaPolicy
from quotaplane.queues import QueueTree
from quotaplane.resources import Resource
from tests.queues.helpers import partition

USER = UserGroup("alice")


def make() -> QueuePolicy:
    tree = QueueTree(partition({"submitacl": "*", "queues": [
        {"name": "p", "max": {"vcore": 4}, "maxapplications": 1, "queues": [
            {"name": "a", "max": {"vcore": 2}, "maxapplications": 1}]}]}))
    tree.set_cluster_resource({"vcore": 3000})
    return QueuePolicy(tree)


def req(app: str, key: str, vcore: int, *, first: bool) -> AdmissionRequest:
    return AdmissionRequest(application_id=app, allocation_key=key, queue_path="root.p.a", user=USER,
                            resource=Resource({"vcore": vcore}), first_allocation=first)


def test_is_a_quota_policy_named_queue() -> None:
    policy = make()
    assert isinstance(policy, QuotaPolicy) and policy.name == "queue"


def test_check_lists_every_violation_with_shortfall() -> None:
    policy = make()
    found = policy.check(req("app1", "k1", 5000, first=False))
    assert [(v.policy, v.code, v.path) for v in found] == [
        ("queue", "queue.max", "root.p.a"), ("queue", "queue.max", "root.p"),
        ("queue", "root.capacity", "root")]
    assert [v.resource for v in found] == [{"vcore": 3000}, {"vcore": 1000}, {"vcore": 2000}]
    assert policy.check(req("app1", "k1", 2000, first=True)) == []


def test_first_allocation_checks_maxapplications() -> None:
    policy = make()
    first = req("app1", "k1", 500, first=True)
    assert policy.apply(first) == []
    tree = policy.tree
    assert list(tree.root.running_apps) == ["app1"]
    found = policy.check(req("app2", "k2", 500, first=True))
    assert [(v.code, v.path) for v in found] == [("queue.maxapplications", "root.p.a"),
                                                 ("queue.maxapplications", "root.p")]
    assert found[0].resource is None
    # the second allocation of a running app is not counted again
    assert policy.check(req("app1", "k3", 500, first=False)) == []


def test_undo_reverses_apply_exactly() -> None:
    policy = make()
    before = policy.tree.dump_state()
    r = req("app1", "k1", 700, first=True)
    policy.apply(r)
    assert policy.tree.dump_state() != before
    policy.undo(r)
    assert policy.tree.dump_state() == before


def test_release_stops_the_app_with_its_last_allocation() -> None:
    policy = make()
    a, b = req("app1", "k1", 700, first=True), req("app1", "k2", 300, first=False)
    policy.apply(a)
    policy.apply(b)
    policy.release(a, last_allocation=False)
    q = policy.tree.queue("root.p.a")
    assert q is not None and q.allocated == {"vcore": 300} and "app1" in q.running_apps
    policy.release(b, last_allocation=True)
    assert q.allocated == {} and not q.running_apps and not policy.tree.root.running_apps
