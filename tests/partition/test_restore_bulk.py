"""A snapshot's waiting asks and live allocations put back in bulk leave exactly the state of putting
them back one by one (issue 38: the restart of 500,000 waiting asks;
:meth:`PartitionState.asks_restored`, :meth:`PartitionState.allocations_restored`).

The asks' bulk path sums each leaf's pending resources and adds them once, looks each leaf's settings
up once and builds no admission request nobody reads; the allocations' adds each leaf's usage once and
each running application's usage to its user and group once. Whatever the history that led to the
snapshot (configuration reloads included: the rebuild admits allocations under the config they were
admitted under), the rebuilt state — the dump, each queue's ``pendingResource``, ask count and usage,
the asks' order, arrival numbers and reservation records, the waiting notes and timers, the
applications' lifecycle, running order and allocations — must be the one the live handlers leave.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.errors import QuotaplaneError
from quotaplane.journal import MemoryJournal
from quotaplane.journal.base import canonical_json
from quotaplane.partition import Partition
from quotaplane.state.handlers import PartitionState
from tests.partition.helpers import CONFIG, Clock

ALICE = UserGroup("alice", ["dev"])
BOB = UserGroup("bob", ["ops"])

#: reservations off on one leaf, so some asks carry no reservation record
NO_RESERVE = CONFIG.replace("    - name: default\n",
                            "    - name: default\n      properties:\n"
                            "        application.sort.policy: fifo\n"
                            "        reservation.policy: disabled\n")

ask = st.tuples(st.just("ask"), st.integers(0, 5), st.integers(1, 6), st.integers(0, 2),
                st.sampled_from([{}, {"memory": 10}, {"memory": 0}]))
#: the applications first (so that most asks find theirs), then anything
apps = st.lists(st.tuples(st.just("app"), st.integers(0, 5),
                          st.sampled_from(["root.a", "root.b", "root.default"]), st.booleans()),
                min_size=1, max_size=6)
ops = st.lists(st.one_of(
    st.tuples(st.just("app"), st.integers(0, 5), st.sampled_from(["root.a", "root.b", "root.default"]),
              st.booleans()),
    ask,
    st.tuples(st.just("release"), st.integers(0, 40)),
    st.tuples(st.just("remove_ask"), st.integers(0, 40)),
    st.tuples(st.just("remove_app"), st.integers(0, 5)),
    st.tuples(st.just("schedule")),
    st.tuples(st.just("tick"), st.integers(1, 40)),
    st.tuples(st.just("reload"), st.integers(1, 3)),
), max_size=45)


def _reloaded(config: str, i: int) -> str:
    """``config`` with alice's limit in root.a at ``4 + i`` cores (a reload that changes a limit)."""
    return config.replace("maxresources: {vcore: 4}", f"maxresources: {{vcore: {4 + i}}}")


def _run(config: str, history: list[tuple[Any, ...]]) -> tuple[Scheduler, Partition]:
    clock = Clock()
    s = Scheduler.from_yaml(config, store=MemoryJournal(), clock=clock)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 12, "memory": 60}))
    n = 0
    for op in history:
        try:
            if op[0] == "app":
                p.add_application(f"app{op[1]}", BOB if op[3] else ALICE, queue=op[2])
            elif op[0] == "ask":
                n += 1
                live = sorted(a.application_id for a in p.applications())   # most asks find one
                p.add_ask(live[op[1] % len(live)] if live else "none", f"k{n}",
                          Resource({"vcore": op[2], **op[4]}), priority=op[3])
            elif op[0] == "release":
                keys = sorted(a.allocation_key for a in p.allocations())
                if keys:
                    p.release(keys[op[1] % len(keys)])
            elif op[0] == "remove_ask":
                waiting = [a.allocation_key for a in p.pending()]
                if waiting:
                    p.remove_ask(waiting[op[1] % len(waiting)])
            elif op[0] == "remove_app":
                p.remove_application(f"app{op[1]}")
            elif op[0] == "schedule":
                p.schedule()
            elif op[0] == "reload":
                s.update_config(_reloaded(config, op[1]))
            else:
                clock.advance(op[1])
        except QuotaplaneError:
            pass                        # refused input changes nothing: the history goes on
    return s, p


def _rebuilt(s: Scheduler, events: list[dict[str, Any]], *, bulk: bool) -> Partition:
    seq0 = int(events[0]["seq"])
    p = s._new_partition(s._config_at(seq0).partition("default"), seq0)
    p.replay(((0, ev) for ev in events), account=False, bulk=bulk)
    return p


