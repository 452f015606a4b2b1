"""``benchmarks/flavors.py`` at a small size (no timing is asserted): every section runs, the 4-flavor
searches land on the flavor they should, the fair-sharing decision finds its 3 victims, and each release
of the incremental case admits one ask."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_flavors_benchmark_runs_small(tmp_path: Path, monkeypatch: object) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import _bench
        import flavors
    finally:
        sys.path.remove(str(BENCH))
    monkeypatch.setattr(_bench, "RESULTS", tmp_path)  # type: ignore[attr-defined]
    out = flavors.main(["--small"])
    assert set(out["flavor_choice"]) >= {"ratio_four_first_vs_one", "ratio_four_last_vs_one"}
    assert out["fair_preemption"]["fair"]["allocations"] == 200
    assert out["fair_incremental"]["waiting"] == 100
    assert out["flavored_heads"]["waiting"] == 20
    assert (tmp_path / "flavors-small.json").exists()
