"""Fuzzing the Kubernetes conversion: arbitrary JSON-like input raises only ValueError (pods) or
nothing at all (namespace annotations); tags always round-trip through the queue engine's parser."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from quotaplane.k8s import namespace_tags, pod_resource
from quotaplane.queues import parse_si_resource

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6), st.floats(allow_nan=False),
                      st.sampled_from(["1", "100m", "1Gi", "0.5", "-1", "x", "", "1e3", "Always"]))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["cpu", "memory", "requests", "limits", "resources", "name",
                                     "restartPolicy", "containers", "initContainers", "overhead",
                                     "spec", "status", "containerStatuses", "allocatedResources"]),
                    inner, max_size=4)), max_leaves=20)

quantities = st.sampled_from(["1", "250m", "1Gi", "0.5", "129M", "2k"])
containers = st.lists(st.fixed_dictionaries({
    "name": st.sampled_from(["a", "b", "c"]),
    "resources": st.fixed_dictionaries({"requests": st.dictionaries(
        st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), quantities, max_size=3)}),
}, optional={"restartPolicy": st.just("Always")}), max_size=4)


@settings(max_examples=200, deadline=None)
@given(pod=st.dictionaries(st.sampled_from(["spec", "status", "metadata"]), json_value, max_size=3))
def test_pod_resource_raises_only_value_error(pod: dict[str, Any]) -> None:
    try:
        result = pod_resource(pod)
    except ValueError:
        return
    assert result["pods"] == 1


@settings(max_examples=100, deadline=None)
@given(containers=containers, inits=containers)
def test_pod_resource_is_at_least_the_containers_and_each_init_container(
        containers: list[dict[str, Any]], inits: list[dict[str, Any]]) -> None:
    for c in containers:
        c.pop("restartPolicy", None)
    plain = pod_resource({"spec": {"containers": containers}})
    full = pod_resource({"spec": {"containers": containers, "initContainers": inits}})
    for name, amount in plain.items():
        assert full.get(name, 0) >= amount
    for init in inits:
        alone = pod_resource({"spec": {"containers": [init | {"restartPolicy": None}]}})
        for name, amount in alone.items():
            assert full.get(name, 0) >= amount


annotation_keys = st.sampled_from([
    "yunikorn.apache.org/namespace.quota", "yunikorn.apache.org/namespace.max.cpu",
    "yunikorn.apache.org/namespace.max.memory", "yunikorn.apache.org/namespace.guaranteed",
    "yunikorn.apache.org/namespace.maxApps", "yunikorn.apache.org/parentqueue", "other"])
annotation_values = st.one_of(st.text(max_size=30), st.sampled_from([
    '{"cpu":"1"}', '{"cpu":"1","memory":"1G"}', '{"memory":"0"}', "5", "-1", "64", "100Gi"]))


@settings(max_examples=200, deadline=None)
@given(annotations=st.dictionaries(annotation_keys, annotation_values, max_size=6))
def test_namespace_tags_never_raise_and_round_trip(annotations: dict[str, str]) -> None:
    tags = namespace_tags(annotations)
    for key in ("namespace.resourcequota", "namespace.resourceguaranteed"):
        if key in tags:
            parsed = parse_si_resource(tags[key])
            assert parsed is not None and not parsed.is_zero()
    if "namespace.resourcemaxapps" in tags:
        assert int(tags["namespace.resourcemaxapps"]) >= 0
