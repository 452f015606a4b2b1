"""A partition: nodes, queues, users and groups, applications, and the one admission path.

The partition composes the engines (product.md "Architecture"): the queue tree (seed 004), the user
group manager (seeds 000/001) and, when the partition config switches them on, the elastic and forest
policies (:mod:`quotaplane.policies.registry`), held by role in a
:class:`~quotaplane.admission.PolicySet`. Every change happens under :attr:`Partition.lock` and is a
typed event (:mod:`quotaplane.events`): the partition applies it, appends it to the journal, and only
then answers (rule S1). Replaying the events through the same handlers rebuilds the identical state
(:meth:`Partition.dump_state`).

Responsibilities live beside this module: admission in :mod:`quotaplane.admission`, the lifecycle
table in :mod:`quotaplane.application`, gang placeholder replacement in :mod:`quotaplane.gang`,
timeouts in :mod:`quotaplane.timeouts`, snapshot rebuilds in :mod:`quotaplane.rebuild`, and the
pending-ask scheduler in :mod:`quotaplane.scheduling` (composed, seen through a narrow host).
"""

from __future__ import annotations

import json
import threading
import time as _time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import quotaplane.events as E
from quotaplane.admission import (
    AllocationSpec,
    AllocationUndo,
    PolicySet,
    Preempted,
    admit,
    apply_all,
    as_resource,
    check_all,
    check_id,
    validate_spec,
)
from quotaplane.application import (
    ACTIVE_STATES,
    ALLOCATED,
    ASKED,
    GANG_HARD,
    GANG_SOFT,
    IDLE,
    IDLE_COUNTED,
    LAST_RELEASED,
    Allocation,
    Application,
)
from quotaplane.config.identity import UserGroup
from quotaplane.config.model import PartitionConfig
from quotaplane.errors import (
    ConflictError,
    JournalReplayError,
    NotFoundError,
    NotLeaderError,
    QuotaplaneError,
)
from quotaplane.gang import Replacement
from quotaplane.journal.base import Journal
from quotaplane.placement import PlacementManager
from quotaplane.policies.queue import QueuePolicy
from quotaplane.policies.ugm import UgmPolicy
from quotaplane.policy import AdmissionRequest, Decision, Violation
from quotaplane.queues import QueueTree
from quotaplane.rebuild import rebuild_events
from quotaplane.resources import Resource
from quotaplane.scheduling.asks import Ask
from quotaplane.scheduling.runner import CycleHost, PendingAsks
from quotaplane.submission import Submission
from quotaplane.timeouts import PartitionOptions, TimeoutActions, apply_timeouts, timeouts_due
from quotaplane.ugm import Manager

__all__ = ["Allocation", "Application", "JournalReplayError", "Partition", "PartitionOptions"]

_EMPTY = Resource()


