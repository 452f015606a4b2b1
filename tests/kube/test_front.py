"""The Kubernetes front end to end on the kmock emulator (issue 16): gating, admission in quota order,
reasons, completion, preemption, gangs, restart, the config map."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

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
      resources: {max: {vcore: 2}}
"""


@pytest.fixture
def front() -> Iterator[Front]:
    f = Front(Scheduler.from_yaml(CONFIG))
    f.namespace("team-a")
    f.node(node("n1"))
    f.start()
    yield f
    f.close()


def test_pods_are_gated_admitted_in_quota_order_and_ungated(front: Front) -> None:
    for i in range(3):
        obj = front.submit(pod(f"p{i}"))
        assert obj["spec"]["schedulingGates"] == [{"name": "quotaplane.io/admission"}]
    front.wait(lambda: not front.gated("p0") and not front.gated("p1"))
    assert front.gated("p2")
    p0 = front.get_pod("p0")
    assert p0 is not None
    assert p0["metadata"]["annotations"]["quotaplane.io/allocation"] == "uid-team-a-p0"
    assert '"user":"alice"' in p0["metadata"]["annotations"]["yunikorn.apache.org/user.info"]
    app = front.scheduler.partition("default").application("team-a/p0")
    assert app is not None and app.queue_path == "root.team-a" and app.user.user == "alice"


def test_a_waiting_pod_says_why_and_a_finished_pod_admits_the_next(front: Front) -> None:
    for i in range(3):
        front.submit(pod(f"p{i}"))

    def condition() -> dict[str, Any] | None:
        p = front.get_pod("p2")
        for c in (p or {}).get("status", {}).get("conditions", []):
            if c.get("type") == "QuotaAdmitted":
                return dict(c)
        return None
    c = front.wait(condition)
    assert c["status"] == "False" and "queue.max at root.team-a" in c["message"]
    assert any(e["reason"] == "QuotaWaiting" and "queue.max" in e["message"] for e in front.events())
    front.set_phase("p0", "Succeeded")
    front.wait(lambda: not front.gated("p2"))
    assert front.scheduler.partition("default").allocation("uid-team-a-p0") is None
