"""Budgets: resource-hours per period on queues, users and groups (issue 34; docs/budgets.md).

:mod:`~quotaplane.budgets.ledger` holds the exact arithmetic (what each scope consumed and committed,
from event times), :mod:`~quotaplane.budgets.periods` where periods start and end,
:mod:`~quotaplane.budgets.status` what people are shown. The admission policy that plugs them into
the write path is :mod:`quotaplane.policies.budgets`; the configuration is :mod:`quotaplane.config.budgets`.
"""

from quotaplane.budgets.ledger import Ledger, Scope, Shortfall
from quotaplane.budgets.periods import iso, period_of
from quotaplane.budgets.status import hours, refusal_message, scope_status

__all__ = ["Ledger", "Scope", "Shortfall", "hours", "iso", "period_of", "refusal_message", "scope_status"]
