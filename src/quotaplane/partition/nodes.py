"""A partition's nodes (issue 15 #2): register, update (cordon), remove (releasing what runs there),
bind an allocation to its node, and the node views. Mixed into :class:`~quotaplane.partition.Partition`
(its lock, state and journal) so the partition module keeps one concern per part.

Each change follows the partition's protocol: recover first, change memory, journal (rule S1), and
undo exactly when the journal refuses — except a removal that released allocations, which cannot be
rolled back step by step: a refused append then rebuilds the partition from its journal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import quotaplane.events as E
from quotaplane.admission import as_resource, check_id
from quotaplane.application import Allocation
from quotaplane.errors import ConflictError, NotFoundError
from quotaplane.resources import INT64_MAX, Resource
from quotaplane.state.nodes import NodeIndex

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.state.handlers import PartitionState

__all__ = ["PartitionHost", "PartitionNodes", "check_int64_sum"]


def check_int64_sum(total: Mapping[str, int], more: Mapping[str, int], what: str) -> None:
    """ValueError (changing nothing) when ``total + more`` leaves int64 for some resource (issue 14 #4:
    Go clients read these sums as int64)."""
    for name, amount in more.items():
        if total.get(name, 0) + amount > INT64_MAX:
            raise ValueError(f"{what} of {name} would be {total.get(name, 0) + amount}, beyond int64 "
                             f"({INT64_MAX})")


class PartitionHost(Protocol):
    """What the node operations use of their partition (the waiting-ask operations use it too)."""

    name: str
    lock: threading.RLock
    clock: Callable[[], float]
    _s: PartitionState

    def _usable(self) -> None: ...

    def _record(self, events: Sequence[E.Event], *, recoverable: bool = False) -> None: ...


class PartitionNodes:
    """The node operations of a partition (see the module docstring)."""

    def node_schedulable(self: PartitionHost, node_id: str) -> bool:
        """False for a registered node that takes no new allocations (cordoned); its capacity is not
        in the cluster's total. Unknown node: NotFoundError."""
        with self.lock:
            if node_id not in self._s.nodes:
                raise NotFoundError(f"node {node_id!r} not found in partition {self.name!r}")
            return self._s.node_index.schedulable(node_id)

    def node_allocations(self: PartitionHost, node_id: str) -> list[Allocation]:
        """The allocations running on ``node_id``, in the order they were placed there."""
        with self.lock:
            if node_id not in self._s.nodes:
                raise NotFoundError(f"node {node_id!r} not found in partition {self.name!r}")
            allocs = self._s.allocs
            return [allocs[k] for k in self._s.node_index.on(node_id)]

    def add_node(self: PartitionHost, node_id: str, capacity: Mapping[str, int] | Resource, *,
                 schedulable: bool = True) -> None:
        """Register a node; the root queue's max grows by its capacity (seed 004); duplicate: Conflict.

        A node registered ``schedulable=False`` (cordoned) adds nothing to the cluster's capacity until
        :meth:`update_node` makes it schedulable.
        """
        check_id(node_id, "node id")
        if not isinstance(schedulable, bool):
            raise ValueError("schedulable must be a boolean")
        ev = E.NodeAdded(node=node_id, capacity=as_resource(capacity, "capacity"),
                         schedulable=None if schedulable else False)
        with self.lock:
            self._usable()      # recover first: memory may be ahead of the journal
            if node_id in self._s.nodes:
                raise ConflictError(f"node {node_id!r} already exists in partition {self.name!r}")
            # issue 14 #4: the cluster size is served as the root's maxResource; Go clients read int64
            check_int64_sum(self._s.total, ev.capacity, f"node {node_id!r}: the cluster's total")
            self._s.node_added(ev)
            try:
                self._record([ev], recoverable=True)
            except BaseException:
                self._s.node_removed(E.NodeRemoved(node=node_id))
                raise
            self._s.pending.freed(full=True)      # the cluster grew: the root and every elastic total

    def update_node(self: PartitionHost, node_id: str, *,
                    capacity: Mapping[str, int] | Resource | None = None,
                    schedulable: bool | None = None) -> None:
        """Change a node's capacity or schedulability (cordon: ``schedulable=False`` keeps the node and
        the allocations on it, and takes its capacity out of the cluster's total). Unknown node:
        NotFoundError; nothing to change: no event."""
        with self.lock:
            self._usable()
            before = self._s.nodes.get(node_id)
            if before is None:
                raise NotFoundError(f"node {node_id!r} not found in partition {self.name!r}")
            if schedulable is not None and not isinstance(schedulable, bool):
                raise ValueError("schedulable must be a boolean")
            was = self._s.node_index.schedulable(node_id)
            new_cap = before if capacity is None else as_resource(capacity, "capacity")
            now = was if schedulable is None else schedulable
            if new_cap == before and now == was:
                return
            others = NodeIndex.total({n: c for n, c in self._s.nodes.items() if n != node_id},
                                     self._s.node_index.unschedulable)
            check_int64_sum(others, new_cap, f"node {node_id!r}: the cluster's total")
            ev = E.NodeUpdated(node=node_id, capacity=new_cap, schedulable=now)
            self._s.node_updated(ev)
            try:
                self._record([ev], recoverable=True)
            except BaseException:
                self._s.node_updated(E.NodeUpdated(node=node_id, capacity=before, schedulable=was))
                raise
            self._s.pending.freed(full=True)      # the cluster may have grown

    def remove_node(self: PartitionHost, node_id: str) -> None:
        """Remove a node; the root queue's max shrinks and every allocation on the node is released
        (YuniKorn's ``removeNode``), each told as a ``released`` notice. Unknown node: NotFoundError."""
        with self.lock:
            self._usable()      # recover first: memory may be ahead of the journal
            capacity = self._s.nodes.get(node_id)
            if capacity is None:
                raise NotFoundError(f"node {node_id!r} not found in partition {self.name!r}")
            schedulable = self._s.node_index.schedulable(node_id)
            on_node = self._s.node_index.on(node_id)
            ev = E.NodeRemoved(node=node_id, t=self.clock() if on_node else None)
            self._s.node_removed(ev)
            if on_node:                 # releases cannot be rolled back: a failed append recovers
                self._record([ev])
                self._s.pending.freed()
                return
            try:
                self._record([ev], recoverable=True)
            except BaseException:
                self._s.node_added(E.NodeAdded(node=node_id, capacity=capacity,
                                               schedulable=None if schedulable else False))
                raise

    def bind(self: PartitionHost, allocation_key: str, node_id: str) -> None:
        """Allocation ``allocation_key`` runs on ``node_id`` (e.g. Kubernetes bound its pod). The node
        must be registered (it may be unschedulable: the pod already runs there). Binding to the node
        it already names changes nothing. Unknown allocation or node: NotFoundError."""
        check_id(node_id, "node id")
        with self.lock:
            self._usable()
            alloc = self._s.allocs.get(allocation_key)
            if alloc is None:
                raise NotFoundError(f"allocation {allocation_key!r} not found in partition {self.name!r}")
            if node_id not in self._s.nodes:
                raise NotFoundError(f"node {node_id!r} not found in partition {self.name!r}")
            before = alloc.node
            if before == node_id:
                return
            ev = E.Bound(key=allocation_key, node=node_id)
            self._s.bound(ev)
            try:
                self._record([ev], recoverable=True)
            except BaseException:
                self._s.node_index.unplace(node_id, allocation_key)
                alloc.node = before
                if before is not None:
                    self._s.node_index.place(before, allocation_key)
                raise
