"""``benchmarks/kube_shapes.py`` at a tiny size (issue 38 item 4; no timing is asserted): Kueue-shaped
gated pods in cohorts of queues go through the Kubernetes front against the emulator, every one is
admitted (ungated) and the figures are computed."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_kube_shapes_benchmark_admits_every_pod_at_a_tiny_size() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import kube_shapes
    finally:
        sys.path.remove(str(BENCH))
    tiny = kube_shapes.Shape("tiny", 2, 3, ((2, 1, 50), (1, 5, 100), (1, 20, 200)), 43.0)
    out = kube_shapes.run(tiny)
    assert out["workloads"] == tiny.workloads == 24
    assert out["queues"] == 6 and out["cohorts"] == 2
    assert out["front_cpu_us_per_pod"] > 0 and out["mean_seconds_to_admission"] > 0
    assert out["mean_seconds_to_admission"] <= out["seconds_to_admit_all"]
