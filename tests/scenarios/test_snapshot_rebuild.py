"""Snapshot restore after a gang placeholder is replaced across a tightening reload (S1).

Found by this review (tests/scheduler/test_state_machine.py, saved example): the real allocation took
the config in force at replacement, so the snapshot's rebuild re-admitted its whole amount under the
tighter limits, was refused and fell back to a full replay. A replacement that asks for nothing more
than its placeholder keeps the placeholder's admission config.
"""

from __future__ import annotations

import quotaplane as qp
from quotaplane.journal import MemoryJournal
from tests.partition.helpers import Clock
from tests.scenarios.world import ALICE, CONFIG, canon, config, tags

TIGHT = config("""
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      resources:
        max: {vcore: 6}
      limits:
      - limit: alice
        users: [alice]
        maxresources: {vcore: 1}
    - name: b
    - name: c
""")


def test_replaced_placeholder_is_rebuilt_from_the_snapshot_after_a_tightening_reload() -> None:
    journal, clock = MemoryJournal(), Clock()
    s = qp.Scheduler.from_yaml(CONFIG, store=journal, clock=clock)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 12000}))
    p.add_application("al", ALICE, queue="root.a", tags=tags("team-a", "A"))
    assert p.allocate("al", "k1", qp.Resource({"vcore": 2000})).allocated
    assert p.allocate("al", "ph", qp.Resource({"vcore": 1000}), placeholder=True, task_group="tg").allocated
    s.update_config(TIGHT)                     # alice: 3000 used, limit now 1000 (U6: accepted)
    assert not p.allocate("al", "k2", qp.Resource({"vcore": 1})).allocated
    d = p.replace_placeholder("ph", "real", qp.Resource({"vcore": 1000}))
    assert d.allocated
    s.snapshot()
    again = qp.Scheduler.from_yaml(TIGHT, store=journal, clock=clock)
    assert again.restored_from == {"default": "snapshot"}
    assert canon(again) == canon(s)
