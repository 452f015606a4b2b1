"""Reference §6 (manager API and errors), §7 (tree cache and update_tree), §8 (JSON formats), F4."""

from __future__ import annotations

import json

import pytest

from quotaplane.forest import ConsumerInfo, Mode, QuotaError, QuotaManager
from tests.forest.helpers import add_alloc, check_invariant, consumer, manager, tree_doc

TREE = tree_doc("T", {"R": ("", False, {"cpu": 10}), "P": ("R", False, {"cpu": 6}),
                      "L1": ("P", False, {"cpu": 3}), "L2": ("P", False, {"cpu": 3}),
                      "Q": ("R", False, {"cpu": 4})})


# ---------------------------------------------------------------------------------------------- §6

def test_manager_starts_in_maintenance_and_switches() -> None:
    """§6: a new manager is in Maintenance; set_mode switches; a bad mode is refused."""
    qm = QuotaManager()
    assert qm.get_mode() is Mode.MAINTENANCE
    assert Mode.MAINTENANCE.describe() == "mode set to Maintenance"
    qm.set_mode(Mode.NORMAL)
    assert qm.get_mode() is Mode.NORMAL
    with pytest.raises(QuotaError):
        qm.set_mode(7)


@pytest.mark.parametrize(("call", "message"), [
    (lambda qm: qm.allocate("nope", "a"), "invalid tree name nope"),
    (lambda qm: qm.allocate("T", "ghost"), "consumer ghost does not exist, create and add first"),
    (lambda qm: qm.allocate("T", "other"), "failure creating consumer other on tree T"),
    (lambda qm: qm.allocate("T", "a"), "consumer a already allocated on tree T"),
    (lambda qm: qm.add_consumer(consumer("a", ("T", "L1", {"cpu": 1}))), "consumer a already exists"),
    (lambda qm: qm.remove_consumer("ghost"), "consumer ghost does not exist"),
    (lambda qm: qm.add_tree_from_string(TREE), "tree T already exists; delete first"),
    (lambda qm: qm.add_tree_by_name(""), "invalid tree name "),
    (lambda qm: qm.delete_tree("T"), "consumer\\(s\\) allocated in tree T"),
    (lambda qm: qm.delete_tree("nope"), "tree nope does not exist"),
    (lambda qm: qm.add_forest("F"), "duplicate forest name F"),
    (lambda qm: qm.delete_forest("G"), "forest G does not exist"),
    (lambda qm: qm.add_tree_to_forest("F", "nope"), "unknown tree name nope"),
    (lambda qm: qm.add_tree_to_forest("G", "T"), "unknown forest name G"),
    (lambda qm: qm.delete_tree_from_forest("F", "T"), "forest F does not include tree T"),
    (lambda qm: qm.allocate_forest("G", "a"), "invalid forest name G"),
    (lambda qm: qm.update_tree("nope"), "tree nope does not exist"),
    (lambda qm: qm.update_forest("G"), "forest G does not exist"),
    (lambda qm: qm.get_tree_cache("nope"), "tree nope does not exist"),
    (lambda qm: qm.node_allocated("T", "nope"), "node nope does not exist in tree T"),
    (lambda qm: qm.deallocate("T", "ghost"), "consumer ghost does not exist"),
])
def test_invalid_calls_raise_quota_error_and_change_nothing(call, message) -> None:  # type: ignore[no-untyped-def]
    """§6/contract: invalid calls raise QuotaError (a ValueError) with Go's message; nothing changes."""
    qm = manager(TREE)
    add_alloc(qm, "T", "a", "L1", {"cpu": 1})
    qm.add_consumer(consumer("other", ("Elsewhere", "X", {"cpu": 1})))
    qm.add_forest("F")
    before = qm.dump_state()
    with pytest.raises(QuotaError, match=message) as info:
        call(qm)
    assert isinstance(info.value, ValueError)
    assert qm.dump_state() == before


def test_remove_consumer_does_not_deallocate() -> None:
    """§6: RemoveConsumer forgets the spec only; the allocation stays until de-allocated."""
    qm = manager(TREE)
    add_alloc(qm, "T", "a", "L1", {"cpu": 2})
    qm.remove_consumer("a")
    assert qm.consumer_ids() == []
    assert qm.is_allocated("T", "a")
    assert qm.deallocate("T", "a")
    assert qm.node_allocated("T", "R") == {"cpu": 0}


