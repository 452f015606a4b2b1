"""The admission webhooks: gate new pods and record who asked; refuse invalid queue configs.

Pure functions from an ``admission.k8s.io/v1`` AdmissionReview to the AdmissionReview answer (reference
``kubernetes-front.md`` §2). They write nothing — the webhook configurations declare ``sideEffects:
None`` — so dry runs, apiserver retries and pods refused by a later webhook leave no trace: the quota
request is made by the controller when it sees the gated pod.

``/mutate`` (YuniKorn's path) on pod CREATE, in YuniKorn's order (``processPod``, §2.3):

1. a pod that already carries ``yunikorn.apache.org/user.info`` keeps it only when the submitter may
   set it (trusted controllers ``^system:serviceaccount:kube-system:``, configured external users and
   groups) and it parses; otherwise the pod is refused with YuniKorn's message;
2. else the annotation is set from ``request.userInfo`` — never from the pod body;
3. pods of namespaces not managed (``yunikorn.apache.org/namespace.enableYuniKorn`` wins, else the
   process/bypass patterns; ``kube-system`` bypassed by default) pass unchanged;
4. the scheduling gate ``quotaplane.io/admission`` is appended (existing gates are kept; a pod that has
   it already is not patched twice).

Workloads (YuniKorn's ``processWorkload``: Deployment, DaemonSet, StatefulSet, ReplicaSet, Job, CronJob)
get the same treatment on CREATE for their pod template (``spec.template``, a CronJob's
``spec.jobTemplate.spec.template``): an identity annotation already in the template is kept only when
the submitter may set it and it parses, else it is set from ``request.userInfo``. The controllers that
create the pods from the template (trusted service accounts of ``kube-system``) then carry the
workload's creator, so a user cannot choose who is charged by putting the annotation in a template. A
ReplicaSet created by a trusted controller (a Deployment's) is left as it is: its template came from the
Deployment, already stamped.

Nothing a user can set on an object skips the gate: which pods are gated is configuration only
(``process_namespaces``/``bypass_namespaces``, the namespace annotation ``enableYuniKorn`` that only
whoever may edit namespaces can set, and the webhook configurations' namespace selectors).

``/validate-identity`` on UPDATE of a pod or a workload refuses any change of the identity annotation
(the pod's, or the template's) — YuniKorn's rule for pods (§2.3 step 9), extended to templates. The
webhook configurations call it only when that annotation changes (``matchConditions``), so while the
front is down every other update goes through (docs/kubernetes.md "Which webhook rules fail closed").

``/validate-conf`` on ConfigMap CREATE/UPDATE: the ``yunikorn-configs`` map of the front's namespace
must hold a valid ``queues.yaml``; the refusal names the line. Unlike YuniKorn, which asks the scheduler
over HTTP and lets the map through when it cannot, the check runs in-process, so there is nothing to
fail open on.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from quotaplane.config.files import validate_conf
from quotaplane.errors import InputError
from quotaplane.kube.objects import mapping
from quotaplane.kube.pods import ANNOTATION_USER_INFO, GATE

__all__ = [
    "ANNOTATION_ENABLE",
    "CONFIG_MAP",
    "CONFIG_MAP_KEY",
    "WORKLOADS",
    "WebhookOptions",
    "identity_of",
    "mutate",
    "review_error",
    "validate_config_map",
    "validate_identity",
]

#: namespace annotation: ``"true"``/``"false"`` overrides the namespace patterns (YuniKorn)
ANNOTATION_ENABLE = "yunikorn.apache.org/namespace.enableYuniKorn"
#: the ConfigMap whose ``queues.yaml`` is the queue configuration (YuniKorn's name)
CONFIG_MAP = "yunikorn-configs"
CONFIG_MAP_KEY = "queues.yaml"

NamespaceLookup = Callable[[str], Mapping[str, Any] | None]
#: workload kind → the path of its pod template (YuniKorn ``metadata/extract.go``)
WORKLOADS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"), "DaemonSet": ("spec", "template"),
    "StatefulSet": ("spec", "template"), "ReplicaSet": ("spec", "template"), "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


def _no_namespace(_name: str) -> Mapping[str, Any] | None:
    return None


@dataclass(frozen=True)
class WebhookOptions:
    """YuniKorn's ``admissionController.filtering.*`` and ``accessControl.*`` settings (``am_conf.go``)."""

    #: namespaces whose pods are gated (regexes; empty: all)
    process_namespaces: Sequence[str] = ()
    #: namespaces never gated (regexes)
    bypass_namespaces: Sequence[str] = ("^kube-system$",)
    #: trust controllers' service accounts to set the user-info annotation
    trust_controllers: bool = True
    #: the controllers trusted when ``trust_controllers`` (regexes)
    system_users: Sequence[str] = ("^system:serviceaccount:kube-system:",)
    #: users / groups that may set the user-info annotation themselves (regexes)
    external_users: Sequence[str] = ()
    external_groups: Sequence[str] = ()
    #: skip identity entirely (the annotation is neither checked nor set)
    bypass_auth: bool = False
    #: the namespace whose ``yunikorn-configs`` ConfigMap is the queue configuration
    config_namespace: str = "quotaplane-system"
    #: the namespace's annotations, for ``enableYuniKorn`` (the controller's cache)
    namespace: NamespaceLookup = field(default=_no_namespace, compare=False)


