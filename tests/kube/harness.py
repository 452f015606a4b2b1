"""The front against the emulator: a scheduler, the controller in a thread of its own, and a
``kubectl``-like client that creates pods the way the apiserver would — through the mutating webhook
(its JSON patch applied) — so the controller sees exactly what it would see in a cluster."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import jsonpatch

from quotaplane.cluster import Scheduler
from quotaplane.kube.api import KubeApi, RetryPolicy, client_config
from quotaplane.kube.controller import Controller, ControllerOptions
from quotaplane.kube.webhook import WebhookOptions, mutate
from tests.kube.emulator import Emulator

ALICE = {"username": "alice", "groups": ["dev", "system:authenticated"]}


def pod(name: str, namespace: str = "team-a", cpu: str = "1", *, uid: str | None = None,
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        priority: int | None = None) -> dict[str, Any]:
    """A Pod as a client submits it."""
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox",
                                            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
    if priority is not None:
        spec["priority"] = priority
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}"}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def node(name: str, cpu: str = "8", memory: str = "32Gi", pods: str = "110") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


class Front:
    """Emulator + scheduler + controller (in a thread); ``stop()`` ends the controller only."""

    def __init__(self, scheduler: Scheduler, emulator: Emulator | None = None,
                 options: ControllerOptions | None = None, retry: RetryPolicy | None = None) -> None:
        self.emulator = emulator or Emulator().start()
        self.retry = retry
        self.scheduler = scheduler
        self.options = options or ControllerOptions(reasons_every=0.05)
        self.kubectl = httpx.Client(base_url=self.emulator.url, timeout=10)
        self.webhook = WebhookOptions(namespace=self._namespace)
        self.controller: Controller | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    def _namespace(self, name: str) -> dict[str, Any] | None:
        return self.controller.namespaces.get(name) if self.controller is not None else None

    def start(self) -> Front:
        started = threading.Event()

        async def main() -> None:
            api = KubeApi(client_config(server=self.emulator.url), retry=self.retry)
            self.controller = Controller(self.scheduler, api, self.options)
            self._task = asyncio.current_task()
            started.set()
            try:
                await self.controller.run()
            finally:
                await api.close()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(main())
            except asyncio.CancelledError:
                pass        # stop() cancels the controller's task: the normal end, not a hidden failure
            finally:
                self._loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        assert started.wait(10)
        assert self.controller is not None
        self.wait(lambda: self.controller is not None and self.controller.synced.is_set())
        return self

    def stop(self) -> None:
        if self._loop is not None and self._task is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._task.cancel)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = self._task = self._thread = None

    def close(self) -> None:
        self.stop()
        self.kubectl.close()
        self.emulator.stop()

    # kubectl ------------------------------------------------------------------------------------------
    def create(self, path: str, obj: dict[str, Any]) -> None:
        r = self.kubectl.post(path, json=obj)
        assert r.status_code in (200, 201), r.text

    def namespace(self, name: str, annotations: dict[str, str] | None = None) -> None:
        self.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": name, "annotations": annotations or {}}})

    def node(self, obj: dict[str, Any]) -> None:
        self.create("/api/v1/nodes", obj)

    def submit(self, obj: dict[str, Any], user: dict[str, Any] | None = None) -> dict[str, Any]:
        """Create a pod as the apiserver would: the mutating webhook's patch applied first."""
        ns = obj["metadata"]["namespace"]
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": f"review-{obj['metadata']['name']}", "operation": "CREATE",
                              "kind": {"group": "", "version": "v1", "kind": "Pod"},
                              "resource": {"group": "", "version": "v1", "resource": "pods"},
                              "namespace": ns, "userInfo": user or ALICE, "object": obj}}
        answer = mutate(review, self.webhook)["response"]
        assert answer["allowed"], answer
        if "patch" in answer:
            obj = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(answer["patch"])))
        self.create(f"/api/v1/namespaces/{ns}/pods", obj)
        return obj

    def get_pod(self, name: str, ns: str = "team-a") -> dict[str, Any] | None:
        r = self.kubectl.get(f"/api/v1/namespaces/{ns}/pods/{name}")
        return r.json() if r.status_code == 200 else None

    def set_phase(self, name: str, phase: str, ns: str = "team-a") -> None:
        r = self.kubectl.patch(f"/api/v1/namespaces/{ns}/pods/{name}/status",
                               json={"status": {"phase": phase}},
                               headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text

    def bind(self, name: str, node: str, ns: str = "team-a") -> None:
        """What the scheduler does: the pod's ``binding`` subresource names its node."""
        r = self.kubectl.post(f"/api/v1/namespaces/{ns}/pods/{name}/binding",
                              json={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                                    "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
        assert r.status_code == 201, r.text

    def delete_pod(self, name: str, ns: str = "team-a") -> None:
        r = self.kubectl.delete(f"/api/v1/namespaces/{ns}/pods/{name}")
        assert r.status_code == 200, r.text

    def events(self, ns: str = "team-a") -> list[dict[str, Any]]:
        return list(self.kubectl.get(f"/api/v1/namespaces/{ns}/events").json().get("items", []))

    def gated(self, name: str, ns: str = "team-a") -> bool:
        p = self.get_pod(name, ns)
        assert p is not None, f"pod {ns}/{name} is gone"
        return any(g.get("name") == "quotaplane.io/admission" for g in p["spec"].get("schedulingGates") or [])

    @staticmethod
    def wait(cond: Callable[[], Any], timeout: float = 10.0) -> Any:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = cond()
            if value:
                return value
            time.sleep(0.02)
        raise AssertionError("condition not reached in time")
