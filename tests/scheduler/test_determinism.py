"""Determinism across processes (product.md: the same events give the same state, byte for byte, on
every run): a child process with one hash seed writes a journal and its dump_state; this process,
with another hash seed, restores the journal and must produce the identical canonical JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from quotaplane.cluster import Scheduler
from tests.partition.helpers import CONFIG

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys
from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.cluster import Scheduler
from tests.partition.helpers import CONFIG, Clock
s = Scheduler.from_yaml(CONFIG, store=sys.argv[1], clock=Clock(), snapshot_every=7)
p = s.partition("default")
p.add_node("n1", Resource({"vcore": 90000, "memory": 900, "nvidia.com/gpu": 4}))
users = [UserGroup("alice", ["dev", "ops", "qa"]), UserGroup("bob", ["ops", "dev"]), UserGroup("zed", ["x"])]
for i in range(12):
    p.add_application(f"app{i}", users[i % 3], queue=["root.a", "root.default"][i % 2],
                      tags={"namespace": f"ns{i % 4}", "z": "1", "a": "2"})
for i in range(40):
    p.allocate(f"app{i % 12}", f"k{i}", Resource({"vcore": 100 + i, "memory": i % 7}),
               placeholder=i % 5 == 0, task_group="g" if i % 5 == 0 else None)
for i in range(0, 40, 3):
    if p.allocation(f"k{i}") is not None:
        p.release(f"k{i}")
s.update_config(CONFIG.replace("max: {vcore: 20}", "max: {vcore: 21}"))
p.check_timeouts(p.clock() + 10_000)
print(json.dumps(s.dump_state(), sort_keys=True))
s.close(snapshot=False)
"""


def test_dump_state_is_identical_across_processes_and_hash_seeds(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/det.db"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", CHILD, url], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    child_dump = out.strip().splitlines()[-1]
    assert os.environ.get("PYTHONHASHSEED") != "12345"
    s = Scheduler.from_yaml(CONFIG.replace("max: {vcore: 20}", "max: {vcore: 21}"), store=url)
    try:
        assert json.dumps(s.dump_state(), sort_keys=True) == child_dump
        assert s.restored_from == {"default": "snapshot"}
    finally:
        s.close(snapshot=False)
