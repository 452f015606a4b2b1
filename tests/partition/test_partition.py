"""Partition rules: nodes, applications, the one admission path (Q2), releases, ACLs."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from quotaplane import ConflictError, NotFoundError, RejectedError, Resource
from quotaplane.config.identity import UserGroup
from quotaplane.partition import Partition
from quotaplane.policies import registry
from quotaplane.policy import AdmissionRequest, QuotaPolicy, Violation
from tests.partition.helpers import Clock, scheduler

ALICE = UserGroup("alice", ["dev"])
BOB = UserGroup("bob", ["ops"])


def _part() -> Partition:
    p = scheduler().partition("default")
    p.add_node("n1", Resource({"vcore": 50000, "memory": 1000}))
    return p


def test_nodes_set_root_max_and_duplicates_conflict() -> None:
    """Seed 004: the root max is the sum of node capacities; it follows additions and removals."""
    p = scheduler().partition("default")
    assert p.total_capacity() == Resource()
    p.add_node("n1", Resource({"vcore": 2000}))
    p.add_node("n2", {"vcore": 3000, "memory": 10})
    assert p.total_capacity() == Resource({"vcore": 5000, "memory": 10})
    assert p.queues.queue("root").max == Resource({"vcore": 5000, "memory": 10})
    with pytest.raises(ConflictError):
        p.add_node("n1", Resource({"vcore": 1}))
    p.remove_node("n1")
    assert p.total_capacity() == Resource({"vcore": 3000, "memory": 10})
    with pytest.raises(NotFoundError):
        p.remove_node("n1")
    with pytest.raises(ValueError):
        p.add_node("n3", {"vcore": -1})
    assert sorted(p.nodes()) == ["n2"]


def test_root_capacity_refuses_without_nodes() -> None:
    """Q1/M-2: the root is strict against the cluster size (code root.capacity)."""
    p = scheduler().partition("default")
    p.add_application("app1", ALICE, queue="root.a")
    d = p.allocate("app1", "k1", Resource({"vcore": 1000}))
    assert not d.allocated
    assert [(v.policy, v.code, v.path) for v in d.reasons] == [("queue", "root.capacity", "root")]


def test_add_application_places_and_conflicts() -> None:
    p = _part()
    assert p.add_application("app1", ALICE, queue="root.a") == "root.a"
    assert p.add_application("app2", ALICE) == "root.default"        # no rules, no queue: root.default
    app = p.application("app1")
    assert app is not None and app.state == "New" and app.queue_path == "root.a"
    with pytest.raises(ConflictError):
        p.add_application("app1", ALICE, queue="root.a")
    with pytest.raises(ValueError):
        p.add_application("", ALICE)
    assert [a.application_id for a in p.applications()] == ["app1", "app2"]


def test_submit_acl_rejects_and_can_submit_reports_acl_submit() -> None:
    """Queue submit ACL (seed 004): alice may not submit to root.b (submitacl: bob) ... but root's '*'
    allows everyone, and the ACL walks up, so use a config without a root wildcard."""
    text = """
partitions:
- name: default
  queues:
  - name: root
    queues:
    - name: b
      submitacl: bob
