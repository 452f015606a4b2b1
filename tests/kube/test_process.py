"""``quotaplane kube`` as a process (issue 16): the webhooks over HTTP(S), the validating webhook
refusing an invalid ``queues.yaml``, one leader through the Lease, a follower taking over without
counting anything twice."""

from __future__ import annotations

import asyncio
import base64
import faulthandler
import json
import ssl
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest

from quotaplane.kube.controller import ControllerOptions
from quotaplane.kube.main import FrontOptions, run_front
from tests.kube.emulator import Emulator, free_port
from tests.kube.harness import ALICE, Front, node, pod

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


class Process:
    """``run_front`` in a thread of its own (as the process would run it), stopped by cancellation
    (what SIGTERM does through uvicorn)."""

    def __init__(self, emulator: Emulator, tmp: Path, identity: str, **extra: Any) -> None:
        self.port = free_port()
        config = tmp / "queues.yaml"
        config.write_text(CONFIG)
        self.options = FrontOptions(
            config=config, store=f"sqlite:///{tmp / 'front.db'}", host="127.0.0.1", port=self.port,
            identity=identity, kube_server=emulator.url, lease_duration=1.5, renew_deadline=1.0,
            retry_period=0.2, controller=ControllerOptions(reasons_every=0.05), **extra)
        self.scheme = "https" if self.options.tls_cert else "http"
        self.code: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[int] | None = None
        started = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()

            async def main() -> int:
                ready = asyncio.Event()
                self._task = asyncio.create_task(run_front(self.options, started=ready))
                await ready.wait()
                started.set()
                return await self._task
            try:
                self.code = self._loop.run_until_complete(main())
            except asyncio.CancelledError:
                self.code = 0
            finally:
                started.set()
                self._loop.close()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert started.wait(15)

    def client(self, verify: Any = False) -> httpx.Client:
        return httpx.Client(base_url=f"{self.scheme}://127.0.0.1:{self.port}", timeout=10, verify=verify)

    def stop(self) -> None:
        if self._loop is not None and self._task is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._task.cancel)
        self.thread.join(30)
        if self.thread.is_alive():      # say where it hangs, for the failure report
            faulthandler.dump_traceback(file=sys.stderr)


def _review(obj: dict[str, Any], kind: str = "Pod", resource: str = "pods") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "r-1", "operation": "CREATE",
                        "kind": {"group": "", "version": "v1", "kind": kind},
                        "resource": {"group": "", "version": "v1", "resource": resource},
                        "namespace": obj["metadata"]["namespace"], "name": obj["metadata"]["name"],
                        "userInfo": ALICE, "object": obj}}


@pytest.fixture
def cluster() -> Iterator[Front]:
    """The emulator with a namespace and a node; ``Front`` only as the kubectl (no controller)."""
    from quotaplane.cluster import Scheduler

    f = Front(Scheduler.from_yaml(CONFIG))
    f.namespace("team-a")
    f.namespace("quotaplane-system")
    f.node(node("n1"))
    yield f
    f.kubectl.close()
    f.emulator.stop()


def _submit(http: httpx.Client, kubectl: Front, obj: dict[str, Any]) -> None:
    """The apiserver's part: call /mutate over HTTP, apply the patch, store the pod."""
    answer = http.post("/mutate", json=_review(obj)).json()["response"]
    assert answer["allowed"] and answer["uid"] == "r-1", answer
    obj = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(answer["patch"])))
    kubectl.create(f"/api/v1/namespaces/{obj['metadata']['namespace']}/pods", obj)


def test_webhook_routes_check_their_input_like_yunikorn(cluster: Front, tmp_path: Path) -> None:
    proc = Process(cluster.emulator, tmp_path, "a")
    try:
        with proc.client() as http:
            assert http.post("/mutate", content=b"").status_code == 400
            r = http.post("/mutate", content=b"{}", headers={"Content-Type": "text/plain"})
            assert r.status_code == 415 and "application/json" in r.text
            r = http.post("/mutate", content=b"{not json", headers={"Content-Type": "application/json"})
            assert r.status_code == 200 and r.json()["response"]["allowed"] is False
            assert "not JSON" in r.json()["response"]["status"]["message"]
            r = http.post("/mutate", json={"kind": "AdmissionReview"})
            assert r.json()["response"]["allowed"] is False
            assert "without a 'request'" in r.json()["response"]["status"]["message"]
            assert http.post("/nope").status_code in (404, 503)
            assert http.get("/healthz").status_code == 200
            proc_ready = Front.wait(lambda: http.get("/readyz").status_code == 200)
            assert proc_ready
    finally:
        proc.stop()
    assert proc.code == 0, (proc.code, proc.thread.is_alive())


def test_an_invalid_queues_yaml_config_map_is_refused_with_its_line(cluster: Front, tmp_path: Path) -> None:
    proc = Process(cluster.emulator, tmp_path, "a")
    try:
        def config_map(text: str) -> dict[str, Any]:
            return {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "yunikorn-configs", "namespace": "quotaplane-system"},
                    "data": {"queues.yaml": text}}
        with proc.client() as http:
            bad = ("partitions:\n- name: default\n  queues:\n  - name: root\n"
                   "    resources: {max: {vcore: -1}}\n")
            r = http.post("/validate-conf", json=_review(config_map(bad), "ConfigMap", "configmaps"))
            answer = r.json()["response"]
            assert answer["allowed"] is False
            assert "yunikorn-configs queues.yaml" in answer["status"]["message"]
            assert "line" in answer["status"]["message"]
            r = http.post("/validate-conf", json=_review(config_map(CONFIG), "ConfigMap", "configmaps"))
            assert r.json()["response"]["allowed"] is True
            other = config_map(bad)
            other["metadata"]["name"] = "something-else"
            r = http.post("/validate-conf", json=_review(other, "ConfigMap", "configmaps"))
            assert r.json()["response"]["allowed"] is True
    finally:
        proc.stop()


