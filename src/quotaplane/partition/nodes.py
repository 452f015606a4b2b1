"""A partition's nodes (issue 15 #2): register, update (cordon), remove (releasing what runs there),
and bind an allocation to its node. Each write is a function of the partition's transaction
(:mod:`quotaplane.partition.txn`); a removal that released allocations cannot be taken back step by
step, so a refused commit rebuilds the partition from its journal."""

from __future__ import annotations

from collections.abc import Mapping

import quotaplane.events as E
from quotaplane.errors import ConflictError, InputError, NotFoundError
from quotaplane.partition.txn import Txn
from quotaplane.resources import INT64_MAX, Resource
from quotaplane.state.handlers import PartitionState
from quotaplane.state.nodes import NodeIndex

__all__ = ["add_node", "bind", "check_int64_sum", "remove_node", "update_node"]


def check_int64_sum(total: Mapping[str, int], more: Mapping[str, int], what: str) -> None:
    """ValueError (changing nothing) when ``total + more`` leaves int64 for some resource (issue 14 #4:
    Go clients read these sums as int64)."""
    for name, amount in more.items():
        if total.get(name, 0) + amount > INT64_MAX:
            raise InputError(f"{what} of {name} would be {total.get(name, 0) + amount}, beyond int64 "
                             f"({INT64_MAX})")


def _known(tx: Txn, node_id: str) -> Resource:
    capacity = tx.state.nodes.get(node_id)
    if capacity is None:
        raise NotFoundError(f"node {node_id!r} not found in partition {tx.state.name!r}")
    return capacity


def add_node(tx: Txn, node_id: str, capacity: Resource, schedulable: bool,
             labels: Mapping[str, str] | None = None) -> None:
    """Register a node; the cluster (the root queue's max) grows by its capacity unless it is cordoned.
    ``labels`` select the resource flavors it counts for (docs/flavors.md)."""
    state = tx.state
    if node_id in state.nodes:
        raise ConflictError(f"node {node_id!r} already exists in partition {state.name!r}")
    # issue 14 #4: the cluster size is served as the root's maxResource; Go clients read int64
    counted = capacity if state.flavors is None else state.flavors.node_capacity(capacity, labels)
    check_int64_sum(state.total, counted, f"node {node_id!r}: the cluster's total")
    tx.apply(E.NodeAdded(node=node_id, capacity=capacity, schedulable=None if schedulable else False,
                         t=tx.clock(), labels=dict(sorted(labels.items())) if labels else None))
    # the cluster grew: only what waits on the root's max or on another policy can move (issue 39)
    tx.after(tx.core.scheduler.cluster_grew)


def update_node(tx: Txn, node_id: str, capacity: Resource | None, schedulable: bool | None,
                labels: Mapping[str, str] | None = None) -> None:
    """Change a node's capacity, schedulability or labels (None: unchanged); nothing to change: no
    event."""
    state = tx.state
    before = _known(tx, node_id)
    was = state.node_index.schedulable(node_id)
    new_cap = before if capacity is None else capacity
    now = was if schedulable is None else schedulable
    old_labels = state.node_labels.get(node_id, {})
    new_labels = None if labels is None or dict(labels) == old_labels else dict(sorted(labels.items()))
    if new_cap == before and now == was and new_labels is None:
        return
    _check_total(state, node_id, new_cap, old_labels if new_labels is None else new_labels)
    tx.apply(E.NodeUpdated(node=node_id, capacity=new_cap, schedulable=now, t=tx.clock(), labels=new_labels))
    tx.after(tx.core.scheduler.cluster_grew)     # the cluster may have grown (issue 39)


def _check_total(state: PartitionState, node_id: str, capacity: Resource, labels: Mapping[str, str]) -> None:
    """The cluster's total with node ``node_id`` at ``capacity`` (counted per flavor by ``labels``)
    stays within int64."""
    catalog = state.flavors
    others = NodeIndex.total({n: c if catalog is None else catalog.node_capacity(c, state.node_labels.get(n))
                              for n, c in state.nodes.items() if n != node_id},
                             state.node_index.unschedulable)
    counted = capacity if catalog is None else catalog.node_capacity(capacity, labels)
    check_int64_sum(others, counted, f"node {node_id!r}: the cluster's total")


def remove_node(tx: Txn, node_id: str) -> None:
    """Remove a node; every allocation on it is released (YuniKorn's ``removeNode``)."""
    _known(tx, node_id)
    on_node = tx.state.node_index.on(node_id)
    tx.apply(E.NodeRemoved(node=node_id, t=tx.clock()))
    if on_node:
        tx.after(tx.core.scheduler.freed)


def bind(tx: Txn, allocation_key: str, node_id: str) -> None:
    """Allocation ``allocation_key`` runs on registered node ``node_id``; the node it names already:
    nothing changes."""
    state = tx.state
    alloc = state.allocs.get(allocation_key)
    if alloc is None:
        raise NotFoundError(f"allocation {allocation_key!r} not found in partition {state.name!r}")
    _known(tx, node_id)
    if alloc.node != node_id:
        tx.apply(E.Bound(key=allocation_key, node=node_id, t=tx.clock()))
