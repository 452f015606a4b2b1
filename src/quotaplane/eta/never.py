"""Asks that can never start under the configuration in force (issue 35, docs/eta.md): a forecast that
finds no start for them says why, instead of "unknown" — no end of running work would ever make room.

An ask never fits when it asks more than a queue's ``max`` on its chain (R-6: a name the max does not
define is unlimited) that no time window overrides, or more than the cluster's capacity now (R-7: a
name no node has counts as 0). Both are the engines' own tests on amounts no release changes; the
cluster can grow, so its basis says "now".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from quotaplane.eta.later import _parsed
from quotaplane.partition.facade import Partition
from quotaplane.resources import fit_in, fit_in_max_undef
from quotaplane.units import amount

__all__ = ["never_fits"]


def _over(limit: Mapping[str, int], ask: Mapping[str, int], strict: bool) -> str:
    """The first name of ``ask`` over ``limit``, told in human units: ``3 cores of 2 cores``."""
    for name, value in sorted(ask.items()):
        have = limit.get(name)
        if have is None and not strict:
            continue
        have = max(0, have or 0)
        if value > have:
            return f"{amount(name, value)} over {amount(name, have)}"
    return ""           # pragma: no cover - called only when the fit test failed


def never_fits(partition: Partition, keys: Iterable[str]) -> dict[str, str]:
    """For each of ``keys`` (waiting asks) that can never fit, the basis that says why."""
    out: dict[str, str] = {}
    with partition.lock:
        state = partition.state
        raw = state.config.extensions.get("windows")
        windowed = {w.queue.lower() for w in _parsed(raw) if "max" in w.overrides} if raw else set()
        for key in keys:
            ask = state.waiting.asks.get(key)
            app = state.apps.get(ask.application_id) if ask is not None else None
            if ask is not None and app is not None:
                found = _never(key, ask.resource, state.queues.queue(app.queue_path), state.total, windowed)
                if found:
                    out[key] = found
    return out


def _never(key: str, resource: Mapping[str, int], q: Any, total: Mapping[str, int],
           windowed: set[str]) -> str:
    while q is not None and not (q.parent is None and q.max == total):     # root's max: the cluster
        if q.max is not None and q.path not in windowed and not fit_in_max_undef(q.max, resource):
            return f"never fits: {key} asks {_over(q.max, resource, False)}, {q.path}'s max"
        q = q.parent
    if not fit_in(total, resource):
        return f"never fits: {key} asks {_over(total, resource, True)}, the cluster's capacity now"
    return ""
