"""Every benchmark still imports against the current package (issue 38: ``benchmarks/preemption.py``
broke silently when the core was restructured). Importing runs nothing: each runs from ``main()``.
The benchmarks cheap enough to run are smoke-tested at a small size in their own files here."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
MODULES = sorted(p.stem for p in BENCH.glob("*.py"))


@pytest.mark.parametrize("name", MODULES)
def test_the_benchmark_imports(name: str) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        module = importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))
    assert name.startswith("_") or callable(getattr(module, "main", None)), f"{name} has no main()"
