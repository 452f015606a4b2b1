"""The dominant resource share (KQ-S1 … KQ-S3) with the outcomes of Kueue's own tests
(``pkg/cache/scheduler/fair_sharing_test.go`` ``TestDominantResourceShare``): a ClusterQueue is a leaf
whose guaranteed is its nominal quota, a cohort a parent queue, the root cohort's total the cluster."""

from __future__ import annotations

import math

from quotaplane.queues.fair import MAX_INT64
from tests.fairsharing.helpers import GPU, U, partition, share


def test_usage_above_nominal_dominant_resource() -> None:
    """S-ex1: cq borrows cpu 1 of 10 lendable (100 per mille) and gpu 2 of 10 (200): gpu dominates."""
    p, _ = partition(f"""
    - name: cq
      resources: {{guaranteed: {{vcore: 2, {GPU}: 5}}}}
    - name: lending-cq
      resources: {{guaranteed: {{vcore: 8, {GPU}: 5}}}}
    """, nodes={"vcore": 10_000, GPU: 10})
    p.add_application("a", U, queue="root.cq")
    assert p.allocate("a", "a1", {"vcore": 3000, GPU: 7})
    s = share(p, "root.cq")
    assert (s.ratio, s.resource, s.rounded()) == (200.0, GPU, 200)
    assert share(p, "root.lending-cq").ratio == 0 and not share(p, "root.lending-cq").borrowing
    assert share(p, "root").ratio == 0                  # the root never borrows (no parent)


def test_cohort_has_resource_share_with_weight() -> None:
    """S-ex2: cq (nominal 5) uses 10 of 50 lendable: 100; its cohort (weight 2) borrows 5: 50."""
    p, _ = partition(f"""
    - name: child-cohort
      properties: {{fairsharing.weight: "2"}}
      queues:
        - name: cq
          resources: {{guaranteed: {{{GPU}: 5}}}}
    """, nodes={GPU: 50})
    p.add_application("a", U, queue="root.child-cohort.cq")
    assert p.allocate("a", "a1", {GPU: 10})
    assert share(p, "root.child-cohort.cq").rounded() == 100
    cohort = share(p, "root.child-cohort")
    assert (cohort.ratio, cohort.weight, cohort.rounded()) == (100.0, 2.0, 50)


def test_share_affected_by_borrowing_limit() -> None:
    """S-ex3: the cohort's borrowing limit 10 caps what cq could get: cq's lendable is 10 (1000 per
    mille), the cohort's 50 (200)."""
    p, _ = partition(f"""
    - name: child-cohort
      resources: {{borrowinglimit: {{{GPU}: 10}}}}
      queues:
        - name: cq
    """, nodes={GPU: 50})
    p.add_application("a", U, queue="root.child-cohort.cq")
    assert p.allocate("a", "a1", {GPU: 10})
    assert share(p, "root.child-cohort.cq").rounded() == 1000
    assert share(p, "root.child-cohort").rounded() == 200


def test_slightly_above_nominal_rounds_up_and_zero_weight_is_max() -> None:
    """S-ex4: 1 of 1500 is 0.67 per mille, reported 1 (ceil); with weight 0 a borrower's share is
    infinite, reported MaxInt64 (KQ-S2, KQ-S3)."""
    queues = f"""
    - name: cq
      resources: {{guaranteed: {{{GPU}: 500}}}}
      properties: {{fairsharing.weight: "WEIGHT"}}
    - name: lender
      resources: {{guaranteed: {{{GPU}: 1000}}}}
    """
    p, _ = partition(queues.replace("WEIGHT", "1"), nodes={GPU: 1500})
    p.add_application("a", U, queue="root.cq")
    assert p.allocate("a", "a1", {GPU: 501})
    s = share(p, "root.cq")
    assert math.isclose(s.ratio, 1000 / 1500) and s.rounded() == 1
    p, _ = partition(queues.replace("WEIGHT", "0"), nodes={GPU: 1500})
    p.add_application("a", U, queue="root.cq")
    assert p.allocate("a", "a1", {GPU: 500})
    assert share(p, "root.cq").rounded() == 0 and not share(p, "root.cq").infinite  # within nominal
    assert p.allocate("a", "a2", {GPU: 1})
    s = share(p, "root.cq")
    assert s.infinite and s.rounded() == MAX_INT64 and s.weighted == math.inf


