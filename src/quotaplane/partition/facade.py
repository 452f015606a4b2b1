"""A partition: nodes, queues, users and groups, applications, and the one write path.

The partition composes the engines (product.md "Architecture"): the queue tree (seed 004), the user
group manager (seeds 000/001) and, when the partition config switches them on, the elastic and forest
policies (:mod:`quotaplane.policies.registry`), held by role in a
:class:`~quotaplane.admission.PolicySet`. Its state (:mod:`quotaplane.state`) and its waiting-ask
scheduler (:mod:`quotaplane.scheduling`) sit side by side in its :class:`~quotaplane.partition.txn.Core`.

Every change is one transaction, ``with partition.write() as tx:`` (:mod:`quotaplane.partition.txn`):
it takes the lock, applies typed events (:mod:`quotaplane.events`) through the state's handlers,
journals them and only then answers (rule S1), takes back exactly what it applied when anything fails,
and runs the follow-up scheduling after the commit. Replaying the events through the same handlers
rebuilds the identical state (:meth:`Partition.dump_state`).

The public methods here are one-line delegations: the operations are functions of the transaction in
the modules beside this one — :mod:`~quotaplane.partition.allocations`,
:mod:`~quotaplane.partition.apps`, :mod:`~quotaplane.partition.nodes`,
:mod:`~quotaplane.partition.asks`, :mod:`~quotaplane.partition.config`,
:mod:`~quotaplane.partition.timers` — and the store side is :mod:`~quotaplane.partition.recovery`,
:mod:`~quotaplane.partition.commits` and :mod:`~quotaplane.partition.subscriptions`.
"""

from __future__ import annotations

import threading
import time as _time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import quotaplane.partition.allocations as allocations
import quotaplane.partition.apps as apps
import quotaplane.partition.asks as asks
import quotaplane.partition.commits as commits
import quotaplane.partition.config as configuring
import quotaplane.partition.nodes as nodes
import quotaplane.partition.recovery as recovery
import quotaplane.partition.subscriptions as subscriptions
import quotaplane.partition.timers as timers
import quotaplane.state.views as views
from quotaplane.admission import AllocationSpec, as_resource, check_id, check_labels, validate_spec
from quotaplane.application import GANG_SOFT, Allocation, Application
from quotaplane.config.identity import UserGroup
from quotaplane.config.model import PartitionConfig
from quotaplane.errors import InputError, JournalReplayError, NotFoundError
from quotaplane.flavors.catalog import FlavorRequest
from quotaplane.history.partition import PartitionHistory
from quotaplane.journal.base import Journal
from quotaplane.journal.group_commit import DEFAULT_MAX_EVENTS, Background, GroupCommit, Offload
from quotaplane.journal.log import PartitionLog
from quotaplane.notices import EventListener, Notifier, Subscriber
from quotaplane.partition.txn import Core, Txn, WriteHooks
from quotaplane.placement import PlacementManager
from quotaplane.policies.budgets import budget_standing
from quotaplane.policies.protocol import Decision, QuotaPolicy, Violation
from quotaplane.queues import QueueTree
from quotaplane.resources import Resource
from quotaplane.scheduling.asks import Ask
from quotaplane.scheduling.questions import reasons_of
from quotaplane.scheduling.runner import PendingAsks
from quotaplane.state.handlers import PartitionState
from quotaplane.state.restore_check import rebuilt_matches
from quotaplane.state.standing import standing
from quotaplane.state.timeouts import PartitionOptions
from quotaplane.ugm import Manager

__all__ = ["Allocation", "Application", "JournalReplayError", "Partition", "PartitionOptions"]

_EMPTY = Resource()


