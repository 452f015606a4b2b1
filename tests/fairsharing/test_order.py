"""Admission order with fair sharing (KQ-S4): sibling queues that do not borrow first, then the lower
weighted share — where YuniKorn's own fair order (usage over guaranteed) would choose the other."""

from __future__ import annotations

from tests.fairsharing.helpers import GPU, U, partition, share

QUEUES = f"""
- name: a
  properties: {{fairsharing.weight: "10"}}
  resources: {{guaranteed: {{{GPU}: 2}}}}
- name: b
  resources: {{guaranteed: {{{GPU}: 2}}}}
"""


def _busy(fairsharing: str) -> list[str]:
    p, _ = partition(QUEUES, nodes={GPU: 10}, fairsharing=fairsharing)
    p.add_application("a", U, queue="root.a")
    p.add_application("b", U, queue="root.b")
    assert p.allocate("a", "a1", {GPU: 6}) and p.allocate("b", "b1", {GPU: 3})
    p.auto_schedule = False
    p.add_ask("b", "b2", {GPU: 1})
    p.add_ask("a", "a2", {GPU: 1})
    return [a.allocation_key for a in p.schedule()]


def test_lower_weighted_share_is_admitted_first() -> None:
    """a borrows 4 of 10 (400 per mille) with weight 10: 40; b borrows 1 (100) with weight 1: a first."""
    assert _busy("{enabled: true}") == ["a2"]


def test_without_fair_sharing_yunikorn_order_holds() -> None:
    """The same with fair sharing off: YuniKorn's fair order (b uses 1.5× its guaranteed, a 3×)."""
    assert _busy("{enabled: false}") == ["b2"]


def test_a_queue_within_its_guaranteed_comes_before_any_borrower() -> None:
    """KQ-S4 (FairSharingPrioritizeNonBorrowing): a queue that borrows nothing goes before one that
    borrows, whatever the weights."""
    p, _ = partition(QUEUES, nodes={GPU: 10})
    p.add_application("a", U, queue="root.a")
    p.add_application("b", U, queue="root.b")
    assert p.allocate("a", "a1", {GPU: 3}) and p.allocate("b", "b1", {GPU: 1})
    assert share(p, "root.a").borrowing and not share(p, "root.b").borrowing
    p.auto_schedule = False
    p.add_ask("a", "a2", {GPU: 1})
    p.add_ask("b", "b2", {GPU: 1})
    assert [a.allocation_key for a in p.schedule()][:1] == ["b2"]