"""
    p = scheduler(text).partition("default")
    with pytest.raises(RejectedError):
        p.add_application("app1", ALICE, queue="root.b")
    assert p.application("app1") is None
    d = p.can_submit(ALICE, queue="root.b")
    assert not d.allocated
    assert [(v.policy, v.code, v.path) for v in d.reasons] == [("acl", "acl.submit", "root.b")]
    assert p.can_submit(BOB, queue="root.b").allocated
    assert p.add_application("app2", BOB, queue="root.b") == "root.b"


def test_allocate_counts_queue_and_user_usage() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.a")
    d = p.allocate("app1", "k1", Resource({"vcore": 1000, "memory": 5}))
    assert d.allocated and d.queue == "root.a" and d.allocation_key == "k1"
    assert p.queues.queue("root.a").allocated == Resource({"vcore": 1000, "memory": 5})
    assert p.ugm.get_user_resources(ALICE) == Resource({"vcore": 1000, "memory": 5})
    assert p.ugm.get_group_resources("dev") == Resource({"vcore": 1000, "memory": 5})
    assert p.used_capacity() == Resource({"vcore": 1000, "memory": 5})
    alloc = p.allocation("k1")
    assert alloc is not None and alloc.application_id == "app1" and not alloc.placeholder


def test_duplicate_allocation_key_conflicts_and_counts_nothing_twice() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.a")
    p.add_application("app2", BOB, queue="root.default")
    assert p.allocate("app1", "k1", Resource({"vcore": 1000}))
    before = p.dump_state()
    with pytest.raises(ConflictError):
        p.allocate("app1", "k1", Resource({"vcore": 1000}))
    with pytest.raises(ConflictError):
        p.allocate("app2", "k1", Resource({"vcore": 1000}))
    assert p.dump_state() == before
    with pytest.raises(NotFoundError):
        p.allocate("nope", "k2", Resource({"vcore": 1}))
    with pytest.raises(ValueError):
        p.allocate("app1", "k2", {"vcore": -5})


def test_q2_denial_lists_every_violation_of_every_policy_and_changes_nothing() -> None:
    """Q2: queue max and user and group limits all reported at once; state unchanged."""
    p = _part()
    p.add_application("app1", ALICE, queue="root.a")
    before = p.dump_state()
    d = p.allocate("app1", "k1", Resource({"vcore": 12000}))
    assert not d.allocated
    got = sorted((v.policy, v.code, v.path) for v in d.reasons)
    assert got == [("group", "group.maxresources", "root.a"), ("queue", "queue.max", "root.a"),
                   ("user", "user.maxresources", "root.a")]
    by_code = {v.code: v for v in d.reasons}
    assert by_code["queue.max"].resource == Resource({"vcore": 2000})
    assert by_code["user.maxresources"].resource == Resource({"vcore": 8000})
    assert by_code["group.maxresources"].resource == Resource({"vcore": 6000})
    assert p.dump_state() == before
    assert p.application("app1").state == "New"         # a refusal is no state change


def test_q2_order_queue_then_user_then_group() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.a")
    d = p.allocate("app1", "k1", Resource({"vcore": 12000}))
    assert [v.policy for v in d.reasons] == ["queue", "user", "group"]


def test_what_if_gives_the_same_answer_and_changes_nothing() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.a")
    before = p.dump_state()
    w = p.what_if("app1", Resource({"vcore": 5000}))
    assert not w.allocated and [v.code for v in w.reasons] == ["user.maxresources"]
    assert p.what_if("app1", Resource({"vcore": 3000})).allocated
    assert p.dump_state() == before
    d = p.allocate("app1", "k1", Resource({"vcore": 5000}))
    assert [v.to_dict() for v in d.reasons] == [v.to_dict() for v in w.reasons]


class _Refuser(QuotaPolicy):
    """An extension policy whose check passes but whose apply refuses (tests the undo path)."""

    name = "refuser"

    def __init__(self) -> None:
        self.refuse = True
        self.applied: list[str] = []

    def check(self, request: AdmissionRequest) -> list[Violation]:
        return []

    def apply(self, request: AdmissionRequest) -> list[Violation]:
        if self.refuse:
            return [Violation("refuser", "forest.quota", "t", "refused at apply")]
        self.applied.append(request.allocation_key)
        return []

    def undo(self, request: AdmissionRequest) -> None:
        self.applied.remove(request.allocation_key)

    def release(self, request: AdmissionRequest, *, last_allocation: bool) -> None:
        if request.allocation_key in self.applied:
            self.applied.remove(request.allocation_key)

    def dump_state(self) -> dict[str, Any]:
        return {"applied": sorted(self.applied)}


def test_q2_apply_refusal_undoes_the_applied_policies_in_reverse() -> None:
    """Q2: a later policy refusing at apply undoes queue and ugm; nothing half applied."""
    made: list[_Refuser] = []

    def build(config: Any, ctx: registry.PolicyContext) -> Any:
        made.append(_Refuser())
        return made[-1]

    registry.register("refuserext", build, order=50)
    try:
        base = scheduler().partition("default").config
        cfg = dataclasses.replace(base, extensions={"refuserext": {}})
        p = Partition(cfg, clock=Clock())
        p.add_node("n1", Resource({"vcore": 50000}))
        p.add_application("app1", ALICE, queue="root.a")
        assert [pol.name for pol in p.policies()][-1] == "refuser"
        before = p.dump_state()
        d = p.allocate("app1", "k1", Resource({"vcore": 1000}))
        assert not d.allocated and d.reasons[0].message == "refused at apply"
        assert p.dump_state() == before
        made[0].refuse = False
        assert p.allocate("app1", "k1", Resource({"vcore": 1000}))
        assert made[0].applied == ["k1"]
        p.release("k1")
        assert made[0].applied == []
    finally:
        registry.unregister("refuserext")


def test_release_gives_back_and_unknown_key_is_not_found() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.a")
    p.allocate("app1", "k1", Resource({"vcore": 1000}))
    p.allocate("app1", "k2", Resource({"vcore": 2000}))
    p.release("k1")
    assert p.queues.queue("root.a").allocated == Resource({"vcore": 2000})
    assert p.ugm.get_user_resources(ALICE) == Resource({"vcore": 2000})
    with pytest.raises(NotFoundError):
        p.release("k1")
    p.release("k2")
    assert p.queues.queue("root").allocated == Resource()
    assert p.ugm.get_user_resources(ALICE) is None            # U9: empty tracker cleaned up


def test_queue_maxapplications_counts_from_first_allocation_to_last_release() -> None:
    """Contract: add_application accepts above maxapplications; allocate enforces (seed 001, M-4)."""
    p = _part()
    for app, user in (("a1", BOB), ("a2", BOB), ("a3", BOB)):
        p.add_application(app, user, queue="root.a")
    assert p.allocate("a1", "k1", Resource({"vcore": 100}))
    assert p.allocate("a2", "k2", Resource({"vcore": 100}))
    d = p.allocate("a3", "k3", Resource({"vcore": 100}))
    assert [(v.code, v.path) for v in d.reasons] == [("queue.maxapplications", "root.a")]
    assert p.allocate("a1", "k1b", Resource({"vcore": 100}))     # a running app is never blocked
    p.release("k2")                                              # a2 leaves: Completing
    assert p.application("a2").state == "Completing"
    assert p.allocate("a3", "k3", Resource({"vcore": 100}))
    # a2 restarting (Completing -> Running) is a new entry and is counted again
    d = p.allocate("a2", "k2b", Resource({"vcore": 100}))
    assert [v.code for v in d.reasons] == ["queue.maxapplications"]


def test_user_maxapplications_enforced_at_allocate() -> None:
    p = _part()
    for app in ("a1", "a2", "a3"):
        p.add_application(app, ALICE, queue="root.a")
    text_reasons: list[str] = []
    assert p.allocate("a1", "k1", Resource({"vcore": 100}))
    assert p.allocate("a2", "k2", Resource({"vcore": 100}))
    p.queues.queue("root.a").max_applications = 0                # isolate the user limit
    d = p.allocate("a3", "k3", Resource({"vcore": 100}))
    text_reasons = [v.code for v in d.reasons]
    assert text_reasons == ["user.maxapplications"]


def test_remove_application_releases_everything() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.a")
    p.allocate("app1", "k1", Resource({"vcore": 1000}))
    p.allocate("app1", "k2", Resource({"vcore": 1000}))
    p.remove_application("app1")
    assert p.application("app1") is None and p.allocation("k1") is None and p.allocation("k2") is None
    assert p.queues.queue("root").allocated == Resource()
    assert p.queues.queue("root.a").running_apps == {} or not p.queues.queue("root.a").running_apps
    assert p.ugm.get_user_resources(ALICE) is None
    with pytest.raises(NotFoundError):
        p.remove_application("app1")


def test_dynamic_queue_from_child_template_and_removed_when_empty() -> None:
    """M-6: a queue created by placement takes the parent's child template; dropped when empty."""
    text = """
partitions:
- name: default
  placementrules:
  - name: tag
    value: namespace
    create: true
    parent:
      name: fixed
      value: root.p
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: p
      parent: true
      childtemplate:
        resources:
          max: {vcore: 3}
"""
    p = scheduler(text).partition("default")
    p.add_node("n1", Resource({"vcore": 50000}))
    path = p.add_application("app1", ALICE, tags={"namespace": "team1"})
    assert path == "root.p.team1"
    q = p.queues.queue(path)
    assert q is not None and not q.managed and q.max == Resource({"vcore": 3000})
    d = p.allocate("app1", "k1", Resource({"vcore": 4000}))
    assert [(v.code, v.path) for v in d.reasons] == [("queue.max", "root.p.team1")]
    assert p.allocate("app1", "k1", Resource({"vcore": 2000}))
    p.remove_application("app1")
    assert p.queues.queue(path) is None


