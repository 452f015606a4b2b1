"""The scheduling cycle in detail: fair re-sorting, gang placeholders, one journal write per cycle,
rollback, applications that cannot take allocations, snapshots, and liveness (no starvation)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.partition import Partition
from quotaplane.scheduler import Scheduler
from tests.partition.helpers import Clock

ALICE = UserGroup("alice", ["dev"])
BOB = UserGroup("bob", ["ops"])
CAROL = UserGroup("carol", ["dev"])

CONFIG = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: fair4
      resources: {guaranteed: {vcore: 4}, max: {vcore: 4}}
      properties: {application.sort.policy: fair}
    - name: fifo4
      resources: {max: {vcore: 4}}
    - name: open
    - name: grouped
      limits:
      - limit: one dev app
        groups: [dev]
        maxapplications: 1
"""


def _v(n: int) -> Resource:
    return Resource({"vcore": n * 1000})


def _sched(store: Any = None, clock: Clock | None = None, **kw: Any) -> Scheduler:
    return Scheduler.from_yaml(CONFIG, store=store, clock=clock or Clock(), **kw)


def _part(vcore: int = 1000, **kw: Any) -> Partition:
    p = _sched(**kw).partition("default")
    p.auto_schedule = False
    p.add_node("n1", _v(vcore))
    return p


def _keys(allocs: list[Any]) -> list[str]:
    return [a.allocation_key for a in allocs]


def test_fair_policy_resorts_applications_after_every_allocation() -> None:
    """application.sort.policy fair: YuniKorn sorts the applications at every attempt, so within one
    cycle the application that just got an allocation goes behind the one with less usage."""
    p = _part()
    p.add_application("one", ALICE, queue="root.fair4")
    p.add_application("two", BOB, queue="root.fair4")
    for i in range(3):
        p.add_ask("one", f"o{i}", _v(1))
        p.add_ask("two", f"t{i}", _v(1))
    assert _keys(p.schedule()) == ["o0", "t0", "o1", "t1"]


def test_fifo_policy_serves_the_first_application_first_within_a_cycle() -> None:
    """The contrast to the fair test: fifo gives the first submitted application all it asks."""
    p = _part()
    p.add_application("one", ALICE, queue="root.fifo4")
    p.add_application("two", BOB, queue="root.fifo4")
    for i in range(3):
        p.add_ask("one", f"o{i}", _v(1))
        p.add_ask("two", f"t{i}", _v(1))
    assert _keys(p.schedule()) == ["o0", "o1", "o2", "t0"]


def test_group_maxapplications_makes_an_accepted_application_wait() -> None:
    """group.maxapplications: a second dev application stays Accepted with its ask pending."""
    p = _part()
    p.add_application("d1", ALICE, queue="root.grouped")
    p.add_application("d2", CAROL, queue="root.grouped")
    p.add_ask("d1", "k1", _v(1))
    p.add_ask("d2", "k2", _v(1))
    assert _keys(p.schedule()) == ["k1"]
    assert p.application("d2").state == "Accepted"
    assert [r.code for r in p.pending_reasons("k2") or []] == ["group.maxapplications"]
    p.release("k1")
    assert _keys(p.schedule()) == ["k2"]


