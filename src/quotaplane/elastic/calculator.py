"""The runtime-quota calculator for one sibling set and one resource dimension (reference §2.1, §2.2).

This is a pure function: given the parent total and, per child, its (possibly scaled) min, its limited
request, its shared weight and its allow-lent flag, it returns every child's runtime. The manager calls it
once per (parent, dimension); nothing here knows about trees, pods or caching.

Integer rules (decision E1): the share of a pool ``R`` among hungry borrowers is split by largest
remainder (Hamilton) in exact integer arithmetic — ``base_i, rem_i = divmod(w_i * R, W)``, the
``R - Σ base_i`` leftover units go one each to the largest remainders, ties by quota name ascending.
Callers pass the children **sorted by name**, so a stable sort on the remainder alone gives the name
tie-break for free.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

__all__ = ["hamilton_split", "redistribute", "scale_mins"]


def hamilton_split(pool: int, weights: Sequence[int]) -> list[int]:
    """Split ``pool`` units by ``weights`` with largest remainders (E1); index order breaks ties.

    Entries with weight ``<= 0`` get 0. The result sums to ``pool`` exactly when some weight is positive
    and ``pool >= 0``.
    """
    total_weight = 0
    for w in weights:
        if w > 0:
            total_weight += w
    out = [0] * len(weights)
    if total_weight <= 0 or pool <= 0:
        return out
    rems: list[int] = [0] * len(weights)
    residual = pool
    for i, w in enumerate(weights):
        if w > 0:
            base, rem = divmod(w * pool, total_weight)
            out[i] = base
            rems[i] = -rem
            residual -= base
    if residual:
        candidates = [i for i, w in enumerate(weights) if w > 0]
        for i in _top(candidates, rems, residual):
            out[i] += 1
    return out


def _top(candidates: list[int], neg_rems: list[int], count: int) -> list[int]:
    """The first ``count`` candidates by remainder descending, candidate order ascending on ties."""
    key = neg_rems.__getitem__
    if count * 8 < len(candidates):
        # heapq.nsmallest is documented as equal to sorted(...)[:n], stability included.
        return heapq.nsmallest(count, candidates, key=key)
    return sorted(candidates, key=key)[:count]


def scale_mins(total: int, mins: list[int]) -> list[int]:
    """Min scaling for one dimension (reference §2.5, decision E3).

    When the children's mins sum to more than ``total``, every min becomes
    ``floor(total * min_i / Σ min)`` (0 when ``total <= 0``). Exact integer arithmetic replaces upstream's
    float64 truncation; the two agree whenever the product fits in 53 bits.
    """
    s = 0
    for m in mins:
        s += m
    if total >= s:
        return mins
    if total <= 0:
        return [0] * len(mins)
    return [total * m // s for m in mins]


def redistribute(total: int, mins: Sequence[int], requests: Sequence[int], weights: Sequence[int],
                 lends: Sequence[bool]) -> list[int]:
    """Runtime per child for one dimension of one sibling set (reference §2.1).

    Phase one: a child whose request exceeds its min gets its min and borrows; otherwise it gets its
    request (it lends the rest), or its whole min when it does not lend. Phase two, only when the parent
    total minus phase one is positive: the rest is split among borrowers by weight (``hamilton_split``);
    whoever would exceed its request is clamped and the excess is split again among the still hungry.
    Leftover capacity stays unassigned. Children must be in name order (E1 tie-break).
    """
    n = len(mins)
    rt = [0] * n
    borrowers: list[int] = []
    weight_sum = 0
    to_partition = total
    for i, (m, r, lend) in enumerate(zip(mins, requests, lends, strict=True)):
        if r > m:
            rt[i] = m
            borrowers.append(i)
            weight_sum += weights[i]
            to_partition -= m
        elif lend:
            rt[i] = r
            to_partition -= r
        else:
            rt[i] = m
            to_partition -= m
    pool = to_partition
    nodes = borrowers
    # Each round either hands out the whole pool and stops, or clamps at least one node (≤ n rounds).
    while pool > 0 and weight_sum > 0 and nodes:
        residual = pool
        positive: list[int] = []
        neg_rems: dict[int, int] = {}
        for i in nodes:
            w = weights[i]
            if w > 0:
                base, rem = divmod(w * pool, weight_sum)
                rt[i] += base
                residual -= base
                if rem:
                    # Σ rem = residual·W with every rem < W, so more than `residual` nodes have rem > 0:
                    # the winners are always among them.
                    positive.append(i)
                    neg_rems[i] = -rem
        if residual:
            key = neg_rems.__getitem__
            if residual * 8 < len(positive):
                winners = heapq.nsmallest(residual, positive, key=key)
            else:
                winners = sorted(positive, key=key)[:residual]
            for i in winners:
                rt[i] += 1
        hungry: list[int] = []
        excess = 0
        next_weight = 0
        for i in nodes:
            r = requests[i]
            x = rt[i]
            if x < r:
                hungry.append(i)
                next_weight += weights[i]
            else:
                excess += x - r
                rt[i] = r
        if not hungry:
            break
        pool = excess
        weight_sum = next_weight
        nodes = hungry
    return rt