class Partition:
    """One partition of the scheduler (contract "Scheduler and partitions").

    All changes are serialised by :attr:`lock` (an ``RLock``); reads that need a consistent view can
    hold it too (``with p.lock: …`` or :meth:`read`). ``clock`` is injectable (seconds, float) and
    drives placeholder and state timeouts (:meth:`check_timeouts`).
    """

    def __init__(self, config: PartitionConfig, *, journal: Journal | None = None, stream: str | None = None,
                 clock: Callable[[], float] | None = None, config_seq: int = 0,
                 config_source: Callable[[int], PartitionConfig] | None = None,
                 options: PartitionOptions | None = None, holder: str | None = None) -> None:
        self.name: str = config.name
        self.config: PartitionConfig = config
        self.config_seq = config_seq
        self.lock = threading.RLock()
        self.clock: Callable[[], float] = clock if clock is not None else _time.time
        self.journal: Journal | None = journal
        self.stream = stream if stream is not None else config.name
        self.holder = holder
        self.options: PartitionOptions = options if options is not None else PartitionOptions()
        self._config_source = config_source
        self.queues: QueueTree = QueueTree(config)
        self.ugm = Manager()
        self.ugm.update_config(config)
        self.placement: PlacementManager = PlacementManager(config.placement_rules)
        self._policies = PolicySet(QueuePolicy(self.queues), UgmPolicy(self.ugm))
        self._nodes: dict[str, Resource] = {}
        self._total: Resource = _EMPTY
        self._apps: dict[str, Application] = {}
        self._allocs: dict[str, Allocation] = {}
        self._last_seq = 0
        self._snapshot_seq = 0
        self._replaying = False
        self._poisoned: BaseException | None = None
        self._wrote = False           # journalled events since the last snapshot (not a follower)
        self._count_seq = 0
        self._config_t: float | None = None   # time of releases made by the last apply_config
        #: The last error of an automatic snapshot (snapshots are optional; the events are durable).
        self.snapshot_error: Exception | None = None
        self._pending = PendingAsks(CycleHost(
            name=self.name, apps=self._apps, allocations=self._allocs, queue=self.queues.queue,
            admit=self._admit_ask, undo=self._undo_allocated, replace=self.replace_placeholder,
            record=lambda evs: self._record(evs, recoverable=True), explain=self._explain_ask,
            over_queue_max=self._over_queue_max, last_seq=lambda: self._last_seq,
            replaying=lambda: self._replaying))
        self._build_extensions(config)
        self.queues.set_cluster_resource(self._total)

    # ------------------------------------------------------------------------------------------------
    # policies

    def _build_extensions(self, config: PartitionConfig) -> None:
        from quotaplane.policies.registry import PolicyContext, build_policy, registered_keys

        current = dict(self._policies.extensions)
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
                policy.set_cluster_resource(self._total)
                keep.append((key, built_order, policy))
        keep.sort(key=lambda e: (e[1], e[0]))
        self._policies = PolicySet(self._policies.queue, self._policies.ugm, [(k, p) for k, _, p in keep])

    def policies(self) -> list[Any]:
        """The admission policies in order (queue, user/group, then configured extensions)."""
        return list(self._policies.all)

    # ------------------------------------------------------------------------------------------------
    # journal

    def _record(self, events: Sequence[E.Event], *, recoverable: bool = False) -> None:
        """Append ``events`` durably (S1); take a snapshot every ``snapshot_every`` events.

        The change is already applied in memory. If the append fails, a caller that can roll the
        change back passes ``recoverable=True`` and does so; otherwise the partition refuses every
        further change (its memory is ahead of its journal) until it is restored from the journal.
        """
        if self.journal is None or self._replaying or not events:
            return
        payload = [ev.to_json() for ev in events]
        try:
            if self.holder is not None:
                seq = self.journal.append(self.stream, payload, holder=self.holder)
            else:
                seq = self.journal.append(self.stream, payload)
        except BaseException as exc:
            if not recoverable:
                self._poisoned = exc
            raise
        self._last_seq = seq
        self._wrote = True
        every = self.options.snapshot_every
        if every > 0 and seq - self._snapshot_seq >= every:
            try:
                self.take_snapshot()
            except Exception as exc:      # a snapshot is an optimisation: the event is already durable
                self.snapshot_error = exc

    def _usable(self) -> None:
        """Refuse changes after a journal failure left memory ahead of the journal."""
        if self._poisoned is not None:
            raise QuotaplaneError(f"partition {self.name!r} stopped taking changes after a journal "
                                  f"failure ({self._poisoned!r}); restore it from the journal")

    def take_snapshot(self) -> int:
        """Save a snapshot at the last journalled event; return its sequence number (0: no journal)."""
        with self.lock:
            if self.journal is None:
                return 0
            seq = self._last_seq
            rebuild = rebuild_events(self.config_seq, self._nodes, list(self._apps.values()),
                                     list(self._allocs.values()), self._pending.asks.all(),
                                     self._policies.extensions)
            state = {"dump": self.dump_state(), "rebuild": [ev.to_json() for ev in rebuild],
                     "config_seq": self.config_seq}
            self.journal.save_snapshot(self.stream, seq, state)
            self._snapshot_seq = seq
            self._wrote = False
            return seq

    @property
    def last_seq(self) -> int:
        """The sequence number of the last event this partition journalled or replayed."""
        return self._last_seq

    @property
    def snapshot_seq(self) -> int:
        """The sequence number of the last snapshot this partition saved or was restored from."""
        return self._snapshot_seq

    @property
    def needs_snapshot(self) -> bool:
        """True when this partition journalled events since its last snapshot and is healthy."""
        return self._wrote and self._last_seq > self._snapshot_seq and self._poisoned is None

    def restored_at(self, seq: int) -> None:
        """The partition was rebuilt from the snapshot at ``seq`` (the scheduler's restore)."""
        self._last_seq = seq
        self._snapshot_seq = seq

    def mark_snapshot(self, seq: int) -> None:
        """The journal's latest snapshot of this partition is at ``seq`` (after a full replay)."""
        self._snapshot_seq = seq

    # ------------------------------------------------------------------------------------------------
    # reading

    @contextmanager
    def read(self) -> Iterator[Partition]:
        """Hold the partition lock for a consistent multi-call read (REST)."""
        with self.lock:
            yield self

    def nodes(self) -> dict[str, Resource]:
        """Registered nodes and their capacities, by node id."""
        with self.lock:
            return dict(sorted(self._nodes.items()))

    def total_capacity(self) -> Resource:
        """The sum of node capacities (the root queue's max)."""
        return self._total

    def used_capacity(self) -> Resource:
        """The sum of all admitted allocations (the root queue's allocated)."""
        with self.lock:
            root = self.queues.queue("root")
            return Resource(root.allocated) if root is not None else _EMPTY

    def application(self, application_id: str) -> Application | None:
        """The application called ``application_id``, or None."""
        return self._apps.get(application_id)

    def applications(self) -> list[Application]:
        """Every application, in submission order."""
        with self.lock:
            return list(self._apps.values())

    def allocation(self, allocation_key: str) -> Allocation | None:
        """The allocation with ``allocation_key``, or None."""
        return self._allocs.get(allocation_key)

    def allocations(self) -> list[Allocation]:
        """Every allocation, in admission order."""
        with self.lock:
            return list(self._allocs.values())

    def users_usage(self) -> list[dict[str, Any]]:
        """``GET …/usage/users`` of this partition (under the lock)."""
        with self.lock:
            return self.ugm.users_usage()

    def groups_usage(self) -> list[dict[str, Any]]:
        """``GET …/usage/groups`` of this partition (under the lock)."""
        with self.lock:
            return self.ugm.groups_usage()

    def dao(self) -> dict[str, Any]:
        """``GET /ws/v1/partitions`` entry: name, state, totalNodes, capacity, applications by state."""
        with self.lock:
            states: dict[str, int] = {}
            for app in self._apps.values():
                states[app.state] = states.get(app.state, 0) + 1
            return {
                "name": self.name,
                "state": "Active",
                "totalNodes": len(self._nodes),
                "capacity": {"capacity": self._total.to_dict(),
                             "usedCapacity": self.used_capacity().to_dict()},
                "applications": {"total": len(self._apps), **dict(sorted(states.items()))},
            }

    def dump_state(self) -> dict[str, Any]:
        """The full state as deterministic plain data (sorted keys and lists); equal after replay."""
        with self.lock:
            state = {
                "name": self.name,
                "config_seq": self.config_seq,
                "nodes": {n: r.to_dict() for n, r in sorted(self._nodes.items())},
                "applications": {a: self._apps[a].dump() for a in sorted(self._apps)},
                "allocations": {k: self._allocs[k].to_dict() for k in sorted(self._allocs)},
                "queues": self.queues.dump_state(),
                "ugm": self.ugm.dump_state(),
                "policies": {key: p.dump_state() for key, p in sorted(self._policies.extensions)},
                "asks": self._pending.asks.dump(),
            }
            # normalise through JSON so tuples/lists and key order never differ between runs
            normal: dict[str, Any] = json.loads(json.dumps(state, sort_keys=True))
            return normal

    # ------------------------------------------------------------------------------------------------
    # nodes

    def add_node(self, node_id: str, capacity: Mapping[str, int] | Resource) -> None:
        """Register a node; the root queue's max grows by its capacity (seed 004); duplicate: Conflict."""
        check_id(node_id, "node id")
        ev = E.NodeAdded(node=node_id, capacity=as_resource(capacity, "capacity"))
        with self.lock:
            if node_id in self._nodes:
                raise ConflictError(f"node {node_id!r} already exists in partition {self.name!r}")
            self._usable()
            self._on_node_added(ev)
            try:
                self._record([ev], recoverable=True)
            except BaseException:
                self._on_node_removed(E.NodeRemoved(node=node_id))
                raise
            self._pending.freed()

    def remove_node(self, node_id: str) -> None:
        """Remove a node; the root queue's max shrinks. Unknown node: NotFoundError."""
        with self.lock:
            capacity = self._nodes.get(node_id)
            if capacity is None:
                raise NotFoundError(f"node {node_id!r} not found in partition {self.name!r}")
            self._usable()
            ev = E.NodeRemoved(node=node_id)
            self._on_node_removed(ev)
            try:
                self._record([ev], recoverable=True)
            except BaseException:
                self._on_node_added(E.NodeAdded(node=node_id, capacity=capacity))
                raise

    def _set_total(self) -> None:
        total: dict[str, int] = {}
        for cap in self._nodes.values():
            for k, v in cap.items():
                total[k] = total.get(k, 0) + v
        self._total = Resource.of(dict(sorted(total.items())))
        self.queues.set_cluster_resource(self._total)
        for p in self._policies.extension_policies:
            p.set_cluster_resource(self._total)

    def _on_node_added(self, ev: E.NodeAdded) -> None:
        self._nodes[ev.node] = ev.capacity
        self._set_total()

    def _on_node_removed(self, ev: E.NodeRemoved) -> None:
        del self._nodes[ev.node]
        self._set_total()

    # ------------------------------------------------------------------------------------------------
    # applications

    def can_submit(self, user: UserGroup, *, queue: str | None = None, tags: Mapping[str, str] | None = None,
                   application_id: str = "what-if") -> Decision:
        """Would ``add_application`` accept this submission? Changes nothing.

        ``Decision(True, queue=path)``, or ``Decision(False)`` with an ``acl.submit`` violation when the
        submit ACL refuses; a placement that finds no queue raises :class:`RejectedError` as
        ``add_application`` does.
        """
        if not isinstance(user, UserGroup):
            raise ValueError("user must be a UserGroup")
        with self.lock:
            return self._submission().can_submit(user, queue, tags or {}, application_id)

    def _submission(self) -> Submission:
        return Submission(self.queues, self.placement, has_rules=bool(self.config.placement_rules))

    def add_application(self, application_id: str, user: UserGroup, *, queue: str | None = None,
                        tags: Mapping[str, str] | None = None, gang_style: str = GANG_SOFT,
                        placeholder_timeout: float | None = None) -> str:
        """Place and add an application; return the full queue path (contract).

        Placement rules pick the queue (P-1 … P-8; with none, ``queue`` as given); a dynamic queue is
        created with its parent's child template (M-6) and namespace tags applied (N-2). The submit
        ACL is checked (RejectedError). A duplicate id is a ConflictError. The application is accepted
        even when a maxapplications limit is reached: counts are enforced at :meth:`allocate`.
        ``gang_style`` (``soft``/``hard``) and ``placeholder_timeout`` (seconds) drive gang timeouts.
        """
        check_id(application_id, "application id")
        if not isinstance(user, UserGroup):
            raise ValueError("user must be a UserGroup")
        if gang_style not in (GANG_SOFT, GANG_HARD):
            raise ValueError(f"gang_style must be 'soft' or 'hard', not {gang_style!r}")
        if queue is not None and not isinstance(queue, str):
            raise ValueError("queue must be a string")
        tag_map = {str(k): str(v) for k, v in (tags or {}).items()}
        timeout = (self.options.placeholder_timeout if placeholder_timeout is None
                   else float(placeholder_timeout))
        if timeout < 0:
            raise ValueError("placeholder_timeout must not be negative")
        with self.lock:
            if application_id in self._apps:
                raise ConflictError(f"application {application_id!r} already exists in partition "
                                    f"{self.name!r}")
            self._usable()
            path = self._submission().place(application_id, user, queue, tag_map)
            ev = E.AppAdded(app=application_id, user=user.user, groups=tuple(user.groups), queue=path,
                            tags=dict(sorted(tag_map.items())), t=self.clock(), gang_style=gang_style,
                            placeholder_timeout=timeout)
            self._on_app_added(ev)
            try:
                self._record([ev], recoverable=True)
            except BaseException:
                self._drop_app(self._apps[application_id])
                raise
            return path

    def _on_app_added(self, ev: E.AppAdded) -> None:
        if self.queues.queue(ev.queue) is None:
            self.queues.ensure_dynamic_queue(ev.queue)
        if ev.tags:
            self.queues.apply_namespace_tags(ev.queue, ev.tags)
        timeout = (self.options.placeholder_timeout if ev.placeholder_timeout is None
                   else ev.placeholder_timeout)
        app = Application(ev.app, UserGroup(ev.user, ev.groups), ev.queue, tags=ev.tags, submit_time=ev.t,
                          gang_style=ev.gang_style, placeholder_timeout=timeout, added_seq=self.config_seq)
        self._apps[app.application_id] = app
        self.queues.add_application(ev.queue, app.application_id)

    def _drop_app(self, app: Application) -> None:
        del self._apps[app.application_id]
        self._pending.asks.remove_application(app.application_id)      # no orphan asks (expiry)
        # the queue tree drops a draining or dynamic queue once it is empty
        self.queues.remove_application(app.queue_path, app.application_id)

    def remove_application(self, application_id: str) -> None:
        """Remove an application, releasing all its allocations; its running count ends (seed 001)."""
        with self.lock:
            if application_id not in self._apps:
                raise NotFoundError(f"application {application_id!r} not found in partition {self.name!r}")
            self._usable()
            ev = E.AppRemoved(app=application_id, t=self.clock())
            self._on_app_removed(ev)
            self._record([ev])
            self._pending.freed()

    def _on_app_removed(self, ev: E.AppRemoved) -> None:
        app = self._apps[ev.app]
        self._pending.asks.remove_application(app.application_id)
        for key in list(app.allocations):
            self._release_one(key, ev.t, terminal=True)
        if app.counted:
            self._leave(app)
        self._drop_app(app)

    # ------------------------------------------------------------------------------------------------
    # admission

    def _request(self, app: Application, key: str, resource: Resource, priority: int = 0,
                 preemptible: bool = True, first: bool = False) -> AdmissionRequest:
        return AdmissionRequest(app.application_id, key, app.queue_path, app.user, resource, priority,
                                preemptible, first, app.tags)

    def _active_app(self, application_id: str) -> Application:
        app = self._apps.get(application_id)
        if app is None:
            raise NotFoundError(f"application {application_id!r} not found in partition {self.name!r}")
        if app.state not in ACTIVE_STATES:
            raise ConflictError(f"application {application_id!r} is {app.state} and takes no allocations")
        if self.queues.queue(app.queue_path) is None:
            raise NotFoundError(f"queue {app.queue_path!r} of application {application_id!r} "
                                "no longer exists")
        return app

    def what_if(self, application_id: str, resource: Mapping[str, int] | Resource, *, priority: int = 0,
                preemptible: bool = True) -> Decision:
        """The decision :meth:`allocate` would give now, with every reason; changes nothing."""
        res = as_resource(resource)
        with self.lock:
            app = self._active_app(application_id)
            req = self._request(app, "", res, priority, preemptible, first=not app.counted)
            reasons = check_all(self._policies, req)
            return Decision(not reasons, reasons, queue=app.queue_path)

    def allocate(self, application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource, *,
                 priority: int = 0, preemptible: bool = True, placeholder: bool = False,
                 task_group: str | None = None) -> Decision:
        """Admit one allocation through every policy (Q2), journal it, then answer (S1).

        ``placeholder=True`` marks a gang placeholder (``task_group`` required). Unknown application:
        NotFoundError; existing ``allocation_key``: ConflictError (nothing counted twice).
        """
        spec = validate_spec(application_id, allocation_key, resource, priority, preemptible, placeholder,
                             task_group)
        return self.allocate_specs([spec])[0]

    def allocate_batch(self, items: Sequence[Mapping[str, Any]]) -> list[Decision]:
        """Admit several allocations in order, journalled in one transaction; a decision per entry.

        Each item has the keys of :meth:`allocate` (``application_id`` or ``applicationID``,
        ``allocation_key`` or ``allocationKey``, ``resource``, optional ``priority``, ``preemptible``,
        ``placeholder``, ``task_group``). An invalid item (unknown application, duplicate key, bad
        amounts) raises before anything changes.
        """
        specs: list[AllocationSpec] = []
        for item in items:
            if not isinstance(item, Mapping):
                raise ValueError("each batch entry must be a mapping")
            specs.append(validate_spec(
                item.get("application_id", item.get("applicationID")),
                item.get("allocation_key", item.get("allocationKey")), item.get("resource"),
                item.get("priority", 0), item.get("preemptible", True), item.get("placeholder", False),
                item.get("task_group", item.get("taskGroupName"))))
        return self.allocate_specs(specs)

    def allocate_specs(self, specs: Sequence[AllocationSpec]) -> list[Decision]:
        """Admit validated allocations in order, journalled in one transaction (the REST batch path).

        The server's request models check what :func:`~quotaplane.admission.validate_spec` checks (ids,
        int64 amounts, booleans), so the entries are not checked twice. An unknown application or a
        duplicate key raises before anything changes.
        """
        with self.lock:
            self._usable()
            seen: set[str] = set()
            active: set[str] = set()      # applications checked already (nothing changes until below)
            for spec in specs:
                if spec.application_id not in active:
                    self._active_app(spec.application_id)
                    active.add(spec.application_id)
                key = spec.allocation_key
                if key in self._allocs or key in seen:
                    raise ConflictError(f"allocation {key!r} already exists in partition {self.name!r}")
                seen.add(key)
            decisions: list[Decision] = []
            done: list[tuple[E.Allocated, AllocationUndo]] = []
            for spec in specs:
                decision, ev, undo = self._admit(spec)
                decisions.append(decision)
                if ev is not None and undo is not None:
                    done.append((ev, undo))
            try:
                self._record([ev for ev, _ in done], recoverable=True)
            except BaseException:
                for ev, undo in reversed(done):
                    self._undo_allocated(ev, undo)
                raise
            return decisions

    def _admit(self, spec: AllocationSpec) -> tuple[Decision, E.Allocated | None, AllocationUndo | None]:
        """Admit ``spec`` in memory (not yet journalled): the decision, its event and its undo."""
        app = self._active_app(spec.application_id)
        key = spec.allocation_key
        if key in self._allocs:
            raise ConflictError(f"allocation {key!r} already exists in partition {self.name!r}")
        req = self._request(app, key, spec.resource, spec.priority, spec.preemptible, first=not app.counted)
        before = (app.state, app.state_since, app.counted, app.anchor_seq, app.placeholder_since)
        refused, preempted = admit(self._policies, req)
        if refused:
            return Decision(False, refused, queue=app.queue_path, allocation_key=key), None, None
        undo = AllocationUndo(req, *before)
        ev = E.Allocated(app=spec.application_id, key=key, resource=spec.resource, priority=spec.priority,
                         preemptible=spec.preemptible, placeholder=spec.placeholder,
                         task_group=spec.task_group, t=self.clock(), preempted=tuple(k for _, k in preempted))
        self._after_allocated(app, ev, preempted)
        return (Decision(True, [], list(ev.preempted or ()), queue=app.queue_path, allocation_key=key), ev,
                undo)

    def _admit_ask(self, ask: Ask) -> tuple[Decision, E.Allocated | None, AllocationUndo | None]:
        return self._admit(AllocationSpec(ask.application_id, ask.allocation_key, ask.resource, ask.priority,
                                          ask.preemptible, ask.placeholder, ask.task_group))

    def _after_allocated(self, app: Application, ev: E.Allocated,
                         preempted: Sequence[Preempted] = ()) -> None:
        """Record an allocation whose policies are applied; lifecycle transitions (seed 001)."""
        # an allocation made for a pending ask ends the ask in the same event (queueing)
        self._pending.asks.remove(ev.key)
        alloc = Allocation(ev.key, app.application_id, ev.resource, priority=ev.priority,
                           preemptible=ev.preemptible, placeholder=ev.placeholder, task_group=ev.task_group,
                           time=ev.t)
        alloc.config_seq = self.config_seq
        if alloc.placeholder and not app.has_placeholders():
            app.placeholder_since = ev.t
        app.allocations[alloc.allocation_key] = alloc
        self._allocs[alloc.allocation_key] = alloc
        if not app.counted:
            # Running state entry (seed 001): the first allocation counts the application.
            app.counted = True
            app.anchor_seq = self.config_seq
            self._count_seq += 1
            app.count_order = self._count_seq
        app.move(ALLOCATED, ev.t)                   # New → Accepted → Starting in one step
        for policy, key in preempted:
            if key in self._allocs:
                self._release_one(key, ev.t, skip=policy)

    def _undo_allocated(self, ev: E.Allocated, undo: AllocationUndo) -> None:
        """Reverse an allocation that could not be journalled (the caller re-raises).

        Preemptions a policy made for it cannot be reversed; they are rare (quota forests only).
        """
        alloc = self._allocs.get(ev.key)
        if alloc is None:
            return
        app = self._apps[alloc.application_id]
        for policy in reversed(self._policies.all):
            policy.undo(undo.request)
        del self._allocs[ev.key]
        del app.allocations[ev.key]
        app.state, app.state_since, app.counted = undo.state, undo.state_since, undo.counted
        app.anchor_seq, app.placeholder_since = undo.anchor_seq, undo.placeholder_since

    def _on_allocated(self, ev: E.Allocated) -> None:
        """Replay: apply the recorded outcome without re-running the checks."""
        app = self._apps[ev.app]
        req = self._request(app, ev.key, ev.resource, ev.priority, ev.preemptible, first=not app.counted)
        refused, preempted = apply_all(self._policies, req)
        if refused:
            raise JournalReplayError(f"replay of allocation {ev.key!r} was refused: "
                                     f"{'; '.join(v.message for v in refused)}")
        self._after_allocated(app, ev, preempted)

    def _count_in(self, app: Application) -> None:
        """Enter the running count with no resources (rebuilding a soft-timed-out application)."""
        req = self._request(app, "", _EMPTY, first=True)
        for policy in self._policies.core:       # the running count lives in queue and user/group
            if policy.apply(req):
                raise JournalReplayError(f"replay could not count application {app.application_id!r} "
                                         "as running")
        app.counted = True
        self._count_seq += 1
        app.count_order = self._count_seq

    def _leave(self, app: Application) -> None:
        """Leave the running count with no allocation left (seed 001 running state exit)."""
        req = self._request(app, "", _EMPTY)
        for policy in reversed(self._policies.core):   # the running count lives in queue and user/group
            policy.release(req, last_allocation=True)
        app.counted = False

    # ------------------------------------------------------------------------------------------------
    # release

    def release(self, allocation_key: str) -> None:
        """Release an allocation; the last one moves the application to Completing (seed 001)."""
        self.release_batch([allocation_key])

    def release_batch(self, allocation_keys: Sequence[str]) -> None:
        """Release several allocations in one journal transaction; an unknown key raises first."""
        with self.lock:
            seen: set[str] = set()
            for key in allocation_keys:
                if key not in self._allocs or key in seen:
                    raise NotFoundError(f"allocation {key!r} not found in partition {self.name!r}")
                seen.add(key)
            self._usable()
            t = self.clock()
            evs = [E.Released(key=key, t=t) for key in allocation_keys]
            for ev in evs:
                self._release_one(ev.key, ev.t)
            self._record(evs)
            self._pending.freed()

    def _release_one(self, key: str, t: float, *, terminal: bool = False, keep_counted: bool = False,
                     skip: Any = None) -> None:
        alloc = self._allocs.pop(key)
        app = self._apps[alloc.application_id]
        del app.allocations[key]
        # with asks still pending the application keeps running (and counting)
        last = (app.counted and not app.allocations and not keep_counted
                and not self._pending.asks.has_application(app.application_id))
        req = self._request(app, key, alloc.resource, alloc.priority, alloc.preemptible)
        for policy in reversed(self._policies.all):
            if policy is not skip:
                policy.release(req, last_allocation=last)
        if last:
            app.counted = False
        if alloc.placeholder and not app.has_placeholders():
            app.placeholder_since = None
        if last and not terminal:
            app.move(LAST_RELEASED, t)              # running state exit (seed 001)

    # ------------------------------------------------------------------------------------------------
    # gang placeholders

    def replace_placeholder(self, placeholder_key: str, allocation_key: str,
                            resource: Mapping[str, int] | Resource) -> Decision:
        """Replace a gang placeholder by the real allocation (seed 001, YUNIKORN-982).

        The real allocation may differ in size (:mod:`quotaplane.gang`); a larger one is admitted only
        if the increase fits. It inherits the placeholder's application, priority, preemptibility and
        task group. A refusal changes nothing.
        """
        check_id(placeholder_key, "placeholder key")
        check_id(allocation_key, "allocation key")
        res = as_resource(resource)
        with self.lock:
            ph = self._allocs.get(placeholder_key)
            if ph is None:
                raise NotFoundError(f"allocation {placeholder_key!r} not found in partition {self.name!r}")
            if not ph.placeholder:
                raise ConflictError(f"allocation {placeholder_key!r} is not a placeholder")
            if allocation_key in self._allocs:
                raise ConflictError(f"allocation {allocation_key!r} already exists in partition "
                                    f"{self.name!r}")
            self._usable()
            app = self._active_app(ph.application_id)
            ev = E.Replaced(placeholder=placeholder_key, key=allocation_key, resource=res, t=self.clock())
            replacement = self._replacement(ev)
            refused = replacement.check()
            if refused:
                return Decision(False, refused, queue=app.queue_path, allocation_key=allocation_key)
            preempted = self._apply_replacement(ev, replacement)
            self._record([ev])
            return Decision(True, [], preempted, queue=app.queue_path, allocation_key=allocation_key)

    def _replacement(self, ev: E.Replaced) -> Replacement:
        ph = self._allocs[ev.placeholder]
        return Replacement(self._policies, self._request, self._apps[ph.application_id], ph, ev.key,
                           ev.resource)

    def _on_replaced(self, ev: E.Replaced) -> None:
        self._apply_replacement(ev, self._replacement(ev))

    def _apply_replacement(self, ev: E.Replaced, replacement: Replacement) -> list[str]:
        ph = self._allocs[ev.placeholder]
        app = self._apps[ph.application_id]
        preempted = replacement.apply()
        self._pending.asks.remove(ev.key)        # a pending ask replacing a placeholder ends
        real = Allocation(ev.key, app.application_id, ev.resource, priority=ph.priority,
                          preemptible=ph.preemptible, placeholder=False, task_group=ph.task_group, time=ev.t)
        # snapshot rebuild re-admits it under this config: the placeholder's when the replacement
        # asked for nothing more (its usage was admitted then, a later config may be tighter)
        grew = any(v > 0 for v in replacement.up.resource.values())
        real.config_seq = self.config_seq if grew else ph.config_seq
        # keep admission order: the real allocation takes the placeholder's place
        app.allocations = {(real.allocation_key if k == ph.allocation_key else k):
                           (real if k == ph.allocation_key else a) for k, a in app.allocations.items()}
        del self._allocs[ph.allocation_key]
        self._allocs[real.allocation_key] = real
        if not app.has_placeholders():
            app.placeholder_since = None
        app.move(ALLOCATED, ev.t)
        for policy, key in preempted:
            if key in self._allocs and key != real.allocation_key:
                self._release_one(key, ev.t, skip=policy)
        return [k for _, k in preempted]

    # ------------------------------------------------------------------------------------------------
    # timeouts

    def check_timeouts(self, now: float | None = None) -> list[str]:
        """Apply every timeout due at ``now`` (default: the clock); return what happened, in order.

        See :mod:`quotaplane.timeouts`: placeholders, Completing, Starting, Completed/Failed expiry,
        and the elastic reclaim tick.
        """
        with self.lock:
            self._usable()
            t = self.clock() if now is None else float(now)
            if not timeouts_due(self._apps.values(), t, self.options) and not self._policies.reclaiming():
                return []
            ev = E.Timeouts(t=t)
            out = self._on_timeouts(ev)
            self._record([ev])
            self._pending.freed()
            return out

    def _on_timeouts(self, ev: E.Timeouts) -> list[str]:
        actions = TimeoutActions(release=self._release_one, leave=self._leave, drop=self._drop_app,
                                 allocated=self._allocs.__contains__)
        return apply_timeouts(self._apps.values(), ev.t, self.options, actions, self._policies.reclaiming())

    # ------------------------------------------------------------------------------------------------
    # configuration

    def _on_config(self, ev: E.ConfigApplied) -> None:
        if self._config_source is None:
            raise JournalReplayError(f"partition {self.name!r} cannot resolve config #{ev.seq}")
        self.apply_config(self._config_source(ev.seq), ev.seq, t=ev.t)

    def validate_update(self, config: PartitionConfig) -> None:
        """Refuse (``ValueError``), before it is journalled, a config a policy's live state cannot take."""
        for policy in self._policies.all:
            policy.validate_update(config)

    def apply_config(self, config: PartitionConfig, seq: int, *, t: float | None = None) -> None:
        """Apply a validated partition config in one step (queues, limits, placement, extensions).

        Queues removed from the config drain while they still have applications (the queue tree
        keeps them as ``Draining``). Called by :meth:`Scheduler.update_config`, which journals it.
        Allocations a policy let go because of the new config (quota-tree consumers left with no
        node, seed 003 §7) are released everywhere now, at ``t`` (replay: the time journalled with
        the config marker by :meth:`record_config`), so no usage counts what a policy dropped.
        """
        with self.lock:
            self.config = config
            self.config_seq = seq
            self.queues.update_config(config)
            self.queues.set_cluster_resource(self._total)
            self.ugm.update_config(config)
            self.placement.update_rules(config.placement_rules)
            self._build_extensions(config)
            dropped = [(p, key) for p in self._policies.extension_policies for key in p.take_preempted()]
            self._config_t = None
            if dropped:
                when = self.clock() if t is None else t
                for policy, key in dropped:
                    if key in self._allocs:
                        self._release_one(key, when, skip=policy)
                self._config_t = when

    def record_config(self, seq: int, *, follower_ok: bool = False) -> None:
        """Journal that config ``seq`` (a sequence number of the scheduler stream) is now in force.

        ``follower_ok``: an instance that does not hold the lease (NotLeaderError) keeps the config
        in memory without the marker; the leader writes it, and replaying it again changes nothing.
        """
        with self.lock:
            try:
                marker = E.ConfigApplied(seq=seq, t=self._config_t)  # releases by apply_config happened then
                self._config_t = None
                self._record([marker], recoverable=follower_ok)
            except NotLeaderError:
                if not follower_ok:
                    raise
                return                    # a follower schedules nothing
            self._pending.freed()

    # ------------------------------------------------------------------------------------------------
    # pending asks (quotaplane.scheduling)

    @property
    def auto_schedule(self) -> bool:
        """Run a cycle right after anything that frees capacity or quota (and after :meth:`add_ask`)."""
        return self._pending.auto_schedule

    @auto_schedule.setter
    def auto_schedule(self, value: bool) -> None:
        self._pending.auto_schedule = value

    @property
    def schedule_error(self) -> Exception | None:
        """The error of the last automatic cycle that failed (None: none failed)."""
        return self._pending.schedule_error

    @schedule_error.setter
    def schedule_error(self, value: Exception | None) -> None:
        self._pending.schedule_error = value

    @property
    def schedule_needed(self) -> bool:
        """True when asks are pending and something changed since the last cycle."""
        return self._pending.schedule_needed

    def add_ask(self, application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource, *,
                priority: int = 0, preemptible: bool = True, placeholder: bool = False,
                task_group: str | None = None) -> Ask:
        """Queue a request: it counts towards no quota and is allocated by a later cycle once it fits.

        Unknown application: NotFoundError; a key already pending or allocated: ConflictError. With
        :attr:`auto_schedule` on, a cycle runs at once (so an ask that fits is allocated now).
        """
        spec = validate_spec(application_id, allocation_key, resource, priority, preemptible, placeholder,
                             task_group)
        asks = self._pending.asks
        with self.lock:
            self._usable()
            app = self._active_app(application_id)
            if allocation_key in self._allocs or allocation_key in asks:
                raise ConflictError(f"allocation {allocation_key!r} already exists in partition "
                                    f"{self.name!r}")
            ev = E.AskAdded(key=allocation_key, app=application_id, resource=spec.resource,
                            priority=spec.priority, preemptible=spec.preemptible, seq=asks.next_seq(),
                            t=self.clock(), placeholder=True if placeholder else None,
                            task_group=spec.task_group)
            prev_state, prev_since = app.state, app.state_since
            was_dirty = asks.dirty
            self._on_ask_added(ev)
            try:
                self._record([ev], recoverable=True)
            except BaseException:
                asks.remove(allocation_key)
                asks.dirty = was_dirty
                app.state, app.state_since = prev_state, prev_since
                raise
            ask = asks.get(allocation_key)
            assert ask is not None
            self._pending.after_add(ask, was_dirty)
            return ask

    def remove_ask(self, allocation_key: str) -> None:
        """Withdraw a pending ask. Unknown key: NotFoundError."""
        with self.lock:
            ask = self._pending.asks.get(allocation_key)
            if ask is None:
                raise NotFoundError(f"ask {allocation_key!r} not found in partition {self.name!r}")
            self._usable()
            app = self._apps.get(ask.application_id)
            counted = app is not None and app.counted
            ev = E.AskRemoved(key=allocation_key, t=self.clock())
            self._on_ask_removed(ev)
            self._record([ev])
            if counted and app is not None and not app.counted:
                self._pending.freed()   # the application left the running count: maxapplications freed

    def pending(self, application_id: str | None = None) -> list[Ask]:
        """The pending asks (of one application, or all), each with the reasons it waits.

        Reasons are those of the last attempt when nothing was journalled since; otherwise (or for
        an ask not yet tried) they are explained now with the same checks as :meth:`what_if`.
        """
        with self.lock:
            asks = self._pending.asks
            found = asks.of_application(application_id) if application_id is not None else asks.all()
            for ask in found:
                self._pending.reasons_of(ask)
            return found

    def get_ask(self, allocation_key: str) -> Ask | None:
        """The pending ask with ``allocation_key``, or None."""
        return self._pending.asks.get(allocation_key)

    def pending_reasons(self, allocation_key: str) -> list[Violation] | None:
        """Why the pending ask waits (None when no such ask is pending)."""
        with self.lock:
            ask = self._pending.asks.get(allocation_key)
            return None if ask is None else list(self._pending.reasons_of(ask))

    def schedule(self) -> list[Allocation]:
        """One scheduling cycle: allocate the pending asks that fit, in fair order; return the
        allocations made.

        Every allocation goes through the one admission path (all policies, nothing half applied).
        The cycle's allocations are journalled together, one transaction per
        :data:`~quotaplane.scheduling.runner.CYCLE_FLUSH_EVERY` and one at the end; if a write fails,
        that chunk's allocations are undone, their asks wait again, earlier chunks stand, and the
        error is raised. Subscribers hear of an allocation only once it is journalled.
        """
        with self.lock:
            if len(self._pending.asks):
                self._usable()
            made = self._pending.schedule()
            return [self._allocs[a.allocation_key] for a in made if a.allocation_key in self._allocs]

    def subscribe(self, callback: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every allocation a cycle makes for a pending ask.

        The event is ``{"type": "allocated", "partition", "applicationID", "allocationKey",
        "queueName", "resource"}`` (:class:`~quotaplane.events.AllocatedNotice`). Callbacks run under
        the partition lock and must be quick. Returns a function that unsubscribes.
        """
        with self.lock:
            self._pending.subscribe(callback)

        def unsubscribe() -> None:
            with self.lock:
                self._pending.unsubscribe(callback)
        return unsubscribe

    def subscriber_count(self) -> int:
        """How many subscribers are listening."""
        return len(self._pending.subscribers)

    def _over_queue_max(self, ask: Ask) -> bool:
        """M-2 alone: the ask would put a queue of its chain over its max (or the root over the
        cluster). The queue policy is always part of admission and never preempts, so this refusal
        is certain; checking it first spares the full check and its messages."""
        app = self._apps.get(ask.application_id)
        if app is None or ask.placeholder or ask.task_group is not None:
            return False                # (a task-group ask may replace a placeholder instead)
        return bool(self.queues.check_allocation(app.queue_path, ask.resource))

    def _explain_ask(self, ask: Ask) -> list[Violation]:
        app = self._apps.get(ask.application_id)
        if app is None or app.state not in ACTIVE_STATES or self.queues.queue(app.queue_path) is None:
            return []            # the application takes no allocations now: nothing to explain
        return list(self.what_if(ask.application_id, ask.resource, priority=ask.priority,
                                 preemptible=ask.preemptible).reasons)

    def _on_ask_added(self, ev: E.AskAdded) -> None:
        self._pending.asks.add(Ask.from_event(ev))
        # seed 001: a request moves the application to Accepted; a completing one back to Running
        # (YuniKorn RunApplication: it is not Completed away while the request waits)
        self._apps[ev.app].move(ASKED, ev.t)

    def _on_ask_removed(self, ev: E.AskRemoved) -> None:
        ask = self._pending.asks.remove(ev.key)
        if ask is None:
            return
        app = self._apps.get(ask.application_id)
        if app is None or app.allocations or self._pending.asks.has_application(app.application_id):
            return
        # the last ask of an application with no allocation went away
        if app.counted:
            self._leave(app)
            app.move(IDLE_COUNTED, ev.t)
        else:
            app.move(IDLE, ev.t)

    # ------------------------------------------------------------------------------------------------
    # replay

    def apply_event(self, event: Mapping[str, Any]) -> None:
        """Apply one journalled event (replay): the recorded outcome, through the live handlers."""
        try:
            typed = E.decode(event)
        except E.EventFormatError as exc:
            raise JournalReplayError(str(exc)) from None
        self._apply(typed)

    def _apply(self, ev: E.Event) -> None:
        match ev:
            case E.Allocated():
                self._on_allocated(ev)
            case E.Released():
                self._release_one(ev.key, ev.t)
            case E.AskAdded():
                self._on_ask_added(ev)
            case E.AskRemoved():
                self._on_ask_removed(ev)
            case E.AppAdded():
                self._on_app_added(ev)
            case E.AppRemoved():
                self._on_app_removed(ev)
            case E.NodeAdded():
                self._on_node_added(ev)
            case E.NodeRemoved():
                self._on_node_removed(ev)
            case E.Replaced():
                self._on_replaced(ev)
            case E.Timeouts():
                self._on_timeouts(ev)
            case E.ConfigApplied():
                self._on_config(ev)
            case E.CountIn():
                self._count_in(self._apps[ev.app])
            case E.AppRestore():
                self._on_app_restore(ev)
            case E.PolicyMemo():
                self._on_policy_memo(ev)
            case _:  # pragma: no cover - decode() knows every class
                raise JournalReplayError(f"no handler for event {ev!r}")

    def replay(self, events: Iterable[tuple[int, Mapping[str, Any]]]) -> int:
        """Apply ``(seq, event)`` pairs in order without journalling them; return how many."""
        n = 0
        with self.lock:
            self._replaying = True
            try:
                for seq, ev in events:
                    self.apply_event(ev)
                    self._last_seq = seq
                    n += 1
            finally:
                self._replaying = False
        return n

    def _on_policy_memo(self, ev: E.PolicyMemo) -> None:
        policy = self._policies.extension(ev.policy)
        if policy is None:
            raise JournalReplayError(f"no policy {ev.policy!r} to restore a snapshot memo into")
        policy.restore_memo(ev.memo)

    def _on_app_restore(self, ev: E.AppRestore) -> None:
        app = self._apps[ev.app]
        if ev.allocations is not None and set(ev.allocations) == set(app.allocations):
            app.allocations = {k: app.allocations[k] for k in ev.allocations}
        app.state = ev.state
        app.state_since = ev.state_since
        app.placeholder_since = ev.placeholder_since
        app.anchor_seq = ev.anchor_seq
        app.added_seq = ev.added_seq

    def __repr__(self) -> str:
        return f"Partition({self.name!r}, apps={len(self._apps)}, allocations={len(self._allocs)})"