def test_real_ask_of_a_task_group_replaces_its_placeholder(tmp_path: Any) -> None:
    """Gang scheduling (seed 001): a pending real ask of a task group replaces an allocated
    placeholder of that group (usage does not double count) and the event names the placeholder."""
    store = f"sqlite:///{tmp_path}/s.db"
    s = _sched(store=store)
    p = s.partition("default")
    p.auto_schedule = False
    p.add_node("n1", _v(4))
    p.add_application("gang", ALICE, queue="root.fifo4")
    assert p.allocate("gang", "ph1", _v(2), placeholder=True, task_group="tg").allocated
    assert p.allocate("gang", "ph2", _v(2), placeholder=True, task_group="tg").allocated
    seen: list[dict[str, Any]] = []
    p.subscribe(seen.append)
    p.add_ask("gang", "real1", _v(2), task_group="tg")     # the queue is full: only a swap fits
    assert _keys(p.schedule()) == ["real1"]
    assert p.allocation("ph1") is None and p.allocation("ph2") is not None
    assert p.queues.queue("root.fifo4").allocated == _v(4)
    made = [e for e in seen if e["type"] == "allocated"]
    assert made[0]["placeholderKey"] == "ph1" and made[0]["allocationKey"] == "real1"
    assert p.pending() == []
    before = p.dump_state()
    s.close()
    s2 = _sched(store=store)
    assert s2.partition("default").dump_state() == before    # replay: the replaced event ends the ask
    s2.close()


def test_placeholder_asks_allocate_as_placeholders() -> None:
    p = _part()
    p.add_application("gang", ALICE, queue="root.open")
    p.add_ask("gang", "ph", _v(1), placeholder=True, task_group="tg")
    (alloc,) = p.schedule()
    assert alloc.placeholder and alloc.task_group == "tg"
    with pytest.raises(ValueError):
        p.add_ask("gang", "bad", _v(1), placeholder=True)          # a placeholder needs a task group


