"""The admission adapter ``quotaplane.policies.forest.ForestPolicy``, driven with AdmissionRequest objects."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane.config.identity import UserGroup
from quotaplane.forest import Mode
from quotaplane.policies.forest import FOREST_TAG, TREE_TAG_PREFIX, ForestPolicy, build_policy
from quotaplane.policy import AdmissionRequest, QuotaPolicy
from quotaplane.resources import Resource
from tests.forest.helpers import check_invariant, tree_doc

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TEAM = tree_doc("Teams", {"root": ("", True, {"vcore": 4000, "memory": 8}),
                          "a": ("root", False, {"vcore": 2000, "memory": 4}),
                          "b": ("root", True, {"vcore": 2000, "memory": 4})}, ("memory", "vcore"))


def req(key: str, vcore: int, memory: int = 0, *, priority: int = 0, preemptible: bool = True,
        **tags: str) -> AdmissionRequest:
    return AdmissionRequest("app-1", key, "root.q", UserGroup("alice"),
                            Resource({"vcore": vcore, "memory": memory}),
                            priority=priority, preemptible=preemptible, tags=dict(tags))


def teams(node: str) -> dict[str, str]:
    return {TREE_TAG_PREFIX + "Teams": node}


def policy() -> ForestPolicy:
    return ForestPolicy.from_definitions([TEAM])


def test_protocol_and_untagged_requests_are_not_concerned() -> None:
    p = policy()
    assert isinstance(p, QuotaPolicy) and p.name == "forest"
    before = p.dump_state()
    r = req("k1", 999_999)
    assert p.check(r) == [] and p.apply(r) == []
    p.release(r, last_allocation=True)
    assert p.dump_state() == before


def test_check_changes_nothing_and_apply_allocates() -> None:
    p = policy()
    r = AdmissionRequest("app", "k1", "root.q", UserGroup("alice"), Resource({"vcore": 1500, "memory": 2}),
                         tags=teams("a"))
    before = p.dump_state()
    assert p.check(r) == []
    assert p.dump_state() == before
    assert p.apply(r) == []
    assert p.manager.consumer_node("Teams", "k1") == "a"
    assert p.manager.node_allocated("Teams", "root") == {"memory": 2, "vcore": 1500}
    p.release(r, last_allocation=True)
    assert p.manager.node_allocated("Teams", "root") == {"memory": 0, "vcore": 0}
    assert p.manager.consumer_ids() == []


def test_refusal_is_a_forest_quota_violation_with_path_and_shortfall() -> None:
    p = policy()
    assert p.apply(req("k1", 2000, **teams("b"))) == []
    before = p.dump_state()
    r = req("k2", 500, 1, **teams("b"))
    (v,) = p.check(r)
    assert (v.policy, v.code, v.path) == ("forest", "forest.quota", "Teams/b")
    assert v.resource == Resource({"vcore": 500})
    assert "Teams" in v.message
    assert p.apply(r) == [v]
    assert p.dump_state() == before


def test_preempted_allocations_are_handed_to_the_partition() -> None:
    p = policy()
    borrower = req("low", 3000, **teams("a"))            # borrows at the root
    assert p.apply(borrower) == []
    assert p.manager.consumer_node("Teams", "low") == "root"
    owner = req("own", 2000, **teams("b"))
    assert p.apply(owner) == []
    assert p.take_preempted() == ["low"]
    assert p.take_preempted() == []
    assert "low" not in p.manager.consumer_ids()
    p.release(borrower, last_allocation=True)           # the partition's release is harmless now
    assert p.manager.node_allocated("Teams", "root") == {"memory": 0, "vcore": 2000}


def test_undo_restores_exactly_including_victims() -> None:
    p = policy()
    assert p.apply(req("low", 3000, **teams("a"))) == []
    before = p.dump_state()
    owner = req("own", 2000, **teams("b"))
    assert p.apply(owner) == []
    p.undo(owner)
    assert p.dump_state() == before
    assert p.take_preempted() == []
    assert p.manager.consumer_node("Teams", "low") == "root"


def test_what_if_with_empty_key() -> None:
    p = policy()
    before = p.dump_state()
    assert p.check(req("", 1000, **teams("a"))) == []
    assert len(p.check(req("", 5000, **teams("a")))) == 1
    assert p.dump_state() == before


def test_unknown_tree_or_forest_is_a_violation() -> None:
    p = policy()
    (v,) = p.check(req("k", 1, **{TREE_TAG_PREFIX + "Nope": "x"}))
    assert v.code == "forest.quota" and "Nope" in v.message
    (v,) = p.check(req("k", 1, **{FOREST_TAG: "F"}))
    assert "F" in v.message


def forest_policy(**kw: Any) -> ForestPolicy:
    trees = [(EXAMPLES / f"quota-tree-{t}.json").read_text() for t in ("context", "service")]
    return ForestPolicy.from_definitions(trees, {"Forest-1": ["ContextTree", "ServiceTree"]}, **kw)


def test_forest_allocation_from_tags_with_cpu_read_from_vcore() -> None:
    """Tree resource 'cpu' reads the allocation's vcore (milli) when the allocation has no 'cpu'."""
    p = forest_policy()
    tags = {TREE_TAG_PREFIX + "ContextTree": "Context-4", TREE_TAG_PREFIX + "ServiceTree": "Srvc-X"}
    r = AdmissionRequest("app", "job-1", "root.q", UserGroup("u"), Resource({"vcore": 2, "disk": 1}),
                         tags=tags)
    assert p.apply(r) == []                               # the forest is found through the trees
    assert p.manager.is_allocated_forest("Forest-1", "job-1")
    assert p.manager.node_allocated("ServiceTree", "Srvc-X") == {"cpu": 2, "disk": 1}
    big = AdmissionRequest("app", "job-2", "root.q", UserGroup("u"), Resource({"cpu": 3, "disk": 1}),
                           tags={**tags, TREE_TAG_PREFIX + "ContextTree": "Context-1",
                                 FOREST_TAG: "Forest-1"})
    before = p.dump_state()
    (v,) = p.apply(big)
    assert v.path == "ContextTree/Context-1"
    assert p.dump_state() == before
    p.release(r, last_allocation=True)
    assert not p.manager.is_allocated("ContextTree", "job-1")


