"""The seed README's example, end to end (seed 003; docs/quota-trees.md walks through the same steps).

Tree ``TestTree`` (examples/quota-tree.json, the seed's tree): A (root, Hard, cpu 10 / memory 256),
B (Hard, 2 / 64), C (Soft, 6 / 64). Consumer ``consumer-1`` is the seed's consumer
(examples/consumer.json); the forest part uses the seed's ``job-1`` (examples/consumer-forest.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quotaplane.forest import ConsumerInfo, Mode, QuotaError, QuotaManager
from tests.forest.helpers import check_invariant, consumer
from tests.forest.test_manager_cache_parsing import SEED_TREE

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def state(qm: QuotaManager) -> dict[str, tuple[dict[str, int], list[str]]]:
    return {n: (qm.node_allocated("TestTree", n), qm.node_consumers("TestTree", n)) for n in "ABC"}


def test_seed_tree_scenario_end_to_end() -> None:
    qm = QuotaManager()
    assert qm.add_tree_from_string((EXAMPLES / "quota-tree.json").read_text()) == "TestTree"
    assert qm.get_mode() is Mode.MAINTENANCE          # the default initial mode
    qm.set_mode(Mode.NORMAL)

    # 1. the seed's consumer: C, 4 cpu / 16 memory, unPreemptable → placed at its gNode C
    qm.add_consumer(ConsumerInfo.from_string((EXAMPLES / "consumer.json").read_text()))
    r = qm.allocate("TestTree", "consumer-1")
    assert (r.allocated, r.message, r.preempted_ids) == (True, " ", [])
    assert qm.consumer_node("TestTree", "consumer-1") == "C"

    # 2. the same request again: C (Soft) is short → borrows at the root A
    qm.add_consumer(consumer("consumer-2", ("TestTree", "C", {"cpu": 4, "memory": 16})))
    assert qm.allocate("TestTree", "consumer-2").allocated
    assert qm.consumer_node("TestTree", "consumer-2") == "A"

    # 3. a team-B consumer within B's quota
    qm.add_consumer(consumer("consumer-3", ("TestTree", "B", {"cpu": 2, "memory": 8})))
    assert qm.allocate("TestTree", "consumer-3").allocated
    assert state(qm) == {"A": ({"cpu": 10, "memory": 40}, ["consumer-2"]),
                         "B": ({"cpu": 2, "memory": 8}, ["consumer-3"]),
                         "C": ({"cpu": 4, "memory": 16}, ["consumer-1"])}

    # 4. C claims the rest of its own quota: the root is full, the borrower consumer-2 is preempted
    qm.add_consumer(consumer("consumer-4", ("TestTree", "C", {"cpu": 2, "memory": 8}), priority=1))
    r = qm.allocate("TestTree", "consumer-4")
    assert r.allocated and r.preempted_ids == ["consumer-2"]
    assert not qm.is_allocated("TestTree", "consumer-2")

    # 5. B is Hard and full: a priority-2 consumer preempts the priority-0 one on its path
    qm.add_consumer(consumer("consumer-5", ("TestTree", "B", {"cpu": 1, "memory": 1}), priority=2))
    r = qm.allocate("TestTree", "consumer-5")
    assert r.allocated and r.preempted_ids == ["consumer-3"]
    assert state(qm) == {"A": ({"cpu": 7, "memory": 25}, []),
                         "B": ({"cpu": 1, "memory": 1}, ["consumer-5"]),
                         "C": ({"cpu": 6, "memory": 24}, ["consumer-1", "consumer-4"])}

    # 6. the preempted consumer-2 is tried again: it does not fit; the refusal changes nothing
    before = qm.dump_state()
    with qm.transaction():
        r = qm.try_allocate("TestTree", "consumer-2")
        assert not r.allocated
        assert r.message == " Failed to allocate quota on quota designation 'TestTree'"
        assert qm.undo_allocate("TestTree", "consumer-2")
    assert qm.dump_state() == before

    # 7. consumer-1 leaves; consumer-2 now fits in C itself
    assert qm.deallocate("TestTree", "consumer-1")
    assert qm.allocate("TestTree", "consumer-2").allocated
    assert qm.consumer_node("TestTree", "consumer-2") == "C"
    assert state(qm) == {"A": ({"cpu": 7, "memory": 25}, []),
                         "B": ({"cpu": 1, "memory": 1}, ["consumer-5"]),
                         "C": ({"cpu": 6, "memory": 24}, ["consumer-4", "consumer-2"])}
    check_invariant(qm)


def test_seed_tree_as_printed_equals_example_file() -> None:
    """The README's tree (trailing comma and all) gives the same tree as examples/quota-tree.json."""
    a, b = QuotaManager(), QuotaManager()
    a.add_tree_from_string(SEED_TREE)
    b.add_tree_from_string((EXAMPLES / "quota-tree.json").read_text())
    assert a.dump_state() == b.dump_state()


def test_seed_consumer_as_printed_has_no_trees() -> None:
    """The README's single-tree consumer uses the key "trees:" → no trees (S59); allocation is invalid."""
    doc = json.loads((EXAMPLES / "consumer.json").read_text())
    doc["spec"]["trees:"] = doc["spec"].pop("trees")
    qm = QuotaManager()
    qm.add_tree_from_string(SEED_TREE)
    qm.add_consumer(ConsumerInfo.from_dict(doc))
    with pytest.raises(QuotaError, match="failure creating consumer consumer-1 on tree TestTree"):
        qm.allocate("TestTree", "consumer-1")


def test_seed_forest_scenario() -> None:
    """The seed's forest consumer job-1 is allocated conjointly on ContextTree and ServiceTree."""
    qm = QuotaManager()
    for f in ("quota-tree-context.json", "quota-tree-service.json"):
        qm.add_tree_from_string((EXAMPLES / f).read_text())
    qm.set_mode(Mode.NORMAL)
    qm.add_forest("Forest-1")
    qm.add_tree_to_forest("Forest-1", "ContextTree")
    qm.add_tree_to_forest("Forest-1", "ServiceTree")
    qm.add_consumer(ConsumerInfo.from_string((EXAMPLES / "consumer-forest.json").read_text()))
    r = qm.allocate_forest("Forest-1", "job-1")
    assert r.allocated
    assert qm.is_allocated_forest("Forest-1", "job-1")
    assert qm.node_allocated("ContextTree", "Org-B") == {"cpu": 2}
    assert qm.node_allocated("ServiceTree", "Srvc-X") == {"cpu": 2, "disk": 1}
    # a second job asking 3 cpu on Srvc-Y (Hard, 4) and Context-1 (Hard, 2) fails on ContextTree:
    qm.add_consumer(consumer("job-2", ("ContextTree", "Context-1", {"cpu": 3}),
                             ("ServiceTree", "Srvc-Y", {"cpu": 3, "disk": 1})))
    before = qm.dump_state()
    r = qm.allocate_forest("Forest-1", "job-2")
    assert not r.allocated and r.failed_tree == "ContextTree"
    assert qm.dump_state() == before                  # nothing on ServiceTree either
    assert qm.deallocate_forest("Forest-1", "job-1")
    assert qm.node_allocated("ServiceTree", "Srvc") == {"cpu": 0, "disk": 0}
