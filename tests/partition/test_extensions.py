"""Elastic and forest policies plugged into the admission path through the partition config
(``elasticquotas`` / ``quotatrees`` extension keys, decision Q2 order queue → user/group → elastic →
forest), with replay through the journal."""

from __future__ import annotations

import json

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from tests.partition.helpers import Clock

BOB = UserGroup("bob", ["ops"])

ELASTIC = """
partitions:
- name: default
  elasticquotas:
    revokeDelay: 10
    quotas: |
      apiVersion: scheduling.sigs.k8s.io/v1alpha1
      kind: ElasticQuota
      metadata:
        name: team-a
        namespace: team-a
      spec:
        max: {cpu: 2}
        min: {cpu: 1}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      resources:
        max: {vcore: 3}
"""

TREE = {
    "kind": "QuotaTree",
    "metadata": {"name": "T"},
    "spec": {"resourceNames": ["cpu"],
             "nodes": {"A": {"parent": "nil", "hard": "true", "quota": {"cpu": "4000"}},
                       "B": {"parent": "A", "hard": "true", "quota": {"cpu": "2000"}}}},
}
FOREST = f"""
partitions:
- name: default
  quotatrees:
    trees:
    - '{json.dumps(TREE)}'
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
"""


def _canon(s: Scheduler) -> str:
    return json.dumps(s.dump_state(), sort_keys=True)


def test_elastic_runtime_and_queue_max_reported_together_and_replayed() -> None:
    j = MemoryJournal()
    clock = Clock()
    s = Scheduler.from_yaml(ELASTIC, store=j, clock=clock)
    p = s.partition("default")
    assert [pol.name for pol in p.policies()][:2] == ["queue", "ugm"] and len(p.policies()) == 3
    p.add_node("n1", Resource({"vcore": 8000}))
    p.add_application("app1", BOB, queue="root.a", tags={"namespace": "team-a"})
    assert p.allocate("app1", "k1", Resource({"vcore": 1500}))
    before = p.dump_state()
    d = p.allocate("app1", "k2", Resource({"vcore": 2000}))
    assert not d.allocated
    assert sorted((v.policy, v.code) for v in d.reasons) == [("elastic", "elastic.runtime"),
                                                            ("queue", "queue.max")]
    assert p.dump_state() == before
    assert p.allocate("app1", "k2", Resource({"vcore": 500}))
    p.release("k1")
    assert _canon(Scheduler.from_yaml(ELASTIC, store=j, clock=clock)) == _canon(s)


def test_elastic_revoke_releases_over_runtime_allocations_through_every_policy() -> None:
    """E5 through the partition: when the cluster shrinks the quota is over its runtime; after the
    delay check_timeouts releases the victims everywhere (queue usage too), journalled."""
    j = MemoryJournal()
    clock = Clock()
    s = Scheduler.from_yaml(ELASTIC, store=j, clock=clock)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 2000}))
    p.add_node("n2", Resource({"vcore": 2000}))
    p.add_application("app1", BOB, queue="root.a", tags={"namespace": "team-a"})
    assert p.allocate("app1", "k1", Resource({"vcore": 1000}), priority=5)
    assert p.allocate("app1", "k2", Resource({"vcore": 1000}), priority=1)
    p.remove_node("n2")
    p.remove_node("n1")
    p.add_node("n3", Resource({"vcore": 1000}))             # runtime now at most 1 core
    out: list[str] = []
    for _ in range(4):
        clock.advance(6)
        out += p.check_timeouts()
    assert "k2: revoked by elastic (team-a)" in out
    assert p.allocation("k2") is None and p.allocation("k1") is not None
    assert p.queues.queue("root.a").allocated == Resource({"vcore": 1000})
    assert _canon(Scheduler.from_yaml(ELASTIC, store=j, clock=clock)) == _canon(s)


def test_forest_quota_violation_and_replay() -> None:
    j = MemoryJournal()
    s = Scheduler.from_yaml(FOREST, store=j, clock=Clock())
    p = s.partition("default")
    assert [pol.name for pol in p.policies()][-1] == "forest"
    p.add_node("n1", Resource({"vcore": 100000}))
    p.add_application("app1", BOB, queue="root.a", tags={"quotaplane.io/tree.T": "B"})
    assert p.allocate("app1", "k1", Resource({"vcore": 2000}))
    d = p.what_if("app1", Resource({"vcore": 3000}))
    assert not d.allocated and [v.code for v in d.reasons] == ["forest.quota"]
    p.release("k1")
    assert p.allocate("app1", "k2", Resource({"vcore": 1000}))
    assert _canon(Scheduler.from_yaml(FOREST, store=j, clock=Clock())) == _canon(s)
