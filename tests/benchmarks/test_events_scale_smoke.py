"""``benchmarks/events_scale.py`` at a tiny size (issue 38's event stream; no timing is asserted):
retained events in a SQLite store, a real service restoring it, subscribers resuming by id at the live
end each get every live event once and in order (the benchmark asserts it), and a reader resuming
further back gets exactly the retained allocations it asked for."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_events_benchmark_delivers_every_event_to_every_subscriber(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import _bench
        import events_scale
    finally:
        sys.path.remove(str(BENCH))
    monkeypatch.setattr(_bench, "RESULTS", tmp_path)
    out = events_scale.main(["--events", "3000", "--subscribers", "3", "--writes", "5", "--rate", "100",
                             "--resume", "2000"])
    assert out["retained_events"] >= 3000
    assert out["deliveries"] == 15
    assert out["resumed_allocations_read"] == 1000
    assert (tmp_path / "events_scale.json").exists()
