"""Shared helpers of the preemption tests: the seed 002 world and a notice recorder."""

from __future__ import annotations

from typing import Any

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.partition import Partition

ALICE = UserGroup("alice", ["dev"])


def cpu(n: float) -> Resource:
    """``n`` cores as YuniKorn vcore (milli-cores)."""
    return Resource({"vcore": int(n * 1000)})


def elastic_quota(name: str, min_cpu: int, max_cpu: int) -> str:
    """One ElasticQuota object (YAML) for namespace ``name``."""
    return f"""      ---
      apiVersion: scheduling.sigs.k8s.io/v1alpha1
      kind: ElasticQuota
      metadata:
        name: {name}
        namespace: {name}
      spec:
        min: {{cpu: {min_cpu}}}
        max: {{cpu: {max_cpu}}}
"""


def seed_002_config(*, revoke_delay: int = 10, preemption: bool | None = None) -> str:
    """Seed 002 "Min Guarantee and Preemption": team-a min 1 max 8, team-b min 4 max 8 (cpu)."""
    option = "" if preemption is None else f"    preemption: {str(preemption).lower()}\n"
    return f"""
partitions:
- name: default
  elasticquotas:
    revokeDelay: {revoke_delay}
{option}    quotas: |
{elastic_quota("team-a", 1, 8)}{elastic_quota("team-b", 4, 8)}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: q
"""


class Recorder:
    """A subscriber that keeps every notice."""

    def __init__(self, p: Partition) -> None:
        self.seen: list[dict[str, Any]] = []
        p.subscribe(self.seen.append)

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The notices of one type, in order."""
        return [n for n in self.seen if n["type"] == kind]
