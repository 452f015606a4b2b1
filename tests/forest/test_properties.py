"""Hypothesis state machines over the quota forest (quality.md "Invariants, property-based").

Checked after every step:

* allocated(n) = Σ requests of the consumers whose aNode is n or below (every node, every tree);
* in Normal mode without forced allocations no node is ever over its quota;
* a refused allocation (tree or forest) and a try followed by its undo leave ``dump_state()``
  identical (deep comparison);
* forest consumers are allocated on all their forest trees or on none (F4), whatever preempts them;
* replaying the same operations on a fresh manager gives the identical state (determinism, F3).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from quotaplane.forest import ConsumerInfo, ConsumerTreeSpec, Mode, QuotaManager
from tests.forest.helpers import check_invariant, tree_doc

LEAVES = ["L1", "L2", "L3", "L4", "L5"]


def _trees() -> list[str]:
    # R ── P(soft) ── L1(soft), L2(hard);  R ── Q(hard) ── L3(soft), L4(soft);  R ── L5(soft)
    shape = {"R": ("", True), "P": ("R", False), "Q": ("R", True), "L1": ("P", False),
             "L2": ("P", True), "L3": ("Q", False), "L4": ("Q", False), "L5": ("R", False)}
    q1 = {"R": (12, 12), "P": (6, 5), "Q": (5, 6), "L1": (3, 3), "L2": (3, 2), "L3": (2, 3), "L4": (3, 3),
          "L5": (2, 2)}
    q2 = {"R": (9, 20), "P": (5, 10), "Q": (4, 10), "L1": (2, 5), "L2": (3, 5), "L3": (2, 5), "L4": (2, 5),
          "L5": (1, 5)}
    out = []
    for name, q in (("T1", q1), ("T2", q2)):
        nodes = {n: (p, h, {"cpu": q[n][0], "mem": q[n][1]}) for n, (p, h) in shape.items()}
        out.append(tree_doc(name, nodes, ("cpu", "mem")))
    return out


TREES = _trees()

req_st = st.fixed_dictionaries({"cpu": st.integers(0, 4), "mem": st.integers(0, 4)})
flags_st = st.tuples(st.integers(0, 2), st.integers(0, 1), st.booleans())   # priority, type, unpreemptable


def new_manager() -> QuotaManager:
    qm = QuotaManager()
    for t in TREES:
        qm.add_tree_from_string(t)
    qm.add_forest("F")
    qm.add_tree_to_forest("F", "T1")
    qm.add_tree_to_forest("F", "T2")
    qm.set_mode(Mode.NORMAL)
    return qm


def replay(ops: list[tuple[Any, ...]]) -> dict[str, Any]:
    qm = new_manager()
    for op in ops:
        getattr(qm, op[0])(*op[1:])
    return qm.dump_state()


class ForestMachine(RuleBasedStateMachine):
    """Random consumers on two trees of one forest: single-tree consumers and forest consumers."""

    single = Bundle("single")
    forest = Bundle("forest")

    def __init__(self) -> None:
        super().__init__()
        self.qm = new_manager()
        self.n = 0
        self.ops: list[tuple[Any, ...]] = []
        self.forest_ids: set[str] = set()

    def _do(self, name: str, *args: Any) -> Any:
        self.ops.append((name, *args))
        return getattr(self.qm, name)(*args)

    # -- consumers
    @rule(target=single, tree=st.sampled_from(["T1", "T2"]), leaf=st.sampled_from(LEAVES), req=req_st,
          flags=flags_st)
    def add_single(self, tree: str, leaf: str, req: dict[str, int],
                   flags: tuple[int, int, bool]) -> tuple[str, str]:
        self.n += 1
        cid = f"s{self.n}"
        info = ConsumerInfo(cid, [ConsumerTreeSpec(tree, leaf, req, priority=flags[0], type=flags[1],
                                                   unpreemptable=flags[2])])
        self._do("add_consumer", info)
        return cid, tree

    @rule(target=forest, leaves=st.tuples(st.sampled_from(LEAVES), st.sampled_from(LEAVES)),
          reqs=st.tuples(req_st, req_st), flags=flags_st)
    def add_forest_consumer(self, leaves: tuple[str, str], reqs: tuple[dict[str, int], dict[str, int]],
                            flags: tuple[int, int, bool]) -> str:
        self.n += 1
        cid = f"f{self.n}"
        p, t, u = flags
        info = ConsumerInfo(cid, [
            ConsumerTreeSpec("T1", leaves[0], reqs[0], priority=p, type=t, unpreemptable=u),
            ConsumerTreeSpec("T2", leaves[1], reqs[1], priority=p, type=t, unpreemptable=u)])
        self._do("add_consumer", info)
        self.forest_ids.add(cid)
        return cid

    # -- tree calls
    @rule(c=single)
    def allocate(self, c: tuple[str, str]) -> None:
        cid, tree = c
        if self.qm.is_allocated(tree, cid):
            return
        before = self.qm.dump_state()
        r = self._do("allocate", tree, cid)
        if not r.allocated:
            assert self.qm.dump_state() == before, "a refused allocation changed the state"
        else:
            assert self.qm.is_allocated(tree, cid)
            for v in r.preempted_ids:
                assert not self.qm.is_allocated(tree, v)

    @rule(c=single)
    def try_and_undo(self, c: tuple[str, str]) -> None:
        cid, tree = c
        if self.qm.is_allocated(tree, cid):
            return
        before = self.qm.dump_state()
        with self.qm.transaction():
            self.qm.try_allocate(tree, cid)
            assert self.qm.undo_allocate(tree, cid)
        assert self.qm.dump_state() == before, "try + undo changed the state"
        assert not self.qm.undo_allocate(tree, cid)

    @rule(c=single)
    def deallocate(self, c: tuple[str, str]) -> None:
        cid, tree = c
        was = self.qm.is_allocated(tree, cid)
        assert self._do("deallocate", tree, cid) is was
        assert not self.qm.is_allocated(tree, cid)

    # -- forest calls
    @rule(cid=forest)
    def allocate_forest(self, cid: str) -> None:
        if self.qm.is_allocated_forest("F", cid):
            return
        before = self.qm.dump_state()
        r = self._do("allocate_forest", "F", cid)
        if not r.allocated:
            assert self.qm.dump_state() == before, "a refused forest allocation changed the state"
        else:
            assert self.qm.is_allocated_forest("F", cid)
            for v in r.preempted_ids:
                assert not self.qm.is_allocated("T1", v) and not self.qm.is_allocated("T2", v)

    @rule(cid=forest)
    def try_and_undo_forest(self, cid: str) -> None:
        if self.qm.is_allocated_forest("F", cid):
            return
        before = self.qm.dump_state()
        with self.qm.transaction():
            self.qm.try_allocate_forest("F", cid)
            assert self.qm.undo_allocate_forest("F", cid)
        assert self.qm.dump_state() == before, "forest try + undo changed the state"

    @rule(cid=forest)
    def try_and_keep_forest(self, cid: str) -> None:
        if self.qm.is_allocated_forest("F", cid):
            return
        self._do("try_allocate_forest", "F", cid)

    @rule(cid=forest)
    def deallocate_forest(self, cid: str) -> None:
        self._do("deallocate_forest", "F", cid)
        assert not self.qm.is_allocated("T1", cid) and not self.qm.is_allocated("T2", cid)

    @precondition(lambda self: len(self.ops) > 3)
    @rule(cid=consumes(forest))
    def forget_forest_consumer(self, cid: str) -> None:
        self._do("deallocate_forest", "F", cid)
        self._do("remove_consumer", cid)
        self.forest_ids.discard(cid)

    # -- invariants
    @invariant()
    def sums_match(self) -> None:
        check_invariant(self.qm)

    @invariant()
    def no_node_over_quota(self) -> None:
        for t in self.qm.dump_state()["trees"].values():
            for n in t["nodes"].values():
                for r, used in n["allocated"].items():
                    assert used <= n["quota"][r]

    @invariant()
    def forest_all_or_nothing(self) -> None:
        for cid in self.forest_ids:
            assert self.qm.is_allocated("T1", cid) == self.qm.is_allocated("T2", cid), cid

    def teardown(self) -> None:
        # determinism: the same calls on a fresh manager give the same state
        assert replay(self.ops) == self.qm.dump_state()


ForestMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
TestForestMachine = ForestMachine.TestCase


class MaintenanceMachine(RuleBasedStateMachine):
    """Forced allocations, de-allocations and tree updates: the sum invariant holds throughout."""

    def __init__(self) -> None:
        super().__init__()
        self.qm = new_manager()
        self.qm.set_mode(Mode.MAINTENANCE)
        self.ids: list[str] = []

    @rule(tree=st.sampled_from(["T1", "T2"]), node=st.sampled_from(["R", "P", "Q", *LEAVES]), req=req_st)
    def force(self, tree: str, node: str, req: dict[str, int]) -> None:
        cid = f"m{len(self.ids)}"
        self.qm.add_consumer(ConsumerInfo(cid, [ConsumerTreeSpec(tree, node, req)]))
        self.ids.append(cid)
        exists = node in self.qm.node_ids(tree)
        before = self.qm.dump_state()
        assert self.qm.allocate(tree, cid).allocated is exists    # A10: any existing node, no checks
        if not exists:
            assert self.qm.dump_state() == before

    @rule(i=st.integers(0, 50))
    def deallocate(self, i: int) -> None:
        if self.ids:
            cid = self.ids[i % len(self.ids)]
            tree = next(iter(self.qm.consumer_info(cid).trees))
            self.qm.deallocate(tree, cid)

    @rule(tree=st.sampled_from(["T1", "T2"]), node=st.sampled_from(["P", "Q", "L1", "L3"]),
          action=st.sampled_from(["delete", "quota", "rename"]))
    def edit_and_update(self, tree: str, node: str, action: str) -> None:
        cache = self.qm.get_tree_cache(tree)
        if node not in cache.node_names():
            return
        if action == "delete":
            cache.delete_node(node)
        elif action == "quota":
            spec = cache.node_spec(node)
            cache.add_node_spec(node, {"parent": spec["parent"], "quota": {"cpu": "1", "mem": "1"}})
        elif f"{node}x" not in cache.node_names():
            cache.rename_node(node, f"{node}x")
        before = set(self.qm.allocated_consumers("T1")) | set(self.qm.allocated_consumers("T2"))
        dropped = self.qm.update_forest("F")
        after = set(self.qm.allocated_consumers("T1")) | set(self.qm.allocated_consumers("T2"))
        assert set(dropped) == before - after

    @invariant()
    def sums_match(self) -> None:
        check_invariant(self.qm)


MaintenanceMachine.TestCase.settings = settings(max_examples=30, stateful_step_count=30, deadline=None,
                                               suppress_health_check=[HealthCheck.too_slow])
TestMaintenanceMachine = MaintenanceMachine.TestCase
