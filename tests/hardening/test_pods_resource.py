"""Issue 14 #9: a converted pod asks for ``pods: 1``; when no node reports ``pods`` the refusal says so.

What YuniKorn does, and what quotaplane follows: the root queue's max is the cluster size and the root
check is strict (``Queue.allocatedResFits``: ``maxResource.FitIn`` on the root, "reject a new
allocation if it asks for resources not registered"; reference M-2, R-7), so a resource no node
reports does not fit. A Kubernetes node always reports ``pods`` in its allocatable, so with real nodes
the pod count is limited by the cluster's pod capacity. What was wrong is that the refusal did not say
that ``pods`` was the cause, and that the README registered nodes without ``pods``.
"""

from __future__ import annotations

import re
from pathlib import Path

import quotaplane as qp
from quotaplane.k8s.convert import pod_resource
from tests.hardening.helpers import TEAM_CONFIG

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}
CONFIG = TEAM_CONFIG
README = Path(__file__).resolve().parents[2] / "README.md"


def _partition(node: dict[str, int]) -> qp.Partition:
    p = qp.Scheduler.from_yaml(CONFIG).partition("default")
    p.add_node("n1", node)
    p.add_application("app", qp.UserGroup("alice", []), queue="root.team")
    return p


def test_a_pod_on_nodes_without_pods_is_refused_naming_pods() -> None:
    p = _partition({"vcore": 8000, "memory": 2**35})
    d = p.allocate("app", "k", pod_resource(POD))
    assert not d.allocated
    (v,) = d.reasons
    assert v.code == "root.capacity"
    assert dict(v.resource) == {"pods": 1}
    assert "no node reports pods" in v.message


def test_a_pod_on_nodes_reporting_pods_is_admitted_and_counted() -> None:
    p = _partition({"vcore": 8000, "memory": 2**35, "pods": 2})
    assert p.allocate("app", "k1", pod_resource(POD)).allocated
    assert p.allocate("app", "k2", pod_resource(POD)).allocated
    refused = p.allocate("app", "k3", pod_resource(POD))      # the pod count is a limit like any other
    assert not refused.allocated and dict(refused.reasons[0].resource) == {"pods": 1}
    assert "no node reports" not in refused.reasons[0].message


def test_the_readme_registers_nodes_with_pods() -> None:
    text = README.read_text()
    registrations = re.findall(r"add_node\([^)]*\)\)|node/node-1 -d '[^']*'", text)
    assert registrations
    assert all("pods" in r for r in registrations), registrations
