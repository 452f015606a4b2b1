"""A partition running all four policies at once (queue, user/group, elastic, forest; decision Q2).

Shared by the scenario tests: the configuration text, helpers to build a scheduler on a store, and a
canonical form of the full state for restart-equality checks.
"""

from __future__ import annotations

import json
from typing import Any

import quotaplane as qp

TREE: dict[str, Any] = {
    "kind": "QuotaTree", "metadata": {"name": "T"},
    "spec": {"resourceNames": ["vcore"],
             "nodes": {"root": {"parent": "nil", "hard": "true", "quota": {"vcore": "8000"}},
                       "A": {"parent": "root", "hard": "true", "quota": {"vcore": "5000"}},
                       "B": {"parent": "root", "hard": "false", "quota": {"vcore": "3000"}}}},
}

_ELASTIC = """
    quotas:
    - apiVersion: scheduling.sigs.k8s.io/v1alpha1
      kind: ElasticQuota
      metadata:
        name: dept
        labels: {quota.scheduling.koordinator.sh/is-parent: "true"}
      spec: {max: {cpu: 5}, min: {cpu: 4}}
    - apiVersion: scheduling.sigs.k8s.io/v1alpha1
      kind: ElasticQuota
      metadata:
        name: team-a
        namespace: team-a
        labels: {quota.scheduling.koordinator.sh/parent: dept}
      spec: {max: {cpu: 5}, min: {cpu: 1}}
    - apiVersion: scheduling.sigs.k8s.io/v1alpha1
      kind: ElasticQuota
      metadata:
        name: team-c
        namespace: team-c
        labels: {quota.scheduling.koordinator.sh/parent: dept}
      spec: {max: {cpu: 5}, min: {cpu: 1}}
    - apiVersion: scheduling.sigs.k8s.io/v1alpha1
      kind: ElasticQuota
      metadata: {name: team-b, namespace: team-b}
      spec: {max: {cpu: 6}, min: {cpu: 2}}
"""

QUEUES = """
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      resources:
        max: {vcore: 6}
      limits:
      - limit: alice
        users: [alice]
        maxresources: {vcore: 3}
      - limit: dev
        groups: [dev]
        maxapplications: 2
    - name: b
      resources:
        max: {vcore: 10}
    - name: c
"""


def config(queues: str = QUEUES, *, revoke_delay: int = 10) -> str:
    """The full configuration text (``queues`` replaces the queue section for reloads)."""
    return ("partitions:\n- name: default\n  elasticquotas:\n"
            f"    revokeDelay: {revoke_delay}\n{_ELASTIC}"
            f"  quotatrees:\n    trees:\n    - '{json.dumps(TREE)}'\n{queues}")


CONFIG = config()

ALICE = qp.UserGroup("alice", ["dev"])
BOB = qp.UserGroup("bob", ["ops"])
CAROL = qp.UserGroup("carol", ["dev"])


def tags(team: str, node: str | None = None) -> dict[str, str]:
    """Tags mapping an application to an elastic quota (by namespace) and a quota-tree node."""
    out = {"namespace": team}
    if node is not None:
        out["quotaplane.io/tree.T"] = node
    return out


def canon(s: qp.Scheduler) -> str:
    """The scheduler's full state as one canonical JSON string."""
    return json.dumps(s.dump_state(), sort_keys=True)
