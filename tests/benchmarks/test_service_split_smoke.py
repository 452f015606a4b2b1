"""``benchmarks/service.py``'s in-process split at a tiny size (issue 38 item 3; no timing is asserted):
allocations and releases through the ASGI app and through the partition alone all succeed (the
benchmark asserts each answer's status), so do they with a client peer between them, and every
figure is computed."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_service_split_runs_small() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import service
    finally:
        sys.path.remove(str(BENCH))
    out = service.cpu_split(20)
    assert out["requests_each"] == 20
    # the peer's penalty is a difference of CPU times: any sign at this size
    assert "peer_penalty_allocate_us" in out
    assert all(out[k] > 0 for k in out if k.endswith("_us") and k != "peer_penalty_allocate_us")
