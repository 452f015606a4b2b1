"""Issue 14 #7: an instance restarted after kill -9 recognises the lease of its earlier self.

Before, the restarted instance waited out the dead incarnation's lease (4.7–6.3 s) while answering
503 with its *own* URL as the leader. A lease whose holder advertises this instance's URL belongs to
an earlier process of this instance when nobody listens at this instance's address any more (two live
processes cannot serve one address): it is taken over at once. When the address is still served, the
lease may be a live duplicate and is respected.
"""

from __future__ import annotations

from typing import Any

from quotaplane.journal import MemoryJournal
from quotaplane.server.ha import Leadership

URL = "http://10.0.0.5:9080"


class _Sched:
    def partitions(self) -> list[Any]:
        return []

    def close(self) -> None:
        return None


def _leadership(journal: MemoryJournal, advertise: str, *, free: bool) -> Leadership:
    return Leadership(journal, advertise=advertise, build_leader=lambda _h: _Sched(),  # type: ignore[arg-type,return-value]
                      build_follower=lambda: _Sched(),  # type: ignore[arg-type,return-value]
                      streams_hint=lambda: ["default"], ttl=30, interval=1,
                      address_free=lambda: free)


def test_a_restarted_instance_takes_over_its_dead_incarnations_lease_at_once() -> None:
    j = MemoryJournal()
    dead = _leadership(j, URL, free=True)
    dead.initial()
    assert dead.is_leader() and j.lease_holder("default") == dead.holder
    # kill -9: the leases stay for 30 s; the restart comes at once, on the same address
    again = _leadership(j, URL, free=True)
    assert again.holder != dead.holder
    again.initial()
    assert again.is_leader()
    assert j.lease_holder("scheduler") == again.holder == j.lease_holder("default")
    assert again.leader_url() == URL


def test_a_lease_of_another_instance_is_respected() -> None:
    j = MemoryJournal()
    other = _leadership(j, "http://10.0.0.6:9080", free=True)
    other.initial()
    me = _leadership(j, URL, free=True)
    me.initial()
    assert not me.is_leader()
    assert me.leader_url() == "http://10.0.0.6:9080"


def test_a_live_duplicate_on_the_same_address_is_respected() -> None:
    j = MemoryJournal()
    first = _leadership(j, URL, free=False)
    first.initial()
    second = _leadership(j, URL, free=False)      # the address is served: the first one is alive
    second.initial()
    assert first.is_leader() and not second.is_leader()


def test_address_free_sees_a_listening_socket() -> None:
    import socket

    from quotaplane.server.main import _address_free

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert not _address_free("127.0.0.1", port)
    assert _address_free("127.0.0.1", port)