def test_names_are_deterministic() -> None:
    """F3: names come back sorted; forest trees in the order added."""
    qm = manager(TREE, tree_doc("A", {"x": ("", False, {"cpu": 1})}))
    qm.add_forest("Z")
    qm.add_forest("B")
    qm.add_tree_to_forest("Z", "T")
    qm.add_tree_to_forest("Z", "A")
    for cid in ("c2", "c1", "c3"):
        qm.add_consumer(consumer(cid, ("T", "L1", {"cpu": 0})))
    assert qm.tree_names() == ["A", "T"]
    assert qm.forest_names() == ["B", "Z"]
    assert qm.forest_tree_names("Z") == ["T", "A"]
    assert qm.consumer_ids() == ["c1", "c2", "c3"]
    with pytest.raises(QuotaError, match="already belongs to forest Z"):
        qm.add_tree_to_forest("B", "T")


def test_delete_tree_leaves_its_forest() -> None:
    """§6: deleting an empty tree also takes it out of its forest (cf. MCAD #378)."""
    qm = manager(TREE)
    qm.add_forest("F")
    qm.add_tree_to_forest("F", "T")
    qm.delete_tree("T")
    assert qm.tree_names() == [] and qm.forest_tree_names("F") == []


# ---------------------------------------------------------------------------------------------- §7

def test_cache_edits_wait_for_update_tree() -> None:
    """§7 (S37): cache edits take effect only at update_tree, in either mode."""
    qm = manager(TREE)
    cache = qm.get_tree_cache("T")
    cache.add_node_spec("L3", {"parent": "Q", "quota": {"cpu": "2"}})
    assert "L3" not in qm.node_ids("T")
    assert qm.update_tree("T") == []
    assert "L3" in qm.node_ids("T")
    assert qm.node_quota("T", "L3") == {"cpu": 2}


def test_update_quota_decrease_never_preempts() -> None:
    """§7 (S36/B14): a quota lowered below usage keeps the consumers; the node is over quota."""
    qm = manager(TREE)
    add_alloc(qm, "T", "a", "L1", {"cpu": 3})
    qm.get_tree_cache("T").add_node_spec("L1", {"parent": "P", "quota": {"cpu": 1}})
    assert qm.update_tree("T") == []
    assert qm.consumer_node("T", "a") == "L1"
    assert qm.node_allocated("T", "L1") == {"cpu": 3}
    assert qm.node_quota("T", "L1") == {"cpu": 1}


def test_update_deleted_gnode_sends_consumer_to_root() -> None:
    """§7 (S38): a consumer whose gNode was deleted is re-placed at the root."""
    qm = manager(TREE)
    add_alloc(qm, "T", "a", "L2", {"cpu": 1})
    qm.get_tree_cache("T").delete_node("L2")
    assert qm.update_tree("T") == []
    assert qm.consumer_node("T", "a") == "R"
    check_invariant(qm)


def test_update_rename_keeps_placement() -> None:
    """§7 (S39): a renamed node keeps its consumers under the new name; children follow."""
    qm = manager(TREE)
    add_alloc(qm, "T", "a", "L1", {"cpu": 1})
    add_alloc(qm, "T", "b", "L1", {"cpu": 3})      # borrows at P
    cache = qm.get_tree_cache("T")
    cache.rename_node("L1", "Team-1")
    cache.rename_node("P", "Dept")
    assert qm.update_tree("T") == []
    assert qm.consumer_node("T", "a") == "Team-1"
    assert qm.consumer_node("T", "b") == "Dept"
    assert cache.node_spec("Team-1")["parent"] == "Dept"
    assert qm.deallocate("T", "a")
    assert qm.consumer_node("T", "b") == "Team-1"   # slide-down still knows b's (renamed) gNode


def test_update_leaf_turned_internal_keeps_consumers_refuses_new() -> None:
    """§7 (S41): a leaf that became internal keeps its consumers but accepts no new ones."""
    qm = manager(TREE)
    add_alloc(qm, "T", "a", "Q", {"cpu": 1})
    qm.get_tree_cache("T").add_node_spec("Q1", {"parent": "Q", "quota": {"cpu": "1"}})
    qm.update_tree("T")
    assert qm.consumer_node("T", "a") == "Q"
    assert not add_alloc(qm, "T", "b", "Q", {"cpu": 1}).allocated


def test_update_parent_change_moves_consumer_to_gnode() -> None:
    """§7 (S43): an old aNode no longer above the gNode → the consumer goes to its gNode (forced)."""
    qm = manager(TREE)
    add_alloc(qm, "T", "a", "L1", {"cpu": 3})
    add_alloc(qm, "T", "b", "L1", {"cpu": 2})     # at P
    qm.get_tree_cache("T").add_node_spec("L1", {"parent": "Q", "quota": {"cpu": 3}})
    assert qm.update_tree("T") == []
    assert qm.consumer_node("T", "b") == "L1"
    assert qm.node_allocated("T", "L1") == {"cpu": 5}   # over quota, no preemption on update
    check_invariant(qm)


