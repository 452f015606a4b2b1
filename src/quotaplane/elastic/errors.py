"""The error of the elastic-quota engine: a configuration rule (reference §3) was broken
(:class:`~quotaplane.errors.QuotaValidationError`, defined with every other error in
:mod:`quotaplane.errors`)."""

from __future__ import annotations

from quotaplane.errors import QuotaValidationError

__all__ = ["QuotaValidationError"]
