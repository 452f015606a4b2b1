"""What is left of issue 31 (the Kubernetes front against a real API server): a preemption must not free
quota that is still in use, and a blocked eviction never lets the cluster's admitted pods exceed its
capacity — on every path (quota trees, a restart of the front, a preemption given up, a synchronous
REST allocate) — and the allocations say which pods they are. Each test failed before its fix."""

from __future__ import annotations

import threading
import time
from typing import Any

from quotaplane.cluster import Scheduler
from quotaplane.kube.api import RetryPolicy
from quotaplane.kube.controller import ControllerOptions
from tests.kube.emulator import Emulator
from tests.kube.harness import Front, node, pod

FAST = RetryPolicy(attempts=3, base=0.01, max_delay=0.05)

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


# -- 1. a quota tree's preemption holds its victims until they are gone -------------------------------
QST = "/apis/quota.codeflare.dev/v1alpha1/namespaces/kube-system/quotasubtrees"
TREES = """
partitions:
- name: default
  placementrules:
  - name: tag
    value: namespace
    create: true
  queues:
  - name: root
    submitacl: '*'
"""


def _subtree(name: str, parent: str, children: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {"children": children}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": "quota.codeflare.dev/v1alpha1", "kind": "QuotaSubtree",
            "metadata": {"name": name, "namespace": "kube-system", "labels": {"tree": "quota_context"}},
            "spec": spec}


class _Peak:
    """The most cores running or about to start at once, sampled from the API server's store while a
    test runs (across restarts of the front: the emulator stays)."""

    def __init__(self, f: Front) -> None:
        self.f, self.peak = f, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, _running(self.f))
            self.stop.wait(0.02)

    def close(self) -> int:
        self.stop.set()
        self.thread.join(5)
        return self.peak


def _pods(f: Front) -> list[dict[str, Any]]:
    return list(f.emulator.objects("pods"))


def _running(f: Front) -> int:
    """Cores of the pods that run or may start: ungated and not ended (1 core each)."""
    return sum(1 for p in _pods(f) if not p["spec"].get("schedulingGates")
               and p["status"].get("phase") not in ("Succeeded", "Failed"))


