"""The sibling-set calculator: reference §2.1 (two phases, hand-back), §2.2 (Hamilton, E1), §2.5 (scaling)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from quotaplane.elastic import hamilton_split, redistribute, scale_mins


def _half_up(pool: int, weights: list[int]) -> list[int]:
    """The legacy per-node rounding (int64(float64(w*R)/W + 0.5)) that E1 replaces."""
    total = sum(weights)
    return [int(w * pool / total + 0.5) for w in weights]


def test_seed_worked_example_runtime_5_20_35_40() -> None:
    """Seed 002 "Calculate RuntimeQuota": total 100, weights 60/50/80 → A 5, B 20, C 35, D 40."""
    # A lends 5 of its min 10; B, C, D borrow: 45 shared 14/12/19, B hands back 9 → C +3, D +6.
    got = redistribute(100, [10, 15, 20, 15], [5, 20, 50, 60], [100, 60, 50, 80], [True] * 4)
    assert got == [5, 20, 35, 40]


def test_seed_example_first_split_is_14_12_19() -> None:
    """Reference §2.2: pool 45, W 190 → 14 r40 / 11 r160 / 18 r180; residual 2 → D then C."""
    assert hamilton_split(45, [60, 50, 80]) == [14, 12, 19]
    assert hamilton_split(9, [50, 80]) == [3, 6]


def test_e1_three_units_over_ten_equal_borrowers_are_not_lost() -> None:
    """E1: half-up gives 0 to each of 10 equal borrowers of 3 units (3 lost); Hamilton hands out all 3."""
    assert _half_up(3, [1] * 10) == [0] * 10
    assert hamilton_split(3, [1] * 10) == [1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    rt = redistribute(3, [0] * 10, [5] * 10, [1] * 10, [True] * 10)
    assert sum(rt) == 3 and rt[:3] == [1, 1, 1]


def test_e1_two_units_over_three_equal_borrowers_not_overallocated() -> None:
    """E1: half-up gives 1 to each of 3 (3 > 2 units); Hamilton gives 1, 1, 0 (name order breaks ties)."""
    assert _half_up(2, [1, 1, 1]) == [1, 1, 1]
    assert hamilton_split(2, [1, 1, 1]) == [1, 1, 0]
    assert redistribute(2, [0, 0, 0], [9, 9, 9], [1, 1, 1], [True] * 3) == [1, 1, 0]


def test_e1_largest_remainder_not_nearest() -> None:
    """E1: 1 unit over weights 45/45/10: exact 0.45/0.45/0.1 → half-up 0/0/0, Hamilton 1 to the first."""
    assert _half_up(1, [45, 45, 10]) == [0, 0, 0]
    assert hamilton_split(1, [45, 45, 10]) == [1, 0, 0]


def test_e1_residual_goes_to_largest_remainder_not_largest_weight() -> None:
    """E1: pool 10 over 6/3/1 (W 10) exact; pool 7 → 4.2/2.1/0.7 → 4, 2, 1 (remainder 0.7 wins)."""
    assert hamilton_split(7, [6, 3, 1]) == [4, 2, 1]
    # half-up would give 4, 2, 1 as well here, but for pool 5: 3.0/1.5/0.5 → half-up 3, 2, 1 = 6 > 5
    assert _half_up(5, [6, 3, 1]) == [3, 2, 1]
    assert hamilton_split(5, [6, 3, 1]) == [3, 2, 0]  # remainders 0/0.5/0.5 → tie → the earlier name


def test_hamilton_is_exact_for_huge_weights() -> None:
    """E1: exact integer arithmetic (no float64): MaxInt64/5 weights still sum to the pool."""
    big = (2**63 - 1) // 5
    out = hamilton_split(10**18 + 7, [big, big - 1, 3])
    assert sum(out) == 10**18 + 7


def test_weight_zero_borrower_gets_only_its_min_and_leftover_is_unassigned() -> None:
    """§2.1: weight-0 borrowers never get more than their floor; with no positive weight the rest stays."""
    assert redistribute(100, [10, 10], [50, 50], [0, 0], [True, True]) == [10, 10]
    assert redistribute(100, [10, 10], [50, 50], [0, 1], [True, True]) == [10, 50]


def test_phase_one_lender_gets_request_and_nonlender_keeps_min() -> None:
    """§2.1 / §2.6: request ≤ min → request if it lends, the whole min if allow-lent is false."""
    assert redistribute(100, [30, 0], [5, 100], [1, 1], [True, True]) == [5, 95]
    assert redistribute(100, [30, 0], [5, 100], [1, 1], [False, True]) == [30, 70]


def test_everyone_satisfied_leaves_capacity_unassigned() -> None:
    """§2.1: when every request is met the rest of the total is not handed out."""
    assert redistribute(100, [0, 0], [10, 20], [1, 1], [True, True]) == [10, 20]


def test_iterative_hand_back_over_several_rounds() -> None:
    """§2.1: excess of clamped borrowers is re-split among the still hungry until nobody is clamped."""
    # pool 90 over 3 equal weights: 30 each; A needs 5, B needs 20 → excess 25+10=35 → C gets all.
    assert redistribute(90, [0, 0, 0], [5, 20, 100], [1, 1, 1], [True] * 3) == [5, 20, 65]


def test_request_below_min_is_granted_even_beyond_total() -> None:
    """§2.1 consequence: requests ≤ min are granted unconditionally at calculator level."""
    assert redistribute(10, [20, 20], [15, 15], [1, 1], [True, True]) == [15, 15]


def test_scale_mins_floors_proportionally_only_when_sum_exceeds_total() -> None:
    """§2.5 / E3: min_i → floor(T·min_i/Σmin) when Σmin > T, unchanged otherwise, 0 when T ≤ 0."""
    assert scale_mins(100, [40, 60]) == [40, 60]
    assert scale_mins(50, [40, 40]) == [25, 25]
    assert scale_mins(8, [3, 3, 3]) == [2, 2, 2]
    assert scale_mins(0, [3, 3]) == [0, 0]
    assert scale_mins(-5, [3, 3]) == [0, 0]


def _reference(total: int, mins: list[int], reqs: list[int], weights: list[int],
               lends: list[bool]) -> list[int]:
    """Reference §2.1/§2.2 pseudo-code transcribed literally (recursive iterate, full sort)."""
    rt = [0] * len(mins)
    borrowers: list[int] = []
    to_partition = total
    for i, (m, r) in enumerate(zip(mins, reqs, strict=True)):
        if r > m:
            rt[i] = m
            borrowers.append(i)
        else:
            rt[i] = r if lends[i] else m
        to_partition -= rt[i]

    def iterate(pool: int, nodes: list[int]) -> None:
        w_sum = sum(weights[i] for i in nodes)
        if w_sum <= 0 or pool <= 0 or not nodes:
            return
        delta = {i: 0 for i in nodes}
        rems = []
        for i in nodes:
            if weights[i] > 0:
                delta[i], rem = divmod(weights[i] * pool, w_sum)
                rems.append((-rem, i))
        residual = pool - sum(delta.values())
        for _, i in sorted(rems)[:residual]:
            delta[i] += 1
        hungry, excess = [], 0
        for i in nodes:
            rt[i] += delta[i]
            if rt[i] < reqs[i]:
                hungry.append(i)
            else:
                excess += rt[i] - reqs[i]
                rt[i] = reqs[i]
        if excess > 0 and hungry:
            iterate(excess, hungry)

    if to_partition > 0:
        iterate(to_partition, borrowers)
    return rt


@settings(max_examples=300, deadline=None)
@given(st.integers(-20, 400), st.lists(st.tuples(st.integers(0, 60), st.integers(0, 120), st.integers(0, 9),
                                                  st.booleans()), max_size=12))
def test_optimised_calculator_equals_reference_pseudo_code(total: int,
                                                           kids: list[tuple[int, int, int, bool]]) -> None:
    """The fast loops (zip, nsmallest, rem-0 skipping) give exactly the reference's numbers."""
    mins = [k[0] for k in kids]
    reqs = [k[1] for k in kids]
    weights = [k[2] for k in kids]
    lends = [k[3] for k in kids]
    assert redistribute(total, mins, reqs, weights, lends) == _reference(total, mins, reqs, weights, lends)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.lists(st.integers(0, 10**4), min_size=1, max_size=40))
def test_hamilton_split_sums_to_pool_and_is_within_one_of_exact(pool: int, weights: list[int]) -> None:
    out = hamilton_split(pool, weights)
    w_sum = sum(weights)
    if w_sum == 0:
        assert out == [0] * len(weights)
        return
    assert sum(out) == pool
    for share, w in zip(out, weights, strict=True):
        assert w * pool // w_sum <= share <= w * pool // w_sum + 1
