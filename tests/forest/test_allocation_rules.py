"""Reference §2 (allocation algorithm A0–A10) and §3 (controller C1–C5), one rule at a time."""

from __future__ import annotations

from quotaplane.forest import Mode, QuotaManager
from tests.forest.helpers import add_alloc, check_invariant, consumer, manager, tree_doc

# R(10) ── P(soft,4) ── L1(soft,2), L2(soft,2)
#       └─ Q(hard,4) ── L3(hard,2), L4(soft,2)
TREE = tree_doc("T", {
    "R": ("", True, {"cpu": 10}),
    "P": ("R", False, {"cpu": 4}),
    "L1": ("P", False, {"cpu": 2}),
    "L2": ("P", False, {"cpu": 2}),
    "Q": ("R", True, {"cpu": 4}),
    "L3": ("Q", True, {"cpu": 2}),
    "L4": ("Q", False, {"cpu": 2}),
})


def cpu(qm: QuotaManager, node: str) -> int:
    return qm.node_allocated("T", node)["cpu"]


def test_a0_fit_is_request_within_quota_minus_allocated() -> None:
    """A0: a request fits iff req <= quota − allocated for every resource."""
    qm = manager(TREE)
    assert add_alloc(qm, "T", "a", "L3", {"cpu": 2}).allocated
    assert qm.consumer_node("T", "a") == "L3"
    r = add_alloc(qm, "T", "b", "L3", {"cpu": 1})   # L3 is Hard and full
    assert not r.allocated
    assert r.message == " Failed to allocate quota on quota designation 'T'"


def test_a0_over_quota_node_refuses_even_a_zero_request() -> None:
    """A0/B14: a node forced over quota refuses even an empty request until it drains."""
    qm = manager(TREE, normal=False)
    add_alloc(qm, "T", "big", "L3", {"cpu": 3})       # Maintenance: forced, L3 now 3 > 2
    qm.set_mode(Mode.NORMAL)
    assert cpu(qm, "L3") == 3
    assert not add_alloc(qm, "T", "zero", "L3", {"cpu": 0}).allocated


def test_a1_unknown_or_internal_group_fails_without_change() -> None:
    """A1: groupID unknown or naming an internal node → not allocated, nothing changes (S05)."""
    qm = manager(TREE)
    before = qm.dump_state()
    qm.add_consumer(consumer("x", ("T", "nope", {"cpu": 1})))
    qm.add_consumer(consumer("y", ("T", "P", {"cpu": 1})))
    before = qm.dump_state()
    assert not qm.allocate("T", "x").allocated
    assert not qm.allocate("T", "y").allocated
    assert qm.dump_state() == before


def test_a3_soft_leaf_borrows_from_parent_and_is_counted_there_only() -> None:
    """A3.2: a full Soft gNode sends the consumer up; it is counted at its aNode and above, not below."""
    qm = manager(TREE)
    add_alloc(qm, "T", "a", "L1", {"cpu": 2})
    assert add_alloc(qm, "T", "b", "L1", {"cpu": 1}).allocated
    assert qm.consumer_node("T", "b") == "P"
    assert cpu(qm, "L1") == 2 and cpu(qm, "P") == 3 and cpu(qm, "R") == 3
    check_invariant(qm)


def test_a3_hard_gnode_stops_the_walk() -> None:
    """A3.2: not placed at a Hard node → the walk stops there (no borrowing)."""
    qm = manager(TREE)
    add_alloc(qm, "T", "a", "L3", {"cpu": 2})
    before = qm.dump_state()
    assert not add_alloc(qm, "T", "b", "L3", {"cpu": 1}).allocated
    before["consumers"]["b"] = qm.dump_state()["consumers"]["b"]
    assert qm.dump_state() == before


def test_a3_hard_internal_node_stops_borrowing_above_it() -> None:
    """A3.2: a Soft leaf under a full Hard node cannot borrow from the root."""
    qm = manager(TREE)
    add_alloc(qm, "T", "a", "L3", {"cpu": 2})
    add_alloc(qm, "T", "b", "L4", {"cpu": 2})
    r = add_alloc(qm, "T", "c", "L4", {"cpu": 1})
    assert not r.allocated
    assert r.failed_node == "Q"


