"""Bad input (quality.md "Bad input"): the ElasticQuota reader and the manager raise only their
documented errors, and a refused call changes nothing."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane.elastic import ElasticQuotaManager, QuotaSpec, QuotaValidationError, parse_elastic_quotas

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True),
                    st.text(max_size=12), st.sampled_from(["1Gi", "-3", "250m", "1e3", "0.5", "true", "x"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
label_keys = st.sampled_from([f"quota.scheduling.koordinator.sh/{k}" for k in (
    "parent", "parent-quota-name", "is-parent", "allow-lent-resource", "tree-id", "allow-force-update")])
annotation_keys = st.sampled_from([f"quota.scheduling.koordinator.sh/{k}" for k in (
    "shared-weight", "namespaces", "max-strict-check-resource-keys", "runtime")])
resources = st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", ""]), scalars, max_size=3)


@st.composite
def quota_objects(draw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": draw(st.sampled_from(["scheduling.sigs.k8s.io/v1alpha1", "v1", None])),
        "kind": draw(st.sampled_from(["ElasticQuota", "ElasticQuota", "Pod"])),
        "metadata": {
            "name": draw(st.sampled_from(["a", "b", "p", "", None, 3])),
            "labels": draw(st.dictionaries(label_keys, values, max_size=3) | values),
            "annotations": draw(st.dictionaries(annotation_keys, values, max_size=3)),
        },
        "spec": draw(st.fixed_dictionaries({"min": resources | values, "max": resources | values}) | values),
    }
    return obj


@SETTINGS
@given(st.text(max_size=200))
def test_arbitrary_text_raises_only_quota_validation_error(text: str) -> None:
    try:
        specs = parse_elastic_quotas(text)
    except QuotaValidationError as exc:
        assert exc.rule and exc.quota
    else:
        assert all(isinstance(spec, QuotaSpec) for spec in specs)


@SETTINGS
@given(st.lists(quota_objects(), min_size=1, max_size=3))
def test_arbitrary_objects_raise_only_documented_errors_and_change_nothing(
        objs: list[dict[str, Any]]) -> None:
    e = ElasticQuotaManager({"vcore": 10_000, "memory": 2**34})
    e.upsert("p", min={"vcore": 1000, "memory": 2**30}, max={"vcore": 4000, "memory": 2**32}, is_parent=True)
    before = e.dump_state()
    text = "\n---\n".join(json.dumps(o) for o in objs)
    try:
        e.apply_yaml(text)
    except QuotaValidationError as exc:
        assert exc.rule and exc.quota
        assert e.dump_state() == before
    else:
        full = e.full_recompute()
        assert all(e.runtime(n) == full[n] for n in e.quota_names())


@SETTINGS
@given(st.dictionaries(st.text(max_size=5), st.integers(-5, 10**19) | st.text(max_size=3), max_size=3),
       st.dictionaries(st.text(max_size=5), st.integers(-5, 10**19), max_size=3))
def test_upsert_with_bad_amounts_raises_only_documented_errors(
        mx: dict[str, Any], mn: dict[str, Any]) -> None:
    e = ElasticQuotaManager({"vcore": 10})
    before = e.dump_state()
    try:
        e.upsert("q", min=mn, max=mx)
    except QuotaValidationError:
        assert e.dump_state() == before
