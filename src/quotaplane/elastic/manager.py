"""The elastic-quota manager: quota groups, runtime quota, admission and reclaim (seed 002).

State per quota group (reference §1.2): the declared spec, the requests and used amounts of its pods
(or the aggregate amounts a caller sets), the request aggregated bottom-up, and the runtime computed
top-down. The runtime is a pure function of the tree, the requests, the total and the flags (decision
E2). It is kept **incrementally and lazily**: a change to a leaf pushes the change of its limited request
up the ancestor chain (O(depth × dims)) and marks the sibling groups whose inputs changed as dirty; a read
recomputes only the dirty groups on the path from the root to the quota read. A recomputed group marks the
groups of children whose runtime changed, so the answer always equals :meth:`full_recompute`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from quotaplane.elastic.calculator import redistribute, scale_mins
from quotaplane.elastic.errors import QuotaValidationError
from quotaplane.elastic.model import (
    DEFAULT_QUOTA,
    POD_LABEL_NAME,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    QuotaSpec,
    internal_resources,
    namespaces_tuple,
    parse_elastic_quotas,
)
from quotaplane.resources import INT64_MAX, Resource

__all__ = ["DEFAULT_REVOKE_DELAY", "ElasticQuotaManager", "Violation"]

#: DelayEvictTime of reference §4 (decision E5).
DEFAULT_REVOKE_DELAY = 120.0
#: MaxInt64/5 for cpu and memory: the default max of the system and default quotas (reference §1.4).
_SPECIAL_MAX = {"vcore": INT64_MAX // 5, "memory": INT64_MAX // 5}
_SPECIAL = (SYSTEM_QUOTA, DEFAULT_QUOTA)

Dims = dict[str, int]
#: (code, path, message, shortfall per resource) — the structured form of one ``check`` reason.
Violation = tuple[str, str, str, dict[str, int]]


def _mask(values: Mapping[str, int], keys: Mapping[str, int]) -> Dims:
    # E7: only the names the quota's max defines are limited (and counted).
    return {k: v for k, v in values.items() if k in keys}


def _add_into(target: Dims, delta: Mapping[str, int], sign: int = 1) -> None:
    for k, v in delta.items():
        target[k] = target.get(k, 0) + sign * v


def _diff(new: Mapping[str, int], old: Mapping[str, int]) -> Dims:
    out = {k: v - old.get(k, 0) for k, v in new.items()}
    for k, v in old.items():
        if k not in new:
            out[k] = -v
    return {k: v for k, v in out.items() if v}


def _fits(used: Mapping[str, int], limit: Mapping[str, int]) -> bool:
    # Every dimension of the limit is compared (E5 fixes upstream's key-dropping quirk).
    return all(used.get(k, 0) <= v for k, v in limit.items())


def _le_completely(left: Mapping[str, int], right: Mapping[str, int]) -> list[str]:
    """LessThanOrEqualCompletely of reference §3.3 rule 6: keys of ``left`` where it exceeds ``right``."""
    return sorted(k for k, v in left.items() if v > right.get(k, 0))


def _fmt(values: Mapping[str, int]) -> str:
    return str(Resource.of(dict(values)))


class _Pod:
    """One pod of a quota (pod form of the contract)."""

    __slots__ = ("assigned", "pod_id", "preemptible", "priority", "quota", "request", "start_time")

    def __init__(self, pod_id: str, quota: str, request: Dims, priority: int, preemptible: bool,
                 assigned: bool, start_time: float) -> None:
        self.pod_id = pod_id
        self.quota = quota
        self.request = request
        self.priority = priority
        self.preemptible = preemptible
        self.assigned = assigned
        self.start_time = start_time


class _Quota:
    """Live state of one quota group (reference §1.2)."""

    __slots__ = (
        "allow_lent", "child_min_sum", "child_request", "children", "group_dirty", "is_parent", "limited",
        "max", "min", "name", "np_used", "parent", "pods", "raw_np_used", "raw_request", "raw_used",
        "request", "runtime", "spec", "static", "used", "weight",
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
        self.static: _GroupStatic | None = None  # cached calculator inputs of the children
        self.set_spec(spec)

    def set_spec(self, spec: QuotaSpec) -> None:
        self.spec = spec
        self.parent = spec.parent
        self.is_parent = spec.is_parent
        self.min: Dims = dict(spec.min._values)
        self.max: Dims = dict(spec.max._values)
        self.weight: Dims = spec.effective_weight()
        self.allow_lent = spec.allow_lent

    def has_bound_pods(self) -> bool:
        return bool(self.pods) or any(self.raw_request.values()) or any(self.raw_used.values())

    def recalc_request(self) -> None:
        """Request and limited request from the child request (reference §2.3)."""
        req = dict(self.child_request)
        if not self.allow_lent:
            # §2.6: a quota that does not lend reports at least its (original) min as demanded.
            for k, m in self.min.items():
                if req.get(k, 0) < m:
                    req[k] = m
        self.request = req
        mx = self.max
        lim: Dims = {}
        for k, v in req.items():
            cap = mx.get(k)
            lim[k] = v if cap is None or v < cap else cap
        self.limited = lim


class _GroupStatic:
    """The calculator inputs of one sibling group that only change with the children's specs.

    Cached on the parent and dropped whenever a child joins, leaves or changes its spec (the requests are
    read fresh on every recompute).
    """

    __slots__ = ("kids", "lends", "per_dim")

    def __init__(self, kids: list[_Quota], dims: list[str]) -> None:
        self.kids = kids
        self.lends = [c.allow_lent for c in kids]
        # (dimension, mins, weights, which children have the dimension in max — None: all of them)
        self.per_dim: list[tuple[str, list[int], list[int], list[bool] | None]] = []
        for k in dims:
            has = [k in c.max for c in kids]
            self.per_dim.append((k, [c.min.get(k, 0) for c in kids], [c.weight.get(k, 0) for c in kids],
                                 None if all(has) else has))


class _View:
    """Committed specs plus the specs staged so far in one all-or-nothing batch (reference §3)."""

    def __init__(self, mgr: ElasticQuotaManager) -> None:
        self.mgr = mgr
        self.overlay: dict[str, QuotaSpec] = {}
        self.added: dict[str, dict[str, None]] = {}
        self.removed: dict[str, set[str]] = {}
        self.min_delta: dict[str, Dims] = {}
        self.ns_overlay: dict[str, str | None] = {}

    def get(self, name: str) -> QuotaSpec | None:
        spec = self.overlay.get(name)
        if spec is not None:
            return spec
        q = self.mgr._q.get(name)
        return q.spec if q is not None else None

    def children(self, name: str) -> list[str]:
        q = self.mgr._q.get(name)
        removed = self.removed.get(name, set())
        out = [c for c in q.children if c not in removed] if q is not None else []
        out.extend(self.added.get(name, {}))
        return out

    def child_min_sum(self, name: str) -> Dims:
        q = self.mgr._q.get(name)
        out = dict(q.child_min_sum) if q is not None else {}
        _add_into(out, self.min_delta.get(name, {}))
        return out

    def ns_owner(self, ns: str) -> str | None:
        if ns in self.ns_overlay:
            return self.ns_overlay[ns]
        return self.mgr._ns.get(ns)

    def stage(self, spec: QuotaSpec) -> None:
        old = self.get(spec.name)
        if old is not None:
            for ns in old.namespaces:
                if self.ns_owner(ns) == spec.name:
                    self.ns_overlay[ns] = None
            if spec.name not in _SPECIAL:
                self._unlink(old)
        self.overlay[spec.name] = spec
        if spec.name not in _SPECIAL:
            self._link(spec)
        for ns in spec.namespaces:
            self.ns_overlay[ns] = spec.name

    def _unlink(self, spec: QuotaSpec) -> None:
        added = self.added.get(spec.parent)
        if added is not None and spec.name in added:
            del added[spec.name]
        else:
            self.removed.setdefault(spec.parent, set()).add(spec.name)
        _add_into(self.min_delta.setdefault(spec.parent, {}), spec.min._values, -1)

    def _link(self, spec: QuotaSpec) -> None:
        removed = self.removed.get(spec.parent)
        if removed is not None and spec.name in removed:
            removed.discard(spec.name)
        else:
            self.added.setdefault(spec.parent, {})[spec.name] = None
        _add_into(self.min_delta.setdefault(spec.parent, {}), spec.min._values)


class ElasticQuotaManager:
    """Koordinator's multi-hierarchy elastic quota (seed 002) as a self-contained engine.

    ``total`` is the cluster total in internal units. ``scale_min`` switches min scaling (decision E3).
    ``revoke_delay`` is DelayEvictTime (decision E5), ``check_parent`` is EnableCheckParentQuota (§2.9),
    ``default_max`` / ``system_max`` the max of the default and system groups (E4).
    """

    def __init__(self, total: Mapping[str, int], *, scale_min: bool = True,
                 revoke_delay: float = DEFAULT_REVOKE_DELAY, check_parent: bool = False,
                 default_max: Mapping[str, int] | None = None,
                 system_max: Mapping[str, int] | None = None) -> None:
        if revoke_delay < 0:
            raise ValueError("revoke_delay must be >= 0")
        self._total: Dims = dict(_nonneg(total)._values)
        self._scale_min = scale_min
        self._delay = float(revoke_delay)
        self._check_parent = check_parent
        self._q: dict[str, _Quota] = {}
        self._ns: dict[str, str] = {}
        self._pods: dict[str, _Pod] = {}
        self._last_under: dict[str, float] = {}
        root = _Quota(QuotaSpec(ROOT_QUOTA, Resource(), Resource(), parent="", is_parent=True,
                                allow_lent=False))
        self._root = root
        self._q[ROOT_QUOTA] = root
        for name, mx in ((SYSTEM_QUOTA, system_max), (DEFAULT_QUOTA, default_max)):
            limit = internal_resources(name, "max", mx if mx is not None else _SPECIAL_MAX)
            self._q[name] = _Quota(QuotaSpec(name, Resource(), limit))

    # ------------------------------------------------------------------------------------------------
    # definitions
    # ------------------------------------------------------------------------------------------------
    def apply_yaml(self, text: str) -> None:
        """Create or update every ElasticQuota of ``text``; all-or-nothing (reference §3).

        Raises :class:`QuotaValidationError` naming the quota and the rule; nothing changes then.
        """
        self._apply_specs(parse_elastic_quotas(text))

    def upsert(self, name: str, *, min: Mapping[str, int], max: Mapping[str, int],
               parent: str | None = None, is_parent: bool = False,
               shared_weight: Mapping[str, int] | None = None, allow_lent: bool = True,
               namespaces: Sequence[str] = (), tree_id: str = "", force_update: bool = False) -> None:
        """Create or replace one quota group (internal units); the checks of :meth:`apply_yaml`."""
        if not isinstance(name, str) or not name:
            raise QuotaValidationError(str(name), "document", "the quota name must be a non-empty string")
        spec = QuotaSpec(
            name=name,
            min=internal_resources(name, "min", min),
            max=internal_resources(name, "max", max),
            parent=parent if parent else ROOT_QUOTA,
            is_parent=bool(is_parent),
            shared_weight=(internal_resources(name, "shared-weight", shared_weight)
                           if shared_weight is not None else None),
            allow_lent=bool(allow_lent),
            namespaces=namespaces_tuple(name, namespaces),
            tree_id=tree_id,
            force_update=force_update,
        )
        self._apply_specs([spec])

    def apply_specs(self, specs: Sequence[QuotaSpec]) -> None:
        """Create or update several quota groups given as :class:`QuotaSpec`; all-or-nothing."""
        self._apply_specs(list(specs))

    def check_sync(self, specs: Sequence[QuotaSpec]) -> None:
        """Every check :meth:`sync_specs` makes before it changes anything, changing nothing.

        Raises :class:`QuotaValidationError` exactly when ``sync_specs(specs)`` would (a config reload is
        validated with it before it is journalled).
        """
        specs = list(specs)
        keep = {s.name for s in specs}
        gone = {n for n in self._q if n not in keep and n not in (ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA)}
        for spec in specs:
            if spec.parent in gone:
                raise QuotaValidationError(spec.name, "parent-not-found",
                                           f"the parent {spec.parent} is not in the new definitions")
        for name in sorted(gone):
            if self._q[name].has_bound_pods():
                raise QuotaValidationError(name, "delete-has-pods",
                                           f"quota {name} is not in the new definitions but has pods")
        view = _View(self)          # the validation half of _apply_specs: staged in a view only
        seen: set[str] = set()
        for spec in _parents_first(specs):
            if spec.name in seen:
                raise QuotaValidationError(spec.name, "duplicate",
                                           "the quota is defined twice in one request")
            seen.add(spec.name)
            view.stage(self._validate(view, spec))

    def sync_specs(self, specs: Sequence[QuotaSpec]) -> None:
        """Make the quota set exactly ``specs`` (a declarative reload).

        Quotas of ``specs`` are created or updated as by :meth:`apply_specs`; every other quota (except
        the root, system and default quotas) is deleted. All-or-nothing: a quota that would have to go
        but still has pods, a definition naming such a quota as parent, or any rule broken by the
        definitions raises :class:`QuotaValidationError` and changes nothing.
        """
        specs = list(specs)
        keep = {s.name for s in specs}
        removed = [n for n in sorted(self._q) if n not in keep and n not in (ROOT_QUOTA, SYSTEM_QUOTA,
                                                                             DEFAULT_QUOTA)]
        gone = set(removed)
        for spec in specs:
            if spec.parent in gone:
                raise QuotaValidationError(spec.name, "parent-not-found",
                                           f"the parent {spec.parent} is not in the new definitions")
        for name in removed:
            q = self._q[name]
            if q.has_bound_pods():
                raise QuotaValidationError(name, "delete-has-pods",
                                           f"quota {name} is not in the new definitions but has pods")
        # Every check that can fail is done: apply (itself all-or-nothing), then delete deepest first.
        self._apply_specs(specs)
        for name in sorted(removed, key=lambda n: (-self._depth(n), n)):
            self.delete(name)

    def _depth(self, name: str) -> int:
        depth = 0
        q = self._q[name]
        while q.parent and q.parent in self._q:
            depth += 1
            q = self._q[q.parent]
        return depth

    def delete(self, name: str) -> None:
        """Delete a quota group (reference §3.4).

        Unknown name: ``KeyError``. Root, system and default quotas, a quota with children or with pods:
        :class:`QuotaValidationError`.
        """
        q = self._q.get(name)
        if q is None:
            raise KeyError(name)
        if name in (ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA):
            raise QuotaValidationError(name, "delete-protected", f"the quota {name} cannot be deleted")
        if q.children:
            raise QuotaValidationError(
                name, "delete-has-children",
                f"delete quota failed, quota {name} has {len(q.children)} child quotas")
        if q.has_bound_pods():
            pods = ", ".join(q.pods) if q.pods else "aggregate usage"
            raise QuotaValidationError(
                name, "delete-has-pods",
                f"delete quota failed, quota {name} has {len(q.pods)} child pods: {pods}")
        self._detach(q)
        del self._q[name]
        for ns in q.spec.namespaces:
            if self._ns.get(ns) == name:
                del self._ns[ns]
        self._last_under.pop(name, None)

    def set_total(self, total: Mapping[str, int]) -> None:
        """Set the cluster total (internal units); the root runtime follows (E4)."""
        self._total = dict(_nonneg(total)._values)
        self._root.group_dirty = True

    def set_options(self, *, scale_min: bool | None = None, revoke_delay: float | None = None,
                    check_parent: bool | None = None) -> None:
        """Change the engine options of a config reload (``None`` keeps an option as it is).

        ``scale_min`` changes every runtime (decision E3), so every sibling group is recomputed;
        ``revoke_delay`` (E5) and ``check_parent`` (§2.9) only change later decisions. A negative
        ``revoke_delay`` raises ``ValueError`` and changes nothing.
        """
        if revoke_delay is not None and revoke_delay < 0:
            raise ValueError("revoke_delay must be >= 0")
        if revoke_delay is not None:
            self._delay = float(revoke_delay)
        if check_parent is not None:
            self._check_parent = bool(check_parent)
        if scale_min is not None and bool(scale_min) != self._scale_min:
            self._scale_min = bool(scale_min)
            for q in self._q.values():      # the runtimes of every group depend on it (E3)
                if q is self._root or q.is_parent:
                    q.group_dirty = True

    def quotas_in_use(self) -> list[str]:
        """The quotas holding pods or aggregate usage, sorted (the default and system quotas included)."""
        return [name for name in sorted(self._q) if self._q[name].has_bound_pods()]

    # ------------------------------------------------------------------------------------------------
    # requests and usage: aggregate form
    # ------------------------------------------------------------------------------------------------
    def set_request(self, name: str, request: Mapping[str, int]) -> None:
        """Σ requests of all pods of a leaf (pending + assigned), aggregate form."""
        q = self._leaf(name)
        self._no_pods(q)
        q.raw_request = dict(_nonneg(request)._values)
        self._leaf_changed(q)

    def set_used(self, name: str, used: Mapping[str, int], *,
                 non_preemptible: Mapping[str, int] | None = None) -> None:
        """Σ requests of the assigned pods of a leaf (and of its non-preemptible ones), aggregate form."""
        q = self._leaf(name)
        self._no_pods(q)
        q.raw_used = dict(_nonneg(used)._values)
        q.raw_np_used = dict(_nonneg(non_preemptible)._values) if non_preemptible else {}
        self._leaf_changed(q)

    # ------------------------------------------------------------------------------------------------
    # requests and usage: pod form
    # ------------------------------------------------------------------------------------------------
    def add_pod(self, name: str, pod_id: str, request: Mapping[str, int], *, priority: int = 0,
                preemptible: bool = True, assigned: bool = False, start_time: float = 0.0) -> None:
        """Add a pod to a leaf quota; pending unless ``assigned``. A known pod id is a ``ValueError``."""
        if not isinstance(pod_id, str) or not pod_id:
            raise ValueError("pod id must be a non-empty string")
        if pod_id in self._pods:
            raise ValueError(f"pod {pod_id!r} already exists")
        q = self._leaf(name)
        if not q.pods and (any(q.raw_request.values()) or any(q.raw_used.values())
                           or any(q.raw_np_used.values())):
            raise ValueError(f"quota {name!r} is fed by set_request/set_used; pods cannot be mixed in")
        req = dict(_nonneg(request)._values)
        pod = _Pod(pod_id, name, req, int(priority), bool(preemptible), bool(assigned), float(start_time))
        self._pods[pod_id] = pod
        q.pods[pod_id] = None
        _add_into(q.raw_request, req)
        if pod.assigned:
            self._count_used(q, pod, 1)
        self._leaf_changed(q)

    def assign_pod(self, pod_id: str) -> None:
        """Mark a pending pod as assigned (bound); it now counts in used. Unknown id: ``KeyError``."""
        pod = self._pods[pod_id]
        if pod.assigned:
            return
        pod.assigned = True
        q = self._q[pod.quota]
        self._count_used(q, pod, 1)
        self._leaf_changed(q)

    def remove_pod(self, pod_id: str) -> None:
        """Remove a pod (pending or assigned). Unknown id: ``KeyError``."""
        pod = self._pods.pop(pod_id)
        q = self._q[pod.quota]
        del q.pods[pod_id]
        _add_into(q.raw_request, pod.request, -1)
        if pod.assigned:
            self._count_used(q, pod, -1)
        if not q.pods:
            # exact zero again: no float or leftover keys can linger once the last pod is gone
            q.raw_request, q.raw_used, q.raw_np_used = {}, {}, {}
        self._leaf_changed(q)

    def has_pod(self, pod_id: str) -> bool:
        """True when ``pod_id`` is known."""
        return pod_id in self._pods

    def pod_quota(self, pod_id: str) -> str:
        """The quota a known pod belongs to (``KeyError`` otherwise)."""
        return self._pods[pod_id].quota

    # ------------------------------------------------------------------------------------------------
    # reads
    # ------------------------------------------------------------------------------------------------
    def runtime(self, name: str) -> Resource:
        """The runtime quota of ``name`` (reference §2.4); the root's is the root total (E4)."""
        q = self._get(name)
        return Resource.of(dict(self._runtime_of(q)))

    def request(self, name: str) -> Resource:
        """The request of ``name``: leaf Σ pod requests masked to max (E7), parent Σ children limited."""
        return Resource.of(dict(self._get(name).request))

    def used(self, name: str) -> Resource:
        """Σ requests of the assigned pods (masked to max, E7); a parent's is its children's sum."""
        return Resource.of(dict(self._get(name).used))

    def non_preemptible_used(self, name: str) -> Resource:
        """Σ requests of the assigned non-preemptible pods of a leaf (masked to max)."""
        return Resource.of(dict(self._get(name).np_used))

    def spec(self, name: str) -> QuotaSpec:
        """The declared spec of ``name`` (``KeyError`` when unknown)."""
        return self._get(name).spec

    def quota_names(self) -> list[str]:
        """Every quota name, sorted (the root, system and default quotas included)."""
        return sorted(self._q)

    def children(self, name: str) -> list[str]:
        """The child quota names of ``name``, sorted."""
        return list(self._get(name).children)

    @property
    def total(self) -> Resource:
        """The cluster total."""
        return Resource.of(dict(self._total))

    @property
    def scale_min(self) -> bool:
        """Whether min scaling is on (E3)."""
        return self._scale_min

    @property
    def revoke_delay(self) -> float:
        """The over-use delay before revocation, in seconds (E5)."""
        return self._delay

    @property
    def check_parent(self) -> bool:
        """Whether admission also checks the ancestors' runtimes (§2.9)."""
        return self._check_parent

    def quota_for_pod(self, labels: Mapping[str, str] | None, namespace: str | None) -> str:
        """The quota a pod belongs to (reference §1.1 GetQuotaName).

        The pod label ``quota.scheduling.koordinator.sh/name``, else a quota named like the namespace,
        else the quota whose ``namespaces`` annotation lists the namespace, else the default quota; a
        resolved name that is not a known quota also means the default quota.
        """
        name: str | None = None
        if labels:
            value = labels.get(POD_LABEL_NAME)
            if value:
                name = str(value)
        if name is None and namespace:
            if namespace in self._q and namespace not in (ROOT_QUOTA, SYSTEM_QUOTA):
                name = namespace
            else:
                name = self._ns.get(namespace)
        if name is None or name not in self._q:
            return DEFAULT_QUOTA
        return name

    # ------------------------------------------------------------------------------------------------
    # admission (reference §2.9, decision E7)
    # ------------------------------------------------------------------------------------------------
    def check(self, name: str, request: Mapping[str, int], *, preemptible: bool = True,
              include_request: bool = False) -> list[str]:
        """Why ``request`` (a new pod, not yet counted in used) cannot be admitted; ``[]`` if it can.

        ``used + request <= runtime`` over the names of the runtime; for a non-preemptible request also
        ``non-preemptible used + request <= min``. With ``include_request`` the runtime is the one the quota
        would get with the request added to its pending request (what the admission path uses when the
        pod is not registered as pending). Changes nothing.
        """
        return [v[2] for v in self.violations(name, request, preemptible=preemptible,
                                              include_request=include_request)]

    def violations(self, name: str, request: Mapping[str, int], *, preemptible: bool = True,
                   include_request: bool = False) -> list[Violation]:
        """:meth:`check` as ``(code, quota, message, shortfall)`` tuples (codes ``elastic.runtime`` /
        ``elastic.min``; the shortfall is how much is missing per resource name)."""
        q = self._leaf(name)
        req = _mask(_nonneg(request)._values, q.max)
        if name in _SPECIAL:
            limits = {name: q.max}
        elif include_request:
            limits = self._runtime_with_extra(q, req)
        else:
            self._ensure(q)
            limits = {name: q.runtime}
        out: list[Violation] = []
        limit = limits[name]
        short = {k: q.used.get(k, 0) + req.get(k, 0) - v for k, v in limit.items()
                 if q.used.get(k, 0) + req.get(k, 0) > v}
        if short:
            out.append(("elastic.runtime", name,
                        f"Insufficient quotas, quotaName: {name}, runtime: {_fmt(limit)}, "
                        f"used: {_fmt(q.used)}, pod's request: {_fmt(req)}, "
                        f"exceedDimensions: [{' '.join(sorted(short))}]", short))
        if not preemptible:
            # The original min, not the scaled one (reference §2.5).
            short = {k: q.np_used.get(k, 0) + req.get(k, 0) - m for k, m in q.min.items()
                     if q.np_used.get(k, 0) + req.get(k, 0) > m}
            if short:
                out.append(("elastic.min", name,
                            f"Insufficient non-preemptible quotas, quotaName: {name}, min: {_fmt(q.min)}, "
                            f"nonPreemptibleUsed: {_fmt(q.np_used)}, pod's request: {_fmt(req)}, "
                            f"exceedDimensions: [{' '.join(sorted(short))}]", short))
        if self._check_parent and name not in _SPECIAL:
            anc = self._q[q.parent]
            while anc is not self._root:
                known = limits.get(anc.name)
                if known is None:
                    self._ensure(anc)
                    known = anc.runtime
                limit = known
                short = {k: anc.used.get(k, 0) + v - limit[k] for k, v in req.items()
                         if k in limit and anc.used.get(k, 0) + v > limit[k]}
                if short:
                    out.append(("elastic.runtime", anc.name,
                                f"Insufficient parent quotas, quotaName: {anc.name}, runtime: {_fmt(limit)}, "
                                f"used: {_fmt(anc.used)}, pod's request: {_fmt(req)}, "
                                f"exceedDimensions: [{' '.join(sorted(short))}]", short))
                anc = self._q[anc.parent]
        return out

    def preemption_victims(self, name: str, request: Mapping[str, int], priority: int) -> list[str]:
        """Pods of the same quota to preempt so that ``request`` fits its runtime (reference §2.10, E6).

        Candidates are assigned, preemptible pods of ``name`` with a strictly lower priority (never pods of
        the default quota). All candidates are removed, then reprieved from the most important down while
        the request still fits. Returns ``[]`` when the request fits already or when even removing every
        candidate would not make it fit; otherwise the victims, least important first.
        """
        q = self._leaf(name)
        if name == DEFAULT_QUOTA:
            return []
        req = _mask(_nonneg(request)._values, q.max)
        limit = q.max if name in _SPECIAL else self._runtime_of(q)
        used = dict(q.used)
        if _fits(_sum(used, req), limit):
            return []
        pods = self._by_importance(p for p in self._pods_of(q)
                                   if p.assigned and p.preemptible and p.priority < priority)
        for p in pods:
            _add_into(used, _mask(p.request, q.max), -1)
        current = _sum(used, req)
        if not _fits(current, limit):
            return []
        victims: list[str] = []
        for p in reversed(pods):
            cand = _sum(current, _mask(p.request, q.max))
            if _fits(cand, limit):
                current = cand
            else:
                victims.append(p.pod_id)
        victims.reverse()
        return victims

    # ------------------------------------------------------------------------------------------------
    # reclaim (reference §4, decision E5)
    # ------------------------------------------------------------------------------------------------
    def revoke(self, now: float) -> list[str]:
        """One tick of the over-use monitor at time ``now`` (seconds): the pod ids to evict.

        A quota (not root, not system) whose used exceeds its runtime in some dimension continuously for
        longer than the delay gets victims: assigned pods from the least important (priority ascending,
        newest first, pod id) skipping non-preemptible ones until used fits, then the removed pods that
        still fit are kept again, most important first. The returned ids are in eviction order (least
        important first, quotas by name). The manager does not remove the pods: the caller evicts them and
        calls :meth:`remove_pod`. The over-use clock of a triggered quota restarts at ``now``.
        """
        self._ensure_all()
        evict: list[str] = []
        for name in sorted(self._q):
            if name in (ROOT_QUOTA, SYSTEM_QUOTA):
                continue
            q = self._q[name]
            last = self._last_under.get(name)
            if last is None:
                last = self._last_under[name] = now
            limit = self._runtime_of(q)
            if _fits(q.used, limit):
                self._last_under[name] = now
                continue
            if now - last > self._delay:
                self._last_under[name] = now
                evict.extend(self._revoke_victims(q, limit))
        return evict

    def monitor_state(self) -> dict[str, float]:
        """The over-use monitor's clock: per quota, the last tick at which it was within its runtime."""
        return {k: self._last_under[k] for k in sorted(self._last_under)}

    def restore_monitor(self, state: Mapping[str, float]) -> None:
        """Set the over-use monitor's clock as :meth:`monitor_state` gave it (snapshot restore)."""
        self._last_under = {str(k): float(v) for k, v in sorted(state.items())}

    def _revoke_victims(self, q: _Quota, limit: Mapping[str, int]) -> list[str]:
        pods = self._by_importance(p for p in self._pods_of(q) if p.assigned)
        used = dict(q.used)
        tried: list[_Pod] = []
        for p in pods:
            if _fits(used, limit):
                break
            if not p.preemptible:
                continue
            _add_into(used, _mask(p.request, q.max), -1)
            tried.append(p)
        if not _fits(used, limit):
            return [p.pod_id for p in tried]
        victims: list[str] = []
        for p in reversed(tried):
            cand = _sum(used, _mask(p.request, q.max))
            if _fits(cand, limit):
                used = cand
            else:
                victims.append(p.pod_id)
        victims.reverse()
        return victims

    def _pods_of(self, q: _Quota) -> list[_Pod]:
        return [self._pods[pid] for pid in q.pods]

    @staticmethod
    def _by_importance(pods: Iterable[_Pod]) -> list[_Pod]:
        # E5: lowest priority first, newest first on ties, then pod id ascending.
        return sorted(pods, key=lambda p: (p.priority, -p.start_time, p.pod_id))

    # ------------------------------------------------------------------------------------------------
    # state for tests and the journal
    # ------------------------------------------------------------------------------------------------
    def describe(self, name: str) -> dict[str, Any]:
        """One quota as plain JSON-able data (spec, request, used, runtime, children, pods); for REST."""
        return self._describe(self._get(name))

    def _describe(self, q: _Quota) -> dict[str, Any]:
        s = q.spec
        return {
            "name": q.name,
            "parent": s.parent,
            "is_parent": s.is_parent,
            "allow_lent": s.allow_lent,
            "min": _sorted(q.min),
            "max": _sorted(q.max),
            "shared_weight": _sorted(q.weight),
            "namespaces": list(s.namespaces),
            "tree_id": s.tree_id,
            "children": list(q.children),
            # zero amounts are the same as missing ones (contract "Units"): dumped pruned
            "request": _sorted(q.request, prune=True),
            "used": _sorted(q.used, prune=True),
            "non_preemptible_used": _sorted(q.np_used, prune=True),
            "runtime": _sorted(self._runtime_of(q)),
            "pods": sorted(q.pods),
        }

    def dump_state(self) -> dict[str, Any]:
        """Everything observable, as plain sorted JSON-able data (deterministic)."""
        self._ensure_all()
        quotas = {name: self._describe(self._q[name]) for name in sorted(self._q)}
        pods = {pid: {"quota": p.quota, "request": _sorted(p.request), "priority": p.priority,
                      "preemptible": p.preemptible, "assigned": p.assigned, "start_time": p.start_time}
                for pid, p in sorted(self._pods.items())}
        return {
            "total": _sorted(self._total),
            "scale_min": self._scale_min,
            "revoke_delay": self._delay,
            "quotas": quotas,
            "pods": pods,
            "monitor": {k: self._last_under[k] for k in sorted(self._last_under)},
        }

    def full_recompute(self) -> dict[str, Resource]:
        """Every runtime computed from scratch, ignoring every cache (decision E2; for tests).

        Requests are re-aggregated bottom-up from the pods/aggregates and runtimes recomputed top-down.
        """
        limited: dict[str, Dims] = {}

        def aggregate(q: _Quota) -> Dims:
            if q.is_parent:
                child_req: Dims = {}
                for c in q.children:
                    _add_into(child_req, aggregate(self._q[c]))
            else:
                child_req = _mask(q.raw_request, q.max)
            req = dict(child_req)
            if not q.allow_lent:
                for k, m in q.min.items():
                    req[k] = max(req.get(k, 0), m)
            lim = {k: (v if k not in q.max else min(v, q.max[k])) for k, v in req.items()}
            limited[q.name] = lim
            return lim

        for c in self._root.children:
            aggregate(self._q[c])
        out: dict[str, Resource] = {ROOT_QUOTA: Resource.of(self._root_total())}
        for name in _SPECIAL:
            out[name] = Resource.of(dict(self._q[name].max))

        def descend(p: _Quota, total: Mapping[str, int]) -> None:
            static = self._build_static(p)
            kids = static.kids
            values = self._group_values(static, total, [limited[c.name] for c in kids])
            for c, rt in zip(kids, values, strict=True):
                out[c.name] = Resource.of(rt)
                if c.is_parent:
                    descend(c, rt)

        descend(self._root, self._root_total())
        return out

    # ------------------------------------------------------------------------------------------------
    # internals: runtime
    # ------------------------------------------------------------------------------------------------
    def _get(self, name: str) -> _Quota:
        q = self._q.get(name)
        if q is None:
            raise KeyError(name)
        return q

    def _leaf(self, name: str) -> _Quota:
        q = self._get(name)
        if q.is_parent:
            raise QuotaValidationError(name, "pod-parent-quota",
                                       "pod can not be linked to a parentQuotaGroup")
        return q

    def _no_pods(self, q: _Quota) -> None:
        if q.pods:
            raise ValueError(f"quota {q.name!r} is fed by pods; set_request/set_used cannot be mixed in")

    def _count_used(self, q: _Quota, pod: _Pod, sign: int) -> None:
        _add_into(q.raw_used, pod.request, sign)
        if not pod.preemptible:
            _add_into(q.raw_np_used, pod.request, sign)

    def _root_total(self) -> Dims:
        # E4: the root total is the cluster total minus what the system and default quotas use.
        out = dict(self._total)
        for name in _SPECIAL:
            _add_into(out, self._q[name].used, -1)
        return out

    def _runtime_of(self, q: _Quota) -> Dims:
        if q is self._root:
            return self._root_total()
        if q.name in _SPECIAL:
            return q.max
        self._ensure(q)
        return q.runtime

    def _ensure(self, q: _Quota) -> None:
        """Recompute the dirty sibling groups from the root down to ``q`` (lazy refresh, §2.4)."""
        chain: list[_Quota] = []
        p = self._q.get(q.parent)
        while p is not None:
            chain.append(p)
            p = self._q.get(p.parent) if p is not self._root else None
        for g in reversed(chain):
            if g.group_dirty:
                self._compute_group(g)

    def _ensure_all(self) -> None:
        stack = [self._root]
        while stack:
            p = stack.pop()
            if p.group_dirty:
                self._compute_group(p)
            for c in reversed(p.children):
                child = self._q[c]
                if child.is_parent:
                    stack.append(child)

    def _static(self, p: _Quota) -> _GroupStatic:
        static = p.static
        if static is None:
            static = p.static = self._build_static(p)
        return static

    def _build_static(self, p: _Quota) -> _GroupStatic:
        kids = [self._q[c] for c in p.children]
        return _GroupStatic(kids, self._dims(p, kids))

    def _compute_group(self, p: _Quota) -> None:
        static = self._static(p)
        kids = static.kids
        total = self._root_total() if p is self._root else p.runtime
        values = self._group_values(static, total, [c.limited for c in kids])
        for c, rt in zip(kids, values, strict=True):
            if rt != c.runtime:
                c.runtime = rt
                if c.is_parent:
                    c.group_dirty = True
        p.group_dirty = False

    def _dims(self, p: _Quota, kids: Sequence[_Quota]) -> list[str]:
        if p is not self._root:
            return list(p.max)
        keys: dict[str, None] = {}
        for c in kids:
            for k in c.max:
                keys[k] = None
        return sorted(keys)

    def _group_values(self, static: _GroupStatic, total: Mapping[str, int],
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
            if self._scale_min:
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

    def _runtime_with_extra(self, q: _Quota, extra: Mapping[str, int]) -> dict[str, Dims]:
        """Runtimes of ``q`` and its ancestors if ``extra`` were added to ``q``'s request. Changes nothing."""
        self._ensure(q)
        path: list[_Quota] = []          # q, its parent, …, the first-level quota
        overrides: dict[str, Dims] = {}
        cur = q
        child_request: Dims | None = dict(q.child_request)
        assert child_request is not None
        _add_into(child_request, extra)
        while cur is not self._root:
            path.append(cur)
            if child_request is not None:
                lim = _limited_of(cur, child_request)
                if lim != cur.limited:
                    overrides[cur.name] = lim
                    parent = self._q[cur.parent]
                    child_request = dict(parent.child_request)
                    _add_into(child_request, _diff(lim, cur.limited))
                else:
                    child_request = None
            cur = self._q[cur.parent]
        result: dict[str, Dims] = {}
        total: Dims = self._root_total()
        changed = False
        group = self._root
        for node in reversed(path):
            if node.name in overrides or changed:
                static = self._static(group)
                limited = [overrides.get(c.name, c.limited) for c in static.kids]
                idx = bisect.bisect_left(group.children, node.name)
                value = self._group_values(static, total, limited)[idx]
            else:
                value = node.runtime
            # (overrides run contiguously from q upwards, so below the first override every node has
            # one; ``changed`` only guards that invariant)
            changed = value != node.runtime
            result[node.name] = value
            total = value
            group = node
        return result

    # ------------------------------------------------------------------------------------------------
    # internals: request and used aggregation (reference §2.3)
    # ------------------------------------------------------------------------------------------------
    def _leaf_changed(self, q: _Quota) -> None:
        q.child_request = _mask(q.raw_request, q.max)
        self._request_inputs_changed(q)
        used = _mask(q.raw_used, q.max)
        delta = _diff(used, q.used)
        q.used = used
        q.np_used = _mask(q.raw_np_used, q.max)
        if delta:
            if q.name in _SPECIAL:
                self._root.group_dirty = True
            else:
                self._add_used_up(self._q[q.parent], delta)

    def _request_inputs_changed(self, q: _Quota) -> None:
        old = q.limited
        q.recalc_request()
        if q.name in _SPECIAL or q is self._root:
            return
        if q.limited != old:
            parent = self._q[q.parent]
            parent.group_dirty = True
            _add_into(parent.child_request, _diff(q.limited, old))
            self._request_inputs_changed(parent)

    def _add_used_up(self, p: _Quota | None, delta: Mapping[str, int], sign: int = 1) -> None:
        while p is not None:
            _add_into(p.used, delta, sign)
            p = self._q.get(p.parent)

    def _detach(self, q: _Quota) -> None:
        """Take ``q`` out of its parent's sums and child list."""
        if q.name in _SPECIAL:
            self._root.group_dirty = True
            return
        p = self._q[q.parent]
        idx = bisect.bisect_left(p.children, q.name)
        del p.children[idx]
        _add_into(p.child_min_sum, q.min, -1)
        p.group_dirty = True
        p.static = None
        _add_into(p.child_request, q.limited, -1)
        self._request_inputs_changed(p)
        self._add_used_up(p, q.used, -1)

    def _attach(self, q: _Quota) -> None:
        if q.name in _SPECIAL:
            self._root.group_dirty = True
            return
        p = self._q[q.parent]
        bisect.insort(p.children, q.name)
        _add_into(p.child_min_sum, q.min)
        p.group_dirty = True
        p.static = None
        _add_into(p.child_request, q.limited)
        self._request_inputs_changed(p)
        self._add_used_up(p, q.used)

    def _commit(self, spec: QuotaSpec) -> None:
        q = self._q.get(spec.name)
        if q is None:
            q = _Quota(spec)
            self._q[spec.name] = q
            q.recalc_request()
            self._attach(q)
        else:
            for ns in q.spec.namespaces:
                if self._ns.get(ns) == spec.name:
                    del self._ns[ns]
            self._detach(q)
            q.set_spec(spec)
            if not q.is_parent:
                q.child_request = _mask(q.raw_request, q.max)
                q.used = _mask(q.raw_used, q.max)
                q.np_used = _mask(q.raw_np_used, q.max)
            q.recalc_request()
            q.group_dirty = True
            q.static = None             # its max names are the dimensions of its children's group
            q.runtime = {}
            self._attach(q)
        for ns in spec.namespaces:
            self._ns[ns] = spec.name

    # ------------------------------------------------------------------------------------------------
    # internals: validation (reference §3)
    # ------------------------------------------------------------------------------------------------
    def _apply_specs(self, specs: list[QuotaSpec]) -> None:
        view = _View(self)
        seen: set[str] = set()
        staged: list[QuotaSpec] = []
        for spec in _parents_first(specs):
            if spec.name in seen:
                raise QuotaValidationError(spec.name, "duplicate",
                                           "the quota is defined twice in one request")
            seen.add(spec.name)
            checked = self._validate(view, spec)
            view.stage(checked)
            staged.append(checked)
        for spec in staged:
            self._commit(spec)

    def _validate(self, view: _View, spec: QuotaSpec) -> QuotaSpec:
        name = spec.name
        # §1.1: root and system cannot be modified; default stays a leaf under the root.
        if name in (ROOT_QUOTA, SYSTEM_QUOTA):
            raise QuotaValidationError(name, "immutable", f"invalid quota {name}: it cannot be modified")
        if name == DEFAULT_QUOTA and (spec.is_parent or spec.parent != ROOT_QUOTA):
            raise QuotaValidationError(name, "special-quota",
                                       "the default quota must stay a leaf directly under the root")
        # §3.2 self checks (rules 1-3 are enforced while parsing: negative values, bad weights).
        for k in spec.min:
            if k not in spec.max:
                raise QuotaValidationError(name, "min-key-not-in-max",
                                           f"resourceKey {k} of quota {name} is included in min, "
                                           f"which is not included in max")
            if spec.min[k] > spec.max[k]:
                raise QuotaValidationError(name, "min-greater-than-max",
                                           f"resourceKey {k} of quota {name} min {spec.min[k]} > "
                                           f"max {spec.max[k]}")
        old_q = self._q.get(name)
        if spec.strict_keys and old_q is not None:
            for k in spec.strict_keys:
                used = old_q.raw_used.get(k)
                if used is not None and (k not in spec.max or spec.max[k] < used):
                    raise QuotaValidationError(name, "max-below-used",
                                               f"max of {k} must be at least the used amount {used}")
        # §3.1 mutation: tree-id inherited from the parent.
        parent_spec = view.get(spec.parent) if spec.parent != ROOT_QUOTA else None
        if spec.parent != ROOT_QUOTA and parent_spec is None:
            raise QuotaValidationError(name, "parent-not-found",
                                       f"fill quota {name} failed, parent {spec.parent} not exist")
        if not spec.tree_id and parent_spec is not None and parent_spec.tree_id:
            spec = _replace_tree_id(spec, parent_spec.tree_id)
        # §3.4: a namespace is bound to one quota only.
        for ns in spec.namespaces:
            owner = view.ns_owner(ns)
            if owner is not None and owner != name:
                raise QuotaValidationError(name, "namespace-bound",
                                           f"namespace {ns} is already bound to quota {owner}")
        old = view.get(name)
        if old is not None and _same_topology(old, spec):
            return spec                 # §3.4: unchanged relevant fields are not re-checked
        # §3.3 rule 1: is-parent changes.
        children = view.children(name) if old is not None else []
        if old is not None and old.is_parent and not spec.is_parent and children:
            raise QuotaValidationError(name, "is-parent-change",
                                       f"quota has children, isParent is forbidden to modify as false, "
                                       f"quotaName:{name}")
        if old is not None and not old.is_parent and spec.is_parent and old_q is not None \
                and old_q.has_bound_pods():
            raise QuotaValidationError(name, "is-parent-change",
                                       f"quota has bound pods, isParent is forbidden to modify as true, "
                                       f"quotaName: {name}")
        # §3.3 rule 2: tree-id.
        if old is not None and old.tree_id != spec.tree_id:
            raise QuotaValidationError(name, "tree-id", "tree-id cannot change")
        if parent_spec is not None and parent_spec.tree_id != spec.tree_id:
            raise QuotaValidationError(name, "tree-id",
                                       f"tree-id {spec.tree_id!r} differs from the parent's "
                                       f"{parent_spec.tree_id!r}")
        for c in children:
            child = view.get(c)
            if child is not None and child.tree_id != spec.tree_id:
                raise QuotaValidationError(name, "tree-id", f"tree-id differs from the child {c}'s")
        # §3.3 rule 3: a leaf directly under the root is valid.
        if spec.parent == ROOT_QUOTA and not spec.is_parent:
            return spec
        # §3.3 rule 4: the parent exists and is a parent (and no cycle).
        if parent_spec is not None:
            if spec.parent == name:
                raise QuotaValidationError(name, "parent-cycle", "a quota cannot be its own parent")
            if not parent_spec.is_parent or spec.parent in _SPECIAL:
                raise QuotaValidationError(name, "parent-not-parent",
                                           f"the parent {spec.parent} is not a parent quota "
                                           f"(is-parent false)")
            anc: QuotaSpec | None = parent_spec
            hops = 0
            while anc is not None and anc.parent not in (ROOT_QUOTA, ""):
                if anc.parent == name or hops > len(self._q) + len(view.overlay):
                    raise QuotaValidationError(name, "parent-cycle",
                                               f"making {spec.parent} the parent of {name} creates a cycle")
                anc = view.get(anc.parent)
                hops += 1
        # §3.3 rule 5: resource keys equal to the parent's and the children's.
        if parent_spec is not None:
            if set(spec.max) != set(parent_spec.max):
                raise QuotaValidationError(name, "resource-keys",
                                           f"max keys {sorted(spec.max)} differ from the parent's "
                                           f"{sorted(parent_spec.max)}")
            extra = sorted(set(spec.min) - set(parent_spec.min))
            if extra:
                raise QuotaValidationError(name, "resource-keys",
                                           f"min keys {extra} are not in the parent's min")
        for c in children:
            child = view.get(c)
            if child is None:
                continue
            if set(child.max) != set(spec.max):
                raise QuotaValidationError(name, "resource-keys",
                                           f"max keys {sorted(spec.max)} differ from the child {c}'s "
                                           f"{sorted(child.max)}")
            extra = sorted(set(child.min) - set(spec.min))
            if extra:
                raise QuotaValidationError(name, "resource-keys",
                                           f"the child {c} has min keys {extra} missing from this min")
        # §3.3 rule 6: Σ min of siblings ≤ parent min, Σ min of children ≤ own min (not under the root).
        if not spec.force_update:
            if parent_spec is not None:
                total = view.child_min_sum(spec.parent)
                if old is not None and old.parent == spec.parent:
                    _add_into(total, old.min._values, -1)
                _add_into(total, spec.min._values)
                bad = _le_completely(total, parent_spec.min)
                if bad:
                    raise QuotaValidationError(name, "min-sum",
                                               f"the sum of the min of the children of {spec.parent} "
                                               f"{_fmt(total)} exceeds its min {_fmt(parent_spec.min)} "
                                               f"in {bad}")
            if children:
                total = view.child_min_sum(name)
                bad = _le_completely(total, spec.min)
                if bad:
                    raise QuotaValidationError(name, "min-sum",
                                               f"the sum of the min of the children {_fmt(total)} exceeds "
                                               f"the min {_fmt(spec.min)} in {bad}")
        return spec


# ----------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------
def _nonneg(values: Mapping[str, int] | None) -> Resource:
    r = values if isinstance(values, Resource) else Resource(values)
    if any(v < 0 for v in r._values.values()):
        raise ValueError(f"resource amounts must not be negative: {r}")
    return r


def _sum(a: Mapping[str, int], b: Mapping[str, int]) -> Dims:
    out = dict(a)
    _add_into(out, b)
    return out


def _sorted(values: Mapping[str, int], prune: bool = False) -> dict[str, int]:
    return {k: values[k] for k in sorted(values) if not prune or values[k]}


def _limited_of(q: _Quota, child_request: Mapping[str, int]) -> Dims:
    req = dict(child_request)
    if not q.allow_lent:
        for k, m in q.min.items():
            if req.get(k, 0) < m:
                req[k] = m
    return {k: (v if k not in q.max or v < q.max[k] else q.max[k]) for k, v in req.items()}


def _same_topology(old: QuotaSpec, new: QuotaSpec) -> bool:
    return (old.parent == new.parent and old.is_parent == new.is_parent and old.tree_id == new.tree_id
            and old.namespaces == new.namespaces and old.min == new.min and old.max == new.max
            and set(old.min) == set(new.min) and set(old.max) == set(new.max))


def _replace_tree_id(spec: QuotaSpec, tree_id: str) -> QuotaSpec:
    from dataclasses import replace

    return replace(spec, tree_id=tree_id)


def _parents_first(specs: list[QuotaSpec]) -> list[QuotaSpec]:
    """Order a batch so that a quota comes after its parent when both are in it (stable otherwise)."""
    names = {s.name for s in specs}
    emitted: set[str] = set()
    out: list[QuotaSpec] = []
    pending = list(specs)
    while pending:
        rest: list[QuotaSpec] = []
        for s in pending:
            if s.parent in names and s.parent not in emitted and s.parent != s.name:
                rest.append(s)
            else:
                out.append(s)
                emitted.add(s.name)
        if len(rest) == len(pending):       # a cycle inside the batch: validation will name it
            out.extend(rest)
            break
        pending = rest
    return out
