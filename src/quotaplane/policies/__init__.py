"""Quota policies: the admission protocol (:mod:`quotaplane.policies.protocol`: a request, a violation,
a decision, the :class:`QuotaPolicy` a plug-in subclasses) and the engines' policies behind it (queue,
users and groups, elastic quotas, quota trees, budgets), registered in :mod:`quotaplane.policies.registry`.

A plug-in imports the protocol from here: ``from quotaplane.policies import QuotaPolicy, Violation``.
"""

from quotaplane.policies.protocol import (
    CODES,
    PREEMPTION_CODES,
    AdmissionRequest,
    Decision,
    Eviction,
    MetricSample,
    QuotaPolicy,
    Violation,
)

__all__ = ["CODES", "PREEMPTION_CODES", "AdmissionRequest", "Decision", "Eviction", "MetricSample",
           "QuotaPolicy", "Violation"]
