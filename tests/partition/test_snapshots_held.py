"""Partition.snapshots_held: no periodic snapshot of the growing state inside the block (a bulk start
decides many changes), the one that fell due taken once after it, periodic snapshots again after; a
failing snapshot is recorded as an automatic one's is, never raised (the events are durable)."""

from __future__ import annotations

import pytest

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from tests.partition.helpers import CONFIG, Clock


def _asks(p: object, app: str, n: int) -> None:
    for i in range(n):
        p.add_ask(app, f"{app}-{i}", Resource({"vcore": 1}))  # type: ignore[attr-defined]


def test_snapshots_are_held_in_the_block_and_one_is_taken_after() -> None:
    j = MemoryJournal()
    p = Scheduler.from_yaml(CONFIG, store=j, clock=Clock(), snapshot_every=5).partition("default")
    p.add_application("a", UserGroup("u"), queue="root.a")
    start = p.snapshot_seq
    with p.snapshots_held():
        _asks(p, "a", 12)
        assert p.snapshot_seq == start          # 12 changes, none snapshotted meanwhile
    assert p.snapshot_seq == p.last_seq > start
    assert j.load_snapshot(p.stream)[0] == p.last_seq   # type: ignore[index]
    before = p.snapshot_seq
    p.add_application("b", UserGroup("u"), queue="root.a")
    _asks(p, "b", 6)
    assert p.snapshot_seq > before              # periodic again after the block


def test_a_held_snapshot_that_fails_is_recorded_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    j = MemoryJournal()
    p = Scheduler.from_yaml(CONFIG, store=j, clock=Clock(), snapshot_every=3).partition("default")
    p.add_application("a", UserGroup("u"), queue="root.a")

    def refuse(*_args: object, **_kw: object) -> None:
        raise OSError("disk full")
    monkeypatch.setattr(MemoryJournal, "save_snapshot", refuse)
    with p.snapshots_held():
        _asks(p, "a", 4)
    assert isinstance(p.snapshot_error, OSError)
