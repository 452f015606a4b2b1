"""Reference §4 (forests F0–F10) and §5 (try/undo), with the F2 fixes."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from quotaplane.forest import Mode, QuotaError, QuotaManager
from tests.forest.helpers import add_alloc, check_invariant, consumer, manager, tree_doc

CTX = tree_doc("ContextTree", {"Root": ("", False, {"cpu": 4}), "Context-1": ("Root", False, {"cpu": 2}),
                               "Context-4": ("Root", False, {"cpu": 2})})
SRV = tree_doc("ServiceTree", {"Srvc": ("", False, {"cpu": 4, "disk": 2}),
                               "Srvc-X": ("Srvc", True, {"cpu": 2, "disk": 1}),
                               "Srvc-Y": ("Srvc", False, {"cpu": 2, "disk": 1})}, ("cpu", "disk"))


def forest_manager(normal: bool = True) -> QuotaManager:
    qm = manager(CTX, SRV, normal=normal)
    qm.add_forest("F")
    qm.add_tree_to_forest("F", "ContextTree")
    qm.add_tree_to_forest("F", "ServiceTree")
    return qm


def add_job(qm: QuotaManager, cid: str, ctx: str = "Context-4", srv: str = "Srvc-X", cpu: int = 2,
            disk: int = 1, **kw: Any) -> None:
    qm.add_consumer(consumer(cid, ("ContextTree", ctx, {"cpu": cpu}),
                             ("ServiceTree", srv, {"cpu": cpu, "disk": disk}), **kw))


def test_f2_forest_allocates_on_all_trees() -> None:
    """F2: the seed's forest consumer (job-1) is placed on every tree; the message is Go's."""
    qm = forest_manager()
    add_job(qm, "job-1")
    r = qm.allocate_forest("F", "job-1")
    assert r.allocated and r.message == "    "
    assert qm.consumer_node("ContextTree", "job-1") == "Context-4"
    assert qm.consumer_node("ServiceTree", "job-1") == "Srvc-X"
    assert qm.is_allocated_forest("F", "job-1")
    assert qm.node_allocated("ServiceTree", "Srvc") == {"cpu": 2, "disk": 1}


def test_f2_forest_all_or_nothing_restores_first_tree_exactly() -> None:
    """F2/F4/B7: a refusal on the second tree leaves the first tree exactly as before."""
    qm = forest_manager()
    add_job(qm, "a", ctx="Context-1", srv="Srvc-X")
    assert qm.allocate_forest("F", "a").allocated
    add_job(qm, "b", ctx="Context-1", srv="Srvc-X")     # Srvc-X is Hard and full now
    before = qm.dump_state()
    r = qm.allocate_forest("F", "b")
    assert not r.allocated
    assert r.message == " Failed to allocate quota on quota designation 'ServiceTree'"
    assert r.failed_tree == "ServiceTree" and r.failed_node == "Srvc-X"
    assert qm.dump_state() == before


def test_f1_b1_consumer_trees_outside_forest_are_ignored() -> None:
    """B1 fixed (S51): a consumer naming a tree outside the forest is allocated on the intersection."""
    qm = forest_manager()
    qm.add_tree_from_string(tree_doc("Other", {"O": ("", False, {"cpu": 1})}))
    qm.add_consumer(consumer("j", ("ContextTree", "Context-1", {"cpu": 1}), ("Other", "O", {"cpu": 1})))
    r = qm.allocate_forest("F", "j")
    assert r.allocated
    assert qm.is_allocated("ContextTree", "j") and not qm.is_allocated("Other", "j")
    # F6 (S52): not allocated "on the forest" — it does not name every tree of it
    assert not qm.is_allocated_forest("F", "j")
    # F5 (S46/S52): de-allocates where it can, True only if allocated on every tree
    assert qm.deallocate_forest("F", "j") is False
    assert not qm.is_allocated("ContextTree", "j")


def test_f3_victim_on_one_tree_leaves_every_tree() -> None:
    """F3/F4: a consumer preempted on one tree is removed from all trees of the forest."""
    qm = forest_manager()
    add_job(qm, "low", ctx="Context-1", srv="Srvc-Y", cpu=2, disk=1)
    add_job(qm, "borrow", ctx="Context-1", srv="Srvc-Y", cpu=2, disk=1)
    assert qm.allocate_forest("F", "low").allocated
    assert qm.allocate_forest("F", "borrow").allocated
    assert qm.consumer_node("ContextTree", "borrow") == "Root"
    assert qm.consumer_node("ServiceTree", "borrow") == "Srvc"
    # a newcomer claiming Context-4's own quota evicts the root borrower on ContextTree …
    add_job(qm, "new", ctx="Context-4", srv="Srvc-X", cpu=2, disk=1)
    r = qm.allocate_forest("F", "new")
    assert r.allocated and r.preempted_ids == ["borrow"]
    # … and the borrower is gone from ServiceTree as well
    assert not qm.is_allocated("ServiceTree", "borrow")
    assert not qm.is_allocated("ContextTree", "borrow")
    check_invariant(qm)


def test_f7_maintenance_forest_is_all_or_nothing() -> None:
    """F7/B9: forced forest allocation; a missing node on one tree leaves nothing allocated."""
    qm = forest_manager(normal=False)
    add_job(qm, "ok", ctx="Root", srv="Srvc-X", cpu=9)     # internal node, over quota: forced
    assert qm.allocate_forest("F", "ok").allocated
    assert qm.node_allocated("ContextTree", "Root") == {"cpu": 9}
    add_job(qm, "bad", ctx="Context-1", srv="nowhere")
    before = qm.dump_state()
    r = qm.allocate_forest("F", "bad")
    assert not r.allocated and "nowhere" in r.message
    assert qm.dump_state() == before


def test_b8_no_double_counting_across_tree_and_forest_calls() -> None:
    """B8 fixed (S65): a consumer allocated through the tree API cannot be counted again via the forest."""
    qm = forest_manager()
    add_job(qm, "j")
    assert qm.allocate("ContextTree", "j").allocated
    before = qm.dump_state()
    with pytest.raises(QuotaError, match="already allocated on tree ContextTree"):
        qm.allocate_forest("F", "j")
    assert qm.dump_state() == before
    assert qm.allocate("ServiceTree", "j").allocated
    with pytest.raises(QuotaError, match="already allocated on forest F"):
        qm.allocate_forest("F", "j")


def test_f8_f9_try_undo_forest_restores_everything() -> None:
    """F8/F9/§5: undo after a forest try restores victims, slides and maps exactly."""
    qm = forest_manager()
    add_job(qm, "low", ctx="Context-1", srv="Srvc-Y")
    add_job(qm, "borrow", ctx="Context-1", srv="Srvc-Y")
    qm.allocate_forest("F", "low")
    qm.allocate_forest("F", "borrow")
    add_job(qm, "new", ctx="Context-4", srv="Srvc-X")
    before = qm.dump_state()
    with qm.transaction():
        r = qm.try_allocate_forest("F", "new")
        assert r.allocated and r.preempted_ids == ["borrow"] and r.message == "     "
        assert qm.undo_allocate_forest("F", "new") is True
    assert qm.dump_state() == before
    assert qm.undo_allocate_forest("F", "new") is False       # B5: no second undo
    assert qm.dump_state() == before


def test_try_forest_in_maintenance_is_forced_and_undoable() -> None:
    """§5: try_allocate_forest outside Normal mode performs the forced allocation (and can be undone)."""
    qm = forest_manager(normal=False)
    add_job(qm, "j", ctx="Root", srv="Srvc")
    before = qm.dump_state()
    assert qm.try_allocate_forest("F", "j").allocated
    assert qm.consumer_node("ContextTree", "j") == "Root"
    assert qm.undo_allocate_forest("F", "j")
    assert qm.dump_state() == before


def test_try_undo_tree_restores_exact_state_and_second_undo_refused() -> None:
    """§5/B5: tree try+undo restores list order, aNodes and maps; a second undo changes nothing."""
    t = tree_doc("T", {"R": ("", True, {"cpu": 4}), "L1": ("R", False, {"cpu": 2}),
                       "L2": ("R", False, {"cpu": 2})})
    qm = manager(t)
    add_alloc(qm, "T", "a", "L1", {"cpu": 1})
    add_alloc(qm, "T", "b", "L1", {"cpu": 2})
    add_alloc(qm, "T", "c", "L1", {"cpu": 1})
    qm.add_consumer(consumer("n", ("T", "L2", {"cpu": 2}), priority=1))
    before = qm.dump_state()
    r = qm.try_allocate("T", "n")
    assert r.allocated and r.preempted_ids == ["b"]
    assert qm.undo_allocate("T", "n") is True
    assert qm.dump_state() == before
    assert qm.undo_allocate("T", "n") is False
    assert qm.dump_state() == before


def test_undo_refused_after_an_intervening_change() -> None:
    """§5: undo must follow the try directly; after another change the snapshot is stale (refused)."""
    t = tree_doc("T", {"R": ("", True, {"cpu": 4})})
    qm = manager(t)
    qm.add_consumer(consumer("a", ("T", "R", {"cpu": 1})))
    add_alloc(qm, "T", "b", "R", {"cpu": 1})
    assert qm.try_allocate("T", "a").allocated
    assert qm.deallocate("T", "b")
    state = qm.dump_state()
    assert qm.undo_allocate("T", "a") is False
    assert qm.undo_allocate("T", "other") is False
    assert qm.dump_state() == state


def test_try_allocate_requires_normal_mode() -> None:
    """§5/§6: TryAllocate outside Normal mode is an error."""
    qm = manager(CTX, normal=False)
    qm.add_consumer(consumer("a", ("ContextTree", "Context-1", {"cpu": 1})))
    with pytest.raises(QuotaError, match="manager is not in normal mode"):
        qm.try_allocate("ContextTree", "a")


def test_refused_try_leaves_state_and_undo_is_harmless() -> None:
    """§5: a refused try changes nothing; its undo succeeds and still changes nothing."""
    t = tree_doc("T", {"R": ("", True, {"cpu": 1})})
    qm = manager(t)
    add_alloc(qm, "T", "a", "R", {"cpu": 1}, unpreemptable=True)
    qm.add_consumer(consumer("b", ("T", "R", {"cpu": 1}), priority=5))
    before = qm.dump_state()
    assert not qm.try_allocate("T", "b").allocated
    assert qm.dump_state() == before
    assert qm.undo_allocate("T", "b") is True
    assert qm.dump_state() == before


def test_f10_update_forest_removes_dropped_from_all_trees() -> None:
    """F10: ids left unallocated by a forest update are removed from every tree of the forest."""
    qm = forest_manager()
    add_job(qm, "j", ctx="Context-1", srv="Srvc-X")
    qm.allocate_forest("F", "j")
    qm.get_tree_cache("ContextTree").delete_node("Root")   # no root any more → empty tree
    assert qm.is_allocated("ContextTree", "j")             # edits wait for the update (S37)
    assert qm.update_forest("F") == ["j"]
    assert not qm.is_allocated("ServiceTree", "j")
    assert qm.node_allocated("ServiceTree", "Srvc") == {"cpu": 0, "disk": 0}


def test_parallel_try_undo_under_transaction() -> None:
    """§5 (TestQuotaManagerParallelTryUndoAllocation): try+undo pairs in threads keep the state."""
    t = tree_doc("T", {"R": ("", False, {"cpu": 100}), **{f"L{i}": ("R", False, {"cpu": 10})
                                                           for i in range(4)}})
    qm = manager(t)
    for i in range(40):
        qm.add_consumer(consumer(f"c{i}", ("T", f"L{i % 4}", {"cpu": 3}), priority=i % 3))
    for i in range(0, 40, 2):
        qm.allocate("T", f"c{i}")
    before = qm.dump_state()
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(1, 40, 2):
                with qm.transaction():
                    r = qm.try_allocate("T", f"c{i}")
                    assert qm.undo_allocate("T", f"c{i}"), r
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert qm.dump_state() == before
    assert qm.get_mode() is Mode.NORMAL


def test_f8_forest_try_snapshot_failure_refuses_undo() -> None:
    """F8/B5: a forest try whose gNode is not a leaf takes no snapshot; the undo then changes nothing."""
    qm = forest_manager()
    add_job(qm, "j", ctx="Root", srv="Srvc-X")
    before = qm.dump_state()
    r = qm.try_allocate_forest("F", "j")
    assert not r.allocated and r.message == " Failed to take a state snapshot of tree 'ContextTree'"
    assert qm.undo_allocate_forest("F", "j") is False
    assert qm.dump_state() == before


def test_f2_empty_group_fails_and_f6_empty_forest() -> None:
    """F2.2: an empty groupID fails with Go's message, nothing changes; F6: an empty forest answers True."""
    qm = forest_manager()
    add_job(qm, "j", ctx="", srv="Srvc-X")
    before = qm.dump_state()
    r = qm.allocate_forest("F", "j")
    assert not r.allocated and r.message == "No quota designations provided for 'ContextTree'"
    assert qm.dump_state() == before
    qm.add_forest("Empty")
    assert qm.is_allocated_forest("Empty", "j") is True


