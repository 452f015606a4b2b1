"""Issue 32 item 6: who is charged comes from who created the workload, and nothing a user can set skips
the gate — tested with AdmissionReview payloads as the apiserver sends them (admission.k8s.io/v1,
every field of the request, the objects as stored), through the webhooks' HTTP routes."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import pytest
from starlette.testclient import TestClient

from quotaplane.kube.http import webhook_app
from quotaplane.kube.webhook import WebhookOptions

INFO = "yunikorn.apache.org/user.info"
ALICE = {"username": "alice", "uid": "4c2f-alice", "groups": ["dev", "system:authenticated"],
         "extra": {"authentication.kubernetes.io/credential-id": ["X509SHA256=ab12"]}}
DEPLOYMENT_CONTROLLER = {"username": "system:serviceaccount:kube-system:deployment-controller",
                         "uid": "9e1a",
                         "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                                    "system:authenticated"]}
GROUPS = {"Deployment": ("apps", "deployments"), "DaemonSet": ("apps", "daemonsets"),
          "StatefulSet": ("apps", "statefulsets"), "ReplicaSet": ("apps", "replicasets"),
          "Job": ("batch", "jobs"), "CronJob": ("batch", "cronjobs"), "Pod": ("", "pods")}


def review(obj: dict[str, Any], *, operation: str = "CREATE", user: dict[str, Any] | None = None,
           old: dict[str, Any] | None = None) -> dict[str, Any]:
    """An AdmissionReview as kube-apiserver v1.36 sends it."""
    kind = obj["kind"]
    group, resource = GROUPS[kind]
    version = "v1"
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": resource}
    options = {"apiVersion": "meta.k8s.io/v1",
               "kind": "CreateOptions" if operation == "CREATE" else "UpdateOptions",
               "fieldManager": "kubectl-client-side-apply", "fieldValidation": "Strict"}
    return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "kind": gvk, "resource": gvr,
        "requestKind": gvk, "requestResource": gvr, "name": obj["metadata"].get("name", ""),
        "namespace": obj["metadata"]["namespace"], "operation": operation, "userInfo": user or ALICE,
        "object": obj, "oldObject": old, "dryRun": False, "options": options}}


def template(annotations: dict[str, str] | None = None, *, metadata: bool = True) -> dict[str, Any]:
    t: dict[str, Any] = {"spec": {"containers": [{"name": "main", "image": "busybox",
                                                  "resources": {"requests": {"cpu": "1"}}}],
                                  "restartPolicy": "Never"}}
    if metadata:
        t["metadata"] = {"labels": {"app": "train"}}
        if annotations is not None:
            t["metadata"]["annotations"] = annotations
    return t


def workload(kind: str, annotations: dict[str, str] | None = None, *, metadata: bool = True
             ) -> dict[str, Any]:
    api = "batch/v1" if kind in ("Job", "CronJob") else "apps/v1"
    spec: dict[str, Any] = {"template": template(annotations, metadata=metadata)}
    if kind == "CronJob":
        spec = {"schedule": "*/5 * * * *", "jobTemplate": {"spec": spec}}
    elif kind != "Job":
        spec["selector"] = {"matchLabels": {"app": "train"}}
    return {"apiVersion": api, "kind": kind, "metadata": {"name": "train", "namespace": "team-a"},
            "spec": spec}


@pytest.fixture
def client() -> TestClient:
    return TestClient(webhook_app(WebhookOptions()))


def answer(client: TestClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = client.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})
    assert r.status_code == 200
    out = r.json()
    assert out["kind"] == "AdmissionReview" and out["response"]["uid"] == body["request"]["uid"]
    return dict(out["response"])


def patched(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    if "patch" not in response:
        return obj
    assert response["patchType"] == "JSONPatch"
    return dict(jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"]))))


def pod_template_of(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]["jobTemplate"]["spec"] if obj["kind"] == "CronJob" else obj["spec"]
    return dict(spec["template"])


@pytest.mark.parametrize("kind", ["Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob"])
def test_a_workloads_pod_template_carries_its_creator(client: TestClient, kind: str) -> None:
    obj = workload(kind, {"keep": "me"})
    response = answer(client, "/mutate", review(obj))
    assert response["allowed"] is True
    stamped = pod_template_of(patched(obj, response))["metadata"]["annotations"]
    assert stamped["keep"] == "me"
    assert json.loads(stamped[INFO]) == {"user": "alice", "groups": ["dev", "system:authenticated"]}


def test_a_template_without_metadata_gets_it(client: TestClient) -> None:
    obj = workload("Job", metadata=False)
    stamped = pod_template_of(patched(obj, answer(client, "/mutate", review(obj))))
    assert json.loads(stamped["metadata"]["annotations"][INFO])["user"] == "alice"


@pytest.mark.parametrize("kind", ["Deployment", "Job", "CronJob"])
def test_a_user_cannot_choose_who_is_charged_through_a_template(client: TestClient, kind: str) -> None:
    obj = workload(kind, {INFO: '{"user":"root","groups":["admins"]}'})
    response = answer(client, "/mutate", review(obj))
    assert response["allowed"] is False
    assert response["status"]["message"] == \
        "user alice with groups [dev,system:authenticated] is not allowed to set user annotation"


def test_a_deployments_replica_set_is_left_as_its_deployment_stamped_it(client: TestClient) -> None:
    stamped = {INFO: '{"user":"alice","groups":["dev"]}'}
    obj = workload("ReplicaSet", stamped)
    response = answer(client, "/mutate", review(obj, user=DEPLOYMENT_CONTROLLER))
    assert response["allowed"] is True and "patch" not in response


def test_the_pods_of_a_stamped_template_keep_the_creator(client: TestClient) -> None:
    """The ReplicaSet controller (trusted) creates the pod from the stamped template: the identity is
    the Deployment's creator, and the pod is gated."""
    rs = {"username": "system:serviceaccount:kube-system:replicaset-controller", "groups": []}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"generateName": "train-7d9f-", "namespace": "team-a",
                        "annotations": {INFO: '{"user":"alice","groups":["dev"]}'},
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                             "name": "train-7d9f", "uid": "1", "controller": True}]},
           "spec": template()["spec"]}
    out = patched(pod, answer(client, "/mutate", review(pod, user=rs)))
    assert json.loads(out["metadata"]["annotations"][INFO])["user"] == "alice"
    assert out["spec"]["schedulingGates"] == [{"name": "quotaplane.io/admission"}]


