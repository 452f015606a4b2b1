"""``benchmarks/scale.py`` at a tiny size (issue 38: the suite runs it as a smoke test; no timing is
asserted): every section runs, its bookkeeping holds (a release frees exactly one waiting ask, a restart
restores the same state, every Kueue-shaped workload is admitted, in-process and as pods through the
Kubernetes front), and the results file is written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_scale_benchmark_runs_at_a_tiny_size(tmp_path: Path, monkeypatch: object) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import _bench
        import scale
    finally:
        sys.path.remove(str(BENCH))
    monkeypatch.setattr(_bench, "RESULTS", tmp_path)  # type: ignore[attr-defined]
    out = scale.main(["--scale", "0.002", "--samples", "12", "--out", "scale-smoke"])
    steps = out["waiting"]["steps"]
    assert [s["pending"] for s in steps] == sorted(s["pending"] for s in steps)
    assert steps[-1]["pending"] > steps[0]["pending"]
    assert {"1x", "10x", "100x", "growth_1x_to_100x"} <= set(out["decisions"])
    assert out["restart"]["tail_events"] > 0
    # the restart stored and reopened the state the other sections shared (not a second one built)
    assert out["restart"]["shared_state"] and out["restart"]["pending"] == out["shared"]["pending"]
    assert "build" not in out["restart"]["parts_cpu_s"]
    # the memory section counted the waiting section's asks (the state they share), traced the first ones
    assert out["memory"]["pending_asks"] == steps[-1]["pending"]
    assert out["memory"]["measured_by"] == "heap"
    assert 0 < out["memory"]["pending_asks_traced"] <= steps[-1]["pending"]
    # the in-memory journal's compressed texts: a few bytes per ask, 0 when rounded at this size
    assert out["memory"]["bytes_per_pending_ask"] >= out["memory"]["state_bytes_per_pending_ask"] > 0
    assert out["memory"]["journal_bytes_per_pending_ask"] >= 0
    assert {"build", "waiting", "decisions", "restart", "kueue", "kube", "total"} <= set(out["section_cost"])
    assert all(len(c["load"]) == 2 for name, c in out["section_cost"].items() if name != "total")
    for shape in out["kueue"].values():
        assert shape["workloads"] > 0
    # the Kubernetes front admitted (ungated) every pod of both shapes, or kube_shapes.run raised
    assert set(out["kube"]) == {"baseline", "large-scale"}
    assert all(shape["workloads"] > 0 and shape["mean_seconds_to_admission"] > 0
               for shape in out["kube"].values())
    served = scale.main(["--scale", "0.002", "--samples", "8", "--only", "service", "--out", "scale-svc"])
    assert served["service"]["steps"][-1]["pending"] > served["service"]["steps"][0]["pending"]
    # large enough to keep the sections' leaves apart: the decisions' 100x partition is the shared state
    both = scale.main(["--scale", "0.02", "--samples", "8", "--pending", "400", "--only", "waiting,decisions",
                       "--out", "shared"])
    assert both["decisions"]["100x_is_shared_state"]
    assert both["decisions"]["100x"]["leaf_queues"] == both["waiting"]["leaf_queues"]
    alone = scale.main(["--scale", "0.002", "--only", "memory", "--out", "memory"])["memory"]
    assert alone["pending_asks_traced"] > 0 and alone["state_bytes_per_pending_ask"] > 0
    pauses = scale.main(["--scale", "0.002", "--only", "gc", "--pending-gc", "300", "--out", "gc"])["gc"]
    assert pauses["pending"] >= 300
    assert {"full_collection_before", "full_collection_after_settle"} <= set(pauses)
    written = json.loads((tmp_path / "scale-smoke.json").read_text())
    assert written["results"]["scale"] == 0.002
