"""Kueue's objects as configuration (docs/from-kueue.md): Kueue's own sample manifests and documented
examples, read by the same loader as quotaplane's YAML, give Kueue's documented outcomes; a field with no
counterpart is refused naming the object, the field and the line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from quotaplane.cluster import Scheduler
from quotaplane.config import load_config
from quotaplane.config.identity import UserGroup
from quotaplane.config.kueue import is_kueue, kueue_to_yaml, local_queues
from quotaplane.errors import ConfigError
from quotaplane.journal import MemoryJournal
from quotaplane.partition import Partition
from tests.partition.helpers import Clock

U = UserGroup("u")

#: Kueue's config/samples/single-clusterqueue-setup.yaml (v1beta1)
SINGLE = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: "default-flavor"
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: "cluster-queue"
spec:
  namespaceSelector: {} # match all.
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
      - name: "memory"
        nominalQuota: 36Gi
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  namespace: "default"
  name: "user-queue"
spec:
  clusterQueue: "cluster-queue"
"""


def _cq(name: str, cpu: str, extra: str = "", cohort: str = "cohortName: team-ab",
        version: str = "v1beta2") -> str:
    return f"""
---
apiVersion: kueue.x-k8s.io/{version}
kind: ClusterQueue
metadata:
  name: {name}
spec:
  namespaceSelector: {{}}
  {cohort}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: {cpu}{extra}
"""


FLAVOR = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: default-flavor
"""


def _partition(text: str, nodes: dict[str, int] | None = None) -> Partition:
    s = Scheduler.from_yaml(text, store=MemoryJournal(), clock=Clock())
    p = s.partition("default")
    p.add_node("n", nodes or {"vcore": 100_000, "memory": 2**40})
    return p


def _most(p: Partition, app: str) -> int:
    n = 0
    while p.what_if(app, {"vcore": (n + 1) * 1000}).allocated:
        n += 1
    return n


def test_the_single_clusterqueue_sample_is_read() -> None:
    assert is_kueue(SINGLE) and not is_kueue("partitions: []\n")
    import json as _json

    as_json = _json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
         "metadata": {"name": "default-flavor"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
             {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": "2"}]}]}]}}]})
    assert is_kueue(as_json) and load_config(as_json).partition("default").queue("root.cq") is not None
    cfg = load_config(SINGLE).partition("default")
    cq = cfg.queue("root.cluster-queue")
    assert cq is not None and cq.flavors == ("default-flavor",)
    assert dict(cq.guaranteed or {}) == {"vcore@default-flavor": 9000, "memory@default-flavor": 36 * 2**30}
    assert local_queues(SINGLE) == {("default", "user-queue"): "root.cluster-queue"}
    p = _partition(SINGLE)
    p.add_application("a", U, queue="root.cluster-queue")
    assert _most(p, "a") == 9           # a lone ClusterQueue has its nominal quota and cannot borrow
    d = p.allocate("a", "k", {"vcore": 2000})
    assert d.allocated and d.flavors == {"vcore": "default-flavor"}


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_borrowing_and_lending_examples_of_cluster_queue_md(version: str) -> None:
    """L-ex1 … L-ex3 (docs cluster_queue.md) as Kueue objects: the same numbers as the queue YAML."""
    cohort = "cohort: team-ab" if version == "v1beta1" else "cohortName: team-ab"
    flavor = FLAVOR.replace("v1beta2", version)
    plain = flavor + _cq("team-a", "9", cohort=cohort, version=version) + \
        _cq("team-b", "12", cohort=cohort, version=version)
    p = _partition(plain)
    p.add_application("a", U, queue="root.team-ab.team-a")
    p.add_application("b", U, queue="root.team-ab.team-b")
    assert _most(p, "a") == 21 and _most(p, "b") == 21
    limited = flavor + _cq("team-a", "9", "\n        borrowingLimit: 1", cohort, version) + \
        _cq("team-b", "12", "\n        lendingLimit: 1", cohort, version)
    p = _partition(limited)
    p.add_application("a", U, queue="root.team-ab.team-a")
    p.add_application("b", U, queue="root.team-ab.team-b")
    assert _most(p, "a") == 10 and _most(p, "b") == 21
    assert p.allocate("b", "b1", {"vcore": 12_000})
    assert _most(p, "a") == 9


def test_a_cohort_object_with_its_own_quota_and_parent() -> None:
    """KQ-O4: a Cohort's nominal quota is extra capacity of its subtree; parentName nests it."""
    text = FLAVOR + """
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata:
  name: org
spec:
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: 5
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata:
  name: team-ab
spec:
  parentName: org
  fairSharing: {weight: 500m}
""" + _cq("team-a", "2")
    cfg = load_config(text).partition("default")
    org = cfg.queue("root.org")
    team = cfg.queue("root.org.team-ab")
    assert org is not None and dict(org.guaranteed or {}) == {"vcore@default-flavor": 7000}
    assert dict(org.max or {}) == {"vcore@default-flavor": 7000}
    assert team is not None and team.properties["fairsharing.weight"] == "0.5"
    p = _partition(text)
    p.add_application("a", U, queue="root.org.team-ab.team-a")
    assert _most(p, "a") == 7


