"""Group commit (issue 18, :mod:`quotaplane.journal.group_commit`): many changes, one transaction; a change is
durable only after the commit that holds it; a failed group is undone in memory with everything
decided after it; notices and snapshots follow the commits.

Calls on the committer's ``owner`` thread return once decided (the service's event loop, which waits
for the marks itself); the tests that look at the in-between make the test thread the owner. Calls
from other threads return once durable."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.errors import ConflictError, NotFoundError
from quotaplane.journal import MemoryJournal
from quotaplane.journal.base import JournalError
from quotaplane.journal.group_commit import CommitFailedError, Offload
from quotaplane.state.restore_check import dump_of
from tests.partition.helpers import CONFIG, Clock

BOB = UserGroup("bob", ["ops"])
VCORE = Resource({"vcore": 1})


class GatedJournal(MemoryJournal):
    """A memory journal whose appends fail while ``fail`` is set; it counts its appends
    (transactions)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = False
        self.appends = 0

    def append(self, stream: str, events: Sequence[Mapping[str, Any]], *, holder: str | None = None) -> int:
        if self.fail:
            raise JournalError("disk full")
        self.appends += 1
        return super().append(stream, events, holder=holder)


def _scheduler(journal: Any, snapshot_every: int = 0) -> Scheduler:
    s = Scheduler.from_yaml(CONFIG, store=journal, clock=Clock(), snapshot_every=snapshot_every)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 10**6}))
    p.add_application("app1", BOB, queue="root.b")
    return s


def _restored(journal: Any) -> Scheduler:
    return Scheduler.from_yaml(CONFIG, store=journal, clock=Clock())


def _assert_restores_from_its_snapshot(s: Scheduler, url: str) -> None:
    """Closing ``s`` without a last snapshot and opening ``url`` again restores the same state from
    the snapshot the group committer saved."""
    state = s.partition("default").dump_state()
    s.close(snapshot=False)
    again = _restored(url)
    assert again.restored_from["default"] == "snapshot"
    assert again.partition("default").dump_state() == state
    again.close()


def test_a_change_is_not_durable_before_its_commit_and_many_share_one_transaction() -> None:
    j = GatedJournal()
    s = _scheduler(j)
    p = s.partition("default")
    group = p.start_group_commit(owner=threading.get_ident())
    assert group is not None
    before = j.appends
    for i in range(50):                           # decided and queued, on the owner thread
        p.allocate("app1", f"k{i}", VCORE)
    assert j.appends == before and group.durable == 0 and group.submitted == 50
    assert not any(ev.get("key") == "k0" for _, ev in j.read("default"))
    p.flush()
    assert group.durable == group.submitted and j.appends - before == 1
    assert p.last_seq == j.last_seq("default")
    restored = _restored(j).partition("default")
    assert restored.dump_state() == p.dump_state()
    s.stop_group_commit()


def test_on_an_event_loop_the_changes_of_one_turn_share_a_transaction() -> None:
    j = GatedJournal()
    s = _scheduler(j)
    p = s.partition("default")
    durable: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        group = p.start_group_commit(schedule=loop.call_soon, owner=threading.get_ident())
        assert group is not None

        async def request(i: int) -> None:
            p.allocate("app1", f"k{i}", VCORE)
            done = loop.create_future()
            group.notify(group.submitted, lambda outcome: done.set_result(outcome))
            assert await done is None
            durable.append(i)

        before = j.appends
        await asyncio.gather(*(request(i) for i in range(20)))
        assert j.appends - before == 1            # one flush after the turn that decided all 20
        await request(20)                         # an idle service commits a lone change at once
        assert j.appends - before == 2

    asyncio.run(main())
    assert sorted(durable) == list(range(21))
    assert len(list(_restored(j).partition("default").allocations())) == 21
    s.stop_group_commit()


def test_concurrent_callers_off_the_owner_thread_leave_the_store_holding_exactly_memory(tmp_path: Path
                                                                                       ) -> None:
    url = f"sqlite:///{tmp_path / 'g.db'}"
    s = _scheduler(url)
    p = s.partition("default")
    p.start_group_commit()

    def worker(w: int) -> None:
        for i in range(100):
            p.allocate("app1", f"w{w}-{i}", VCORE)
            if i % 3 == 0:
                p.release(f"w{w}-{i}")

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p.flush()
    group = p.group
    assert group is not None and group.groups == group.submitted == 8 * (100 + 34)
    state = p.dump_state()
    s.close()
    again = _restored(url)
    assert again.partition("default").dump_state() == state
    again.close()


