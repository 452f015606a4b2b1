"""Answers wait for the store under group commit (:mod:`quotaplane.server.durability`, issue 18).

A request that changed a partition waits for exactly its own change's commit; a request that changed
nothing there waits for everything decided before it, and answers 503 when a commit failed while it
was served (it may have seen a change that was undone)."""

from __future__ import annotations

import asyncio
import threading

import quotaplane as qp
from quotaplane.journal import MemoryJournal
from quotaplane.journal.group_commit import CommitFailedError, GroupCommit, reset_marks
from quotaplane.server.durability import CommitBarrier, partition_of_path
from tests.partition.helpers import CONFIG, Clock
from tests.partition.test_group_commit import GatedJournal


def _partition(journal: MemoryJournal) -> tuple[qp.Scheduler, qp.Partition]:
    s = qp.Scheduler.from_yaml(CONFIG, store=journal, clock=Clock())
    p = s.partition("default")
    p.add_node("n1", {"vcore": 10**6})
    p.add_application("app", qp.UserGroup("bob", ["ops"]), queue="root.b")
    return s, p


def _on_this_loop(p: qp.Partition) -> GroupCommit:
    """Start ``p``'s group commit owned by the running event loop, as the service does."""
    loop = asyncio.get_running_loop()
    group = p.start_group_commit(schedule=loop.call_soon, owner=threading.get_ident())
    assert group is not None
    return group


def test_the_partition_of_a_path() -> None:
    assert partition_of_path("/ws/v1/partition/default/allocations") == "default"
    assert partition_of_path("/ws/v1/partition/p2") == "p2"
    assert partition_of_path("/ws/v1/partitions") is None
    assert partition_of_path("/ws/v1/config") is None


def test_a_change_waits_for_its_commit_and_a_read_for_everything_before_it() -> None:
    j = GatedJournal()
    s, p = _partition(j)
    barrier = CommitBarrier(lambda: s)

    async def main() -> None:
        group = _on_this_loop(p)
        epochs = barrier.epochs("/ws/v1/partition/default/allocations")
        p.allocate("app", "k1", {"vcore": 1})
        assert group.durable < group.submitted
        assert await barrier.settle(epochs) is None          # waited for its own commit
        assert group.durable == group.submitted
        # a read started while another change is decided waits for it too
        reset_marks()
        read = barrier.epochs("/ws/v1/partition/default/allocation/k2")
        p.allocate("app", "k2", {"vcore": 1})
        reset_marks()                                       # (that change was another request's)
        assert await barrier.settle(read) is None
        assert group.idle
        # the health and metrics routes never wait
        assert barrier.epochs("/readyz") == ()

    asyncio.run(main())
    s.stop_group_commit()


def test_a_failed_commit_answers_503_to_the_change_and_to_a_read_served_meanwhile() -> None:
    j = GatedJournal()
    s, p = _partition(j)
    barrier = CommitBarrier(lambda: s)

    async def main() -> None:
        _on_this_loop(p)
        read = barrier.epochs("/ws/v1/partition/default/queues")      # a read that saw …
        reset_marks()
        change = barrier.epochs("/ws/v1/partition/default/allocations")
        p.allocate("app", "doomed", {"vcore": 1})                     # … this change, whose commit fails
        j.fail = True
        outcome = await barrier.settle(change)
        assert isinstance(outcome, CommitFailedError)
        reset_marks()
        assert isinstance(await barrier.settle(read), CommitFailedError)
        j.fail = False
        assert p.recover()
        assert p.allocation("doomed") is None
        # a request that starts after the rebuild is served normally
        reset_marks()
        again = barrier.epochs("/ws/v1/partition/default/allocations")
        p.allocate("app", "k3", {"vcore": 1})
        assert await barrier.settle(again) is None

    asyncio.run(main())
    s.stop_group_commit()


def test_a_change_durable_in_a_new_group_is_not_answered_503_for_the_old_group_s_failure() -> None:
    # issue 32 #3, found by the fault suite (SIGSTOP past the lease): a write that reached the
    # paused leader started while the partition's group commit was the old one; the pause lapsed
    # the lease, the old group's commit was refused (fenced) and its epoch moved; the lease was
    # taken again, a new group started, and the write was decided and committed through it. Its
    # answer was 503 "nothing was changed" for the old group's failure, although it was durable.
    j = GatedJournal()
    s, p = _partition(j)
    barrier = CommitBarrier(lambda: s)

    async def main() -> None:
        _on_this_loop(p)
        write = barrier.epochs("/ws/v1/partition/default/allocations")    # started with the old group
        reset_marks()
        p.allocate("app", "doomed", {"vcore": 1})                         # another request's change …
        j.fail = True
        assert isinstance(await barrier.settle(()), CommitFailedError)     # … whose commit fails
        j.fail = False
        assert p.recover()
        p.stop_group_commit()                                             # lapsed, then led again
        _on_this_loop(p)
        reset_marks()                                                     # the write's own context
        p.allocate("app", "kept", {"vcore": 1})
        assert await barrier.settle(write) is None                        # durable: not a 503
        assert any(ev.get("key") == "kept" for _, ev in j.read(p.stream))

    asyncio.run(main())
    s.stop_group_commit()


