"""A waiting ask of a partition with resource flavors keeps its flavored reasons — those of what_if
for the same request — after an unrelated commit and after a restart (found by review: both gave
``[]``, the reasons being explained again without the flavor search, which the cycle had used)."""

from __future__ import annotations

import textwrap

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from tests.flavors.test_partition import CONFIG, GPU
from tests.partition.helpers import Clock

BOB = UserGroup("bob", ["ops"])
TOLERATE = [{"key": "dedicated", "operator": "Exists"}]


def _codes(p: object, key: str) -> list[str]:
    return [v.code for v in p.pending_reasons(key)]  # type: ignore[attr-defined]


def test_a_waiting_flavored_ask_keeps_what_ifs_reasons_after_a_commit_and_a_restart() -> None:
    journal, clock = MemoryJournal(), Clock()
    text = textwrap.dedent(CONFIG)
    s = Scheduler.from_yaml(text, store=journal, clock=clock)
    p = s.partition("default")
    p.add_node("n1", {GPU: 8, "vcore": 64000}, labels={"gpu": "a100"})
    p.add_node("n2", {GPU: 8, "vcore": 64000}, labels={"gpu": "h100"})
    p.add_application("app", UserGroup("alice", ["dev"]), queue="root.a")
    assert p.allocate("app", "f1", {GPU: 6}).allocated
    p.add_ask("app", "fa", Resource({GPU: 4}), node_selector={"gpu": "a100"})
    want = [v.code for v in p.what_if("app", {GPU: 4}, node_selector={"gpu": "a100"}).reasons]
    assert want and _codes(p, "fa") == want
    p.add_application("other", BOB, queue="root.b")              # a commit unrelated to it
    assert _codes(p, "fa") == want
    s.snapshot()
    again = Scheduler.from_yaml(text, store=journal, clock=clock).partition("default")
    assert _codes(again, "fa") == want