class SlowJournal(GatedJournal):
    """Each append takes ``delay`` seconds (a store across the network)."""

    delay = 0.05

    def append(self, stream: str, events: Sequence[Mapping[str, Any]], *, holder: str | None = None) -> int:
        time.sleep(self.delay)
        return super().append(stream, events, holder=holder)


def _offloaded(loop: asyncio.AbstractEventLoop) -> Offload:
    def offload(append: Callable[[], int], landed: Callable[[int | BaseException], None]) -> None:
        def done(fut: asyncio.Future[int]) -> None:
            exc = fut.exception()
            landed(exc if exc is not None else fut.result())

        loop.run_in_executor(None, append).add_done_callback(done)
    return offload


def test_an_offloaded_commit_lets_the_loop_decide_meanwhile_and_fails_whole() -> None:
    j = SlowJournal()
    s = _scheduler(j)
    p = s.partition("default")
    outcomes: dict[int, BaseException | None] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        group = p.start_group_commit(schedule=loop.call_soon, owner=threading.get_ident(),
                                     offload=_offloaded(loop))
        assert group is not None

        async def request(i: int) -> None:
            p.allocate("app1", f"k{i}", VCORE)
            done = loop.create_future()
            group.notify(group.submitted, lambda outcome: done.set_result(outcome))
            outcomes[i] = await done

        before = j.appends
        first = asyncio.gather(*(request(i) for i in range(10)))
        await asyncio.sleep(0.01)                 # the first group's commit is in flight …
        assert group.durable == 0
        second = asyncio.gather(*(request(i) for i in range(10, 20)))   # … and the loop decides on
        await asyncio.gather(first, second)
        assert j.appends - before == 2            # two groups, in order
        assert all(outcomes[i] is None for i in range(20))
        j.fail = True
        await asyncio.gather(*(request(i) for i in range(20, 25)))
        assert all(isinstance(outcomes[i], CommitFailedError) for i in range(20, 25))
        assert p.recovering
        j.fail = False

    asyncio.run(main())
    assert p.recover()
    assert {a.allocation_key for a in p.allocations()} == {f"k{i}" for i in range(20)}
    assert {a.allocation_key for a in _restored(j).partition("default").allocations()} == \
        {f"k{i}" for i in range(20)}
    s.stop_group_commit()


def test_a_flush_from_another_thread_waits_for_the_offloaded_commit_and_keeps_the_order() -> None:
    j = SlowJournal()
    s = _scheduler(j)
    p = s.partition("default")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        group = p.start_group_commit(schedule=loop.call_soon, owner=threading.get_ident(),
                                     offload=_offloaded(loop))
        assert group is not None
        p.allocate("app1", "on-loop", VCORE)
        await asyncio.sleep(0.01)                 # its commit is in flight
        # a worker thread (a scheduling cycle) changes the partition: it commits after it
        await asyncio.to_thread(p.allocate, "app1", "on-worker", VCORE)
        assert group.durable == group.submitted

    asyncio.run(main())
    keys = [ev["key"] for _, ev in j.read("default") if ev.get("type") == "allocated"]
    assert keys == ["on-loop", "on-worker"]
    s.stop_group_commit()


def test_a_failed_group_undoes_it_and_everything_decided_after_it() -> None:
    j = GatedJournal()
    s = _scheduler(j)
    p = s.partition("default")
    p.allocate("app1", "kept", VCORE)
    committed = p.dump_state()
    group = p.start_group_commit(owner=threading.get_ident(), max_events=1)
    assert group is not None
    p.allocate("app1", "first", VCORE)           # its commit will fail …
    p.allocate("app1", "second", VCORE)           # … and these, decided after it, may depend on it
    p.release("kept")
    told: list[BaseException | None] = []
    group.notify(group.submitted, told.append)
    j.fail = True
    with pytest.raises(CommitFailedError):
        p.flush()
    assert len(told) == 1 and isinstance(told[0], CommitFailedError)
    assert p.recovering                           # nothing is served from memory now …
    j.fail = False
    assert p.recover()                            # … until it is rebuilt from the journal
    assert p.dump_state() == committed
    assert group.epoch == 1
    p.allocate("app1", "third", VCORE)            # and it takes changes again
    p.flush()
    assert {a.allocation_key for a in _restored(j).partition("default").allocations()} == {"kept", "third"}
    s.stop_group_commit()


def test_a_change_submitted_after_a_failure_raises_until_the_rebuild() -> None:
    j = GatedJournal()
    s = _scheduler(j)
    p = s.partition("default")
    group = p.start_group_commit(owner=threading.get_ident())
    assert group is not None
    j.fail = True
    p.allocate("app1", "doomed", VCORE)
    with pytest.raises(CommitFailedError):
        p.flush()
    j.fail = False
    # the next call finds the partition poisoned, rebuilds it and decides on the journal's state
    d = p.allocate("app1", "doomed", VCORE)
    assert d.allocated
    p.flush()
    assert [a.allocation_key for a in _restored(j).partition("default").allocations()] == ["doomed"]
    s.stop_group_commit()