class Partition:
    """One partition of the scheduler (contract "Scheduler and partitions").

    All changes are serialised by :attr:`lock` (an ``RLock``) and made by :meth:`write`; reads that
    need a consistent view can hold the lock too (``with p.lock: …`` or :meth:`read`). ``clock`` is
    injectable (seconds, float) and drives placeholder and state timeouts (:meth:`check_timeouts`).
    """

    def __init__(self, config: PartitionConfig, *, journal: Journal | None = None, stream: str | None = None,
                 clock: Callable[[], float] | None = None, config_seq: int = 0,
                 config_source: Callable[[int], PartitionConfig] | None = None,
                 options: PartitionOptions | None = None, holder: str | None = None) -> None:
        self.name: str = config.name
        self.clock: Callable[[], float] = clock if clock is not None else _time.time
        state = PartitionState(config, config_seq=config_seq, clock=self.clock,
                               options=options if options is not None else PartitionOptions(),
                               config_source=config_source)
        log = PartitionLog(journal, stream if stream is not None else config.name, holder=holder,
                           snapshot_every=state.options.snapshot_every, snapshot_state=self._snapshot_state)
        notifier = Notifier(self.name, self._queue_of, self.clock)
        self._core = Core(self.name, state, log, self.clock, PendingAsks(), notifier)
        self._core.rebuild = self._rebuilt
        #: rebuilds this partition from the journal (set by the Scheduler; None: cannot recover)
        self.restorer: Callable[[], Partition | None] | None = None

    def _rebuilt(self) -> Core | None:
        fresh = self.restorer() if self.restorer is not None else None
        return fresh._core if fresh is not None else None

    def _queue_of(self, application_id: str) -> str:
        return subscriptions.queue_of(self._core, application_id)

    def _snapshot_state(self) -> Mapping[str, Any]:
        with self._core.lock:
            return views.snapshot(self._core.state)

    # -- the write path -----------------------------------------------------------------------------
    def write(self, *, check_store: bool = True) -> Txn:
        """One write of this partition, ``with partition.write() as tx:`` (:mod:`quotaplane.partition.txn`):
        the partition's operations take ``tx``; a step every write must take plugs into :attr:`hooks`."""
        return Txn(self._core, check_store=check_store)

    @property
    def state(self) -> PartitionState:
        """The state in force, for readers that work on a copy of it (the waiting-time forecast,
        :mod:`quotaplane.eta`): read it under :attr:`lock`, change it only through :meth:`write`."""
        return self._core.state

    @property
    def history(self) -> PartitionHistory:
        """The usage accounting of this partition (:mod:`quotaplane.history`, docs/history.md)."""
        return self._core.state.history

    @property
    def hooks(self) -> WriteHooks:
        """What plugs into every write: hooks before the commit, observers after it."""
        return self._core.hooks

    @property
    def lock(self) -> threading.RLock:
        """The partition lock (every write holds it; a read may, for a consistent view)."""
        return self._core.lock

    @contextmanager
    def read(self) -> Iterator[Partition]:
        """Hold the partition lock for a consistent multi-call read (REST)."""
        with self._core.lock:
            yield self

    # -- what it holds ------------------------------------------------------------------------------
    @property
    def config(self) -> PartitionConfig:
        """The partition config in force."""
        return self._core.state.config

    @property
    def config_seq(self) -> int:
        """The scheduler-stream sequence number of the config in force."""
        return self._core.state.config_seq

    @property
    def queues(self) -> QueueTree:
        """The queue tree (seed 004)."""
        return self._core.state.queues

    @property
    def ugm(self) -> Manager:
        """The user group manager (seeds 000, 001)."""
        return self._core.state.ugm

    @property
    def placement(self) -> PlacementManager:
        """The placement rules (seed 004)."""
        return self._core.state.placement

    @property
    def options(self) -> PartitionOptions:
        """Timeouts and the snapshot interval."""
        return self._core.state.options

    def policies(self) -> list[QuotaPolicy]:
        """The admission policies in order (queue, user/group, then configured extensions)."""
        return list(self._core.state.policies.all)

    def extensions(self) -> list[tuple[str, QuotaPolicy]]:
        """The policies the partition's configuration switched on, each with its key, in admission order
        (:mod:`quotaplane.policies.registry`)."""
        return list(self._core.state.policies.extensions)

    def nodes(self) -> dict[str, Resource]:
        """Registered nodes and their capacities, by node id. With resource flavors a node's capacity
        also counts each resource of the flavors its labels select under the flavored name
        (``nvidia.com/gpu@a100``, docs/flavors.md), as the cluster's total does."""
        with self._core.lock:
            state = self._core.state
            catalog = state.flavors
            if catalog is None:
                return dict(sorted(state.nodes.items()))
            labels = state.node_labels
            return {n: catalog.node_capacity(c, labels.get(n)) for n, c in sorted(state.nodes.items())}

    def node_schedulable(self, node_id: str) -> bool:
        """False for a registered node that takes no new allocations (cordoned); its capacity is not in
        the cluster's total. Unknown node: NotFoundError."""
        with self._core.lock:
            return self._core.state.node_index.schedulable(self._node(node_id))

    def node_allocations(self, node_id: str) -> list[Allocation]:
        """The allocations running on ``node_id``, in the order they were placed there."""
        with self._core.lock:
            state = self._core.state
            return [state.allocs[k] for k in state.node_index.on(self._node(node_id))]

    def _node(self, node_id: str) -> str:
        if node_id not in self._core.state.nodes:
            raise NotFoundError(f"node {node_id!r} not found in partition {self.name!r}")
        return node_id

    def total_capacity(self) -> Resource:
        """The sum of node capacities (the root queue's max)."""
        return self._core.state.total

    def used_capacity(self) -> Resource:
        """The sum of all admitted allocations (the root queue's allocated)."""
        with self._core.lock:
            root = self._core.state.queues.queue("root")
            return Resource(root.allocated) if root is not None else _EMPTY

    def application(self, application_id: str) -> Application | None:
        """The application called ``application_id``, or None."""
        return self._core.state.apps.get(application_id)

    def applications(self) -> list[Application]:
        """Every application, in submission order."""
        with self._core.lock:
            return list(self._core.state.apps.values())

    def allocation(self, allocation_key: str) -> Allocation | None:
        """The allocation with ``allocation_key``, or None."""
        return self._core.state.allocs.get(allocation_key)

    def allocations(self) -> list[Allocation]:
        """Every allocation, in admission order."""
        with self._core.lock:
            return list(self._core.state.allocs.values())

    def users_usage(self) -> list[dict[str, Any]]:
        """``GET …/usage/users`` of this partition (under the lock)."""
        with self._core.lock:
            return self._core.state.ugm.users_usage()

    def groups_usage(self) -> list[dict[str, Any]]:
        """``GET …/usage/groups`` of this partition (under the lock)."""
        with self._core.lock:
            return self._core.state.ugm.groups_usage()

    def dao(self) -> dict[str, Any]:
        """``GET /ws/v1/partitions`` entry: name, state, totalNodes, capacity, applications by state."""
        with self._core.lock:
            return views.dao(self._core.state)

    def dump_state(self) -> dict[str, Any]:
        """The full state as deterministic plain data (sorted keys and lists); equal after replay."""
        with self._core.lock:
            return views.dump(self._core.state)

    def matches_snapshot(self, snapshot: Mapping[str, Any]) -> bool:
        """True when this partition, rebuilt from ``snapshot``'s events, holds the state the snapshot
        holds (:func:`quotaplane.state.restore_check.rebuilt_matches`: ``dump_state()`` compared with it)."""
        with self._core.lock:
            return rebuilt_matches(self._core.state, snapshot)

    def standing(self, kind: str, name: str) -> dict[str, Any]:
        """Where queue, user, group or elastic quota ``name`` stands now (:mod:`quotaplane.state.standing`):
        guaranteed or min, max, used, waiting demand, borrowed and from whom, lent, the elastic runtime,
        running applications against their limits, the waiting asks with their reasons and position.
        ``kind``: ``queue``, ``user``, ``group`` or ``quota``. Unknown: NotFoundError."""
        with self._core.lock:
            out = standing(self._core.state, kind, name, self._core.log.head)
            fair = self._core.state.history.fair_share_of(kind, name) if out is not None else None
            kueue = self._core.state.queues.fair_sharing_of(name) if out is not None and kind == "queue" \
                else None
            if out is not None:         # what is left of its budgets (docs/budgets.md)
                out.update(budget_standing(self._core.state.policies.extension("budgets"), kind, name,
                                           self.clock()))
        if out is not None and fair is not None:
            out["fairShare"] = fair         # fair share with memory (docs/history.md)
        if out is not None and kueue is not None:
            out["fairSharing"] = kueue      # Kueue's fair sharing: the weighted share (docs/fair-sharing.md)
        if out is None:
            raise NotFoundError(f"{kind} {name!r} not found in partition {self.name!r}")
        return {"partition": self.name, **out}

    # -- applications -------------------------------------------------------------------------------
    def can_submit(self, user: UserGroup, *, queue: str | None = None, tags: Mapping[str, str] | None = None,
                   application_id: str = "what-if") -> Decision:
        """Would :meth:`add_application` accept this submission? Changes nothing.

        ``Decision(True, queue=path)``, or ``Decision(False)`` with an ``acl.submit`` violation when the
        submit ACL refuses; a placement that finds no queue raises :class:`RejectedError` as
        :meth:`add_application` does.
        """
        with self._core.lock:
            return apps.can_submit(self._core.state, user, queue, tags, application_id)

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
        tag_map, timeout = apps.check_submission(self.options, application_id, user, queue, tags, gang_style,
                                                 placeholder_timeout)
        with Txn(self._core) as tx:
            return apps.add_application(tx, application_id, user, queue, tag_map, gang_style, timeout)

    def remove_application(self, application_id: str) -> None:
        """Remove an application, releasing all its allocations; its running count ends (seed 001)."""
        with Txn(self._core) as tx:
            apps.remove_application(tx, application_id)

    # -- allocations --------------------------------------------------------------------------------
    def what_if(self, application_id: str, resource: Mapping[str, int] | Resource, *, priority: int = 0,
                preemptible: bool = True, node_selector: Mapping[str, str] | None = None,
                node_affinity: Sequence[Mapping[str, Any]] | None = None,
                tolerations: Sequence[Mapping[str, str]] | None = None,
                max_runtime: float | None = None) -> Decision:
        """The decision :meth:`allocate` would give now, with every reason; changes nothing.

        A request that :meth:`allocate` would admit by preempting others (E6) is answered allocated,
        with those allocation keys in ``preempted`` (REST ``wouldPreempt``); while the partition holds
        what it preempts (:attr:`hold_preempted`), not allocated, as :meth:`allocate` would answer. One
        counted per resource flavor names the flavors it would be charged under. ``max_runtime``: the
        declared runtime (seconds) the allocation would have — what a budget counts it to commit.
        """
        res = as_resource(resource)
        constraints = None
        if node_selector is not None or node_affinity is not None or tolerations is not None:
            constraints = FlavorRequest.parse(node_selector, node_affinity, tolerations) or None
        with self._core.lock:
            return allocations.what_if(self._core.state, self.clock(), application_id, res, priority,
                                       preemptible, constraints, max_runtime)

    def allocate(self, application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource, *,
                 priority: int = 0, preemptible: bool = True, placeholder: bool = False,
                 task_group: str | None = None, node: str | None = None,
                 tags: Mapping[str, str] | None = None, preempt: bool = True,
                 node_selector: Mapping[str, str] | None = None,
                 node_affinity: Sequence[Mapping[str, Any]] | None = None,
                 tolerations: Sequence[Mapping[str, str]] | None = None,
                 max_runtime: float | None = None) -> Decision:
        """Admit one allocation through every policy (Q2), journal it, then answer (S1).

        ``placeholder=True`` marks a gang placeholder (``task_group`` required); ``node`` names the
        registered node it runs on, when known (quota is decided without it); ``tags`` are YuniKorn's
        ``allocationTags``, kept with it; ``max_runtime`` is its declared runtime in seconds (what the
        waiting-time forecast takes as its end, docs/eta.md). ``node_selector``, ``node_affinity``
        (Kubernetes' ``nodeSelectorTerms``) and ``tolerations`` restrict the resource flavors it may be
        charged under (docs/flavors.md). Unknown application or node: NotFoundError; existing
        ``allocation_key``: ConflictError (nothing counted twice). ``preempt=False``: nothing is
        preempted for it (a running pod the Kubernetes front adopts again). While the partition holds
        what it preempts (:attr:`hold_preempted`), a request that needs preemption is refused with its
        held victims in ``preempted`` and waits for their room as a pending ask.
        """
        spec = validate_spec(application_id, allocation_key, resource, priority, preemptible, placeholder,
                             task_group, node, tags, node_selector, node_affinity, tolerations,
                             max_runtime)
        with Txn(self._core) as tx:
            return allocations.allocate(tx, spec, preempt=preempt)

    def allocate_batch(self, items: Sequence[Mapping[str, Any]]) -> list[Decision]:
        """Admit several allocations in order, journalled in one transaction; a decision per entry.

        Each item has the keys of :meth:`allocate` (``application_id`` or ``applicationID``,
        ``allocation_key`` or ``allocationKey``, ``resource``, optional ``priority``, ``preemptible``,
        ``placeholder``, ``task_group``, ``max_runtime`` or ``maxRuntime``). An invalid item (unknown
        application, duplicate key, bad amounts) raises before anything changes.
        """
        specs: list[AllocationSpec] = []
        for item in items:
            if not isinstance(item, Mapping):
                raise InputError("each batch entry must be a mapping")
            specs.append(validate_spec(
                item.get("application_id", item.get("applicationID")),
                item.get("allocation_key", item.get("allocationKey")), item.get("resource"),
                item.get("priority", 0), item.get("preemptible", True), item.get("placeholder", False),
                item.get("task_group", item.get("taskGroupName")), item.get("node", item.get("nodeID")),
                item.get("tags", item.get("allocationTags")),
                item.get("node_selector", item.get("nodeSelector")),
                item.get("node_affinity", item.get("nodeAffinity")), item.get("tolerations"),
                item.get("max_runtime", item.get("maxRuntime"))))
        return self.allocate_specs(specs)

    def allocate_specs(self, specs: Sequence[AllocationSpec]) -> list[Decision]:
        """Admit validated allocations in order, journalled in one transaction (the REST batch path).

        The server's request models check what :func:`~quotaplane.admission.validate_spec` checks (ids,
        int64 amounts, booleans), so the entries are not checked twice. An unknown application or a
        duplicate key raises before anything changes.
        """
        with Txn(self._core) as tx:
            return allocations.allocate_specs(tx, specs)

    def release(self, allocation_key: str) -> None:
        """Release an allocation; the last one moves the application to Completing (seed 001)."""
        with Txn(self._core) as tx:
            allocations.release(tx, allocation_key)

    def release_batch(self, allocation_keys: Sequence[str]) -> None:
        """Release several allocations in one journal transaction; an unknown key raises first."""
        with Txn(self._core) as tx:
            allocations.release_batch(tx, allocation_keys)

    def replace_placeholder(self, placeholder_key: str, allocation_key: str,
                            resource: Mapping[str, int] | Resource) -> Decision:
        """Replace a gang placeholder by the real allocation (seed 001, YUNIKORN-982).

        The real allocation may differ in size (:mod:`quotaplane.state.gang`); a larger one is admitted
        only if the increase fits. It inherits the placeholder's application, priority, preemptibility
        and task group. A refusal changes nothing.
        """
        check_id(placeholder_key, "placeholder key")
        check_id(allocation_key, "allocation key")
        res = as_resource(resource)
        with Txn(self._core) as tx:
            return tx.replace(placeholder_key, allocation_key, res)

    def check_timeouts(self, now: float | None = None) -> list[str]:
        """Apply every timeout due at ``now`` (default: the clock); return what happened, in order.

        See :mod:`quotaplane.partition.timers`: placeholders, Completing, Starting, Completed/Failed
        expiry, the elastic reclaim tick and quota preemption.
        """
        with Txn(self._core) as tx:
            return timers.check_timeouts(tx, self.clock() if now is None else float(now))

    # -- nodes --------------------------------------------------------------------------------------
    def add_node(self, node_id: str, capacity: Mapping[str, int] | Resource, *,
                 schedulable: bool = True, labels: Mapping[str, str] | None = None) -> None:
        """Register a node; the root queue's max grows by its capacity (seed 004); duplicate: Conflict.

        A node registered ``schedulable=False`` (cordoned) adds nothing to the cluster's capacity until
        :meth:`update_node` makes it schedulable. ``labels`` (label → value) select the resource flavors
        it counts for (docs/flavors.md "Nodes").
        """
        check_id(node_id, "node id")
        if not isinstance(schedulable, bool):
            raise InputError("schedulable must be a boolean")
        res = as_resource(capacity, "capacity")
        with Txn(self._core) as tx:
            nodes.add_node(tx, node_id, res, schedulable, check_labels(labels))

    def update_node(self, node_id: str, *, capacity: Mapping[str, int] | Resource | None = None,
                    schedulable: bool | None = None, labels: Mapping[str, str] | None = None) -> None:
        """Change a node's capacity, schedulability or labels (cordon: ``schedulable=False`` keeps the
        node and the allocations on it, and takes its capacity out of the cluster's total). Unknown node:
        NotFoundError; nothing to change: no event."""
        with Txn(self._core) as tx:
            if schedulable is not None and not isinstance(schedulable, bool):
                raise InputError("schedulable must be a boolean")
            nodes.update_node(tx, node_id, None if capacity is None else as_resource(capacity, "capacity"),
                              schedulable, check_labels(labels))

    def node_labels(self, node_id: str) -> dict[str, str]:
        """The labels a node was registered with ({} when none). Unknown node: NotFoundError."""
        with self._core.lock:
            state = self._core.state
            if node_id not in state.nodes:
                raise NotFoundError(f"node {node_id!r} not found in partition {state.name!r}")
            return dict(state.node_labels.get(node_id, {}))

    def node_flavors(self, node_id: str) -> list[str]:
        """The resource flavors a node counts for, in the partition's order ([] without flavors)."""
        with self._core.lock:
            state = self._core.state
            labels = state.node_labels.get(node_id)
            if node_id not in state.nodes:
                raise NotFoundError(f"node {node_id!r} not found in partition {state.name!r}")
            return [] if state.flavors is None else state.flavors.node_flavors(labels)

    def remove_node(self, node_id: str) -> None:
        """Remove a node; the root queue's max shrinks and every allocation on the node is released
        (YuniKorn's ``removeNode``), each told as a ``released`` notice. Unknown node: NotFoundError."""
        with Txn(self._core) as tx:
            nodes.remove_node(tx, node_id)

    def bind(self, allocation_key: str, node_id: str) -> None:
        """Allocation ``allocation_key`` runs on ``node_id`` (e.g. Kubernetes bound its pod). The node
        must be registered (it may be unschedulable: the pod already runs there). Binding to the node
        it already names changes nothing. Unknown allocation or node: NotFoundError."""
        check_id(node_id, "node id")
        with Txn(self._core) as tx:
            nodes.bind(tx, allocation_key, node_id)

    # -- waiting asks -------------------------------------------------------------------------------
    @property
    def auto_schedule(self) -> bool:
        """Run a cycle right after anything that frees capacity or quota (and after :meth:`add_ask`)."""
        return self._core.scheduler.auto_schedule

    @auto_schedule.setter
    def auto_schedule(self, value: bool) -> None:
        self._core.scheduler.auto_schedule = value

    @property
    def incremental(self) -> bool:
        """Automatic cycles retry only the asks a change could have unblocked (the default); False:
        every automatic cycle is a full one, as :meth:`schedule` (docs/queueing.md)."""
        return self._core.scheduler.incremental

    @incremental.setter
    def incremental(self, value: bool) -> None:
        self._core.scheduler.incremental = bool(value)

    @property
    def schedule_error(self) -> Exception | None:
        """The error of the last automatic cycle that failed (None: none failed)."""
        return self._core.scheduler.schedule_error

    @schedule_error.setter
    def schedule_error(self, value: Exception | None) -> None:
        self._core.scheduler.schedule_error = value

    @property
    def schedule_needed(self) -> bool:
        """True when asks are pending and something changed since the last cycle."""
        return self._core.state.waiting.schedule_needed

    def add_ask(self, application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource, *,
                priority: int = 0, preemptible: bool = True, placeholder: bool = False,
                task_group: str | None = None, tags: Mapping[str, str] | None = None,
                node_selector: Mapping[str, str] | None = None,
                node_affinity: Sequence[Mapping[str, Any]] | None = None,
                tolerations: Sequence[Mapping[str, str]] | None = None,
                max_runtime: float | None = None) -> Ask:
        """Queue a request: it counts towards no quota and is allocated by a later cycle once it fits.

        ``max_runtime``: the declared runtime in seconds its allocation will have (docs/eta.md).
        Unknown application: NotFoundError; a key already pending or allocated: ConflictError. With
        :attr:`auto_schedule` on, a cycle runs at once (so an ask that fits is allocated now).
        ``node_selector``, ``node_affinity`` and ``tolerations`` as for :meth:`allocate`.
        """
        spec = validate_spec(application_id, allocation_key, resource, priority, preemptible, placeholder,
                             task_group, tags=tags, node_selector=node_selector, node_affinity=node_affinity,
                             tolerations=tolerations, max_runtime=max_runtime)
        with Txn(self._core) as tx:
            return asks.add_ask(tx, spec)

    def remove_ask(self, allocation_key: str) -> None:
        """Withdraw a pending ask. Unknown key: NotFoundError."""
        with Txn(self._core) as tx:
            asks.remove_ask(tx, allocation_key)

    def pending(self, application_id: str | None = None) -> list[Ask]:
        """The pending asks (of one application, or all), each with the reasons it waits.

        Reasons are those of the last attempt when nothing was journalled since; otherwise (or for an
        ask not yet tried) they are explained now with the same checks as :meth:`what_if`.
        """
        with self._core.lock:
            state = self._core.state
            queue = state.waiting.asks
            found = queue.of_application(application_id) if application_id is not None else queue.all()
            at = self._core.log.head
            for ask in found:
                reasons_of(state, ask, at)
            return found

    def get_ask(self, allocation_key: str) -> Ask | None:
        """The pending ask with ``allocation_key``, or None."""
        return self._core.state.waiting.asks.get(allocation_key)

    def pending_reasons(self, allocation_key: str) -> list[Violation] | None:
        """Why the pending ask waits (None when no such ask is pending)."""
        with self._core.lock:
            ask = self._core.state.waiting.asks.get(allocation_key)
            return None if ask is None else list(reasons_of(self._core.state, ask, self._core.log.head))

    def schedule(self) -> list[Allocation]:
        """One scheduling cycle: allocate the pending asks that fit, in fair order; return the
        allocations made.

        Every allocation goes through the one admission path (all policies, nothing half applied).
        The cycle's allocations are journalled together, one transaction per
        :data:`~quotaplane.scheduling.runner.CYCLE_FLUSH_EVERY` and one at the end; if a write fails,
        that chunk's allocations are undone, their asks wait again, earlier chunks stand, and the
        error is raised. Subscribers hear of an allocation only once it is journalled.
        """
        with self.write(check_store=len(self._core.state.waiting.asks) > 0) as tx:
            return asks.schedule(tx)

    # -- held preemption (issue 31 #3) ----------------------------------------------------------------
    @property
    def hold_preempted(self) -> bool:
        """Preempted allocations stay charged until released (see :mod:`quotaplane.scheduling.preemption`);
        set by a front that removes victims itself (``quotaplane kube``)."""
        return self._core.state.hold_preempted

    @hold_preempted.setter
    def hold_preempted(self, value: bool) -> None:
        with self._core.lock:
            self._core.state.hold_preempted = bool(value)

    def preempting(self) -> dict[str, dict[str, Any]]:
        """Allocations preempted and held (not yet released): key → ``{reason, preemptor, t}``."""
        with self._core.lock:
            return {k: dict(v) for k, v in sorted(self._core.state.preempting.items())}

    def cancel_preemption(self, keys: Sequence[str]) -> None:
        """Give held preemptions up (their victims could not be removed): the allocations stay and are
        never chosen as victims again while they live (:meth:`spared`)."""
        with Txn(self._core) as tx:
            allocations.cancel_preemption(tx, keys)

    def hold(self, keys: Sequence[str], reason: Mapping[str, str]) -> list[str]:
        """Mark live allocations ``keys`` preempted and held for ``reason`` (``{policy, code, path,
        message}``) without a decision of the engine: a front that evicts rebuilds the preemptions it
        was carrying out from what the cluster shows, after a restart (held marks are not journalled
        state). Keys unknown or held already are skipped; the keys marked (a held ``preempted`` notice)."""
        why = {k: str(reason.get(k, "")) for k in ("policy", "code", "path", "message")}
        with Txn(self._core) as tx:
            held = tx.hold([k for k in keys if k in tx.state.allocs], why, None)
            tx.commit()         # the noted decision
            return held

    def spare(self, keys: Sequence[str]) -> None:
        """Never choose live allocations ``keys`` as victims again (their preemption was given up before
        a restart, :meth:`cancel_preemption`); unknown keys are skipped."""
        with self._core.lock:
            state = self._core.state
            state.spared.update(k for k in keys if k in state.allocs)

    def spared(self) -> list[str]:
        """The allocations whose held preemption was given up (never chosen as victims again)."""
        with self._core.lock:
            return sorted(self._core.state.spared)

    # -- configuration ------------------------------------------------------------------------------
    def validate_update(self, config: PartitionConfig) -> None:
        """Refuse (``ValueError``), before it is journalled, a config a policy's live state cannot take."""
        with self._core.lock:
            configuring.validate_update(self._core.state, config)

    def apply_config(self, config: PartitionConfig, seq: int, *, t: float | None = None) -> None:
        """Apply a validated partition config in one step (queues, limits, placement, extensions).

        Queues removed from the config drain while they still have applications (the queue tree
        keeps them as ``Draining``). Called by :meth:`Scheduler.update_config`, which journals it.
        Allocations a policy let go because of the new config (quota-tree consumers left with no
        node, seed 003 §7) are released everywhere now, at ``t`` (replay: the time journalled with
        the config marker by :meth:`record_config`), so no usage counts what a policy dropped.
        """
        with self.write(check_store=False) as tx:
            configuring.apply_config(tx, config, seq, t)

    def record_config(self, seq: int, *, follower_ok: bool = False) -> None:
        """Journal that config ``seq`` (a sequence number of the scheduler stream) is now in force.

        ``follower_ok``: an instance that does not hold the lease (NotLeaderError) keeps the config
        in memory without the marker; the leader writes it, and replaying it again changes nothing.
        """
        with self.write(check_store=False) as tx:
            configuring.record_config(tx, seq, follower_ok)

    # -- the store side -----------------------------------------------------------------------------
    @property
    def healthy(self) -> bool:
        """False while the store refuses writes (the last append failed) or memory may be ahead of the
        journal (a recovery is due); the healthcheck reports it."""
        log = self._core.log
        return log.poisoned is None and log.store_error is None

    @property
    def recovering(self) -> bool:
        """True while memory may be ahead of the journal (a failed append of a change that cannot be
        rolled back, and the store could not be read since): nothing should be served from it."""
        return self._core.log.poisoned is not None

    @property
    def store_error(self) -> BaseException | None:
        """The last journal append that failed (None once one succeeds), or the failure that stopped
        the partition while it waits for a recovery."""
        return self._core.log.poisoned or self._core.log.store_error

    def recover(self) -> bool:
        """Rebuild memory from the journal after a failure left it ahead (issue 14 #2); True when the
        partition is consistent with its journal (also when nothing was to be done). When the store
        cannot be read yet nothing changes and False is returned
        (:meth:`~quotaplane.partition.txn.Core.recover`)."""
        return self._core.recover()

    def take_snapshot(self) -> int:
        """Save a snapshot at the last journalled event; return its sequence number (0: no journal)."""
        with self._core.lock:
            return self._core.log.save_snapshot()

    @contextmanager
    def snapshots_held(self) -> Iterator[None]:
        """No periodic snapshot while the block runs; the one that fell due is taken after it.

        For a bulk start (the Kubernetes front's start-up sync decides every listed pod, three
        journalled changes each): a snapshot of the whole state every ``snapshot_every`` events of a
        growing state made that start quadratic — five snapshots were 46 % of the sync's CPU at 50,000
        pods (docs/scale.md, "The Kubernetes front"). A snapshot is an optimisation: the events are
        durable without it, and one at the end covers them all."""
        log = self._core.log
        every = log.snapshot_every
        log.snapshot_every = 0
        try:
            yield
        finally:
            log.snapshot_every = every
            if every > 0 and log.last_seq - log.snapshot_seq >= every:
                with self._core.lock:
                    try:
                        log.save_snapshot()
                    except Exception as exc:    # as an automatic snapshot: the events are durable
                        log.snapshot_error = exc

    @property
    def journal(self) -> Journal | None:
        """The journal this partition appends to (None: in memory)."""
        return self._core.log.journal

    @journal.setter
    def journal(self, journal: Journal | None) -> None:
        self._core.log.journal = journal

    @property
    def stream(self) -> str:
        """The partition's stream name in the journal."""
        return self._core.log.stream

    @property
    def holder(self) -> str | None:
        """The lease holder name this instance appends under, or None."""
        return self._core.log.holder

    @property
    def snapshot_error(self) -> Exception | None:
        """The last error of an automatic snapshot (the events are durable anyway)."""
        return self._core.log.snapshot_error

    @snapshot_error.setter
    def snapshot_error(self, error: Exception | None) -> None:
        self._core.log.snapshot_error = error

    @property
    def last_seq(self) -> int:
        """The sequence number of the last event this partition journalled or replayed."""
        return self._core.log.last_seq

    @property
    def snapshot_seq(self) -> int:
        """The sequence number of the last snapshot this partition saved or was restored from."""
        return self._core.log.snapshot_seq

    @property
    def needs_snapshot(self) -> bool:
        """True when this partition journalled events since its last snapshot and is healthy."""
        return self._core.log.needs_snapshot

    def restored_at(self, seq: int) -> None:
        """The partition was rebuilt from the snapshot at ``seq`` (the scheduler's restore)."""
        self._core.log.last_seq = seq
        self._core.log.snapshot_seq = seq

    def mark_snapshot(self, seq: int) -> None:
        """The journal's latest snapshot of this partition is at ``seq`` (after a full replay)."""
        self._core.log.snapshot_seq = seq

    def apply_event(self, event: Mapping[str, Any]) -> None:
        """Apply one journalled event (replay): the recorded outcome, through the live handlers."""
        with self._core.lock:
            recovery.apply_event(self._core.state, event)

    def replay(self, events: Iterable[tuple[int, Mapping[str, Any]]], *, account: bool = True,
               bulk: bool = False) -> int:
        """Apply ``(seq, event)`` pairs in order without journalling them; return how many
        (``account`` false: without the usage accounting; ``bulk``: a snapshot's rebuild; see
        :func:`recovery.replay`)."""
        return recovery.replay(self._core, events, account=account, bulk=bulk)

    @property
    def group(self) -> GroupCommit | None:
        """The group committer, or None: each change is journalled before its call returns."""
        return self._core.group

    def start_group_commit(self, *, schedule: Callable[[Callable[[], None]], object] | None = None,
                           owner: int | None = None, offload: Offload | None = None,
                           max_events: int = DEFAULT_MAX_EVENTS,
                           background: Background | None = None) -> GroupCommit | None:
        """Journal changes by group commit from now on (idempotent; None without a journal). Calls
        on the ``owner`` thread (a service's event loop) return once the change is decided and
        queued, and ``schedule`` (the loop's ``call_soon``) flushes them after the current burst in
        one transaction: the committer's marks say when a change is durable — answer nobody before
        (the service does). Calls from other threads return once durable, as before. ``offload``
        runs the owner's commits on a worker thread (a remote store: deciding goes on meanwhile);
        ``background`` writes automatic snapshots on a worker thread."""
        return commits.start_group_commit(self._core, schedule=schedule, owner=owner, offload=offload,
                                          max_events=max_events, background=background)

    def stop_group_commit(self) -> None:
        """Commit what is queued and go back to one append per change (idempotent)."""
        commits.stop_group_commit(self._core)

    def flush(self) -> None:
        """Commit every change made so far now; :class:`~quotaplane.journal.group_commit.CommitFailedError`
        if that failed (the changes were undone). Without group commit every change is durable when
        its call returns: nothing to do."""
        group = self._core.group
        if group is not None:
            group.wait()

    # -- subscriptions ------------------------------------------------------------------------------
    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(notice)`` for every change, once it is journalled (:mod:`quotaplane.notices`).

        A notice is ``{"type", "partition", "seq", …}``: ``allocated``, ``released``, ``preempted``,
        ``ask_added``, ``ask_removed``, ``application`` (state changes), ``application_removed``,
        ``config_applied``, ``node_added``, ``node_removed``; ``seq`` is the journal sequence number
        the change was written under. Callbacks run under the partition lock and must be quick; one
        that raises is unsubscribed. Returns a function that unsubscribes.
        """
        return subscriptions.subscribe(self._core, callback)

    def listen(self, listener: EventListener) -> Callable[[], None]:
        """Call ``listener(events, time)`` with the events of every change once it is journalled (the
        typed :mod:`quotaplane.events`; :func:`quotaplane.notices.notice_of` turns one into its notice).
        Cheaper than :meth:`subscribe` for a listener that keeps the events to look at later; it runs
        under the partition lock and must be quick. Returns a function that stops it."""
        return subscriptions.listen(self._core, listener)

    def subscriber_count(self) -> int:
        """How many subscribers are listening."""
        return len(self._core.notifier.subscribers)

    def notices_after(self, after: int) -> list[dict[str, Any]]:
        """The notices of the changes journalled after sequence number ``after`` (resuming a stream).

        Read back from the journal (also after a restart). ``ValueError`` when the journal no longer
        holds events from ``after`` on (compacted) or when this partition has no journal.
        """
        return subscriptions.resume_after(self._core, after)

    def __repr__(self) -> str:
        state = self._core.state
        return f"Partition({self.name!r}, apps={len(state.apps)}, allocations={len(state.allocs)})"

