"""Kubernetes front benchmark: pods admitted per second with 1,000 gated pods (issue 16).

* ``front``: 1,000 pods carrying the gate (as the webhook leaves them) wait in the kmock emulator over
  loopback HTTP, one application per pod, all within quota. The controller starts and is timed until
  every pod is ungated on the API server: it lists the pods, makes 1,000 asks, admits them in a cycle,
  and for each pod sends the ungate patch, the ``QuotaAdmitted=True`` condition and an ``Admitted``
  Event (3,000 API calls, 16 reconcile workers).
* baseline ``rest``: the same 1,000 admissions through quotaplane's own REST service (uvicorn on
  loopback, same process, one keep-alive client): an application and an ask per pod, each ask admitted
  at once. ``front_vs_rest`` is the front's rate over the REST rate, measured in the same run.

The figures include the emulator (a Python HTTP server sharing the machine and the interpreter lock): a
py-spy profile of the front run puts about 70 % of the process's CPU in kmock and under 20 % in the
controller, so they are a floor for a real API server. ``QP_BENCH_PODS`` changes the pod count.
Run: ``.venv/bin/python benchmarks/kube.py`` (~15 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
from _bench import write_results  # noqa: E402

PODS = int(os.environ.get("QP_BENCH_PODS", "1000"))
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
"""


def _gated_pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "team-a", "uid": f"uid-{i}",
                         "annotations": {"yunikorn.apache.org/user.info":
                                         '{"user":"alice","groups":["dev"]}'}},
            "spec": {"schedulingGates": [{"name": "quotaplane.io/admission"}],
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


def front_rate() -> dict[str, float]:
    import httpx
    from tests.kube.emulator import Emulator

    from quotaplane.kube.api import KubeApi, client_config
    from quotaplane.kube.controller import Controller, ControllerOptions
    from quotaplane.scheduler import Scheduler

    emulator = Emulator().start()
    try:
        with httpx.Client(base_url=emulator.url, timeout=30) as kubectl:
            kubectl.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": "team-a"}})
            kubectl.post("/api/v1/nodes", json={
                "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                "status": {"allocatable": {"cpu": "1000", "memory": "1000Gi", "pods": "5000"},
                           "conditions": [{"type": "Ready", "status": "True"}]}})
            for i in range(PODS):
                kubectl.post("/api/v1/namespaces/team-a/pods", json=_gated_pod(i))
        ungated = 0
        done = threading.Event()

        async def main() -> float:
            nonlocal ungated
            api = KubeApi(client_config(server=emulator.url))
            real_patch = api.patch_json

            async def counting(kind: str, obj: Any, patch: Any) -> None:
                nonlocal ungated
                await real_patch(kind, obj, patch)
                ungated += 1
                if ungated == PODS:
                    done.set()
            api.patch_json = counting  # type: ignore[method-assign]
            controller = Controller(Scheduler.from_yaml(CONFIG), api,
                                    ControllerOptions(reasons_every=0.5, timeouts_every=None))
            start = time.perf_counter()
            task = asyncio.create_task(controller.run())
            while not done.is_set():
                await asyncio.sleep(0.005)
            elapsed = time.perf_counter() - start
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await api.close()
            return elapsed

        elapsed = asyncio.run(main())
        return {"front_pods": PODS, "front_seconds": round(elapsed, 3),
                "front_pods_per_s": round(PODS / elapsed, 1)}
    finally:
        emulator.stop()


def rest_rate() -> dict[str, float]:
    import httpx
    import uvicorn
    from tests.kube.emulator import free_port

    from quotaplane.scheduler import Scheduler
    from quotaplane.server.app import create_app

    scheduler = Scheduler.from_yaml(CONFIG)
    scheduler.partition("default").add_node("n1", {"vcore": 1_000_000, "memory": 1000 << 30, "pods": 5000})
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(scheduler), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            start = time.perf_counter()
            for i in range(PODS):
                app = f"team-a-p{i}"
                r = http.post("/ws/v1/partition/default/applications",
                              json={"applicationID": app, "user": "alice", "groups": ["dev"],
                                    "tags": {"namespace": "team-a"}})
                assert r.status_code in (200, 201), r.text
                r = http.post(f"/ws/v1/partition/default/application/{app}/asks",
                              json={"allocationKey": f"uid-{i}",
                                    "resource": {"vcore": 100, "memory": 64 << 20, "pods": 1}})
                assert r.status_code in (200, 201), r.text
            elapsed = time.perf_counter() - start
        allocated = len(scheduler.partition("default").allocations())
        assert allocated == PODS, allocated
        return {"rest_seconds": round(elapsed, 3), "rest_pods_per_s": round(PODS / elapsed, 1)}
    finally:
        server.should_exit = True
        thread.join(10)


def main() -> None:
    rest = rest_rate()
    front = front_rate()
    write_results("kube", {**front, **rest,
                           "front_vs_rest": round(front["front_pods_per_s"] / rest["rest_pods_per_s"], 2)})


if __name__ == "__main__":
    main()
