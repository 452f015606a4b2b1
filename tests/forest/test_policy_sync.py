"""``ForestPolicy.update_config`` / ``validate_update``: a reload makes trees, forests and mode exactly the
configured ones; removing what is in use is refused before anything changes (issue 7)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import quotaplane as qp
from quotaplane.config.identity import UserGroup
from quotaplane.forest import Mode, QuotaError
from quotaplane.policies.forest import FOREST_TAG, TREE_TAG_PREFIX, ForestPolicy
from quotaplane.policy import AdmissionRequest
from quotaplane.resources import Resource
from tests.forest.helpers import tree_doc

A = tree_doc("A", {"root": ("", True, {"vcore": 4000}), "x": ("root", False, {"vcore": 2000})}, ("vcore",))
B = tree_doc("B", {"root": ("", True, {"vcore": 4000}), "y": ("root", False, {"vcore": 2000})}, ("vcore",))
C = tree_doc("C", {"root": ("", True, {"vcore": 4000}), "z": ("root", False, {"vcore": 2000})}, ("vcore",))


def cfg(trees: list[str], forests: dict[str, list[str]] | None = None, **extra: Any) -> SimpleNamespace:
    ext: dict[str, Any] = {"trees": trees, **extra}
    if forests is not None:
        ext["forests"] = forests
    return SimpleNamespace(extensions={"quotatrees": ext})


def req(key: str, vcore: int, **tags: str) -> AdmissionRequest:
    return AdmissionRequest("app", key, "root.q", UserGroup("u"), Resource({"vcore": vcore}), tags=tags)


def start() -> ForestPolicy:
    return ForestPolicy.from_definitions([A, B, C], {"F": ["A", "B"]})


def test_reload_removes_trees_and_forests_no_longer_configured() -> None:
    p = start()
    p.update_config(cfg([A]))
    assert p.manager.tree_names() == ["A"]
    assert p.manager.forest_names() == []
    assert p.manager.tree_forest("A") is None


def test_reload_sets_forest_membership_exactly_and_in_order() -> None:
    p = start()
    p.update_config(cfg([A, B, C], {"F": ["C", "A"], "G": ["B"]}))
    assert p.manager.forest_tree_names() == {"F": ["C", "A"], "G": ["B"]}
    p.update_config(cfg([A, B, C], {"G": ["A", "B"]}))
    assert p.manager.forest_tree_names() == {"G": ["A", "B"]}
    assert p.manager.tree_forest("C") is None


def test_reload_sets_mode_and_default_forest() -> None:
    p = start()
    assert p.manager.get_mode() is Mode.NORMAL
    p.update_config(cfg([A, B, C], {"F": ["A", "B"]}, mode="maintenance", defaultforest="F"))
    assert p.manager.get_mode() is Mode.MAINTENANCE and p.default_forest == "F"
    p.update_config(cfg([A, B, C], {"F": ["A", "B"]}))
    assert p.manager.get_mode() is Mode.NORMAL and p.default_forest is None


def test_removing_a_tree_with_allocated_consumers_is_refused_and_changes_nothing() -> None:
    p = start()
    assert p.apply(req("k1", 1000, **{TREE_TAG_PREFIX + "C": "z"})) == []
    before = p.dump_state()
    with pytest.raises(ValueError, match="'C' still has allocated consumers"):
        p.validate_update(cfg([A, B], {"F": ["A", "B"]}))
    with pytest.raises(QuotaError, match="'C' still has allocated consumers"):
        p.update_config(cfg([A, B], {"F": ["A", "B"]}, mode="maintenance"))
    assert p.dump_state() == before and p.manager.get_mode() is Mode.NORMAL
    p.release(req("k1", 1000, **{TREE_TAG_PREFIX + "C": "z"}), last_allocation=True)
    p.update_config(cfg([A, B], {"F": ["A", "B"]}))
    assert p.manager.tree_names() == ["A", "B"]


def test_removing_a_forest_or_a_member_with_forest_consumers_is_refused() -> None:
    p = start()
    r = req("k1", 1000, **{TREE_TAG_PREFIX + "A": "x", TREE_TAG_PREFIX + "B": "y", FOREST_TAG: "F"})
    assert p.apply(r) == []
    before = p.dump_state()
    with pytest.raises(QuotaError, match="forest 'F' still has allocated consumers"):
        p.update_config(cfg([A, B, C]))
    with pytest.raises(QuotaError, match="'B' cannot leave forest 'F'"):
        p.update_config(cfg([A, B, C], {"F": ["A"]}))
    assert p.dump_state() == before
    # adding a member or reordering is fine
    p.update_config(cfg([A, B, C], {"F": ["B", "A", "C"]}))
    assert p.manager.forest_tree_names("F") == ["B", "A", "C"]
    p.release(r, last_allocation=True)
    p.update_config(cfg([A, B, C]))
    assert p.manager.forest_names() == []


def test_invalid_definitions_are_refused_before_any_change() -> None:
    p = start()
    before = p.dump_state()
    with pytest.raises(QuotaError):
        p.validate_update(cfg([A], {"F": ["A", "Nope"]}))
    with pytest.raises(QuotaError):
        p.update_config(cfg([A], {"F": ["A"], "G": ["A"]}))
    assert p.dump_state() == before


def test_definition_change_reports_consumers_left_out() -> None:
    p = start()
    assert p.apply(req("k1", 1500, **{TREE_TAG_PREFIX + "C": "z"})) == []
    rootless = tree_doc("C", {}, ("vcore",))       # no root: nowhere to place the consumer (§7)
    p.update_config(cfg([A, B, rootless], {"F": ["A", "B"]}))
    assert p.take_preempted() == ["k1"]
    assert p.manager.allocated_consumers("C") == [] and p.manager.consumer_ids() == []


CONFIG = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: default
    quotatrees:
      trees:
        - {tree}
"""


