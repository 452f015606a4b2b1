"""Partitions with Kueue's fair sharing on, written as YuniKorn queue trees (docs/fair-sharing.md)."""

from __future__ import annotations

import textwrap

from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.partition import Partition
from quotaplane.queues.fair import Share
from quotaplane.scheduler import Scheduler
from tests.partition.helpers import Clock

U = UserGroup("u")
GPU = "nvidia.com/gpu"


def partition(queues: str, *, nodes: dict[str, int], fairsharing: str = "{enabled: true}",
              extra: str = "") -> tuple[Partition, Clock]:
    """A partition with ``queues`` (YAML below root, indented as a list), fair sharing on and one node of
    ``nodes`` (whose size is the root cohort's total)."""
    body = textwrap.indent(textwrap.dedent(queues).strip("\n"), " " * 10)
    text = f"""
partitions:
  - name: default
    fairsharing: {fairsharing}
{extra}    queues:
      - name: root
        submitacl: "*"
        queues:
{body}
"""
    clock = Clock()
    s = Scheduler.from_yaml(text, store=MemoryJournal(), clock=clock)
    p = s.partition("default")
    p.add_node("n", nodes)
    return p, clock


def share(p: Partition, path: str) -> Share:
    """The dominant resource share of queue ``path`` now."""
    fair = p.queues.fair
    q = p.queues.queue(path)
    assert fair is not None and q is not None
    return fair.share(q)
