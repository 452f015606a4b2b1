"""Kubernetes conversion K8-1 … K8-3 and namespace annotations → tags (reference §1.14), on the real
manifests in examples/k8s/."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from quotaplane import k8s, queues
from quotaplane.k8s import (
    admission_review_request,
    application_tags,
    namespace_tags,
    pod_application_id,
    pod_queue,
    pod_resource,
    si_resource_json,
)
from quotaplane.queues import parse_si_resource

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "k8s"
GI = 2**30
MI = 2**20


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return data


# K8-1 / K8-2 -------------------------------------------------------------------------------------------
def test_k8_1_seed_example_single_container() -> None:
    assert pod_resource(load("pod-seed-example.json")) == {
        "vcore": 250, "memory": 1_073_741_824, "hugepages-1Gi": 1, "pods": 1}


@pytest.mark.parametrize(("cpu", "vcore"), [("0.5", 500), ("0.33", 330), ("100m", 100), ("1", 1000),
                                            ("0.0001", 1), (2, 2000)])
def test_k8_2_cpu_to_milli_rounded_up(cpu: Any, vcore: int) -> None:
    pod = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}
    assert pod_resource(pod) == {"vcore": vcore, "pods": 1}


@pytest.mark.parametrize(("memory", "value"), [("129M", 129_000_000), ("123Mi", 128_974_848),
                                               ("1Gi", 1_073_741_824), ("0.5", 1), ("1500m", 2)])
def test_k8_2_memory_value_rounded_up(memory: str, value: int) -> None:
    pod = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": memory}}}]}}
    assert pod_resource(pod)["memory"] == value


def test_k8_2_invalid_quantity_is_a_value_error() -> None:
    pod = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "64MiB"}}}]}}
    with pytest.raises(ValueError, match="memory"):
        pod_resource(pod)


# K8-3 ---------------------------------------------------------------------------------------------------
def test_k8_3_reference_example_two_containers() -> None:
    # TestParsePodResource: (500M, 1 cpu, 1 gpu) + (1024M, 2, 4)
    assert pod_resource(load("pod-two-containers.json")) == {
        "memory": 1_524_000_000, "vcore": 3000, "nvidia.com/gpu": 5, "pods": 1}


def test_k8_3_reference_example_with_overhead() -> None:
    assert pod_resource(load("pod-with-overhead.json")) == {
        "memory": 2_024_000_000, "vcore": 4000, "nvidia.com/gpu": 6, "pods": 1}


def test_k8_3_init_containers_and_sidecars() -> None:
    # containers + sidecars = 1300m / 448Mi; init "migrate" = 2 cpu + 100m sidecar before it;
    # init "warmup" = 1Gi + both sidecars (192Mi) -> max per name
    assert pod_resource(load("pod-init-sidecar.json")) == {
        "vcore": 2100, "memory": 1216 * MI, "pods": 1}


def test_k8_3_init_container_smaller_than_containers_does_not_count() -> None:
    pod = {"spec": {"initContainers": [{"name": "i", "resources": {"requests": {"cpu": "100m"}}}],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    assert pod_resource(pod) == {"vcore": 1000, "pods": 1}
    # an init container adds names the containers do not request
    pod["spec"]["initContainers"][0]["resources"]["requests"]["example.com/foo"] = "3"
    assert pod_resource(pod) == {"vcore": 1000, "example.com/foo": 3, "pods": 1}


def test_k8_3_sidecar_counts_for_the_whole_pod() -> None:
    pod = {"spec": {"initContainers": [{"name": "s", "restartPolicy": "Always",
                                        "resources": {"requests": {"cpu": "500m"}}}],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    assert pod_resource(pod) == {"vcore": 1500, "pods": 1}


def test_k8_3_pod_level_requests_override_and_overhead_added() -> None:
    assert pod_resource(load("pod-level-resources.json")) == {
        "vcore": 3250, "memory": 2 * GI, "nvidia.com/gpu": 1, "pods": 1}


def test_k8_3_status_resources_max_with_spec() -> None:
    assert pod_resource(load("pod-resized.json")) == {"vcore": 1500, "memory": 2 * GI, "pods": 1}


def test_k8_3_limits_default_the_requests() -> None:
    assert pod_resource(load("pod-limits-only.json")) == {"vcore": 1000, "memory": 512 * MI, "pods": 1}


def test_k8_3_empty_pod_is_one_pod() -> None:
    assert pod_resource({}) == {"pods": 1}
    assert pod_resource({"spec": {"containers": [{"name": "c"}]}}) == {"pods": 1}


# namespace annotations -> tags -------------------------------------------------------------------
def test_tag_constants_match_the_queue_engine() -> None:
    assert k8s.TAG_RESOURCE_QUOTA == queues.TAG_RESOURCE_QUOTA
    assert k8s.TAG_RESOURCE_GUARANTEED == queues.TAG_RESOURCE_GUARANTEED
    assert k8s.TAG_MAX_APPS == queues.TAG_MAX_APPS


def test_namespace_quota_annotation_gives_si_json_tags() -> None:
    tags = namespace_tags(load("namespace-quota.json"))
    assert tags["namespace.resourcequota"] == (
        '{"resources":{"memory":{"value":100000000000},"nvidia.com/gpu":{"value":1},'
        '"vcore":{"value":64000}}}')
    assert parse_si_resource(tags["namespace.resourcequota"]) == {
        "vcore": 64000, "memory": 100_000_000_000, "nvidia.com/gpu": 1}
    assert parse_si_resource(tags["namespace.resourceguaranteed"]) == {"vcore": 8000, "memory": 10**10}
    assert tags["namespace.resourcemaxapps"] == "5"
    assert "namespace.parentqueue" not in tags


def test_reference_example_quota() -> None:
    tags = namespace_tags({"yunikorn.apache.org/namespace.quota":
                           '{"cpu":"1","memory":"64M","nvidia.com/gpu":"1"}'})
    assert parse_si_resource(tags["namespace.resourcequota"]) == {
        "vcore": 1000, "memory": 64_000_000, "nvidia.com/gpu": 1}


def test_deprecated_annotations() -> None:
    tags = namespace_tags(load("namespace-deprecated.json"))
    assert parse_si_resource(tags["namespace.resourcequota"]) == {"vcore": 64000, "memory": 100 * GI}
    only_cpu = namespace_tags({"yunikorn.apache.org/namespace.max.cpu": "2"})
    assert parse_si_resource(only_cpu["namespace.resourcequota"]) == {"vcore": 2000}
    # either one failing gives no quota
    assert namespace_tags({"yunikorn.apache.org/namespace.max.cpu": "2",
                           "yunikorn.apache.org/namespace.max.memory": "lots"}) == {}


def test_new_annotation_wins_over_deprecated() -> None:
    tags = namespace_tags({"yunikorn.apache.org/namespace.quota": '{"cpu":"5"}',
                           "yunikorn.apache.org/namespace.max.cpu": "64",
                           "yunikorn.apache.org/namespace.max.memory": "1G"})
    assert parse_si_resource(tags["namespace.resourcequota"]) == {"vcore": 5000}


@pytest.mark.parametrize("bad", ["expecting JSON object", '{"cpu": 5}', "[]", '{"cpu":"1x"}',
                                 '{"cpu":"0"}', '{"cpu":"-1"}'])
def test_bad_or_zero_quota_annotation_is_ignored(bad: str) -> None:
    assert namespace_tags({"yunikorn.apache.org/namespace.quota": bad,
                           "yunikorn.apache.org/namespace.guaranteed": bad}) == {}


@pytest.mark.parametrize(("value", "expected"), [("0", "0"), ("12", "12"), ("-5", None), ("error", None),
                                                 ("1.5", None), ("", None)])
def test_max_apps_annotation(value: str, expected: str | None) -> None:
    tags = namespace_tags({"yunikorn.apache.org/namespace.maxApps": value})
    assert tags.get("namespace.resourcemaxapps") == expected


def test_parent_queue_annotation_and_application_tags() -> None:
    ns = load("namespace-finance.json")
    assert namespace_tags(ns) == {"namespace.parentqueue": "root.production"}
    pod = load("pod-init-sidecar.json")
    assert application_tags(pod, ns) == {"namespace": "finance", "namespace.parentqueue": "root.production"}
    # a pod without a namespace takes the namespace object's name, then "default"
    assert application_tags({}, ns)["namespace"] == "finance"
    assert application_tags({}) == {"namespace": "default"}


def test_si_resource_json_round_trip() -> None:
    assert si_resource_json({"vcore": 5000, "memory": 64_000_000}) == \
        '{"resources":{"memory":{"value":64000000},"vcore":{"value":5000}}}'
    assert si_resource_json({"x": 0}) == '{"resources":{"x":{}}}'
    assert parse_si_resource(si_resource_json({"x": 0, "y": 3})) == {"x": 0, "y": 3}


# pod metadata and AdmissionReview ---------------------------------------------------------------
def test_pod_application_id_and_queue() -> None:
    pod = load("pod-two-containers.json")
    assert pod_application_id(pod) == "app-00001" and pod_queue(pod) == "root.sandbox"
    assert pod_application_id(load("pod-init-sidecar.json")) == "etl-42"
    assert pod_application_id(load("pod-with-overhead.json")) == "yunikorn-default-autogen"
    assert pod_queue(load("pod-with-overhead.json")) is None


def test_admission_review_request() -> None:
    review = load("admission-review.json")
    pod, namespace = admission_review_request(review)
    assert namespace == "finance"
    assert pod_resource(pod) == {"vcore": 1500, "memory": 3 * GI, "pods": 1}
    assert pod_application_id(pod) == "etl-7"
    no_ns = copy.deepcopy(review)
    del no_ns["request"]["namespace"]
    assert admission_review_request(no_ns)[1] == "default"


@pytest.mark.parametrize("mutate", ["no-request", "no-object", "not-a-pod", "not-a-dict"])
def test_admission_review_request_errors(mutate: str) -> None:
    review: Any = load("admission-review.json")
    if mutate == "no-request":
        del review["request"]
    elif mutate == "no-object":
        review["request"]["object"] = None
    elif mutate == "not-a-pod":
        review["request"]["kind"]["kind"] = "Deployment"
    else:
        review = ["x"]
    with pytest.raises(ValueError):
        admission_review_request(review)


def test_malformed_names_and_sections_are_tolerated() -> None:
    pod = {"spec": {"containers": [{"name": {"x": 1}, "resources": {"requests": {"cpu": "1"}}},
                                   "not-a-container", {"resources": ["bad"]}]},
           "status": {"containerStatuses": [{"name": {"a": 1}}, None]}}
    assert pod_resource(pod) == {"vcore": 1000, "pods": 1}


def test_k8_3_pod_level_limits_default_the_pod_level_requests() -> None:
    pod = {"spec": {"resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1"}},
                    "containers": [{"name": "c",
                                    "resources": {"requests": {"cpu": "100m", "memory": "1Mi"}}}]}}
    assert pod_resource(pod) == {"vcore": 1000, "memory": GI, "pods": 1}
