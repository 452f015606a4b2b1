"""The quota manager: trees, forests, consumers and modes behind one lock (seed 003, reference §6).

Every public method takes the manager's re-entrant lock; :meth:`QuotaManager.transaction` holds it
across several calls so a caller can run ``try_allocate`` … ``undo_allocate`` atomically (the pattern
the seed's README puts on the caller, PR #508).

Fixed Go defects (decision F2): a failed allocation — tree or forest, either mode — leaves every tree
exactly as before (undo log, B2/B7/B9); every consumer removed is reported and dropped from the
controller maps (B3); recovery records are reset after a mid-walk recover (B4); undo without a valid
snapshot returns False and changes nothing, and a snapshot is invalid once anything changed the tree
after the try (B5); a forest consumer naming trees outside the forest is allocated on the intersection
(B1); a consumer already allocated on any of the trees is refused (B8); a tree definition with any bad
node is refused whole (B13); requests are rebuilt on resource-name changes (B10). Orders are
deterministic (F3): forest trees in the order added, re-placement in allocation order, preempted ids in
preemption order.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from quotaplane.forest._model import (
    AllocationResponse,
    ConsumerInfo,
    ConsumerTreeSpec,
    Mode,
    QuotaError,
    TreeCache,
    parse_tree_json,
    parse_tree_obj,
)
from quotaplane.forest._structure import Node, TreeConsumer
from quotaplane.forest._tree import Controller
from quotaplane.forest._undo import Log, rollback

__all__ = ["QuotaManager"]


class _Forest:
    __slots__ = ("name", "snapshot", "trees")

    def __init__(self, name: str) -> None:
        self.name = name
        self.trees: list[str] = []
        # (consumer id, log, ((controller, version), …)) of the last try_allocate_forest
        self.snapshot: tuple[str, Log, tuple[tuple[Controller, int], ...]] | None = None


class Withdrawal:
    """What :meth:`QuotaManager.withdraw` took away: the consumer's spec and the exact undo log."""

    __slots__ = ("ctrls", "info", "log")

    def __init__(self, info: ConsumerInfo, log: Log, ctrls: list[Controller]) -> None:
        self.info = info
        self.log = log
        self.ctrls = ctrls


