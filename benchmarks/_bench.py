"""Shared helpers for the benchmark scripts: timing and the JSON results file.

Benchmarks report **ratios against a baseline measured in the same process** (quality.md): the machine
is noisy, so absolute numbers are for the note, ratios are what we compare.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def best_of(fn: Callable[[], Any], repeat: int = 5) -> float:
    """The smallest wall time in seconds of ``repeat`` calls of ``fn``."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def write_results(name: str, results: dict[str, Any]) -> Path:
    """Write ``benchmarks/results/<name>.json`` with the figures and machine info; print a summary."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": name,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "results": results,
    }
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    print(json.dumps(results, indent=2, sort_keys=True))
    return path
