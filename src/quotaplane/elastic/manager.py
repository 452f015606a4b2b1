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

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple

from quotaplane.elastic._dims import (
    Dims,
    add_into,
    fits,
    fmt,
    mask,
    nonneg,
    sorted_dims,
)
from quotaplane.elastic._state import Pod, Quota, describe_quota
from quotaplane.elastic.errors import QuotaValidationError
from quotaplane.elastic.model import (
    DEFAULT_QUOTA,
    POD_LABEL_NAME,
    ROOT_QUOTA,
    SPECIAL_QUOTAS,
    SYSTEM_QUOTA,
    QuotaSpec,
    internal_resources,
    namespaces_tuple,
    parse_elastic_quotas,
)
from quotaplane.elastic.monitor import OveruseMonitor
from quotaplane.elastic.runtime import RuntimeTree
from quotaplane.elastic.validate import SpecView, parents_first, validate
from quotaplane.elastic.victims import preemption_victims, revoke_victims
from quotaplane.errors import InputError
from quotaplane.resources import INT64_MAX, Resource

__all__ = ["DEFAULT_REVOKE_DELAY", "ElasticQuotaManager", "Violation"]

#: DelayEvictTime of reference §4 (decision E5).
DEFAULT_REVOKE_DELAY = 120.0
#: MaxInt64/5 for cpu and memory: the default max of the system and default quotas (reference §1.4).
_SPECIAL_MAX = {"vcore": INT64_MAX // 5, "memory": INT64_MAX // 5}

#: (code, path, message, shortfall per resource) — the structured form of one ``check`` reason.
Violation = tuple[str, str, str, dict[str, int]]


class PodWithdrawal(NamedTuple):
    """A pod taken out by :meth:`ElasticQuotaManager.withdraw_pod`, and its place in its quota."""

    pod: Pod
    position: int


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
            raise InputError("revoke_delay must be >= 0")
        self._monitor = OveruseMonitor(float(revoke_delay))
        self._check_parent = check_parent
        self._q: dict[str, Quota] = {}
        self._ns: dict[str, str] = {}
        self._pods: dict[str, Pod] = {}
        root = Quota(QuotaSpec(ROOT_QUOTA, Resource(), Resource(), parent="", is_parent=True,
                                allow_lent=False))
        self._root = root
        self._q[ROOT_QUOTA] = root
        self._rt = RuntimeTree(self._q, root, dict(nonneg(total)._values), scale_min)
        for name, mx in ((SYSTEM_QUOTA, system_max), (DEFAULT_QUOTA, default_max)):
            limit = internal_resources(name, "max", mx if mx is not None else _SPECIAL_MAX)
            self._q[name] = Quota(QuotaSpec(name, Resource(), limit))

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
        self._check_gone(specs, gone)
        view = SpecView(self._q, self._ns)      # the validation half of _apply_specs: staged only
        seen: set[str] = set()
        for spec in parents_first(specs):
            if spec.name in seen:
                raise QuotaValidationError(spec.name, "duplicate",
                                           "the quota is defined twice in one request")
            seen.add(spec.name)
            view.stage(validate(view, spec, self._q))

    def _check_gone(self, specs: list[QuotaSpec], gone: set[str]) -> None:
        """The quotas a reload drops: none may be a kept quota's parent or still have pods."""
        for spec in specs:
            if spec.parent in gone:
                raise QuotaValidationError(spec.name, "parent-not-found",
                                           f"the parent {spec.parent} is not in the new definitions")
        for name in sorted(gone):
            if self._q[name].has_bound_pods():
                raise QuotaValidationError(name, "delete-has-pods",
                                           f"quota {name} is not in the new definitions but has pods")

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
        self._rt.detach(q)
        del self._q[name]
        for ns in q.spec.namespaces:
            if self._ns.get(ns) == name:
                del self._ns[ns]
        self._monitor.forget(name)

    def set_total(self, total: Mapping[str, int]) -> None:
        """Set the cluster total (internal units); the root runtime follows (E4)."""
        self._rt.total = dict(nonneg(total)._values)
        self._root.group_dirty = True

    def set_options(self, *, scale_min: bool | None = None, revoke_delay: float | None = None,
                    check_parent: bool | None = None) -> None:
        """Change the engine options of a config reload (``None`` keeps an option as it is).

        ``scale_min`` changes every runtime (decision E3), so every sibling group is recomputed;
        ``revoke_delay`` (E5) and ``check_parent`` (§2.9) only change later decisions. A negative
        ``revoke_delay`` raises ``ValueError`` and changes nothing.
        """
        if revoke_delay is not None and revoke_delay < 0:
            raise InputError("revoke_delay must be >= 0")
        if revoke_delay is not None:
            self._monitor.delay = float(revoke_delay)
        if check_parent is not None:
            self._check_parent = bool(check_parent)
        if scale_min is not None and bool(scale_min) != self._rt.scale_min:
            self._rt.scale_min = bool(scale_min)
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
        q.raw_request = dict(nonneg(request)._values)
        self._rt.leaf_changed(q)

    def set_used(self, name: str, used: Mapping[str, int], *,
                 non_preemptible: Mapping[str, int] | None = None) -> None:
        """Σ requests of the assigned pods of a leaf (and of its non-preemptible ones), aggregate form."""
        q = self._leaf(name)
        self._no_pods(q)
        q.raw_used = dict(nonneg(used)._values)
        q.raw_np_used = dict(nonneg(non_preemptible)._values) if non_preemptible else {}
        self._rt.leaf_changed(q)

    # ------------------------------------------------------------------------------------------------
    # requests and usage: pod form
    # ------------------------------------------------------------------------------------------------
    def add_pod(self, name: str, pod_id: str, request: Mapping[str, int], *, priority: int = 0,
                preemptible: bool = True, assigned: bool = False, start_time: float = 0.0) -> None:
        """Add a pod to a leaf quota; pending unless ``assigned``. A known pod id is a ``ValueError``."""
        if not isinstance(pod_id, str) or not pod_id:
            raise InputError("pod id must be a non-empty string")
        if pod_id in self._pods:
            raise InputError(f"pod {pod_id!r} already exists")
        q = self._leaf(name)
        if not q.pods and (any(q.raw_request.values()) or any(q.raw_used.values())
                           or any(q.raw_np_used.values())):
            raise InputError(f"quota {name!r} is fed by set_request/set_used; pods cannot be mixed in")
        req = dict(nonneg(request)._values)
        pod = Pod(pod_id, name, req, int(priority), bool(preemptible), bool(assigned), float(start_time))
        self._pods[pod_id] = pod
        q.pods[pod_id] = None
        add_into(q.raw_request, req)
        if pod.assigned:
            self._count_used(q, pod, 1)
        self._rt.leaf_changed(q)

    def assign_pod(self, pod_id: str, *, start_time: float | None = None,
                   request: Mapping[str, int] | None = None) -> None:
        """Mark a pending pod as assigned (bound); it now counts in used. Unknown id: ``KeyError``.

        ``start_time``: when it was assigned (decision P6: victims' age), when given. ``request``: what
        it is assigned with, when that differs from what it waited with (a request charged under a
        resource flavor, docs/flavors.md); :meth:`unassign_pod` puts the waiting one back.
        """
        pod = self._pods[pod_id]
        if pod.assigned:
            return
        q = self._q[pod.quota]
        if request is not None:
            req = dict(nonneg(request)._values)
            if req != pod.request:
                add_into(q.raw_request, pod.request, -1)
                add_into(q.raw_request, req)
                pod.asked_request, pod.request = pod.request, req
        pod.assigned = True
        if start_time is not None:
            pod.start_time = float(start_time)
        self._count_used(q, pod, 1)
        self._rt.leaf_changed(q)

    def pod_request(self, pod_id: str) -> Resource:
        """What a known pod requests (``KeyError`` otherwise)."""
        return Resource.of(dict(self._pods[pod_id].request))

    def unassign_pod(self, pod_id: str, *, start_time: float = 0.0) -> None:
        """Undo :meth:`assign_pod`: the pod is pending again (its request still counts). Unknown id:
        ``KeyError``."""
        pod = self._pods[pod_id]
        if not pod.assigned:
            return
        pod.assigned = False
        pod.start_time = float(start_time)
        q = self._q[pod.quota]
        self._count_used(q, pod, -1)
        if pod.asked_request is not None:
            add_into(q.raw_request, pod.request, -1)
            add_into(q.raw_request, pod.asked_request)
            pod.request, pod.asked_request = pod.asked_request, None
        self._rt.leaf_changed(q)

    def is_pending(self, pod_id: str) -> bool:
        """True when ``pod_id`` is known and not assigned (a waiting ask)."""
        pod = self._pods.get(pod_id)
        return pod is not None and not pod.assigned

    def pod_asked(self, pod_id: str) -> bool:
        """True when the known pod ``pod_id`` was added pending (a waiting ask) before it was assigned."""
        return self._pods[pod_id].asked

    def remove_pod(self, pod_id: str) -> None:
        """Remove a pod (pending or assigned). Unknown id: ``KeyError``."""
        pod = self._pods.pop(pod_id)
        q = self._q[pod.quota]
        del q.pods[pod_id]
        add_into(q.raw_request, pod.request, -1)
        if pod.assigned:
            self._count_used(q, pod, -1)
        if not q.pods:
            # exact zero again: no float or leftover keys can linger once the last pod is gone
            q.raw_request, q.raw_used, q.raw_np_used = {}, {}, {}
        self._rt.leaf_changed(q)

    def withdraw_pod(self, pod_id: str) -> PodWithdrawal:
        """Remove a pod so that :meth:`restore_pod` can put it back exactly (its quota, its attributes
        and its place among the quota's pods), whatever the quota mapping says by then."""
        pod = self._pods[pod_id]
        index = list(self._q[pod.quota].pods).index(pod_id)
        self.remove_pod(pod_id)
        return PodWithdrawal(pod, index)

    def restore_pod(self, withdrawal: PodWithdrawal) -> None:
        """Undo :meth:`withdraw_pod` exactly."""
        pod = withdrawal.pod
        self.add_pod(pod.quota, pod.pod_id, pod.request, priority=pod.priority, preemptible=pod.preemptible,
                     assigned=pod.assigned, start_time=pod.start_time)
        self._pods[pod.pod_id].asked = pod.asked
        q = self._q[pod.quota]
        order = [k for k in q.pods if k != pod.pod_id]
        order.insert(withdrawal.position, pod.pod_id)
        q.pods = dict.fromkeys(order)

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
        return Resource.of(dict(self._rt.runtime_of(q)))

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

    def ancestors(self, name: str) -> tuple[str, ...]:
        """``name`` and its parents up to (not including) the root quota, nearest first; ``()`` for an
        unknown quota (what a budget on a quota tree charges: docs/budgets.md)."""
        out: list[str] = []
        q = self._q.get(name)
        while q is not None and q.spec.name != ROOT_QUOTA:
            out.append(q.spec.name)
            q = self._q.get(q.parent) if q.parent else None
        return tuple(out)

    def quota_names(self) -> list[str]:
        """Every quota name, sorted (the root, system and default quotas included)."""
        return sorted(self._q)

    def children(self, name: str) -> list[str]:
        """The child quota names of ``name``, sorted."""
        return list(self._get(name).children)

    @property
    def total(self) -> Resource:
        """The cluster total."""
        return Resource.of(dict(self._rt.total))

    @property
    def scale_min(self) -> bool:
        """Whether min scaling is on (E3)."""
        return self._rt.scale_min

    @property
    def revoke_delay(self) -> float:
        """The over-use delay before revocation, in seconds (E5)."""
        return self._monitor.delay

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
                   include_request: bool = False, extra: Mapping[str, int] | None = None) -> list[Violation]:
        """:meth:`check` as ``(code, quota, message, shortfall)`` tuples (codes ``elastic.runtime`` /
        ``elastic.min``; the shortfall is how much is missing per resource name). ``extra``: demand
        the quota's request lacks (a waiting pod charged under a resource flavor it did not wait with)."""
        q = self._leaf(name)
        req = mask(nonneg(request)._values, q.max)
        more = mask(nonneg(extra)._values, q.max) if extra else None
        if name in SPECIAL_QUOTAS:
            limits = {name: q.max}
        elif include_request:
            limits = self._rt.runtime_with_extra(q, req)
        elif more:
            limits = self._rt.runtime_with_extra(q, more)
        else:
            self._rt.ensure(q)
            limits = {name: q.runtime}
        out: list[Violation] = []
        limit = limits[name]
        short = _shortfall(q.used, req, limit)
        if short:
            out.append(("elastic.runtime", name,
                        f"Insufficient quotas, quotaName: {name}, runtime: {fmt(limit)}, "
                        f"used: {fmt(q.used)}, pod's request: {fmt(req)}, "
                        f"exceedDimensions: [{' '.join(sorted(short))}]", short))
        if not preemptible:
            # The original min, not the scaled one (reference §2.5).
            short = _shortfall(q.np_used, req, q.min)
            if short:
                out.append(("elastic.min", name,
                            f"Insufficient non-preemptible quotas, quotaName: {name}, min: {fmt(q.min)}, "
                            f"nonPreemptibleUsed: {fmt(q.np_used)}, pod's request: {fmt(req)}, "
                            f"exceedDimensions: [{' '.join(sorted(short))}]", short))
        if self._check_parent and name not in SPECIAL_QUOTAS:
            out.extend(self._parent_violations(q, req, limits))
        return out

    def _parent_violations(self, q: Quota, req: Dims, limits: Mapping[str, Dims]) -> list[Violation]:
        """EnableCheckParentQuota (§2.9): every ancestor below the root must fit the request too."""
        out: list[Violation] = []
        anc = self._q[q.parent]
        while anc is not self._root:
            limit = limits.get(anc.name)
            if limit is None:
                self._rt.ensure(anc)
                limit = anc.runtime
            short = {k: v for k, v in _shortfall(anc.used, req, limit).items() if k in req}
            if short:
                out.append(("elastic.runtime", anc.name,
                            f"Insufficient parent quotas, quotaName: {anc.name}, runtime: {fmt(limit)}, "
                            f"used: {fmt(anc.used)}, pod's request: {fmt(req)}, "
                            f"exceedDimensions: [{' '.join(sorted(short))}]", short))
            anc = self._q[anc.parent]
        return out

    def preemption_victims(self, name: str, request: Mapping[str, int], priority: int, *,
                           skip: AbstractSet[str] = frozenset(),
                           first: Callable[[str], bool] | None = None) -> list[str]:
        """Pods of the same quota to preempt so that ``request`` fits its runtime (reference §2.10, E6).

        Candidates are assigned, preemptible pods of ``name`` with a strictly lower priority (never pods of
        the default quota). All candidates are removed, then reprieved from the most important down while
        the request still fits. Returns ``[]`` when the request fits already or when even removing every
        candidate would not make it fit; otherwise the victims, least important first. Pods in ``skip``
        are never candidates (a preemption of them was given up); those ``first`` names are the least
        important (on best-effort terms, issue 34).
        """
        q = self._leaf(name)
        if name == DEFAULT_QUOTA:
            return []
        req = mask(nonneg(request)._values, q.max)
        limit = q.max if name in SPECIAL_QUOTAS else self._rt.runtime_of(q)
        return preemption_victims(q, self._pods_of(q, skip), req, limit, priority, first)

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
        return [pod for _, pods in self.revoke_groups(now) for pod in pods]

    def revoke_groups(self, now: float, *, skip: AbstractSet[str] = frozenset(),
                      first: Callable[[str], bool] | None = None) -> list[tuple[str, list[str]]]:
        """:meth:`revoke` grouped by quota: ``(quota, pod ids)`` for each quota with victims, by name.
        Pods in ``skip`` are never victims (their eviction was given up): others are chosen; those
        ``first`` names go before the others (on best-effort terms, issue 34)."""
        self._rt.ensure_all()
        evict: list[tuple[str, list[str]]] = []
        for name in sorted(self._q):
            if name in (ROOT_QUOTA, SYSTEM_QUOTA):
                continue
            q = self._q[name]
            limit = self._rt.runtime_of(q)
            if self._monitor.due(name, now, fits(q.used, limit)):
                victims = revoke_victims(q, self._pods_of(q, skip), limit, first)
                if victims:
                    evict.append((name, victims))
        return evict

    def monitor_state(self) -> dict[str, float]:
        """The over-use monitor's clock: per quota, the last tick at which it was within its runtime."""
        return self._monitor.state()

    def restore_monitor(self, state: Mapping[str, float]) -> None:
        """Set the over-use monitor's clock as :meth:`monitor_state` gave it (snapshot restore)."""
        self._monitor.restore(state)

    def _pods_of(self, q: Quota, skip: AbstractSet[str] = frozenset()) -> list[Pod]:
        return [self._pods[pid] for pid in q.pods if pid not in skip]

    # ------------------------------------------------------------------------------------------------
    # state for tests and the journal
    # ------------------------------------------------------------------------------------------------
    def describe(self, name: str) -> dict[str, Any]:
        """One quota as plain JSON-able data (spec, request, used, runtime, children, pods); for REST."""
        return self._describe(self._get(name))

    def _describe(self, q: Quota) -> dict[str, Any]:
        return describe_quota(q, self._rt.runtime_of(q))

    def dump_state(self) -> dict[str, Any]:
        """Everything observable, as plain sorted JSON-able data (deterministic)."""
        self._rt.ensure_all()
        quotas = {name: self._describe(self._q[name]) for name in sorted(self._q)}
        pods = {pid: p.dump() for pid, p in sorted(self._pods.items())}
        return {
            "total": sorted_dims(self._rt.total),
            "scale_min": self._rt.scale_min,
            "revoke_delay": self._monitor.delay,
            "quotas": quotas,
            "pods": pods,
            "monitor": self._monitor.state(),
        }

    # ------------------------------------------------------------------------------------------------
    # internals: runtime
    # ------------------------------------------------------------------------------------------------
    def full_recompute(self) -> dict[str, Resource]:
        """Every runtime computed from scratch, ignoring every cache (decision E2; for tests)."""
        return self._rt.full_recompute()

    def _get(self, name: str) -> Quota:
        q = self._q.get(name)
        if q is None:
            raise KeyError(name)
        return q

    def _leaf(self, name: str) -> Quota:
        q = self._get(name)
        if q.is_parent:
            raise QuotaValidationError(name, "pod-parent-quota",
                                       "pod can not be linked to a parentQuotaGroup")
        return q

    def _no_pods(self, q: Quota) -> None:
        if q.pods:
            raise InputError(f"quota {q.name!r} is fed by pods; set_request/set_used cannot be mixed in")

    def _count_used(self, q: Quota, pod: Pod, sign: int) -> None:
        add_into(q.raw_used, pod.request, sign)
        if not pod.preemptible:
            add_into(q.raw_np_used, pod.request, sign)

    # ------------------------------------------------------------------------------------------------
    # internals: request and used aggregation (reference §2.3)
    # ------------------------------------------------------------------------------------------------
    def _commit(self, spec: QuotaSpec) -> None:
        q = self._q.get(spec.name)
        if q is None:
            q = Quota(spec)
            self._q[spec.name] = q
            q.recalc_request()
            self._rt.attach(q)
        else:
            for ns in q.spec.namespaces:
                if self._ns.get(ns) == spec.name:
                    del self._ns[ns]
            self._rt.detach(q)
            q.set_spec(spec)
            if not q.is_parent:
                q.child_request = mask(q.raw_request, q.max)
                q.used = mask(q.raw_used, q.max)
                q.np_used = mask(q.raw_np_used, q.max)
            q.recalc_request()
            q.group_dirty = True
            q.static = None             # its max names are the dimensions of its children's group
            q.runtime = {}
            self._rt.attach(q)
        for ns in spec.namespaces:
            self._ns[ns] = spec.name

    # ------------------------------------------------------------------------------------------------
    # internals: validation (reference §3)
    # ------------------------------------------------------------------------------------------------
    def _apply_specs(self, specs: list[QuotaSpec]) -> None:
        view = SpecView(self._q, self._ns)
        seen: set[str] = set()
        staged: list[QuotaSpec] = []
        for spec in parents_first(specs):
            if spec.name in seen:
                raise QuotaValidationError(spec.name, "duplicate",
                                           "the quota is defined twice in one request")
            seen.add(spec.name)
            checked = validate(view, spec, self._q)
            view.stage(checked)
            staged.append(checked)
        for spec in staged:
            self._commit(spec)

# ----------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------


def _shortfall(used: Mapping[str, int], request: Mapping[str, int], limit: Mapping[str, int]) -> Dims:
    """Per name of ``limit``: how much ``used + request`` exceeds it (only the names that do)."""
    return {k: used.get(k, 0) + request.get(k, 0) - v for k, v in limit.items()
            if used.get(k, 0) + request.get(k, 0) > v}
