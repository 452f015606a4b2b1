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


# KQ-S4 compares each queue's share *with its head workload added*, then priority, then the earlier
# timestamp — the cases of Kueue's fair_sharing_iterator_test.go, as quotaplane trees.

EVEN = f"""
- name: a
  resources: {{guaranteed: {{{GPU}: 2}}}}
- name: b
  resources: {{guaranteed: {{{GPU}: 2}}}}
"""


def _heads(a_used: int, b_used: int, a_head: int, b_head: int, *, a_priority: int = 0,
           b_priority: int = 0, b_first: bool = False) -> list[str]:
    p, clock = partition(EVEN, nodes={GPU: 10})
    for app in ("b", "a") if b_first else ("a", "b"):
        p.add_application(app, U, queue=f"root.{app}")
        clock.advance(1)
    if a_used:
        assert p.allocate("a", "a1", {GPU: a_used})
    if b_used:
        assert p.allocate("b", "b1", {GPU: b_used})
    p.auto_schedule = False
    p.add_ask("a", "a2", {GPU: a_head}, priority=a_priority)
    p.add_ask("b", "b2", {GPU: b_head}, priority=b_priority)
    return [a.allocation_key for a in p.schedule()]


def test_the_share_is_compared_with_the_head_workload() -> None:
    """a borrows 1 now, b nothing; with their heads a would borrow 2 (200 per mille), b 5 (500): both
    would borrow on the GPUs they ask for, so the lower share with the head goes first — a (only one
    fits). Comparing the current shares would put b (not borrowing) first."""
    assert _heads(3, 2, 1, 5) == ["a2"]


def test_not_borrowing_with_the_head_goes_first() -> None:
    """b borrows nothing with its head; a would: b first although a's share now is 0 too."""
    assert _heads(2, 0, 3, 2)[:1] == ["b2"]


def test_equal_shares_with_the_head_higher_priority_first() -> None:
    """Same share with the head (both would borrow 4; only one fits): the higher priority first,
    whatever the names."""
    assert _heads(2, 2, 4, 4, b_priority=5) == ["b2"]


def test_equal_shares_and_priorities_earlier_first() -> None:
    """Same share and priority: the workload queued earlier first (b's application came first)."""
    assert _heads(2, 2, 4, 4, b_first=True) == ["b2"]


COHORTS = f"""
- name: left
  queues:
    - name: a
      resources: {{guaranteed: {{{GPU}: 2}}}}
- name: right
  queues:
    - name: b
      resources: {{guaranteed: {{{GPU}: 2}}}}
    - name: c
      resources: {{guaranteed: {{{GPU}: 2}}}}
"""


def test_the_tournament_compares_cohorts_with_the_winners_head() -> None:
    """At the root the cohorts compete with the head of their own winner: right's winner is c's small
    workload (c borrows 1 with it, b 4), and right with it borrows 1 of 10 — less than left with a's
    3 (300): c first, although right uses more now."""
    p, _ = partition(COHORTS, nodes={GPU: 10})
    for app in ("a", "b", "c"):
        p.add_application(app, U, queue=f"root.{'left' if app == 'a' else 'right'}.{app}")
    assert p.allocate("b", "b1", {GPU: 2}) and p.allocate("c", "c1", {GPU: 2})
    p.auto_schedule = False
    p.add_ask("a", "a2", {GPU: 5})
    p.add_ask("b", "b2", {GPU: 4})
    p.add_ask("c", "c2", {GPU: 1})
    assert [a.allocation_key for a in p.schedule()][:1] == ["c2"]


# KQ-S4 with flavors: Kueue's head workload has its flavors assigned before the tournament (its
# nomination), so what it asks for counts in its queue's share under the flavor it would get — also when
# the ask names only the plain resource and the flavor search chooses.

FLAVORS = """    resourceflavors:
      - {name: a100, resources: [nvidia.com/gpu], nodelabels: {gpu: a100}}
      - {name: h100, resources: [nvidia.com/gpu], nodelabels: {gpu: h100}}
"""
FLAVORED = f"""
- name: a
  flavors: [a100, h100]
  resources: {{guaranteed: {{{GPU}@a100: 2, {GPU}@h100: 4}}, max: {{{GPU}@a100: 6}}}}
- name: b
  flavors: [a100, h100]
  resources: {{guaranteed: {{{GPU}@a100: 2}}}}
"""


def _flavored_heads(a_head: dict[str, int], b_head: dict[str, int], *, b_first: bool = False) -> list[str]:
    p, clock = partition(FLAVORED, nodes={}, extra=FLAVORS)
    p.add_node("a100", {GPU: 10}, labels={"gpu": "a100"})
    p.add_node("h100", {GPU: 10}, labels={"gpu": "h100"})
    for app in ("b", "a") if b_first else ("a", "b"):
        p.add_application(app, U, queue=f"root.{app}")
        clock.advance(1)
    assert p.allocate("a", "a1", {f"{GPU}@a100": 3}) and p.allocate("b", "b1", {f"{GPU}@a100": 2})
    p.auto_schedule = False
    p.add_ask("a", "a2", a_head)
    p.add_ask("b", "b2", b_head)
    return [a.allocation_key for a in p.schedule()]


def test_a_head_asking_the_plain_resource_counts_under_the_flavor_it_would_get() -> None:
    """a borrows 1 a100 now, b nothing. Both heads ask for plain GPUs, and both would get a100 (it
    fits, by borrowing, and borrowing stops the search by default): a with its head borrows 2 (100
    per mille of the 20 GPUs), b 5 (250): a first, as when the asks name a100. Not counting b's plain
    GPUs kept b's share at 0 (not borrowing) and put b first."""
    assert _flavored_heads({f"{GPU}@a100": 1}, {f"{GPU}@a100": 5}) == ["a2"]
    assert _flavored_heads({GPU: 1}, {GPU: 5}) == ["a2", "b2"]      # then b2 gets h100


def test_a_head_counts_under_the_next_flavor_when_the_first_is_full() -> None:
    """a's head of 4 plain GPUs would break its a100 max (3 + 4 > 6): the search gives it h100, within
    a's h100 guaranteed — a does not borrow on what its head asks for, and goes before b (whose head of
    1 a100 borrows), although b's application is older and a borrows 1 a100 now. Charged under the first
    flavor of its list, a's head would borrow 5 (250 per mille) and come after b (50)."""
    assert _flavored_heads({GPU: 4}, {f"{GPU}@a100": 1}, b_first=True) == ["a2", "b2"]