def test_build_policy_from_partition_extension() -> None:
    ext = {"quotatrees": {"trees": [(EXAMPLES / "quota-tree.json").read_text()],
                          "forests": {"F": ["TestTree"]}, "defaultforest": "F"}}
    p = build_policy(SimpleNamespace(extensions=MappingProxyType(ext)), None)
    assert p.manager.get_mode() is Mode.NORMAL and p.default_forest == "F"
    r = AdmissionRequest("app", "k", "root.q", UserGroup("u"), Resource({"cpu": 4, "memory": 16}),
                         tags={TREE_TAG_PREFIX + "TestTree": "C"})
    assert p.apply(r) == []
    assert p.manager.consumer_node("TestTree", "k") == "C"
    # a reload that lowers C's quota keeps the consumer (no preemption on update, §7)
    doc = (EXAMPLES / "quota-tree.json").read_text().replace('"6"', '"1"')
    p.update_config(SimpleNamespace(extensions={"quotatrees": {"trees": [doc], "forests": {"F": ["TestTree"]},
                                                               "defaultforest": "F"}}))
    assert p.manager.node_quota("TestTree", "C") == {"cpu": 1, "memory": 64}
    assert p.manager.consumer_node("TestTree", "k") == "C"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["check", "apply", "release", "undo"]), st.integers(0, 7),
                          st.sampled_from(["a", "b"]), st.integers(0, 3000), st.integers(0, 2)),
                min_size=1, max_size=30))
def test_policy_properties(steps: list[tuple[str, int, str, int, int]]) -> None:
    """check never changes state; a refused apply changes nothing; preempted keys are gone; sums hold."""
    p = policy()
    live: dict[str, AdmissionRequest] = {}
    gone: dict[str, AdmissionRequest] = {}
    last_applied: str | None = None
    for op, k, node, vcore, prio in steps:
        key = f"k{k}"
        r = live.get(key) or req(key, vcore, 1, priority=prio, **teams(node))
        before = p.dump_state()
        if op == "check":
            p.check(r)
            assert p.dump_state() == before
        elif op == "apply" and key not in live:
            refused = p.apply(r)
            if refused:
                assert p.dump_state() == before
            else:
                live[key] = r
                last_applied = key
                gone = {}
                for victim in p.take_preempted():
                    assert not p.manager.is_allocated("Teams", victim)
                    gone[victim] = live.pop(victim)
        elif op == "release" and key in live:
            p.release(live.pop(key), last_allocation=True)
            assert not p.manager.is_allocated("Teams", key)
        elif op == "undo" and key in live and key == last_applied:
            p.undo(live.pop(key))
            assert not p.manager.is_allocated("Teams", key)
            # exact undo (nothing changed since the apply) brings the victims back
            live.update({v: r for v, r in gone.items() if p.manager.is_allocated("Teams", v)})
            last_applied = None
        check_invariant(p.manager)
        assert sorted(p.manager.allocated_consumers("Teams")) == sorted(live)