def test_allocate_batch_decisions_in_order_one_transaction() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.a")
    seq0 = p.journal.last_seq(p.stream)
    out = p.allocate_batch([
        {"applicationID": "app1", "allocationKey": "k1", "resource": {"vcore": 3000}},
        {"application_id": "app1", "allocation_key": "k2", "resource": {"vcore": 3000}},
        {"applicationID": "app1", "allocationKey": "k3", "resource": {"vcore": 1000}},
    ])
    assert [d.allocated for d in out] == [True, False, True]
    # only admitted ones are events (and the application's new state, noted)
    assert [ev["type"] for _, ev in p.journal.read(p.stream, after=seq0)] == ["allocated", "allocated",
                                                                              "noted"]
    before = p.dump_state()
    with pytest.raises(ConflictError):
        p.allocate_batch([{"applicationID": "app1", "allocationKey": "k9", "resource": {"vcore": 1}},
                          {"applicationID": "app1", "allocationKey": "k9", "resource": {"vcore": 1}}])
    with pytest.raises(NotFoundError):
        p.allocate_batch([{"applicationID": "app1", "allocationKey": "k8", "resource": {"vcore": 1}},
                          {"applicationID": "zzz", "allocationKey": "k7", "resource": {"vcore": 1}}])
    assert p.dump_state() == before