def test_update_deleted_root_unallocates_everyone_in_allocation_order() -> None:
    """§7 (S40) + F3: without a root nothing can be placed; ids come back in allocation order."""
    qm = manager(TREE)
    for cid in ("z", "a", "m"):
        add_alloc(qm, "T", cid, "L1", {"cpu": 1})
    qm.get_tree_cache("T").delete_node("R")
    assert qm.update_tree("T") == ["z", "a", "m"]
    assert not qm.is_allocated("T", "a")
    assert qm.tree_info("T")["root"] == ""


def test_add_node_spec_replaces_whole_spec() -> None:
    """§7 (S44): re-adding a node without 'hard' makes it Soft again."""
    qm = manager(tree_doc("T", {"R": ("", False, {"cpu": 4}), "L": ("R", True, {"cpu": 1})}))
    qm.get_tree_cache("T").add_node_spec("L", {"parent": "R", "quota": {"cpu": "1"}})
    qm.update_tree("T")
    assert qm.dump_state()["trees"]["T"]["nodes"]["L"]["hard"] is False


def test_cache_rejects_bad_specs_whole() -> None:
    """§7 + B13: an empty spec or a spec without quota is refused; a batch with one bad spec adds none."""
    qm = manager(TREE)
    cache = qm.get_tree_cache("T")
    with pytest.raises(QuotaError, match="node X: node spec is invalid; not added"):
        cache.add_node_spec("X", {})
    with pytest.raises(QuotaError, match="node X: quota is missing; not added"):
        cache.add_node_spec("X", {"parent": "R"})
    with pytest.raises(QuotaError):
        cache.add_node_specs_from_string(json.dumps({"ok": {"parent": "R", "quota": {"cpu": "1"}},
                                                     "bad": {"parent": "R"}}))
    assert "ok" not in cache.node_names()
    with pytest.raises(QuotaError):
        cache.rename_node("L1", "L1")
    with pytest.raises(QuotaError):
        cache.rename_node("ghost", "x")


def test_add_tree_by_name_then_nodes_through_cache() -> None:
    """§6/§7 (S53): an empty tree gets the default resource names in its cache; nodes come by update."""
    qm = manager()
    qm.add_tree_by_name("E")
    cache = qm.get_tree_cache("E")
    assert cache.resource_names() == ["cpu", "memory", "nvidia.com/gpu"]
    cache.add_resource_name("disk")
    cache.add_node_specs_from_string(json.dumps({
        "Org": {"parent": "nil", "quota": {"cpu": "4", "disk": "1"}},
        "Team": {"parent": "Org", "hard": "true", "quota": {"cpu": "2"}},
        "Lost": {"parent": "Nowhere", "quota": {"cpu": "2"}},
    }))
    assert qm.update_tree("E") == []
    info = qm.tree_info("E")
    assert info["root"] == "Org" and info["dangling_nodes"] == ["Lost"]
    assert qm.node_quota("E", "Org") == {"cpu": 4, "disk": 1, "memory": 0, "nvidia.com/gpu": 0}


def test_b10_resource_name_change_rebuilds_requests() -> None:
    """B10 fixed: after adding a resource name, allocated consumers count their request for it."""
    qm = manager(TREE)
    qm.add_consumer(consumer("a", ("T", "L1", {"cpu": 1, "gpu": 2})))
    qm.allocate("T", "a")
    cache = qm.get_tree_cache("T")
    cache.add_resource_name("gpu")
    qm.update_tree("T")
    assert qm.node_allocated("T", "R") == {"cpu": 1, "gpu": 2}
    assert qm.deallocate("T", "a")
    assert qm.node_allocated("T", "R") == {"cpu": 0, "gpu": 0}


def test_first_root_by_sorted_name_wins() -> None:
    """§7 (S59): with two roots the first in sorted order is the root; the other is skipped."""
    qm = manager(tree_doc("T", {"B": ("", False, {"cpu": 1}), "A": ("", False, {"cpu": 2}),
                                "C": ("B", False, {"cpu": 1})}))
    assert qm.tree_info("T")["root"] == "A"
    assert qm.node_ids("T") == ["A"]


# ---------------------------------------------------------------------------------------------- §8

SEED_TREE = """{
  "kind": "QuotaTree",
  "metadata": {
    "name": "TestTree"
  },
  "spec": {
    "resourceNames": [
      "cpu",
      "memory"
    ],
    "nodes": {
      "A": {
        "parent": "nil",
        "hard": "true",
        "quota": {
          "cpu": "10",
          "memory": "256"
        }
      },
      "B": {
        "parent": "A",
        "hard": "true",
        "quota": {
          "cpu": "2",
          "memory": "64"
        }
      },
      "C": {
        "parent": "A",
        "hard": "false",
        "quota": {
          "cpu": "6",
          "memory": "64"
        }
      },
    }
  }
}"""