def test_scheduler_reload_refuses_before_journalling() -> None:
    """The scheduler asks ``validate_update`` before the config event: nothing is journalled or applied."""
    s = qp.Scheduler.from_yaml(CONFIG.format(tree=C))
    try:
        p = s.partition("default")
        p.add_node("n1", {"vcore": 8000})
        p.add_application("app", UserGroup("u"), queue="root.default", tags={TREE_TAG_PREFIX + "C": "z"})
        assert p.allocate("app", "k1", {"vcore": 1000}).allocated
        seq, text = s.config_seq, s.config_text
        with pytest.raises(ValueError, match="still has allocated consumers"):
            s.update_config(CONFIG.format(tree=A))
        assert (s.config_seq, s.config_text) == (seq, text)
        policy = next(x for x in p.policies() if getattr(x, "name", "") == "forest")
        assert policy.manager.tree_names() == ["C"]
        # dropping the whole extension is refused too while a tree is in use
        with pytest.raises(ValueError, match="still has allocated consumers"):
            s.update_config(CONFIG.split("    quotatrees:")[0])
        p.release("k1")
        s.update_config(CONFIG.format(tree=A))
        assert policy.manager.tree_names() == ["A"]
    finally:
        s.close()


_DOCS = {"A": A, "B": B, "C": C}
_GROUP = {"A": "x", "B": "y", "C": "z"}


@st.composite
def _configs(draw: st.DrawFn) -> tuple[list[str], dict[str, list[str]], str]:
    trees = draw(st.lists(st.sampled_from(["A", "B", "C"]), unique=True))
    homes = [draw(st.sampled_from([None, "F", "G"])) for _ in trees]
    order = draw(st.permutations(list(range(len(trees)))))
    forests: dict[str, list[str]] = {}
    for i in order:
        if homes[i] is not None:
            forests.setdefault(homes[i], []).append(trees[i])
    return trees, forests, draw(st.sampled_from(["normal", "maintenance"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_configs(), st.integers(0, 3)), min_size=1, max_size=6))
def test_reload_property_exact_or_refused_unchanged(steps: list[tuple[Any, int]]) -> None:
    """Every reload either makes trees/forests/mode exactly the configured ones, or is refused with
    nothing changed — and only when a removed tree/forest (or forest member) is still in use."""
    p = start()
    n = 0
    for (trees, forests, mode), allocs in steps:
        for _ in range(allocs):                  # allocate on what exists now (forest first if any)
            n += 1
            qm = p.manager
            fs = qm.forest_names()
            if fs and qm.forest_tree_names(fs[0]):
                members = qm.forest_tree_names(fs[0])
                tags = {TREE_TAG_PREFIX + t: _GROUP[t] for t in members} | {FOREST_TAG: fs[0]}
            elif qm.tree_names():
                t = qm.tree_names()[n % len(qm.tree_names())]
                if qm.tree_forest(t) is not None:
                    continue
                tags = {TREE_TAG_PREFIX + t: _GROUP[t]}
            else:
                continue
            p.apply(req(f"k{n}", 100, **tags))
        before = p.dump_state()
        in_use = {t for t in p.manager.tree_names() if p.manager.allocated_consumers(t)}
        config = cfg([_DOCS[t] for t in trees], forests, mode=mode)
        try:
            p.update_config(config)
        except QuotaError:
            assert p.dump_state() == before
            dropped_forests = [f for f in p.manager.forest_names()
                               if p.forest_users(f) and (f not in forests or any(
                                   t not in forests[f] for u in p.forest_users(f)
                                   for t in p.manager.forest_tree_names(f)
                                   if t in p.dump_state()["allocations"][u]["groups"]))]
            assert (in_use - set(trees)) or dropped_forests
            continue
        assert p.manager.tree_names() == sorted(trees)
        assert p.manager.forest_tree_names() == dict(sorted(forests.items()))
        assert p.manager.get_mode() is (Mode.NORMAL if mode == "normal" else Mode.MAINTENANCE)
        assert in_use <= set(trees)