def test_a_lone_request_commits_in_its_own_turn_and_a_failure_is_still_its_answer() -> None:
    # issue 38 service path: alone (no other request being decided) the barrier commits the group
    # itself instead of waiting for the scheduled flush; the answer still follows the commit
    j = GatedJournal()
    s, p = _partition(j)
    barrier = CommitBarrier(lambda: s)

    async def main() -> None:
        group = _on_this_loop(p)
        turns = 0

        def tick() -> None:
            nonlocal turns
            turns += 1

        epochs = barrier.epochs("/ws/v1/partition/default/allocations")
        p.allocate("app", "k1", {"vcore": 1})
        appends = j.appends
        assert group.durable < group.submitted
        asyncio.get_running_loop().call_soon(tick)
        assert await barrier.settle(epochs, alone=True) is None
        assert turns == 0                                  # no turn of the loop passed …
        assert group.durable == group.submitted            # … and the change is in the store
        assert j.appends == appends + 1
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert turns == 1 and j.appends == appends + 1     # the scheduled flush found nothing
        # a lone change whose commit fails: its answer is the failure, as with the scheduled flush
        reset_marks()
        doomed = barrier.epochs("/ws/v1/partition/default/allocations")
        p.allocate("app", "doomed", {"vcore": 1})
        j.fail = True
        assert isinstance(await barrier.settle(doomed, alone=True), CommitFailedError)
        j.fail = False
        assert p.recover()
        assert p.allocation("doomed") is None

    asyncio.run(main())
    s.stop_group_commit()


def test_not_alone_the_changes_of_one_turn_share_a_commit() -> None:
    j = GatedJournal()
    s, p = _partition(j)
    barrier = CommitBarrier(lambda: s)

    async def one(key: str) -> BaseException | None:
        epochs = barrier.epochs("/ws/v1/partition/default/allocations")
        p.allocate("app", key, {"vcore": 1})
        return await barrier.settle(epochs, alone=False)

    async def main() -> None:
        group = _on_this_loop(p)
        before = j.appends
        assert await asyncio.gather(*(one(f"k{i}") for i in range(5))) == [None] * 5
        assert j.appends == before + 1 and group.idle        # one transaction for the five

    asyncio.run(main())
    s.stop_group_commit()


def test_settle_alone_commits_the_lone_change_without_a_coroutine_and_answers_its_failure() -> None:
    # issue 38 service path: the common lone case (one partition, its one queued change) is settled by
    # a plain call — committed before it returns, a failure its answer — as settle(alone=True) does
    j = GatedJournal()
    s, p = _partition(j)
    barrier = CommitBarrier(lambda: s)

    async def main() -> None:
        group = _on_this_loop(p)
        epochs = barrier.epochs_of("default")
        p.allocate("app", "k1", {"vcore": 1})
        appends = j.appends
        assert group.durable < group.submitted
        assert barrier.settle_alone(epochs) is None
        assert group.durable == group.submitted and j.appends == appends + 1
        assert barrier.settle_alone(epochs) is None          # durable already: nothing more
        assert j.appends == appends + 1
        await asyncio.sleep(0)
        assert j.appends == appends + 1                      # the scheduled flush found nothing
        # a lone change whose commit fails: the failure is its answer and the change is undone
        doomed = barrier.epochs_of("default")
        p.allocate("app", "doomed", {"vcore": 1})
        j.fail = True
        assert isinstance(barrier.settle_alone(doomed), CommitFailedError)
        j.fail = False
        assert p.recover()
        assert p.allocation("doomed") is None and p.allocation("k1") is not None

    asyncio.run(main())
    s.stop_group_commit()


def test_settle_alone_defers_to_settle_outside_the_common_case() -> None:
    j = GatedJournal()
    s, p = _partition(j)
    barrier = CommitBarrier(lambda: s)

    async def main() -> None:
        group = _on_this_loop(p)
        read = barrier.epochs_of("default")                  # changed nothing: settle waits for all
        assert barrier.settle_alone(read) is False
        assert barrier.settle_alone(()) is False
        assert await barrier.settle(read, alone=True) is None
        # an earlier request's change waits for the scheduled flush; a lone one decided after it
        # commits both in one transaction, and the earlier one's waiter is told
        earlier = asyncio.get_running_loop().create_task(_decided(barrier, p, "early"))
        await asyncio.sleep(0)           # it decided and waits; its flush is scheduled, not run yet
        lone = barrier.epochs_of("default")
        p.allocate("app", "late", {"vcore": 1})
        assert len(group._buffer) == 2
        appends = j.appends
        assert barrier.settle_alone(lone) is None
        assert j.appends == appends + 1 and group.idle
        assert await earlier is None

    asyncio.run(main())
    s.stop_group_commit()


async def _decided(barrier: CommitBarrier, p: qp.Partition, key: str) -> BaseException | None:
    epochs = barrier.epochs_of("default")
    p.allocate("app", key, {"vcore": 1})
    return await barrier.settle(epochs, alone=False)


def test_settle_alone_off_the_owner_or_with_offloaded_commits_is_left_to_settle() -> None:
    j = GatedJournal()
    s, p = _partition(j)
    barrier = CommitBarrier(lambda: s)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        landed: list[object] = []

        def offload(append: object, done: object) -> None:
            landed.append((append, done))

        group = p.start_group_commit(schedule=loop.call_soon, owner=threading.get_ident(), offload=offload)
        assert group is not None
        epochs = barrier.epochs_of("default")
        p.allocate("app", "k1", {"vcore": 1})
        assert barrier.settle_alone(epochs) is False and not group.idle
        assert group.decide_inline(group.submitted) is False
        group.flush()
        assert group.idle

    asyncio.run(main())
    s.stop_group_commit()