class _SpyJournal:
    """Delegates to a real journal; records the size of every append; can be made to fail."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls: list[int] = []
        self.fail = False

    def append(self, stream: str, events: Any, **kw: Any) -> int:
        if self.fail:
            raise OSError("disk full")
        self.calls.append(len(events))
        return int(self.real.append(stream, events, **kw))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_a_cycle_is_journalled_in_one_transaction() -> None:
    p = _part()
    p.add_application("app", ALICE, queue="root.open")
    for i in range(5):
        p.add_ask("app", f"k{i}", _v(1))
    spy = _SpyJournal(p.journal)
    p.journal = spy
    assert len(p.schedule()) == 5
    assert spy.calls == [6]                    # five allocations and the application's state, noted


def test_a_failed_journal_write_undoes_the_whole_cycle() -> None:
    """Nothing half applied: if the cycle's journal write fails, no allocation of it stays, the
    asks wait again in their order, subscribers hear nothing, and the next cycle succeeds."""
    p = _part()
    p.add_application("app", ALICE, queue="root.fifo4")
    p.add_application("other", BOB, queue="root.open")
    for i in range(3):
        p.add_ask("app", f"k{i}", _v(1), priority=i % 2)
    p.add_ask("other", "x", _v(1))
    before = p.dump_state()
    order = [a.allocation_key for a in p.pending()]
    seen: list[dict[str, Any]] = []
    p.subscribe(seen.append)
    spy = _SpyJournal(p.journal)
    spy.fail = True
    p.journal = spy
    with pytest.raises(OSError):
        p.schedule()
    assert p.dump_state() == before
    assert [a.allocation_key for a in p.pending()] == order
    assert seen == [] and p.allocations() == []
    spy.fail = False
    assert sorted(_keys(p.schedule())) == ["k0", "k1", "k2", "x"]
    assert sorted(e["allocationKey"] for e in seen if e["type"] == "allocated") == ["k0", "k1", "k2", "x"]
    assert sorted((e["applicationID"], e["state"]) for e in seen if e["type"] == "application") == [
        ("app", "Running"), ("other", "Starting")]      # the state each ended the cycle in


def test_asks_of_a_failed_application_wait_and_go_with_it() -> None:
    """A hard gang that timed out is Failed: the cycle skips its asks (it takes no allocations)
    instead of failing, and the asks leave with the application when it expires."""
    clock = Clock()
    p = _part(clock=clock)
    p.add_application("gang", ALICE, queue="root.fifo4", gang_style="hard", placeholder_timeout=10)
    p.add_application("fine", BOB, queue="root.open")
    p.allocate("gang", "ph", _v(4), placeholder=True, task_group="tg")
    p.add_ask("gang", "big", _v(9))
    clock.advance(11)
    p.check_timeouts()
    assert p.application("gang").state == "Failed"
    p.add_ask("fine", "f1", _v(1))
    assert _keys(p.schedule()) == ["f1"]
    assert [a.allocation_key for a in p.pending()] == ["big"]
    assert p.pending_reasons("big") == []
    clock.advance(p.options.terminated_timeout + 1)
    p.check_timeouts()
    assert p.application("gang") is None
    assert p.pending() == []


def test_snapshot_restore_keeps_the_pending_queue(tmp_path: Any) -> None:
    """Restart from a snapshot (not only a full replay) keeps the asks and their order."""
    store = f"sqlite:///{tmp_path}/s.db"
    s = _sched(store=store)
    p = s.partition("default")
    p.auto_schedule = False
    p.add_node("n1", _v(2))
    p.add_application("app", ALICE, queue="root.open")
    p.allocate("app", "k0", _v(2))
    for key, prio in (("x", 0), ("y", 2), ("z", 0)):
        p.add_ask("app", key, _v(1), priority=prio)
    p.schedule()
    p.take_snapshot()
    before = p.dump_state()
    s.close()
    s2 = _sched(store=store)
    p2 = s2.partition("default")
    assert s2.restored_from["default"] == "snapshot"
    assert p2.dump_state() == before
    assert [a.allocation_key for a in p2.pending("app")] == ["y", "x", "z"]
    s2.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["fair4", "fifo4", "open", "grouped"]),
                          st.sampled_from([ALICE, BOB, CAROL]), st.integers(1, 4), st.integers(0, 3)),
                min_size=1, max_size=20))
@example([("grouped", ALICE, 1, 0), ("grouped", CAROL, 1, 0), ("fair4", ALICE, 1, 0),
          ("fair4", ALICE, 1, 0), ("fair4", ALICE, 1, 0), ("grouped", ALICE, 1, 0)])
def test_every_ask_is_eventually_allocated(asks: list[tuple[str, UserGroup, int, int]]) -> None:
    """No starvation (liveness): asks that each fit an empty partition keep arriving out of order of
    size and priority; if running work keeps finishing, every ask is allocated within as many
    release-and-schedule rounds as there are asks — no ask is skipped forever by later ones."""
    paths = {q: f"root.{q}" for q in ("fair4", "fifo4", "open", "grouped")}
    _every_ask_is_allocated(_part(vcore=4), asks, paths)


#: the same leaves under parents with a guaranteed, guaranteed at two levels, preemption on (issue 39)
DEEP = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      resources: {guaranteed: {vcore: 3}}
      queues:
      - name: fair4
        resources: {guaranteed: {vcore: 2}, max: {vcore: 4}}
        properties: {application.sort.policy: fair, preemption.delay: 1s}
      - name: fifo4
        resources: {guaranteed: {vcore: 1}, max: {vcore: 4}}
    - name: b
      resources: {guaranteed: {vcore: 1}}
      queues:
      - name: open
        properties: {preemption.delay: 1s}
      - name: grouped
        limits:
        - limit: one dev app
          groups: [dev]
          maxapplications: 1
"""


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["fair4", "fifo4", "open", "grouped"]),
                          st.sampled_from([ALICE, BOB, CAROL]), st.integers(1, 4), st.integers(0, 3)),
                min_size=1, max_size=20))
def test_every_ask_is_eventually_allocated_with_guarantees_at_several_levels(
        asks: list[tuple[str, UserGroup, int, int]]) -> None:
    """The liveness property on a tree with guaranteed at two levels and preemption on (issue 39)."""
    p = Scheduler.from_yaml(DEEP, clock=Clock()).partition("default")
    p.auto_schedule = False
    p.add_node("n1", _v(4))
    _every_ask_is_allocated(p, asks, {"fair4": "root.a.fair4", "fifo4": "root.a.fifo4",
                                      "open": "root.b.open", "grouped": "root.b.grouped"})


