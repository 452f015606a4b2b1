"""The Kubernetes front says when a waiting pod should start (docs/eta.md "Kubernetes"): a pod's
``activeDeadlineSeconds`` is its declared runtime, and once the forecast is refreshed the waiting pod's
``QuotaAdmitted`` condition ends with its p50 start and the top change that would start it now."""

from __future__ import annotations

import calendar
import time
from typing import Any

from quotaplane.kube.controller import ControllerOptions
from quotaplane.kube.pods import pod_runtime
from quotaplane.scheduler import Scheduler
from tests.kube.harness import Front, node, pod
from tests.kube.test_front import CONFIG


def test_active_deadline_seconds_is_the_declared_runtime() -> None:
    assert pod_runtime({"spec": {"activeDeadlineSeconds": 600}}) == 600.0
    for bad in (0, -5, "600", True, None):
        assert pod_runtime({"spec": {"activeDeadlineSeconds": bad}}) is None
    assert pod_runtime({}) is None


def test_a_waiting_pods_condition_says_when_it_starts_and_what_would_start_it() -> None:
    f = Front(Scheduler.from_yaml(CONFIG), options=ControllerOptions(reasons_every=0.05, eta_every=0.2))
    f.namespace("team-a")
    f.node(node("n1"))
    f.start()
    try:
        for i in range(2):                      # root.team-a: max 2 cores, both taken for 10 minutes
            p = pod(f"p{i}")
            p["spec"]["activeDeadlineSeconds"] = 600
            f.submit(p)
        f.wait(lambda: not f.gated("p0") and not f.gated("p1"))
        assert f.scheduler.partition("default").allocation("uid-team-a-p0").max_runtime == 600.0
        f.submit(pod("p2"))

        def message() -> str | None:
            for c in (f.get_pod("p2") or {}).get("status", {}).get("conditions", []):
                if c.get("type") == "QuotaAdmitted" and "starts about" in c.get("message", ""):
                    return str(c["message"])
            return None
        text: Any = f.wait(message)
        assert text.startswith("queue.max at root.team-a")
        said = text.split("starts about ", 1)[1][:17]               # 2026-11-28T10:45Z
        at = calendar.timegm(time.strptime(said, "%Y-%m-%dT%H:%MZ"))
        assert abs(at - (time.time() + 600)) < 120                  # p0 ends 600 s after it started
        assert "declared runtime of uid-team-a-p" in text
        assert "starts if uid-team-a-p" in text and "ended" in text
    finally:
        f.close()
