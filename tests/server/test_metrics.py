"""Metrics in YuniKorn's and Kueue's style (issue 17 #4), read from a real app: elastic quota and
quota-tree families, preemptions by reason, build info and the process collectors."""

from __future__ import annotations

import httpx

import quotaplane as qp
from tests.client.test_client import _Server
from tests.partition.helpers import Clock
from tests.preemption.helpers import cpu, seed_002_config
from tests.scenarios.world import ALICE, CONFIG, tags


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
        text = httpx.get(srv.url + "/ws/v1/metrics").text
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
        text = httpx.get(srv.url + "/metrics").text
    finally:
        srv.stop()
    assert _samples(text, "quotaplane_preempted_allocations_total") == {
        '{partition="default",reason="elastic.revoked"}': 4.0}
    s.close()
