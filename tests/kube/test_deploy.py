"""Every manifest in deploy/ validates offline (issue 16 item 7): Kubernetes kinds with
kubernetes-validate (strict), the CRDs' example objects with jsonschema against the CRDs' own schemas,
and the pieces agree with each other and with the code (names, ports, paths, RBAC for every call)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaplane.kube.api import KubeApi
from quotaplane.kube.webhook import CONFIG_MAP, CONFIG_MAP_KEY

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = "1.30.0"          # scheduling gates are GA from 1.30
FOREIGN = {"cert-manager.io/v1"}       # cert-manager's kinds: checked by shape below


def _docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((str(path.relative_to(DEPLOY)), doc))
    return out


def _kind(kind: str) -> list[dict[str, Any]]:
    return [d for _, d in _docs() if d.get("kind") == kind]


def test_kustomization_lists_every_manifest() -> None:
    listed = set(yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"])
    present = {str(p.relative_to(DEPLOY)) for p in DEPLOY.rglob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present


def _id(v: Any) -> str:
    return v if isinstance(v, str) else f"{v.get('kind')}/{v['metadata']['name']}"


@pytest.mark.parametrize(("where", "doc"), [d for d in _docs() if d[1].get("kind") != "Kustomization"],
                         ids=_id)
def test_every_manifest_validates(where: str, doc: dict[str, Any]) -> None:
    if doc["apiVersion"] in FOREIGN:
        assert doc["kind"] in ("Issuer", "Certificate") and doc["spec"]
        return
    kubernetes_validate.validate(doc, K8S, strict=True)


def _crd_schema(plural: str) -> dict[str, Any]:
    crd = next(d for d in _kind("CustomResourceDefinition") if d["spec"]["names"]["plural"] == plural)
    return dict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def test_the_crds_accept_upstreams_examples_and_refuse_bad_ones() -> None:
    eq = _crd_schema("elasticquotas")
    good = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": "q-team-a", "namespace": "team-a"},
            "spec": {"min": {"cpu": "10", "memory": "20Gi"}, "max": {"cpu": 40, "memory": "40Gi"}},
            "status": {"used": {"cpu": "500m"}}}
    jsonschema.validate(good, eq)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "spec": {"min": {"cpu": "ten"}}}, eq)
    qst = _crd_schema("quotasubtrees")
    example = {"apiVersion": "quota.codeflare.dev/v1alpha1", "kind": "QuotaSubtree",
               "metadata": {"name": "context-root-children", "namespace": "kube-system",
                            "labels": {"tree": "quota_context"}},
               "spec": {"parent": "context-root", "children": [
                   {"name": "gold", "quotas": {"hardLimit": False,
                                               "requests": {"cpu": "1075m", "memory": "450Mi",
                                                            "nvidia.com/gpu": 8}}}]}}
    jsonschema.validate(example, qst)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({k: v for k, v in example.items() if k != "spec"}, qst)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**example, "spec": {"children": [{"quotas": {"hardLimit": "yes"}}]}}, qst)


def test_the_crds_are_what_the_front_reads() -> None:
    from quotaplane.kube import api
    from quotaplane.kube.kueue import KUEUE_KINDS

    for plural in KubeApi.OPTIONAL:
        if plural in KUEUE_KINDS:
            continue        # Kueue installs its own CRDs; the front only reads its objects
        if plural == api.CLAIM_TEMPLATES:
            continue        # DRA's, a built-in API (resource.k8s.io/v1): optional only on older servers
        crd = next(d for d in _kind("CustomResourceDefinition") if d["spec"]["names"]["plural"] == plural)
        res = api._RESOURCES[plural]
        assert crd["spec"]["group"] == res._api_info.resource.group
        assert crd["spec"]["versions"][0]["name"] == res._api_info.resource.version
        assert crd["spec"]["scope"] == "Namespaced"


def test_only_creates_and_identity_changes_wait_on_the_front() -> None:
    """Issue 31 #4: what fails closed while the front is down. The mutating webhooks see CREATE only
    (every pod gated, every workload template stamped); UPDATE reaches the front only through the
    validating identity webhooks, whose matchConditions call it only when the identity annotation
    changes; nothing a user can set on an object (an objectSelector label) skips a webhook."""
    from quotaplane.kube.webhook import WORKLOADS

    (mutating,) = _kind("MutatingWebhookConfiguration")
    (validating,) = _kind("ValidatingWebhookConfiguration")
    covered: set[str] = set()
    for hook in mutating["webhooks"]:
        assert hook["failurePolicy"] == "Fail" and "objectSelector" not in hook
        for rule in hook["rules"]:
            assert rule["operations"] == ["CREATE"]
            covered |= set(rule["resources"])
    assert covered == {"pods", "deployments", "daemonsets", "statefulsets", "replicasets", "jobs",
                       "cronjobs"}
    assert len(WORKLOADS) == len(covered) - 1
    identity = [h for h in validating["webhooks"]
                if h["clientConfig"]["service"]["path"] == "/validate-identity"]
    updated: set[str] = set()
    for hook in identity:
        assert hook["failurePolicy"] == "Fail" and "objectSelector" not in hook
        (condition,) = hook["matchConditions"]
        assert "yunikorn.apache.org/user.info" in condition["expression"]
        assert "oldObject" in condition["expression"]
        for rule in hook["rules"]:
            assert rule["operations"] == ["UPDATE"]
            updated |= set(rule["resources"])
    assert updated == covered


_KINDS = {"pods": "Pod", "deployments": "Deployment", "daemonsets": "DaemonSet",
          "statefulsets": "StatefulSet", "replicasets": "ReplicaSet", "jobs": "Job", "cronjobs": "CronJob"}
#: an object's identity annotation: absent, or a value (the empty one included)
_IDENTITY = st.one_of(st.none(), st.sampled_from(["", '{"user":"alice"}', '{"user":"bob"}']))


def _object(kind: str, identity: str | None, *, meta: bool, annotations: bool, label: str) -> dict[str, Any]:
    """An object of ``kind`` whose identity (the pod's, or its template's) is ``identity``; ``meta`` /
    ``annotations``: whether the (template) metadata and its annotations are there at all."""
    from quotaplane.kube.webhook import ANNOTATION_USER_INFO, WORKLOADS

    inner: dict[str, Any] = {"labels": {"rev": label}} if meta else {}
    if meta and (annotations or identity is not None):
        inner["annotations"] = {"other": "x"}
        if identity is not None:
            inner["annotations"][ANNOTATION_USER_INFO] = identity
    if kind == "Pod":
        return {"metadata": {"name": "p", **inner}, "spec": {}}
    obj: dict[str, Any] = {"metadata": {"name": "w", "labels": {"rev": label}}}
    node = obj
    for part in WORKLOADS[kind]:
        node = node.setdefault(part, {})
    node["spec"] = {"containers": []}
    if meta:
        node["metadata"] = inner
    return obj


def _identity_hooks() -> list[tuple[str, str]]:
    """(kind, matchCondition expression) of every identity webhook, for every resource it covers."""
    (validating,) = _kind("ValidatingWebhookConfiguration")
    out = []
    for hook in validating["webhooks"]:
        if hook["clientConfig"]["service"]["path"] != "/validate-identity":
            continue
        (condition,) = hook["matchConditions"]
        out += [(_KINDS[r], condition["expression"]) for rule in hook["rules"] for r in rule["resources"]]
    return out


@settings(max_examples=300, deadline=None)
@given(hook=st.sampled_from(_identity_hooks()), old_id=_IDENTITY, new_id=_IDENTITY,
       shape=st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()),
       labels=st.tuples(st.sampled_from("ab"), st.sampled_from("ab")))
def test_the_identity_webhooks_are_called_exactly_when_the_identity_changes(
        hook: tuple[str, str], old_id: str | None, new_id: str | None, shape: tuple[bool, bool, bool, bool],
        labels: tuple[str, str]) -> None:
    """Issue 31 #4, as the API server evaluates it (the matchConditions' CEL, tests/kube/cel.py): the
    identity webhook — which fails closed — is called for an UPDATE exactly when the identity (the
    pod's annotation, or its template's) changes, so every other update (labels, finalizers, scaling,
    another controller's patch) goes through while the front is down. The condition never errs (an
    error would refuse the update under failurePolicy Fail) whether or not the metadata and the
    annotations are there. An absent annotation and an empty one are the same to it (both no
    identity: the front reads neither as a user)."""
    from quotaplane.kube.webhook import identity_of
    from tests.kube.cel import evaluate

    kind, expression = hook
    old_meta, old_ann, new_meta, new_ann = shape
    if kind == "Pod":
        old_meta = new_meta = True              # a pod always has its metadata
    if not old_meta:
        old_id = None
    if not new_meta:
        new_id = None
    old = _object(kind, old_id, meta=old_meta, annotations=old_ann, label=labels[0])
    new = _object(kind, new_id, meta=new_meta, annotations=new_ann, label=labels[1])
    called = evaluate(expression, obj=new, old=old)
    assert called == ((identity_of(old, kind) or "") != (identity_of(new, kind) or ""))


def test_the_cel_evaluator_errs_where_cel_does() -> None:
    """The evaluator is no easier than the API server: a field absent outside has() is an error."""
    from tests.kube.cel import CelError, evaluate

    with pytest.raises(CelError):
        evaluate("object.metadata.annotations['a'] != ''", obj={"metadata": {}}, old={})
    with pytest.raises(CelError):
        evaluate("size(object.metadata) > 0", obj={"metadata": {}}, old={})
    assert evaluate("has(object.metadata.annotations)", obj={"metadata": {}}, old={}) is False
    assert evaluate("has(object.metadata.annotations) && 'a' in object.metadata.annotations",
                    obj={"metadata": {"annotations": {"a": "1"}}}, old={}) is True


def test_webhooks_service_deployment_and_tls_agree() -> None:
    (service,) = _kind("Service")
    (deployment,) = _kind("Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[0] == "kube"
    port = int(args[args.index("--port") + 1])
    assert container["ports"][0]["containerPort"] == port
    assert service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    (svc_port,) = service["spec"]["ports"]
    paths: dict[str, set[str]] = {}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in _kind(kind)[0]["webhooks"]:
            ref = hook["clientConfig"]["service"]
            assert (ref["name"], ref["namespace"], ref["port"]) == (
                service["metadata"]["name"], service["metadata"]["namespace"], svc_port["port"])
            paths.setdefault(kind, set()).add(ref["path"])
            assert hook["sideEffects"] == "None"      # the webhooks write nothing
    assert paths == {"MutatingWebhookConfiguration": {"/mutate"},
                     "ValidatingWebhookConfiguration": {"/validate-conf", "/validate-identity"}}
    from quotaplane.kube.http import WEBHOOK_PATHS
    assert paths["MutatingWebhookConfiguration"] | paths["ValidatingWebhookConfiguration"] <= \
        set(WEBHOOK_PATHS)
    (cert,) = [d for d in _kind("Certificate")]
    tls = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls")
    assert tls["secret"]["secretName"] == cert["spec"]["secretName"]
    assert f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc" in cert["spec"]["dnsNames"]
    ns = args[args.index("--namespace") + 1]
    (cm,) = _kind("ConfigMap")
    assert (cm["metadata"]["name"], cm["metadata"]["namespace"]) == (CONFIG_MAP, ns)
    from quotaplane.config.files import validate_conf

    assert validate_conf(cm["data"][CONFIG_MAP_KEY])["allowed"] is True


def _allowed(group: str, resource: str, verb: str) -> bool:
    rules = [r for role in _kind("ClusterRole") + _kind("Role") for r in role["rules"]]
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


@pytest.mark.parametrize(("group", "resource", "verb"), [
    # list + watch of every kind the controller follows
    *[(g, r, v) for g, r in [("", "pods"), ("", "nodes"), ("", "namespaces"), ("", "configmaps"),
                             ("scheduling.sigs.k8s.io", "elasticquotas"),
                             ("quota.codeflare.dev", "quotasubtrees"),
                             *[("kueue.x-k8s.io", k) for k in ("resourceflavors", "cohorts", "clusterqueues",
                                                               "localqueues")],
                             ("resource.k8s.io", "resourceclaimtemplates")]
      for v in ("list", "watch")],
    ("", "pods", "patch"), ("", "pods/status", "patch"), ("", "pods/eviction", "create"),
    ("", "events", "create"), ("scheduling.sigs.k8s.io", "elasticquotas", "patch"),
    ("coordination.k8s.io", "leases", "get"), ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "patch"),
])
def test_rbac_allows_every_call_the_front_makes(group: str, resource: str, verb: str) -> None:
    assert _allowed(group, resource, verb)


def test_rbac_grants_no_more_than_needed() -> None:
    assert not _allowed("", "pods", "delete")          # evictions go through the Eviction API
    assert not _allowed("", "secrets", "get")
    assert not _allowed("", "configmaps", "update")
    # the one ConfigMap is read in the front's namespace: no ConfigMap of the cluster is granted
    cluster = [r for role in _kind("ClusterRole") for r in role["rules"]]
    assert not any("configmaps" in r["resources"] for r in cluster)
