"""Function calls per admission decision: how much Python one allocation runs, admitted and refused.

Counted with ``cProfile`` (deterministic, unlike time) on the README's configuration: one allocation that
every policy admits, and one that the user limit refuses (the README tour's 9-vcore request), each
measured on a warm partition. The admitted count is the baseline of the refused one (same run).
"""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import quotaplane as qp
from _bench import write_results

CONFIG = (Path(__file__).resolve().parents[1] / "examples" / "queues.yaml").read_text()


def _calls(fn: object) -> int:
    prof = cProfile.Profile()
    prof.runcall(fn)  # type: ignore[arg-type]
    stats = pstats.Stats(prof)
    return int(stats.total_calls)  # type: ignore[attr-defined]


def main() -> None:
    s = qp.Scheduler.from_yaml(CONFIG)
    p = s.partition("default")
    p.add_node("node-1", qp.Resource({"vcore": 64000, "memory": 256 * 2**30}))
    sue = qp.UserGroup("sue", ["engineering", "development"])
    p.add_application("app-1", sue, queue="root.engineering.sandbox")
    p.allocate("app-1", "warm", qp.Resource({"vcore": 100}))
    p.release("warm")
    p.allocate("app-1", "held", qp.Resource({"vcore": 100}))
    admitted = _calls(lambda: p.allocate("app-1", "a1", qp.Resource({"vcore": 1000})))
    refused = _calls(lambda: p.allocate("app-1", "a2", qp.Resource({"vcore": 9000})))
    assert p.allocation("a1") is not None and p.allocation("a2") is None
    write_results("calls", {"admitted_calls": admitted, "refused_calls": refused,
                            "refused_over_admitted": round(refused / admitted, 2)})


if __name__ == "__main__":
    main()
