"""Differential test: the optimised engine against a naive, literal transcription of reference §2.

The naive model below is written straight from the reference text (lists, recursion, whole-tree copy to
undo a failed allocation — the F2 fixes), with no indexes, sums or undo logs. Hypothesis drives both
with the same random trees and operations; after every step the responses, the aNodes, and every node's
allocated vector and consumer list (order included) must be identical.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane.forest import ConsumerInfo, ConsumerTreeSpec, Mode, QuotaManager


class NNode:
    def __init__(self, nid: str, hard: bool, quota: list[int]) -> None:
        self.id, self.hard, self.quota = nid, hard, quota
        self.alloc = [0] * len(quota)
        self.parent: NNode | None = None
        self.children: list[NNode] = []
        self.consumers: list[NCons] = []

    def path(self) -> list[NNode]:
        out, n = [], self
        while n is not None:
            out.append(n)
            n = n.parent
        return out

    def leaf_ids(self) -> set[str]:
        if not self.children:
            return {self.id}
        return set().union(*(c.leaf_ids() for c in self.children))


class NCons:
    def __init__(self, cid: str, group: str, req: list[int], prio: int, ctype: int, unp: bool) -> None:
        self.id, self.group, self.req, self.prio, self.type, self.unp = cid, group, req, prio, ctype, unp
        self.anode: NNode | None = None


class Recovery:
    def __init__(self) -> None:
        self.nodes: list[NNode] = []
        self.moved: dict[str, tuple[NCons, NNode]] = {}

    def record(self, v: NCons) -> None:
        if v.id not in self.moved:
            assert v.anode is not None
            self.moved[v.id] = (v, v.anode)

    def recover(self, c: NCons, preempted: list[NCons]) -> None:          # A6
        for n in self.nodes:
            n.alloc = [a - r for a, r in zip(n.alloc, c.req, strict=True)]
        if c.anode is not None:
            c.anode.consumers.remove(c)
        c.anode = None
        for v, orig in self.moved.values():
            cur = v.anode
            if cur is orig:
                continue
            if cur is not None:
                cur.consumers.remove(v)
            else:
                preempted.remove(v)
            orig.consumers.append(v)
            v.anode = orig
            for m in orig.path():
                if m is cur:
                    break
                m.alloc = [a + r for a, r in zip(m.alloc, v.req, strict=True)]


class NaiveTree:
    def __init__(self, nodes: dict[str, tuple[str, bool, list[int]]]) -> None:
        self.nodes = {n: NNode(n, h, q) for n, (_, h, q) in nodes.items()}
        self.root: NNode | None = None
        for n, (p, _, _) in nodes.items():
            if p:
                self.nodes[n].parent = self.nodes[p]
                self.nodes[p].children.append(self.nodes[n])
            else:
                self.root = self.nodes[n]
        self.allocated: dict[str, NCons] = {}

    def fits(self, n: NNode, req: list[int], alloc: list[int] | None = None) -> bool:   # A0
        a = n.alloc if alloc is None else alloc
        return all(r <= q - x for r, q, x in zip(req, n.quota, a, strict=True))

    def allocate(self, c: NCons) -> tuple[bool, list[str]]:
        saved = copy.deepcopy((self.nodes, self.root, self.allocated))
        preempted: list[NCons] = []
        if self._alloc(c, preempted):
            self.allocated[c.id] = c
            for v in preempted:
                del self.allocated[v.id]
            return True, [v.id for v in preempted]
        self.nodes, self.root, self.allocated = saved       # F2: exactly as before
        return False, []

    def _alloc(self, c: NCons, preempted: list[NCons]) -> bool:
        g = self.nodes.get(c.group)
        if g is None or g.children:                          # A1
            return False
        path = g.path()
        rec = Recovery()
        placed = False
        hit_hard = False
        attempted = g
        for n in path:                                       # A3
            attempted = n
            hit_hard = hit_hard or n.hard
            if not placed:
                if self.fits(n, c.req) or self.slide_up(n, c, True, rec, preempted):
                    n.alloc = [a + r for a, r in zip(n.alloc, c.req, strict=True)]
                    n.consumers.append(c)
                    c.anode = n
                    rec.nodes.append(n)
                    placed = True
                elif n.hard:
                    break
            elif self.fits(n, c.req) or self.slide_up(n, c, False, rec, preempted):
                n.alloc = [a + r for a, r in zip(n.alloc, c.req, strict=True)]
                rec.nodes.append(n)
            else:
                rec.recover(c, preempted)
                rec = Recovery()                             # B4 fixed
                placed = False
                if hit_hard:
                    break
        if placed:
            return True
        if c.prio > 0:                                       # A5
            top_down = path[:path.index(attempted) + 1][::-1]
            for m in top_down:
                for v in list(m.consumers):
                    if c.prio > v.prio and not v.unp and v.type == c.type:
                        m.consumers.remove(v)
                        for x in m.path():
                            x.alloc = [a - r for a, r in zip(x.alloc, v.req, strict=True)]
                        v.anode = None
                        preempted.append(v)
                        if self.fits(attempted, c.req):
                            return self._alloc(c, preempted)
        return False

    def slide_up(self, n: NNode, c: NCons, apply_priority: bool, rec: Recovery,
                 preempted: list[NCons]) -> bool:             # A4
        if n.hard and n.parent is not None:
            return False
        cands: list[NCons] = []
        acc = list(n.alloc)
        for v in n.consumers:
            if apply_priority and not c.prio > v.prio:
                continue
            if n.parent is None and (v.unp or v.type != c.type):
                continue
            cands.append(v)
            acc = [a - r for a, r in zip(acc, v.req, strict=True)]
            if self.fits(n, c.req, acc):
                break
        else:
            return False
        for v in cands:
            rec.record(v)
            n.alloc = [a - r for a, r in zip(n.alloc, v.req, strict=True)]
            n.consumers.remove(v)
            if n.parent is not None:
                v.anode = n.parent
                n.parent.consumers.append(v)
            else:
                v.anode = None
                preempted.append(v)
        return True

    def deallocate(self, cid: str) -> bool:                  # A9
        c = self.allocated.pop(cid, None)
        if c is None or c.anode is None:
            return False
        n = c.anode
        n.consumers.remove(c)
        for m in n.path():
            m.alloc = [a - r for a, r in zip(m.alloc, c.req, strict=True)]
            p = m.parent
            if p is not None:
                for v in list(p.consumers):
                    if v.group in m.leaf_ids() and self.fits(m, v.req):
                        p.consumers.remove(v)
                        m.alloc = [a + r for a, r in zip(m.alloc, v.req, strict=True)]
                        m.consumers.append(v)
                        v.anode = m
        c.anode = None
        return True

    def state(self) -> dict[str, Any]:
        return {"nodes": {n.id: (n.alloc, [c.id for c in n.consumers]) for n in self.nodes.values()},
                "anodes": {cid: c.anode.id if c.anode else None for cid, c in sorted(self.allocated.items())}}


def engine_state(qm: QuotaManager) -> dict[str, Any]:
    t = qm.dump_state()["trees"]["T"]
    return {"nodes": {n: ([d["allocated"][r] for r in t["resource_names"]], d["consumers"])
                      for n, d in t["nodes"].items()},
            "anodes": t["allocated"]}


@st.composite
def trees(draw: Any) -> dict[str, tuple[str, bool, list[int]]]:
    root_quota = [draw(st.integers(2, 12)), draw(st.integers(2, 12))]
    nodes: dict[str, tuple[str, bool, list[int]]] = {"n0": ("", draw(st.booleans()), root_quota)}
    frontier = ["n0"]
    depth = draw(st.integers(1, 3))
    for _ in range(depth):
        nxt = []
        for parent in frontier:
            for _ in range(draw(st.integers(1, 3))):
                name = f"n{len(nodes)}"
                quota = [draw(st.integers(0, 6)), draw(st.integers(0, 6))]
                nodes[name] = (parent, draw(st.booleans()), quota)
                nxt.append(name)
        frontier = nxt
    return nodes


op_st = st.one_of(
    st.tuples(st.just("alloc"), st.integers(0, 60), st.integers(0, 3), st.integers(0, 3), st.integers(0, 2),
              st.integers(0, 1), st.booleans()),
    st.tuples(st.just("dealloc"), st.integers(0, 60)),
)


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(trees(), st.lists(op_st, min_size=1, max_size=40))
def test_engine_matches_naive_transcription(nodes: dict[str, tuple[str, bool, list[int]]],
                                            ops: list[tuple[Any, ...]]) -> None:
    doc = {"kind": "QuotaTree", "metadata": {"name": "T"},
           "spec": {"resourceNames": ["a", "b"],
                    "nodes": {n: {"parent": p or "nil", "hard": str(h).lower(),
                                  "quota": {"a": q[0], "b": q[1]}} for n, (p, h, q) in nodes.items()}}}
    qm = QuotaManager()
    qm.add_tree_from_string(json.dumps(doc))
    qm.set_mode(Mode.NORMAL)
    naive = NaiveTree(nodes)
    names = sorted(nodes)
    ids: list[str] = []
    for op in ops:
        if op[0] == "alloc":
            _, g, ra, rb, prio, ctype, unp = op
            cid = f"c{len(ids)}"
            group = names[g % len(names)]
            qm.add_consumer(ConsumerInfo(cid, [ConsumerTreeSpec("T", group, {"a": ra, "b": rb}, priority=prio,
                                                                type=ctype, unpreemptable=unp)]))
            ids.append(cid)
            r = qm.allocate("T", cid)
            ok, pre = naive.allocate(NCons(cid, group, [ra, rb], prio, ctype, unp))
            assert (r.allocated, r.preempted_ids) == (ok, pre)
        elif ids:
            cid = ids[op[1] % len(ids)]
            assert qm.deallocate("T", cid) == naive.deallocate(cid)
        assert engine_state(qm) == naive.state()
