"""The admission protocol under its first name, kept so that plug-ins written against
``quotaplane.policy`` keep working: it lives in :mod:`quotaplane.policies` (the protocol in
:mod:`quotaplane.policies.protocol`). Nothing in quotaplane imports this module
(tests/test_architecture.py)."""

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
