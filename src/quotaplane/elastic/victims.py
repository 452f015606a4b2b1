"""Which pods to evict: reclaim of an over-used quota (decision E5) and preemption within a quota (E6).

Both take pods away from the least important up, then *reprieve* them from the most important down
while what is left still fits — the same second pass, so :func:`reprieve` is written once. Importance
(E5): lower priority first, newer first on ties, then pod id; pods running on best-effort terms (an
exhausted ``besteffort`` budget, issue 34: "the first preempted") are less important than any other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from quotaplane.elastic._dims import Dims, add_into, fits, mask, sum_of
from quotaplane.elastic._state import Pod, Quota

__all__ = ["by_importance", "preemption_victims", "reprieve", "revoke_victims"]


def by_importance(pods: Iterable[Pod], first: Callable[[str], bool] | None = None) -> list[Pod]:
    """Least important first: priority ascending, newest first on ties, then pod id ascending (E5);
    the pods ``first`` names (on best-effort terms, issue 34) before all others."""
    if first is None:
        return sorted(pods, key=lambda p: (p.priority, -p.start_time, p.pod_id))
    return sorted(pods, key=lambda p: (not first(p.pod_id), p.priority, -p.start_time, p.pod_id))


def reprieve(removed: list[Pod], current: Dims, limit: Mapping[str, int], q: Quota) -> list[str]:
    """Add ``removed`` back to ``current`` from the most important down while it fits ``limit``; the
    pods that do not fit are the victims, returned least important first."""
    victims: list[str] = []
    for p in reversed(removed):
        cand = sum_of(current, mask(p.request, q.max))
        if fits(cand, limit):
            current = cand
        else:
            victims.append(p.pod_id)
    victims.reverse()
    return victims


def revoke_victims(q: Quota, pods: Iterable[Pod], limit: Mapping[str, int],
                   first: Callable[[str], bool] | None = None) -> list[str]:
    """Eviction (E5): assigned, preemptible pods of ``q`` to evict until its used fits ``limit``
    (those ``first`` names before the others, issue 34).

    If even evicting every preemptible pod does not make it fit, all of those are evicted.
    """
    used = dict(q.used)
    tried: list[Pod] = []
    for p in by_importance((p for p in pods if p.assigned), first):
        if fits(used, limit):
            break
        if not p.preemptible:
            continue
        add_into(used, mask(p.request, q.max), -1)
        tried.append(p)
    if not fits(used, limit):
        return [p.pod_id for p in tried]
    return reprieve(tried, used, limit, q)


def preemption_victims(q: Quota, pods: Iterable[Pod], request: Dims, limit: Mapping[str, int],
                       priority: int, first: Callable[[str], bool] | None = None) -> list[str]:
    """Inner-quota preemption (E6): pods of ``q`` to preempt so that ``request`` fits ``limit``.

    Candidates are assigned, preemptible pods of strictly lower ``priority``; those ``first`` names are
    the least important (issue 34: reprieved last). ``[]`` when the request fits already, or when
    removing every candidate would still not make it fit.
    """
    used = dict(q.used)
    if fits(sum_of(used, request), limit):
        return []
    candidates = by_importance((p for p in pods if p.assigned and p.preemptible and p.priority < priority),
                               first)
    for p in candidates:
        add_into(used, mask(p.request, q.max), -1)
    current = sum_of(used, request)
    if not fits(current, limit):
        return []
    return reprieve(candidates, current, limit, q)