def test_a_v1alpha1_cohort_is_read() -> None:
    """Cohort objects were ``kueue.x-k8s.io/v1alpha1`` before they reached v1beta1."""
    text = FLAVOR + _cq("a", "3") + """
---
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Cohort
metadata: {name: team-ab}
spec: {parentName: org}
"""
    cfg = load_config(text).partition("default")
    assert cfg.queue("root.org.team-ab.a") is not None
    wrong = text.replace("kind: Cohort", "kind: ClusterQueue")
    assert any("is not Kueue's" in r for _, r in _problems(wrong))


def test_fair_sharing_and_preemption_come_from_the_objects() -> None:
    text = """
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
fairSharing:
  enable: true
  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
---
""" + FLAVOR + _cq("a", "3", """
  preemption:
    withinClusterQueue: LowerPriority
    reclaimWithinCohort: Any
  fairSharing:
    weight: "2"
  flavorFungibility:
    whenCanBorrow: TryNextFlavor""")
    cfg = load_config(text).partition("default")
    assert cfg.fair_sharing is not None and cfg.fair_sharing.enabled
    a = cfg.queue("root.team-ab.a")
    assert a is not None
    assert dict(a.properties) == {"fairsharing.weight": "2", "preemption.reclaimwithincohort": "Any",
                                  "preemption.withinclusterqueue": "LowerPriority"}
    assert a.flavor_fungibility is not None and a.flavor_fungibility.when_can_borrow == "TryNextFlavor"


def test_gpu_flavors_with_labels_taints_and_tolerations() -> None:
    text = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {nvidia.com/gpu.product: A100}
  nodeTaints: [{key: dedicated, value: a100, effect: NoSchedule, timeAdded: "2024-01-01T00:00:00Z"}]
  tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule, tolerationSeconds: 10}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels: {nvidia.com/gpu.product: H100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: training}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 2}]
