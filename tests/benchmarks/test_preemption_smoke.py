"""``benchmarks/preemption.py`` at a small size (no timing is asserted): the victim search finds the three
one-core allocations the 3-core ask needs, the planned decision agrees, and the reclaim tick finds victims
when every elastic quota is due."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_preemption_benchmark_runs_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import _bench
        import preemption
    finally:
        sys.path.remove(str(BENCH))
    monkeypatch.setattr(_bench, "RESULTS", tmp_path)
    for name in ("PARENTS", "LEAVES", "QUOTAS", "REPEAT"):    # --small rebinds them: restore after
        monkeypatch.setattr(preemption, name, getattr(preemption, name))
    out = preemption.main(["--small"])
    assert out["victim_search"]["allocations"] == 2 * 5 * 10
    assert out["reclaim_tick"]["victims_when_all_due"] > 0
    assert (tmp_path / "preemption-small.json").exists()
