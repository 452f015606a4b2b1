"""Borrowing and lending limits on elastic quotas (issue: "on elastic quotas they replace the on/off
allow-lent-resource, which stays as the special case 0 / unlimited"; docs/elastic-quota.md): the
``lending-limit`` annotation keeps ``min − limit`` of an idle quota's min for it, ``borrowing-limit``
caps its runtime at ``min + limit``."""

from __future__ import annotations

import json

import pytest

from quotaplane.elastic import ElasticQuotaManager
from quotaplane.elastic.errors import QuotaValidationError

PREFIX = "quota.scheduling.koordinator.sh/"


def _quota(name: str, min_cpu: int, *, labels: dict[str, str] | None = None,
           annotations: dict[str, str] | None = None) -> str:
    return json.dumps({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                       "metadata": {"name": name, "namespace": "ns", "labels": labels or {},
                                    "annotations": annotations or {}},
                       "spec": {"min": {"cpu": str(min_cpu)}, "max": {"cpu": "10"}}})


def _runtime_of_b(a_labels: dict[str, str] | None = None, a_annotations: dict[str, str] | None = None,
                  b_annotations: dict[str, str] | None = None) -> int:
    """a (min 6) idle, b (min 4) asking for 10 of a 10-core cluster: b's runtime in cores."""
    m = ElasticQuotaManager({"vcore": 10_000})
    m.apply_yaml(_quota("a", 6, labels=a_labels, annotations=a_annotations) + "\n---\n"
                 + _quota("b", 4, annotations=b_annotations))
    for i in range(10):
        m.add_pod("b", f"b{i}", {"vcore": 1000})
    return m.runtime("b").get("vcore", 0) // 1000


def test_a_lending_limit_keeps_the_rest_of_the_min() -> None:
    assert _runtime_of_b() == 10                                            # a lends everything
    assert _runtime_of_b(a_annotations={PREFIX + "lending-limit": '{"cpu": "2"}'}) == 6    # keeps 4
    assert _runtime_of_b(a_annotations={PREFIX + "lending-limit": '{"cpu": "0"}'}) == 4    # keeps 6
    # allow-lent-resource: false is the special case lending limit 0
    assert _runtime_of_b(a_labels={PREFIX + "allow-lent-resource": "false"}) == 4
    assert _runtime_of_b(a_annotations={PREFIX + "lending-limit": '{"cpu": "9"}'}) == 10   # above min


def test_a_borrowing_limit_caps_the_runtime_above_min() -> None:
    assert _runtime_of_b(b_annotations={PREFIX + "borrowing-limit": '{"cpu": "1"}'}) == 5
    assert _runtime_of_b(b_annotations={PREFIX + "borrowing-limit": '{"cpu": "0"}'}) == 4


def test_a_bad_limit_names_the_quota_and_the_annotation() -> None:
    with pytest.raises(QuotaValidationError, match="lending-limit"):
        _runtime_of_b(a_annotations={PREFIX + "lending-limit": '["cpu"]'})
