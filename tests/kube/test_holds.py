"""What is left of issue 31 (the Kubernetes front against a real API server): a preemption must not free
quota that is still in use, and a blocked eviction never lets the cluster's admitted pods exceed its
capacity — on every path (quota trees, a restart of the front, a preemption given up, a synchronous
REST allocate) — and the allocations say which pods they are. Each test failed before its fix."""

from __future__ import annotations

from quotaplane.scheduler import Scheduler
from tests.kube.harness import Front, node, pod

CONFIG = """
partitions:
- name: default
  placementrules:
  - name: tag
    value: namespace
    create: true
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: team-a
      resources: {max: {vcore: 3}}
"""


def test_a_gangs_real_allocations_say_which_pods_they_are() -> None:
    """YuniKorn's shim tags every ask with its pod (yunikorn-web shows them): the real allocation that
    replaces a gang's placeholder carries its pod's tags, not none."""
    f = Front(Scheduler.from_yaml(CONFIG))
    try:
        f.namespace("team-a")
        f.node(node("n1"))
        f.start()
        groups = '[{"name": "workers", "minMember": 2, "minResource": {"cpu": "1"}}]'
        gang = {"yunikorn.apache.org/task-groups": groups, "yunikorn.apache.org/task-group-name": "workers",
                "yunikorn.apache.org/app-id": "gang-1"}
        f.submit(pod("w0", annotations=dict(gang), labels={"role": "worker"}))
        f.submit(pod("w1", annotations=dict(gang), labels={"role": "worker"}))
        f.wait(lambda: not f.gated("w0") and not f.gated("w1"))
        p = f.scheduler.partition("default")
        for name in ("w0", "w1"):
            alloc = p.allocation(f"uid-team-a-{name}")
            assert alloc is not None and not alloc.placeholder
            assert alloc.tags == {"kubernetes.io/meta/namespace": "team-a",
                                  "kubernetes.io/meta/podName": name,
                                  "kubernetes.io/label/role": "worker"}
    finally:
        f.close()
