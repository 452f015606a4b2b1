"""The admission fast path (issue 7): validated batches and the one-walk user/group admission (Q2, U1)."""

from __future__ import annotations

import pytest

from quotaplane import Resource
from quotaplane.admission import AllocationSpec
from quotaplane.config.identity import UserGroup
from quotaplane.errors import ConflictError, NotFoundError
from quotaplane.partition import Partition
from quotaplane.policies.ugm import UgmPolicy
from quotaplane.policy import AdmissionRequest

from .helpers import scheduler

ALICE = UserGroup("alice", ["dev"])
BOB = UserGroup("bob", ["ops"])


def _part() -> Partition:
    p = scheduler().partition("default")
    p.add_node("n1", Resource({"vcore": 50000, "memory": 1000}))
    p.add_application("app1", ALICE, queue="root.a")
    p.add_application("app2", BOB, queue="root.default")
    return p


def _entry(app: str, key: str, vcore: int) -> AllocationSpec:
    return AllocationSpec(app, key, Resource({"vcore": vcore}))


def test_q2_user_limit_refusal_after_the_other_checks_pass_changes_nothing() -> None:
    """Q2/U1: only the user limit refuses (queue fits): the user/group step refuses atomically,
    the answer names the user limit with its shortfall and nothing changed (no queue usage either)."""
    p = _part()
    assert p.allocate("app1", "k1", Resource({"vcore": 3000}))
    before = p.dump_state()
    d = p.allocate("app1", "k2", Resource({"vcore": 2000}))
    assert not d.allocated
    assert [(v.policy, v.code, v.path) for v in d.reasons] == [("user", "user.maxresources", "root.a")]
    assert d.reasons[0].resource == Resource({"vcore": 1000})
    assert p.dump_state() == before
    assert p.queues.queue("root.a").allocated == Resource({"vcore": 3000})
    assert p.allocate("app1", "k2", Resource({"vcore": 1000}))       # what fits is still admitted


def test_q2_queue_refusal_still_lists_the_user_and_group_violations() -> None:
    """Q2: when a queue check fails, the user/group limits are still checked and listed, in order."""
    p = _part()
    before = p.dump_state()
    d = p.allocate("app1", "k1", Resource({"vcore": 12000}))
    assert [v.code for v in d.reasons] == ["queue.max", "user.maxresources", "group.maxresources"]
    assert p.dump_state() == before


def test_validated_batch_gives_the_same_decisions_and_state_as_allocate_batch() -> None:
    """allocate_specs (the REST path) is allocate_batch without the second validation."""
    entries = [("app1", "a1", 2000), ("app2", "b1", 5000), ("app1", "a2", 3000),   # a2: user limit
               ("app1", "a3", 2000), ("app2", "b2", 60000), ("app2", "b3", 1)]    # b2: root capacity
    p, q = _part(), _part()
    got = p.allocate_batch([{"application_id": a, "allocation_key": k, "resource": {"vcore": v}}
                            for a, k, v in entries])
    fast = q.allocate_specs([_entry(a, k, v) for a, k, v in entries])
    assert [d.to_dict() for d in fast] == [d.to_dict() for d in got]
    assert [d.allocated for d in fast] == [True, True, False, True, False, True]
    assert q.dump_state() == p.dump_state()


def test_validated_batch_refuses_before_anything_changes() -> None:
    """An unknown application or a duplicate key anywhere in the batch: an error, nothing admitted."""
    p = _part()
    before = p.dump_state()
    with pytest.raises(NotFoundError):
        p.allocate_specs([_entry("app1", "a1", 1000), _entry("nope", "x", 1)])
    with pytest.raises(ConflictError):
        p.allocate_specs([_entry("app1", "a1", 1000), _entry("app2", "a1", 1)])
    assert p.dump_state() == before


def test_ugm_policy_admit_is_atomic_and_refusal_says_why() -> None:
    """U1: UgmPolicy.admit tracks or refuses without a change; refusal lists the exceeded limits."""
    p = _part()
    ugm = UgmPolicy(p.ugm)
    req = AdmissionRequest("app1", "k", "root.a", ALICE, Resource({"vcore": 5000}), first_allocation=True)
    before = p.ugm.dump_state()
    assert ugm.admit(req) is False
    assert p.ugm.dump_state() == before
    assert [v.code for v in ugm.refusal(req)] == ["user.maxresources"]
    ok = AdmissionRequest("app1", "k", "root.a", ALICE, Resource({"vcore": 1000}), first_allocation=True)
    assert ugm.admit(ok) is True
    assert p.ugm.dump_state() != before


def test_single_allocate_and_release_equal_their_batch_twins() -> None:
    """allocate() and release() skip the batch bookkeeping (the common path); they must decide, change
    and journal exactly what allocate_batch / release_batch of one entry do."""
    from quotaplane.cluster import Scheduler
    from quotaplane.journal import MemoryJournal
    from tests.partition.helpers import CONFIG, Clock

    entries = [("app1", "a1", 2000), ("app2", "b1", 5000), ("app1", "a2", 3000),   # a2: user limit
               ("app2", "b2", 60000), ("app1", "a3", 1000)]                      # b2: root capacity
    runs = []
    for batch in (False, True):
        j = MemoryJournal()
        s = Scheduler.from_yaml(CONFIG, store=j, clock=Clock())
        p = s.partition("default")
        p.add_node("n1", Resource({"vcore": 50000}))
        p.add_application("app1", ALICE, queue="root.a")
        p.add_application("app2", BOB, queue="root.default")
        decisions = []
        for app, key, vcore in entries:
            if batch:
                d = p.allocate_batch([{"application_id": app, "allocation_key": key,
                                       "resource": {"vcore": vcore}}])[0]
            else:
                d = p.allocate(app, key, Resource({"vcore": vcore}))
            decisions.append(d.to_dict())
        for key in ("a1", "b1"):
            if batch:
                p.release_batch([key])
            else:
                p.release(key)
        runs.append((decisions, p.dump_state(), [ev for _, ev in j.read("default")]))
    assert runs[0] == runs[1]
    assert [d["allocated"] for d in runs[0][0]] == [True, True, False, False, True]
