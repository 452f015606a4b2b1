"""Kubernetes conversion (seed 004, reference §1.14 K8-1 … K8-3): pods to resource requests, namespace
annotations to application tags, AdmissionReview helpers. Conversion only; no API server is needed."""

from __future__ import annotations

from quotaplane.k8s.convert import (
    ANNOTATION_GUARANTEED,
    ANNOTATION_MAX_APPS,
    ANNOTATION_MAX_CPU,
    ANNOTATION_MAX_MEMORY,
    ANNOTATION_PARENT_QUEUE,
    ANNOTATION_QUOTA,
    TAG_MAX_APPS,
    TAG_NAMESPACE,
    TAG_PARENT_QUEUE,
    TAG_RESOURCE_GUARANTEED,
    TAG_RESOURCE_QUOTA,
    admission_review_request,
    application_tags,
    namespace_tags,
    pod_application_id,
    pod_namespace,
    pod_queue,
    pod_resource,
    si_resource_json,
)

__all__ = [
    "ANNOTATION_GUARANTEED",
    "ANNOTATION_MAX_APPS",
    "ANNOTATION_MAX_CPU",
    "ANNOTATION_MAX_MEMORY",
    "ANNOTATION_PARENT_QUEUE",
    "ANNOTATION_QUOTA",
    "TAG_MAX_APPS",
    "TAG_NAMESPACE",
    "TAG_PARENT_QUEUE",
    "TAG_RESOURCE_GUARANTEED",
    "TAG_RESOURCE_QUOTA",
    "admission_review_request",
    "application_tags",
    "namespace_tags",
    "pod_application_id",
    "pod_namespace",
    "pod_queue",
    "pod_resource",
    "si_resource_json",
]
