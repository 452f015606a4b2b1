"""Metrics in YuniKorn's and Kueue's style (issue 17 #4), read from a real app: elastic quota and
quota-tree families, preemptions by reason, build info and the process collectors."""

from __future__ import annotations

from functools import partial

import httpx

import quotaplane as qp
from tests.client.test_client import _Server
from tests.partition.helpers import Clock
from tests.preemption.helpers import cpu, seed_002_config
from tests.scenarios.world import ALICE, CONFIG, tags

# no time is asserted: a loaded machine may take longer than httpx's 5 s default to answer
get = partial(httpx.get, timeout=120)
post = partial(httpx.post, timeout=120)
delete = partial(httpx.delete, timeout=120)


def _samples(text: str, family: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith(family + "{"):
            labels, value = line.rsplit(" ", 1)
            out[labels[len(family):]] = float(value)
    return out


def test_elastic_quota_and_quota_tree_families() -> None:
    s = qp.Scheduler.from_yaml(CONFIG)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 8000}))
    p.add_application("a1", ALICE, queue="root.a", tags=tags("team-a", "A"))
    assert p.allocate("a1", "k1", qp.Resource({"vcore": 2500})).allocated
    srv = _Server(s)                 # a real service (uvicorn on loopback)
    try:
        text = get(srv.url + "/ws/v1/metrics").text
    finally:
        srv.stop()
    elastic = _samples(text, "quotaplane_elastic_quota")
    assert elastic['{partition="default",quota="team-a",resource="vcore",state="used"}'] == 2500
    assert elastic['{partition="default",quota="team-a",resource="vcore",state="min"}'] == 1000
    assert elastic['{partition="default",quota="team-a",resource="vcore",state="max"}'] == 5000
    assert '{partition="default",quota="team-a",resource="vcore",state="runtime"}' in elastic
    tree = _samples(text, "quotaplane_quota_tree_node")
    assert tree['{node="A",partition="default",resource="vcore",state="quota",tree="T"}'] == 5000
    assert tree['{node="A",partition="default",resource="vcore",state="allocated",tree="T"}'] == 2500
    assert tree['{node="root",partition="default",resource="vcore",state="allocated",tree="T"}'] == 2500
    s.close()


def test_preemptions_are_counted_by_reason() -> None:
    """Seed 002's reclaim takes four of team-a's allocations: counted once each, reason
    elastic.revoked."""
    clock = Clock()
    s = qp.Scheduler.from_yaml(seed_002_config(revoke_delay=1), clock=clock)
    p = s.partition("default")
    srv = _Server(s)
    try:
        p.add_node("n1", cpu(8))
        p.add_application("a", ALICE, queue="root.q", tags={"namespace": "team-a"})
        p.add_application("b", ALICE, queue="root.q", tags={"namespace": "team-b"})
        p.check_timeouts()
        for i in range(7):
            assert p.allocate("a", f"a{i}", cpu(1))
        assert p.allocate("b", "b0", cpu(1))
        for i in range(1, 5):
            p.add_ask("b", f"b{i}", cpu(1))
        for _ in range(3):
            clock.advance(1)
            p.check_timeouts()
        text = get(srv.url + "/metrics").text
    finally:
        srv.stop()
    assert _samples(text, "quotaplane_preempted_allocations_total") == {
        '{partition="default",reason="elastic.revoked"}': 4.0}
    s.close()


#: every family YuniKorn's Grafana dashboard reads (yunikorn-k8shim deployments/grafana-dashboard), with
#: the per-queue names its queue panels select
DASHBOARD = ("yunikorn_scheduler_application_total", "yunikorn_scheduler_application_submission_total",
             "yunikorn_scheduler_container_allocation_attempt_total",
             "yunikorn_scheduler_scheduling_latency_milliseconds_bucket",
             "yunikorn_scheduler_vcore_node_usage_total", "yunikorn_scheduler_memory_node_usage_total",
             "yunikorn_scheduler_pods_node_usage_total", "yunikorn_root_a_queue_app",
             "yunikorn_root_a_queue_resource")


def test_the_yunikorn_families_its_grafana_dashboard_reads() -> None:
    """Issue 30: YuniKorn's metric families beside quotaplane's own, so its dashboard works."""
    s = qp.Scheduler.from_yaml(CONFIG)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 8000, "memory": 2**34, "pods": 10}))
    p.add_node("n2", qp.Resource({"vcore": 8000, "memory": 2**34, "pods": 10}))
    srv = _Server(s)
    try:
        assert post(srv.url + "/ws/v1/partition/default/applications",
                          json={"applicationID": "a1", "user": "alice", "groups": ["dev"], "queue": "root.a",
                                "tags": tags("team-a", "A")}).status_code == 201
        for key, vcore in (("k1", 2500), ("k2", 500), ("k3", 4000)):     # k3 is over alice's 3 cores
            post(srv.url + "/ws/v1/partition/default/allocations",
                       json={"applicationID": "a1", "allocationKey": key, "resource": {"vcore": vcore},
                             "nodeID": "n1"})
        delete(srv.url + "/ws/v1/partition/default/allocation/k2")
        text = get(srv.url + "/ws/v1/metrics").text
    finally:
        srv.stop()
        s.close()
    for family in DASHBOARD:
        assert any(line.startswith(family) for line in text.splitlines()), family
    attempts = _samples(text, "yunikorn_scheduler_container_allocation_attempt_total")
    assert attempts == {'{state="allocated"}': 2, '{state="rejected"}': 1, '{state="released"}': 1}
    assert _samples(text, "yunikorn_scheduler_application_submission_total")['{result="accepted"}'] == 1
    assert sum(_samples(text, "yunikorn_scheduler_application_total").values()) == 1
    assert _samples(text, "yunikorn_scheduler_node")['{state="active"}'] == 2
    vcore = _samples(text, "yunikorn_scheduler_vcore_node_usage_total")
    assert vcore['{range="(30%,40%]"}'] == 1 and vcore['{range="[0,10%]"}'] == 1     # 2.5 of 8; 0 of 8
    assert len(vcore) == 10
    res = _samples(text, "yunikorn_queue_resource")
    assert res['{partition="default",queue="root.a",resource="vcore",state="allocated"}'] == 2500
    assert res['{partition="default",queue="root.a",resource="vcore",state="max"}'] == 6000
    old = _samples(text, "yunikorn_root_a_queue_resource")
    assert old['{partition="default",resource="vcore",state="allocated"}'] == 2500
    assert sum(_samples(text, "yunikorn_root_a_queue_app").values()) == 1
    count = next(ln for ln in text.splitlines()
                 if ln.startswith("yunikorn_scheduler_scheduling_latency_milliseconds_count "))
    assert float(count.rsplit(" ", 1)[1]) == 3                  # one per decision
    # quotaplane's own families are still there
    assert "quotaplane_queue_resource{" in text and "quotaplane_admission_duration_seconds_count" in text
