"""What the front reads off a Pod: its key, identity, application, gate, gang and lifecycle.

Pure functions over the pod's JSON (a dict shaped like the API object); nothing here talks to an API
server. The conventions are YuniKorn's (reference ``kubernetes-front.md`` §2.3, §2.4) and Kueue's gate
handling (§1.2, §1.3).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from quotaplane.config.identity import UserGroup
from quotaplane.errors import InputError
from quotaplane.k8s.convert import pod_namespace, pod_resource
from quotaplane.kube.objects import mapping
from quotaplane.resources import Resource

__all__ = [
    "ANNOTATION_SCHEDULING_PARAMETERS",
    "ANNOTATION_TASK_GROUPS",
    "ANNOTATION_TASK_GROUP_NAME",
    "ANNOTATION_USER_INFO",
    "DEFAULT_USER",
    "GATE",
    "TaskGroup",
    "gang_parameters",
    "has_gate",
    "is_finished",
    "is_terminating",
    "pod_app_id",
    "pod_key",
    "pod_name",
    "pod_node",
    "pod_priority",
    "pod_tags",
    "pod_user",
    "task_group_name",
    "task_groups",
    "ungate_patch",
]

#: the scheduling gate the webhook adds and the controller removes once the pod's ask is allocated
GATE = "quotaplane.io/admission"
#: YuniKorn's user-info annotation (``{"user": …, "groups": […]}``), set from ``request.userInfo``
ANNOTATION_USER_INFO = "yunikorn.apache.org/user.info"
ANNOTATION_TASK_GROUP_NAME = "yunikorn.apache.org/task-group-name"
ANNOTATION_TASK_GROUPS = "yunikorn.apache.org/task-groups"
ANNOTATION_SCHEDULING_PARAMETERS = "yunikorn.apache.org/schedulingPolicyParameters"
#: YuniKorn's user for a pod nobody vouched for (k8shim constants.go)
DEFAULT_USER = "nobody"

_FINISHED = ("Succeeded", "Failed")
_APP_ID_KEYS = ("yunikorn.apache.org/app-id", "spark-app-selector", "applicationId")


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(pod.get("metadata"))


def pod_name(pod: Mapping[str, Any]) -> str:
    """``<namespace>/<name>``: how people and events name the pod."""
    return f"{pod_namespace(pod)}/{_meta(pod).get('name', '')}"


def pod_key(pod: Mapping[str, Any]) -> str:
    """The allocation key of the pod's ask: its UID (a pod re-created under the same name is another
    pod), else ``<namespace>/<name>`` when the object carries no UID yet."""
    uid = _meta(pod).get("uid")
    return uid if isinstance(uid, str) and uid else pod_name(pod)


def has_gate(pod: Mapping[str, Any]) -> bool:
    """The pod still carries quotaplane's scheduling gate."""
    gates = mapping(pod.get("spec")).get("schedulingGates")
    return isinstance(gates, list) and any(mapping(g).get("name") == GATE for g in gates)


def is_finished(pod: Mapping[str, Any]) -> bool:
    """The pod ran to an end (``Succeeded`` or ``Failed``): its resources are free again."""
    return mapping(pod.get("status")).get("phase") in _FINISHED


def is_terminating(pod: Mapping[str, Any]) -> bool:
    """The pod is being deleted (``deletionTimestamp`` set)."""
    return bool(_meta(pod).get("deletionTimestamp"))


def pod_user(pod: Mapping[str, Any]) -> UserGroup:
    """The submitter the webhook recorded (YuniKorn's user-info annotation), else ``nobody``.

    An unreadable annotation counts as absent: the webhook refuses such pods at creation, so one here
    was set around it (the user is not trusted)."""
    raw = mapping(_meta(pod).get("annotations")).get(ANNOTATION_USER_INFO)
    if isinstance(raw, str):
        try:
            info = json.loads(raw)
        except ValueError:
            info = None
        if isinstance(info, Mapping) and isinstance(info.get("user"), str) and info["user"]:
            groups = info.get("groups")
            names = [g for g in groups if isinstance(g, str) and g] if isinstance(groups, list) else []
            return UserGroup(info["user"], names)
    return UserGroup(DEFAULT_USER, [])


_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._/-]")


def pod_app_id(pod: Mapping[str, Any]) -> str:
    """The pod's application: YuniKorn's application-id label or annotation
    (``yunikorn.apache.org/app-id``, ``spark-app-selector``, ``applicationId``), else its controlling
    owner (``<namespace>/<kind>/<name>``: the pods of one Job or ReplicaSet are one application),
    else the pod itself (``<namespace>/<name>``)."""
    meta = _meta(pod)
    labels, annotations = mapping(meta.get("labels")), mapping(meta.get("annotations"))
    for key in _APP_ID_KEYS:
        for source in (labels, annotations):
            value = source.get(key)
            if isinstance(value, str) and value:
                return value
    return _owner_app_id(pod, meta.get("ownerReferences")) or pod_name(pod)


def _owner_app_id(pod: Mapping[str, Any], owners: Any) -> str | None:
    """``<namespace>/<kind>/<name>`` of the pod's controlling owner (else its first owner), if any."""
    if not isinstance(owners, list):
        return None
    chosen = [o for o in owners if isinstance(o, Mapping) and o.get("controller") is True] or \
        [o for o in owners if isinstance(o, Mapping)]
    if chosen and isinstance(chosen[0].get("name"), str):
        kind = str(chosen[0].get("kind", "owner")).lower()
        return _ID_UNSAFE.sub("-", f"{pod_namespace(pod)}/{kind}/{chosen[0]['name']}")
    return None