def test_one_leader_admits_a_follower_takes_over_counting_nothing_twice(cluster: Front,
                                                                      tmp_path: Path) -> None:
    a = Process(cluster.emulator, tmp_path, "a")
    b: Process | None = None
    try:
        with a.client() as http:
            Front.wait(lambda: http.get("/ws/v1/partitions").status_code == 200)
            Front.wait(lambda: http.get("/readyz").status_code == 200)
            for i in range(3):
                _submit(http, cluster, pod(f"p{i}"))
        cluster.wait(lambda: not cluster.gated("p0") and not cluster.gated("p1"))
        assert cluster.gated("p2")
        # b's first look at the Lease is slow: asked before it, b still names the leader (it waits
        # for that first look instead of answering with nobody's name)
        cluster.emulator.delay("get", "leases", 0.5)
        b = Process(cluster.emulator, tmp_path, "b")
        with b.client() as http:
            r = http.get("/ws/v1/partitions")
            assert r.status_code == 503 and "not the leader (the leader is a)" in r.json()["message"]
        cluster.emulator.delay("get", "leases", 0)
        with b.client() as http:
            _submit(http, cluster, pod("p3"))      # a follower's webhook works
        a.stop()
        assert a.code == 0
        with b.client() as http:
            Front.wait(lambda: http.get("/ws/v1/partitions").status_code == 200, timeout=15)
            lease = cluster.kubectl.get(
                "/apis/coordination.k8s.io/v1/namespaces/quotaplane-system/leases/quotaplane-front").json()
            assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1

            def queue_used() -> Any:
                q = http.get("/ws/v1/partition/default/queue/root.team-a").json()
                return q.get("allocatedResource", {}).get("vcore")
            assert Front.wait(lambda: queue_used() == 2000)           # p0 and p1, counted once
            # b's pod watch is live once it reports on a new pod (kmock's watch ignores the list's
            # resourceVersion, so a deletion between b's listing and its watch would go unseen here)
            _submit(http, cluster, pod("p4"))

            def reported() -> bool:
                p4 = cluster.get_pod("p4") or {}
                conditions = p4.get("status", {}).get("conditions", [])
                return any(c.get("type") == "QuotaAdmitted" for c in conditions)
            cluster.wait(reported)
            cluster.delete_pod("p0")
            cluster.wait(lambda: not cluster.gated("p2"))            # the next one, by the new leader
            assert cluster.gated("p3")
            assert Front.wait(lambda: queue_used() == 2000)
    finally:
        a.stop()
        if b is not None:
            b.stop()


def test_webhooks_over_https(cluster: Front, tmp_path: Path) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "quotaplane-front.quotaplane-system.svc")
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    proc = Process(cluster.emulator, tmp_path, "a", tls_cert=cert_file, tls_key=key_file)
    try:
        context = ssl.create_default_context()
        ca.configure_trust(context)
        with proc.client(verify=context) as https:
            r = https.post("/mutate", json=_review(pod("s1")))
            assert r.status_code == 200 and r.json()["response"]["allowed"] is True
        with httpx.Client(timeout=5) as plain, pytest.raises(httpx.HTTPError):
            plain.post(f"http://127.0.0.1:{proc.port}/mutate", json=_review(pod("s2")))
    finally:
        proc.stop()


def test_a_stop_ends_the_front_even_if_one_cancellation_is_swallowed(
        cluster: Front, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python 3.11's ``asyncio.wait_for`` can swallow a cancellation that arrives just as the awaited
    call completes (cpython gh-86296); under load the controller's loop then runs on, and a front
    that awaited it once never stopped (seen in CI: alive 30 s after SIGTERM). One swallowed
    cancellation must not keep the process alive."""
    import quotaplane.kube.main as front_main

    swallowed = threading.Event()

    async def stubborn_lead(*_: Any) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            swallowed.set()             # what the race does: the cancellation is lost …
        await asyncio.Event().wait()    # … and the loop goes on waiting for work

    monkeypatch.setattr(front_main, "_lead", stubborn_lead)
    proc = Process(cluster.emulator, tmp_path, "a")
    proc.stop()
    assert swallowed.is_set()
    assert not proc.thread.is_alive() and proc.code == 0, (proc.code, proc.thread.is_alive())


def test_a_namespace_watch_that_dies_stops_the_front_saying_why(cluster: Front, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """Found by a review: a failure the namespace watch does not retry (credentials the client cannot
    get) ended its task unseen; the front stayed up, never ready, logging nothing."""
    from quotaplane.kube import http as kube_http

    async def dies(self: Any) -> None:
        await asyncio.sleep(0.2)
        raise RuntimeError("no credentials")

    monkeypatch.setattr(kube_http.NamespaceCache, "run", dies)
    front = Process(cluster.emulator, tmp_path, "a")
    front.thread.join(30)
    assert not front.thread.is_alive() and front.code == 1
    assert "the namespace watch stopped: RuntimeError: no credentials" in caplog.text
