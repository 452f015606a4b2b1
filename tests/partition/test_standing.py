"""Standing (issue 17 #1): one answer to "what is my share and why does my job wait" for a queue, a
user, a group and an elastic quota — borrowed and from whom, lent, limits, the waiting asks with
their reasons and position in the scheduling order."""

from __future__ import annotations

import pytest

import quotaplane as qp
from tests.partition.helpers import Clock
from tests.preemption.helpers import cpu, seed_002_config

CONFIG = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      resources: {guaranteed: {vcore: 2}, max: {vcore: 8}}
    - name: b
      resources: {guaranteed: {vcore: 4}}
      limits:
      - limit: bob
        users: [bob]
        maxresources: {vcore: 1}
"""
ALICE = qp.UserGroup("alice", ("dev",))
BOB = qp.UserGroup("bob", ("ops",))


def _world() -> qp.Partition:
    p = qp.Scheduler.from_yaml(CONFIG, clock=Clock()).partition("default")
    p.add_node("n1", cpu(10))
    p.add_application("a1", ALICE, queue="root.a")
    p.add_application("b1", BOB, queue="root.b")
    assert p.allocate("a1", "k1", cpu(5))           # a: 3 above its guarantee of 2
    assert p.allocate("b1", "k2", cpu(1))           # b: uses 1 of its 4
    return p


def test_a_queue_that_borrows_says_how_much_and_from_whom() -> None:
    q = _world().standing("queue", "root.a")["queue"]
    assert (q["guaranteed"], q["used"], q["borrowed"]) == ({"vcore": 2000}, {"vcore": 5000}, {"vcore": 3000})
    assert q["lenders"] == [{"queue": "root.b", "unused": {"vcore": 3000}}]
    assert q["lent"] == {}


def test_a_queue_whose_guarantee_others_use_says_what_it_lends() -> None:
    q = _world().standing("queue", "root.b")["queue"]
    assert q["borrowed"] == {} and q["lenders"] == []
    assert q["lent"] == {"vcore": 3000}              # its 3 unused, all used by a's borrowing


def test_a_user_sees_limits_queues_and_why_each_ask_waits_in_order() -> None:
    p = _world()
    p.add_ask("b1", "w1", cpu(1))                    # bob's limit is 1: waits
    p.add_ask("a1", "w2", cpu(4))                    # a's max is 8: waits
    st = p.standing("user", "bob")
    assert [(x["queue"], x["max"]) for x in st["limits"] if x["max"]] == [("root.b", {"vcore": 1000})]
    assert [w["allocationKey"] for w in st["waiting"]] == ["w1"]
    (w,) = st["waiting"]
    assert [r["code"] for r in w["reasons"]] == ["user.maxresources"]
    both = [p.standing("user", u)["waiting"][0]["position"] for u in ("alice", "bob")]
    assert sorted(both) == [1, 2]                    # positions in one scheduling order
    assert p.standing("group", "ops")["waiting"][0]["allocationKey"] == "w1"


def test_an_elastic_quota_shows_min_runtime_borrowed_and_lent() -> None:
    """Seed 002: team-a borrows 6 above its min of 1; team-b, min 4, lends what it does not use."""
    s = qp.Scheduler.from_yaml(seed_002_config(), clock=Clock())
    p = s.partition("default")
    p.add_node("n1", cpu(8))
    p.add_application("a", ALICE, queue="root.q", tags={"namespace": "team-a"})
    p.add_application("b", ALICE, queue="root.q", tags={"namespace": "team-b"})
    for i in range(7):
        assert p.allocate("a", f"a{i}", cpu(1))
    assert p.allocate("b", "b0", cpu(1))
    p.add_ask("b", "b1", cpu(1))
    a = p.standing("quota", "team-a")["elastic"]
    assert (a["min"], a["used"], a["borrowed"]) == ({"vcore": 1000}, {"vcore": 7000}, {"vcore": 6000})
    assert a["lenders"] == [{"quota": "team-b", "unused": {"vcore": 3000}}]
    b = p.standing("quota", "team-b")
    assert b["elastic"]["lent"] == {"vcore": 3000} and b["elastic"]["waiting"] == {"vcore": 1000}
    assert [w["allocationKey"] for w in b["waiting"]] == ["b1"]
    assert "runtime" in b["elastic"]


def test_unknown_names_and_kinds() -> None:
    p = _world()
    with pytest.raises(qp.NotFoundError):
        p.standing("queue", "root.nope")
    with pytest.raises(qp.NotFoundError):
        p.standing("user", "nobody-here")
    with pytest.raises(ValueError, match="queue, user, group, quota"):
        p.standing("team", "x")


def test_the_applications_of_a_user_or_group_are_indexed_as_the_scan_finds_them() -> None:
    """Issue 39: the standing of a user or a group reads its own applications from an index kept as
    applications come and go (and rebuilt by a replay), not from a look at every application."""
    from quotaplane.cluster import Scheduler
    from quotaplane.config.identity import UserGroup
    from quotaplane.journal import MemoryJournal
    from tests.partition.helpers import CONFIG as PLAIN

    journal = MemoryJournal()
    p = Scheduler.from_yaml(PLAIN, store=journal, clock=Clock()).partition("default")
    users = [UserGroup("alice", ["dev"]), UserGroup("bob", ["dev", "ops"]), UserGroup("carol", [])]
    for i in range(12):
        p.add_application(f"app{i}", users[i % 3], queue="root.default")
    for i in (1, 4, 5, 9):
        p.remove_application(f"app{i}")
    p.add_application("app4", users[0], queue="root.default")      # back, with another owner

    def scan(state: object, kind: str, name: str) -> set[str]:
        apps = state.apps.values()  # type: ignore[attr-defined]
        return {a.application_id for a in apps
                if (a.user.user == name if kind == "user" else name in a.user.groups)}

    again = Scheduler.from_yaml(PLAIN, store=journal, clock=Clock()).partition("default")
    for part in (p, again):
        for kind, name in [("user", "alice"), ("user", "bob"), ("user", "carol"), ("user", "nobody"),
                           ("group", "dev"), ("group", "ops"), ("group", "none")]:
            assert part.state.owners.of(kind, name) == scan(part.state, kind, name), (kind, name)
    assert p.state.owners.of("user", "alice") == {"app0", "app3", "app6", "app4"}
    assert p.state.owners.of("group", "ops") == {"app7", "app10"}


def _gpu_world() -> qp.Partition:
    """examples/gpu-flavors.yaml: training is guaranteed 8 A100s; inference 4 H100s."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "examples" / "gpu-flavors.yaml").read_text()
    p = qp.Scheduler.from_yaml(text, clock=Clock()).partition("default")
    for node, product in (("a1", "NVIDIA-A100-SXM4-80GB"), ("h1", "NVIDIA-H100-80GB-HBM3"),
                          ("a2", "NVIDIA-A100-SXM4-80GB")):
        p.add_node(node, {"nvidia.com/gpu": 8}, labels={"nvidia.com/gpu.product": product})
    p.add_application("t", ALICE, queue="root.training")
    assert p.allocate("t", "k1", {"nvidia.com/gpu": 4}).flavors == {"nvidia.com/gpu": "a100"}
    assert p.allocate("t", "k2", {"nvidia.com/gpu": 4}).flavors == {"nvidia.com/gpu": "a100"}
    return p