def pod_tags(pod: Mapping[str, Any]) -> dict[str, str]:
    """The allocation tags of the pod's ask, as YuniKorn's shim sets them (``CreateTagsForTask``):
    ``kubernetes.io/meta/namespace``, ``kubernetes.io/meta/podName`` and ``kubernetes.io/label/<key>``
    per label — what yunikorn-web shows for an allocation."""
    meta = _meta(pod)
    tags = {"kubernetes.io/meta/namespace": pod_namespace(pod),
            "kubernetes.io/meta/podName": str(meta.get("name", ""))}
    for key, value in sorted(mapping(meta.get("labels")).items()):
        if isinstance(key, str) and isinstance(value, str):
            tags[f"kubernetes.io/label/{key}"] = value
    return tags


def pod_priority(pod: Mapping[str, Any]) -> int:
    """``spec.priority`` (resolved from the PriorityClass by the apiserver), else 0."""
    value = mapping(pod.get("spec")).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def pod_runtime(pod: Mapping[str, Any]) -> float | None:
    """``spec.activeDeadlineSeconds`` (a positive integer): the pod's declared runtime, what the ETA
    takes as its end (docs/eta.md); None when not set."""
    value = mapping(pod.get("spec")).get("activeDeadlineSeconds")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return float(value)


def pod_node(pod: Mapping[str, Any]) -> str | None:
    """``spec.nodeName``: the node the scheduler bound the pod to, None before it is bound."""
    value = mapping(pod.get("spec")).get("nodeName")
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class TaskGroup:
    """One YuniKorn task group: ``min_member`` pods of at least ``min_resource`` each."""

    name: str
    min_member: int
    min_resource: Resource


def task_group_name(pod: Mapping[str, Any]) -> str | None:
    """The task group the pod belongs to (``yunikorn.apache.org/task-group-name``), or None."""
    value = mapping(_meta(pod).get("annotations")).get(ANNOTATION_TASK_GROUP_NAME)
    return value if isinstance(value, str) and value else None


def task_groups(pod: Mapping[str, Any]) -> list[TaskGroup]:
    """The gang's task groups (``yunikorn.apache.org/task-groups``), validated as the k8shim does
    (``pkg/cache/utils.go``): a name, a ``minResource``, ``minMember`` > 0. ValueError names the
    problem; no annotation: ``[]``. Keys match case-insensitively, as Go's JSON decoding does."""
    raw = mapping(_meta(pod).get("annotations")).get(ANNOTATION_TASK_GROUPS)
    if raw is None:
        return []
    try:
        groups = json.loads(raw) if isinstance(raw, str) else None
    except ValueError as exc:
        raise InputError(f"{ANNOTATION_TASK_GROUPS}: not JSON ({exc})") from None
    if not isinstance(groups, list):
        raise InputError(f"{ANNOTATION_TASK_GROUPS}: must be a JSON array of task groups")
    out: list[TaskGroup] = []
    for i, group in enumerate(groups):
        if not isinstance(group, Mapping):
            raise InputError(f"{ANNOTATION_TASK_GROUPS}[{i}]: must be an object")
        fields = {str(k).lower(): v for k, v in group.items()}
        name, members, minimum = fields.get("name"), fields.get("minmember"), fields.get("minresource")
        if not isinstance(name, str) or not name:
            raise InputError(f"{ANNOTATION_TASK_GROUPS}[{i}]: task group name is empty")
        if not isinstance(minimum, Mapping):
            raise InputError(f"{ANNOTATION_TASK_GROUPS}[{i}] ({name}): minResource is missing")
        if not isinstance(members, int) or isinstance(members, bool) or members <= 0:
            raise InputError(f"{ANNOTATION_TASK_GROUPS}[{i}] ({name}): minMember must be a positive integer")
        requests = {"spec": {"containers": [{"name": "tg", "resources": {"requests": dict(minimum)}}]}}
        resource = pod_resource(requests)
        out.append(TaskGroup(name, members, resource))
    names = [g.name for g in out]
    if len(set(names)) != len(names):
        raise InputError(f"{ANNOTATION_TASK_GROUPS}: task group names repeat")
    return out


def gang_parameters(pod: Mapping[str, Any]) -> tuple[str, float | None]:
    """(gang style ``soft``/``hard``, placeholder timeout in seconds or None) from
    ``yunikorn.apache.org/schedulingPolicyParameters`` (``placeholderTimeoutInSeconds=60
    gangSchedulingStyle=Hard``); unknown or bad values keep the defaults, as the k8shim does."""
    raw = mapping(_meta(pod).get("annotations")).get(ANNOTATION_SCHEDULING_PARAMETERS)
    style, timeout = "soft", None
    if isinstance(raw, str):
        for part in raw.split():
            key, _, value = part.partition("=")
            if key == "gangSchedulingStyle" and value.lower() in ("soft", "hard"):
                style = value.lower()
            elif key == "placeholderTimeoutInSeconds" and value.isdigit() and int(value) > 0:
                timeout = float(value)
    return style, timeout


def ungate_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch that removes only quotaplane's gate, guarded by a ``test`` of its position so a
    concurrent change of the gate list fails the patch instead of removing another controller's gate
    (reference §1.3, way 1). ``[]`` when the pod carries no such gate."""
    gates: Sequence[Any] = mapping(pod.get("spec")).get("schedulingGates") or []
    for i, gate in enumerate(gates):
        if mapping(gate).get("name") == GATE:
            return [{"op": "test", "path": f"/spec/schedulingGates/{i}/name", "value": GATE},
                    {"op": "remove", "path": f"/spec/schedulingGates/{i}"}]
    return []