def test_off_the_owner_thread_a_call_returns_durable_and_raises_when_its_commit_fails() -> None:
    j = GatedJournal()
    s = _scheduler(j)
    p = s.partition("default")
    p.allocate("app1", "kept", VCORE)
    p.start_group_commit()                        # no owner: every caller waits for its commit
    p.allocate("app1", "k1", VCORE)
    assert "k1" in {ev.get("key") for _, ev in j.read("default")}     # durable on return
    p.release("k1")
    before = p.dump_state()
    j.fail = True
    with pytest.raises(CommitFailedError):
        p.allocate("app1", "k2", VCORE)
    assert p.dump_state() == before               # its own exact undo (the caller held the lock)
    with pytest.raises(JournalError):
        p.release("kept")                         # refused: rebuilt from the journal, nothing changed
    j.fail = False
    assert p.recover()
    assert p.dump_state() == before
    s.stop_group_commit()


def test_notices_come_after_the_commit_with_the_journal_seq() -> None:
    j = GatedJournal()
    s = _scheduler(j)
    p = s.partition("default")
    seen: list[dict[str, Any]] = []
    p.subscribe(seen.append)
    p.start_group_commit(owner=threading.get_ident())
    p.allocate("app1", "k1", VCORE)
    assert not [n for n in seen if n["type"] == "allocated"]     # not journalled yet: nobody is told
    p.flush()
    allocated = [n for n in seen if n["type"] == "allocated"]
    assert [n["allocationKey"] for n in allocated] == ["k1"]
    journalled = {ev["key"]: seq for seq, ev in j.read("default") if ev.get("type") == "allocated"}
    assert allocated[0]["seq"] == journalled["k1"]
    s.stop_group_commit()