class QuotaManager:
    """Hierarchical quota trees and forests (contract "Quota trees and forests").

    Starts in :attr:`Mode.MAINTENANCE` like the seed: allocations are forced at the consumer's group
    node until :meth:`set_mode` switches to :attr:`Mode.NORMAL`. Invalid calls raise
    :class:`QuotaError` and change nothing.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._mode = Mode.MAINTENANCE
        self._ctrls: dict[str, Controller] = {}
        self._forests: dict[str, _Forest] = {}
        self._infos: dict[str, ConsumerInfo] = {}
        self._seq = 0

    # ------------------------------------------------------------------------------------ management
    @contextmanager
    def transaction(self) -> Iterator[QuotaManager]:
        """Hold the manager lock across several calls (e.g. ``try_allocate`` then ``undo_allocate``)."""
        with self._lock:
            yield self

    def get_mode(self) -> Mode:
        """The current mode."""
        return self._mode

    def set_mode(self, mode: Mode | int) -> None:
        """Switch between ``Mode.NORMAL`` and ``Mode.MAINTENANCE``."""
        if isinstance(mode, bool) or not isinstance(mode, int) or mode not in (0, 1):
            raise QuotaError(f"invalid mode {mode!r}")
        with self._lock:
            self._mode = Mode(mode)

    def tree_names(self) -> list[str]:
        """Names of all trees, sorted."""
        with self._lock:
            return sorted(self._ctrls)

    def forest_names(self) -> list[str]:
        """Names of all forests, sorted."""
        with self._lock:
            return sorted(self._forests)

    def forest_tree_names(self, forest: str | None = None) -> Any:
        """The trees of ``forest`` in the order added; without argument ``{forest: [trees]}`` for all."""
        with self._lock:
            if forest is None:
                return {n: list(f.trees) for n, f in sorted(self._forests.items())}
            return list(self._forest(forest).trees)

    def tree_forest(self, tree: str) -> str | None:
        """The forest ``tree`` belongs to, or None."""
        with self._lock:
            return self._ctrl(tree, f"tree {tree} does not exist").forest

    def update_all(self) -> list[str]:
        """Update every tree that is in no forest, then every forest; the ids left unallocated."""
        with self._lock:
            out: dict[str, None] = {}
            for name in sorted(self._ctrls):
                if self._ctrls[name].forest is None:
                    out.update(dict.fromkeys(self._update_tree(self._ctrls[name])))
            for fname in sorted(self._forests):
                out.update(dict.fromkeys(self._update_forest(self._forests[fname])))
            return list(out)

    # ------------------------------------------------------------------------------------ consumers
    def add_consumer(self, info: ConsumerInfo) -> None:
        """Register a consumer specification (allocation happens per tree or forest)."""
        if not isinstance(info, ConsumerInfo):
            raise QuotaError("add_consumer expects a ConsumerInfo")
        with self._lock:
            if info.id in self._infos:
                raise QuotaError(f"consumer {info.id} already exists")
            self._infos[info.id] = info

    def remove_consumer(self, consumer_id: str) -> None:
        """Forget a consumer specification (does not de-allocate, §6)."""
        with self._lock:
            if consumer_id not in self._infos:
                raise QuotaError(f"consumer {consumer_id} does not exist")
            del self._infos[consumer_id]

    def has_consumer(self, consumer_id: str) -> bool:
        """Whether a consumer specification with this id is registered."""
        return consumer_id in self._infos

    def consumer_ids(self) -> list[str]:
        """Ids of all registered consumers, sorted."""
        with self._lock:
            return sorted(self._infos)

    def consumer_info(self, consumer_id: str) -> ConsumerInfo:
        """The registered specification of ``consumer_id``."""
        with self._lock:
            return self._info(consumer_id)

    # ------------------------------------------------------------------------------------ trees
    def add_tree_from_string(self, json_text: str) -> str:
        """Add a tree from its ``QuotaTree`` JSON (§8.1); returns the tree's name."""
        name, resources, specs = parse_tree_json(json_text)
        return self._add_tree(name, resources, specs)

    def add_tree_from_dict(self, doc: Mapping[str, Any]) -> str:
        """Add a tree from an already decoded ``QuotaTree`` JSON object (Go ``AddTreeFromStruct``)."""
        name, resources, specs = parse_tree_obj(doc)
        return self._add_tree(name, resources, specs)

    def add_tree_by_name(self, name: str) -> None:
        """Add an empty tree; nodes come through its cache and take effect at ``update_tree`` (S53)."""
        self._add_tree(name, [], {})

    def _add_tree(self, name: str, resources: list[str], specs: Mapping[str, Any]) -> str:
        if not isinstance(name, str) or not name:
            raise QuotaError("invalid tree name ")
        with self._lock:
            if name in self._ctrls:
                raise QuotaError(f"tree {name} already exists; delete first")
            cache = TreeCache(name, self._lock)
            cache._load(resources, dict(specs))
            self._ctrls[name] = Controller(name, cache)
            return name

    def delete_tree(self, name: str) -> None:
        """Delete a tree that has no allocated consumer (it also leaves its forest)."""
        with self._lock:
            ctrl = self._ctrls.get(name)
            if ctrl is None:
                raise QuotaError(f"tree {name} does not exist")
            if ctrl.consumers:
                raise QuotaError(f"consumer(s) allocated in tree {name}")
            if ctrl.forest is not None:
                f = self._forests[ctrl.forest]
                f.trees.remove(name)
                f.snapshot = None
            del self._ctrls[name]

    def get_tree_cache(self, tree: str) -> TreeCache:
        """The live edit cache of ``tree`` (applied by ``update_tree``/``update_forest``/``update_all``)."""
        with self._lock:
            return self._ctrl(tree, f"tree {tree} does not exist").cache

    def tree_info(self, tree: str) -> dict[str, Any]:
        """Name, resource names, root and dangling nodes of the tree in effect (Go's create response)."""
        with self._lock:
            t = self._ctrl(tree, f"tree {tree} does not exist").tree
            return {"name": tree, "resource_names": list(t.resource_names),
                    "root": t.root.id if t.root is not None else "", "dangling_nodes": list(t.dangling)}

    def update_tree(self, tree: str) -> list[str]:
        """Rebuild ``tree`` from its cache and re-place its consumers (§7); the ids left unallocated.

        When the tree belongs to a forest, those ids are also de-allocated from the forest's other
        trees, so forest consumers stay all-or-nothing.
        """
        with self._lock:
            return self._update_tree(self._ctrl(tree, f"tree {tree} does not exist"))

    def _update_tree(self, ctrl: Controller) -> list[str]:
        ids = [c.id for c in ctrl.update()]
        if ids and ctrl.forest is not None:
            self._drop_from_trees(ids, [self._ctrls[t] for t in self._forests[ctrl.forest].trees])
        return ids

    def update_forest(self, forest: str) -> list[str]:
        """Update every tree of ``forest``; the union of ids left unallocated, removed from all its trees."""
        with self._lock:
            return self._update_forest(self._forest(forest, f"forest {forest} does not exist"))

    def _update_forest(self, f: _Forest) -> list[str]:
        out: dict[str, None] = {}
        ctrls = [self._ctrls[t] for t in f.trees]
        for ctrl in ctrls:
            out.update(dict.fromkeys(c.id for c in ctrl.update()))
        ids = list(out)
        if ids:
            self._drop_from_trees(ids, ctrls)
        f.snapshot = None
        return ids

    def _drop_from_trees(self, ids: list[str], ctrls: list[Controller]) -> None:
        for ctrl in ctrls:
            if self._drop(ids, ctrl, None):
                ctrl.version += 1

    # ------------------------------------------------------------------------------------ tree allocation
    def allocate(self, tree: str, consumer_id: str) -> AllocationResponse:
        """Allocate ``consumer_id`` on ``tree`` (Normal: §2; Maintenance: forced at its gNode, A10)."""
        with self._lock:
            ctrl, info, spec = self._tree_call(tree, consumer_id)
            if self._mode is Mode.NORMAL:
                return self._tree_allocate(ctrl, info, spec, Log(), keep=False)
            return self._tree_force(ctrl, info, spec)

    def try_allocate(self, tree: str, consumer_id: str) -> AllocationResponse:
        """Allocate and remember how to undo it (Normal mode only, §5)."""
        with self._lock:
            if self._mode is not Mode.NORMAL:
                raise QuotaError("manager is not in normal mode")
            ctrl, info, spec = self._tree_call(tree, consumer_id)
            if spec.group_id not in ctrl.tree.leaves:   # C4: no snapshot can be taken
                ctrl.snapshot = None
                return AllocationResponse(consumer_id, False,
                                          f" Failed to take a state snapshot of tree '{tree}'")
            return self._tree_allocate(ctrl, info, spec, Log(), keep=True)

    def undo_allocate(self, tree: str, consumer_id: str) -> bool:
        """Undo the last ``try_allocate`` of ``consumer_id`` on ``tree``; False (nothing changed) if the
        snapshot is missing, for another consumer, already used, or stale (a tree changed since)."""
        with self._lock:
            ctrl = self._ctrl(tree)
            snap = ctrl.snapshot
            if snap is None or snap[0] != consumer_id or not _current(snap[2]):
                return False
            rollback(snap[1])
            ctrl.snapshot = None
            for touched, _ in snap[2]:
                touched.version += 1
            return True

    def deallocate(self, tree: str, consumer_id: str) -> bool:
        """De-allocate (A9, with slide-down); False if the consumer is not allocated on the tree."""
        with self._lock:
            ctrl = self._ctrl(tree)
            c = ctrl.consumers.get(consumer_id)
            if c is None:
                if consumer_id not in self._infos:
                    raise QuotaError(f"consumer {consumer_id} does not exist")
                return False
            ok = ctrl.deallocate(c, None)
            ctrl.version += 1
            return ok

    def withdraw(self, consumer_id: str) -> Withdrawal:
        """De-allocate ``consumer_id`` from every tree it is allocated on (A9, with slide-down) and forget
        its spec, keeping an exact undo log for :meth:`restore`.

        Used to ask "would X fit if ``consumer_id`` were gone?" without changing anything (a refused
        placeholder replacement, quality.md "a refused operation changes nothing"): a plain
        de-allocate followed by a new allocation would put the consumer back at the END of its node's
        consumer list, changing the preemption order (decision F1).
        """
        with self._lock:
            info = self._info(consumer_id)
            log = Log()
            touched: list[Controller] = []
            for tree in info.trees:
                ctrl = self._ctrls.get(tree)
                if ctrl is not None and self._drop([consumer_id], ctrl, log):
                    ctrl.version += 1
                    touched.append(ctrl)
            del self._infos[consumer_id]
            return Withdrawal(info, log, touched)

    def restore(self, withdrawal: Withdrawal) -> None:
        """Undo a :meth:`withdraw` exactly: the consumer is back at the same nodes, positions and
        allocation order, with its spec registered again.

        The caller must hold :meth:`transaction` from the withdraw to the restore and must have undone
        exactly every change made in between (e.g. ``try_allocate`` + ``undo_allocate`` pairs); the
        log is then replayed backwards onto the very state it was recorded against. Raises
        :class:`QuotaError` (changing nothing) if the consumer id was registered again meanwhile.
        """
        with self._lock:
            info = withdrawal.info
            if info.id in self._infos:
                raise QuotaError(f"consumer {info.id} already exists")
            rollback(withdrawal.log)
            self._infos[info.id] = info
            for ctrl in withdrawal.ctrls:
                ctrl.version += 1           # snapshots taken since are invalid (B5)

    def is_allocated(self, tree: str, consumer_id: str) -> bool:
        """Whether ``consumer_id`` is allocated on ``tree``."""
        with self._lock:
            return consumer_id in self._ctrl(tree).consumers

    def _tree_call(self, tree: str, consumer_id: str) -> tuple[Controller, ConsumerInfo, ConsumerTreeSpec]:
        ctrl = self._ctrls.get(tree)
        if ctrl is None:
            raise QuotaError(f"invalid tree name {tree}")
        info = self._infos.get(consumer_id)
        if info is None:
            raise QuotaError(f"consumer {consumer_id} does not exist, create and add first")
        spec = info.trees.get(tree)
        if spec is None:
            raise QuotaError(f"failure creating consumer {consumer_id} on tree {tree}")
        if consumer_id in ctrl.consumers:
            raise QuotaError(f"consumer {consumer_id} already allocated on tree {tree}")
        return ctrl, info, spec

    def _make(self, ctrl: Controller, info: ConsumerInfo, spec: ConsumerTreeSpec) -> TreeConsumer:
        self._seq += 1
        c = TreeConsumer(info.id, spec.group_id, spec.request, spec.vector(ctrl.tree.resource_names),
                         spec.priority, spec.type, spec.unpreemptable)
        c.seq = self._seq
        return c

    def _tree_allocate(self, ctrl: Controller, info: ConsumerInfo, spec: ConsumerTreeSpec, log: Log,
                       keep: bool) -> AllocationResponse:
        c = self._make(ctrl, info, spec)
        ok, victims, stopped = ctrl.allocate(c, log)
        touched = [ctrl]
        if not ok:
            rollback(log)
            resp = AllocationResponse(info.id, False,
                                      f" Failed to allocate quota on quota designation '{ctrl.name}'")
            _explain(resp, ctrl, stopped, c)
        else:
            if victims and ctrl.forest is not None:
                touched += self._drop_in_forest(ctrl, [v.id for v in victims], log)
            for x in touched:
                x.version += 1
            resp = AllocationResponse(info.id, True, " ", [v.id for v in victims])
        if keep:
            ctrl.snapshot = (info.id, log, tuple((x, x.version) for x in touched))
        return resp

    def _drop_in_forest(self, ctrl: Controller, ids: list[str], log: Log) -> list[Controller]:
        """A victim of a forest tree leaves every tree of the forest (all-or-nothing, F4); the other
        trees it left."""
        assert ctrl.forest is not None
        touched = []
        for tname in self._forests[ctrl.forest].trees:
            other = self._ctrls[tname]
            if other is not ctrl and self._drop(ids, other, log):
                touched.append(other)
        return touched

    @staticmethod
    def _drop(ids: list[str], ctrl: Controller, log: Log | None) -> bool:
        """De-allocate ``ids`` from ``ctrl`` where allocated; whether anything changed."""
        hit = False
        for cid in ids:
            c = ctrl.consumers.get(cid)
            if c is not None:
                ctrl.deallocate(c, log)
                hit = True
        return hit

    def _tree_force(self, ctrl: Controller, info: ConsumerInfo, spec: ConsumerTreeSpec) -> AllocationResponse:
        c = self._make(ctrl, info, spec)
        if not ctrl.force_allocate(c, spec.group_id, None):
            resp = AllocationResponse(info.id, False,
                                      f"failed force allocate consumer {info.id} on node {spec.group_id}")
            resp.failed_tree = ctrl.name
            resp.failed_node = spec.group_id
            return resp
        ctrl.version += 1
        return AllocationResponse(info.id, True, "")

    # ------------------------------------------------------------------------------------ forests
    def add_forest(self, name: str) -> None:
        """Add an empty forest."""
        if not isinstance(name, str) or not name:
            raise QuotaError("invalid forest name ")
        with self._lock:
            if name in self._forests:
                raise QuotaError(f"duplicate forest name {name}")
            self._forests[name] = _Forest(name)

    def delete_forest(self, name: str) -> None:
        """Delete a forest; its trees and their allocations stay."""
        with self._lock:
            f = self._forest(name, f"forest {name} does not exist")
            for t in f.trees:
                self._ctrls[t].forest = None
            del self._forests[name]

    def add_tree_to_forest(self, forest: str, tree: str) -> None:
        """Add ``tree`` to ``forest`` (a tree belongs to at most one forest, seed README)."""
        with self._lock:
            ctrl = self._ctrl(tree, f"unknown tree name {tree}")
            f = self._forest(forest, f"unknown forest name {forest}")
            if ctrl.forest is not None:
                raise QuotaError(f"tree {tree} already belongs to forest {ctrl.forest}")
            f.trees.append(tree)
            ctrl.forest = forest
            f.snapshot = None

    def delete_tree_from_forest(self, forest: str, tree: str) -> None:
        """Remove ``tree`` from ``forest`` (the tree stays)."""
        with self._lock:
            f = self._forest(forest, f"forest {forest} does not exist")
            if tree not in f.trees:
                raise QuotaError(f"forest {forest} does not include tree {tree}")
            f.trees.remove(tree)
            self._ctrls[tree].forest = None
            f.snapshot = None

    def allocate_forest(self, forest: str, consumer_id: str) -> AllocationResponse:
        """Allocate on every tree the forest and the consumer share, or on none (F2, both modes)."""
        with self._lock:
            f, info, ctrls = self._forest_call(forest, consumer_id)
            return self._forest_allocate(f, ctrls, info, Log(), keep=False, prefix="")

    def try_allocate_forest(self, forest: str, consumer_id: str) -> AllocationResponse:
        """Like :meth:`allocate_forest`, remembering how to undo it (outside Normal mode: forced, §5)."""
        with self._lock:
            f, info, ctrls = self._forest_call(forest, consumer_id)
            if self._mode is Mode.NORMAL:
                for ctrl in ctrls:   # F8: no snapshot when a gNode is not a leaf
                    if info.trees[ctrl.name].group_id not in ctrl.tree.leaves:
                        f.snapshot = None
                        resp = AllocationResponse(consumer_id, False,
                                                  f" Failed to take a state snapshot of tree '{ctrl.name}'")
                        resp.failed_tree = ctrl.name
                        resp.failed_node = info.trees[ctrl.name].group_id
                        return resp
            return self._forest_allocate(f, ctrls, info, Log(), keep=True, prefix=" ")

    def undo_allocate_forest(self, forest: str, consumer_id: str) -> bool:
        """Undo the last ``try_allocate_forest`` of ``consumer_id``; False (nothing changed) if invalid."""
        with self._lock:
            f = self._forest(forest)
            snap = f.snapshot
            if snap is None or snap[0] != consumer_id or snap[2] != self._versions(f) \
                    or not _current(snap[2]):
                return False
            rollback(snap[1])
            f.snapshot = None
            for t in f.trees:
                self._ctrls[t].version += 1
            return True

    def deallocate_forest(self, forest: str, consumer_id: str) -> bool:
        """De-allocate from every tree of the forest; True only if it was allocated on all of them (F5)."""
        with self._lock:
            f = self._forest(forest)
            all_ok = True
            found = False
            for t in f.trees:
                ctrl = self._ctrls[t]
                c = ctrl.consumers.get(consumer_id)
                if c is None:
                    all_ok = False
                    continue
                found = True
                all_ok = ctrl.deallocate(c, None) and all_ok
                ctrl.version += 1
            if not found and consumer_id not in self._infos:
                raise QuotaError(f"consumer {consumer_id} does not exist")
            return all_ok

    def is_allocated_forest(self, forest: str, consumer_id: str) -> bool:
        """True iff allocated on every tree of the forest (F6; an empty forest answers True)."""
        with self._lock:
            f = self._forest(forest)
            return all(consumer_id in self._ctrls[t].consumers for t in f.trees)

    def _forest_call(self, forest: str, consumer_id: str) -> tuple[_Forest, ConsumerInfo, list[Controller]]:
        f = self._forest(forest)
        info = self._infos.get(consumer_id)
        if info is None:
            raise QuotaError(f"consumer {consumer_id} does not exist, create and add first")
        ctrls = [self._ctrls[t] for t in f.trees if t in info.trees]   # B1 fixed: the intersection
        if not ctrls:
            raise QuotaError(f"consumer {consumer_id} names no tree of forest {forest}")
        if f.trees and all(consumer_id in self._ctrls[t].consumers for t in f.trees):
            raise QuotaError(f"consumer {consumer_id} already allocated on forest {forest}")
        for ctrl in ctrls:   # B8 fixed: no double counting across tree and forest calls
            if consumer_id in ctrl.consumers:
                raise QuotaError(f"consumer {consumer_id} already allocated on tree {ctrl.name}")
        return f, info, ctrls

    def _versions(self, f: _Forest) -> tuple[tuple[Controller, int], ...]:
        return tuple((self._ctrls[t], self._ctrls[t].version) for t in f.trees)

    def _forest_allocate(self, f: _Forest, ctrls: list[Controller], info: ConsumerInfo, log: Log,
                         keep: bool, prefix: str) -> AllocationResponse:
        resp = self._conjoint(ctrls, [self._ctrls[t] for t in f.trees], info, log, prefix)
        if resp.allocated:
            for t in f.trees:
                self._ctrls[t].version += 1
        if keep:
            f.snapshot = (info.id, log, self._versions(f))
        return resp

    def _force_conjoint(self, ctrls: list[Controller], info: ConsumerInfo, log: Log,
                        prefix: str) -> AllocationResponse:
        """F7 (Maintenance): the consumer forced onto its group node of every tree; all or nothing."""
        cid = info.id
        for ctrl in ctrls:
            spec = info.trees[ctrl.name]
            c = self._make(ctrl, info, spec)
            if not ctrl.force_allocate(c, spec.group_id, log):
                rollback(log)
                resp = AllocationResponse(cid, False,
                                          f"failed force allocate consumer {cid} on node {spec.group_id}")
                resp.failed_tree = ctrl.name
                resp.failed_node = spec.group_id
                return resp
        return AllocationResponse(cid, True, prefix + "".join("  " for _ in ctrls))

    def _conjoint(self, ctrls: list[Controller], scope: list[Controller], info: ConsumerInfo, log: Log,
                  prefix: str) -> AllocationResponse:
        """F2/F3 (Normal) or F7 (Maintenance) on ``ctrls`` in order; all or nothing."""
        cid = info.id
        if self._mode is not Mode.NORMAL:
            return self._force_conjoint(ctrls, info, log, prefix)
        victims: dict[str, None] = {}
        message = prefix
        for ctrl in ctrls:
            # F2.3: consumers preempted on earlier trees leave this tree before the new one is placed
            self._drop(list(victims), ctrl, log)
            spec = info.trees[ctrl.name]
            if not spec.group_id:
                rollback(log)
                resp = AllocationResponse(cid, False, f"No quota designations provided for '{ctrl.name}'")
                resp.failed_tree = ctrl.name
                return resp
            c = self._make(ctrl, info, spec)
            ok, pre, stopped = ctrl.allocate(c, log)
            if not ok:
                rollback(log)
                resp = AllocationResponse(cid, False,
                                          f" Failed to allocate quota on quota designation '{ctrl.name}'")
                _explain(resp, ctrl, stopped, c)
                return resp
            for v in pre:
                victims[v.id] = None
            message += "  "
        # F3: a consumer preempted on any tree leaves every tree of the forest (all-or-nothing victims)
        for ctrl in scope if victims else ():
            self._drop(list(victims), ctrl, log)
        return AllocationResponse(cid, True, message, list(victims))

    # ------------------------------------------------------------------------------------ queries
    def consumer_node(self, tree: str, consumer_id: str) -> str | None:
        """The id of the consumer's aNode on ``tree``, or None when it is not allocated there."""
        with self._lock:
            c = self._ctrl(tree).consumers.get(consumer_id)
            return c.anode.id if c is not None and c.anode is not None else None

    def node_allocated(self, tree: str, node_id: str) -> dict[str, int]:
        """Allocated amount per resource name at ``node_id`` (its whole subtree, §1.2)."""
        with self._lock:
            ctrl, n = self._node(tree, node_id)
            return dict(zip(ctrl.tree.resource_names, n.allocated(), strict=True))

    def node_consumers(self, tree: str, node_id: str) -> list[str]:
        """Consumers placed at ``node_id`` (aNode), in list order."""
        with self._lock:
            _, n = self._node(tree, node_id)
            return [c.id for c in n.consumers]

    def node_quota(self, tree: str, node_id: str) -> dict[str, int]:
        """The quota per resource name of ``node_id``."""
        with self._lock:
            ctrl, n = self._node(tree, node_id)
            return dict(zip(ctrl.tree.resource_names, n.quota, strict=True))

    def node_ids(self, tree: str) -> list[str]:
        """The node ids of the tree in effect, sorted."""
        with self._lock:
            return list(self._ctrl(tree).tree.nodes)

    def allocated_consumers(self, tree: str) -> list[str]:
        """Ids allocated on ``tree``, in allocation order."""
        with self._lock:
            return [c.id for c in sorted(self._ctrl(tree).consumers.values(), key=lambda c: c.seq)]

    def dump_state(self) -> dict[str, Any]:
        """The whole state as plain data, deterministic (for tests and comparisons)."""
        with self._lock:
            return {
                "mode": self._mode.name.lower(),
                "consumers": {cid: info.to_dict() for cid, info in sorted(self._infos.items())},
                "trees": {name: ctrl.dump() for name, ctrl in sorted(self._ctrls.items())},
                "forests": {name: list(f.trees) for name, f in sorted(self._forests.items())},
            }

    # ------------------------------------------------------------------------------------ helpers
    def _ctrl(self, tree: str, message: str | None = None) -> Controller:
        ctrl = self._ctrls.get(tree)
        if ctrl is None:
            raise QuotaError(message or f"invalid tree name {tree}")
        return ctrl

    def _forest(self, forest: str, message: str | None = None) -> _Forest:
        f = self._forests.get(forest)
        if f is None:
            raise QuotaError(message or f"invalid forest name {forest}")
        return f

    def _info(self, consumer_id: str, message: str | None = None) -> ConsumerInfo:
        info = self._infos.get(consumer_id)
        if info is None:
            raise QuotaError(message or f"consumer {consumer_id} does not exist")
        return info

    def _node(self, tree: str, node_id: str) -> tuple[Controller, Node]:
        ctrl = self._ctrl(tree)
        n = ctrl.tree.nodes.get(node_id)
        if n is None:
            raise QuotaError(f"node {node_id} does not exist in tree {tree}")
        return ctrl, n


def _current(versions: tuple[tuple[Controller, int], ...]) -> bool:
    """Whether no tree recorded in a snapshot changed since (the snapshot is still valid)."""
    return all(ctrl.version == v for ctrl, v in versions)


def _explain(resp: AllocationResponse, ctrl: Controller, stopped: Node | None, c: TreeConsumer) -> None:
    """Attach where a failed allocation stopped and what is missing there (after the rollback)."""
    resp.failed_tree = ctrl.name
    if stopped is None:
        resp.failed_node = c.group_id
        return
    resp.failed_node = stopped.id
    resp.shortfall = {name: r - f for name, r, f in zip(ctrl.tree.resource_names, c.request, stopped.free,
                                                        strict=True) if r > f}
