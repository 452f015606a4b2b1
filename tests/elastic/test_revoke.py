"""Over-use reclaim (reference §4, decision E5) with an injected clock."""

from __future__ import annotations

from quotaplane.elastic import ElasticQuotaManager

V = "vcore"
M = "memory"


def overused(delay: float = 120.0) -> ElasticQuotaManager:
    """a borrowed b's idle min; then b asks for it back → a is over its runtime."""
    e = ElasticQuotaManager({V: 100, M: 100}, revoke_delay=delay)
    e.upsert("a", min={V: 50, M: 50}, max={V: 100, M: 100})
    e.upsert("b", min={V: 50, M: 50}, max={V: 100, M: 100})
    return e


def test_e5_revoke_waits_for_the_delay_strictly() -> None:
    """E5: used > runtime must hold continuously for more than the delay (strictly greater)."""
    e = overused()
    e.add_pod("a", "a1", {V: 60}, assigned=True, start_time=1)
    assert e.revoke(0.0) == []                       # first seen: the clock starts
    e.add_pod("b", "b1", {V: 50})                    # b wants its min back → a's runtime 50 < used 60
    assert e.runtime("a")[V] == 50
    assert e.revoke(60.0) == []
    assert e.revoke(120.0) == []                     # exactly the delay: not yet
    assert e.revoke(120.5) == ["a1"]
    assert e.revoke(121.0) == []                     # the clock restarted at the trigger


def test_e5_clock_restarts_when_quota_fits_again() -> None:
    e = overused(delay=10)
    e.add_pod("a", "a1", {V: 60}, assigned=True)
    e.add_pod("b", "b1", {V: 50})
    assert e.revoke(0.0) == []
    assert e.revoke(8.0) == []
    e.remove_pod("b1")                               # a fits again at t=9
    assert e.revoke(9.0) == []
    e.add_pod("b", "b2", {V: 50})
    assert e.revoke(15.0) == []                      # only 6 s over since t=9
    assert e.revoke(19.5) == ["a1"]


def test_e5_victim_order_priority_then_newest_then_id() -> None:
    """E5: lowest priority first, newest first on ties, then pod id; returned in eviction order."""
    e = overused(delay=0)
    e.add_pod("a", "hi", {V: 20}, priority=10, assigned=True, start_time=0)
    e.add_pod("a", "lo-old", {V: 20}, priority=1, assigned=True, start_time=1)
    e.add_pod("a", "lo-new-b", {V: 20}, priority=1, assigned=True, start_time=5)
    e.add_pod("a", "lo-new-a", {V: 20}, priority=1, assigned=True, start_time=5)
    e.add_pod("b", "b1", {V: 50})
    assert e.runtime("a")[V] == 50 and e.used("a")[V] == 80
    e.revoke(0.0)
    # remove lo-new-a, lo-new-b (used 40 ≤ 50): both needed, evicted in that order
    assert e.revoke(1.0) == ["lo-new-a", "lo-new-b"]


def test_e5_non_preemptible_pods_are_skipped() -> None:
    e = overused(delay=0)
    e.add_pod("a", "np", {V: 30}, priority=0, preemptible=False, assigned=True)
    e.add_pod("a", "p", {V: 30}, priority=5, assigned=True)
    e.add_pod("b", "b1", {V: 50})
    e.revoke(0.0)
    assert e.revoke(1.0) == ["p"]


def test_e5_removed_pods_that_still_fit_are_added_back() -> None:
    """E5 / §4: after removing until used fits, the removed pods are re-added most important first."""
    e = overused(delay=0)
    e.add_pod("a", "big", {V: 40}, priority=5, assigned=True)
    e.add_pod("a", "small", {V: 5}, priority=1, assigned=True)
    e.add_pod("a", "tiny", {V: 10}, priority=3, assigned=True)
    e.add_pod("b", "b1", {V: 50})                    # a: runtime 50, used 55
    e.revoke(0.0)
    # removal order: small (50 ≤ 50 → stop); add back small: 55 > 50 → evicted
    assert e.revoke(1.0) == ["small"]
    e2 = overused(delay=0)
    e2.add_pod("a", "big", {V: 45}, priority=5, assigned=True)
    e2.add_pod("a", "s1", {V: 3}, priority=1, assigned=True)
    e2.add_pod("a", "s2", {V: 9}, priority=2, assigned=True)
    e2.add_pod("b", "b1", {V: 50})                   # used 57 > 50: remove s1 (54), s2 (45) → fits
    e2.revoke(0.0)
    # add back most important first: s2 → 54 > 50 evicted; s1 → 48 ≤ 50 kept
    assert e2.revoke(1.0) == ["s2"]


def test_e5_every_dimension_is_compared() -> None:
    """E5 fixes the upstream quirk: removing a cpu-only pod must not hide an over-used memory."""
    e = overused(delay=0)
    e.add_pod("a", "mem-hog", {M: 60}, priority=5, assigned=True)
    e.add_pod("a", "cpu-only", {V: 10}, priority=1, assigned=True)
    e.add_pod("b", "b1", {M: 50})
    assert e.runtime("a")[M] == 50
    e.revoke(0.0)
    # upstream would stop after cpu-only (memory dropped from the comparison) and evict it only
    assert e.revoke(1.0) == ["mem-hog"]


def test_e5_not_enough_even_after_all_preemptible() -> None:
    """§4: if removing every preemptible pod is not enough, all of them are evicted."""
    e = overused(delay=0)
    e.add_pod("a", "np", {V: 60}, preemptible=False, assigned=True)
    e.add_pod("a", "p1", {V: 5}, priority=1, assigned=True)
    e.add_pod("a", "p2", {V: 5}, priority=2, assigned=True)
    e.add_pod("b", "b1", {V: 50})
    e.revoke(0.0)
    assert e.revoke(1.0) == ["p1", "p2"]


def test_revoke_does_not_remove_pods_and_covers_quotas_in_name_order() -> None:
    e = ElasticQuotaManager({V: 100}, revoke_delay=0)
    for name in ("z", "m", "b"):
        e.upsert(name, min={V: 30}, max={V: 100})
    e.add_pod("z", "z1", {V: 40}, assigned=True)
    e.add_pod("m", "m1", {V: 40}, assigned=True)
    e.add_pod("b", "b1", {V: 30})
    e.set_total({V: 60})
    e.revoke(0.0)
    victims = e.revoke(1.0)
    assert victims == ["m1", "z1"]
    assert e.has_pod("m1") and e.has_pod("z1")
