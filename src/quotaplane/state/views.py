"""A partition's state as data: its ``GET /ws/v1/partitions`` entry, the deterministic dump that replay
must reproduce (rule S1), and the snapshot state (:mod:`quotaplane.state.snapshot`). Mixed into
:class:`~quotaplane.state.PartitionState`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from quotaplane.application import Allocation, Application
from quotaplane.resources import Resource
from quotaplane.state.rebuild import RebuildCapture
from quotaplane.state.snapshot import SnapshotState

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.admission import PolicySet
    from quotaplane.queues import QueueTree
    from quotaplane.scheduling.runner import PendingAsks
    from quotaplane.state.nodes import NodeIndex
    from quotaplane.ugm import Manager

__all__ = ["StateViews"]

_EMPTY = Resource()


class _Host(Protocol):
    """What the views read of the state."""

    name: str
    config_seq: int
    total: Resource
    nodes: dict[str, Resource]
    node_index: NodeIndex
    queues: QueueTree
    ugm: Manager
    policies: PolicySet
    apps: dict[str, Application]
    allocs: dict[str, Allocation]
    pending: PendingAsks

    def _dump_parts(self) -> dict[str, Any]: ...


class StateViews:
    """The state as data (see the module docstring)."""

    def dao(self: _Host) -> dict[str, Any]:
        """``GET /ws/v1/partitions`` entry: name, state, totalNodes, capacity, applications by state."""
        states: dict[str, int] = {}
        for app in self.apps.values():
            states[app.state] = states.get(app.state, 0) + 1
        root = self.queues.queue("root")
        used = Resource(root.allocated) if root is not None else _EMPTY
        return {
            "name": self.name,
            "state": "Active",
            "totalNodes": len(self.nodes),
            "capacity": {"capacity": self.total.to_dict(), "usedCapacity": used.to_dict()},
            "applications": {"total": len(self.apps), **dict(sorted(states.items()))},
        }

    def dump(self: _Host) -> dict[str, Any]:
        """The full state as deterministic plain data (sorted keys and lists); equal after replay."""
        allocations = {k: self.allocs[k].to_dict() for k in sorted(self.allocs)}
        state = {**self._dump_parts(), "allocations": allocations}
        # normalise through JSON so tuples/lists and key order never differ between runs
        normal: dict[str, Any] = json.loads(json.dumps(state, sort_keys=True))
        return normal

    def _dump_parts(self: _Host) -> dict[str, Any]:
        """:meth:`dump` without the allocations, before its normalisation."""
        return {
            "name": self.name,
            "config_seq": self.config_seq,
            "nodes": {n: r.to_dict() for n, r in sorted(self.nodes.items())},
            **({"unschedulable": sorted(self.node_index.unschedulable)} if self.node_index.unschedulable
               else {}),
            "applications": {a: self.apps[a].dump() for a in sorted(self.apps)},
            "queues": self.queues.dump_state(),
            "ugm": self.ugm.dump_state(),
            "policies": {key: p.dump_state() for key, p in sorted(self.policies.extensions)},
            "asks": self.pending.asks.dump(),
        }

    def snapshot(self: _Host) -> SnapshotState:
        """The snapshot state now (:mod:`quotaplane.state.snapshot`): a few milliseconds here, the
        allocation listing and events made when it is written. The parts other than the
        allocations go through JSON now, so they share nothing with the state."""
        small: dict[str, Any] = json.loads(json.dumps(self._dump_parts()))
        allocations = [(a, a.node) for a in self.allocs.values()]
        rebuild = RebuildCapture(self.config_seq, self.nodes, list(self.apps.values()), allocations,
                                 self.pending.asks.all(), self.policies.extensions,
                                 self.node_index.unschedulable)
        return SnapshotState(self.config_seq, small, allocations, rebuild)
