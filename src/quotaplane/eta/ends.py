"""When running work ends in the forecast's runs (issue 35, docs/eta.md "How the forecast is made",
step 2): its declared runtime, else the observed hold times of its queue (or user) longer than it has
run, else never; and when an estimate stops holding."""

from __future__ import annotations

import math

from quotaplane.application import Allocation
from quotaplane.eta.holds import HoldEstimate, HoldTimes
from quotaplane.state.handlers import PartitionState

__all__: list[str] = []

_Estimates = dict[tuple[str, str, float, float], HoldEstimate]


def _end_of(a: Allocation, state: PartitionState, holds: HoldTimes, now: float,
            q: float, start: float | None = None, memo: _Estimates | None = None,
            why: bool = True) -> tuple[float | None, str]:
    """When running allocation ``a`` ends in the run of quantile ``q``, and on what basis (``why``
    False: no declared runtime's basis is written — a run following another answers with the
    other's); ``start``: when it started in that run (default its own time). ``memo`` keeps the
    estimates of one forecast by queue, user, age and quantile: most allocations share them (every
    allocation a run starts has age 0), and an estimate is a walk of the distribution's buckets."""
    began = a.time if start is None else start
    if a.max_runtime is not None:
        end = began + a.max_runtime
        if end < now:
            return now, f"declared runtime of {a.allocation_key} (overdue)" if why else ""
        return end, f"declared runtime of {a.allocation_key}" if why else ""
    app = state.apps.get(a.application_id)
    if app is None:                      # pragma: no cover - a live allocation has its application
        return None, ""
    age = max(0.0, now - began)
    if memo is None:
        est: HoldEstimate = holds.remaining(app.queue_path, app.user.user, age, q)
    else:
        mkey = (app.queue_path, app.user.user, age, q)
        found = memo.get(mkey)
        est = memo[mkey] = holds.remaining(*mkey) if found is None else found
    if est.seconds is None:
        return None, est.basis
    return max(now, began + est.seconds), est.basis


def _outlives(state: PartitionState, holds: HoldTimes, now: float) -> float:
    """When the first running allocation without a declared runtime outlives a hold its end was
    estimated from (:meth:`HoldTimes.changes_at`): from then on its end, so the forecast, may differ —
    with nothing committed and before any end the forecast counted on."""
    first = math.inf
    apps = state.apps
    for a in state.allocs.values():
        if a.max_runtime is None and (app := apps.get(a.application_id)) is not None:
            age = max(0.0, now - a.time)
            first = min(first, a.time + holds.changes_at(app.queue_path, app.user.user, age))
    return first


def _needs_quantiles(state: PartitionState) -> bool:
    """True when some end comes from observed hold times (then p10, p50 and p90 differ)."""
    return any(a.max_runtime is None for a in state.allocs.values()) or \
        any(ask.max_runtime is None for ask in state.waiting.asks.all())
