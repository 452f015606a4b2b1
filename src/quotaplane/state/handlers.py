"""The state of one partition and the only code that changes it: one method per event (events.py).

:class:`PartitionState` holds nodes, applications, allocations, the policies by role and the waiting
work (:class:`~quotaplane.scheduling.waiting.Waiting`: the pending asks and the notes of what the next
cycle must retry). Its methods apply a journalled event — the same methods run live, inside the
partition's transaction (:mod:`quotaplane.partition.txn`), and on replay (:meth:`PartitionState.apply`),
so replay reproduces the state (rule S1). Deciding, locking, journalling and taking back a refused
change are the transaction's; how each event is taken back is :mod:`quotaplane.state.undo`. What the
waiting-ask scheduler and the preemptors ask of the state is :mod:`quotaplane.scheduling.questions`
(they plan on it as a read-only :class:`~quotaplane.scheduling.view.StateView`), and the state as data
(the REST entry, the dump replay must reproduce, the snapshot) is :mod:`quotaplane.state.views`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import quotaplane.events as E
from quotaplane.admission import PolicySet, Preempted, apply_all
from quotaplane.application import (
    ACTIVE_STATES,
    ALLOCATED,
    ASKED,
    IDLE,
    IDLE_COUNTED,
    LAST_RELEASED,
    Allocation,
    Application,
)
from quotaplane.config.identity import UserGroup
from quotaplane.config.model import PartitionConfig
from quotaplane.errors import ConflictError, JournalReplayError, NotFoundError
from quotaplane.flavors.catalog import Catalog
from quotaplane.flavors.names import flavors_in
from quotaplane.history.partition import PartitionHistory
from quotaplane.placement import PlacementManager
from quotaplane.policies.protocol import AdmissionRequest, Eviction
from quotaplane.policies.queue import QueuePolicy
from quotaplane.policies.ugm import UgmPolicy
from quotaplane.queues import Queue, QueueTree
from quotaplane.resources import Resource
from quotaplane.scheduling.asks import Ask
from quotaplane.scheduling.guarantees import preemption_delay
from quotaplane.scheduling.questions import cannot_start, held, held_at, preempt_at
from quotaplane.scheduling.quota_preemption import QuotaPreemption
from quotaplane.scheduling.reservations import Reservations, place_path, reservation_settings
from quotaplane.scheduling.waiting import Waiting
from quotaplane.scheduling.wake import RUNNING_COUNT, chain_places, release_keys
from quotaplane.state.gang import Replacement
from quotaplane.state.marks import AllocationUndo
from quotaplane.state.nodes import NodeIndex
from quotaplane.state.owners import Owners
from quotaplane.state.timeouts import DueTimes, PartitionOptions, TimeoutActions, apply_timeouts, reclaim_tick
from quotaplane.ugm import Manager

__all__ = ["PartitionState"]

_EMPTY = Resource()


#: a leaf's settings for its waiting asks (:meth:`PartitionState.asks_restored`): the leaf, whether
#: it reserves, the overtakes bound and delay, and the delay before an ask may preempt (None: never)
_LeafSettings = tuple[Queue | None, bool, int, float, float | None]


def _allocation_of(app: Application, ev: E.Allocated, config_seq: int) -> Allocation:
    """The allocation ``ev`` admits for ``app`` under config ``config_seq`` (its node is placed by
    the caller)."""
    alloc = Allocation(ev.key, app.application_id, ev.resource, priority=ev.priority,
                       preemptible=ev.preemptible, placeholder=ev.placeholder, task_group=ev.task_group,
                       time=ev.t)
    alloc.config_seq = config_seq
    if ev.tags:
        alloc.tags = dict(ev.tags)
    if ev.flavors:
        alloc.flavors = dict(ev.flavors)
    if ev.max_runtime is not None:
        alloc.max_runtime = ev.max_runtime
    return alloc


def _released_from(app: Application, alloc: Allocation, t: float, *, last: bool, terminal: bool) -> None:
    """``app``'s lifecycle after ``alloc`` left it: its last allocation ends its running count (A-3)
    and, unless the application ends too, its running state (seed 001); its last placeholder stops
    the placeholder timeout."""
    if last:
        app.counted = False
    if alloc.placeholder and not app.has_placeholders():
        app.placeholder_since = None
    if last and not terminal:
        app.move(LAST_RELEASED, t)


def _sum_pending(pending: dict[str, tuple[dict[str, int], list[int]]], path: str, resource: Resource) -> None:
    """Add one waiting ask (or allocation) of ``resource`` in ``path`` (a leaf, or an application) to
    ``pending``'s (sum, count) of it."""
    sums = pending.get(path)
    if sums is None:
        sums = pending[path] = ({}, [0])
    total = sums[0]
    for name, amount in resource._values.items():
        total[name] = total.get(name, 0) + amount
    sums[1][0] += 1


