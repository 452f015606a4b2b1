"""A snapshot restore keeps the admission order of the allocations (``Partition.allocations()``) that
a full replay gives — also for a placeholder replaced after a config reload. Defect: the real
allocation (admitted under the placeholder's config when it asked for nothing more) was rebuilt in
that config's group, ahead of the allocations admitted after the reload, where the live partition
and a replay have it last."""

from __future__ import annotations

from pathlib import Path

import pytest

from quotaplane.config.identity import UserGroup
from quotaplane.resources import Resource
from quotaplane.scheduler import Scheduler
from tests.partition.helpers import Clock

C1 = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      resources: {max: {vcore: 10000}}
"""


def _keys(s: Scheduler) -> list[str]:
    return [a.allocation_key for a in s.partition("default").allocations()]


@pytest.mark.parametrize("grow", [False, True])
def test_a_placeholder_replaced_after_a_reload_keeps_its_place_on_restore(tmp_path: Path, grow: bool) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    c2 = C1.replace("10000", "9000")
    clock = Clock(1000.0)
    s = Scheduler.from_yaml(C1, store=store, clock=clock, snapshot_every=0)
    p = s.partition("default")
    p.add_node("n1", {"vcore": 100_000})
    p.add_application("g", UserGroup("bob", ()), queue="root.a")
    p.allocate("g", "ph1", Resource({"vcore": 1000}), placeholder=True, task_group="tg")
    p.allocate("g", "ph2", Resource({"vcore": 1000}), placeholder=True, task_group="tg")
    clock.advance(1)
    s.update_config(c2)
    p.add_application("o", UserGroup("al", ()), queue="root.a")
    p.allocate("o", "k3", Resource({"vcore": 1000}))
    clock.advance(1)
    assert p.replace_placeholder("ph1", "r1", Resource({"vcore": 1500 if grow else 1000})).allocated
    live = _keys(s)
    assert live == ["ph2", "k3", "r1"]
    p.take_snapshot()
    s.close(snapshot=False)
    restored = Scheduler.from_yaml(c2, store=store, clock=clock)
    assert restored.restored_from["default"] == "snapshot"
    assert _keys(restored) == live
    restored.close(snapshot=False)
