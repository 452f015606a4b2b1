"""The quota tree and its allocation algorithm (reference §1–§3, §7; decisions F1–F3).

Data layout, chosen for speed (quality.md: ≤ 60 µs / 20 µs per allocate / deallocate):

* a resource vector is a plain ``list[int]`` in sorted-resource-name order (§1);
* a node keeps ``free = quota − allocated`` (so the fit test A0 is ``req[i] <= free[i]``), its
  consumer list as an insertion-ordered ``dict`` (O(1) append/remove, list order kept, §1.2), the
  same consumers split by the child on the path to their gNode (``by_child``: slide-down A9 only
  looks at the consumers that may move into that child), and per-class request sums (``agg``) so a
  slide-up or preemption phase that cannot succeed is refused without scanning a long list;
* every node knows its path to the root (``path``) and its ancestors by depth (``anc``).

All-or-nothing (F2) is implemented with an *undo log*: while a :class:`Log` is active every mutation
appends its exact inverse; a failed allocation, a forest rollback and ``undo_allocate`` replay the log
backwards. List order comes back exactly too: every list insertion is stamped with an increasing
position, and a rollback re-sorts the lists it re-inserted into by position.
"""

from __future__ import annotations

from typing import Any

from quotaplane.forest._model import TreeCache
from quotaplane.forest._structure import Node, TreeConsumer, TreeStructure, build_structure, index_range
from quotaplane.forest._undo import (
    FREE,
    MAP_ADD,
    MAP_DEL,
    UNFREE,
    Log,
    attach,
    detach,
    fits,
    give,
    move,
    rollback,
    take,
)

__all__ = ["Controller", "Log", "Node", "TreeConsumer", "TreeStructure", "build_structure", "rollback"]


