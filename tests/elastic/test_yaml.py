"""ElasticQuota YAML exactly as seed 002 writes it (contract "Elastic quota", "Units")."""

from __future__ import annotations

from pathlib import Path

import pytest

from quotaplane.elastic import ROOT_QUOTA, ElasticQuotaManager, QuotaValidationError, parse_elastic_quotas

V = "vcore"
GPU = "nvidia.com/gpu"

SEED_PARENT = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: parent
  labels:
    quota.scheduling.koordinator.sh/is-parent: true
spec:
  max: {cpu: 40, memory: 80Gi, nvidia.com/gpu: 4}
  min: {cpu: 20, memory: 40Gi, nvidia.com/gpu: 2}
"""

# Verbatim from the seed's "API" section (including `{cpu:4, memory: 8Gi}` without a space).
SEED_EXAMPLE = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: test
  namespace: test
  annotations:
    quota.scheduling.koordinator.sh/runtime: {cpu:4, memory: 8Gi}
    quota.scheduling.koordinator.sh/shared-weight: {cpu:4, memory: 8Gi}
  labels:
    quota.scheduling.koordinator.sh/is-parent: false
    quota.scheduling.koordinator.sh/parent-quota-name: "parent"
    quota.scheduling.koordinator.sh/allow-lent-resource: true
spec:
  max:
    cpu: 20
    memory: 40Gi
    nvidia.com/gpu: 2
  min:
    cpu: 10
    memory: 20Gi
    nvidia.com/gpu: 1
"""


def test_seed_example_is_accepted_as_written() -> None:
    e = ElasticQuotaManager({V: 100_000, "memory": 2**40, GPU: 8})
    e.apply_yaml(SEED_PARENT + "---" + SEED_EXAMPLE)
    spec = e.spec("test")
    assert spec.parent == "parent" and not spec.is_parent and spec.allow_lent
    assert spec.max == {V: 20_000, "memory": 40 * 2**30, GPU: 2}       # cpu → vcore milli
    assert spec.min == {V: 10_000, "memory": 20 * 2**30, GPU: 1}
    # shared-weight given for cpu and memory; the gpu weight defaults to the max (§3.1)
    assert e.dump_state()["quotas"]["test"]["shared_weight"] == {"memory": 8 * 2**30, GPU: 2, V: 4000}
    assert e.children("parent") == ["test"]


def test_both_parent_labels_name_the_parent() -> None:
    """Contract: `parent` (Koordinator's code) and `parent-quota-name` (the seed) are both accepted."""
    a = parse_elastic_quotas(SEED_EXAMPLE)[0]
    b = parse_elastic_quotas(SEED_EXAMPLE.replace("parent-quota-name", "parent"))[0]
    assert a.parent == b.parent == "parent"


def test_conflicting_parent_labels_are_refused() -> None:
    text = SEED_EXAMPLE.replace(
        '    quota.scheduling.koordinator.sh/allow-lent-resource: true',
        '    quota.scheduling.koordinator.sh/allow-lent-resource: true\n'
        '    quota.scheduling.koordinator.sh/parent: other')
    with pytest.raises(QuotaValidationError) as info:
        parse_elastic_quotas(text)
    assert info.value.rule == "parent-label-conflict"


def test_missing_parent_means_root() -> None:
    spec = parse_elastic_quotas(SEED_PARENT)[0]
    assert spec.parent == ROOT_QUOTA and spec.is_parent


def test_shared_weight_as_json_string_or_mapping() -> None:
    """Contract: the shared-weight annotation may be a JSON string or a YAML mapping."""
    key = "quota.scheduling.koordinator.sh/shared-weight:"
    as_json = SEED_EXAMPLE.replace(key + " {cpu:4, memory: 8Gi}",
                                   key + """ '{"cpu": "4", "memory": "8Gi"}'""")
    as_map = SEED_EXAMPLE.replace(key + " {cpu:4, memory: 8Gi}", key + "\n      cpu: 4\n      memory: 8Gi")
    expected = {V: 4000, "memory": 8 * 2**30}
    for text in (as_json, as_map, SEED_EXAMPLE):
        assert parse_elastic_quotas(text)[0].shared_weight == expected


def test_shared_weight_that_is_not_a_mapping_is_refused() -> None:
    text = SEED_EXAMPLE.replace("quota.scheduling.koordinator.sh/shared-weight: {cpu:4, memory: 8Gi}",
                                "quota.scheduling.koordinator.sh/shared-weight: '[1, 2]'")
    with pytest.raises(QuotaValidationError) as info:
        parse_elastic_quotas(text)
    assert info.value.rule == "shared-weight-invalid" and info.value.quota == "test"