def _answer(request: Mapping[str, Any], allowed: bool, *, message: str | None = None,
            patch: list[dict[str, Any]] | None = None, code: int = 403) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": allowed}
    if not allowed:
        response["status"] = {"code": code, "reason": "Forbidden" if code == 403 else "BadRequest",
                              "message": message or "refused"}
    elif message:
        response["status"] = {"message": message}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def review_error(review: Any, message: str) -> dict[str, Any]:
    """The answer to a review that cannot be read: refused, naming what is wrong (400)."""
    request = mapping(mapping(review).get("request"))
    return _answer(request, False, message=message, code=400)


def _request(review: Any) -> Mapping[str, Any]:
    if not isinstance(review, Mapping):
        raise InputError("an AdmissionReview must be a JSON object")
    if review.get("kind") not in (None, "AdmissionReview"):
        raise InputError(f"expected kind AdmissionReview, not {review.get('kind')!r}")
    request = review.get("request")
    if not isinstance(request, Mapping):
        raise InputError("AdmissionReview without a 'request'")
    if not isinstance(request.get("uid"), str) or not request["uid"]:
        raise InputError("AdmissionReview request without a 'uid'")
    return request


def _matches(patterns: Sequence[str], value: str) -> bool:
    return any(re.search(p, value) for p in patterns)


def _may_set_user_info(options: WebhookOptions, user: str, groups: Sequence[str]) -> bool:
    """YuniKorn ``IsAnnotationAllowed``: trusted controllers, external users, external groups."""
    if options.trust_controllers and _matches(options.system_users, user):
        return True
    if _matches(options.external_users, user):
        return True
    return any(_matches(options.external_groups, g) for g in groups)


def _valid_user_info(value: Any) -> bool:
    """YuniKorn ``IsAnnotationValid``: JSON ``{"user": …, "groups": […]}``."""
    if not isinstance(value, str):
        return False
    try:
        info = json.loads(value)
    except ValueError:
        return False
    return isinstance(info, Mapping) and isinstance(info.get("user"), str) and \
        isinstance(info.get("groups", []), list)


def managed_namespace(options: WebhookOptions, namespace: str) -> bool:
    """The pods of ``namespace`` are gated: its ``enableYuniKorn`` annotation when set, else it matches
    ``process_namespaces`` (or that is empty) and not ``bypass_namespaces`` (``shouldProcessNamespace``)."""
    ns = options.namespace(namespace)
    flag = mapping(mapping(mapping(ns).get("metadata")).get("annotations")).get(ANNOTATION_ENABLE)
    if isinstance(flag, str) and flag.lower() in ("true", "false"):
        return flag.lower() == "true"
    if options.process_namespaces and not _matches(options.process_namespaces, namespace):
        return False
    return not _matches(options.bypass_namespaces, namespace)


