"""The Kubernetes front end to end on the kmock emulator (issue 16): gating, admission in quota order,
reasons, completion, preemption, gangs, restart, the config map."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from quotaplane.cluster import Scheduler
from quotaplane.kube.controller import ControllerOptions
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
    # YuniKorn's allocation tags (the shim's CreateTagsForTask): yunikorn-web shows the pod's name
    alloc = front.scheduler.partition("default").allocation("uid-team-a-p0")
    assert alloc is not None and alloc.tags == {"kubernetes.io/meta/namespace": "team-a",
                                                "kubernetes.io/meta/podName": "p0"}


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
    # the Event follows the condition (one API call after the other): wait for it too
    front.wait(lambda: any(e["reason"] == "QuotaWaiting" and "queue.max" in e["message"]
                           for e in front.events()))
    front.set_phase("p0", "Succeeded")
    front.wait(lambda: not front.gated("p2"))
    assert front.scheduler.partition("default").allocation("uid-team-a-p0") is None


def test_seed_002_reclaim_evicts_the_borrowers_pod_and_admits_the_other_team() -> None:
    """Seed 002 "Min Guarantee and Preemption" on pods: team-a borrows the idle cluster, team-b's
    pods arrive; after revokeDelay team-a's borrowed pods are evicted (Eviction API, with the reason
    in a DisruptionTarget condition and an Event) and team-b's are admitted."""
    from tests.preemption.helpers import seed_002_config

    config = seed_002_config(revoke_delay=1).replace(
        "  queues:\n  - name: root", "  placementrules:\n  - name: tag\n    value: namespace\n"
        "    create: true\n  queues:\n  - name: root")
    f = Front(Scheduler.from_yaml(config), options=ControllerOptions(reasons_every=0.05, timeouts_every=0.2))
    try:
        f.namespace("team-a")
        f.namespace("team-b")
        f.node(node("n1", cpu="8"))
        f.start()
        for i in range(7):
            f.submit(pod(f"a{i}", "team-a"))
        f.submit(pod("b0", "team-b"))
        f.wait(lambda: not any(f.gated(f"a{i}", "team-a") for i in range(7)) and not f.gated("b0", "team-b"))
        for i in range(1, 5):
            f.submit(pod(f"b{i}", "team-b"))
        f.wait(lambda: not any(f.gated(f"b{i}", "team-b") for i in range(1, 5)), timeout=20)
        # the engine frees the quota when it preempts: team-b's pods may be ungated before the
        # controller's evictions (condition, Event, then Eviction) reach the API server
        f.wait(lambda: len([n for ns, n in f.emulator.evictions if ns == "team-a"]) >= 4)
        evicted = [name for ns, name in f.emulator.evictions if ns == "team-a"]
        assert len(evicted) == 4, f.emulator.evictions    # team-a's runtime is 3 of its 7
        # the emulator records an eviction before its DELETE of the pod completes
        f.wait(lambda: all(f.get_pod(name, "team-a") is None for name in evicted))
        # the Preempted Event is said once the Eviction API took the eviction
        events = f.wait(lambda: [e for e in f.events("team-a") if e["reason"] == "Preempted"] if len(
            [e for e in f.events("team-a") if e["reason"] == "Preempted"]) == 4 else None)
        assert {e["involvedObject"]["name"] for e in events} == set(evicted)
        assert all("elastic.revoked" in e["message"] for e in events)
        p = f.scheduler.partition("default")
        assert sum(1 for a in p.allocations() if a.application_id.startswith("team-a/")) == 3
    finally:
        f.close()


