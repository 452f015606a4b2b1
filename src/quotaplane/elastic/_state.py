"""The live state of the elastic engine: pods, quota groups, and the cached inputs of a sibling group."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quotaplane.elastic._dims import Dims, sorted_dims
from quotaplane.elastic.model import QuotaSpec

__all__ = ["GroupStatic", "Pod", "Quota", "describe_quota", "limited_of"]


class Pod:
    """One pod of a quota (pod form of the contract)."""

    __slots__ = ("asked", "asked_request", "assigned", "pod_id", "preemptible", "priority", "quota",
                 "request", "start_time")

    def __init__(self, pod_id: str, quota: str, request: Dims, priority: int, preemptible: bool,
                 assigned: bool, start_time: float) -> None:
        self.pod_id = pod_id
        self.quota = quota
        self.request = request
        self.priority = priority
        self.preemptible = preemptible
        self.assigned = assigned
        self.start_time = start_time
        #: added pending (a waiting ask, PR-K1): undoing its assignment makes it pending again
        self.asked = not assigned
        #: the request it waited with, when it was assigned with another (charged under resource
        #: flavors: docs/flavors.md); undoing the assignment puts it back
        self.asked_request: Dims | None = None

    def dump(self) -> dict[str, Any]:
        """The pod as plain sorted data (``dump_state``)."""
        return {"quota": self.quota, "request": sorted_dims(self.request), "priority": self.priority,
                "preemptible": self.preemptible, "assigned": self.assigned, "start_time": self.start_time}


class Quota:
    """Live state of one quota group (reference §1.2)."""

    __slots__ = (
        "allow_lent", "cap", "child_min_sum", "child_request", "children", "group_dirty", "is_parent",
        "kept", "limited", "max", "min", "name", "np_used", "parent", "pods", "raw_np_used", "raw_request",
        "raw_used", "request", "runtime", "spec", "static", "used", "weight",
    )

    def __init__(self, spec: QuotaSpec) -> None:
        self.name = spec.name
        self.children: list[str] = []           # sorted by name (E1 tie-break order)
        self.child_min_sum: Dims = {}           # Σ original min of the children (rule 6)
        self.raw_request: Dims = {}             # Σ pod requests (or the aggregate), unmasked
        self.raw_used: Dims = {}
        self.raw_np_used: Dims = {}
        self.pods: dict[str, None] = {}         # pod ids in insertion order
        self.child_request: Dims = {}           # leaf: masked raw_request; parent: Σ children limited
        self.request: Dims = {}
        self.limited: Dims = {}                 # min(request, max) per key of max: what the parent sees
        self.used: Dims = {}                    # leaf: masked raw_used; parent: Σ children used
        self.np_used: Dims = {}
        self.runtime: Dims = {}
        self.group_dirty = True                 # the runtimes of the children need a recompute
        self.static: GroupStatic | None = None  # cached calculator inputs of the children
        self.set_spec(spec)

    def set_spec(self, spec: QuotaSpec) -> None:
        self.spec = spec
        self.parent = spec.parent
        self.is_parent = spec.is_parent
        self.min: Dims = dict(spec.min._values)
        self.max: Dims = dict(spec.max._values)
        self.weight: Dims = spec.effective_weight()
        self.allow_lent = spec.allow_lent
        #: the part of its min it never lends (reported as demanded): all of it without allow-lent, else
        #: ``min − lending limit`` per resource with a lending limit (docs/elastic-quota.md)
        self.kept: Dims = kept_of(spec)
        #: its max, lowered to ``min + borrowing limit`` per resource with a borrowing limit
        self.cap: Dims = cap_of(spec)

    def has_bound_pods(self) -> bool:
        return bool(self.pods) or any(self.raw_request.values()) or any(self.raw_used.values())

    def recalc_request(self) -> None:
        """Request and limited request from the child request (reference §2.3)."""
        req = dict(self.child_request)
        # §2.6: a quota that does not lend reports at least its (original) min as demanded; with a
        # lending limit, the part of its min it does not lend
        for k, m in self.kept.items():
            if req.get(k, 0) < m:
                req[k] = m
        self.request = req
        mx = self.cap
        lim: Dims = {}
        for k, v in req.items():
            cap = mx.get(k)
            lim[k] = v if cap is None or v < cap else cap
        self.limited = lim


class GroupStatic:
    """The calculator inputs of one sibling group that only change with the children's specs.

    Cached on the parent and dropped whenever a child joins, leaves or changes its spec (the requests are
    read fresh on every recompute).
    """

    __slots__ = ("kids", "lends", "per_dim")

    def __init__(self, kids: list[Quota], dims: list[str]) -> None:
        self.kids = kids
        self.lends = [c.allow_lent for c in kids]
        # (dimension, mins, weights, which children have the dimension in max — None: all of them)
        self.per_dim: list[tuple[str, list[int], list[int], list[bool] | None]] = []
        for k in dims:
            has = [k in c.max for c in kids]
            self.per_dim.append((k, [c.min.get(k, 0) for c in kids], [c.weight.get(k, 0) for c in kids],
                                 None if all(has) else has))


def limited_of(q: Quota, child_request: Mapping[str, int]) -> Dims:
    """The request ``q`` shows its parent: at least its min when it does not lend, at most its max."""
    req = dict(child_request)
    for k, m in q.kept.items():
        if req.get(k, 0) < m:
            req[k] = m
    return {k: (v if k not in q.cap or v < q.cap[k] else q.cap[k]) for k, v in req.items()}


def kept_of(spec: QuotaSpec) -> Dims:
    """The part of ``spec``'s min it keeps when idle (see :attr:`Quota.kept`)."""
    mins = spec.min._values
    if not spec.allow_lent:
        return dict(mins)
    if spec.lending_limit is None:
        return {}
    limit = spec.lending_limit._values
    return {k: max(0, m - limit[k]) for k, m in mins.items() if k in limit}


def cap_of(spec: QuotaSpec) -> Dims:
    """``spec``'s max lowered to min plus its borrowing limit (see :attr:`Quota.cap`)."""
    cap = dict(spec.max._values)
    if spec.borrowing_limit is not None:
        for k, b in spec.borrowing_limit._values.items():
            if k in cap:
                cap[k] = min(cap[k], spec.min._values.get(k, 0) + b)
    return cap


def describe_quota(q: Quota, runtime: Mapping[str, int]) -> dict[str, Any]:
    """One quota as plain JSON-able data (spec, request, used, runtime, children, pods)."""
    s = q.spec
    return {
        "name": q.name,
        "parent": s.parent,
        "is_parent": s.is_parent,
        "allow_lent": s.allow_lent,
        **({"lending_limit": sorted_dims(s.lending_limit._values)} if s.lending_limit is not None else {}),
        **({"borrowing_limit": sorted_dims(s.borrowing_limit._values)} if s.borrowing_limit is not None
           else {}),
        "min": sorted_dims(q.min),
        "max": sorted_dims(q.max),
        "shared_weight": sorted_dims(q.weight),
        "namespaces": list(s.namespaces),
        "tree_id": s.tree_id,
        "children": list(q.children),
        # zero amounts are the same as missing ones (contract "Units"): dumped pruned
        "request": sorted_dims(q.request, prune=True),
        "used": sorted_dims(q.used, prune=True),
        "non_preemptible_used": sorted_dims(q.np_used, prune=True),
        "runtime": sorted_dims(runtime),
        "pods": sorted(q.pods),
    }