class Controller:
    """One tree with its allocated consumers (§3): the allocation algorithm of §2.

    Mutating methods take an optional :class:`Log`; the caller decides whether to keep or roll back.
    """

    __slots__ = ("cache", "consumers", "forest", "name", "snapshot", "tree", "version")

    def __init__(self, name: str, cache: TreeCache) -> None:
        self.name = name
        self.cache = cache
        self.tree: TreeStructure = build_structure(cache)
        self.consumers: dict[str, TreeConsumer] = {}
        self.forest: str | None = None
        # (consumer id, log, (controller, version) of every tree the try changed) of the last try
        self.snapshot: tuple[str, Log, tuple[tuple[Controller, int], ...]] | None = None
        self.version = 0

    # -- consumers map (logged)
    def map_add(self, c: TreeConsumer, log: Log | None) -> None:
        """Record ``c`` as allocated on this tree."""
        self.consumers[c.id] = c
        if log is not None:
            log.entries.append((MAP_ADD, self.consumers, c.id))

    def map_del(self, c: TreeConsumer, log: Log | None) -> None:
        """Forget ``c`` (de-allocated or preempted)."""
        del self.consumers[c.id]
        if log is not None:
            log.entries.append((MAP_DEL, self.consumers, c.id, c))

    # -- A: allocation
    def allocate(self, c: TreeConsumer, log: Log) -> tuple[bool, list[TreeConsumer], Node | None]:
        """C1: run §2 for ``c``. Returns (placed, victims in preemption order, node where it stopped).

        On failure the caller rolls ``log`` back (F2: a failed allocation leaves the tree as before).
        """
        gleaf = self.tree.leaves.get(c.group_id)
        if gleaf is None:   # A1: unknown group, or an internal node / the root
            return False, [], None
        c.gleaf = gleaf
        path = gleaf.path
        preempted: list[TreeConsumer] = []
        while True:
            placed, attempted = self._walk(c, path, log, preempted)
            if placed:
                self.map_add(c, log)
                for v in preempted:
                    self.map_del(v, log)
                return True, preempted, attempted
            # A5: preemption phase, only for a positive priority
            if c.priority <= 0:
                return False, [], attempted
            victims = self._phase_victims(c, gleaf, attempted)
            if victims is None:
                return False, [], attempted
            for v in victims:
                m = v.anode
                assert m is not None
                detach(m, v, log)
                for x in m.path:
                    give(x.free, v.request, log)
                preempted.append(v)
            # A5.3: a complete new attempt (loop instead of Go's recursion; B3 fixed: the victims
            # removed so far stay reported)

    def _walk(self, c: TreeConsumer, path: list[Node], log: Log,
              preempted: list[TreeConsumer]) -> tuple[bool, Node]:
        """A3: the bottom-up walk from the gNode. Returns (placed, attemptedNode)."""
        req = c.request
        rng = c.rng
        append = log.entries.append
        placed: Node | None = None
        hit_hard = False
        attempted = path[0]
        rec_nodes: list[Node] = []
        rec_moved: dict[TreeConsumer, Node | None] = {}
        for n in path:
            attempted = n
            if n.hard:
                hit_hard = True
            free = n.free
            fits = True
            for i in rng:
                if req[i] > free[i]:
                    fits = False
                    break
            if placed is None:
                if fits or self._slide_up(n, c, True, log, rec_moved, preempted):
                    for i in rng:
                        free[i] -= req[i]
                    append((FREE, free, req))
                    attach(n, c, log)
                    rec_nodes.append(n)
                    placed = n
                elif n.hard:
                    break
            elif fits or self._slide_up(n, c, False, log, rec_moved, preempted):
                for i in rng:
                    free[i] -= req[i]
                append((FREE, free, req))
                rec_nodes.append(n)
            else:
                self._recover(c, rec_nodes, rec_moved, log, preempted)
                rec_nodes = []          # B4 fixed: the record starts afresh after a recover
                rec_moved = {}
                placed = None
                if hit_hard:
                    break
                # otherwise the parent is the next candidate aNode (n is not retried; S32, S33)
        return placed is not None, attempted

    def _slide_up(self, n: Node, c: TreeConsumer, apply_priority: bool, log: Log,
                  rec_moved: dict[TreeConsumer, Node | None], preempted: list[TreeConsumer]) -> bool:
        """A4: make room in ``n`` by moving the shortest eligible prefix of its list up (root: preempt)."""
        parent = n.parent
        is_root = parent is None
        if n.hard and not is_root:
            return False
        req = c.request
        rng = c.rng
        cprio = c.priority
        ctype = c.type
        # Quick refusal: even every eligible consumer together would not make room.
        acc = n.free.copy()
        for (t, unp, p), vec in n.agg.items():
            if apply_priority and not cprio > p:
                continue
            if is_root and (unp or t != ctype):
                continue
            for i in rng:
                acc[i] += vec[i]
        for i in rng:
            if req[i] > acc[i]:
                return False
        acc = n.free.copy()
        victims: list[TreeConsumer] = []
        for v in n.consumers:
            if apply_priority and not cprio > v.priority:
                continue
            if is_root and (v.unpreemptable or v.type != ctype):
                continue
            victims.append(v)
            vr = v.request
            for i in rng:
                acc[i] += vr[i]
            if fits(req, acc):
                break
        else:  # pragma: no cover - the sum test above guarantees a fitting prefix
            return False
        free = n.free
        give(free, [acc[i] - free[i] for i in rng], log)   # a(n) -= Σ req(victims)
        for v in victims:
            if v not in rec_moved:
                rec_moved[v] = v.anode
            if parent is not None:
                move(n, parent, v, log)    # slide up: a(parent) already counts v
            else:
                detach(n, v, log)
                preempted.append(v)        # at the root moving up is preemption
        return True

    def _recover(self, c: TreeConsumer, rec_nodes: list[Node], rec_moved: dict[TreeConsumer, Node | None],
                 log: Log, preempted: list[TreeConsumer]) -> None:
        """A6: undo the placement of ``c`` and the slides of this walk (restored consumers appended)."""
        req = c.request
        for n in rec_nodes:
            give(n.free, req, log)
        if c.anode is not None:
            detach(c.anode, c, log)
        for v, orig in rec_moved.items():
            cur = v.anode
            if cur is orig or orig is None:
                continue
            if cur is not None:
                detach(cur, v, log)
            elif v in preempted:
                preempted.remove(v)
            attach(orig, v, log)
            for m in orig.path:
                if m is cur:
                    break
                take(m.free, v.request, log)

    def _phase_victims(self, c: TreeConsumer, gleaf: Node, attempted: Node) -> list[TreeConsumer] | None:
        """A5: victims on c's own path, top-down from attemptedNode to the gNode; None if none suffice."""
        req = c.request
        cprio = c.priority
        ctype = c.type
        nodes = gleaf.anc[attempted.depth:]
        acc = list(attempted.free)
        for m in nodes:
            for (t, unp, p), vec in m.agg.items():
                if cprio > p and not unp and t == ctype:
                    for i, r in enumerate(vec):
                        acc[i] += r
        if not fits(req, acc):
            return None
        acc = list(attempted.free)
        victims: list[TreeConsumer] = []
        for m in nodes:
            for v in m.consumers:
                if cprio > v.priority and not v.unpreemptable and v.type == ctype:
                    victims.append(v)
                    for i, r in enumerate(v.request):
                        acc[i] += r
                    if fits(req, acc):
                        return victims
        return None  # pragma: no cover - guaranteed by the sum test

    # -- A9: de-allocation
    def deallocate(self, c: TreeConsumer, log: Log | None) -> bool:
        """C2/A9: remove ``c``; on the way up, consumers of each parent may slide one level down."""
        n = c.anode
        if n is None or c not in n.consumers:
            return False
        self.map_del(c, log)
        detach(n, c, log)
        req = c.request
        rng = c.rng
        for m in n.path:
            free = m.free
            for i in rng:
                free[i] += req[i]
            if log is not None:
                log.entries.append((UNFREE, free, req))
            p = m.parent
            if p is not None:
                sub = p.by_child[m]
                if sub:
                    for v in list(sub):
                        vr = v.request
                        ok = True
                        for i in rng:
                            if vr[i] > free[i]:
                                ok = False
                                break
                        if ok:
                            move(p, m, v, log)
                            take(free, vr, log)
        return True

    # -- A10: forced allocation
    def force_allocate(self, c: TreeConsumer, node_id: str, log: Log | None) -> bool:
        """C3/A10: place ``c`` at any node named ``node_id`` without checks (may go over quota)."""
        node = self.tree.nodes.get(node_id)
        if node is None:
            return False
        c.gleaf = self.tree.leaves.get(c.group_id)
        attach(node, c, log)
        for m in node.path:
            take(m.free, c.request, log)
        self.map_add(c, log)
        return True

    # -- C6: update from the cache
    def update(self) -> list[TreeConsumer]:
        """Rebuild from the cache and force-re-place every consumer in allocation order (§7, F3).

        Returns the consumers left unallocated (removed from this controller).
        """
        old = self.tree
        new = build_structure(self.cache)
        renamed = self.cache._renamed_map()
        names = new.resource_names
        self.tree = new
        placed: dict[str, TreeConsumer] = {}
        dropped: list[TreeConsumer] = []
        for c in sorted(self.consumers.values(), key=_seq_key):
            old_anode = c.anode
            c.anode = None
            gid = _follow(c.group_id, renamed)
            c.group_id = gid
            c.request = [c.request_map.get(r, 0) for r in names]   # B10 fixed
            c.rng = index_range(len(names))
            c.gleaf = None
            new_g = new.nodes.get(gid)
            a_id = _follow(old_anode.id, renamed) if old_anode is not None else None
            new_a = new.nodes.get(a_id) if a_id is not None else None
            target: Node | None
            if new_g is not None and new_a is not None and not new_g.children and \
                    len(new_g.anc) > new_a.depth and new_g.anc[new_a.depth] is new_a:
                target = new_a
            elif new_g is not None:
                target = new_g
            else:
                target = new.root
            if target is None:
                dropped.append(c)
                continue
            c.gleaf = new.leaves.get(gid)
            attach(target, c, None)
            for m in target.path:
                take(m.free, c.request, None)
            placed[c.id] = c
        del old
        self.consumers = placed
        self.snapshot = None
        self.version += 1
        return dropped

    # -- queries
    def node(self, node_id: str) -> Node | None:
        """The node ``node_id`` of the current tree, or None."""
        return self.tree.nodes.get(node_id)

    def dump(self) -> dict[str, Any]:
        """Deterministic state of this tree (nodes sorted by id, list order kept)."""
        names = self.tree.resource_names
        nodes: dict[str, Any] = {}
        for nid, n in self.tree.nodes.items():
            nodes[nid] = {
                "parent": n.parent.id if n.parent is not None else None,
                "hard": n.hard,
                "quota": dict(zip(names, n.quota, strict=True)),
                "allocated": dict(zip(names, n.allocated(), strict=True)),
                "consumers": [c.id for c in n.consumers],
            }
        return {
            "resource_names": list(names),
            "root": self.tree.root.id if self.tree.root is not None else None,
            "dangling": list(self.tree.dangling),
            "forest": self.forest,
            "nodes": nodes,
            "allocated": {cid: (c.anode.id if c.anode is not None else None)
                          for cid, c in sorted(self.consumers.items())},
            "cache": self.cache.to_dict(),
        }


def _seq_key(c: TreeConsumer) -> int:
    return c.seq


def _follow(name: str, renamed: dict[str, str]) -> str:
    """Apply recorded renames (old → new), following chains, stopping on a cycle."""
    seen = {name}
    while name in renamed:
        name = renamed[name]
        if name in seen:
            break
        seen.add(name)
    return name