def _fingerprint(p: Partition) -> dict[str, Any]:
    st_ = p._core.state
    w = st_.waiting
    r = st_.reservations
    queues = {path: (q.asks_waiting, dict(sorted(q._pending.items())))
              for path in st_.queues.paths() if (q := st_.queues.queue(path)) is not None}
    return {
        "dump": p.dump_state(),
        "queues": queues,
        "asks": [(a.allocation_key, a.application_id, a.seq, a.created, a.places, a.place_paths, a.bound,
                  a.reserve_at, a.overtaken, a.resource) for a in w.asks.all()],
        "by_app": {aid: list(asks) for aid, asks in w.asks._by_app.items()},
        "next_seq": w.asks.next_seq(), "dirty": w.asks.dirty,
        "due": list(w.due), "timed": list(w.timed), "quiet": list(w.quiet), "woken": sorted(w.woken),
        "preempt_due": st_.preempt_due,
        "watch": {place: list(asks) for place, asks in r._watch.items()},
        "force": {place: list(asks) for place, asks in r._force.items()},
        "reserve_timed": [entry[:3] for entry in r._timed], "limits": r._limits,
        "apps": {aid: (a.state, a.state_since, list(a.state_log), a.moves, a.reported_state, a.started,
                       a.counted, a.count_order, a.anchor_seq, list(a.allocations), dict(a.max_used))
                 for aid, a in st_.apps.items()},
        "allocs": [(k, a.config_seq, a.node) for k, a in st_.allocs.items()],
        "used": {path: (dict(sorted(q._alloc.items())), list(q.running_apps))
                 for path in st_.queues.paths() if (q := st_.queues.queue(path)) is not None},
        "count_seq": st_.count_seq,
        "owners": (st_.owners._users, st_.owners._groups),
        "moved": [a.application_id for a in st_.moved], "notes": list(st_.notes),
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=apps, history=ops, last=st.lists(ask, max_size=25),
       config=st.sampled_from([CONFIG, NO_RESERVE]))
def test_bulk_restore_of_the_waiting_asks_and_allocations_equals_the_one_by_one_replay(
        first: list[tuple[Any, ...]], history: list[tuple[Any, ...]], last: list[tuple[Any, ...]],
        config: str) -> None:
    s, p = _run(config, [*first, *history, *last])     # the last asks: most snapshots hold some
    event(f"waiting asks: {min(len(p.pending()), 5)}{'+' if len(p.pending()) >= 5 else ''}")
    snap = json.loads(canonical_json(dict(p._core.log.snapshot_state())))
    events = snap["rebuild"]
    bulk, slow = _rebuilt(s, events, bulk=True), _rebuilt(s, events, bulk=False)
    assert _fingerprint(bulk) == _fingerprint(slow)
    # a rebuild counts every application with allocations before them (count_in): without those
    # events, each application's first allocation starts it, in the bulk path as one by one
    uncounted = [ev for ev in events if ev["type"] != "count_in"]
    bulk, slow = _rebuilt(s, uncounted, bulk=True), _rebuilt(s, uncounted, bulk=False)
    assert _fingerprint(bulk) == _fingerprint(slow)
    s.close()


def test_the_snapshot_restore_takes_the_bulk_path_and_restores_the_state(monkeypatch: Any) -> None:
    bulk: list[int] = []
    one_pass = PartitionState._asks_restored

    def spy(state: PartitionState, events: Any, leaves: Any) -> None:
        bulk.append(len(events))
        one_pass(state, events, leaves)

    monkeypatch.setattr(PartitionState, "_asks_restored", spy)
    s, p = _run(CONFIG, [("app", 1, "root.a", False), ("app", 2, "root.b", True),
                         *[("ask", 1 + i % 2, 3, i % 3, {}) for i in range(12)], ("schedule",)])
    assert len(p.pending()) > 0
    want = p.dump_state()
    journal = s.journal
    p.take_snapshot()
    again = Scheduler.from_yaml(CONFIG, store=journal, clock=Clock())
    assert again.restored_from["default"] == "snapshot"
    assert again.partition("default").dump_state() == want
    assert bulk == [len(want["asks"])]
    again.close()


def test_the_snapshot_restore_puts_the_allocations_back_in_bulk(monkeypatch: Any) -> None:
    runs: list[int] = []
    one_pass = PartitionState.allocations_restored

    def spy(state: PartitionState, events: Any) -> None:
        runs.append(len(events))
        one_pass(state, events)

    monkeypatch.setattr(PartitionState, "allocations_restored", spy)
    s, p = _run(CONFIG, [("app", 1, "root.a", False), ("app", 2, "root.b", True),
                         *[("ask", 1 + i % 2, 1, i % 3, {}) for i in range(6)], ("reload", 2),
                         *[("ask", 1 + i % 2, 1, 0, {}) for i in range(4)]])
    live = len(p.allocations())
    assert live > 0
    want = p.dump_state()
    p.take_snapshot()
    again = Scheduler.from_yaml(_reloaded(CONFIG, 2), store=s.journal, clock=Clock())
    assert again.restored_from["default"] == "snapshot"
    assert again.partition("default").dump_state() == want
    assert sum(runs) == live and len(runs) == 2          # admitted under two configs: two runs
    again.close()
