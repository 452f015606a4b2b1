"""History counts a flavored queue's borrowing per flavored resource, as ``standing`` does (commit
c1fe60a): the plain ``nvidia.com/gpu`` (the sum of its flavors, not guaranteed itself) borrows only
what its flavors borrow — training holding 8 A100s against 8 guaranteed borrows nothing. Found trying
examples/gpu-flavors.yaml as a new user: history's borrowed integral said 8 GPUs the whole time."""

from __future__ import annotations

from pathlib import Path

from quotaplane.history.engine import QUEUE, ms_of
from quotaplane.scheduler import Scheduler
from tests.history.helpers import BruteForce, engine_integrals, user
from tests.partition.helpers import Clock

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gpu-flavors.yaml"


def test_a_flavored_queue_borrows_per_flavor_in_history_as_in_standing() -> None:
    clock = Clock(1_764_000_000.0)
    s = Scheduler.from_yaml(EXAMPLE.read_text(), clock=clock, snapshot_every=0)
    p = s.partition("default")
    for node, product in (("a1", "NVIDIA-A100-SXM4-80GB"), ("h1", "NVIDIA-H100-80GB-HBM3"),
                          ("a2", "NVIDIA-A100-SXM4-80GB")):
        p.add_node(node, {"nvidia.com/gpu": 8}, labels={"nvidia.com/gpu.product": product})
    brute = BruteForce(p)
    p.add_application("t", user("alice"), queue="root.training")
    p.add_application("i", user("bob"), queue="root.inference")
    brute.step()
    for key, app, n in (("k1", "t", 4), ("k2", "t", 4), ("h", "i", 1)):
        clock.advance(60)
        assert p.allocate(app, key, {"nvidia.com/gpu": n}).allocated
        brute.step()
    clock.advance(600)                  # within its A100 guarantee: borrows nothing
    brute.step()
    assert p.allocate("t", "k3", {"nvidia.com/gpu": 2}).flavors == {"nvidia.com/gpu": "a100"}
    brute.step()
    clock.advance(300)                  # 2 A100s above its guarantee: borrows 2 (plain and flavored)
    brute.step()
    p.release("k3")
    brute.step()
    s.update_config(EXAMPLE.read_text().replace("guaranteed: {nvidia.com/gpu@a100: 8}",
                                                "guaranteed: {nvidia.com/gpu@a100: 6}"))
    brute.step()                        # a config change recomputes every scope's borrowing
    clock.advance(120)
    end = ms_of(clock())
    got, want = engine_integrals(p, end), brute.at(end)
    assert got.get((QUEUE, "root.training", "borrowed")) == want.get((QUEUE, "root.training", "borrowed"))
    assert got == want
    s.close()
