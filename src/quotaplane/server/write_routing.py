"""Where a write goes when partitions are led by several instances (issue 18 #2): served here, or
relayed to the partition's leader (:mod:`quotaplane.server.forwarding`), and what a write does while
a partition changes hands.

* A write for a partition led here is **admitted** (:meth:`PartitionLeadership.enter`) until it is
  answered, so a hand-back lets the writes already admitted finish before it releases the lease.
* During a hand-over nobody leads the partition for a moment. A write then **waits** for the
  leadership rounds, hurried, at most the leadership's ``hold``, instead of being refused — here,
  until this instance leads the partition, when it was relayed here because this one takes it next
  (it holds the partition's claim).
* A relay that could not reach the leader sent nothing, so it **tries again** where the next rounds
  say, within ``hold`` (a leader that is starting or restarting).
* A request is relayed at most :data:`~quotaplane.server.forwarding.MAX_HOPS` times and never to
  this instance itself; otherwise it is answered here (503 with the leader).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.types import Scope

from quotaplane.server.durability import partition_of_path
from quotaplane.server.forwarding import MAX_HOPS, Forwarder, hops, leader_write
from quotaplane.server.ha_partitions import PartitionLeadership

__all__ = ["WriteRouter"]

#: the scope key of a write admitted for a partition led here
_ADMITTED = "quotaplane.admitted"


class WriteRouter:
    """Routes the writes of one instance among the partitions' leaders (see the module docstring)."""

    __slots__ = ("forwarder", "leadership")

    def __init__(self, leadership: PartitionLeadership, forwarder: Forwarder) -> None:
        self.leadership = leadership
        self.forwarder = forwarder

    async def target(self, scope: Scope) -> str | None:
        """The leader to relay this request to, or None to answer it here (a write for a partition
        led here is then admitted until :meth:`done`)."""
        written, partition = leader_write(scope)
        if not written:
            return None
        leadership = self.leadership
        if self._admit(scope, partition):
            return None
        relayed = hops(scope)
        if relayed and leadership.successor(partition):
            await leadership.settle(partition, here=True)
            self._admit(scope, partition)
            return None
        if not leadership.settled(partition):
            await leadership.settle(partition)
        if self._admit(scope, partition):
            return None
        leader = leadership.leader_url(partition)
        # relayed enough, or not to itself (the store may still name this instance while it stops
        # leading): answered here, 503 with the leader
        if leader is None or leader == self.forwarder.advertise or relayed >= MAX_HOPS:
            return None
        return leader

    def rerouter(self, scope: Scope) -> Callable[[str], Awaitable[str | None]]:
        """For a write being relayed: after its leader could not be reached, wait for the next
        rounds (at most ``hold`` in all) and name the leader to try next — the same one when it is
        starting — or None to answer 503."""
        leadership, advertise = self.leadership, self.forwarder.advertise
        partition = partition_of_path(scope["path"])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + leadership.hold

        async def reroute(unreachable: str) -> str | None:
            while await leadership.next_round(deadline - loop.time()):
                if leadership.is_leader(partition):
                    return None          # led here by now: this request is answered 503 here
                leader = leadership.leader_url(partition)
                if leader is not None and leader != advertise:
                    return leader
            return None

        return reroute

    def _admit(self, scope: Scope, partition: str | None) -> bool:
        if not self.leadership.enter(partition):
            return False
        if partition is not None:
            scope[_ADMITTED] = partition
        return True

    def done(self, scope: Scope) -> None:
        """The request was answered: end the admission :meth:`target` made, if any."""
        partition = scope.get(_ADMITTED)
        if partition is not None:
            self.leadership.leave(partition)