def test_a_gang_is_admitted_whole_or_not_at_all() -> None:
    """YuniKorn task groups: the gang's placeholders hold its minimum; no pod of the gang is ungated
    until the whole minimum was admitted, then all of them are."""
    config = CONFIG.replace("resources: {max: {vcore: 2}}", "resources: {max: {vcore: 3}}")
    f = Front(Scheduler.from_yaml(config))
    try:
        f.namespace("team-a")
        f.node(node("n1"))
        f.start()
        f.submit(pod("other", cpu="2"))
        f.wait(lambda: not f.gated("other"))
        groups = '[{"name": "workers", "minMember": 2, "minResource": {"cpu": "1"}}]'
        gang = {"yunikorn.apache.org/task-groups": groups, "yunikorn.apache.org/task-group-name": "workers",
                "yunikorn.apache.org/app-id": "gang-1"}
        f.submit(pod("w0", annotations=dict(gang)))
        f.submit(pod("w1", annotations=dict(gang)))
        import time
        time.sleep(0.5)
        assert f.gated("w0") and f.gated("w1")              # one of the two fits: neither starts
        f.delete_pod("other")
        f.wait(lambda: not f.gated("w0") and not f.gated("w1"))
        p = f.scheduler.partition("default")
        assert {a.allocation_key for a in p.allocations()} == {"uid-team-a-w0", "uid-team-a-w1"}
    finally:
        f.close()


def test_a_controller_restart_counts_nothing_twice(tmp_path: Any) -> None:
    """Stop the controller, change the cluster while it is away (a pod finishes, a pod is deleted, a new
    one arrives), start a new controller on the same store: usage is exactly the running pods."""
    store = f"sqlite:///{tmp_path}/state.db"
    f = Front(Scheduler.from_yaml(CONFIG, store=store))
    try:
        f.namespace("team-a")
        f.node(node("n1"))
        f.start()
        for i in range(3):
            f.submit(pod(f"p{i}"))
        f.wait(lambda: not f.gated("p0") and not f.gated("p1"))
        f.stop()
        f.scheduler.close()
        f.set_phase("p0", "Succeeded")
        f.delete_pod("p2")
        f.submit(pod("p3"))
        g = Front(Scheduler.from_yaml(CONFIG, store=store), emulator=f.emulator)
        g.start()
        g.wait(lambda: not g.gated("p3"))
        p = g.scheduler.partition("default")
        assert sorted(a.allocation_key for a in p.allocations()) == ["uid-team-a-p1", "uid-team-a-p3"]
        assert p.pending() == []
        assert p.queues.queue("root.team-a").allocated.get("vcore") == 2000
        g.stop()
        g.scheduler.close()
    finally:
        f.close()


def _patch(front: Front, path: str, body: dict[str, Any]) -> None:
    r = front.kubectl.patch(path, json=body, headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text


def test_bound_pods_name_their_node_cordon_keeps_them_and_node_deletion_releases_them(front: Front) -> None:
    """Reference §5.2/§5.3: the scheduler binds an admitted pod (spec.nodeName): its allocation names
    the node. A cordoned node keeps counting its pods and leaves the capacity; a deleted node's pods
    are released (YuniKorn's removeNode), which admits the next waiting pod."""
    p = front.scheduler.partition("default")
    front.node(node("n2"))
    front.wait(lambda: "n2" in p.nodes())
    for i in range(3):
        front.submit(pod(f"p{i}"))
    front.wait(lambda: not front.gated("p0") and not front.gated("p1"))
    front.bind("p0", "n1")
    front.bind("p1", "n2")
    front.wait(lambda: [a.allocation_key for a in p.node_allocations("n2")] == ["uid-team-a-p1"])
    front.wait(lambda: [a.allocation_key for a in p.node_allocations("n1")] == ["uid-team-a-p0"])
    _patch(front, "/api/v1/nodes/n1", {"spec": {"unschedulable": True}})
    front.wait(lambda: not p.node_schedulable("n1"))
    assert p.allocation("uid-team-a-p0") is not None          # cordon: the running pod still counts
    assert p.total_capacity().get("vcore") == 8000
    _patch(front, "/api/v1/nodes/n1", {"spec": {"unschedulable": False}})
    front.wait(lambda: p.node_schedulable("n1"))
    r = front.kubectl.delete("/api/v1/nodes/n2")
    assert r.status_code == 200, r.text
    front.wait(lambda: "n2" not in p.nodes())
    assert p.allocation("uid-team-a-p1") is None              # released with its node
    front.wait(lambda: not front.gated("p2"))                 # and its quota admits the next pod