def test_a3_3_ancestor_refusal_moves_candidate_above_it() -> None:
    """A3.3 (S32/S33): placed at the gNode, an ancestor refuses → undo, next candidate is its parent."""
    t = tree_doc("T", {"R": ("", False, {"cpu": 10}), "P": ("R", False, {"cpu": 2}),
                       "L": ("P", False, {"cpu": 4})})
    qm = manager(t)
    assert add_alloc(qm, "T", "c", "L", {"cpu": 3}).allocated
    assert qm.consumer_node("T", "c") == "R"
    assert (cpu(qm, "L"), cpu(qm, "P"), cpu(qm, "R")) == (0, 0, 3)


def test_a3_3_hard_below_stops_after_ancestor_refusal() -> None:
    """A3.3: after an ancestor refuses, a Hard node met so far (hitHard) stops the walk."""
    t = tree_doc("T", {"R": ("", False, {"cpu": 10}), "P": ("R", False, {"cpu": 2}),
                       "L": ("P", True, {"cpu": 4})})
    qm = manager(t)
    assert not add_alloc(qm, "T", "c", "L", {"cpu": 3}).allocated
    assert (cpu(qm, "L"), cpu(qm, "P"), cpu(qm, "R")) == (0, 0, 0)


def test_b4_two_recovers_in_one_walk_never_go_negative() -> None:
    """B4 fixed (S64): the recovery record is reset after each recover; no negative allocation."""
    t = tree_doc("T", {"R": ("", False, {"cpu": 10}), "P3": ("R", False, {"cpu": 2}),
                       "P2": ("P3", False, {"cpu": 5}), "P1": ("P2", False, {"cpu": 2}),
                       "L": ("P1", False, {"cpu": 4})})
    qm = manager(t)
    assert add_alloc(qm, "T", "c", "L", {"cpu": 3}).allocated
    assert qm.consumer_node("T", "c") == "R"
    assert [cpu(qm, n) for n in ("L", "P1", "P2", "P3", "R")] == [0, 0, 0, 0, 3]
    check_invariant(qm)


def test_a4_slide_up_moves_lower_priority_consumers_to_parent() -> None:
    """A4 (applyPriority): a higher-priority newcomer slides lower-priority gNode consumers up."""
    qm = manager(TREE)
    add_alloc(qm, "T", "low", "L1", {"cpu": 2})
    r = add_alloc(qm, "T", "high", "L1", {"cpu": 2}, priority=1)
    assert r.allocated and r.preempted_ids == []
    assert qm.consumer_node("T", "high") == "L1"
    assert qm.consumer_node("T", "low") == "P"
    check_invariant(qm)


def test_a4_equal_priority_never_slides_others() -> None:
    """A4 (S21): an equal-priority newcomer that has to borrow borrows itself."""
    qm = manager(TREE)
    add_alloc(qm, "T", "first", "L1", {"cpu": 2})
    add_alloc(qm, "T", "second", "L1", {"cpu": 2})
    assert qm.consumer_node("T", "first") == "L1"
    assert qm.consumer_node("T", "second") == "P"


def test_a4_below_root_slide_up_ignores_unpreemptable_and_type() -> None:
    """A4 (S30): below the root nobody is evicted, so unPreemptable and type do not matter."""
    qm = manager(TREE)
    add_alloc(qm, "T", "u", "L1", {"cpu": 2}, unpreemptable=True, ctype=7)
    assert add_alloc(qm, "T", "c", "L1", {"cpu": 2}, priority=1).allocated
    assert qm.consumer_node("T", "u") == "P"


def test_a4_hard_non_root_node_does_not_slide_up() -> None:
    """A4.1: slide-up at a Hard non-root node is refused."""
    qm = manager(TREE)
    add_alloc(qm, "T", "low", "L3", {"cpu": 2})
    # no slide-up at L3; the preemption phase (A5) evicts instead
    r = add_alloc(qm, "T", "high", "L3", {"cpu": 2}, priority=1)
    assert r.allocated and r.preempted_ids == ["low"]
    assert not qm.is_allocated("T", "low")