def test_seed_tree_json_accepted_as_printed() -> None:
    """§8.1/B12: the seed's tree (with its trailing comma) is accepted."""
    qm = QuotaManager()
    assert qm.add_tree_from_string(SEED_TREE) == "TestTree"
    assert qm.node_quota("TestTree", "C") == {"cpu": 6, "memory": 64}


def test_resource_vectors_in_sorted_name_order() -> None:
    """§1.1 (S07): vectors follow the sorted resource names, whatever the JSON order."""
    qm = manager(tree_doc("T", {"R": ("", False, {"memory": 3, "gpu": 2, "cpu": 1})},
                          ("memory", "gpu", "cpu")))
    assert list(qm.node_quota("T", "R")) == ["cpu", "gpu", "memory"]
    assert qm.dump_state()["trees"]["T"]["resource_names"] == ["cpu", "gpu", "memory"]


def test_f4_quota_values_strings_or_ints() -> None:
    """F4: quota values may be strings or integers; missing ones are 0."""
    doc = json.loads(tree_doc("T", {"R": ("", False, {"cpu": 4})}, ("cpu", "memory")))
    doc["spec"]["nodes"]["R"]["quota"] = {"cpu": 4}
    qm = QuotaManager()
    qm.add_tree_from_string(json.dumps(doc))
    assert qm.node_quota("T", "R") == {"cpu": 4, "memory": 0}


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.update(kind="Tree"), "invalid kind: Tree"),
    (lambda d: d["spec"]["nodes"]["R"].pop("quota"), "invalid specs for some nodes"),
    (lambda d: d["spec"]["nodes"]["R"].update(hard="yes"), "boolean spelling"),
    (lambda d: d["spec"]["nodes"]["R"]["quota"].update(cpu="ten"), "integer"),
    (lambda d: d["spec"]["nodes"]["R"]["quota"].update(cpu=-1), "negative"),
    (lambda d: d["metadata"].update(name=""), "invalid tree name "),
])
def test_bad_tree_json_is_refused_whole(mutate, message) -> None:  # type: ignore[no-untyped-def]
    """§6/§8.1/B13: bad tree documents raise QuotaError and add nothing."""
    doc = json.loads(tree_doc("T", {"R": ("", False, {"cpu": 4}), "L": ("R", False, {"cpu": 1})}))
    mutate(doc)
    qm = QuotaManager()
    with pytest.raises(QuotaError, match=message):
        qm.add_tree_from_string(json.dumps(doc))
    assert qm.tree_names() == []
    with pytest.raises(QuotaError, match="error parsing tree"):
        qm.add_tree_from_string("{not json")


@pytest.mark.parametrize("spelling", ["1", "t", "T", "TRUE", "true", "True", True])
def test_hard_parse_bool_spellings(spelling: object) -> None:
    """§7 (S58): 'hard' follows Go's ParseBool."""
    doc = json.loads(tree_doc("T", {"R": ("", False, {"cpu": 4})}))
    doc["spec"]["nodes"]["R"]["hard"] = spelling
    qm = QuotaManager()
    qm.add_tree_from_string(json.dumps(doc))
    assert qm.dump_state()["trees"]["T"]["nodes"]["R"]["hard"] is True


def test_consumer_json() -> None:
    """§8.2: defaults, ignored unknown resources, the seed's 'trees:' typo, kind and id checks."""
    info = ConsumerInfo.from_string(json.dumps({"kind": "Consumer", "metadata": {"name": "x"}, "spec": {
        "id": "job-1", "trees": [{"treeName": "T", "groupID": "L1", "request": {"cpu": 2, "disk": "1"}}]}}))
    spec = info.trees["T"]
    assert (spec.priority, spec.type, spec.unpreemptable) == (0, 0, False)
    qm = manager(TREE)
    qm.add_consumer(info)
    qm.allocate("T", "job-1")
    assert qm.node_allocated("T", "L1") == {"cpu": 2}
    typo = ConsumerInfo.from_string(json.dumps({"kind": "Consumer", "spec": {"id": "c", "trees:": [
        {"treeName": "T", "groupID": "L1", "request": {"cpu": 1}}]}}))
    assert typo.trees == {}                                   # S59: no trees at all
    with pytest.raises(QuotaError, match="consumer invalid kind: Job"):
        ConsumerInfo.from_string('{"kind": "Job", "spec": {"id": "x"}}')
    with pytest.raises(QuotaError, match="missing consumer ID"):
        ConsumerInfo.from_string('{"kind": "Consumer", "spec": {"trees": []}}')
    with pytest.raises(QuotaError, match="negative"):
        ConsumerInfo.from_string('{"kind": "Consumer", "spec": {"id": "x", "trees": '
                                 '[{"treeName": "T", "groupID": "L1", "request": {"cpu": -1}}]}}')