def test_zero_weight_borrowers_compare_by_unweighted_ratio() -> None:
    """KQ-S2 ``CompareDRS``: two zero-weight borrowers compare by their unweighted ratios; either is
    above any finite share."""
    p, _ = partition("""
    - name: a
      properties: {fairsharing.weight: "0"}
    - name: b
      properties: {fairsharing.weight: "0"}
    - name: c
      properties: {fairsharing.weight: "0.001"}
    """, nodes={GPU: 100})
    for q in "abc":
        p.add_application(q, U, queue=f"root.{q}")
    assert p.allocate("a", "a1", {GPU: 2}) and p.allocate("b", "b1", {GPU: 1})
    assert p.allocate("c", "c1", {GPU: 50})
    a, b, c = (share(p, f"root.{q}") for q in "abc")
    assert c.weighted == 500 / 0.001
    assert b.key() < a.key() and c.key() < b.key()


def test_flavors_are_summed_per_resource() -> None:
    """KQ-S1: borrowed and lendable are summed over the flavors of a resource; the plain name of a
    resource counted per flavor is not counted again."""
    p, _ = partition(f"""
    - name: cq
      flavors: [a100, h100]
      resources: {{guaranteed: {{{GPU}@a100: 2, {GPU}@h100: 2}}}}
    """, nodes={GPU: 0}, extra="""    resourceflavors:
      - {name: a100, resources: [nvidia.com/gpu], nodelabels: {gpu: a100}}
      - {name: h100, resources: [nvidia.com/gpu], nodelabels: {gpu: h100}}
""")
    p.add_node("a", {GPU: 10}, labels={"gpu": "a100"})
    p.add_node("h", {GPU: 10}, labels={"gpu": "h100"})
    p.add_application("a", U, queue="root.cq")
    assert p.allocate("a", "a1", {f"{GPU}@a100": 5})
    assert p.allocate("a", "a2", {f"{GPU}@h100": 3})
    s = share(p, "root.cq")
    # borrowed 3 (a100) + 1 (h100) = 4 of 20 lendable GPUs: 200 per mille
    assert (s.ratio, s.resource) == (200.0, GPU)
    assert s.borrowed == frozenset({f"{GPU}@a100", f"{GPU}@h100"})


def test_standing_and_metric_show_the_weighted_share() -> None:
    """Issue item: a ``standing`` field and a metric for the weighted share (Kueue's
    ``status.fairSharing.weightedShare``)."""
    p, _ = partition(f"""
    - name: cq
      resources: {{guaranteed: {{{GPU}: 2}}}}
      properties: {{fairsharing.weight: "2"}}
    - name: other
    """, nodes={GPU: 10})
    p.add_application("a", U, queue="root.cq")
    assert p.allocate("a", "a1", {GPU: 5})
    assert p.standing("queue", "root.cq")["fairSharing"] == {
        "weightedShare": 150, "dominantResource": GPU, "weight": 2.0, "borrowing": True}
    assert p.standing("queue", "root.other")["fairSharing"]["weightedShare"] == 0
    assert p.queues.weighted_shares() == [("root.cq", 150), ("root.other", 0)]


def test_no_share_without_fair_sharing() -> None:
    p, _ = partition("- name: cq\n", nodes={GPU: 10}, fairsharing="{enabled: false}")
    assert p.queues.fair is None and p.queues.weighted_shares() == []
    assert "fairSharing" not in p.standing("queue", "root.cq")
