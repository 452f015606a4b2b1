"""``benchmarks/preemption_scale.py`` at a tiny size (no timing is asserted): one cycle preempts exactly
the three one-core allocations the 3-core ask needs and allocates it."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_preemption_scale_benchmark_preempts_three_for_the_ask() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import preemption_scale
    finally:
        sys.path.remove(str(BENCH))
    out = preemption_scale.run(2)
    assert out["running_allocations"] == 2000
    assert out["preempted"] == 3
