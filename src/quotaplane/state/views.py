"""A partition's state as data: its ``GET /ws/v1/partitions`` entry, the deterministic dump that replay
must reproduce (rule S1), and the snapshot state (:mod:`quotaplane.state.snapshot`)."""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any

from quotaplane.journal.base import canonical_json
from quotaplane.resources import Resource
from quotaplane.state.rebuild import RebuildCapture
from quotaplane.state.snapshot import SnapshotState

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.state.handlers import PartitionState

__all__ = ["dao", "dump", "dump_asks", "dump_text", "snapshot"]

_EMPTY = Resource()


def dao(state: PartitionState) -> dict[str, Any]:
    """``GET /ws/v1/partitions`` entry: name, state, totalNodes, capacity, applications by state."""
    states: dict[str, int] = {}
    for app in state.apps.values():
        states[app.state] = states.get(app.state, 0) + 1
    root = state.queues.queue("root")
    used = Resource(root.allocated) if root is not None else _EMPTY
    return {
        "name": state.name,
        "state": "Active",
        "totalNodes": len(state.nodes),
        "capacity": {"capacity": state.total.to_dict(), "usedCapacity": used.to_dict()},
        "applications": {"total": len(state.apps), **dict(sorted(states.items()))},
    }


def dump(state: PartitionState) -> dict[str, Any]:
    """The full state as deterministic plain data (sorted keys and lists; the waiting asks as their
    journal events, in arrival order); equal after replay."""
    allocations = {k: state.allocs[k].to_dict() for k in sorted(state.allocs)}
    data = {**_parts(state, asks=False), "allocations": allocations}
    # normalise through JSON so tuples/lists and key order never differ between runs
    normal: dict[str, Any] = json.loads(json.dumps(data, sort_keys=True))
    # the asks are plain JSON values already (AskAdded.to_json: lists, str keys; pinned against the
    # generic encoder by tests/journal/test_events.py): the round trip would only copy them, and at
    # 500,000 waiting asks it was a seventh of a snapshot restore's CPU (issue 38). Their nested
    # constraints are copied, so the dump shares nothing with the state.
    normal["asks"] = [a if "constraints" not in a else {**a, "constraints": copy.deepcopy(a["constraints"])}
                      for a in dump_asks(state)]
    return normal


def dump_asks(state: PartitionState) -> list[dict[str, Any]]:
    """The dump's waiting asks: their journal events, in arrival order (plain JSON values)."""
    return state.waiting.asks.dump()


def dump_text(state: PartitionState) -> str:
    """:func:`dump` without its asks, as canonical JSON text: what a snapshot stores and a restore
    compares (:func:`quotaplane.state.restore_check.rebuilt_matches`). Raises ``ValueError`` when the
    state is not canonical JSON."""
    allocations = {k: a.to_dict() for k, a in state.allocs.items()}
    return canonical_json({**_parts(state, asks=False), "allocations": allocations})


def _parts(state: PartitionState, *, asks: bool = True) -> dict[str, Any]:
    """:func:`dump` without the allocations (and without the asks: ``asks`` false), before its
    normalisation."""
    parts = {
        "name": state.name,
        "config_seq": state.config_seq,
        "nodes": {n: r.to_dict() for n, r in sorted(state.nodes.items())},
        **({"unschedulable": sorted(state.node_index.unschedulable)} if state.node_index.unschedulable
           else {}),
        "applications": {a: state.apps[a].dump() for a in sorted(state.apps)},
        "queues": state.queues.dump_state(),
        "ugm": state.ugm.dump_state(),
        "policies": {key: p.dump_state() for key, p in sorted(state.policies.extensions)},
    }
    if asks:
        parts["asks"] = state.waiting.asks.dump()
    return parts


def snapshot(state: PartitionState) -> SnapshotState:
    """The snapshot state now (:mod:`quotaplane.state.snapshot`): a few milliseconds here, the
    allocation listing and events made when it is written. The parts other than the allocations go
    through JSON now, so they share nothing with the state."""
    small: dict[str, Any] = json.loads(json.dumps(_parts(state, asks=False)))   # the asks: the rebuild's
    allocations = [(a, a.node) for a in state.allocs.values()]
    rebuild = RebuildCapture(state.config_seq, state.nodes, list(state.apps.values()), allocations,
                             state.waiting.asks.all(), state.policies.extensions,
                             state.node_index.unschedulable, state.node_labels)
    return SnapshotState(state.config_seq, small, allocations, rebuild, state.history.snapshot())