def test_f2_3_victims_leave_later_trees_before_the_newcomer_is_placed() -> None:
    """F2.3: a consumer preempted on an earlier tree is de-allocated from the next tree first."""
    qm = forest_manager()
    qm.add_consumer(consumer("v2", ("ContextTree", "Context-1", {"cpu": 2})))
    assert qm.allocate("ContextTree", "v2").allocated       # Context-1 is full
    add_job(qm, "big", ctx="Context-1", srv="Srvc-X", cpu=2)
    assert qm.allocate_forest("F", "big").allocated          # ContextTree: borrows at Root; Srvc-X full
    assert qm.consumer_node("ContextTree", "big") == "Root"
    add_job(qm, "owner", ctx="Context-4", srv="Srvc-X", cpu=2)
    # owner evicts the root borrower big on ContextTree; big leaves ServiceTree before owner is placed
    # there, so owner fits in the Hard Srvc-X
    r = qm.allocate_forest("F", "owner")
    assert r.allocated and r.preempted_ids == ["big"]
    assert qm.consumer_node("ServiceTree", "owner") == "Srvc-X"
    assert not qm.is_allocated("ServiceTree", "big")
    check_invariant(qm)


def test_threads_mixing_all_calls_keep_the_invariant() -> None:
    """One lock per manager: concurrent allocate/deallocate/forest/try-undo calls never corrupt state."""
    qm = forest_manager()
    for i in range(24):
        add_job(qm, f"j{i}", ctx=("Context-1", "Context-4")[i % 2], srv=("Srvc-X", "Srvc-Y")[i % 3 % 2],
                cpu=1 + i % 2, disk=i % 2, priority=i % 3)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for step in range(60):
                cid = f"j{(k * 7 + step) % 24}"
                with qm.transaction():
                    on = [qm.is_allocated(t, cid) for t in ("ContextTree", "ServiceTree")]
                    assert on[0] == on[1]
                    if on[0]:
                        qm.deallocate_forest("F", cid)
                    elif step % 3 == 0:
                        before = qm.dump_state()
                        qm.try_allocate_forest("F", cid)
                        assert qm.undo_allocate_forest("F", cid)
                        assert qm.dump_state() == before
                    else:
                        qm.allocate_forest("F", cid)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    check_invariant(qm)
    for i in range(24):
        assert qm.is_allocated("ContextTree", f"j{i}") == qm.is_allocated("ServiceTree", f"j{i}")
