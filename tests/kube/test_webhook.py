"""The admission webhooks as pure functions (reference kubernetes-front.md §2): YuniKorn's processPod
order, the gate, identity from userInfo, the namespace filter, the config map check."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from quotaplane.kube.pods import GATE
from quotaplane.kube.webhook import WebhookOptions, managed_namespace, mutate, validate_config_map

USER = {"username": "alice", "groups": ["dev", "system:authenticated"]}


def _review(obj: dict[str, Any], *, operation: str = "CREATE", user: dict[str, Any] | None = None,
            namespace: str = "team-a", old: dict[str, Any] | None = None,
            resource: str = "pods", kind: str = "Pod") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "operation": operation, "namespace": namespace,
                        "kind": {"group": "", "version": "v1", "kind": kind},
                        "resource": {"group": "", "version": "v1", "resource": resource},
                        "userInfo": user or USER, "object": obj, "oldObject": old}}


def _pod(annotations: dict[str, str] | None = None,
         gates: list[dict[str, str]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "team-a"}
    if annotations is not None:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if gates is not None:
        spec["schedulingGates"] = gates
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _patch(answer: dict[str, Any]) -> list[dict[str, Any]]:
    response = answer["response"]
    assert response["uid"] == "u-1" and answer["kind"] == "AdmissionReview"
    if "patch" not in response:
        return []
    assert response["patchType"] == "JSONPatch"
    return list(json.loads(base64.b64decode(response["patch"])))


def test_a_new_pod_gets_the_gate_and_the_submitters_identity() -> None:
    ops = _patch(mutate(_review(_pod())))
    assert ops[0] == {"op": "add", "path": "/metadata/annotations", "value": {
        "yunikorn.apache.org/user.info": '{"user":"alice","groups":["dev","system:authenticated"]}'}}
    assert ops[1] == {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}


def test_existing_gates_are_kept_and_ours_is_not_added_twice() -> None:
    ops = _patch(mutate(_review(_pod(gates=[{"name": "other.io/gate"}]))))
    assert ops[-1] == {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}}
    ops = _patch(mutate(_review(_pod(gates=[{"name": GATE}]))))
    assert all(op["path"] != "/spec/schedulingGates" and not op["path"].startswith("/spec/schedulingGates/")
               for op in ops)


def test_existing_annotations_are_kept_in_the_identity_patch() -> None:
    ops = _patch(mutate(_review(_pod(annotations={"keep": "me"}))))
    assert ops[0]["value"]["keep"] == "me"


def test_a_user_may_not_set_the_identity_annotation_a_trusted_controller_may() -> None:
    info = {"yunikorn.apache.org/user.info": '{"user":"root","groups":["admins"]}'}
    answer = mutate(_review(_pod(annotations=info)))["response"]
    assert answer["allowed"] is False
    assert answer["status"]["message"] == \
        "user alice with groups [dev,system:authenticated] is not allowed to set user annotation"
    controller = {"username": "system:serviceaccount:kube-system:job-controller", "groups": []}
    ops = _patch(mutate(_review(_pod(annotations=info), user=controller)))
    assert [op["path"] for op in ops] == ["/spec/schedulingGates"]       # kept as it is, gated
    bad = {"yunikorn.apache.org/user.info": "not json"}
    assert mutate(_review(_pod(annotations=bad), user=controller))["response"]["allowed"] is False


def test_bypassed_namespaces_pass_unchanged() -> None:
    assert _patch(mutate(_review(_pod(), namespace="kube-system"))) == []
    ns = {"metadata": {"name": "x", "annotations": {"yunikorn.apache.org/namespace.enableYuniKorn": "true"}}}
    opts = WebhookOptions(namespace=lambda name: ns)
    assert managed_namespace(opts, "kube-system")               # the annotation wins
    off = WebhookOptions(process_namespaces=("^team-",))
    assert not managed_namespace(off, "other") and managed_namespace(off, "team-a")


def test_changing_the_identity_on_update_is_refused() -> None:
    old = _pod(annotations={"yunikorn.apache.org/user.info": '{"user":"alice","groups":[]}'})
    new = _pod(annotations={"yunikorn.apache.org/user.info": '{"user":"root","groups":[]}'})
    answer = mutate(_review(new, operation="UPDATE", old=old))["response"]
    assert answer["allowed"] is False and "not allowed" in answer["status"]["message"]
    assert mutate(_review(old, operation="UPDATE", old=old))["response"]["allowed"] is True


def test_other_kinds_pass_and_a_malformed_review_is_an_error() -> None:
    other = _review({"kind": "ConfigMap"}, resource="configmaps", kind="ConfigMap")
    assert mutate(other)["response"]["allowed"]
    with pytest.raises(ValueError, match="uid"):
        mutate({"kind": "AdmissionReview", "request": {"operation": "CREATE"}})


def _config_map(text: str, name: str = "yunikorn-configs", ns: str = "quotaplane-system") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"queues.yaml": text}}


def test_an_invalid_queue_config_map_is_refused_naming_the_line() -> None:
    bad = "partitions:\n- name: default\n  queues:\n  - name: root\n    queues:\n    - name: a\n" \
          "      resources: {max: {vcore: -1}}\n"
    answer = validate_config_map(_review(_config_map(bad), resource="configmaps", kind="ConfigMap",
                                         namespace="quotaplane-system"))["response"]
    assert answer["allowed"] is False and "line" in answer["status"]["message"]
    good = "partitions:\n- name: default\n  queues:\n  - name: root\n"
    assert validate_config_map(_review(_config_map(good), resource="configmaps", kind="ConfigMap",
                                       namespace="quotaplane-system"))["response"]["allowed"]
    other = _config_map(bad, name="something-else")
    assert validate_config_map(_review(other, resource="configmaps", kind="ConfigMap",
                                       namespace="quotaplane-system"))["response"]["allowed"]
