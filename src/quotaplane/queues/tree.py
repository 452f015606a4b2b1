"""The queue tree of one partition: hierarchical queue quotas (seed 004, reference §1.13, rules M-1 … M-6).

A :class:`QueueTree` holds every queue of one partition, configured (managed) and dynamic (unmanaged,
created by placement). It tracks the allocated resources and running applications of every queue and
answers the questions of the admission path: does an allocation fit every ``max`` from the leaf to the
root (M-2), may one more application run (M-4), what is the headroom (M-3), may this user submit here
(queue ACLs). It never decides on its own: the partition checks, then applies (decision Q2).

This engine imports only :mod:`quotaplane.resources`, :mod:`quotaplane.config` and
:mod:`quotaplane.errors`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from quotaplane.config.identity import UserGroup
from quotaplane.config.model import ChildTemplateConfig, PartitionConfig, QueueConfig
from quotaplane.errors import ConflictError, InputError, NotFoundError
from quotaplane.queues.acl import ACL
from quotaplane.queues.fair import FairShares
from quotaplane.queues.limits import Limits
from quotaplane.queues.properties import (
    PROP_PREEMPTION_POLICY,
    PROP_PRIORITY_OFFSET,
    PROP_PRIORITY_POLICY,
    PROP_QUOTA_PREEMPTION_DELAY,
    PROP_SORT_POLICY,
    parse_duration,
    parse_si_resource,
    parse_uint,
    positive_or_none,
    queue_dao,
    tag_value,
)
from quotaplane.queues.queue import ACTIVE, DRAINING, QUEUE_NAME, Queue, QueueLimit
from quotaplane.resources import (
    Resource,
    component_wise_min,
    sub_only_existing,
)

__all__ = ["TAG_MAX_APPS", "TAG_RESOURCE_GUARANTEED", "TAG_RESOURCE_QUOTA", "QueueTree"]

ROOT = "root"


#: Application tags produced from namespace annotations (reference §1.14) and read here (N-1 … N-3).
TAG_RESOURCE_QUOTA = "namespace.resourcequota"
TAG_RESOURCE_GUARANTEED = "namespace.resourceguaranteed"
TAG_MAX_APPS = "namespace.resourcemaxapps"


# Queue properties (YuniKorn configs/constants.go) used in the DAO.


def _filter_parent_property(key: str, value: str) -> str:
    """YuniKorn ``filterParentProperty``: fences and the priority offset are per queue, a child
    inherits the default instead."""
    if key in (PROP_PREEMPTION_POLICY, PROP_PRIORITY_POLICY) and value.lower() == "fence":
        return "default"
    if key == PROP_PRIORITY_OFFSET:
        return "0"
    return value


class QueueTree:
    """The queue tree of ONE partition (seed 004; rules M-1 … M-6, N-1 … N-3; queue ACLs).

    Not thread safe by itself: the partition serialises every call under its lock.
    """

    __slots__ = ("_by_path", "_cluster", "_eff_guaranteed", "_fair", "_limits", "_partition", "_root",
                 "_stateaware")

    _root: Queue
    _by_path: dict[str, Queue]
    _cluster: Resource | None
    _partition: str

    def __init__(self, partition_config: PartitionConfig) -> None:
        self._partition = partition_config.name
        self._root = Queue(ROOT, None, is_leaf=False, managed=True)
        self._by_path = {ROOT: self._root}
        self._cluster = None
        self._eff_guaranteed: dict[str, dict[str, int]] = {}
        self._limits = Limits(self.effective_guaranteed)
        self._fair: FairShares | None = None
        #: the leaves whose application.sort.policy is stateaware (None: to be found again)
        self._stateaware: tuple[Queue, ...] | None = None
        self.update_config(partition_config)

    # ------------------------------------------------------------------------------------------------
    # configuration
    # ------------------------------------------------------------------------------------------------
    def update_config(self, partition_config: PartitionConfig) -> None:
        """Apply a validated partition config: create new queues, update managed settings (M-1 set/clear
        rules), mark queues gone from the config ``Draining``, drop the draining queues that are empty.
        Allocated usage and running applications are kept."""
        self._partition = partition_config.name
        self._eff_guaranteed = {}
        self._stateaware = None
        seen: set[str] = set()
        self._sync(None, partition_config.root, seen)
        # Managed queues missing from the config drain, with their whole subtree (dynamic queues under a
        # removed parent cannot stay placeable either).
        for q in self._walk(self._root):
            if q.is_root:
                continue
            assert q.parent is not None
            draining = q.path not in seen if q.managed else q.parent.is_draining
            q.status = DRAINING if draining else ACTIVE
        self._refresh_properties(self._root)
        # Removed queues that hold nothing disappear right away; the others when they become empty.
        for q in reversed(list(self._walk(self._root))):
            if q.is_draining and q.is_empty():
                self._detach(q)
        self._limits.rebuild(list(self._walk(self._root)))
        self._fair = self._fair_shares(partition_config)
        for q in self._walk(self._root):
            q.fair = self._fair

    def _fair_shares(self, partition_config: PartitionConfig) -> FairShares | None:
        """Kueue's fair sharing when the partition turns it on (docs/fair-sharing.md), else None."""
        fs = partition_config.fair_sharing
        if fs is None or not fs.enabled:
            return None
        flavored = frozenset(r for f in partition_config.resource_flavors for r in f.resources)
        return FairShares(self._limits, self.effective_guaranteed, self._cluster_values, flavored,
                          fs.preemption_strategies, flavor_configs=tuple(partition_config.resource_flavors),
                          fits=self.fits_quota)

    def _forget_fair(self) -> None:
        if self._fair is not None:
            self._fair.forget()         # potentials follow the guaranteed and the queues

    def _cluster_values(self) -> Mapping[str, int]:
        return self._cluster._values if self._cluster is not None else {}

    @property
    def fair(self) -> FairShares | None:
        """The queues' fair-sharing shares (None: fair sharing is off; :mod:`quotaplane.queues.fair`)."""
        return self._fair

    def weighted_shares(self) -> list[tuple[str, int]]:
        """Every queue below the root with its reported weighted share (KQ-S3); [] when fair sharing is
        off (the ``quotaplane_queue_weighted_share`` metric)."""
        fair = self._fair
        if fair is None:
            return []
        return [(q.path, fair.share(q).rounded()) for q in self._walk(self._root) if not q.is_root]

    def fair_sharing_of(self, path: str) -> dict[str, object] | None:
        """``standing``'s ``fairSharing`` of queue ``path`` (None: fair sharing off or no such queue)."""
        q = self.queue(path)
        if self._fair is None or q is None:
            return None
        return self._fair.status(q)

    def _sync(self, parent: Queue | None, qc: QueueConfig, seen: set[str]) -> None:
        path = qc.path.lower()
        q = self._by_path.get(path)
        if q is None:
            assert parent is not None  # the root always exists
            q = Queue(qc.name.lower(), parent, is_leaf=qc.is_leaf, managed=True)
            parent.children[q.name] = q
            self._by_path[q.path] = q
        seen.add(path)
        q.managed = True
        q.status = ACTIVE
        q.is_leaf = False if q.is_root else qc.is_leaf
        if not q.is_root:  # the root max is the cluster size, never configured (V-15, M-1)
            q.max = positive_or_none(qc.max)
        q.guaranteed = None if q.is_root else positive_or_none(qc.guaranteed)
        q.max_applications = qc.max_applications
        q.submit_acl = ACL(qc.submit_acl)
        q.admin_acl = ACL(qc.admin_acl)
        q.own_properties = dict(qc.properties)
        q.child_template = qc.child_template
        q.flavors = qc.flavors
        q.fungibility = qc.flavor_fungibility
        q.borrowing_limit = None if q.is_root else qc.borrowing_limit
        q.lending_limit = None if q.is_root else qc.lending_limit
        for child in qc.queues:
            self._sync(q, child, seen)

    def stateaware_leaves(self) -> tuple[Queue, ...]:
        """The leaves whose ``application.sort.policy`` is ``stateaware`` (found again only after the
        configuration or the queues changed): a position counts their asks one by one
        (:mod:`quotaplane.scheduling.positions`)."""
        if self._stateaware is None:
            # every queue once, in no particular order (the callers key them by path): a walk of the
            # tree sorts every queue's children, 10 ms at 11,000 queues for the first standing after
            # a start or a change of the queues
            found = {id(q): q for q in self._by_path.values()
                     if q.is_leaf and q.properties.get(PROP_SORT_POLICY, "fifo").lower() == "stateaware"}
            self._stateaware = tuple(found.values())
        return self._stateaware

    def _refresh_properties(self, q: Queue) -> None:
        q.properties = self._merged_properties(q.parent, q.own_properties)
        for child in q.children.values():
            self._refresh_properties(child)

    @staticmethod
    def _merged_properties(parent: Queue | None, own: Mapping[str, str]) -> dict[str, str]:
        # YuniKorn mergeProperties: inherit the parent's properties, the queue's own override them.
        merged: dict[str, str] = {}
        if parent is not None:
            for k, v in parent.properties.items():
                merged[k] = _filter_parent_property(k, v)
        merged.update(own)
        return {k: merged[k] for k in sorted(merged)}

    def set_cluster_resource(self, total: Mapping[str, int]) -> None:
        """M-1: the root max is the cluster size (sum of node capacities); follows node changes."""
        self._cluster = total if isinstance(total, Resource) else Resource(total)
        self._root.max = self._cluster
        if self._fair is not None:
            self._fair.forget()

    @property
    def partition(self) -> str:
        """The partition name of the config this tree was built from."""
        return self._partition

    # ------------------------------------------------------------------------------------------------
    # lookup
    # ------------------------------------------------------------------------------------------------
    @property
    def root(self) -> Queue:
        """The root queue."""
        return self._root

    def queue(self, path: str) -> Queue | None:
        """The queue at ``path`` (case-insensitive), or None."""
        q = self._by_path.get(path)
        if q is None:
            q = self._by_path.get(path.lower())
        return q

    def _get(self, path: str) -> Queue:
        q = self.queue(path)
        if q is None:
            raise NotFoundError(f"queue {path!r} not found")
        return q

    def paths(self) -> list[str]:
        """Every queue path, sorted."""
        return sorted(self._by_path)

    def _walk(self, q: Queue) -> Iterator[Queue]:
        yield q
        for child in q.sorted_children():
            yield from self._walk(child)

    def _deepest_existing(self, path: str) -> Queue | None:
        q = self.queue(path)
        if q is not None:
            return q
        parts = path.lower().split(".")
        while len(parts) > 1:
            parts.pop()
            q = self._by_path.get(".".join(parts))
            if q is not None:
                return q
        return None

    # QueueView protocol of quotaplane.placement (so a QueueTree can be handed to placement directly).
    def exists(self, path: str) -> bool:
        """True when the queue exists (placement QueueView)."""
        return self.queue(path) is not None

    def is_leaf(self, path: str) -> bool:
        """True when the queue exists and is a leaf (placement QueueView)."""
        q = self.queue(path)
        return q is not None and q.is_leaf

    def is_draining(self, path: str) -> bool:
        """True when the queue exists and is draining (placement QueueView)."""
        q = self.queue(path)
        return q is not None and q.is_draining

    def submit_allowed(self, path: str, user: UserGroup) -> bool:
        """Same as :meth:`check_submit_acl` (placement QueueView)."""
        return self.check_submit_acl(path, user)

    # ------------------------------------------------------------------------------------------------
    # dynamic queues (M-6)
    # ------------------------------------------------------------------------------------------------
    def ensure_dynamic_queue(self, path: str) -> Queue:
        """Return the leaf at ``path``, creating it (and missing parents) as unmanaged queues.

        M-6: the new leaf takes max/guaranteed/maxapplications/properties from the nearest ancestor's
        child template (a zero template max/guaranteed is ignored). Names are lower-cased. Raises
        ValueError for an invalid path and ConflictError when the path runs through a leaf or ends at a
        parent queue.
        """
        parts = path.lower().split(".")
        if parts[0] != ROOT:
            raise InputError(f"queue path {path!r} is not fully qualified (must start with 'root.')")
        for part in parts[1:]:
            if not QUEUE_NAME.fullmatch(part):
                raise InputError(f"invalid queue name {part!r} in queue path {path!r}")
        q = self._root
        last = len(parts) - 1
        for i, part in enumerate(parts[1:], start=1):
            child = q.children.get(part)
            if child is None:
                if q.is_leaf:
                    raise ConflictError(f"cannot create queue {path!r}: {q.path!r} is a leaf queue")
                child = Queue(part, q, is_leaf=(i == last), managed=False)
                if q.is_draining:
                    child.status = DRAINING
                if i == last:
                    self._apply_template(child, q.effective_template())
                else:
                    child.properties = self._merged_properties(q, {})
                q.children[part] = child
                self._by_path[child.path] = child
                self._eff_guaranteed = {}
                self._stateaware = None
                self._forget_fair()
            q = child
        if not q.is_leaf:
            raise ConflictError(f"queue {q.path!r} is a parent queue, applications need a leaf queue")
        return q

    def _apply_template(self, q: Queue, template: ChildTemplateConfig | None) -> None:
        own: dict[str, str] = {}
        if template is not None:
            q.max = positive_or_none(template.max)
            q.guaranteed = positive_or_none(template.guaranteed)
            q.max_applications = template.max_applications
            own = dict(template.properties)
        q.own_properties = own
        q.properties = self._merged_properties(q.parent, own)

    def apply_namespace_tags(self, path: str, tags: Mapping[str, str]) -> None:
        """N-1 … N-3: apply the namespace quota tags of an application added to ``path``.

        Only an unmanaged (dynamic) leaf takes them (N-2; managed queues ignore them, N-3). A resource
        tag that does not parse or is not strictly positive counts as unset; a maxApps tag that is not
        an unsigned integer counts as 0. ``maxApps != 0`` sets maxapplications; when max or guaranteed
        is set both are applied with the M-1 rules (so a guaranteed-only namespace clears the max).
        """
        q = self._get(path)
        if q.managed or not q.is_leaf:
            return
        max_res = positive_or_none(parse_si_resource(tag_value(tags, TAG_RESOURCE_QUOTA)))
        guaranteed = positive_or_none(parse_si_resource(tag_value(tags, TAG_RESOURCE_GUARANTEED)))
        max_apps = parse_uint(tag_value(tags, TAG_MAX_APPS))
        if max_apps != 0:
            q.max_applications = max_apps
        if max_res is not None or guaranteed is not None:
            q.max = max_res
            q.guaranteed = guaranteed
            self._eff_guaranteed = {}
            self._forget_fair()

    # ------------------------------------------------------------------------------------------------
    # applications placed in a queue (for draining / clean-up decisions)
    # ------------------------------------------------------------------------------------------------
    def add_application(self, path: str, application_id: str) -> None:
        """Record that ``application_id`` is placed in the leaf ``path`` (keeps the queue from being
        removed while it drains, even before the application has allocations)."""
        self._get(path).applications[application_id] = None

    def remove_application(self, path: str, application_id: str) -> None:
        """Forget a placed application (and its running state); drops the queue when it is a draining or
        dynamic queue left empty."""
        q = self.queue(path)
        if q is None:
            return
        q.applications.pop(application_id, None)
        if application_id in q.running_apps:
            self.app_stopped(path, application_id)
        self.remove_if_empty(path)

    def remove_if_empty(self, path: str) -> None:
        """Drop the queue at ``path`` if it is draining or dynamic and empty, then its parents likewise."""
        q = self.queue(path)
        while q is not None and not q.is_root and (q.is_draining or not q.managed) and q.is_empty():
            parent = q.parent
            self._detach(q)
            q = parent

    def effective_guaranteed(self, q: Queue) -> Mapping[str, int]:
        """A queue's guaranteed as its subtree holds it: its own amount of a resource, else the sum of its
        children's (a parent without a guaranteed passes its children's up, as V-18 reads it)."""
        found = self._eff_guaranteed.get(q.path)
        if found is None:
            found = dict(q.guaranteed._values) if q.guaranteed is not None else {}
            for child in q.children.values():
                for name, amount in self.effective_guaranteed(child).items():
                    if q.guaranteed is None or name not in q.guaranteed._values:
                        found[name] = found.get(name, 0) + amount
            self._eff_guaranteed[q.path] = found
        return found

    def _detach(self, q: Queue) -> None:
        assert q.parent is not None
        self._eff_guaranteed = {}
        self._stateaware = None
        self._forget_fair()
        if q.borrowing_limit is not None or q.lending_limit is not None:
            q.borrowing_limit = q.lending_limit = None
            self._limits.rebuild([x for x in self._walk(self._root) if x is not q])
        q.parent.children.pop(q.name, None)
        self._by_path.pop(q.path, None)

    # ------------------------------------------------------------------------------------------------
    # allocation (M-2)
    # ------------------------------------------------------------------------------------------------
    def over_max(self, path: str, resource: Mapping[str, int]) -> list[str]:
        """The paths of the queues :meth:`check_allocation` would name, leaf to root, without building
        its messages (the scheduler's cheap refusal test and wake keys)."""
        request = resource._values if isinstance(resource, Resource) else resource
        out: list[str] = []
        items = request.items()
        for q in self._get(path).chain:
            if not q.fits_max(items):
                out.append(q.path)
        return out

    def check_allocation(self, path: str, resource: Mapping[str, int]) -> list[QueueLimit]:
        """M-2: every queue, leaf to root, whose max the allocation would exceed; ``[]`` = it fits.

        For each queue only the requested names count (``allocated + request`` per requested name).
        Non-root queues: a name missing from the max is unlimited, an unset max is unlimited
        (FitInMaxUndef, ``queue.max``). The root: strict against the cluster size — a name no node
        provides does not fit (FitIn, ``root.capacity``). Changes nothing.
        """
        request = resource._values if isinstance(resource, Resource) else resource
        limits: list[QueueLimit] = []
        for q in self._get(path).chain:
            max_res = q.max
            if q.parent is None:
                strict = True
                maxv: Mapping[str, int] = max_res._values if max_res is not None else {}
            elif max_res is None:
                continue
            else:
                strict = False
                maxv = max_res._values
            used = q._alloc
            for name, amount in request.items():
                limit = maxv.get(name)
                if limit is None:
                    if not strict:
                        continue  # a name missing from the max is unlimited
                    limit = 0     # strict, a name missing from the root counts as 0
                if used.get(name, 0) + amount > (limit if limit > 0 else 0):
                    limits.append(self._over(q, request, max_res, strict=strict))
                    break
        if self._limits.active:
            limits.extend(self._limits.check(self._get(path), request, self._cluster))
        return limits

    def fits_quota(self, path: str, resource: Mapping[str, int]) -> bool:
        """:meth:`check_allocation` finds nothing, answered without building a message (the flavor
        search of a fair-sharing head, :mod:`quotaplane.scheduling.nomination`)."""
        if self.over_max(path, resource):
            return False
        if not self._limits.active:
            return True
        request = resource._values if isinstance(resource, Resource) else resource
        return not self._limits.check(self._get(path), request, self._cluster)

    @property
    def limits(self) -> Limits:
        """The tree's borrowing and lending limits (:mod:`quotaplane.queues.limits`)."""
        return self._limits

    @staticmethod
    def _over(q: Queue, request: Mapping[str, int], max_res: Resource | None, *,
              strict: bool) -> QueueLimit:
        used = q._alloc
        maxv: Mapping[str, int] = max_res._values if max_res is not None else {}
        shortfall: dict[str, int] = {}
        for name, amount in request.items():
            limit = maxv.get(name)
            if limit is None:
                if not strict:
                    continue  # a name missing from the max is unlimited
                limit = 0     # strict, a name missing from the root counts as 0
            elif limit < 0:
                limit = 0
            total = used.get(name, 0) + amount
            if total > limit:
                shortfall[name] = total - limit
        shown_max = max_res if max_res is not None else Resource()
        message = (f"allocation ({Resource.of(dict(request))}) puts queue '{q.path}' over maximum "
                   f"allocation ({shown_max}), current usage ({q.allocated})")
        unreported = sorted(n for n in shortfall if strict and n not in maxv)
        if unreported:
            # issue 14 #9: a converted pod asks for pods: 1; say when that is what no node provides
            message += f"; no node reports {', '.join(unreported)}"
        return QueueLimit(
            code="root.capacity" if strict else "queue.max",
            queue_path=q.path,
            max=shown_max,
            allocated=q.allocated,
            shortfall=Resource.of({k: shortfall[k] for k in sorted(shortfall)}),
            message=message,
        )

    def increase_allocated(self, path: str, resource: Mapping[str, int]) -> None:
        """Add ``resource`` to every queue from the leaf ``path`` to the root (no check: call
        :meth:`check_allocation` first)."""
        delta = resource._values if isinstance(resource, Resource) else resource
        self._add(self._get(path).chain, delta.items(), 1)

    @staticmethod
    def _add(chain: tuple[Queue, ...], items: Iterable[tuple[str, int]], sign: int) -> None:
        for q in chain:
            values = q._alloc
            for name, amount in items:
                new = values.get(name, 0) + sign * amount
                if new:
                    values[name] = new
                else:
                    values.pop(name, None)

    def increase_pending(self, path: str, resource: Mapping[str, int]) -> None:
        """A waiting ask of ``resource`` in leaf ``path``: YuniKorn's ``pendingResource`` of the leaf and
        every ancestor grows (demand only: no limit counts it)."""
        delta = resource._values if isinstance(resource, Resource) else resource
        self._add_pending(path, delta.items(), 1)

    def increase_pending_many(self, path: str, resource: Mapping[str, int], count: int) -> None:
        """``count`` waiting asks whose resources sum to ``resource`` in leaf ``path``: what as many
        :meth:`increase_pending` calls do, in one walk of the chain (a snapshot restore, issue 38)."""
        q = self.queue(path)
        if q is None:                  # as increase_pending: nothing to count
            return
        items = (resource._values if isinstance(resource, Resource) else resource).items()
        for node in q.chain:
            node.asks_waiting += count
            values = node._pending
            for name, amount in items:
                new = values.get(name, 0) + amount
                if new:
                    values[name] = new
                else:
                    values.pop(name, None)

    def decrease_pending(self, path: str, resource: Mapping[str, int]) -> None:
        """The waiting ask left (allocated or withdrawn): undo :meth:`increase_pending`."""
        delta = resource._values if isinstance(resource, Resource) else resource
        self._add_pending(path, delta.items(), -1)

    def _add_pending(self, path: str, items: Iterable[tuple[str, int]], sign: int) -> None:
        q = self.queue(path)
        if q is None:                  # the queue went (drained): nothing to count
            return
        for node in q.chain:
            node.asks_waiting += sign
            values = node._pending
            for name, amount in items:
                new = values.get(name, 0) + sign * amount
                if new:
                    values[name] = new
                else:
                    values.pop(name, None)

    def decrease_allocated(self, path: str, resource: Mapping[str, int]) -> None:
        """Subtract ``resource`` from every queue from the leaf ``path`` to the root.

        Raises ValueError (changing nothing) when a queue would go below zero for some name.
        """
        chain = self._get(path).chain
        delta = resource._values if isinstance(resource, Resource) else resource
        items = delta.items()
        for q in chain:
            used = q._alloc
            for name, amount in items:
                if amount > 0 and used.get(name, 0) < amount:
                    raise InputError(
                        f"released allocation ({Resource.of(dict(delta))}) is larger than the "
                        f"allocation of queue '{q.path}' ({q.allocated})")
        self._add(chain, items, -1)

    # ------------------------------------------------------------------------------------------------
    # running applications (M-4)
    # ------------------------------------------------------------------------------------------------
    def check_run_app(self, path: str, application_id: str) -> list[QueueLimit]:
        """M-4: every queue, leaf to root, whose maxapplications one more running application would
        exceed (``queue.maxapplications``); an application already running there always fits."""
        limits: list[QueueLimit] = []
        for q in self._get(path).ancestors():
            limit = q.max_applications
            if limit == 0 or application_id in q.running_apps:
                continue
            running = len(q.running_apps)
            if running + 1 > limit:
                limits.append(QueueLimit(
                    code="queue.maxapplications",
                    queue_path=q.path,
                    max=None,
                    allocated=q.allocated,
                    shortfall=None,
                    message=(f"queue '{q.path}' runs {running} applications, its maxapplications is "
                             f"{limit}: application '{application_id}' cannot start"),
                    max_applications=limit,
                    running_applications=running,
                ))
        return limits

    def app_started(self, path: str, application_id: str) -> None:
        """The application runs (its first allocation): count it at every queue leaf to root."""
        for q in self._get(path).ancestors():
            q.running_apps[application_id] = None

    def app_stopped(self, path: str, application_id: str) -> None:
        """The application stopped running (last allocation released, or removed)."""
        for q in self._get(path).ancestors():
            q.running_apps.pop(application_id, None)

    # ------------------------------------------------------------------------------------------------
    # headroom (M-3)
    # ------------------------------------------------------------------------------------------------
    def headroom(self, path: str) -> Resource | None:
        """M-3: ``h(q) = parentH`` without a max, else ``min(max - allocated (max's names), parentH)``,
        from the root (the cluster size) down. None when nothing limits."""
        chain = list(self._get(path).ancestors())
        h: Resource | None = None
        for q in reversed(chain):
            if q.max is not None:
                h = component_wise_min(sub_only_existing(q.max, q.allocated), h)
        return h

    def max_headroom(self, path: str) -> Resource | None:
        """M-3 ``getMaxHeadRoom``: like :meth:`headroom` but ignoring the root (cluster size)."""
        chain = list(self._get(path).ancestors())
        h: Resource | None = None
        for q in reversed(chain):
            if q.max is not None and not q.is_root:
                h = component_wise_min(sub_only_existing(q.max, q.allocated), h)
        return h

    def max_queue_set(self, path: str) -> Resource | None:
        """YuniKorn ``GetMaxQueueSet``: the component-wise min of the maxes set on the queue and its
        ancestors, ignoring the root (cluster size); None when no queue sets one (N-4 gang check)."""
        out: Resource | None = None
        for q in self._get(path).ancestors():
            if not q.is_root:
                out = component_wise_min(q.max, out)
        return out

    def effective_max(self, path: str) -> Resource | None:
        """M-3 ``GetMaxResource``: the component-wise min of the queue's max and its ancestors'."""
        out: Resource | None = None
        for q in self._get(path).ancestors():
            out = component_wise_min(q.max, out)
        return out

    # ------------------------------------------------------------------------------------------------
    # quota preemption (M-5, decision Q3)
    # ------------------------------------------------------------------------------------------------
    def quota_preemption_delay(self, path: str) -> float:
        """The queue's ``quota.preemption.delay`` in seconds (0 = off; inherited like any property)."""
        return parse_duration(self._get(path).properties.get(PROP_QUOTA_PREEMPTION_DELAY), 0.0)

    def queues_over_max(self) -> list[tuple[str, Resource, float]]:
        """M-5: the managed queues (not the root) whose usage exceeds their max and that have quota
        preemption switched on (a ``quota.preemption.delay`` above 0), as ``(path, excess, delay)`` in
        path order. ``excess`` holds, per name of the max, how much usage is over it. The caller (the
        partition, when ``preemption.quotapreemptionenabled`` is true) decides when and what to evict;
        with nothing switched on, nothing is ever evicted (decision Q3)."""
        out: list[tuple[str, Resource, float]] = []
        for path in sorted(self._by_path):
            q = self._by_path[path]
            if q.is_root or not q.managed or q.max is None:
                continue
            delay = parse_duration(q.properties.get(PROP_QUOTA_PREEMPTION_DELAY), 0.0)
            if delay <= 0:
                continue
            used = q._alloc
            excess = {k: used.get(k, 0) - v for k, v in q.max.items() if used.get(k, 0) > v}
            if excess:
                out.append((q.path, Resource.of({k: excess[k] for k in sorted(excess)}), delay))
        return out

    # ------------------------------------------------------------------------------------------------
    # ACLs
    # ------------------------------------------------------------------------------------------------
    def check_submit_acl(self, path: str, user: UserGroup) -> bool:
        """May ``user`` submit to ``path``? Allowed by the submit or admin ACL of the queue or of any
        ancestor (YuniKorn walks up). For a queue that does not exist yet, the check starts at the
        deepest existing ancestor. An ACL that is not set allows nobody."""
        q = self._deepest_existing(path)
        while q is not None:
            if q.submit_acl.check_access(user) or q.admin_acl.check_access(user):
                return True
            q = q.parent
        return False

    def check_admin_acl(self, path: str, user: UserGroup) -> bool:
        """May ``user`` administer ``path``? Its admin ACL or an ancestor's allows it."""
        q = self._deepest_existing(path)
        while q is not None:
            if q.admin_acl.check_access(user):
                return True
            q = q.parent
        return False

    # ------------------------------------------------------------------------------------------------
    # REST and state
    # ------------------------------------------------------------------------------------------------
    def dao(self, path: str | None = None, *, subtree: bool = True, partition: str = "") -> dict[str, Any]:
        """The YuniKorn ``PartitionQueueDAOInfo`` (reference §2.3) of ``path`` (root when None).

        Keys in the Go struct order, omitempty rules applied; ``children`` only when ``subtree``;
        ``partition`` only on the top object.
        """
        q = self._root if path is None else self._get(path)
        return self._dao(q, subtree, partition)

    def _dao(self, q: Queue, subtree: bool, partition: str) -> dict[str, Any]:
        return queue_dao(q, self.headroom(q.path), (lambda c: self._dao(c, True, "")) if subtree else None,
                         partition)

    def dump_state(self) -> dict[str, Any]:
        """Every queue's full state, sorted by path: deterministic, JSON-able."""
        queues: list[dict[str, Any]] = []
        for path in sorted(self._by_path):
            q = self._by_path[path]
            template = q.child_template
            queues.append({
                "path": q.path,
                "leaf": q.is_leaf,
                "managed": q.managed,
                "status": q.status,
                "max": q.max.to_dict() if q.max is not None else None,
                "guaranteed": q.guaranteed.to_dict() if q.guaranteed is not None else None,
                "maxApplications": q.max_applications,
                "allocated": q.allocated.to_dict(),
                "runningApps": list(q.running_apps),
                "applications": list(q.applications),
                "properties": dict(q.properties),
                "submitAcl": q.submit_acl.text,
                "adminAcl": q.admin_acl.text,
                "childTemplate": None if template is None else {
                    "maxApplications": template.max_applications,
                    "max": template.max.to_dict() if template.max is not None else None,
                    "guaranteed": template.guaranteed.to_dict() if template.guaranteed is not None else None,
                    "properties": {k: template.properties[k] for k in sorted(template.properties)},
                },
            })
        return {
            "partition": self._partition,
            "cluster": self._cluster.to_dict() if self._cluster is not None else None,
            "queues": queues,
        }


# ----------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------