def _user_info(request: Mapping[str, Any]) -> tuple[str, list[str]]:
    info = mapping(request.get("userInfo"))
    user = info.get("username")
    groups = info.get("groups")
    return (user if isinstance(user, str) else "",
            [g for g in groups if isinstance(g, str)] if isinstance(groups, list) else [])


def mutate(review: Any, options: WebhookOptions | None = None) -> dict[str, Any]:
    """The ``/mutate`` answer to ``review`` (see the module docstring). ValueError: not a readable
    AdmissionReview (the route answers 400 with :func:`review_error`)."""
    options = options or WebhookOptions()
    request = _request(review)
    resource = mapping(request.get("resource")).get("resource")
    kind = mapping(request.get("kind")).get("kind")
    operation = request.get("operation")
    if kind in WORKLOADS:
        return _workload(request, str(kind), options) if operation == "CREATE" else _answer(request, True)
    if resource not in (None, "pods") or kind not in (None, "Pod"):
        return _answer(request, True)               # only pods are gated
    pod = request.get("object")
    if operation == "UPDATE":
        return _update(request, pod)
    if operation != "CREATE":
        return _answer(request, True)
    if not isinstance(pod, Mapping):
        return _answer(request, False, message="pod CREATE without an object", code=400)
    meta = mapping(pod.get("metadata"))
    annotations = mapping(meta.get("annotations"))
    user, groups = _user_info(request)
    patch: list[dict[str, Any]] = []
    new_annotations: dict[str, Any] | None = None
    if not options.bypass_auth:
        if ANNOTATION_USER_INFO in annotations:
            if not _may_set_user_info(options, user, groups):
                return _answer(request, False, message=(
                    f"user {user} with groups [{','.join(groups)}] is not allowed to set user annotation"))
            if not _valid_user_info(annotations[ANNOTATION_USER_INFO]):
                return _answer(request, False, message=(
                    f"invalid user info annotation {ANNOTATION_USER_INFO}: expected JSON "
                    '{"user": "...", "groups": [...]}'))
        else:
            # the whole map, as YuniKorn does: one add is right whether or not annotations exist
            new_annotations = {**annotations,
                               ANNOTATION_USER_INFO: json.dumps({"user": user, "groups": groups},
                                                                separators=(",", ":"))}
    namespace = request.get("namespace") or meta.get("namespace") or "default"
    if not managed_namespace(options, str(namespace)):
        return _answer(request, True)               # bypassed: the user-info patch is dropped too
    if new_annotations is not None:
        patch.append({"op": "add", "path": "/metadata/annotations", "value": new_annotations})
    gates = mapping(pod.get("spec")).get("schedulingGates")
    if not isinstance(gates, list) or not gates:
        patch.append({"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]})
    elif not any(mapping(g).get("name") == GATE for g in gates):
        patch.append({"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}})
    return _answer(request, True, patch=patch)


def _update(request: Mapping[str, Any], pod: Any) -> dict[str, Any]:
    old = mapping(request.get("oldObject"))
    if identity_of(old, "Pod") != identity_of(mapping(pod), "Pod"):
        return _answer(request, False, message="user info annotation change is not allowed")
    return _answer(request, True)


def _template(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    node: Mapping[str, Any] = obj
    for part in WORKLOADS[kind]:
        node = mapping(node.get(part))
    return node


def identity_of(obj: Mapping[str, Any], kind: str) -> Any:
    """The identity annotation of a pod (``kind`` ``Pod``) or of a workload's pod template (None when
    absent) — what ``/validate-identity`` compares and its ``matchConditions`` test."""
    meta = mapping(obj.get("metadata")) if kind == "Pod" else mapping(_template(obj, kind).get("metadata"))
    return mapping(meta.get("annotations")).get(ANNOTATION_USER_INFO)


def _workload(request: Mapping[str, Any], kind: str, options: WebhookOptions) -> dict[str, Any]:
    """YuniKorn ``processWorkload`` on CREATE: the pod template carries the workload's creator."""
    obj = request.get("object")
    if not isinstance(obj, Mapping):
        return _answer(request, False, message=f"{kind} CREATE without an object", code=400)
    user, groups = _user_info(request)
    if kind == "ReplicaSet" and _matches(options.system_users, user):
        return _answer(request, True)       # a Deployment's ReplicaSet: its template is the Deployment's
    namespace = request.get("namespace") or mapping(obj.get("metadata")).get("namespace") or "default"
    if options.bypass_auth or not managed_namespace(options, str(namespace)):
        return _answer(request, True)
    template = _template(obj, kind)
    annotations = mapping(mapping(template.get("metadata")).get("annotations"))
    if ANNOTATION_USER_INFO in annotations:
        if not _may_set_user_info(options, user, groups):
            return _answer(request, False, message=(
                f"user {user} with groups [{','.join(groups)}] is not allowed to set user annotation"))
        if not _valid_user_info(annotations[ANNOTATION_USER_INFO]):
            return _answer(request, False, message=(
                f"invalid user info annotation {ANNOTATION_USER_INFO}: expected JSON "
                '{"user": "...", "groups": [...]}'))
        return _answer(request, True)
    stamped = {**annotations,
               ANNOTATION_USER_INFO: json.dumps({"user": user, "groups": groups}, separators=(",", ":"))}
    path = "/" + "/".join(WORKLOADS[kind])
    # a template without metadata gets it whole (adding to a missing parent would fail the patch)
    patch = [{"op": "add", "path": f"{path}/metadata/annotations", "value": stamped}] \
        if isinstance(template.get("metadata"), Mapping) else \
        [{"op": "add", "path": f"{path}/metadata", "value": {"annotations": stamped}}]
    return _answer(request, True, patch=patch)


def validate_identity(review: Any, options: WebhookOptions | None = None) -> dict[str, Any]:
    """The ``/validate-identity`` answer: an UPDATE of a pod or a workload that changes the identity
    annotation (the pod's, or its template's) is refused; anything else passes. ValueError: not a
    readable AdmissionReview."""
    request = _request(review)
    kind = str(mapping(request.get("kind")).get("kind") or "")
    if request.get("operation") != "UPDATE" or (kind != "Pod" and kind not in WORKLOADS):
        return _answer(request, True)
    old, new = mapping(request.get("oldObject")), mapping(request.get("object"))
    if identity_of(old, kind) != identity_of(new, kind):
        what = "user info annotation" if kind == "Pod" else "user info annotation of the pod template"
        return _answer(request, False, message=f"{what} change is not allowed")
    return _answer(request, True)


def validate_config_map(review: Any, options: WebhookOptions | None = None,
                        check: Callable[[str], Mapping[str, object]] = validate_conf) -> dict[str, Any]:
    """The ``/validate-conf`` answer: a ``yunikorn-configs`` ConfigMap of the front's namespace is
    refused when its ``queues.yaml`` is invalid (the message names the line); anything else passes."""
    options = options or WebhookOptions()
    request = _request(review)
    if request.get("operation") not in ("CREATE", "UPDATE"):
        return _answer(request, True)
    obj = mapping(request.get("object"))
    meta = mapping(obj.get("metadata"))
    namespace = request.get("namespace") or meta.get("namespace")
    name = request.get("name") or meta.get("name")
    if obj.get("kind") not in (None, "ConfigMap") or namespace != options.config_namespace or \
            name != CONFIG_MAP:
        return _answer(request, True)
    text = mapping(obj.get("data")).get(CONFIG_MAP_KEY, "")
    if not isinstance(text, str):
        return _answer(request, False, message=f"{CONFIG_MAP}: {CONFIG_MAP_KEY} must be a string")
    verdict = check(text)
    if verdict.get("allowed"):
        return _answer(request, True)
    reason = verdict.get("reason", "invalid")
    return _answer(request, False, message=f"{CONFIG_MAP} {CONFIG_MAP_KEY}: {reason}")
