"""The error of the elastic-quota engine: a configuration rule (reference §3) was broken."""

from __future__ import annotations

from quotaplane.errors import QuotaplaneError

__all__ = ["QuotaValidationError"]


class QuotaValidationError(QuotaplaneError, ValueError):
    """An ElasticQuota definition, deletion or pod binding breaks a rule of reference §3.

    ``quota`` names the quota, ``rule`` is a stable token of the rule (for example ``min-sum`` or
    ``parent-not-parent``), ``str(err)`` is a sentence stating both. Nothing was changed.
    """

    def __init__(self, quota: str, rule: str, message: str) -> None:
        super().__init__(f"quota {quota!r}: {message} (rule {rule})")
        self.quota = quota
        self.rule = rule
        self.message = message
