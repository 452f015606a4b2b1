"""QuotaManager.withdraw / restore: an exact put-back (quality.md: a refused operation changes nothing).

Used by ForestPolicy.check_replacement for a gang placeholder replacement: a plain de-allocate and
re-allocate would put the consumer at the END of its node's consumer list (decision F1: list order
decides preemption victims, A4.2).
"""

from __future__ import annotations

import pytest

from quotaplane.forest import QuotaError
from tests.forest.helpers import add_alloc, check_invariant, consumer, manager, tree_doc

TREE = tree_doc("T", {
    "R": ("", True, {"cpu": 10}),
    "P": ("R", False, {"cpu": 4}),
    "L1": ("P", False, {"cpu": 2}),
    "L2": ("P", False, {"cpu": 2}),
})


def test_restore_after_slide_down_and_try_undo_is_exact() -> None:
    """A9 slide-down during withdraw and a try/undo in between are both reversed; list order kept."""
    qm = manager(TREE)
    for cid in ("a", "b", "c"):
        assert add_alloc(qm, "T", cid, "L1", {"cpu": 1}).allocated
    assert qm.node_consumers("T", "L1") == ["a", "b"]
    assert qm.node_consumers("T", "P") == ["c"]
    before = qm.dump_state()
    w = qm.withdraw("a")
    assert not qm.has_consumer("a")
    assert qm.node_consumers("T", "L1") == ["b", "c"]     # c slid down (A9)
    qm.add_consumer(consumer("x", ("T", "L1", {"cpu": 1})))
    assert qm.try_allocate("T", "x").allocated
    assert qm.undo_allocate("T", "x")
    qm.remove_consumer("x")
    qm.restore(w)
    assert qm.dump_state() == before
    assert qm.node_consumers("T", "L1") == ["a", "b"]     # a back in FRONT, not appended
    assert qm.node_consumers("T", "P") == ["c"]
    assert qm.allocated_consumers("T") == ["a", "b", "c"]
    check_invariant(qm)


def test_release_and_reallocate_would_reorder() -> None:
    """The contrast that makes withdraw/restore necessary: de-allocate + allocate appends (F1)."""
    qm = manager(TREE)
    for cid in ("a", "b"):
        add_alloc(qm, "T", cid, "L1", {"cpu": 1})
    qm.deallocate("T", "a")
    qm.allocate("T", "a")
    assert qm.node_consumers("T", "L1") == ["b", "a"]


def test_restore_refuses_when_the_id_was_registered_again() -> None:
    """restore raises QuotaError and changes nothing if the consumer id exists again."""
    qm = manager(TREE)
    add_alloc(qm, "T", "a", "L1", {"cpu": 1})
    w = qm.withdraw("a")
    qm.add_consumer(consumer("a", ("T", "L2", {"cpu": 1})))
    state = qm.dump_state()
    with pytest.raises(QuotaError):
        qm.restore(w)
    assert qm.dump_state() == state


def test_withdraw_unknown_consumer_raises() -> None:
    """withdraw of an unregistered id raises QuotaError."""
    with pytest.raises(QuotaError):
        manager(TREE).withdraw("nobody")