@pytest.mark.parametrize("labels", [{"app": "quotaplane"}, {"quotaplane.io/skip": "true"}])
def test_no_label_a_user_sets_skips_the_gate(client: TestClient, labels: dict[str, str]) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "team-a", "labels": labels}, "spec": template()["spec"]}
    out = patched(pod, answer(client, "/mutate", review(pod)))
    assert out["spec"]["schedulingGates"] == [{"name": "quotaplane.io/admission"}]


def test_skipping_is_configuration(client: TestClient) -> None:
    bypassing = TestClient(webhook_app(WebhookOptions(bypass_namespaces=("^team-a$",))))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
           "spec": template()["spec"]}
    assert "patch" not in answer(bypassing, "/mutate", review(pod))
    assert "patch" not in answer(bypassing, "/mutate", review(workload("Deployment")))


@pytest.mark.parametrize("kind", ["Pod", "Deployment", "Job", "CronJob"])
def test_the_identity_cannot_change_on_update(client: TestClient, kind: str) -> None:
    old_info = {INFO: '{"user":"alice","groups":["dev"]}'}
    new_info = {INFO: '{"user":"root","groups":["admins"]}'}
    if kind == "Pod":
        def obj(a: dict[str, str]) -> dict[str, Any]:
            return {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "team-a", "annotations": a},
                    "spec": template()["spec"]}
    else:
        def obj(a: dict[str, str]) -> dict[str, Any]:
            return workload(kind, a)
    refused = answer(client, "/validate-identity",
                     review(obj(new_info), operation="UPDATE", old=obj(old_info)))
    assert refused["allowed"] is False and "change is not allowed" in refused["status"]["message"]
    dropped = answer(client, "/validate-identity", review(obj({}), operation="UPDATE", old=obj(old_info)))
    assert dropped["allowed"] is False
    same = answer(client, "/validate-identity", review(obj(old_info), operation="UPDATE", old=obj(old_info)))
    assert same["allowed"] is True