def _every_ask_is_allocated(p: Partition, asks: list[tuple[str, UserGroup, int, int]],
                            paths: dict[str, str]) -> None:
    for i, (queue, user, size, prio) in enumerate(asks):
        app = f"{queue}-{user.user}"
        if p.application(app) is None:
            p.add_application(app, user, queue=paths[queue])
        p.add_ask(app, f"k{i}", _v(size), priority=prio)
    allocated: set[str] = set()
    for _ in range(len(asks) + 1):
        allocated.update(_keys(p.schedule()))
        if not p.pending():
            break
        live = [a.allocation_key for a in p.allocations()]
        if live:
            p.release_batch(live)                           # the running work finishes
    assert p.pending() == []
    assert allocated == {f"k{i}" for i in range(len(asks))}


def _count_tries(p: Partition, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Spy on the admission attempts the partition's scheduler makes (through its transaction's
    ``admit``)."""
    from quotaplane.partition.txn import Txn

    tried: list[str] = []
    real = Txn.admit

    def counting(tx: Txn, spec: Any, *args: Any) -> Any:
        tried.append(spec.allocation_key)
        return real(tx, spec, *args)

    monkeypatch.setattr(Txn, "admit", counting)
    return tried


def test_adding_an_ask_tries_only_that_ask_when_nothing_was_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a cycle no pending ask fits, and until something frees quota that stays true: the
    automatic cycle of add_ask then tries the new ask alone (O(1) per submission), with the same
    outcome a full cycle would have."""
    p = _part()
    p.add_application("full", ALICE, queue="root.fifo4")
    p.add_application("free", BOB, queue="root.open")
    p.allocate("full", "k0", _v(4))
    for i in range(20):
        p.add_ask("full", f"w{i}", _v(1))
    p.schedule()
    p.auto_schedule = True
    tried = _count_tries(p, monkeypatch)
    p.add_ask("free", "n1", _v(1))
    assert tried == ["n1"] and p.allocation("n1") is not None
    p.add_ask("free", "n2", _v(10**6))
    assert tried == ["n1"]                  # over the cluster size: refused without an attempt
    assert [r.code for r in p.pending_reasons("n2") or []] == ["root.capacity"]   # explained on read
    p.release("k0")                                  # frees fifo4: its asks are retried
    assert [a.allocation_key for a in p.allocations() if a.allocation_key.startswith("w")] == \
        ["w0", "w1", "w2", "w3"]