def test_labels_as_strings() -> None:
    """Labels are strings in Kubernetes: "true"/"false" spellings work like YAML booleans."""
    text = SEED_EXAMPLE.replace("allow-lent-resource: true", 'allow-lent-resource: "false"').replace(
        "is-parent: false", 'is-parent: "False"')
    spec = parse_elastic_quotas(text)[0]
    assert not spec.allow_lent and not spec.is_parent


def test_namespaces_annotation() -> None:
    text = SEED_PARENT.replace(
        "  labels:",
        "  annotations:\n    quota.scheduling.koordinator.sh/namespaces: '[\"ns-a\", \"ns-b\"]'\n  labels:")
    spec = parse_elastic_quotas(text)[0]
    assert spec.namespaces == ("ns-a", "ns-b")


def test_fractional_and_milli_quantities_round_up() -> None:
    """Contract units: cpu to milli rounded up, other names Value() rounded up."""
    text = SEED_PARENT.replace("{cpu: 40, memory: 80Gi, nvidia.com/gpu: 4}",
                               "{cpu: 250m, memory: 1.5, nvidia.com/gpu: 4}").replace(
        "{cpu: 20, memory: 40Gi, nvidia.com/gpu: 2}", "{cpu: 0.1005, memory: 1, nvidia.com/gpu: 2}")
    spec = parse_elastic_quotas(text)[0]
    assert spec.max == {V: 250, "memory": 2, GPU: 4}
    assert spec.min == {V: 101, "memory": 1, GPU: 2}


def test_wrong_api_version_or_kind_is_refused() -> None:
    for bad in (SEED_PARENT.replace("scheduling.sigs.k8s.io/v1alpha1", "v1"),
                SEED_PARENT.replace("kind: ElasticQuota", "kind: ResourceQuota")):
        with pytest.raises(QuotaValidationError) as info:
            parse_elastic_quotas(bad)
        assert info.value.rule == "document" and info.value.quota == "parent"


def test_negative_quantity_in_yaml_names_quota_and_rule() -> None:
    with pytest.raises(QuotaValidationError) as info:
        parse_elastic_quotas(SEED_PARENT.replace("cpu: 40", "cpu: -40"))
    assert (info.value.quota, info.value.rule) == ("parent", "max-negative")
    assert "cpu" in str(info.value)


def test_unparsable_yaml_and_bad_quantities() -> None:
    with pytest.raises(QuotaValidationError):
        parse_elastic_quotas("a: [unclosed")
    with pytest.raises(QuotaValidationError) as info:
        parse_elastic_quotas(SEED_PARENT.replace("cpu: 40", "cpu: lots"))
    assert info.value.rule == "max-invalid"


def test_list_kind_with_items() -> None:
    text = """
apiVersion: v1
kind: List
items:
- apiVersion: scheduling.sigs.k8s.io/v1alpha1
  kind: ElasticQuota
  metadata: {name: one}
  spec: {max: {cpu: 1}}
"""
    assert [s.name for s in parse_elastic_quotas(text)] == ["one"]


def test_examples_file_is_valid_and_computes() -> None:
    """examples/elastic-quotas.yaml loads; the seed example in milli-cores (finer than whole cores).

    Pool 45000 over 60/50/80: 14210 r100 / 11842 r20 / 18947 r70, residual 1 → B; B needs only 5000
    more, hands back 9211: C 3542 r90 (+1 residual), D 5668 r40 → C 35385, D 39615.
    """
    path = Path(__file__).resolve().parents[2] / "examples" / "elastic-quotas.yaml"
    e = ElasticQuotaManager({V: 100_000, "memory": 400 * 2**30})
    e.apply_yaml(path.read_text())
    for name, cores in (("team-a", 5), ("team-b", 20), ("team-c", 50), ("team-d", 60)):
        e.set_request(name, {V: cores * 1000})
    got = {n: e.runtime(n)[V] for n in ("team-a", "team-b", "team-c", "team-d")}
    assert got == {"team-a": 5000, "team-b": 20000, "team-c": 35385, "team-d": 39615}
    assert e.runtime("research")[V] == 100_000
    assert e.quota_for_pod({}, "team-a-ci") == "team-a"