def test_a_flavored_queue_within_each_flavors_guarantee_borrows_nothing() -> None:
    """8 A100s against a guarantee of 8 A100s: the plain name's 8 (the sum of its flavors) is not
    borrowed, and no lender is named (borrowing is per flavor and resource, KQ)."""
    q = _gpu_world().standing("queue", "root.training")["queue"]
    assert q["used"] == {"nvidia.com/gpu": 8, "nvidia.com/gpu@a100": 8}
    assert (q["borrowed"], q["lenders"]) == ({}, [])


def test_a_flavored_queue_borrows_per_flavor_and_names_lenders_of_that_flavor_only() -> None:
    p = _gpu_world()
    assert p.allocate("t", "k3", {"nvidia.com/gpu": 2}).flavors == {"nvidia.com/gpu": "a100"}
    q = p.standing("queue", "root.training")["queue"]
    assert q["borrowed"] == {"nvidia.com/gpu": 2, "nvidia.com/gpu@a100": 2}
    assert q["lenders"] == []                        # inference's unused H100s are not what it borrows
    p.add_application("i", BOB, queue="root.inference")
    assert p.allocate("i", "k4", {"nvidia.com/gpu": 1}).flavors == {"nvidia.com/gpu": "h100"}
    assert p.standing("queue", "root.inference")["queue"]["borrowed"] == {}