def test_a_refused_ask_spares_the_attempts_of_larger_asks_of_its_application(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Within a cycle only consumption happens, so after an application's ask is refused its later
    asks that need at least as much are refused without another attempt; their reasons are still
    exactly what_if's."""
    p = _part()
    p.add_application("a1", ALICE, queue="root.grouped")
    p.add_application("a2", CAROL, queue="root.grouped")
    p.allocate("a1", "k0", _v(1))                    # the dev group's one running application
    for i in range(5):
        p.add_ask("a2", f"w{i}", _v(1 + i % 2))
    tried = _count_tries(p, monkeypatch)
    assert p.schedule() == []
    assert tried == ["w0"]
    for ask in p.pending():
        assert ask.reasons == p.what_if("a2", ask.resource).reasons
        assert [r.code for r in ask.reasons or []] == ["group.maxapplications"]


def test_asks_over_a_queue_max_are_refused_without_an_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    """M-2 is checked first and alone (the queue policy never preempts): once an attempt in a leaf
    was refused, a later ask of that leaf over a queue max is not tried through the whole admission
    path; its reasons are still exactly what_if's."""
    p = _part()
    p.add_application("full", ALICE, queue="root.fifo4")
    p.allocate("full", "k0", _v(3))
    for i in range(4):
        p.add_ask("full", f"w{i}", _v(4 - i))          # each smaller than the one before
    tried = _count_tries(p, monkeypatch)
    assert _keys(p.schedule()) == ["w3"]
    assert tried == ["w0", "w3"]
    for ask in p.pending():
        assert ask.reasons == p.what_if("full", ask.resource).reasons
        assert [r.code for r in ask.reasons or []] == ["queue.max"]


def test_reasons_follow_changes_made_outside_a_cycle() -> None:
    """The reasons equal what_if at every read, also after a synchronous allocation changed usage."""
    p = _part(vcore=4)
    p.add_application("a", ALICE, queue="root.open")
    p.add_application("b", BOB, queue="root.open")
    p.allocate("a", "k0", _v(3))
    p.add_ask("a", "big", _v(2))
    p.schedule()
    first = p.pending_reasons("big")
    assert first == p.what_if("a", _v(2)).reasons
    assert p.allocate("b", "k1", _v(1)).allocated                  # usage changes, no cycle
    now = p.pending_reasons("big")
    assert now == p.what_if("a", _v(2)).reasons and now != first


def test_withdrawing_the_last_ask_frees_the_running_count() -> None:
    """A-3 + maxapplications: an application kept running by its pending ask leaves the running
    count when the ask is withdrawn, and the application that waited for the count starts."""
    p = _sched().partition("default")
    p.add_node("n1", _v(100))
    p.add_application("a1", ALICE, queue="root.grouped")
    p.add_application("a2", CAROL, queue="root.grouped")
    assert p.allocate("a1", "k1", _v(1)).allocated
    p.add_ask("a1", "huge", _v(1000))
    p.add_ask("a2", "k2", _v(1))
    assert [r.code for r in p.pending_reasons("k2") or []] == ["group.maxapplications"]
    p.release("k1")
    assert p.allocation("k2") is None                              # a1 still counts (pending ask)
    p.remove_ask("huge")
    assert p.allocation("k2") is not None


def test_a_long_cycle_is_journalled_in_chunks_and_a_failed_chunk_is_undone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every CYCLE_FLUSH_EVERY allocations the cycle journals what it has (one transaction) and
    tells subscribers; a failed chunk is undone alone — the chunks before it stand, journalled."""
    import quotaplane.scheduling.runner as queueing

    monkeypatch.setattr(queueing, "CYCLE_FLUSH_EVERY", 2)
    p = _part()
    p.add_application("app", ALICE, queue="root.open")
    for i in range(5):
        p.add_ask("app", f"k{i}", _v(1))
    spy = _SpyJournal(p.journal)
    p.journal = spy
    seen: list[str] = []
    p.subscribe(lambda e: seen.append(e["allocationKey"]) if e["type"] == "allocated" else None)

    real_append = spy.append

    def fail_second(stream: str, events: Any, **kw: Any) -> int:
        if len(spy.calls) == 1:
            raise OSError("disk full")
        return real_append(stream, events, **kw)

    spy.append = fail_second  # type: ignore[method-assign]
    with pytest.raises(OSError):
        p.schedule()
    assert spy.calls == [3] and seen == ["k0", "k1"]     # (and the application's state, noted)
    assert sorted(a.allocation_key for a in p.allocations()) == ["k0", "k1"]
    assert [a.allocation_key for a in p.pending()] == ["k2", "k3", "k4"]
    assert p.queues.queue("root.open").allocated == _v(2)
    spy.append = real_append  # type: ignore[method-assign]
    assert _keys(p.schedule()) == ["k2", "k3", "k4"]
    assert spy.calls == [3, 2, 1] and seen == ["k0", "k1", "k2", "k3", "k4"]


def test_threads_adding_asks_and_releasing_keep_the_books_straight() -> None:
    """Concurrency: threads submit asks and release allocations on one partition (automatic cycles
    on). No exception; at the end queue usage equals the live allocations, no queue is over its
    max, every ask is either allocated, released or still pending, and no pending ask fits."""
    import threading

    p = _part(vcore=12)
    p.auto_schedule = True
    queues = ["fair4", "fifo4", "open"]
    users = [ALICE, BOB, CAROL]
    for t in range(4):
        for q in queues:
            p.add_application(f"{q}-{t}", users[t % 3], queue=f"root.{q}")
    errors: list[BaseException] = []
    released: list[str] = []
    lock = threading.Lock()

    def work(t: int) -> None:
        try:
            for i in range(60):
                q = queues[i % 3]
                p.add_ask(f"{q}-{t}", f"t{t}-{i}", _v(1 + i % 3), priority=i % 2)
                if i % 2:
                    mine = f"t{t}-"
                    live = [a.allocation_key for a in p.allocations() if a.allocation_key.startswith(mine)]
                    if live:
                        p.release(live[0])
                        with lock:
                            released.append(live[0])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert errors == []
    p.schedule()
    live = {a.allocation_key for a in p.allocations()}
    pending = {a.allocation_key for a in p.pending()}
    everything = {f"t{t}-{i}" for t in range(4) for i in range(60)}
    assert live | pending | set(released) == everything
    assert not (live & pending) and not (live & set(released)) and not (pending & set(released))
    for q in queues:
        queue = p.queues.queue(f"root.{q}")
        expected = sum((a.resource["vcore"] for a in p.allocations()
                        if p.application(a.application_id).queue_path == f"root.{q}"), 0)
        assert queue.allocated.get("vcore", 0) == expected
        if queue.max is not None:
            assert expected <= queue.max["vcore"]
    for ask in p.pending():
        assert not p.what_if(ask.application_id, ask.resource, priority=ask.priority).allocated


def test_a_request_brings_a_completing_application_back_to_running() -> None:
    """Seed 001 (Completing → Running, YuniKorn RunApplication): an ask for a Completing application
    makes it Running, so the completing timeout does not complete it while the ask waits; withdrawn,
    it completes again; allocated, it counts as running again."""
    clock = Clock()
    p = _part(clock=clock)
    p.add_application("app", ALICE, queue="root.fifo4")
    p.add_application("hog", BOB, queue="root.fifo4")
    p.allocate("app", "k0", _v(1))
    p.release("k0")
    assert p.application("app").state == "Completing"
    p.allocate("hog", "h0", _v(4))
    p.add_ask("app", "k1", _v(1))
    assert p.application("app").state == "Running" and not p.application("app").counted
    clock.advance(p.options.completing_timeout + 1)
    p.check_timeouts()
    assert p.application("app").state == "Running"
    p.remove_ask("k1")
    assert p.application("app").state == "Completing"
    p.add_ask("app", "k2", _v(1))
    p.release("h0")
    p.schedule()
    app = p.application("app")
    assert p.allocation("k2") is not None and app.state == "Running" and app.counted


def test_a_failing_automatic_cycle_does_not_fail_the_release_that_triggered_it() -> None:
    """The release is journalled before its automatic cycle runs: if the cycle's journal write
    fails, the release still succeeds, the ask waits, the error is kept and the cycle stays due."""
    p = _part()
    p.add_application("app", ALICE, queue="root.fifo4")
    p.allocate("app", "k0", _v(4))
    p.add_ask("app", "k1", _v(4))
    p.auto_schedule = True
    spy = _SpyJournal(p.journal)
    p.journal = spy
    real_append = spy.append

    def fail_cycles(stream: str, events: Any, **kw: Any) -> int:
        if any(e.get("type") == "allocated" for e in events):
            raise OSError("disk full")
        return real_append(stream, events, **kw)

    spy.append = fail_cycles  # type: ignore[method-assign]
    p.release("k0")                                     # no exception
    assert p.allocation("k0") is None and p.allocation("k1") is None
    assert isinstance(p.schedule_error, OSError) and p.schedule_needed
    assert [a.allocation_key for a in p.pending()] == ["k1"]
    p.add_ask("app", "k2", _v(1))                       # its cycle fails too: both wait
    assert p.allocation("k2") is None and len(p.pending()) == 2
    spy.append = real_append  # type: ignore[method-assign]
    assert _keys(p.schedule()) == ["k1"]


_OPS = st.lists(st.tuples(st.sampled_from(["ask", "ask", "release", "withdraw", "schedule", "node"]),
                          st.sampled_from(["fair4", "fifo4", "open", "grouped"]),
                          st.sampled_from([ALICE, BOB, CAROL]), st.integers(1, 5), st.integers(0, 2)),
                min_size=1, max_size=30)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_OPS, st.booleans(), st.integers(1, 3))
def test_replay_and_snapshot_restore_give_identical_state(ops: list[tuple[str, str, UserGroup, int, int]],
                                                          auto: bool, chunk: int) -> None:
    """Replaying the journal (and restoring from a snapshot) gives byte-identical state, pending
    asks and their order included, whatever mix of asks, withdrawals, releases, nodes and
    (chunk-journalled) cycles ran."""
    import json

    import quotaplane.scheduling.runner as queueing
    from quotaplane.journal import MemoryJournal

    old = queueing.CYCLE_FLUSH_EVERY
    queueing.CYCLE_FLUSH_EVERY = chunk
    try:
        j = MemoryJournal()
        clock = Clock()
        s = Scheduler.from_yaml(CONFIG, store=j, clock=clock, snapshot_every=0)
        p = s.partition("default")
        p.auto_schedule = auto
        p.add_node("n0", _v(3))
        for i, (op, queue, user, size, prio) in enumerate(ops):
            clock.advance(1)
            app = f"{queue}-{user.user}"
            if op == "ask":
                if p.application(app) is None:
                    p.add_application(app, user, queue=f"root.{queue}")
                p.add_ask(app, f"k{i}", _v(size), priority=prio)
            elif op == "release" and p.allocations():
                p.release(p.allocations()[size % len(p.allocations())].allocation_key)
            elif op == "withdraw" and p.pending():
                p.remove_ask(p.pending()[size % len(p.pending())].allocation_key)
            elif op == "schedule":
                p.schedule()
            elif op == "node":
                p.add_node(f"node{i}", _v(size))
        state = json.dumps(s.dump_state(), sort_keys=True)
        order = [a.allocation_key for a in p.pending()]
        replayed = Scheduler.from_yaml(CONFIG, store=j, clock=clock, snapshot_every=0)
        assert json.dumps(replayed.dump_state(), sort_keys=True) == state
        assert [a.allocation_key for a in replayed.partition("default").pending()] == order
        p.take_snapshot()
        restored = Scheduler.from_yaml(CONFIG, store=j, clock=clock, snapshot_every=0)
        assert restored.restored_from["default"] == "snapshot"
        assert json.dumps(restored.dump_state(), sort_keys=True) == state
    finally:
        queueing.CYCLE_FLUSH_EVERY = old


def test_an_ask_that_cannot_be_journalled_changes_nothing() -> None:
    """A refused write of ``ask_added`` leaves no trace (no ask, the application's state as before)."""
    p = _part()
    p.add_application("app", ALICE, queue="root.fifo4")
    p.allocate("app", "k0", _v(1))
    p.release("k0")                                     # Completing: an ask would make it Running
    before = p.dump_state()
    spy = _SpyJournal(p.journal)
    spy.fail = True
    p.journal = spy
    with pytest.raises(OSError):
        p.add_ask("app", "k1", _v(1))
    assert p.dump_state() == before and p.pending() == [] and not p.schedule_needed
    spy.fail = False
    p.add_ask("app", "k1", _v(1))
    assert _keys(p.schedule()) == ["k1"]