def test_snapshots_are_taken_at_a_committed_seq_and_restore_the_same_state(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    s = _scheduler(url, snapshot_every=7)
    p = s.partition("default")
    p.start_group_commit(owner=threading.get_ident())
    for i in range(60):
        p.allocate("app1", f"k{i}", VCORE)
        if i % 2:
            p.release(f"k{i - 1}")
        if i % 10 == 9:
            p.flush()
    p.flush()
    assert p.snapshot_seq > 0
    assert p.snapshot_error is None
    _assert_restores_from_its_snapshot(s, url)


def test_a_snapshot_written_in_the_background_is_the_state_at_its_seq_and_none_is_taken_meanwhile(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    s = _scheduler(url, snapshot_every=7)
    p = s.partition("default")
    held: list[Callable[[], None]] = []            # the background "thread": runs when the test says
    p.start_group_commit(owner=threading.get_ident(), background=held.append)
    at_capture: dict[str, Any] | None = None
    group = p.group
    assert group is not None
    for i in range(10):
        p.allocate("app1", f"k{i}", VCORE)
        if at_capture is None and group._snapshot_queued():
            at_capture = p.dump_state()            # the change that made it due: captured right now
    p.flush()
    assert len(held) == 1 and p.snapshot_seq == 0              # captured and due, not written yet
    for i in range(10, 40):                       # more changes: the captured state must not follow
        p.allocate("app1", f"k{i}", VCORE)
        p.release(f"k{i - 10}")
    p.flush()
    assert len(held) == 1                          # none captured while one waits to be written
    seq = p.last_seq
    held.pop()()
    assert 0 < p.snapshot_seq < seq and p.snapshot_error is None
    snap = s.journal.load_snapshot("default")
    assert snap is not None and snap[0] == p.snapshot_seq
    assert dump_of(snap[1]) == at_capture           # the state at its seq, not the later one
    for i in range(40, 50):                       # written: the next one is captured again
        p.allocate("app1", f"k{i}", VCORE)
    p.flush()
    assert len(held) == 1
    held.pop()()
    _assert_restores_from_its_snapshot(s, url)


def test_cache_stamps_move_with_decisions_not_commits() -> None:
    j = GatedJournal()
    s = _scheduler(j)
    p = s.partition("default")
    group = p.start_group_commit(owner=threading.get_ident())
    assert group is not None
    head = group.head
    p.allocate("app1", "k1", VCORE)
    assert group.head > head and p.last_seq == head          # decided, not yet journalled
    p.flush()
    assert p.last_seq == group.head
    s.stop_group_commit()


OPS = st.lists(st.tuples(st.sampled_from(["alloc", "release", "fail", "heal"]), st.integers(0, 9)),
               min_size=1, max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_whatever_fails_the_journal_holds_every_acknowledged_change_and_nothing_refused(
        ops: list[tuple[str, int]]) -> None:
    j = GatedJournal()
    s = _scheduler(j)
    p = s.partition("default")
    p.start_group_commit()
    acknowledged: dict[str, bool] = {}            # key -> allocated (True) / released (False)
    for op, k in ops:
        key = f"k{k}"
        if op == "fail":
            j.fail = True
            continue
        if op == "heal":
            j.fail = False
            continue
        try:
            if op == "alloc":
                p.allocate("app1", key, VCORE)
            else:
                p.release(key)
            p.flush()
        except (ConflictError, NotFoundError):
            continue                               # already there / not there (on the journal's state)
        except JournalError:
            continue                               # refused (503): must not be visible
        acknowledged[key] = op == "alloc"
    j.fail = False
    with contextlib.suppress(CommitFailedError):
        p.flush()
    assert p.recover()
    live = {a.allocation_key for a in p.allocations()}
    assert live == {k for k, on in acknowledged.items() if on}
    restored = {a.allocation_key for a in _restored(j).partition("default").allocations()}
    assert restored == live
    s.stop_group_commit()


class HeldOffload:
    """An offload that runs nothing until told: the commit is handed over, but its append has not
    begun (the worker thread is not scheduled yet) — the interleaving of issue 32 #1, injected."""

    def __init__(self) -> None:
        self.pending: list[tuple[Callable[[], int], Callable[[int | BaseException], None]]] = []

    def __call__(self, append: Callable[[], int], landed: Callable[[int | BaseException], None]) -> None:
        self.pending.append((append, landed))

    def run(self) -> None:
        """The worker finally runs its append, then the loop hears of its outcome."""
        while self.pending:
            append, landed = self.pending.pop(0)
            try:
                outcome: int | BaseException = append()
            except BaseException as exc:      # handed to landed, as the service's executor does
                outcome = exc
            landed(outcome)


def test_a_flush_that_takes_the_mutex_before_the_offloaded_append_begins_commits_it_once_in_order() -> None:
    # issue 32 #1: flush() took holding its mutex to mean the append in flight was over; when that
    # append had not begun, an AssertionError orphaned the group, a later commit marked its waiters
    # durable, and the orphan was appended after it (or never, once fenced)
    j = GatedJournal()
    s = _scheduler(j)
    p = s.partition("default")
    scheduled: list[Callable[[], None]] = []
    held = HeldOffload()
    group = p.start_group_commit(schedule=scheduled.append, owner=threading.get_ident(), offload=held)
    assert group is not None
    told: dict[str, BaseException | None] = {}
    p.allocate("app1", "first", VCORE)
    group.notify(group.submitted, lambda outcome: told.setdefault("first", outcome))
    scheduled.pop()()                             # the loop's flush hands the group to a worker …
    assert len(held.pending) == 1 and group.durable == 0
    errors: list[BaseException] = []

    def scheduling_cycle() -> None:               # … and a worker thread commits a change meanwhile
        try:
            p.allocate("app1", "second", VCORE)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=scheduling_cycle)
    worker.start()
    worker.join()
    assert errors == []
    assert group.durable == group.submitted and told == {"first": None}
    keys = [ev["key"] for _, ev in j.read("default") if ev.get("type") == "allocated"]
    assert keys == ["first", "second"]
    held.run()                                    # the worker's append runs at last: nothing more
    keys = [ev["key"] for _, ev in j.read("default") if ev.get("type") == "allocated"]
    assert keys == ["first", "second"]
    assert not p.recovering and group.failure is None
    assert _restored(j).partition("default").dump_state() == p.dump_state()
    s.stop_group_commit()


def test_an_offloaded_append_that_fails_after_a_flush_settled_its_group_changes_nothing() -> None:
    # the other order: the worker's append begins only after a flush committed its group; whatever
    # that late append would meet (here: the store refuses), the outcome already told stands
    j = GatedJournal()
    s = _scheduler(j)
    p = s.partition("default")
    scheduled: list[Callable[[], None]] = []
    held = HeldOffload()
    group = p.start_group_commit(schedule=scheduled.append, owner=threading.get_ident(), offload=held)
    assert group is not None
    p.allocate("app1", "first", VCORE)
    scheduled.pop()()
    p.flush()
    assert group.durable == group.submitted
    j.fail = True
    held.run()
    assert not p.recovering and group.failure is None and group.epoch == 0
    j.fail = False
    p.allocate("app1", "second", VCORE)
    p.flush()
    keys = [ev["key"] for _, ev in j.read("default") if ev.get("type") == "allocated"]
    assert keys == ["first", "second"]
    s.stop_group_commit()
