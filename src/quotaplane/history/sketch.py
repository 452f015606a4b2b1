"""Wait-time distributions kept in bounded space: an integer log-linear histogram.

A wait is a whole number of milliseconds. Waits below 128 ms are kept exactly; a longer wait ``v``
is kept in the bucket of its top seven bits (``v >> s`` with ``s = v.bit_length() - 7``), so the
bucket's middle is within 1/128 (0.8 %) of every value in it. The bucket of a value is computed
with integers only, so every instance and every replay puts a value in the same bucket, and two
histograms merge exactly by adding counts (rollups merge minute buckets into hours, days, …).

The quantile rule is nearest rank: the p-quantile of n waits is the smallest wait w such that at
least ``ceil(p·n)`` waits are ≤ w. The histogram answers the middle of w's bucket, capped by the
exact maximum, so it is within 0.8 % of the exact nearest-rank quantile (exact below 128 ms).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from quotaplane.errors import InputError

__all__ = ["EXACT_BELOW", "WaitSketch", "bucket_low", "bucket_of", "bucket_value"]

#: waits below this many milliseconds are kept exactly
EXACT_BELOW = 128
_BITS = 7


def bucket_of(ms: int) -> int:
    """The bucket key of a wait of ``ms`` milliseconds (monotone in ``ms``)."""
    if ms < EXACT_BELOW:
        return ms
    shift = ms.bit_length() - _BITS
    return (shift << _BITS) | (ms >> shift)


def bucket_value(key: int) -> int:
    """The value a bucket stands for: its middle (the value itself below :data:`EXACT_BELOW`)."""
    if key < EXACT_BELOW:
        return key
    shift, top = key >> _BITS, key & (EXACT_BELOW - 1)
    low = top << shift
    return low + ((1 << shift) - 1) // 2


def bucket_low(key: int) -> int:
    """The least ``ms`` whose bucket is ``key`` (``bucket_of(ms) >= key`` exactly from it on)."""
    if key < EXACT_BELOW:
        return key
    return (key & (EXACT_BELOW - 1)) << (key >> _BITS)


class WaitSketch:
    """Count, sum, maximum and the histogram of a set of waits (milliseconds)."""

    __slots__ = ("count", "hist", "max", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0
        self.max = 0
        self.hist: dict[int, int] = {}

    def add(self, ms: int) -> None:
        """Count one wait of ``ms`` milliseconds (≥ 0)."""
        self.count += 1
        self.total += ms
        if ms > self.max:
            self.max = ms
        key = bucket_of(ms)
        self.hist[key] = self.hist.get(key, 0) + 1

    def merge(self, other: WaitSketch) -> None:
        """Add every wait of ``other`` (exact: counts add)."""
        if not other.count:
            return
        self.count += other.count
        self.total += other.total
        if other.max > self.max:
            self.max = other.max
        hist = self.hist
        for key, n in other.hist.items():
            hist[key] = hist.get(key, 0) + n

    def quantile(self, p: Fraction | float | str) -> int | None:
        """The nearest-rank ``p``-quantile (0 < p ≤ 1) in milliseconds; None without waits."""
        if not self.count:
            return None
        q = Fraction(repr(p)) if isinstance(p, float) else Fraction(p)    # 0.9 is 9/10, not 0.9000…02
        if not 0 < q <= 1:
            raise InputError(f"a quantile must be in (0, 1], got {p!r}")
        rank = max(1, -(-q.numerator * self.count // q.denominator))
        seen = 0
        for key in sorted(self.hist):
            seen += self.hist[key]
            if seen >= rank:
                return min(bucket_value(key), self.max)
        return self.max  # pragma: no cover - counts always reach the rank

    def to_json(self) -> dict[str, object]:
        """Plain JSON: ``{"n", "sum", "max", "h": {key: count}}``."""
        return {"n": self.count, "sum": self.total, "max": self.max,
                "h": {str(k): v for k, v in sorted(self.hist.items())}}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> WaitSketch:
        """The sketch :meth:`to_json` wrote."""
        out = cls()
        out.count = int(data.get("n", 0))  # type: ignore[call-overload]
        out.total = int(data.get("sum", 0))  # type: ignore[call-overload]
        out.max = int(data.get("max", 0))  # type: ignore[call-overload]
        hist = data.get("h") or {}
        if isinstance(hist, Mapping):
            out.hist = {int(k): int(v) for k, v in hist.items()}
        return out

    @classmethod
    def of(cls, waits: Iterable[int]) -> WaitSketch:
        """A sketch of ``waits``."""
        out = cls()
        for w in waits:
            out.add(w)
        return out
