"""Issue 31: the front against what a real API server does and kmock alone did not show — each test
failed on the front before its fix (the emulator reproduces the server's behaviour: emulator.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from quotaplane.cluster import Scheduler
from quotaplane.kube.api import KubeApi, RetryPolicy, client_config
from quotaplane.kube.controller import ControllerOptions
from quotaplane.kube.http import NamespaceCache
from tests.kube.emulator import Emulator, Faults
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
#: quick retries: the policy and the per-pod backoff are the production ones, only shorter
FAST = RetryPolicy(attempts=3, base=0.01, max_delay=0.05)
QUICK = ControllerOptions(reasons_every=0.05, retry_base=0.02, retry_max=0.1, resync_every=0.2)


@pytest.fixture
def front() -> Iterator[Front]:
    f = Front(Scheduler.from_yaml(CONFIG), options=QUICK, retry=FAST)
    f.namespace("team-a")
    f.node(node("n1"))
    f.start()
    yield f
    f.close()


def condition(f: Front, name: str, kind: str = "QuotaAdmitted", ns: str = "team-a") -> dict[str, Any]:
    for c in (f.get_pod(name, ns) or {}).get("status", {}).get("conditions", []):
        if c.get("type") == kind:
            return dict(c)
    return {}


def test_1_the_first_start_waits_out_a_crd_whose_storage_initialises() -> None:
    """A CRD just installed answers 429 "storage is (re)initializing" with Retry-After: the front
    waits (honouring it) instead of exiting, and then reads the custom resources."""
    e = Emulator().start()
    f = Front(Scheduler.from_yaml(CONFIG), emulator=e, options=QUICK, retry=FAST)
    try:
        f.namespace("team-a")
        f.node(node("n1"))
        e.initializing("elasticquotas", 4)       # more than one call's attempts: the sync keeps trying
        e.initializing("quotasubtrees", 2)
        f.start()
        assert f.controller is not None and not f.controller._absent
        assert e.call(lambda: e.state.initializing) == {"elasticquotas": 0, "quotasubtrees": 0}
        f.submit(pod("p0"))
        f.wait(lambda: not f.gated("p0"))
    finally:
        f.close()


def test_2_a_failed_ungate_is_retried_until_it_lands(front: Front) -> None:
    """Every PATCH refused for a while (503): the pod stays gated only as long as the API refuses; no
    other change of the pod is needed for the front to come back to it."""
    front.emulator.faults(Faults(rate=1.0, calls=frozenset({"patch"}), kinds=("503",)))
    front.submit(pod("p0"))
    front.wait(lambda: front.emulator.call(lambda: front.emulator.state.faults.refused["patch"]) >= 6)
    assert front.gated("p0")
    front.emulator.faults(None)
    front.wait(lambda: not front.gated("p0"))
    assert front.controller is not None and front.controller.stats.failed["patch"] >= 1
    assert any(e["reason"] == "QuotaplaneRetrying" for e in front.events())
    from prometheus_client import CollectorRegistry, generate_latest

    from quotaplane.kube.metrics import FrontCollector

    registry = CollectorRegistry()
    registry.register(FrontCollector(front.controller.api.stats, lambda: front.controller.stats
                                     if front.controller is not None else None))
    text = generate_latest(registry).decode()
    assert 'quotaplane_kube_api_retries_total{call="patch",code="503"}' in text
    assert 'quotaplane_kube_reconcile_failures_total{call="patch"}' in text
    assert 'quotaplane_kube_api_calls_total{call="patch",result="ok"} 1.0' in text


def test_2_failed_condition_and_event_writes_are_retried(front: Front) -> None:
    front.emulator.faults(Faults(rate=1.0, calls=frozenset({"status", "event"}), kinds=("500",)))
    for i in range(3):
        front.submit(pod(f"p{i}"))
    front.wait(lambda: not front.gated("p0") and not front.gated("p1"))
    front.wait(lambda: front.emulator.call(lambda: front.emulator.state.faults.refused["status"]) >= 4)
    assert condition(front, "p2") == {}
    front.emulator.faults(None)
    front.wait(lambda: condition(front, "p2").get("reason") == "QuotaWaiting")
    front.wait(lambda: condition(front, "p0").get("reason") == "Admitted")
    front.wait(lambda: {e["reason"] for e in front.events()} >= {"Admitted", "QuotaWaiting"})


def test_5_an_admitted_pod_says_so_in_its_condition(front: Front) -> None:
    for i in range(3):
        front.submit(pod(f"p{i}"))
    front.wait(lambda: condition(front, "p2").get("reason") == "QuotaWaiting")
    before = condition(front, "p2")
    assert before["status"] == "False"
    front.set_phase("p0", "Succeeded")
    front.wait(lambda: not front.gated("p2"))
    after = front.wait(lambda: condition(front, "p2") if condition(front, "p2")["status"] == "True" else None)
    assert after["reason"] == "Admitted" and after["message"] == "admitted by quotaplane to queue root.team-a"
    assert condition(front, "p1")["reason"] == "Admitted"


def test_6_the_preemption_reason_survives_the_eviction_api() -> None:
    """The Eviction API rewrites DisruptionTarget to EvictionByEvictionAPI; quotaplane's reason is in
    the QuotaAdmitted condition, which it leaves alone (read on the pod while it terminates)."""
    from tests.preemption.helpers import seed_002_config

    config = seed_002_config(revoke_delay=1).replace(
        "  queues:\n  - name: root", "  placementrules:\n  - name: tag\n    value: namespace\n"
        "    create: true\n  queues:\n  - name: root")
    e = Emulator(kubelet=True, graceful=True).start()
    f = Front(Scheduler.from_yaml(config), emulator=e, retry=FAST,
              options=ControllerOptions(reasons_every=0.05, timeouts_every=0.2, retry_base=0.02,
                                        retry_max=0.1))
    try:
        f.namespace("team-a")
        f.namespace("team-b")
        f.node(node("n1", cpu="8"))
        f.start()
        for i in range(7):
            f.submit(pod(f"a{i}", "team-a"))
        f.wait(lambda: all((f.get_pod(f"a{i}", "team-a") or {}).get("status", {}).get("phase") == "Running"
                           for i in range(7)))
        for i in range(5):
            f.submit(pod(f"b{i}", "team-b"))
        f.wait(lambda: len(e.evictions) >= 1, timeout=20)
        ns, victim = e.evictions[0]
        got = f.get_pod(victim, ns)
        assert got is not None and got["metadata"].get("deletionTimestamp")     # terminating
        assert condition(f, victim, "DisruptionTarget", ns)["reason"] == "EvictionByEvictionAPI"
        ours = condition(f, victim, ns=ns)
        assert ours["status"] == "False" and ours["reason"] == "Preempted"
        assert "elastic.revoked" in ours["message"]
    finally:
        f.close()


def test_7_a_quiet_namespace_watch_resumes_from_its_bookmarks_without_relisting() -> None:
    """The server ends every watch after a while and its window starts after the namespaces were
    created: resuming from the last object's version would get 410 and a relisting each time."""
    e = Emulator().start()
    e.call(lambda: [e.state.put("namespaces", {"metadata": {"name": f"ns{i}"}}) for i in range(3)])
    e.compact()                                     # the watch cache starts after them
    e.call(lambda: setattr(e.state, "watch_timeout", 0.3))
    e.call(lambda: setattr(e.state, "bookmark_every", 0.05))
    done = threading.Event()

    async def main() -> tuple[int, int]:
        api = KubeApi(client_config(server=e.url))
        cache = NamespaceCache(api)
        task = asyncio.create_task(cache.run())
        while cache.informer.watches < 4:
            await asyncio.sleep(0.05)
        task.cancel()
        await api.close()
        done.set()
        return cache.informer.lists, cache.informer.watches
    try:
        lists, watches = asyncio.run(main())
        assert watches >= 4 and lists == 1
        assert e.call(lambda: e.state.calls["list namespaces"]) == 1
    finally:
        e.stop()