def _tree_front() -> Front:
    """MCAD's quota tree from QuotaSubtrees: context-root 4 cores; gold (hard) 2, bronze (soft) 1.
    Bronze borrows the root's room (3 pods), gold takes one core, then a second gold pod is within
    gold's quota and preempts a bronze borrower (MCAD). A budget keeps every bronze pod."""
    e = Emulator(kubelet=True, graceful=True).start()
    f = Front(Scheduler.from_yaml(TREES), emulator=e, retry=FAST,
              options=ControllerOptions(reasons_every=0.05, retry_base=0.02, retry_max=0.1,
                                        resync_every=0.2))
    f.namespace("team-a")
    f.node(node("n1", cpu="8"))
    f.create(QST, _subtree("context-root", "", [
        {"name": "context-root", "quotas": {"requests": {"cpu": "4"}}}]))
    f.create(QST, _subtree("context-root-children", "context-root", [
        {"name": "gold", "quotas": {"hardLimit": True, "requests": {"cpu": "2"}}},
        {"name": "bronze", "quotas": {"hardLimit": False, "requests": {"cpu": "1"}}}]))
    f.start()
    f.wait(lambda: "quota_context" in f.scheduler.config_text)
    for i in range(3):
        f.submit(pod(f"b{i}", labels={"quota_context": "bronze", "app": "bronze"}))
    f.wait(lambda: not any(f.gated(f"b{i}") for i in range(3)))
    f.submit(pod("g0", labels={"quota_context": "gold"}))
    f.wait(lambda: not f.gated("g0"))
    f.create("/apis/policy/v1/namespaces/team-a/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "bronze"},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "bronze"}}}})
    return f


def _tree_used(f: Front) -> int:
    forest = f.scheduler.partition("default").policies()[-1]
    return int(forest.manager.node_allocated("quota_context", "context-root").get("cpu", 0))


def test_1_a_quota_trees_preemption_keeps_the_victim_charged_until_it_is_gone() -> None:
    f = _tree_front()
    peak = _Peak(f)
    try:
        f.submit(pod("g1", labels={"quota_context": "gold"}))
        controller = f.controller
        assert controller is not None
        f.wait(lambda: controller.stats.evictions["blocked"] >= 3, timeout=20)
        p = f.scheduler.partition("default")
        (victim,) = p.preempting()
        assert victim.startswith("uid-team-a-b") and p.allocation(victim) is not None
        assert f.gated("g1") and _running(f) == 4 and _tree_used(f) == 4000
        assert f.emulator.evictions == []
        f.wait(lambda: [e for e in f.events() if e["reason"] == "EvictionBlocked"])
        assert p.preempting()[victim]["reason"]["code"] == "forest.preempted"
        # the budget allows it now: evicted, terminating and still charged until the kubelet is done
        r = f.kubectl.patch("/apis/policy/v1/namespaces/team-a/poddisruptionbudgets/bronze",
                            json={"spec": {"minAvailable": 2}},
                            headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200
        f.wait(lambda: len(f.emulator.evictions) == 1)
        (_, name), = f.emulator.evictions
        f.wait(lambda: (f.get_pod(name) or {}).get("metadata", {}).get("deletionTimestamp"))
        time.sleep(0.3)
        assert f.gated("g1") and _tree_used(f) == 4000
        f.emulator.finish("team-a", name)
        f.wait(lambda: not f.gated("g1"))
        assert _running(f) == 4 and _tree_used(f) == 4000 and p.preempting() == {}
        assert peak.close() == 4                # the tree's 4 cores, never more, all along
    finally:
        peak.close()
        f.close()


# -- 4. a synchronous REST allocate preempts in hold mode too, and waits for its victims ---------------
def test_4_a_rest_allocate_that_needs_preemption_holds_its_victims_and_waits_for_them() -> None:
    """The leader serves REST on the front's partition. A synchronous allocate that fits only by
    preempting is answered 409 (not allocated now) naming the victims it is waiting for; they are held
    (charged while their eviction is refused) and the request waits as an ask, allocated once they
    are gone — never over the tree's quota."""
    from fastapi.testclient import TestClient

    from quotaplane.server.app import create_app

    f = _tree_front()
    try:
        rest = TestClient(create_app(f.scheduler))
        r = rest.post("/ws/v1/partition/default/applications", json={
            "applicationID": "svc", "user": "carol", "groups": ["dev"],
            "tags": {"namespace": "svc", "quotaplane.io/tree.quota_context": "gold"}})
        assert r.status_code == 201, r.text
        r = rest.post("/ws/v1/partition/default/allocations", json={
            "applicationID": "svc", "allocationKey": "svc-0", "resource": {"vcore": 1000}})
        assert r.status_code == 409, r.text
        body = r.json()
        assert body["allocated"] is False and [v["code"] for v in body["reasons"]] == ["forest.quota"]
        (victim,) = body["preempted"]
        p = f.scheduler.partition("default")
        assert sorted(p.preempting()) == [victim] and p.allocation(victim) is not None
        assert p.get_ask("svc-0") is not None and _tree_used(f) == 4000
        controller = f.controller
        assert controller is not None
        f.wait(lambda: controller.stats.evictions["blocked"] >= 2, timeout=20)
        assert p.allocation("svc-0") is None and _tree_used(f) == 4000
        # the same request again while it waits: nothing more is preempted, nothing counted twice
        again = rest.post("/ws/v1/partition/default/allocations", json={
            "applicationID": "svc", "allocationKey": "svc-0", "resource": {"vcore": 1000}})
        assert again.status_code == 409 and sorted(p.preempting()) == [victim]
        r = f.kubectl.patch("/apis/policy/v1/namespaces/team-a/poddisruptionbudgets/bronze",
                            json={"spec": {"minAvailable": 2}},
                            headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200
        f.wait(lambda: len(f.emulator.evictions) == 1)
        (_, name), = f.emulator.evictions
        f.wait(lambda: (f.get_pod(name) or {}).get("metadata", {}).get("deletionTimestamp"))
        assert p.allocation("svc-0") is None and _tree_used(f) == 4000
        f.emulator.finish("team-a", name)
        f.wait(lambda: p.allocation("svc-0") is not None)
        assert _tree_used(f) == 4000 and p.preempting() == {} and p.get_ask("svc-0") is None
    finally:
        f.close()


# -- 3. a preemption given up never picks the same victim again ---------------------------------------
GUARANTEES = """
partitions:
- name: default
  placementrules:
  - name: tag
    value: namespace
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: team-a
      resources: {guaranteed: {vcore: 1}}
    - name: team-b
      resources: {guaranteed: {vcore: 2}}
      properties: {preemption.delay: 1s}
"""


def test_3_a_victim_whose_preemption_was_given_up_is_not_picked_again() -> None:
    """YuniKorn preemption for team-b's guarantee on a full 4-core node: newest victims first, but a
    budget keeps team-a's two newest pods. Each refused victim is given up after eviction_timeout and
    never picked again: the next preemption takes the next victim, until the oldest (unprotected) pod
    is evicted and team-b's pod starts. Never more than the node runs."""
    e = Emulator(kubelet=True, graceful=True).start()
    f = Front(Scheduler.from_yaml(GUARANTEES), emulator=e, retry=FAST,
              options=ControllerOptions(reasons_every=0.05, timeouts_every=0.1, retry_base=0.02,
                                        retry_max=0.1, resync_every=0.2, eviction_timeout=0.5))
    try:
        f.namespace("team-a")
        f.namespace("team-b")
        f.node(node("n1", cpu="4"))
        f.start()
        for name, labels in (("a0", {}), ("a1", {"app": "web"}), ("a2", {"app": "web"})):
            f.submit(pod(name, "team-a", labels=labels))
            f.wait(lambda name=name: not f.gated(name, "team-a"))     # a2 is the newest
            time.sleep(0.05)
        f.submit(pod("b0", "team-b"))
        f.wait(lambda: not f.gated("b0", "team-b"))
        f.create("/apis/policy/v1/namespaces/team-a/poddisruptionbudgets", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
        f.submit(pod("b1", "team-b"))
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while not f.emulator.evictions and time.monotonic() < deadline:
            seen.append(_running(f))
            time.sleep(0.02)
        assert f.emulator.evictions == [("team-a", "a0")]

        def given_up() -> list[str]:
            return sorted(e["involvedObject"]["name"] for e in f.events("team-a")
                          if e["reason"] == "PreemptionAbandoned")
        f.wait(lambda: len(given_up()) >= 2)            # the Events are written after the decisions
        assert given_up() == ["a1", "a2"], given_up()  # each once, then the next victim
        f.wait(lambda: (f.get_pod("a0", "team-a") or {}).get("metadata", {}).get("deletionTimestamp"))
        assert f.gated("b1", "team-b")                                # a0 still runs while it ends
        f.emulator.finish("team-a", "a0")
        f.wait(lambda: not f.gated("b1", "team-b"))
        assert max(seen) <= 4 and _running(f) == 4
    finally:
        f.close()


# -- 2. held preemptions survive a restart of the front ----------------------------------------------
def _seed_002(store: str, eviction_timeout: float = 300.0, emulator: Emulator | None = None) -> Front:
    from tests.preemption.helpers import seed_002_config

    config = seed_002_config(revoke_delay=1).replace(
        "  queues:\n  - name: root", "  placementrules:\n  - name: tag\n    value: namespace\n"
        "    create: true\n  queues:\n  - name: root")
    e = emulator or Emulator(kubelet=True, graceful=True).start()
    return Front(Scheduler.from_yaml(config, store=store), emulator=e, retry=FAST,
                 options=ControllerOptions(reasons_every=0.05, timeouts_every=0.2, retry_base=0.02,
                                           retry_max=0.1, resync_every=0.2,
                                           eviction_timeout=eviction_timeout))


def _restarted(f: Front, store: str, eviction_timeout: float = 300.0) -> Front:
    """The front stopped (the process gone: the scheduler closed) and started again on its store."""
    f.stop()
    f.scheduler.close()
    g = _seed_002(store, eviction_timeout, emulator=f.emulator)
    g.start()
    return g


def _blocked_reclaim(store: str, eviction_timeout: float = 300.0) -> Front:
    """Seed 002 on the front: team-a borrows 7 of 8 cores under a budget that keeps all of them; team-b's
    4 waiting pods make the reclaim hold 4 victims whose evictions the budget refuses."""
    f = _seed_002(store, eviction_timeout)
    f.namespace("team-a")
    f.namespace("team-b")
    f.node(node("n1", cpu="8"))
    f.start()
    for i in range(7):
        f.submit(pod(f"a{i}", "team-a", labels={"app": "web"}))
    f.submit(pod("b0", "team-b"))
    f.wait(lambda: _running(f) == 8)
    f.create("/apis/policy/v1/namespaces/team-a/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 7, "selector": {"matchLabels": {"app": "web"}}}})
    for i in range(1, 5):
        f.submit(pod(f"b{i}", "team-b"))
    controller = f.controller
    assert controller is not None
    f.wait(lambda: len(controller.stats.blocked) == 4, timeout=20)
    return f


def test_2_held_preemptions_survive_a_restart_of_the_front(tmp_path: Any) -> None:
    """Rebuilt from the pods: a victim's QuotaAdmitted=False/Preempted condition (written before its
    eviction was asked for) holds it again as the front starts, before any waiting pod is looked at,
    with the preemption's reason and its time — so nothing is decided again and its eviction goes on."""
    store = f"sqlite:///{tmp_path / 'state.db'}"
    f = _blocked_reclaim(store)
    g: Front | None = None
    peak = _Peak(f)
    try:
        before = f.scheduler.partition("default").preempting()
        g = _restarted(f, store)
        p = g.scheduler.partition("default")
        after = p.preempting()                  # at once: the front is synced, no timeout ran yet
        assert sorted(after) == sorted(before)
        assert {k: v["reason"]["code"] for k, v in after.items()} == \
            {k: v["reason"]["code"] for k, v in before.items()}
        controller = g.controller
        assert controller is not None
        f.wait(lambda: len(controller.stats.blocked) == 4, timeout=20)
        assert sorted(p.preempting()) == sorted(before) and _running(g) == 8
        assert all(g.gated(f"b{i}", "team-b") for i in range(1, 5))
        assert peak.close() == 8                # through the restart: never more than the node
    finally:
        peak.close()
        if g is not None:
            g.stop()
            g.scheduler.close()
        f.close()


def test_2_3_a_preemption_given_up_stays_given_up_after_a_restart(tmp_path: Any) -> None:
    """A victim whose preemption was given up says so (QuotaAdmitted=True, reason PreemptionAbandoned);
    a restarted front reads it and never takes that victim again: the over-use monitor's rounds after
    the restart pick others (team-a's 3 remaining pods), never those."""
    store = f"sqlite:///{tmp_path / 'state.db'}"
    f = _blocked_reclaim(store, eviction_timeout=0.5)
    g: Front | None = None
    try:
        controller = f.controller
        assert controller is not None
        f.wait(lambda: controller.stats.evictions["abandoned"] >= 4, timeout=20)
        given_up = sorted(f.scheduler.partition("default").spared())
        assert len(given_up) == 4
        names = [k.removeprefix("uid-team-a-") for k in given_up]
        f.wait(lambda: all(condition(f, n).get("reason") == "PreemptionAbandoned" for n in names))
        assert all(c["status"] == "True" for c in (condition(f, n) for n in names))
        g = _restarted(f, store)                # the others it picks then stay held (300 s)
        p = g.scheduler.partition("default")
        assert p.spared() == given_up
        g.wait(lambda: len(p.preempting()) == 3, timeout=20)     # the reclaim's next round: others
        assert not set(p.preempting()) & set(given_up) and set(given_up) <= set(p.spared())
        assert _running(g) == 8 and all(g.gated(f"b{i}", "team-b") for i in range(1, 5))
    finally:
        if g is not None:
            g.stop()
            g.scheduler.close()
        f.close()


def condition(f: Front, name: str, ns: str = "team-a") -> dict[str, Any]:
    for c in (f.get_pod(name, ns) or {}).get("status", {}).get("conditions", []):
        if c.get("type") == "QuotaAdmitted":
            return dict(c)
    return {}


def test_2_a_front_whose_journal_was_lost_adopts_and_holds_its_victims_again(tmp_path: Any) -> None:
    """The store lost (the front starts on an empty one): the running pods are adopted from their
    admitted mark, and the victims whose condition says Preempted are adopted and held again before any
    waiting pod is looked at — so they stay charged and their evictions go on; never over the node."""
    f = _blocked_reclaim(f"sqlite:///{tmp_path / 'state.db'}")
    g: Front | None = None
    peak = _Peak(f)
    try:
        before = sorted(f.scheduler.partition("default").preempting())
        g = _restarted(f, f"sqlite:///{tmp_path / 'other.db'}")
        p = g.scheduler.partition("default")
        assert sorted(p.preempting()) == before
        assert all(p.allocation(k) is not None for k in before)
        controller = g.controller
        assert controller is not None
        g.wait(lambda: len(controller.stats.blocked) == 4, timeout=20)
        assert all(g.gated(f"b{i}", "team-b") for i in range(1, 5))
        assert int(p.queues.queue("root").allocated.get("vcore")) == 8000
        assert peak.close() == 8
    finally:
        peak.close()
        if g is not None:
            g.stop()
            g.scheduler.close()
        f.close()
