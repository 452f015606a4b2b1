"""An application's state log (YuniKorn's ``stateLog``, issue 15): every change with its time, the
newest STATE_LOG_LIMIT kept, the start time kept apart, taken back exactly with a change the journal
refused, and the same after a restart and a snapshot restore."""

from __future__ import annotations

from typing import Any

import pytest

from quotaplane import Resource, UserGroup
from quotaplane.application import STATE_LOG_LIMIT
from quotaplane.cluster import Scheduler
from tests.partition.helpers import Clock

CONFIG = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
"""
ALICE = UserGroup("alice", ("dev",))


class _FailingJournal:
    def __init__(self, real: Any) -> None:
        self.real = real
        self.fail = False

    def append(self, stream: str, events: Any, **kw: Any) -> int:
        if self.fail:
            raise OSError("disk full")
        return int(self.real.append(stream, events, **kw))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _v(n: int) -> Resource:
    return Resource({"vcore": n})


def test_the_log_records_each_change_with_its_time() -> None:
    clock = Clock(100.0)
    p = Scheduler.from_yaml(CONFIG, clock=clock).partition("default")
    p.add_node("n1", _v(10))
    p.add_application("app", ALICE, queue="root.a")
    clock.advance(1)
    p.allocate("app", "k1", _v(1))
    clock.advance(1)
    p.allocate("app", "k2", _v(1))
    clock.advance(1)
    p.release("k1")
    p.release("k2")
    app = p.application("app")
    assert list(app.state_log) == [(101.0, "Starting"), (102.0, "Running"), (103.0, "Completing")]
    assert app.started_at() == 101.0


def test_the_log_keeps_the_newest_changes_and_the_start_time() -> None:
    clock = Clock(0.0)
    p = Scheduler.from_yaml(CONFIG, clock=clock).partition("default")
    p.add_node("n1", _v(10))
    p.add_application("app", ALICE, queue="root.a")
    for i in range(STATE_LOG_LIMIT):              # Starting/Running, then Completing, for ever
        clock.advance(1)
        p.allocate("app", f"k{i}", _v(1))
        p.release(f"k{i}")
    app = p.application("app")
    assert len(app.state_log) == STATE_LOG_LIMIT
    assert app.state_log[-1] == (float(STATE_LOG_LIMIT), "Completing")
    assert app.started_at() == 1.0                # the first Starting, no longer in the log


@pytest.mark.parametrize("full", [False, True])
def test_a_refused_change_takes_its_log_entries_back(full: bool) -> None:
    """The journal refuses an allocation (and an ask) that moved the application: the log is as
    before — also when the moves had pushed old entries out of a full log."""
    p = Scheduler.from_yaml(CONFIG, clock=Clock()).partition("default")
    p.add_node("n1", _v(10))
    p.add_application("app", ALICE, queue="root.a")
    for i in range(STATE_LOG_LIMIT if full else 1):
        p.allocate("app", f"k{i}", _v(1))
        p.release(f"k{i}")
    before = p.dump_state()
    spy = _FailingJournal(p.journal)
    p.journal = spy
    spy.fail = True
    with pytest.raises(OSError):
        p.allocate("app", "x", _v(1))             # Completing → Running
    assert p.dump_state() == before
    with pytest.raises(OSError):
        p.add_ask("app", "ask", _v(1))            # Completing → Running
    assert p.dump_state() == before


def test_restart_and_snapshot_keep_the_log(tmp_path: Any) -> None:
    store = f"sqlite:///{tmp_path}/s.db"
    s = Scheduler.from_yaml(CONFIG, store=store, clock=Clock())
    p = s.partition("default")
    p.add_node("n1", _v(10))
    p.add_application("app", ALICE, queue="root.a")
    for i in range(STATE_LOG_LIMIT + 5):
        p.allocate("app", f"k{i}", _v(1))
        p.release(f"k{i}")
    before = p.dump_state()
    s.close()
    s2 = Scheduler.from_yaml(CONFIG, store=store, clock=Clock())
    assert s2.partition("default").dump_state() == before
    s2.partition("default").take_snapshot()
    s2.close()
    s3 = Scheduler.from_yaml(CONFIG, store=store, clock=Clock())
    assert s3.restored_from == {"default": "snapshot"}
    assert s3.partition("default").dump_state() == before
    s3.close()