class PartitionState:
    """Everything a partition knows, changed only by applying events (see the module docstring)."""

    def __init__(self, config: PartitionConfig, *, config_seq: int, clock: Callable[[], float],
                 options: PartitionOptions, config_source: Callable[[int], PartitionConfig] | None) -> None:
        self.name: str = config.name
        self.config: PartitionConfig = config
        self.config_seq = config_seq
        self.clock = clock
        self.options = options
        self.config_source = config_source
        self.queues = QueueTree(config)
        self.ugm = Manager()
        self.ugm.update_config(config)
        self.placement = PlacementManager(config.placement_rules)
        self.policies = PolicySet(QueuePolicy(self.queues), UgmPolicy(self.ugm))
        #: waiting asks' reservations (issue 13): checked by every admission (``PolicySet.held``)
        self.reservations = Reservations()
        self.nodes: dict[str, Resource] = {}
        #: the labels of the nodes registered with labels (they select resource flavors)
        self.node_labels: dict[str, dict[str, str]] = {}
        #: the resource flavors (docs/flavors.md), None: the partition declares none
        self.flavors: Catalog | None = Catalog.of(config)
        #: the allocations on each node and the nodes that take no new ones (issue 15 #2)
        self.node_index = NodeIndex()
        self.total: Resource = _EMPTY
        self.apps: dict[str, Application] = {}
        self.allocs: dict[str, Allocation] = {}
        self.count_seq = 0
        self.config_t: float | None = None   # time of releases made by the last apply_config
        #: applications whose state moved, and notices of changes no event of their own reports
        #: (both journalled as ``noted`` events after the change: :meth:`take_notes`)
        self.moved: list[Application] = []
        #: the applications by the time their next timeout falls due (issue 39: a tick costs what is due)
        self.due = DueTimes(self.apps, options)
        #: the applications by user and group (the standing of one reads its own: issue 39)
        self.owners = Owners()
        #: queues over their lowered max and when they are cut back (PR-Q, in memory only)
        self.quota_preemption = QuotaPreemption()
        #: the earliest time a waiting ask may preempt (PR-Y3): the timer runs a cycle then
        self.preempt_due = math.inf
        #: what the last ``timeouts`` tick did and what its over-use monitors named (the live path
        #: reports the one and journals the other)
        self.timed_out: list[str] = []
        self.due_reclaims: list[Eviction] = []
        self.notes: list[dict[str, Any]] = []
        #: hold preempted allocations until they are released (a front that evicts: issue 31 #3)
        self._hold_preempted = False
        #: allocation key → {reason, preemptor, t} of allocations preempted and not yet released (held
        #: preemptions only; in memory: the Kubernetes front rebuilds them from its pods after a restart)
        self.preempting: dict[str, dict[str, Any]] = {}
        #: allocations whose held preemption was given up (their eviction kept being refused): never
        #: chosen as victims again while they live — YuniKorn's victim stays marked preempted, and the
        #: next preemption picks others
        self.spared: set[str] = set()
        #: the pending asks and the notes of what the next cycle must retry
        self.waiting = Waiting()
        self.build_extensions(config)
        self.queues.set_cluster_resource(self.total)
        #: the usage accounting fed with every journalled event (issue 33, quotaplane.history)
        self.history = PartitionHistory(self)

    def build_extensions(self, config: PartitionConfig) -> None:
        from quotaplane.policies.registry import PolicyContext, build_policy, registered_keys

        current = dict(self.policies.extensions)
        keep: list[tuple[str, int, Any]] = []
        for key, order in registered_keys():
            if key not in config.extensions:
                continue
            existing = current.get(key)
            if existing is not None:
                existing.update_config(config)
                keep.append((key, order, existing))
            else:
                policy, built_order = build_policy(key, config, PolicyContext(self.name, self.clock))
                policy.set_cluster_resource(self.total)
                keep.append((key, built_order, policy))
        keep.sort(key=lambda e: (e[1], e[0]))
        self.policies = PolicySet(self.policies.queue, self.policies.ugm, [(k, p) for k, _, p in keep])
        self.policies.held = functools.partial(held, self)
        for policy in self.policies.extension_policies:
            policy.hold_victims(self._hold_preempted)
            policy.never_victims(self.spared)
            policy.victims_first(self.policies.best_effort_at)

    @property
    def hold_preempted(self) -> bool:
        """Preempted allocations are held until released (a front that evicts: issue 31 #3); every
        policy that preempts follows it (a quota forest refuses and names its victims instead)."""
        return self._hold_preempted

    @hold_preempted.setter
    def hold_preempted(self, on: bool) -> None:
        self._hold_preempted = on
        for policy in self.policies.extension_policies:
            policy.hold_victims(on)

    def set_total(self) -> None:
        self.total = self.cluster_total()
        self.queues.set_cluster_resource(self.total)
        for p in self.policies.extension_policies:
            p.set_cluster_resource(self.total)

    def cluster_total(self) -> Resource:
        """The cluster's capacity from the nodes; with resource flavors, each node also counts under the
        flavored names of the flavors its labels select (docs/flavors.md "Nodes")."""
        catalog = self.flavors
        if catalog is None:
            return NodeIndex.total(self.nodes, self.node_index.unschedulable)
        labels = self.node_labels
        return NodeIndex.total({n: catalog.node_capacity(c, labels.get(n)) for n, c in self.nodes.items()},
                               self.node_index.unschedulable)

    def node_added(self, ev: E.NodeAdded) -> None:
        if ev.labels:
            self.node_labels[ev.node] = dict(ev.labels)
        else:
            self.node_labels.pop(ev.node, None)
        self.nodes[ev.node] = ev.capacity
        self.node_index.set_schedulable(ev.node, ev.schedulable is not False)
        self.set_total()

    def node_updated(self, ev: E.NodeUpdated) -> None:
        if ev.labels is not None:
            if ev.labels:
                self.node_labels[ev.node] = dict(ev.labels)
            else:
                self.node_labels.pop(ev.node, None)
        self.nodes[ev.node] = ev.capacity
        self.node_index.set_schedulable(ev.node, ev.schedulable)
        self.set_total()

    def node_removed(self, ev: E.NodeRemoved) -> None:
        """YuniKorn's ``removeNode``: every allocation on the node is released (noted for
        subscribers), then the node leaves the cluster's capacity."""
        if ev.t is not None:
            for key in self.node_index.on(ev.node):
                if key in self.allocs:
                    self.release_one(key, ev.t, noted=True)
        del self.nodes[ev.node]
        self.node_labels.pop(ev.node, None)
        self.node_index.forget(ev.node)
        self.set_total()

    def bound(self, ev: E.Bound) -> None:
        """An allocation's node became known (or changed)."""
        self.place_on(ev.key, ev.node)

    def place_on(self, key: str, node: str | None) -> None:
        """Allocation ``key`` runs on ``node`` (None: no node known)."""
        alloc = self.allocs[key]
        if alloc.node is not None:
            self.node_index.unplace(alloc.node, key)
        alloc.node = node
        if node is not None:
            self.node_index.place(node, key)

    def app_added(self, ev: E.AppAdded) -> None:
        if self.queues.queue(ev.queue) is None:
            self.queues.ensure_dynamic_queue(ev.queue)
        if ev.tags:
            self.queues.apply_namespace_tags(ev.queue, ev.tags)
        timeout = (self.options.placeholder_timeout if ev.placeholder_timeout is None
                   else ev.placeholder_timeout)
        app = Application(ev.app, UserGroup(ev.user, ev.groups), ev.queue, tags=ev.tags, submit_time=ev.t,
                          gang_style=ev.gang_style, placeholder_timeout=timeout, added_seq=self.config_seq)
        app.watch = self.app_moved
        self.apps[app.application_id] = app
        self.due.enter(app)
        self.owners.enter(app)
        self.queues.add_application(ev.queue, app.application_id)

    def app_moved(self, app: Application) -> None:
        """``app``'s state changed: a notice is due, and maybe a timeout."""
        self.moved.append(app)
        self.due.note(app)
        self.waiting.moved(app)         # positions leave out the asks of one that takes no allocation

    def take_notes(self, t: float | None = None) -> list[E.Noted]:
        """The ``noted`` events due: changes made since the last call that no event reports itself
        (released by a timeout, a removal or a config; an application's new state), made at ``t``."""
        if not self.moved and not self.notes:
            return []
        out = [E.Noted(notice=n, t=t) for n in self.notes]
        self.notes = []
        seen: set[str] = set()
        for app in self.moved:
            aid = app.application_id
            if aid in seen or app.state == app.reported_state:
                continue
            seen.add(aid)
            out.append(E.Noted(notice={"type": "application", "applicationID": aid,
                                       "queueName": app.queue_path, "state": app.state}, t=t))
        self.moved.clear()
        return out

    def notes_recorded(self, notes: Sequence[E.Noted]) -> None:
        """``notes`` were journalled (or replayed): the states they tell are the reported ones."""
        for ev in notes:
            n = ev.notice
            if n.get("type") == "application":
                app = self.apps.get(n["applicationID"])
                if app is not None:
                    app.reported_state = n["state"]

    def drop_app(self, app: Application, t: float) -> None:
        """The application leaves the partition at ``t`` (removed, expired, or its adding taken back)."""
        for ask in self.waiting.asks.remove_application(app.application_id):   # no orphan asks (expiry)
            self.ask_leaves(ask, allocated=False, t=t)
        del self.apps[app.application_id]
        self.due.leave(app.application_id)
        self.waiting.left(app.application_id)
        self.owners.leave(app)
        # the queue tree drops a draining or dynamic queue once it is empty
        self.queues.remove_application(app.queue_path, app.application_id)

    def app_removed(self, ev: E.AppRemoved) -> None:
        app = self.apps[ev.app]
        for ask in self.waiting.asks.remove_application(app.application_id):
            self.ask_leaves(ask, allocated=False, t=ev.t)
        for key in list(app.allocations):
            self.release_one(key, ev.t, terminal=True, noted=True)
        if app.counted:
            self.leave(app, ev.t)
        self.drop_app(app, ev.t)


    def active_app(self, application_id: str) -> Application:
        """The application ``application_id`` when it takes allocations now: NotFoundError when it is
        unknown or its queue is gone, ConflictError when it is in a state that takes none."""
        app = self.apps.get(application_id)
        if app is None:
            raise NotFoundError(f"application {application_id!r} not found in partition {self.name!r}")
        if app.state not in ACTIVE_STATES:
            raise ConflictError(f"application {application_id!r} is {app.state} and takes no allocations")
        if self.queues.queue(app.queue_path) is None:
            raise NotFoundError(f"queue {app.queue_path!r} of application {application_id!r} "
                                "no longer exists")
        return app

    def request(self, app: Application, key: str, resource: Resource, priority: int = 0,
                preemptible: bool = True, first: bool = False, t: float = 0.0,
                max_runtime: float | None = None) -> AdmissionRequest:
        return AdmissionRequest(app.application_id, key, app.queue_path, app.user, resource, priority,
                                preemptible, first, app.tags, t, max_runtime)

    def ask_enters(self, ask: Ask, places: Sequence[str] | None = None) -> None:
        """A waiting ask is demand (PR-K1): its queue's ``pendingResource`` and its elastic quota's
        request grow. It counts towards no limit. It watches the places that hold it back now (or
        ``places``, as a snapshot recorded them) for overtakes (reservations)."""
        self.waiting.asks.add(ask)
        self.waiting.entered(ask, preempt_at(self, ask))
        app = self.apps[ask.application_id]
        leaf = self.queues.queue(app.queue_path)
        if leaf is not None:
            on, bound, delay = reservation_settings(leaf)
            user = app.user.user
            held = [] if not on else held_at(self, app, ask) if places is None else \
                [(key, place_path(key, user)) for key in places]
            self.reservations.enter(ask, held, bound, delay)
        self.queues.increase_pending(app.queue_path, ask.resource)
        if leaf is not None and self.config.preemption.enabled:
            # when this ask may first preempt (PR-Y3): the timer runs a cycle then
            self.preempt_due = min(self.preempt_due, ask.created + preemption_delay(leaf))
        req = self.request(app, ask.allocation_key, ask.resource, ask.priority, ask.preemptible,
                           t=ask.created)
        for policy in self.policies.extension_policies:
            policy.ask_added(req)

    def _reservers_stopped(self) -> None:
        """An application started (it entered the running count): a reserving ask it keeps from
        starting now holds nothing back, so what its reservation held is retried, and the cycle
        ends here so that incremental and full cycles agree on the order."""
        paths: list[str] = []
        for ask in self.reservations.in_force_asks():
            if cannot_start(self, ask):
                paths += ask.place_paths
        if paths:
            self.waiting.wake(["r:" + path for path in dict.fromkeys(paths)])
            self.waiting.asks.cycle_freed = True
            self.waiting.asks.dirty = True

    def ask_leaves(self, ask: Ask, *, allocated: bool, t: float) -> None:
        """A waiting ask is no longer demand at ``t``: allocated (the policies' apply made it usage) or
        withdrawn."""
        ended = self.reservations.leave(ask, t)
        if ended:       # what its reservation held back may go now (another cycle runs)
            self.waiting.wake(["r:" + path for path in ended])
            self.waiting.asks.cycle_freed = True
            self.waiting.asks.dirty = True
        app = self.apps.get(ask.application_id)
        if app is None:
            return
        self.queues.decrease_pending(app.queue_path, ask.resource)
        if not allocated:
            req = self.request(app, ask.allocation_key, ask.resource, ask.priority, ask.preemptible, t=t)
            for policy in reversed(self.policies.extension_policies):
                policy.ask_removed(req)

    def after_allocated(self, app: Application, ev: E.Allocated,
                         preempted: Sequence[Preempted] = ()) -> None:
        """Record an allocation whose policies are applied; lifecycle transitions (seed 001)."""
        self._ask_allocated(app, ev)
        alloc = _allocation_of(app, ev, self.config_seq)
        if ev.node is not None:
            alloc.node = ev.node
            self.node_index.place(ev.node, ev.key)
        if alloc.placeholder and not app.has_placeholders():
            app.placeholder_since = ev.t
            self.due.note(app)                      # its placeholder timeout runs from now
        app.allocations[alloc.allocation_key] = alloc
        app.charge(alloc.resource, placeholder=alloc.placeholder)
        self.allocs[alloc.allocation_key] = alloc
        started = not app.counted
        if started:
            # Running state entry (seed 001): the first allocation counts the application.
            app.counted = True
            app.anchor_seq = self.config_seq
            self.count_seq += 1
            app.count_order = self.count_seq
        app.move(ALLOCATED, ev.t)                   # New → Accepted → Starting in one step
        if started and self.reservations.active:
            self._reservers_stopped()
        if self.waiting.asks.has_application(app.application_id):
            self.waiting.touch(app.application_id)  # its other asks see its new state next cycle
        if preempted:
            self.release_preempted(preempted, ev.key, ev.t)

    def _ask_allocated(self, app: Application, ev: E.Allocated) -> None:
        """An allocation made for a pending ask ends the ask in the same event (queueing), and it
        overtakes the earlier asks waiting where it consumes (reservations)."""
        ask = self.waiting.asks.remove(ev.key)
        if ask is not None:
            self.ask_leaves(ask, allocated=True, t=ev.t)
        if self.reservations.watching:
            leaf = self.queues.queue(app.queue_path)
            if leaf is not None:
                self.reservations.consumed_in(leaf, app.user.user, ev.priority,
                                              ask.seq if ask is not None else math.inf)

    def release_preempted(self, preempted: Sequence[Preempted], preemptor: str, t: float) -> None:
        """Release what a policy let go while admitting ``preemptor`` (a quota forest), and note it."""
        gone = [(policy, key) for policy, key in preempted if key in self.allocs and key != preemptor]
        if not gone:
            return
        allocs = self.allocs
        self.notes.append({"type": "preempted",
                           "allocations": [{"allocationKey": k, "applicationID": allocs[k].application_id}
                                           for _, k in gone],
                           "reason": {"policy": gone[0][0].name, "code": f"{gone[0][0].name}.preempted",
                                      "path": "", "message": f"preempted by {gone[0][0].name} to admit "
                                                             f"{preemptor!r}"},
                           "preemptor": preemptor})
        for policy, key in gone:
            self.release_one(key, t, skip=policy)

    def hold(self, keys: Sequence[str], reason: dict[str, str], preemptor: str | None, t: float) -> list[str]:
        """Held preemption (issue 31 #3): mark ``keys`` preempted without releasing them — they stay
        charged until released — and note the decision (the subscribers' ``preempted`` notice, with
        ``held: true``). The keys already held or gone are skipped; the ones marked are returned."""
        keys = [k for k in keys if k in self.allocs and k not in self.preempting]
        if not keys:
            return []
        for k in keys:
            self.preempting[k] = {"reason": dict(reason), "preemptor": preemptor, "t": t}
        allocations = [{"allocationKey": k, "applicationID": self.allocs[k].application_id} for k in keys]
        note: dict[str, Any] = {"type": "preempted", "held": True, "reason": dict(reason),
                                "allocations": allocations}
        if preemptor is not None:
            note["preemptor"] = preemptor
        self.notes.append(note)
        return keys

    def undo_allocated(self, ev: E.Allocated, undo: AllocationUndo) -> None:
        """Reverse an allocation that could not be journalled (the caller re-raises).

        Preemptions a policy made for it cannot be reversed; they are rare (quota forests only).
        """
        alloc = self.allocs.get(ev.key)
        if alloc is None:
            return
        app = self.apps[alloc.application_id]
        for policy in reversed(self.policies.all):
            policy.undo(undo.request)
        self._wake(app, last=undo.request.first_allocation)
        leaf = self.queues.queue(app.queue_path)
        if leaf is not None and self.reservations.watching:
            ask_seq = undo.ask.seq if undo.ask is not None else math.inf
            self.reservations.unconsumed((k for k, _ in chain_places(leaf, app.user.user)), ev.priority,
                                         ask_seq)
        del self.allocs[ev.key]
        del app.allocations[ev.key]
        app.discharge(alloc.resource, placeholder=alloc.placeholder)
        if alloc.node is not None:
            self.node_index.unplace(alloc.node, ev.key)
        undo.app.restore(app)
        self.due.note(app)                          # a timeout it had may be back
        ask = undo.ask
        if ask is not None and ask.allocation_key not in self.waiting.asks:
            # it waits again; the policies' undo made its usage demand again (an elastic pending pod)
            ask.reasons = None
            self.waiting.asks.add(ask)
            self.waiting.entered(ask, preempt_at(self, ask))
            self.reservations.reenter(ask)
            self.queues.increase_pending(app.queue_path, ask.resource)

    def allocated(self, ev: E.Allocated) -> None:
        """Replay: apply the recorded outcome without re-running the checks."""
        app = self.apps[ev.app]
        req = self.request(app, ev.key, ev.resource, ev.priority, ev.preemptible, first=not app.counted,
                           t=ev.t, max_runtime=ev.max_runtime)
        refused, preempted = apply_all(self.policies, req)
        if refused:
            raise JournalReplayError(f"replay of allocation {ev.key!r} was refused: "
                                     f"{'; '.join(v.message for v in refused)}")
        self.after_allocated(app, ev, preempted)

    def allocations_restored(self, events: Sequence[E.Allocated]) -> None:
        """A snapshot rebuild's run of live allocations (admitted under one config, in admission order)
        put back in one pass (issue 38: a restart of 100,000 of them): the state :meth:`allocated` of
        each in order leaves — pinned by tests/partition/test_restore_bulk.py — with no admission
        request built, each leaf's ``allocated`` added once and each running application's usage
        tracked by the user/group manager once. An application's first allocation still goes through
        the manager on its own, in order (it links the application to its group, U4, and counts it
        as running), and the limits still check every increase. Extension policies see each
        allocation: a partition with any takes :meth:`allocated` one by one."""
        if self.policies.extension_policies:
            for ev in events:
                self.allocated(ev)
            return
        apps, tree, ugm = self.apps, self.queues, self.ugm
        by_leaf: dict[str, tuple[dict[str, int], list[int]]] = {}
        by_app: dict[str, tuple[dict[str, int], list[int]]] = {}
        for ev in events:
            app = apps[ev.app]
            path = app.queue_path
            if app.counted:
                _sum_pending(by_app, ev.app, ev.resource)
            else:                   # the queue's and the manager's first allocation (as the policies)
                tree.app_started(path, ev.app)
                if not ugm.increase_tracked_resource(path, ev.app, ev.resource, app.user):
                    raise JournalReplayError(f"replay of allocation {ev.key!r} was refused by the user "
                                             "and group limits")
            _sum_pending(by_leaf, path, ev.resource)
            self.after_allocated(app, ev)
        for app_id, (total, _n) in by_app.items():
            app = apps[app_id]
            if not ugm.increase_tracked_resource(app.queue_path, app_id, Resource.of(total), app.user):
                raise JournalReplayError(f"replay of the allocations of application {app_id!r} was refused "
                                         "by the user and group limits")
        for path, (total, _n) in by_leaf.items():
            tree.increase_allocated(path, total)

    def count_in(self, app: Application) -> None:
        """Enter the running count with no resources (rebuilding a soft-timed-out application)."""
        req = self.request(app, "", _EMPTY, first=True)
        for policy in self.policies.core:       # the running count lives in queue and user/group
            if policy.apply(req):
                raise JournalReplayError(f"replay could not count application {app.application_id!r} "
                                         "as running")
        app.counted = True
        self.count_seq += 1
        app.count_order = self.count_seq

    def leave(self, app: Application, t: float) -> None:
        """Leave the running count at ``t`` with no allocation left (seed 001 running state exit)."""
        req = self.request(app, "", _EMPTY, t=t)
        for policy in reversed(self.policies.core):   # the running count lives in queue and user/group
            policy.release(req, last_allocation=True)
        app.counted = False
        self.waiting.wake((RUNNING_COUNT,))

    def _wake(self, app: Application, *, last: bool) -> None:
        """Quota was given back along ``app``'s queue chain: the asks waiting on it are retried."""
        leaf = self.queues.queue(app.queue_path)
        if leaf is not None:
            self.waiting.wake(release_keys(app.user.user, leaf, last=last))
        else:
            self.waiting.full_due = True


    def release_one(self, key: str, t: float, *, terminal: bool = False, keep_counted: bool = False,
                    skip: Any = None, noted: bool = False) -> None:
        alloc = self.allocs.pop(key)
        self.preempting.pop(key, None)
        self.spared.discard(key)
        app = self.apps[alloc.application_id]
        if alloc.node is not None:
            self.node_index.unplace(alloc.node, key)
        if noted:
            self.notes.append({"type": "released", "allocationKey": key, "applicationID": app.application_id})
        del app.allocations[key]
        app.discharge(alloc.resource, placeholder=alloc.placeholder)
        # with asks still pending the application keeps running (and counting)
        last = (app.counted and not app.allocations and not keep_counted
                and not self.waiting.asks.has_application(app.application_id))
        req = self.request(app, key, alloc.resource, alloc.priority, alloc.preemptible, t=t)
        for policy in reversed(self.policies.all):
            if policy is not skip:
                policy.release(req, last_allocation=last)
        if self.waiting.asks:
            self._wake(app, last=last)
        _released_from(app, alloc, t, last=last, terminal=terminal)


    def replacement(self, ev: E.Replaced) -> Replacement:
        ph = self.allocs[ev.placeholder]
        return Replacement(self.policies, functools.partial(self.request, t=ev.t),
                           self.apps[ph.application_id], ph, ev.key, ev.resource, ev.t)

    def replaced(self, ev: E.Replaced) -> None:
        self.apply_replacement(ev, self.replacement(ev))

    def apply_replacement(self, ev: E.Replaced, replacement: Replacement) -> list[str]:
        ph = self.allocs[ev.placeholder]
        app = self.apps[ph.application_id]
        preempted = replacement.apply()
        ask = self.waiting.asks.remove(ev.key)        # a pending ask replacing a placeholder ends
        if ask is not None:
            self.ask_leaves(ask, allocated=True, t=ev.t)
        real = self._real_of(ev, ph, ask, replacement)
        self._swap_in(app, ph, real)
        if not app.has_placeholders():
            app.placeholder_since = None
        app.move(ALLOCATED, ev.t)
        if self.waiting.asks:
            self._wake(app, last=False)             # a smaller real allocation gives quota back
            if self.waiting.asks.has_application(app.application_id):
                self.waiting.touch(app.application_id)
        self.release_preempted(preempted, real.allocation_key, ev.t)
        return [k for _, k in preempted]

    def _real_of(self, ev: E.Replaced, ph: Allocation, ask: Ask | None,
                 replacement: Replacement) -> Allocation:
        """The real allocation replacing placeholder ``ph``: its flags, task group and node."""
        real = Allocation(ev.key, ph.application_id, ev.resource, priority=ph.priority,
                          preemptible=ph.preemptible, placeholder=False, task_group=ph.task_group, time=ev.t)
        # the real allocation is its own pod (YuniKorn's shim tags the real ask with it); a replacement
        # without an ask of its own (REST) keeps what the placeholder said
        tags = ask.tags if ask is not None and ask.tags else ph.tags
        if tags:
            real.tags = dict(tags)
        if ph.flavors:          # charged in its placeholder's flavors (docs/flavors.md)
            real.flavors = flavors_in(ev.resource) or None
        # snapshot rebuild re-admits it under this config: the placeholder's when the replacement
        # asked for nothing more (its usage was admitted then, a later config may be tighter)
        grew = any(v > 0 for v in replacement.up.resource.values())
        real.config_seq = self.config_seq if grew else ph.config_seq
        return real

    def _swap_in(self, app: Application, ph: Allocation, real: Allocation) -> None:
        """``real`` takes placeholder ``ph``'s place: its node, its rank in admission order, its usage."""
        if ph.node is not None:                     # the real allocation runs where its placeholder ran
            self.node_index.unplace(ph.node, ph.allocation_key)
            real.node = ph.node
            self.node_index.place(ph.node, real.allocation_key)
        app.allocations = {(real.allocation_key if k == ph.allocation_key else k):
                           (real if k == ph.allocation_key else a) for k, a in app.allocations.items()}
        app.discharge(ph.resource, placeholder=True)
        app.charge(real.resource, placeholder=False)
        del self.allocs[ph.allocation_key]
        self.allocs[real.allocation_key] = real


    def timeouts(self, ev: E.Timeouts) -> None:
        """Every timeout due at ``ev.t`` (:mod:`quotaplane.state.timeouts`) and one tick of the
        over-use monitors. What happened (:attr:`timed_out`) and what the monitors named
        (:attr:`due_reclaims`) are kept for the live path, which journals the reclaims; a replay
        ignores them (the journal holds what was decided)."""
        def release(key: str, t: float, *, terminal: bool, keep_counted: bool) -> None:
            self.release_one(key, t, terminal=terminal, keep_counted=keep_counted, noted=True)

        actions = TimeoutActions(release=release, leave=lambda app: self.leave(app, ev.t),
                                 drop=lambda app: self.drop_app(app, ev.t),
                                 allocated=self.allocs.__contains__)
        due = self.due.take(ev.t)               # what is due, in the order of ``apps`` (issue 39)
        self.timed_out = apply_timeouts(due, ev.t, self.options, actions)
        self.due.settle(due)
        # the tick runs on replay too: it moves the monitors' clocks
        self.due_reclaims = reclaim_tick(self.policies.reclaiming(), ev.t)

    def preempted(self, ev: E.Preempted) -> None:
        """Allocations taken away by a decision (preemption or reclaim), as it was journalled."""
        for key in ev.keys:
            if key in self.allocs:
                self.release_one(key, ev.t)


    def config_applied(self, ev: E.ConfigApplied) -> None:
        if self.config_source is None:
            raise JournalReplayError(f"partition {self.name!r} cannot resolve config #{ev.seq}")
        self.apply_config(self.config_source(ev.seq), ev.seq, t=ev.t)

    def ask_added(self, ev: E.AskAdded) -> None:
        self.ask_enters(Ask.from_event(ev), ev.places)
        # seed 001: a request moves the application to Accepted; a completing one back to Running
        # (YuniKorn RunApplication: it is not Completed away while the request waits)
        self.apps[ev.app].move(ASKED, ev.t)

    def asks_restored(self, events: Sequence[E.AskAdded]) -> None:
        """A snapshot's waiting asks put back in one pass (issue 38: a restart of 500,000 of them):
        the state :meth:`ask_added` of each in order leaves — pinned by
        tests/partition/test_restore_bulk.py — with each leaf's settings looked up once, its
        ``pendingResource`` and ask count added once, and no admission request built for policies
        that watch no ask. Asks whose reservation places must be found now (no record while their
        leaf reserves) read the state as it grows, and extension policies see each ask: those take
        :meth:`ask_added` one by one."""
        leaves: dict[str, _LeafSettings] = {}
        for ev in events:           # each leaf's settings; does any ask need the slow path?
            path = self.apps[ev.app].queue_path
            got = leaves.get(path)
            if got is None:
                got = leaves[path] = self._leaf_settings(path)
            if got[1] and ev.places is None:
                break
        else:
            if not self.policies.extension_policies:
                self._asks_restored(events, leaves)
                return
        for ev in events:
            self.ask_added(ev)

    def _leaf_settings(self, path: str) -> _LeafSettings:
        leaf = self.queues.queue(path)
        if leaf is None:
            return None, False, 0, 0.0, None
        on, bound, delay = reservation_settings(leaf)
        return leaf, on, bound, delay, preemption_delay(leaf) if self.config.preemption.enabled else None

    def _asks_restored(self, events: Sequence[E.AskAdded], leaves: Mapping[str, _LeafSettings]) -> None:
        """:meth:`asks_restored`'s one pass (its conditions checked): what :meth:`ask_enters` and
        :meth:`ask_added` do for each ask, in the same order, but the pending sums added at the end."""
        apps, waiting, reservations = self.apps, self.waiting, self.reservations
        add, entered = waiting.asks.add, waiting.entered
        pending: dict[str, tuple[dict[str, int], list[int]]] = {}
        preempt_due = self.preempt_due
        for ev in events:
            ask = Ask.from_event(ev)
            app = apps[ev.app]
            leaf, on, bound, delay, due = leaves[app.queue_path]
            add(ask)
            entered(ask, None if due is None else ask.created + due)
            if leaf is not None:
                user = app.user.user
                held = [(key, place_path(key, user)) for key in ev.places or ()] if on else []
                reservations.enter(ask, held, bound, delay)
                if due is not None:
                    preempt_due = min(preempt_due, ask.created + due)
            _sum_pending(pending, app.queue_path, ask.resource)
            app.move(ASKED, ev.t)       # as ask_added: Accepted (seed 001)
        self.preempt_due = preempt_due
        for path, (total, count) in pending.items():
            self.queues.increase_pending_many(path, total, count[0])

    def ask_withdrawn(self, key: str) -> None:
        """The waiting ask ``key`` is no longer demand, as if it had never been added (its
        application's lifecycle is the caller's)."""
        ask = self.waiting.asks.remove(key)
        if ask is not None:
            self.ask_leaves(ask, allocated=False, t=ask.created)

    def ask_removed(self, ev: E.AskRemoved) -> None:
        ask = self.waiting.asks.remove(ev.key)
        if ask is None:
            return
        self.ask_leaves(ask, allocated=False, t=ev.t)
        app = self.apps.get(ask.application_id)
        if app is None or app.allocations or self.waiting.asks.has_application(app.application_id):
            return
        # the last ask of an application with no allocation went away
        if app.counted:
            self.leave(app, ev.t)
            app.move(IDLE_COUNTED, ev.t)
        else:
            app.move(IDLE, ev.t)


    def apply(self, ev: E.Event) -> None:
        """Apply ``ev`` through its handler (live, inside the partition's transaction, and on replay)."""
        handler = _HANDLERS.get(type(ev))
        if handler is None:  # pragma: no cover - decode() knows every class
            raise JournalReplayError(f"no handler for event {ev!r}")
        handler(self, ev)

    def released(self, ev: E.Released) -> None:
        """An allocation released at ``ev.t``."""
        self.release_one(ev.key, ev.t)

    def counted_in(self, ev: E.CountIn) -> None:
        """Snapshot rebuild: the application enters the running count."""
        self.count_in(self.apps[ev.app])

    def noted(self, ev: E.Noted) -> None:
        """A noted change (replay): the state it tells is the reported one."""
        self.notes_recorded([ev])

    def policy_memo(self, ev: E.PolicyMemo) -> None:
        policy = self.policies.extension(ev.policy)
        if policy is None:
            raise JournalReplayError(f"no policy {ev.policy!r} to restore a snapshot memo into")
        policy.restore_memo(ev.memo)

    def app_restore(self, ev: E.AppRestore) -> None:
        app = self.apps[ev.app]
        if ev.allocations is not None and set(ev.allocations) == set(app.allocations):
            app.allocations = {k: app.allocations[k] for k in ev.allocations}
        app.state = ev.state
        app.state_since = ev.state_since
        if ev.state_log is not None:
            app.state_log.clear()
            app.state_log.extend((float(t), str(s)) for t, s in ev.state_log)
            app.started = ev.started
        app.placeholder_since = ev.placeholder_since
        self.due.note(app)
        self.waiting.moved(app, restored=True)
        if ev.max_used is not None:     # older snapshots lack it: the maximum of what they hold
            app.max_used = dict(ev.max_used)
        app.anchor_seq = ev.anchor_seq
        app.added_seq = ev.added_seq

    def apply_config(self, config: PartitionConfig, seq: int, *, t: float | None = None) -> None:
        """Adopt config ``seq``; release what a policy let go because of it (see Partition.apply_config)."""
        self.config = config
        self.config_seq = seq
        recount = self._flavors_changed(Catalog.of(config))
        if recount:
            self.total = self.cluster_total()
        self.queues.update_config(config)
        self.queues.set_cluster_resource(self.total)
        self.ugm.update_config(config)
        self.placement.update_rules(config.placement_rules)
        self.build_extensions(config)
        if recount:                 # the flavors changed: so did every policy's cluster total
            for policy in self.policies.extension_policies:
                policy.set_cluster_resource(self.total)
        self._reservation_settings()
        dropped = [(p, key) for p in self.policies.extension_policies for key in p.take_preempted()]
        self.config_t = None
        if dropped:
            when = self.clock() if t is None else t
            for policy, key in dropped:
                if key in self.allocs:
                    self.release_one(key, when, skip=policy, noted=True)
            self.config_t = when

    def _flavors_changed(self, catalog: Catalog | None) -> bool:
        """Adopt a config's flavor catalog; whether it differs from the one in force (then every node
        is counted again)."""
        same = self.flavors is None if catalog is None else catalog.same_as(self.flavors)
        if same:
            return False
        self.flavors = catalog
        return True

    def _reservation_settings(self) -> None:
        """A new config: every waiting ask's reservation bound and delay come from its leaf again."""
        settings: dict[str, tuple[bool, int, float]] = {}
        leaf_of: dict[str, str] = {}
        waiting = self.waiting.asks.all()
        for ask in waiting:
            app = self.apps.get(ask.application_id)
            leaf = self.queues.queue(app.queue_path) if app is not None else None
            if app is None or leaf is None:
                continue
            leaf_of[ask.allocation_key] = leaf.path
            if leaf.path not in settings:
                settings[leaf.path] = reservation_settings(leaf)
        self.reservations.settings_changed(waiting, settings, leaf_of)


#: the handler of each event class (:meth:`PartitionState.apply`)
_HANDLERS: dict[type[E.Event], Callable[[PartitionState, Any], None]] = {
    E.Allocated: PartitionState.allocated, E.Released: PartitionState.released,
    E.AskAdded: PartitionState.ask_added, E.AskRemoved: PartitionState.ask_removed,
    E.AppAdded: PartitionState.app_added, E.AppRemoved: PartitionState.app_removed,
    E.NodeAdded: PartitionState.node_added, E.NodeRemoved: PartitionState.node_removed,
    E.NodeUpdated: PartitionState.node_updated, E.Bound: PartitionState.bound,
    E.Replaced: PartitionState.replaced, E.Timeouts: PartitionState.timeouts,
    E.Preempted: PartitionState.preempted, E.ConfigApplied: PartitionState.config_applied,
    E.CountIn: PartitionState.counted_in, E.AppRestore: PartitionState.app_restore,
    E.PolicyMemo: PartitionState.policy_memo, E.Noted: PartitionState.noted,
}
