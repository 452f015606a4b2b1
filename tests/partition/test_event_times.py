"""Every change a partition journals carries the time it happened (issue 29 item 4): whatever charges by
time — usage history, budgets — reads it from the events, and a release reaches the policies at its
own time, not at 0."""

from __future__ import annotations

from typing import Any

import pytest

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.policies.ugm import UgmPolicy
from quotaplane.policy import AdmissionRequest
from tests.partition.helpers import CONFIG, Clock, scheduler

BOB = UserGroup("bob", ["ops"])

#: events that are not happenings: a snapshot's rebuild list only
REBUILD_ONLY = {"count_in", "app_restore", "policy_memo"}


def test_every_journalled_event_carries_its_time() -> None:
    clock = Clock(1000.0)
    journal = MemoryJournal()
    s = scheduler(clock=clock, store=journal)
    p = s.partition("default")
    steps = [
        lambda: p.add_node("n1", Resource({"vcore": 50000})),
        lambda: p.update_node("n1", capacity=Resource({"vcore": 60000})),
        lambda: p.add_node("n2", Resource({"vcore": 1000})),
        lambda: p.add_application("app1", BOB, queue="root.b"),
        lambda: p.allocate("app1", "k1", Resource({"vcore": 1000})),
        lambda: p.bind("k1", "n1"),
        lambda: p.add_ask("app1", "q1", Resource({"vcore": 90000})),
        lambda: p.remove_ask("q1"),
        lambda: p.release("k1"),
        lambda: p.allocate("app1", "k2", Resource({"vcore": 1000}), node="n1"),
        lambda: p.remove_node("n1"),
        lambda: p.remove_node("n2"),
        lambda: s.update_config(CONFIG.replace("max: {vcore: 20}", "max: {vcore: 30}")),
        lambda: p.remove_application("app1"),
    ]
    start = journal.last_seq("default")
    for i, step in enumerate(steps):
        clock.now = 2000.0 + i
        before = journal.last_seq("default")
        step()
        for _, ev in journal.read("default", after=before):
            assert ev["type"] not in REBUILD_ONLY
            assert ev.get("t") == 2000.0 + i, ev
    assert journal.last_seq("default") > start


def test_a_release_reaches_the_policies_at_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(1000.0)
    p = scheduler(clock=clock).partition("default")
    p.add_node("n1", Resource({"vcore": 50000}))
    p.add_application("app1", BOB, queue="root.b")
    p.allocate("app1", "k1", Resource({"vcore": 1000}))
    p.allocate("app1", "k2", Resource({"vcore": 1000}))
    seen: list[tuple[str, float]] = []
    real = UgmPolicy.release

    def spy(self: UgmPolicy, request: AdmissionRequest, *, last_allocation: bool) -> Any:
        seen.append((request.allocation_key, request.time))
        return real(self, request, last_allocation=last_allocation)

    monkeypatch.setattr(UgmPolicy, "release", spy)
    clock.advance(50)
    p.release("k1")
    clock.advance(25)
    p.remove_application("app1")
    assert seen == [("k1", 1050.0), ("k2", 1075.0)]
