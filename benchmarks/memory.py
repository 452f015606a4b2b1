"""Memory benchmark of the user group manager (quality.md): 100,000 users tracked over 3 queues.

Every user has one running application in each of 3 leaf queues (``root.q0`` … ``root.q2``, so 4
tracker nodes per user: root and the three leaves), usage in 3 resource types, and belongs to one
of 100 groups that a named group limit selects, so group trackers are populated too. User and group
limits are configured at root and at the leaves.

Reported: the process RSS before and after (``/proc/self/statm``, falling back to
``resource.getrusage`` peak), the growth per user, and the target / goal (≤ 1 GiB / ≤ 300 MiB RSS).
Run: ``.venv/bin/python benchmarks/memory.py``. Writes ``benchmarks/results/memory.json``.
"""

from __future__ import annotations

import gc
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from _bench import write_results
from quotaplane.config.identity import UserGroup
from quotaplane.config.model import LimitConfig, PartitionConfig, QueueConfig
from quotaplane.resources import Resource
from quotaplane.ugm import Manager

USERS = 100_000
QUEUES = 3
GROUPS = 100
BIG = 10**15


def rss_bytes() -> int:
    """The current resident set size of this process."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # pragma: no cover - not Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def config() -> PartitionConfig:
    big = Resource({"vcore": BIG, "memory": BIG, "pods": BIG})
    group_names = tuple(f"g{i}" for i in range(GROUPS))
    lim = (
        LimitConfig(limit="groups", groups=group_names, max_resources=big, max_applications=10**9),
        LimitConfig(limit="users", users=("*",), max_resources=big, max_applications=10**9),
    )
    leaves = tuple(QueueConfig(name=f"q{i}", path=f"root.q{i}", limits=lim) for i in range(QUEUES))
    return PartitionConfig(name="default", root=QueueConfig(name="root", path="root", parent=True,
                                                              limits=lim, queues=leaves))


def main() -> None:
    gc.collect()
    before = rss_bytes()
    m = Manager()
    m.update_config(config())
    usage = Resource({"vcore": 1000, "memory": 2 << 30, "pods": 1})
    start = time.perf_counter()
    for i in range(USERS):
        user = UserGroup(f"user-{i:06d}", (f"g{i % GROUPS}",))
        for q in range(QUEUES):
            ok = m.increase_tracked_resource(f"root.q{q}", f"app-{i:06d}-{q}", usage, user)
            assert ok
    fill = time.perf_counter() - start
    gc.collect()
    after = rss_bytes()
    assert len(m.tracked_users()) == USERS
    results: dict[str, Any] = {
        "users": USERS,
        "queues": QUEUES,
        "groups": GROUPS,
        "rss_before_mib": round(before / 2**20, 1),
        "rss_after_mib": round(after / 2**20, 1),
        "rss_growth_mib": round((after - before) / 2**20, 1),
        "bytes_per_user": round((after - before) / USERS),
        "fill_seconds": round(fill, 2),
        "target_mib": 1024,
        "goal_mib": 300,
        "within_target": after <= 1024 * 2**20,
        "within_goal": after <= 300 * 2**20,
    }
    write_results("memory", results)


if __name__ == "__main__":
    main()