def test_7_the_front_reads_its_one_config_map_not_every_config_map(front: Front) -> None:
    for i in range(5):
        front.create(f"/api/v1/namespaces/other{i}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": f"other{i}"}})
    log = front.emulator.call(lambda: list(front.emulator.state.log))
    asked = [(ns, q) for call, plural, ns, q in log if plural == "configmaps" and call in ("list", "watch")]
    assert asked
    assert all(ns == "quotaplane-system" and q.get("fieldSelector") == "metadata.name=yunikorn-configs"
               for ns, q in asked)


def test_a_pod_whose_condition_was_changed_behind_the_fronts_back_is_put_back(front: Front) -> None:
    for i in range(3):
        front.submit(pod(f"p{i}"))
    front.wait(lambda: condition(front, "p2").get("reason") == "QuotaWaiting")
    front.wait(lambda: condition(front, "p0").get("reason") == "Admitted")
    # someone overwrites the conditions (a status update of another controller)
    r = front.kubectl.patch("/api/v1/namespaces/team-a/pods/p0/status",
                            json={"status": {"conditions": [{"type": "QuotaAdmitted", "status": "False",
                                                              "reason": "Other"}]}},
                            headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert r.status_code == 200
    front.wait(lambda: condition(front, "p0").get("reason") == "Admitted")


def _seed_002_front(eviction_timeout: float = 300.0) -> Front:
    from tests.preemption.helpers import seed_002_config

    config = seed_002_config(revoke_delay=1).replace(
        "  queues:\n  - name: root", "  placementrules:\n  - name: tag\n    value: namespace\n"
        "    create: true\n  queues:\n  - name: root")
    e = Emulator(kubelet=True, graceful=True).start()
    f = Front(Scheduler.from_yaml(config), emulator=e, retry=FAST,
              options=ControllerOptions(reasons_every=0.05, timeouts_every=0.2, retry_base=0.02,
                                        retry_max=0.1, resync_every=0.2, eviction_timeout=eviction_timeout))
    f.namespace("team-a")
    f.namespace("team-b")
    f.node(node("n1", cpu="8"))
    f.start()
    for i in range(7):
        f.submit(pod(f"a{i}", "team-a", labels={"app": "web"}))
    f.submit(pod("b0", "team-b"))
    f.wait(lambda: _running(f) == 8)
    # a budget that allows no disruption of team-a's pods
    f.create("/apis/policy/v1/namespaces/team-a/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 7, "selector": {"matchLabels": {"app": "web"}}}})
    return f


def _pods(f: Front) -> list[dict[str, Any]]:
    return list(f.emulator.objects("pods"))         # the store itself: no injected fault in the way


def _running(f: Front) -> int:
    """Cores of the pods that run or may start: ungated and not ended (1 core each)."""
    return sum(1 for p in _pods(f) if not p["spec"].get("schedulingGates")
               and p["status"].get("phase") not in ("Succeeded", "Failed"))


def _charged(f: Front) -> int:
    q = f.scheduler.partition("default").queues.queue("root")
    return int(q.allocated.get("vcore")) // 1000


class _Watchdog:
    """Samples the cluster while a test runs: the cores of pods that run or may start never exceed the
    node's 8, and the engine never charges less than what runs."""

    def __init__(self, f: Front) -> None:
        self.f = f
        self.seen: list[tuple[int, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            running = _running(self.f)
            charged = _charged(self.f)
            self.seen.append((running, charged))
            self.stop.wait(0.02)

    def close(self) -> list[tuple[int, int]]:
        self.stop.set()
        self.thread.join(5)
        return [s for s in self.seen if s[0] > 8 or s[1] < s[0]]


def test_3_an_eviction_a_budget_refuses_never_over_commits_the_cluster() -> None:
    """Seed 002 with a PodDisruptionBudget on the borrower: the reclaim's evictions are refused (429),
    retried and reported; the victims stay charged, so team-b waits and the running pods never exceed
    the node. Once the budget allows it, the victims are evicted, stay charged while they terminate,
    and team-b's pods start only when they are gone."""
    f = _seed_002_front()
    dog = _Watchdog(f)
    try:
        for i in range(1, 5):
            f.submit(pod(f"b{i}", "team-b"))
        controller = f.controller
        assert controller is not None
        f.wait(lambda: len(controller.stats.blocked) == 4, timeout=20)
        f.wait(lambda: controller.stats.evictions["blocked"] >= 12)           # retried, still refused
        assert f.emulator.evictions == []
        assert len(f.emulator.call(lambda: f.emulator.state.refused_evictions)) >= 12
        assert all(f.gated(f"b{i}", "team-b") for i in range(1, 5))
        assert _charged(f) == 8 and _running(f) == 8                          # 7 of team-a counted as 7
        blocked = [e for e in f.events("team-a") if e["reason"] == "EvictionBlocked"]
        assert len({e["involvedObject"]["name"] for e in blocked}) == 4
        assert "The disruption budget web needs 7 healthy pods and has 7 currently" in blocked[0]["message"]
        assert not [e for e in f.events("team-a") if e["reason"] == "Preempted"]    # nothing was evicted
        held = sorted(f.scheduler.partition("default").preempting())
        assert len(held) == 4
        # the budget allows it now: evicted, terminating, still charged until the kubelet is done
        r = f.kubectl.patch("/apis/policy/v1/namespaces/team-a/poddisruptionbudgets/web",
                            json={"spec": {"minAvailable": 3}},
                            headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200
        f.wait(lambda: len(f.emulator.evictions) == 4)
        evicted = [name for _, name in f.emulator.evictions]
        f.wait(lambda: all((f.get_pod(n, "team-a") or {}).get("metadata", {}).get("deletionTimestamp")
                           for n in evicted))
        assert _charged(f) == 8 and all(f.gated(f"b{i}", "team-b") for i in range(1, 5))
        for name in evicted:
            f.emulator.finish("team-a", name)
        f.wait(lambda: not any(f.gated(f"b{i}", "team-b") for i in range(1, 5)))
        f.wait(lambda: _running(f) == 8 and _charged(f) == 8)
        f.wait(lambda: len([e for e in f.events("team-a") if e["reason"] == "Preempted"]) == 4)
        assert len(controller.stats.blocked) == 0
    finally:
        bad = dog.close()
        f.close()
    assert bad == [], bad[:5]


def test_3_a_preemption_refused_for_too_long_is_given_up() -> None:
    f = _seed_002_front(eviction_timeout=0.5)
    try:
        for i in range(1, 5):
            f.submit(pod(f"b{i}", "team-b"))
        controller = f.controller
        assert controller is not None
        f.wait(lambda: controller.stats.evictions["abandoned"] >= 1, timeout=20)
        f.wait(lambda: any(e["reason"] == "PreemptionAbandoned" for e in f.events("team-a")))
        assert f.emulator.evictions == [] and _running(f) <= 8
        given_up = {e["involvedObject"]["name"] for e in f.events("team-a")
                    if e["reason"] == "PreemptionAbandoned"}
        # a pod whose preemption was given up says it is admitted again
        name = sorted(given_up)[0]
        f.wait(lambda: condition(f, name, ns="team-a").get("reason") in ("PreemptionAbandoned", "Preempted"))
    finally:
        f.close()


def _put_pod(f: Front, obj: dict[str, Any]) -> None:
    """Create a pod as the apiserver would (the webhook's patch applied), past the injected faults
    (they are for the front's calls, not the test's)."""
    import base64
    import json

    import jsonpatch

    from quotaplane.kube.webhook import mutate
    from tests.kube.harness import ALICE

    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "r", "operation": "CREATE",
                          "kind": {"group": "", "version": "v1", "kind": "Pod"},
                          "resource": {"group": "", "version": "v1", "resource": "pods"},
                          "namespace": obj["metadata"]["namespace"], "userInfo": ALICE, "object": obj}}
    answer = mutate(review, f.webhook)["response"]
    obj = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(answer["patch"])))
    f.emulator.call(lambda: f.emulator.state.put("pods", obj))


def _converged(f: Front) -> str:
    """"" when every pod is as the engine decided and the engine charges exactly the running pods;
    else what differs."""
    p = f.scheduler.partition("default")
    pods = list(f.emulator.objects("pods"))
    running = 0
    for obj in pods:
        uid, name = obj["metadata"]["uid"], obj["metadata"]["name"]
        gated = bool(obj["spec"].get("schedulingGates"))
        ended = obj["status"].get("phase") in ("Succeeded", "Failed")
        if ended:
            continue
        cond = next((c for c in obj["status"].get("conditions", []) if c["type"] == "QuotaAdmitted"), {})
        if p.allocation(uid) is not None:
            if gated or cond.get("reason") != "Admitted":
                return f"{name}: allocated but gated={gated} condition={cond.get('reason')}"
            running += 1
        elif p.get_ask(uid) is not None:
            if not gated or cond.get("reason") != "QuotaWaiting":
                return f"{name}: waiting but gated={gated} condition={cond.get('reason')}"
        else:
            return f"{name}: unknown to the engine"
    charged = int(p.queues.queue("root").allocated.get("vcore")) // 1000
    return "" if charged == running else f"charged {charged} != running {running}"


def test_with_one_call_in_five_refused_every_pod_ends_as_decided_and_usage_is_what_runs() -> None:
    """Fault injection: 1 in 5 calls of every type (list, watch, get, create, patch, status, Event,
    eviction, delete) refused at random — 429, 500, 503, or applied with the answer lost (a watch
    dropped mid-way) — from the start-up listing on, through admissions, a reclaim with evictions and
    pods ending: every pod ends in the state the engine decided, and the engine charges exactly the
    pods that run."""
    from tests.preemption.helpers import seed_002_config

    config = seed_002_config(revoke_delay=1).replace(
        "  queues:\n  - name: root", "  placementrules:\n  - name: tag\n    value: namespace\n"
        "    create: true\n  queues:\n  - name: root")
    e = Emulator(kubelet=True).start()
    faults = Faults(rate=0.2, seed=31, retry_after=0, first=True)
    f = Front(Scheduler.from_yaml(config), emulator=e, retry=FAST,
              options=ControllerOptions(reasons_every=0.05, timeouts_every=0.2, retry_base=0.02,
                                        retry_max=0.2, resync_every=0.3))
    try:
        f.namespace("team-a")
        f.namespace("team-b")
        f.node(node("n1", cpu="8"))
        e.faults(faults)
        f.start()
        for i in range(7):
            _put_pod(f, pod(f"a{i}", "team-a"))
        _put_pod(f, pod("b0", "team-b"))
        f.wait(lambda: _converged(f) == "" and _running(f) == 8, timeout=60)
        for i in range(1, 5):
            _put_pod(f, pod(f"b{i}", "team-b"))
        f.wait(lambda: len(e.evictions) >= 4, timeout=60)
        for name in ("b0", "a0"):
            e.call(lambda n=name: e.state.finish("team-b" if n.startswith("b") else "team-a", n, "Succeeded"))
        for i in range(5, 8):
            _put_pod(f, pod(f"b{i}", "team-b"))
        f.wait(lambda: _converged(f) == "", timeout=60)
        refused = e.call(lambda: dict(faults.refused))
        for call in ("list", "watch", "patch", "status", "event", "evict"):
            assert refused.get(call, 0) >= 1, refused
        assert _converged(f) == ""
        assert _running(f) <= 8
    finally:
        e.faults(None)
        f.close()
