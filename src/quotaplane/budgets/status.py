"""What a budget shows people: consumed, committed, left, the burn rate, when it runs out and resets,
and the sentence of a refusal (docs/budgets.md "Reading a budget")."""

from __future__ import annotations

from typing import Any

from quotaplane.budgets.ledger import Ledger, Scope, Shortfall
from quotaplane.budgets.periods import iso
from quotaplane.config.budgets import unit_of

__all__ = ["hours", "refusal_message", "scope_status"]

_HOUR_MS = 3_600_000


def hours(resource: str, unit_ms: float) -> float:
    """``unit_ms`` unit-milliseconds of ``resource`` in human resource-hours (GPU-hours, core-hours,
    GiB-hours), rounded to 4 decimals for display."""
    per, _ = unit_of(resource)
    return round(unit_ms / (per * _HOUR_MS), 4)


def _unit(resource: str) -> str:
    _, name = unit_of(resource)
    return f"{name}-hours"


def refusal_message(s: Shortfall) -> str:
    """The sentence of a ``budget.exhausted`` refusal: the scope, the resource, what is left, what the
    request would commit, and when the budget resets (or that it decays)."""
    r = s.resource
    left = max(0.0, s.limit - s.consumed - s.committed)
    spec = s.scope.spec
    text = (f"budget of {s.scope.label} for {r} is exhausted: {hours(r, s.consumed):g} of "
            f"{hours(r, s.limit):g} {_unit(r)} consumed this {spec.period_text()}"
            f"{f', {hours(r, s.committed):g} committed by running work' if s.committed else ''}, "
            f"{hours(r, left):g} left")
    if s.need:
        text += f"; this allocation would commit {hours(r, s.need):g} (its declared runtime)"
    if s.resets_at:
        text += f"; it resets at {iso(s.resets_at, spec.timezone)}"
    else:
        text += f"; it recovers as its consumption decays (half-life {spec.period_text()[10:]})"
    return text


def _resource(ledger: Ledger, scope: Scope, r: str, ms: int, end: int) -> dict[str, Any]:
    spec = scope.spec
    cell = scope.cells[r]
    limit = spec.limits.get(r, 0)
    consumed = scope.consumed(cell, ms)
    committed = ledger.committed(scope, r, ms)
    left = max(limit - consumed - committed, 0)
    used = consumed + committed
    ratio = used / limit if limit else float(used > 0)
    rate = cell.level                     # units held now: unit-ms per ms
    runs_out = ms + int(left / rate) if rate > 0 and not spec.decayed else None
    if runs_out is not None and end and runs_out >= end:
        runs_out = None                   # the period ends first
    return {
        "limit": hours(r, limit), "consumed": hours(r, consumed), "committed": hours(r, committed),
        "left": hours(r, left), "usedPercent": round(100 * ratio, 2),
        "burnRate": round(rate / unit_of(r)[0], 4), "unit": _unit(r),
        "runsOutAt": iso(runs_out, spec.timezone) if runs_out is not None else None,
    }


def _where(spec: Any) -> dict[str, Any]:
    """Where the budget is set: ``queue`` (null on an elastic quota), and ``elasticQuota``."""
    out: dict[str, Any] = {"queue": spec.queue or None}
    if spec.elastic is not None:
        out["elasticQuota"] = spec.elastic
    return out


def scope_status(ledger: Ledger, scope: Scope, ms: int) -> dict[str, Any]:
    """The REST shape of one scope's budget at ``ms`` (pure: reading changes nothing). ``burnRate`` is
    the amount held now (GPUs, cores, GiB: resource-hours per hour), ``runsOutAt`` when the budget is
    used up at that rate (None: not within the period), ``warnings`` the thresholds its consumption
    reached."""
    spec = scope.spec
    start, end = scope.period(ms)
    resources = {r: _resource(ledger, scope, r, ms, end) for r in sorted(scope.cells)}
    worst = max((100 * scope.consumed(c, ms) / spec.limits[r] for r, c in scope.cells.items()
                 if spec.limits.get(r)), default=0.0)
    since = scope.exhausted_at
    return {
        "scope": scope.label, "kind": spec.kind, **_where(spec), "period": spec.period_text(),
        "periodStart": iso(start, spec.timezone) if end else None,
        "resetsAt": iso(end, spec.timezone) if end else None,
        "onExhausted": spec.mode, "exhaustedSince": iso(since, spec.timezone) if since is not None else None,
        "warnings": [w for w in spec.warnings if worst >= w],
        "resources": resources,
    }