def test_a4_root_slide_up_is_preemption_of_preemptable_same_type_only() -> None:
    """A4 at the root (S22/S23): moving up means preemption; unPreemptable/other type stay."""
    t = tree_doc("T", {"R": ("", True, {"cpu": 3})})
    qm = manager(t)
    add_alloc(qm, "T", "u", "R", {"cpu": 1}, unpreemptable=True)
    add_alloc(qm, "T", "o", "R", {"cpu": 1}, ctype=1)
    add_alloc(qm, "T", "p", "R", {"cpu": 1})
    r = add_alloc(qm, "T", "new", "R", {"cpu": 1}, priority=1)
    assert r.allocated and r.preempted_ids == ["p"]
    assert qm.node_consumers("T", "R") == ["u", "o", "new"]
    # a priority-2 newcomer may preempt the priority-1 consumer (eligible: lower priority, same type)
    r2 = add_alloc(qm, "T", "new2", "R", {"cpu": 1}, priority=2)
    assert r2.allocated and r2.preempted_ids == ["new"]
    assert qm.node_consumers("T", "R") == ["u", "o", "new2"]


def test_a4_victims_are_the_shortest_prefix_in_list_order() -> None:
    """A4.2 (S56): victims are the first eligible prefix in list order, not a minimal set."""
    t = tree_doc("T", {"R": ("", True, {"cpu": 4})})
    qm = manager(t)
    add_alloc(qm, "T", "a", "R", {"cpu": 1})
    add_alloc(qm, "T", "b", "R", {"cpu": 3})
    r = add_alloc(qm, "T", "c", "R", {"cpu": 2}, priority=1)
    assert r.allocated
    assert r.preempted_ids == ["a", "b"]          # b alone would have been enough
    assert qm.node_consumers("T", "R") == ["c"]


def test_a4_priority_ignored_when_claiming_room_in_ancestor() -> None:
    """A4 (S20/S24): a priority-0 consumer within its own quota evicts a higher-priority root borrower."""
    t = tree_doc("T", {"R": ("", True, {"cpu": 4}), "L1": ("R", False, {"cpu": 2}),
                       "L2": ("R", False, {"cpu": 2})})
    qm = manager(t)
    add_alloc(qm, "T", "x", "L2", {"cpu": 4}, priority=2)
    assert qm.consumer_node("T", "x") == "R"
    r = add_alloc(qm, "T", "y", "L1", {"cpu": 2})
    assert r.allocated and r.preempted_ids == ["x"]
    assert qm.consumer_node("T", "y") == "L1"
    assert not qm.is_allocated("T", "x")


def test_a5_preemption_phase_evicts_on_own_path() -> None:
    """A5: priority > 0, blocked at a Hard node → lower-priority preemptable consumers on the path go."""
    qm = manager(TREE)
    add_alloc(qm, "T", "v", "L3", {"cpu": 2})
    r = add_alloc(qm, "T", "c", "L3", {"cpu": 2}, priority=1)
    assert r.allocated and r.preempted_ids == ["v"]
    assert qm.consumer_node("T", "c") == "L3"


def test_a5_no_preemption_phase_for_priority_zero() -> None:
    """A5: only consumers with priority > 0 run the preemption phase."""
    qm = manager(TREE)
    add_alloc(qm, "T", "v", "L3", {"cpu": 2})
    assert not add_alloc(qm, "T", "c", "L3", {"cpu": 2}).allocated
    assert qm.is_allocated("T", "v")


def test_a5_respects_unpreemptable_and_type() -> None:
    """A5.2: victims must be preemptable, of the same type and of strictly lower priority."""
    qm = manager(TREE)
    add_alloc(qm, "T", "u", "L3", {"cpu": 1}, unpreemptable=True)
    add_alloc(qm, "T", "t", "L3", {"cpu": 1}, ctype=1)
    assert not add_alloc(qm, "T", "c", "L3", {"cpu": 1}, priority=1).allocated
    add_alloc(qm, "T", "p", "L4", {"cpu": 2}, priority=1)
    assert not add_alloc(qm, "T", "c2", "L4", {"cpu": 1}, priority=1).allocated   # equal priority


