"""quotaplane in front of a Kubernetes cluster (the ``kube`` extra): admission webhooks that gate new
pods and record who asked, and a controller that turns gated pods into asks, ungates the admitted,
says why the others wait, evicts the preempted and keeps nodes, namespaces and the queue config in
step. See docs/kubernetes.md."""

from __future__ import annotations

from quotaplane.kube.pods import ANNOTATION_USER_INFO, GATE, pod_app_id, pod_key, pod_user, task_groups
from quotaplane.kube.webhook import WebhookOptions, mutate, validate_config_map

__all__ = [
    "ANNOTATION_USER_INFO",
    "GATE",
    "WebhookOptions",
    "mutate",
    "pod_app_id",
    "pod_key",
    "pod_user",
    "task_groups",
    "validate_config_map",
]