def test_every_change_is_journalled_before_returning() -> None:
    """S1: each acknowledged change is an event in the partition stream when the call returns."""
    p = _part()
    n = p.journal.last_seq(p.stream)
    p.add_application("app1", ALICE, queue="root.a")
    assert p.journal.last_seq(p.stream) == n + 1
    p.allocate("app1", "k1", Resource({"vcore": 1000}))
    assert p.journal.last_seq(p.stream) == n + 3                     # allocated, noted (Starting)
    p.allocate("app1", "k2", Resource({"vcore": 100000}))            # refused: no event
    assert p.journal.last_seq(p.stream) == n + 3
    p.what_if("app1", Resource({"vcore": 1}))
    assert p.journal.last_seq(p.stream) == n + 3
    p.release("k1")
    assert p.journal.last_seq(p.stream) == n + 5                     # released, noted (Completing)
    events = [ev["type"] for _, ev in p.journal.read(p.stream, after=n)]
    assert events == ["app_added", "allocated", "noted", "released", "noted"]


def test_dao_for_the_partitions_endpoint() -> None:
    p = _part()
    p.add_application("app1", ALICE, queue="root.a")
    p.add_application("app2", ALICE, queue="root.a")
    p.allocate("app1", "k1", Resource({"vcore": 1000}))
    info = p.dao()
    assert info["name"] == "default" and info["state"] == "Active" and info["totalNodes"] == 1
    assert info["capacity"] == {"capacity": {"memory": 1000, "vcore": 50000}, "usedCapacity": {"vcore": 1000}}
    assert info["applications"] == {"total": 2, "New": 1, "Starting": 1}