def test_a5_never_preempts_outside_the_path() -> None:
    """A5.5 (S26): consumers in sibling subtrees are never preempted, even if they fill the node."""
    t = tree_doc("T", {"R": ("", False, {"cpu": 4}), "L1": ("R", False, {"cpu": 4}),
                       "L2": ("R", True, {"cpu": 4})})
    qm = manager(t)
    add_alloc(qm, "T", "s", "L1", {"cpu": 4})
    before = qm.dump_state()
    r = add_alloc(qm, "T", "c", "L2", {"cpu": 1}, priority=1)
    assert not r.allocated
    assert qm.is_allocated("T", "s")
    after = qm.dump_state()
    after["consumers"].pop("c")
    assert after == before


def test_b2_failed_retry_after_preemption_restores_victims() -> None:
    """B2 fixed (S35): victims removed by the phase come back when the retry fails; state identical."""
    t = tree_doc("T", {"R": ("", False, {"cpu": 10}), "H": ("R", True, {"cpu": 4}),
                       "L": ("H", True, {"cpu": 1}), "L2": ("H", False, {"cpu": 0})})
    qm = manager(t)
    add_alloc(qm, "T", "w", "L2", {"cpu": 3}, priority=2)
    assert qm.consumer_node("T", "w") == "H"
    add_alloc(qm, "T", "v", "L", {"cpu": 1})
    qm.add_consumer(consumer("c", ("T", "L", {"cpu": 2}), priority=1))
    before = qm.dump_state()
    r = qm.allocate("T", "c")
    assert not r.allocated and r.preempted_ids == []
    assert qm.dump_state() == before
    assert qm.deallocate("T", "v")


def test_b3_victims_of_every_phase_are_reported() -> None:
    """B3 fixed (S55): victims of a first phase stay reported when the retry has to preempt more."""
    t = tree_doc("T", {"R": ("", False, {"cpu": 10}), "H": ("R", True, {"cpu": 3}),
                       "L": ("H", True, {"cpu": 2}), "L2": ("H", False, {"cpu": 0})})
    qm = manager(t)
    add_alloc(qm, "T", "v1", "L", {"cpu": 1})
    add_alloc(qm, "T", "w", "L2", {"cpu": 2})      # borrows at H, which is now full
    assert qm.consumer_node("T", "w") == "H"
    # c at L: phase 1 at L evicts v1; the retry fails at Hard H; phase 2 from H evicts w.
    r = add_alloc(qm, "T", "c", "L", {"cpu": 2}, priority=1)
    assert r.allocated
    assert r.preempted_ids == ["v1", "w"]
    assert not qm.is_allocated("T", "v1") and not qm.is_allocated("T", "w")
    assert qm.consumer_node("T", "c") == "L"
    check_invariant(qm)


def test_a8_root_hard_flag_has_no_effect() -> None:
    """A8 (S04): a Hard root still preempts borrowers."""
    t = tree_doc("T", {"R": ("", True, {"cpu": 2}), "L1": ("R", False, {"cpu": 1}),
                       "L2": ("R", False, {"cpu": 1})})
    qm = manager(t)
    add_alloc(qm, "T", "borrower", "L1", {"cpu": 2})
    r = add_alloc(qm, "T", "owner", "L2", {"cpu": 1})
    assert r.allocated and r.preempted_ids == ["borrower"]


def test_a9_slide_down_is_single_level_and_on_path_only() -> None:
    """A9 (S34): on departure a parent-level consumer slides one level down (not to its gNode)."""
    t = tree_doc("T", {"R": ("", False, {"cpu": 10}), "P": ("R", False, {"cpu": 4}),
                       "L": ("P", False, {"cpu": 2}), "L2": ("P", False, {"cpu": 2})})
    qm = manager(t)
    add_alloc(qm, "T", "a", "L", {"cpu": 2})
    add_alloc(qm, "T", "x", "L2", {"cpu": 2})
    add_alloc(qm, "T", "b", "L", {"cpu": 2})
    assert qm.consumer_node("T", "b") == "R"
    assert qm.deallocate("T", "a")
    assert qm.consumer_node("T", "b") == "P"       # not L, although L has room now
    assert cpu(qm, "L") == 0 and cpu(qm, "P") == 4
    check_invariant(qm)


