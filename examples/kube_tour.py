"""The Kubernetes front's tour on the kmock emulator (docs/kubernetes.md, "Tour on the emulator").

Runs here, with no cluster: the kmock emulator serves the Kubernetes API on loopback, a real
``quotaplane kube`` process watches it, and this script plays the apiserver's part for new pods (it
sends each pod to the front's ``/mutate`` webhook and stores the patched pod, as the apiserver does
before it persists a pod). Run from the repository root after ``make env``::

    .venv/bin/python examples/kube_tour.py
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
try:
    import httpx
    import jsonpatch
    from tests.kube.emulator import Emulator, free_port  # (the emulator lives with the tests)
except ModuleNotFoundError as missing:      # the kube extra alone has no emulator: say what to install
    sys.exit(f"the tour needs the development install from a checkout (make env, or pip install "
             f"'.[dev]'): {missing}")

QUEUES = """
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
ALICE = {"username": "alice", "groups": ["dev", "system:authenticated"]}


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}]}}


def wait(what: str, cond: Callable[[], Any], timeout: float = 20.0) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"tour: timed out waiting for {what}")


def main() -> int:
    emulator = Emulator().start()
    kubectl = httpx.Client(base_url=emulator.url, timeout=10)
    tmp = Path(tempfile.mkdtemp(prefix="quotaplane-tour-"))
    (tmp / "queues.yaml").write_text(QUEUES)
    port = free_port()
    front_url = f"http://127.0.0.1:{port}"
    print(f"1. The emulator serves the Kubernetes API at {emulator.url}.")
    kubectl.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": "team-a"}})
    kubectl.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": "quotaplane-system"}})
    kubectl.post("/api/v1/nodes", json={
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}})
    quotaplane = str(Path(sys.executable).with_name("quotaplane"))
    front = subprocess.Popen(
        [quotaplane, "kube", "--kube-server", emulator.url, "--host", "127.0.0.1", "--port", str(port),
         "--config", str(tmp / "queues.yaml"), "--store", f"sqlite:///{tmp / 'journal.db'}"],
        env={**os.environ, "POD_NAME": "quotaplane-tour"})
    try:
        http = httpx.Client(base_url=front_url, timeout=10)

        def ready() -> bool:
            try:
                return http.get("/readyz").status_code == 200 and \
                    http.get("/ws/v1/partition/default/nodes").status_code == 200
            except httpx.HTTPError:
                return False
        wait("the front to lead", ready)
        print(f"2. quotaplane kube runs at {front_url}: it holds the Lease and sees node-1.")

        def create(obj: dict[str, Any]) -> None:
            review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                      "request": {"uid": f"review-{obj['metadata']['name']}", "operation": "CREATE",
                                  "kind": {"group": "", "version": "v1", "kind": "Pod"},
                                  "resource": {"group": "", "version": "v1", "resource": "pods"},
                                  "namespace": "team-a", "userInfo": ALICE, "object": obj}}
            answer = http.post("/mutate", json=review).json()["response"]
            patched = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(answer["patch"])))
            kubectl.post("/api/v1/namespaces/team-a/pods", json=patched)

        def get(name: str) -> dict[str, Any]:
            return dict(kubectl.get(f"/api/v1/namespaces/team-a/pods/{name}").json())

        def gated(name: str) -> bool:
            return bool(get(name)["spec"].get("schedulingGates"))

        for name in ("train-0", "train-1", "train-2"):
            create(pod(name))
        print("3. alice creates three pods of 1 cpu in team-a (max 2 cpu); the webhook gates each one:")
        wait("two pods admitted", lambda: not gated("train-0") and not gated("train-1"))
        for name in ("train-0", "train-1", "train-2"):
            print(f"   {name}: {'gated' if gated(name) else 'ungated (admitted)'}")

        def waiting() -> str | None:
            for c in get("train-2").get("status", {}).get("conditions", []):
                if c.get("type") == "QuotaAdmitted":
                    return str(c["message"])
            return None
        print(f"4. train-2 says why it waits: {wait('the waiting reason', waiting)}")
        kubectl.patch("/api/v1/namespaces/team-a/pods/train-0/status",
                      json={"status": {"phase": "Succeeded"}},
                      headers={"Content-Type": "application/merge-patch+json"})
        wait("train-2 admitted", lambda: not gated("train-2"))
        print("5. train-0 succeeds: its quota is released and train-2 is ungated.")
        # the scheduler's binding (a pod's node is set only through its binding subresource)
        kubectl.post("/api/v1/namespaces/team-a/pods/train-1/binding",
                     json={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "train-1"},
                           "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}})

        def on_node() -> list[str]:
            nodes = http.get("/ws/v1/partition/default/nodes").json()
            return [a["allocationKey"] for n in nodes for a in n.get("allocations", [])]
        print(f"6. The scheduler binds train-1 to node-1; the node lists {wait('the binding', on_node)}.")
        queue = http.get("/ws/v1/partition/default/queue/root.team-a").json()
        print(f"7. root.team-a uses {queue['allocatedResource']} of max {queue['maxResource']}.")
        return 0
    finally:
        front.terminate()
        front.wait(20)
        kubectl.close()
        emulator.stop()


if __name__ == "__main__":
    raise SystemExit(main())
