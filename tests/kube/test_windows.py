"""Time windows in the Kubernetes front (issue 34, docs/windows.md): the front's own timer opens and
closes them at their time (no REST service runs beside it), and a configuration composed again from
the ConfigMap or the custom quotas while a window is open keeps it open."""

from __future__ import annotations

from datetime import UTC, datetime

from quotaplane.cluster import Scheduler
from quotaplane.kube.controller import ControllerOptions
from tests.kube.harness import Front, node, pod
from tests.partition.helpers import Clock

T0 = datetime(2026, 11, 27, 8, tzinfo=UTC).timestamp()

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
  windows:
  - name: morning
    queue: root.team-a
    from: "2026-11-27T09:00"
    to: "2026-11-27T12:00"
    max: {vcore: 3}
"""


def test_the_fronts_timer_opens_and_closes_a_window_at_its_time() -> None:
    clock = Clock(T0)
    f = Front(Scheduler.from_yaml(CONFIG, clock=clock),
              options=ControllerOptions(reasons_every=0.05, timeouts_every=0.05))
    try:
        f.namespace("team-a")
        f.node(node("n1", cpu="8"))
        f.start()
        for i in range(3):
            f.submit(pod(f"p{i}"))
        f.wait(lambda: not f.gated("p0") and not f.gated("p1"))
        assert f.gated("p2")                                  # max 2 before the window
        clock.now = T0 + 3600                                 # 09:00: the window opens
        f.wait(lambda: not f.gated("p2"))
        assert "active: true" in f.scheduler.config_text
        q = f.scheduler.partition("default").queues.queue("root.team-a")
        assert q is not None and dict(q.max or {}) == {"vcore": 3000}
        clock.now = T0 + 4 * 3600                             # 12:00: it closes
        f.wait(lambda: "active" not in f.scheduler.config_text)
        q = f.scheduler.partition("default").queues.queue("root.team-a")
        assert q is not None and dict(q.max or {}) == {"vcore": 2000}
    finally:
        f.close()


def test_a_configuration_composed_again_keeps_an_open_window_open() -> None:
    from quotaplane.kube.configuration import ClusterConfiguration
    clock = Clock(T0 + 3600)
    s = Scheduler.from_yaml(CONFIG, clock=clock)
    applied: list[str] = []
    conf = ClusterConfiguration(s, None, "default", "quotaplane", lambda _: None,  # type: ignore[arg-type]
                                applied.append)
    conf.config_map_event("MODIFIED", {"metadata": {"name": "yunikorn-configs", "namespace": "quotaplane"},
                                       "data": {"queues.yaml": CONFIG}})
    assert not applied, applied
    assert "active: true" in s.config_text
    q = s.partition("default").queues.queue("root.team-a")
    assert q is not None and dict(q.max or {}) == {"vcore": 3000}
    s.close()
