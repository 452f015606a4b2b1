"""Nodes of a partition: capacity, schedulability and the allocations placed on each (issue 15 #2).

quotaplane decides quota, not placement: an allocation need not name a node. When it does — given
with the allocation, or set later once Kubernetes bound the pod — the node's view shows it, and
removing the node releases it, as YuniKorn's ``removeNode`` releases every allocation on a
decommissioned node (reference ``kubernetes-front.md`` §5.2).

A node that is not schedulable (cordoned, or reported un-Ready) stays registered with the
allocations it runs but adds nothing to the cluster's capacity (§5.3's recommendation: capacity is
the allocatable of schedulable, Ready nodes); YuniKorn keeps counting a drained node, quotaplane does
not (``docs/concepts.md`` "Nodes").

The index keeps, per node, its allocation keys in placement order (dicts, never sets: views list
them in that order on every run).
"""

from __future__ import annotations

from quotaplane.resources import Resource

__all__ = ["NodeIndex"]


class NodeIndex:
    """Which allocations run on which node, and which nodes are unschedulable."""

    __slots__ = ("placed", "unschedulable")

    def __init__(self) -> None:
        #: node id → allocation keys placed on it, in placement order
        self.placed: dict[str, dict[str, None]] = {}
        #: node ids registered but not schedulable (their capacity is not in the cluster total)
        self.unschedulable: dict[str, None] = {}

    def place(self, node: str, key: str) -> None:
        """Allocation ``key`` runs on ``node``."""
        self.placed.setdefault(node, {})[key] = None

    def unplace(self, node: str, key: str) -> None:
        """Allocation ``key`` no longer runs on ``node`` (released, or moved)."""
        keys = self.placed.get(node)
        if keys is not None:
            keys.pop(key, None)
            if not keys:
                del self.placed[node]

    def on(self, node: str) -> list[str]:
        """The allocation keys on ``node``, in placement order."""
        return list(self.placed.get(node, ()))

    def schedulable(self, node: str) -> bool:
        """False for a registered node that takes no new allocations."""
        return node not in self.unschedulable

    def set_schedulable(self, node: str, schedulable: bool) -> None:
        """Record ``node``'s schedulability."""
        if schedulable:
            self.unschedulable.pop(node, None)
        else:
            self.unschedulable[node] = None

    def forget(self, node: str) -> None:
        """``node`` was removed (its allocations were released before)."""
        self.unschedulable.pop(node, None)
        self.placed.pop(node, None)

    @staticmethod
    def total(capacities: dict[str, Resource], unschedulable: dict[str, None]) -> Resource:
        """The cluster's capacity: the sum over schedulable nodes, resource names sorted."""
        total: dict[str, int] = {}
        for node, cap in capacities.items():
            if node in unschedulable:
                continue
            for k, v in cap.items():
                total[k] = total.get(k, 0) + v
        return Resource.of(dict(sorted(total.items())))