def test_a9_slide_down_into_gnode() -> None:
    """A9: a consumer at the parent whose gNode is the freed leaf moves down into it."""
    qm = manager(TREE)
    add_alloc(qm, "T", "a", "L1", {"cpu": 2})
    add_alloc(qm, "T", "b", "L1", {"cpu": 2})
    assert qm.consumer_node("T", "b") == "P"
    assert qm.deallocate("T", "a")
    assert qm.consumer_node("T", "b") == "L1"
    assert qm.node_consumers("T", "P") == []


def test_a10_forced_allocation_in_maintenance() -> None:
    """A10 (S17/S43): Maintenance places at the named node (internal allowed) without checks."""
    qm = manager(TREE, normal=False)
    assert qm.get_mode() is Mode.MAINTENANCE
    r = add_alloc(qm, "T", "a", "P", {"cpu": 9})
    assert r.allocated and r.message == ""
    assert qm.consumer_node("T", "a") == "P"
    assert cpu(qm, "P") == 9 and cpu(qm, "R") == 9
    r2 = add_alloc(qm, "T", "b", "ghost", {"cpu": 1})
    assert not r2.allocated and r2.message == "failed force allocate consumer b on node ghost"


def test_c1_preempted_consumers_leave_the_controller() -> None:
    """C1: preempted consumers are removed from the allocated map; their specs stay (§6)."""
    t = tree_doc("T", {"R": ("", True, {"cpu": 1})})
    qm = manager(t)
    add_alloc(qm, "T", "a", "R", {"cpu": 1})
    add_alloc(qm, "T", "b", "R", {"cpu": 1}, priority=1)
    assert not qm.is_allocated("T", "a")
    assert "a" in qm.consumer_ids()
    assert qm.deallocate("T", "a") is False


def test_c2_deallocate_unallocated_is_false() -> None:
    """C2: de-allocating a consumer that is not allocated returns False."""
    qm = manager(TREE)
    qm.add_consumer(consumer("a", ("T", "L1", {"cpu": 1})))
    assert qm.deallocate("T", "a") is False
    assert qm.allocate("T", "a").allocated
    assert qm.deallocate("T", "a") is True
    assert qm.deallocate("T", "a") is False


def test_c4_try_snapshot_failure_and_c5_undo() -> None:
    """C4/C5/B5: a try whose gNode is not a leaf reports the snapshot failure; undo then refuses."""
    qm = manager(TREE)
    qm.add_consumer(consumer("a", ("T", "P", {"cpu": 1})))
    r = qm.try_allocate("T", "a")
    assert not r.allocated and r.message == " Failed to take a state snapshot of tree 'T'"
    before = qm.dump_state()
    assert qm.undo_allocate("T", "a") is False
    assert qm.dump_state() == before


def test_a6_mid_walk_recover_appends_restored_consumers() -> None:
    """A6: a recover in the middle of a successful walk puts slid consumers back at the end of their list."""
    t = tree_doc("T", {"R": ("", False, {"cpu": 10, "mem": 10}), "G": ("R", False, {"cpu": 10, "mem": 10}),
                       "P": ("G", False, {"cpu": 10, "mem": 0}), "L": ("P", False, {"cpu": 2, "mem": 10})},
                 ("cpu", "mem"))
    qm = manager(t)
    add_alloc(qm, "T", "a", "L", {"cpu": 1})
    add_alloc(qm, "T", "x", "L", {"cpu": 1}, priority=1)
    assert qm.node_consumers("T", "L") == ["a", "x"]
    # c slides a up to P and is placed at L; P (mem 0) refuses c and cannot make room → recover;
    # c is then placed at G; a came back to L, appended after x.
    r = add_alloc(qm, "T", "c", "L", {"cpu": 1, "mem": 1}, priority=1)
    assert r.allocated and r.preempted_ids == []
    assert qm.consumer_node("T", "c") == "G"
    assert qm.node_consumers("T", "L") == ["x", "a"]
    check_invariant(qm)
