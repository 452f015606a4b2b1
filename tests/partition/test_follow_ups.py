"""The follow-ups of a write (``Txn.after``, issue 29): they run once the write is committed, in the
order they were asked for — one asked for by a running follow-up after those already asked for — and a
failing one takes back only what it changed itself, never the write."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from quotaplane import Resource
from quotaplane.admission import validate_spec
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.partition import Partition
from quotaplane.partition.allocations import allocate, release
from quotaplane.partition.txn import Txn
from tests.partition.helpers import CONFIG

ONE = Resource({"vcore": 1})


def _partition() -> Partition:
    p = Scheduler.from_yaml(CONFIG).partition("default")
    p.add_node("node-1", Resource({"vcore": 100, "memory": 1000}))
    p.add_application("app", UserGroup("alice", ["dev"]), queue="root.a")
    assert p.allocate("app", "held", ONE).allocated
    return p


#: the follow-ups each test asks for, as (name, the one it asks for when it runs, or None)
ORDERS = [
    ([("a", None)], ["a"]),
    ([("a", None), ("b", None)], ["a", "b"]),
    ([("a", "c"), ("b", None)], ["a", "b", "c"]),
    ([("a", "c"), ("b", "d"), ("e", None)], ["a", "b", "e", "c", "d"]),
    ([("a", "b")], ["a", "b"]),
]


@pytest.mark.parametrize(("asked", "expected"), ORDERS)
def test_follow_ups_run_after_the_commit_in_the_order_asked(asked: list[tuple[str, str | None]],
                                                            expected: list[str]) -> None:
    p = _partition()
    ran: list[str] = []

    def follow(name: str, then: str | None) -> Callable[[Txn], None]:
        def run(tx: Txn) -> None:
            assert tx.uncommitted == 0 and "held" not in tx.state.allocs    # the write is committed
            ran.append(name)
            if then is not None:
                tx.after(follow(then, None))
        return run

    with p.write() as tx:
        release(tx, "held")
        for name, then in asked:
            tx.after(follow(name, then))
        assert ran == []                     # nothing runs before the write ends
    assert ran == expected
    assert p.allocation("held") is None


def test_a_failing_follow_up_takes_back_only_its_own_change() -> None:
    p = _partition()
    ran: list[str] = []
    heads: list[int] = []

    def allocate_then_fail(tx: Txn) -> None:
        heads.append(tx.head)                     # the journal with the write committed
        assert allocate(tx, validate_spec("app", "by-follow-up", ONE)).allocated
        ran.append("first")
        raise RuntimeError("a follow-up failed")

    def never(tx: Txn) -> None:
        ran.append("second")

    with pytest.raises(RuntimeError, match="a follow-up failed"), p.write() as tx:
        release(tx, "held")
        tx.after(allocate_then_fail)
        tx.after(never)
    assert ran == ["first"]
    assert p.allocation("held") is None                   # the write itself stays committed
    assert p.allocation("by-follow-up") is None           # the follow-up's own change is taken back
    assert p._core.log.head == heads[0]                   # nothing of the follow-up is journalled
