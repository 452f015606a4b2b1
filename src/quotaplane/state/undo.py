"""How a change the journal refused is taken back exactly (rule S1: nothing refused is ever visible).

A write applies its events in memory first and journals them at its commit point
(:class:`~quotaplane.partition.txn.Txn`). When the commit — or anything before it — fails, the events
applied since the last commit point are taken back, newest first. :func:`undo_of` says how, for an event
about to be applied: it reads what the change will overwrite *before* the change and returns the step
that puts it back, or None for a change that cannot be taken back step by step (a release gives quota
back to every policy; a removal drops what it held). The transaction then rebuilds the partition from
its journal instead.

An admitted allocation is taken back by :meth:`~quotaplane.state.handlers.PartitionState.undo_allocated`
with the :class:`~quotaplane.state.marks.AllocationUndo` its admission recorded (the policies applied it
before the event existed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import quotaplane.events as E
from quotaplane.state.marks import AppMark

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.state.handlers import PartitionState

__all__ = ["Undo", "undo_of"]

#: a step that puts back what one applied event changed
Undo = Callable[[], None]


def undo_of(state: PartitionState, ev: E.Event) -> Undo | None:
    """The step that takes back ``ev`` once it is applied to ``state`` — read now, before it is — or
    None when it cannot be taken back step by step."""
    kind = type(ev)
    # most events (an allocation, a release) have none: one lookup, no call (benchmarks/calls.py)
    return _UNDO_OF[kind](state, ev) if kind in _UNDO_OF else None


def _node_added(state: PartitionState, ev: E.NodeAdded) -> Undo:
    def undo() -> None:
        state.node_removed(E.NodeRemoved(node=ev.node))
    return undo


def _node_updated(state: PartitionState, ev: E.NodeUpdated) -> Undo:
    before = E.NodeUpdated(node=ev.node, capacity=state.nodes[ev.node],
                           schedulable=state.node_index.schedulable(ev.node),
                           labels=None if ev.labels is None else dict(state.node_labels.get(ev.node, {})))

    def undo() -> None:
        state.node_updated(before)
    return undo


def _node_removed(state: PartitionState, ev: E.NodeRemoved) -> Undo | None:
    if ev.t is not None and state.node_index.on(ev.node):
        return None                  # it releases the allocations on the node
    back = E.NodeAdded(node=ev.node, capacity=state.nodes[ev.node],
                       schedulable=None if state.node_index.schedulable(ev.node) else False,
                       labels=state.node_labels.get(ev.node))

    def undo() -> None:
        state.node_added(back)
    return undo


def _bound(state: PartitionState, ev: E.Bound) -> Undo:
    before = state.allocs[ev.key].node

    def undo() -> None:
        state.place_on(ev.key, before)
    return undo


def _app_added(state: PartitionState, ev: E.AppAdded) -> Undo:
    def undo() -> None:
        state.drop_app(state.apps[ev.app], ev.t)
    return undo


def _ask_added(state: PartitionState, ev: E.AskAdded) -> Undo:
    app = state.apps[ev.app]
    mark = AppMark.of(app)
    asks = state.waiting.asks
    was_dirty, next_seq = asks.dirty, asks.next_seq()

    def undo() -> None:
        state.ask_withdrawn(ev.key)
        asks.dirty = was_dirty
        asks.reset_seq(next_seq)
        mark.restore(app)
        state.due.note(app)              # a timeout it had may be back
    return undo


#: event type -> how to take it back (the handlers dispatch by exact type too)
_UNDO_OF: dict[type[E.Event], Callable[[PartitionState, Any], Undo | None]] = {
    E.NodeAdded: _node_added, E.NodeUpdated: _node_updated, E.NodeRemoved: _node_removed,
    E.Bound: _bound, E.AppAdded: _app_added, E.AskAdded: _ask_added}