"""
    cfg = load_config(text).partition("default")
    a100 = cfg.resource_flavors[0]
    assert dict(a100.node_labels) == {"nvidia.com/gpu.product": "A100"}
    assert a100.resources == ("nvidia.com/gpu",)
    s = Scheduler.from_yaml(text, store=MemoryJournal(), clock=Clock())
    p = s.partition("default")
    p.add_node("na", {"nvidia.com/gpu": 8}, labels={"nvidia.com/gpu.product": "A100"})
    p.add_node("nh", {"nvidia.com/gpu": 8}, labels={"nvidia.com/gpu.product": "H100"})
    p.add_application("a", U, queue="root.training")
    assert p.allocate("a", "k1", {"nvidia.com/gpu": 4}, tolerations=[
        {"key": "dedicated", "operator": "Exists"}]).flavors == {"nvidia.com/gpu": "a100"}
    d = p.allocate("a", "k2", {"nvidia.com/gpu": 2})
    assert d.allocated and d.flavors == {"nvidia.com/gpu": "h100"}
    assert not p.allocate("a", "k3", {"nvidia.com/gpu": 1}).allocated


def _problems(text: str) -> list[tuple[int | None, str]]:
    with pytest.raises(ConfigError) as info:
        load_config(text)
    return info.value.problems


@pytest.mark.parametrize(("change", "line", "words"), [
    ("  queueingStrategy: StrictFIFO\n", 12,
     "ClusterQueue 'cluster-queue': spec.queueingStrategy 'StrictFIFO'"),
    ("  stopPolicy: Hold\n", 12, "spec.stopPolicy 'Hold': only None"),
    ("  admissionChecks: [prov]\n", 12, "admission checks have no counterpart"),
    ("  preemption: {borrowWithinCohort: {policy: LowerPriority}}\n", 12, "borrowWithinCohort"),
    ("  colour: blue\n", 12, "unknown field spec.colour"),
])
def test_fields_without_counterpart_are_refused_with_their_line(change: str, line: int, words: str) -> None:
    text = SINGLE.replace("  namespaceSelector: {} # match all.\n", change)
    found = _problems(text)
    assert any(ln == line and words in reason for ln, reason in found), found


def test_structural_problems_name_object_and_field() -> None:
    assert any("nominalQuota is required" in r for _, r in _problems(SINGLE.replace("nominalQuota: 9", "")))
    wrong_order = SINGLE.replace('coveredResources: ["cpu", "memory"]', 'coveredResources: ["memory", "cpu"]')
    assert any("must list memory, cpu, in that order" in r for _, r in _problems(wrong_order))
    assert any("clusterQueue 'nope' is not defined" in r
               for _, r in _problems(SINGLE.replace('clusterQueue: "cluster-queue"', 'clusterQueue: "nope"')))
    lone_limit = SINGLE.replace("nominalQuota: 9", "nominalQuota: 9\n        borrowingLimit: 1")
    assert any("must be nil when cohort is empty" in r for _, r in _problems(lone_limit))
    over = FLAVOR + _cq("a", "9", "\n        lendingLimit: 11")
    assert any("less than or equal to the nominalQuota" in r for _, r in _problems(over))
    assert any("kind 'Workload' has no counterpart" in r
               for _, r in _problems(SINGLE + "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\n"))
    assert any("no ResourceFlavor defines it" in r for _, r in _problems(_cq("a", "1")))
    cycle = FLAVOR + _cq("a", "1", cohort="cohortName: x") + """
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: x}
spec: {parentName: y}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: y}
spec: {parentName: x}
"""
    assert any("makes a cycle" in r for _, r in _problems(cycle))


def test_the_conversion_is_printable_queue_yaml() -> None:
    out = kueue_to_yaml(textwrap.dedent(SINGLE), partition="gpu")
    assert out.startswith("partitions:\n  - name: gpu\n")
    assert load_config(out).partition("gpu").queue("root.cluster-queue") is not None


def test_the_cli_prints_the_conversion_and_validate_reads_kueue_files(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from quotaplane.cli import app

    good = tmp_path / "kueue.yaml"
    good.write_text(SINGLE)
    runner = CliRunner()
    r = runner.invoke(app, ["from-kueue", str(good), "--partition", "gpu"])
    assert r.exit_code == 0 and "  - name: gpu\n" in r.output and "cluster-queue" in r.output
    r = runner.invoke(app, ["validate", str(good)])
    assert r.exit_code == 0 and r.output.strip() == f"{good}: ok"
    bad = tmp_path / "bad.yaml"
    bad.write_text(SINGLE.replace("  namespaceSelector: {} # match all.\n", "  stopPolicy: Hold\n"))
    r = runner.invoke(app, ["validate", str(bad)])
    assert r.exit_code == 1 and f"{bad}:12: ClusterQueue 'cluster-queue': spec.stopPolicy 'Hold'" in r.output
    r = runner.invoke(app, ["from-kueue", str(bad)])
    assert r.exit_code == 1


def test_local_queues_place_pods_labelled_with_kueue_queue_name() -> None:
    """A LocalQueue names the ClusterQueue its namespace submits to: a pod labelled
    ``kueue.x-k8s.io/queue-name`` goes to that ClusterQueue's queue (the Kubernetes front's placement)."""
    from quotaplane.config.kueue import local_queue_map
    from quotaplane.k8s.convert import pod_queue

    cfg = load_config(SINGLE).partition("default")
    mapping = local_queue_map(cfg.extensions)
    assert mapping == {("default", "user-queue"): "root.cluster-queue"}
    pod = {"metadata": {"namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}}}
    assert pod_queue(pod, mapping) == "root.cluster-queue"
    assert pod_queue(pod) is None                                       # no LocalQueues: placement decides
    other = {"metadata": {"namespace": "team-b", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}}}
    assert pod_queue(other, mapping) is None                            # a LocalQueue is per namespace
    yunikorn = {"metadata": {"namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "user-queue",
                                                                "queue": "root.other"}}}
    assert pod_queue(yunikorn, mapping) == "root.other"                 # YuniKorn's own label first


def test_localqueues_in_queue_yaml_name_leaf_queues() -> None:
    text = """
partitions:
  - name: default
    localqueues:
      - {namespace: ns, name: lq, queue: root.a}
      - {namespace: ns, name: lq2, queue: root.nope}
      - {namespace: ns, name: lq, queue: root.a}
    queues:
      - name: root
        queues:
          - name: a
"""
    found = _problems(text)
    assert (6, "local queue 2 of partition 'default' needs a namespace, a name and the path of a leaf "
               "queue (got 'ns', 'lq2', 'root.nope')") in found
    assert any(ln == 7 and "ns/lq is listed twice" in r for ln, r in found)


def test_the_rest_service_takes_kueue_objects_as_configuration() -> None:
    """PUT /ws/v1/config and validate-conf read Kueue's objects; the running configuration is shown in
    YuniKorn's JSON as the queue configuration they map to."""
    from fastapi.testclient import TestClient

    from quotaplane.server.app import create_app

    s = Scheduler.from_yaml("partitions:\n- name: default\n  queues:\n  - name: root\n    submitacl: '*'\n")
    try:
        with TestClient(create_app(s), raise_server_exceptions=False) as c:
            bad = SINGLE.replace("  namespaceSelector: {} # match all.\n", "  stopPolicy: Hold\n")
            r = c.post("/ws/v1/validate-conf", content=bad)
            assert r.status_code == 200 and r.json()["allowed"] is False
            assert "spec.stopPolicy 'Hold'" in r.json()["reason"]
            assert c.put("/ws/v1/config", content=bad).status_code == 400
            assert c.put("/ws/v1/config", content=SINGLE).status_code == 200
            r = c.get("/ws/v1/config", headers={"accept": "application/json"})
            assert r.status_code == 200
            queues = r.json()["Partitions"][0]["Queues"][0]["Queues"]
            assert [q["Name"] for q in queues] == ["cluster-queue"]
            r = c.get("/ws/v1/partition/default/queue/root.cluster-queue")
            assert r.status_code == 200, r.text
    finally:
        s.close()
