"""The sibling-set calculator: reference §2.1 (two phases, hand-back), §2.2 (Hamilton, E1), §2.5 (scaling)."""

from __future__ import annotations

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
