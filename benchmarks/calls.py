"""Function calls per admission decision: how much Python one allocation runs, admitted and refused.

Counted with ``cProfile`` (deterministic, unlike time) on the README's configuration: one allocation that
every policy admits, one that the user limit refuses (the README tour's 9-vcore request) and one release,
each measured on a warm partition. The admitted count is the baseline of the refused one (same run).
The same three are counted again with the usage history switched off (``history: {enabled: false}``):
the difference is what the history's accounting costs per decision (docs/throughput.md).
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


def _count(config: str) -> tuple[int, int, int]:
    s = qp.Scheduler.from_yaml(config)
    p = s.partition("default")
    p.add_node("node-1", qp.Resource({"vcore": 64000, "memory": 256 * 2**30}))
    sue = qp.UserGroup("sue", ["engineering", "development"])
    p.add_application("app-1", sue, queue="root.engineering.sandbox")
    p.allocate("app-1", "warm", qp.Resource({"vcore": 100}))
    p.release("warm")
    p.allocate("app-1", "held", qp.Resource({"vcore": 100}))
    admitted = _calls(lambda: p.allocate("app-1", "a1", qp.Resource({"vcore": 1000})))
    refused = _calls(lambda: p.allocate("app-1", "a2", qp.Resource({"vcore": 9000})))
    released = _calls(lambda: p.release("held"))
    assert p.allocation("a1") is not None and p.allocation("a2") is None and p.allocation("held") is None
    return admitted, refused, released


def main() -> None:
    admitted, refused, released = _count(CONFIG)
    off = CONFIG.replace("  - name: default\n", "  - name: default\n    history: {enabled: false}\n", 1)
    assert off != CONFIG
    admitted_off, refused_off, released_off = _count(off)
    write_results("calls", {"admitted_calls": admitted, "refused_calls": refused, "released_calls": released,
                            "refused_over_admitted": round(refused / admitted, 2),
                            "history_off_admitted_calls": admitted_off,
                            "history_off_refused_calls": refused_off,
                            "history_off_released_calls": released_off})

if __name__ == "__main__":
    main()
