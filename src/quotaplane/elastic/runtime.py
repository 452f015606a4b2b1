"""The runtime quota of every quota group (seed 002; reference §2), kept lazily (decision E2), and the
request and used aggregates it is computed from (reference §2.3).

A group's runtime is computed top-down: the parent's runtime (the root's: the cluster total minus what
the system and default quotas use, E4) is split among the children by min (scaled when the cluster
shrinks, E3), their limited requests and their shared weights (Hamilton rounding, E1). A sibling
group is recomputed only when its inputs changed (``group_dirty``) and only on the path a read needs;
:meth:`RuntimeTree.full_recompute` is the from-scratch twin the incremental answer must always equal.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from quotaplane.elastic._dims import Dims, add_into, diff, mask
from quotaplane.elastic._state import GroupStatic, Quota, limited_of
from quotaplane.elastic.calculator import redistribute, scale_mins
from quotaplane.elastic.model import ROOT_QUOTA, SPECIAL_QUOTAS
from quotaplane.resources import Resource

__all__ = ["RuntimeTree"]


class RuntimeTree:
    """Runtime quotas over the quota groups of one manager (``quotas`` is the manager's own dict)."""

    __slots__ = ("quotas", "root", "scale_min", "total")

    def __init__(self, quotas: dict[str, Quota], root: Quota, total: Dims, scale_min: bool) -> None:
        self.quotas = quotas
        self.root = root
        #: the cluster total in internal units
        self.total = total
        #: scale the mins down when the cluster is smaller than their sum (decision E3)
        self.scale_min = scale_min

    def full_recompute(self) -> dict[str, Resource]:
        """Every runtime computed from scratch, ignoring every cache (decision E2; for tests).

        Requests are re-aggregated bottom-up from the pods/aggregates and runtimes recomputed top-down.
        """
        limited: dict[str, Dims] = {}

        def aggregate(q: Quota) -> Dims:
            if q.is_parent:
                child_req: Dims = {}
                for c in q.children:
                    add_into(child_req, aggregate(self.quotas[c]))
            else:
                child_req = mask(q.raw_request, q.max)
            req = dict(child_req)
            for k, m in q.kept.items():         # what it does not lend (allow-lent, lending limit)
                req[k] = max(req.get(k, 0), m)
            lim = {k: (v if k not in q.cap else min(v, q.cap[k])) for k, v in req.items()}
            limited[q.name] = lim
            return lim

        for c in self.root.children:
            aggregate(self.quotas[c])
        out: dict[str, Resource] = {ROOT_QUOTA: Resource.of(self.root_total())}
        for name in SPECIAL_QUOTAS:
            out[name] = Resource.of(dict(self.quotas[name].max))

        def descend(p: Quota, total: Mapping[str, int]) -> None:
            static = self.build_static(p)
            kids = static.kids
            values = self.group_values(static, total, [limited[c.name] for c in kids])
            for c, rt in zip(kids, values, strict=True):
                out[c.name] = Resource.of(rt)
                if c.is_parent:
                    descend(c, rt)

        descend(self.root, self.root_total())
        return out

    def root_total(self) -> Dims:
        """The root's runtime: the cluster total minus what the system and default quotas use (E4)."""
        out = dict(self.total)
        for name in SPECIAL_QUOTAS:
            add_into(out, self.quotas[name].used, -1)
        return out

    def runtime_of(self, q: Quota) -> Dims:
        """The runtime of ``q`` now (the root's total, a special quota's max, else computed)."""
        if q is self.root:
            return self.root_total()
        if q.name in SPECIAL_QUOTAS:
            return q.max
        self.ensure(q)
        return q.runtime

    def ensure(self, q: Quota) -> None:
        """Recompute the dirty sibling groups from the root down to ``q`` (lazy refresh, §2.4)."""
        chain: list[Quota] = []
        p = self.quotas.get(q.parent)
        while p is not None:
            chain.append(p)
            p = self.quotas.get(p.parent) if p is not self.root else None
        for g in reversed(chain):
            if g.group_dirty:
                self.compute_group(g)

    def ensure_all(self) -> None:
        """Recompute every dirty sibling group (before a reclaim tick reads them all)."""
        stack = [self.root]
        while stack:
            p = stack.pop()
            if p.group_dirty:
                self.compute_group(p)
            for c in reversed(p.children):
                child = self.quotas[c]
                if child.is_parent:
                    stack.append(child)

    def static(self, p: Quota) -> GroupStatic:
        """The cached calculator inputs of ``p``'s children (built when missing)."""
        static = p.static
        if static is None:
            static = p.static = self.build_static(p)
        return static

    def build_static(self, p: Quota) -> GroupStatic:
        """The calculator inputs of ``p``'s children, built anew."""
        kids = [self.quotas[c] for c in p.children]
        return GroupStatic(kids, self.dims(p, kids))

    def compute_group(self, p: Quota) -> None:
        """Recompute the runtimes of ``p``'s children; mark the groups below whose input changed."""
        static = self.static(p)
        kids = static.kids
        total = self.root_total() if p is self.root else p.runtime
        values = self.group_values(static, total, [c.limited for c in kids])
        for c, rt in zip(kids, values, strict=True):
            if rt != c.runtime:
                c.runtime = rt
                if c.is_parent:
                    c.group_dirty = True
        p.group_dirty = False

    def dims(self, p: Quota, kids: Sequence[Quota]) -> list[str]:
        """The resource names of ``p``'s group: its max names (the root: every child's)."""
        if p is not self.root:
            return list(p.max)
        keys: dict[str, None] = {}
        for c in kids:
            for k in c.max:
                keys[k] = None
        return sorted(keys)

    def group_values(self, static: GroupStatic, total: Mapping[str, int],
                      limited: Sequence[Mapping[str, int]]) -> list[Dims]:
        """Runtime of every child of a group for parent total ``total`` (reference §2.1, §2.5).

        Each child's runtime holds the names of its own max only.
        """
        n = len(static.kids)
        if not n:
            return []
        columns: list[tuple[str, list[int], list[bool] | None]] = []
        for k, mins, weights, has in static.per_dim:
            t = total.get(k, 0)
            if self.scale_min:
                mins = scale_mins(t, mins)
            reqs = [lim.get(k, 0) for lim in limited]
            columns.append((k, redistribute(t, mins, reqs, weights, static.lends), has))
        if len(columns) == 2 and columns[0][2] is None and columns[1][2] is None:
            k1, r1, _ = columns[0]
            k2, r2, _ = columns[1]
            return [{k1: a, k2: b} for a, b in zip(r1, r2, strict=True)]
        out: list[Dims] = [{} for _ in range(n)]
        for k, rts, has in columns:
            if has is None:
                for d, r in zip(out, rts, strict=True):
                    d[k] = r
            else:
                for d, r, h in zip(out, rts, has, strict=True):
                    if h:
                        d[k] = r
        return out

    def runtime_with_extra(self, q: Quota, extra: Mapping[str, int]) -> dict[str, Dims]:
        """Runtimes of ``q`` and its ancestors if ``extra`` were added to ``q``'s request. Changes nothing."""
        self.ensure(q)
        path: list[Quota] = []          # q, its parent, …, the first-level quota
        overrides: dict[str, Dims] = {}
        cur = q
        child_request: Dims | None = dict(q.child_request)
        assert child_request is not None
        add_into(child_request, extra)
        while cur is not self.root:
            path.append(cur)
            if child_request is not None:
                lim = limited_of(cur, child_request)
                if lim != cur.limited:
                    overrides[cur.name] = lim
                    parent = self.quotas[cur.parent]
                    child_request = dict(parent.child_request)
                    add_into(child_request, diff(lim, cur.limited))
                else:
                    child_request = None
            cur = self.quotas[cur.parent]
        result: dict[str, Dims] = {}
        total: Dims = self.root_total()
        changed = False
        group = self.root
        for node in reversed(path):
            if node.name in overrides or changed:
                static = self.static(group)
                limited = [overrides.get(c.name, c.limited) for c in static.kids]
                idx = bisect.bisect_left(group.children, node.name)
                value = self.group_values(static, total, limited)[idx]
            else:
                value = node.runtime
            # (overrides run contiguously from q upwards, so below the first override every node has
            # one; ``changed`` only guards that invariant)
            changed = value != node.runtime
            result[node.name] = value
            total = value
            group = node
        return result

    # -- aggregation: requests bottom-up, used up the chain (reference §2.3) -------------------------
    def leaf_changed(self, q: Quota) -> None:
        """A leaf's raw request or used changed: push the change of its limited request and used up."""
        q.child_request = mask(q.raw_request, q.max)
        self.request_changed(q)
        used = mask(q.raw_used, q.max)
        delta = diff(used, q.used)
        q.used = used
        q.np_used = mask(q.raw_np_used, q.max)
        if delta:
            if q.name in SPECIAL_QUOTAS:
                self.root.group_dirty = True
            else:
                self.add_used_up(self.quotas[q.parent], delta)

    def request_changed(self, q: Quota) -> None:
        """Recompute ``q``'s request; when its limited request changed, carry it to the parent (§2.3)."""
        old = q.limited
        q.recalc_request()
        if q.name in SPECIAL_QUOTAS or q is self.root:
            return
        if q.limited != old:
            parent = self.quotas[q.parent]
            parent.group_dirty = True
            add_into(parent.child_request, diff(q.limited, old))
            self.request_changed(parent)

    def add_used_up(self, p: Quota | None, delta: Mapping[str, int], sign: int = 1) -> None:
        """Add ``sign × delta`` to the used of ``p`` and every ancestor."""
        while p is not None:
            add_into(p.used, delta, sign)
            p = self.quotas.get(p.parent)

    def detach(self, q: Quota) -> None:
        """Take ``q`` out of its parent's sums and child list."""
        if q.name in SPECIAL_QUOTAS:
            self.root.group_dirty = True
            return
        p = self.quotas[q.parent]
        idx = bisect.bisect_left(p.children, q.name)
        del p.children[idx]
        add_into(p.child_min_sum, q.min, -1)
        p.group_dirty = True
        p.static = None
        add_into(p.child_request, q.limited, -1)
        self.request_changed(p)
        self.add_used_up(p, q.used, -1)

    def attach(self, q: Quota) -> None:
        """Put ``q`` into its parent's sums and child list (the inverse of :meth:`detach`)."""
        if q.name in SPECIAL_QUOTAS:
            self.root.group_dirty = True
            return
        p = self.quotas[q.parent]
        bisect.insort(p.children, q.name)
        add_into(p.child_min_sum, q.min)
        p.group_dirty = True
        p.static = None
        add_into(p.child_request, q.limited)
        self.request_changed(p)
        self.add_used_up(p, q.used)
