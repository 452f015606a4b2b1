"""A partition: nodes, queues, users and groups, applications, and the one admission path.

The partition composes the engines (product.md "Architecture"): the queue tree (seed 004), the user
group manager (seeds 000/001) and, when the partition config switches them on, the elastic and forest
policies (:mod:`quotaplane.policies.registry`), held by role in a
:class:`~quotaplane.admission.PolicySet`. Every change happens under :attr:`Partition.lock` and is a
typed event (:mod:`quotaplane.events`): the partition applies it, appends it to the journal, and only
then answers (rule S1). Replaying the events through the same handlers rebuilds the identical state
(:meth:`Partition.dump_state`).

Responsibilities live beside this module: admission in :mod:`quotaplane.admission`, the lifecycle
table in :mod:`quotaplane.application`, gang placeholder replacement in :mod:`quotaplane.state.gang`,
timeouts in :mod:`quotaplane.state.timeouts`, snapshot rebuilds in :mod:`quotaplane.state.rebuild`, and the
pending-ask scheduler in :mod:`quotaplane.scheduling` (composed, seen through a narrow host). The
application operations (:mod:`quotaplane.partition.apps`), the node operations
(:mod:`quotaplane.partition.nodes`), the waiting-ask operations (:mod:`quotaplane.partition.asks`),
the store side — journalling, recovery, snapshots, replay (:mod:`quotaplane.partition.recovery`) and
group commit (:mod:`quotaplane.partition.commits`) — and the notices
(:mod:`quotaplane.partition.subscriptions`) are mixed in from their own modules; this one keeps the
allocation path (allocate, release, placeholders, timeouts) and the configuration.
"""

from __future__ import annotations

import threading
import time as _time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import quotaplane.events as E
from quotaplane.admission import (
    AllocationSpec,
    AllocationUndo,
    admit,
    as_resource,
    check_all,
    check_id,
    validate_spec,
)
from quotaplane.application import Allocation, Application
from quotaplane.config.model import PartitionConfig
from quotaplane.errors import (
    ConflictError,
    JournalReplayError,
    NotFoundError,
    NotLeaderError,
)
from quotaplane.journal.base import Journal
from quotaplane.journal.log import PartitionLog
from quotaplane.notices import Notifier
from quotaplane.partition.apps import PartitionApps
from quotaplane.partition.asks import PartitionAsks
from quotaplane.partition.commits import PartitionCommits
from quotaplane.partition.nodes import PartitionNodes
from quotaplane.partition.recovery import PartitionStore
from quotaplane.partition.subscriptions import PartitionNotices
from quotaplane.placement import PlacementManager
from quotaplane.policy import Decision, QuotaPolicy
from quotaplane.queues import QueueTree
from quotaplane.resources import Resource
from quotaplane.scheduling.asks import Ask
from quotaplane.scheduling.preemption import Preemptor
from quotaplane.scheduling.runner import CycleHost, PendingAsks
from quotaplane.state.handlers import PartitionState
from quotaplane.state.timeouts import PartitionOptions, timeouts_due
from quotaplane.ugm import Manager

__all__ = ["Allocation", "Application", "JournalReplayError", "Partition", "PartitionOptions"]

_EMPTY = Resource()


class Partition(PartitionApps, PartitionNodes, PartitionAsks, PartitionStore, PartitionCommits,
                PartitionNotices):
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
        self.lock = threading.RLock()
        self.clock: Callable[[], float] = clock if clock is not None else _time.time
        self._s = PartitionState(config, config_seq=config_seq, clock=self.clock,
                                 options=options if options is not None else PartitionOptions(),
                                 config_source=config_source)
        self._log = PartitionLog(journal, stream if stream is not None else config.name, holder=holder,
                                 snapshot_every=self._s.options.snapshot_every,
                                 snapshot_state=self._snapshot_state)
        self._notifier = Notifier(self.name, self._queue_of, self.clock)
        self._log.on_recorded = self._notifier.recorded
        #: rebuilds this partition from the journal (set by the Scheduler; None: cannot recover)
        self.restorer: Callable[[], Partition | None] | None = None
        self._preemptor: Preemptor
        self._bind()

    def _bind(self) -> None:
        """Wire the preemptor and the pending asks' cycle host to the current state (at start, and
        after a recovery put a rebuilt state in place)."""
        state = self._s
        self._preemptor = Preemptor(state, clock=self.clock, admit=self._admit,
                                    record=lambda evs: self._record(evs))
        host = CycleHost(
            name=self.name, apps=state.apps, allocations=state.allocs, queue=state.queues.queue,
            admit=self._admit_ask, undo=state.undo_allocated, replace=self.replace_placeholder,
            preempt=lambda ask, refused, before: self._preemptor.preempt_ask(ask, refused, before),
            record=lambda evs: self._record(evs, recoverable=True), explain=state.explain_ask,
            over_queue_max=state.over_queue_max, surely_over=state.surely_over,
            last_seq=lambda: self._log.head,
            replaying=lambda: self._log.replaying, may_preempt=state.may_preempt,
            wait_keys=state.wait_keys, preempt_at=state.preempt_at, now=self.clock)
        pending = getattr(state, "pending", None)
        if pending is None:
            state.pending = PendingAsks(host)
        else:
            pending.host = host

    @property
    def config(self) -> PartitionConfig:
        """The partition config in force."""
        return self._s.config

    @property
    def config_seq(self) -> int:
        """The scheduler-stream sequence number of the config in force."""
        return self._s.config_seq

    @property
    def queues(self) -> QueueTree:
        """The queue tree (seed 004)."""
        return self._s.queues

    @property
    def ugm(self) -> Manager:
        """The user group manager (seeds 000, 001)."""
        return self._s.ugm

    @property
    def placement(self) -> PlacementManager:
        """The placement rules (seed 004)."""
        return self._s.placement

    @property
    def options(self) -> PartitionOptions:
        """Timeouts and the snapshot interval."""
        return self._s.options

    def policies(self) -> list[QuotaPolicy]:
        """The admission policies in order (queue, user/group, then configured extensions)."""
        return list(self._s.policies.all)

    @contextmanager
    def read(self) -> Iterator[Partition]:
        """Hold the partition lock for a consistent multi-call read (REST)."""
        with self.lock:
            yield self

    def nodes(self) -> dict[str, Resource]:
        """Registered nodes and their capacities, by node id."""
        with self.lock:
            return dict(sorted(self._s.nodes.items()))

    def total_capacity(self) -> Resource:
        """The sum of node capacities (the root queue's max)."""
        return self._s.total

    def used_capacity(self) -> Resource:
        """The sum of all admitted allocations (the root queue's allocated)."""
        with self.lock:
            root = self._s.queues.queue("root")
            return Resource(root.allocated) if root is not None else _EMPTY

    def application(self, application_id: str) -> Application | None:
        """The application called ``application_id``, or None."""
        return self._s.apps.get(application_id)

    def applications(self) -> list[Application]:
        """Every application, in submission order."""
        with self.lock:
            return list(self._s.apps.values())

    def allocation(self, allocation_key: str) -> Allocation | None:
        """The allocation with ``allocation_key``, or None."""
        return self._s.allocs.get(allocation_key)

    def allocations(self) -> list[Allocation]:
        """Every allocation, in admission order."""
        with self.lock:
            return list(self._s.allocs.values())

    def users_usage(self) -> list[dict[str, Any]]:
        """``GET …/usage/users`` of this partition (under the lock)."""
        with self.lock:
            return self._s.ugm.users_usage()

    def groups_usage(self) -> list[dict[str, Any]]:
        """``GET …/usage/groups`` of this partition (under the lock)."""
        with self.lock:
            return self._s.ugm.groups_usage()

    def dao(self) -> dict[str, Any]:
        """``GET /ws/v1/partitions`` entry: name, state, totalNodes, capacity, applications by state."""
        with self.lock:
            return self._s.dao()

    def dump_state(self) -> dict[str, Any]:
        """The full state as deterministic plain data (sorted keys and lists); equal after replay."""
        with self.lock:
            return self._s.dump()

    def what_if(self, application_id: str, resource: Mapping[str, int] | Resource, *, priority: int = 0,
                preemptible: bool = True) -> Decision:
        """The decision :meth:`allocate` would give now, with every reason; changes nothing.

        A request that :meth:`allocate` would admit by preempting others (E6) is answered allocated,
        with those allocation keys in ``preempted`` (REST ``wouldPreempt``).
        """
        res = as_resource(resource)
        with self.lock:
            app = self._active_app(application_id)
            req = self._s.request(app, "", res, priority, preemptible, first=not app.counted)
            reasons = check_all(self._s.policies, req)
            if reasons:
                # wouldPreempt: what allocate would preempt to admit it (E6), changing nothing
                plan = self._preemptor.plan(app, "", res, priority, preemptible, Decision(False, reasons),
                                            None, self.clock())
                if plan is not None:
                    return Decision(True, [], list(plan[0]), queue=app.queue_path)
            return Decision(not reasons, reasons, queue=app.queue_path)

    def allocate(self, application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource, *,
                 priority: int = 0, preemptible: bool = True, placeholder: bool = False,
                 task_group: str | None = None, node: str | None = None,
                 tags: Mapping[str, str] | None = None) -> Decision:
        """Admit one allocation through every policy (Q2), journal it, then answer (S1).

        ``placeholder=True`` marks a gang placeholder (``task_group`` required); ``node`` names the
        registered node it runs on, when known (quota is decided without it); ``tags`` are YuniKorn's
        ``allocationTags``, kept with it. Unknown application or node: NotFoundError; existing
        ``allocation_key``: ConflictError (nothing counted twice).
        """
        spec = validate_spec(application_id, allocation_key, resource, priority, preemptible, placeholder,
                             task_group, node, tags)
        with self.lock:              # allocate_specs for one entry, without the batch bookkeeping
            self._usable()
            self._s.pending.asks.cycle_freed = False
            decision, ev, undo = self._admit(spec)
            if ev is not None and undo is not None:
                try:
                    self._record([ev], recoverable=True)
                except BaseException:
                    self._s.undo_allocated(ev, undo)
                    raise
                self._after_direct()
            elif decision.reasons:
                decision = self._preemptor.preempt_for(spec, decision, None)
            return decision

    def _after_direct(self) -> None:
        """A direct allocation that let reserved quota go (the reserving ask itself was allocated, or an
        application start keeps a reserving one out): the asks it held back get their cycle now."""
        if self._s.pending.asks.cycle_freed:
            self._s.pending.asks.cycle_freed = False
            self._s.pending.freed()

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
                item.get("task_group", item.get("taskGroupName")), item.get("node", item.get("nodeID")),
                item.get("tags", item.get("allocationTags"))))
        return self.allocate_specs(specs)

    def allocate_specs(self, specs: Sequence[AllocationSpec]) -> list[Decision]:
        """Admit validated allocations in order, journalled in one transaction (the REST batch path).

        The server's request models check what :func:`~quotaplane.admission.validate_spec` checks (ids,
        int64 amounts, booleans), so the entries are not checked twice. An unknown application or a
        duplicate key raises before anything changes.
        """
        with self.lock:
            self._usable()
            self._check_batch(specs)
            decisions: list[Decision] = []
            done: list[tuple[E.Allocated, AllocationUndo]] = []

            def flush() -> None:
                try:
                    self._record([ev for ev, _ in done], recoverable=True)
                except BaseException:
                    for ev, undo in reversed(done):
                        self._s.undo_allocated(ev, undo)
                    raise
                done.clear()

            self._s.pending.asks.cycle_freed = False
            for spec in specs:
                decision, ev, undo = self._admit(spec)
                if ev is not None and undo is not None:
                    done.append((ev, undo))
                elif decision.reasons:
                    decision = self._preemptor.preempt_for(spec, decision, None, before=flush)
                decisions.append(decision)
            flush()
            self._after_direct()
            return decisions

    def _check_batch(self, specs: Sequence[AllocationSpec]) -> None:
        """Every application active and every key new, before anything changes."""
        seen: set[str] = set()
        active: set[str] = set()      # applications checked already
        for spec in specs:
            if spec.application_id not in active:
                self._active_app(spec.application_id)
                active.add(spec.application_id)
            key = spec.allocation_key
            if key in self._s.allocs or key in seen:
                raise ConflictError(f"allocation {key!r} already exists in partition {self.name!r}")
            seen.add(key)
            if spec.node is not None and spec.node not in self._s.nodes:
                raise NotFoundError(f"node {spec.node!r} not found in partition {self.name!r}")

    def _admit(self, spec: AllocationSpec) -> tuple[Decision, E.Allocated | None, AllocationUndo | None]:
        """Admit ``spec`` in memory (not yet journalled): the decision, its event and its undo."""
        app = self._active_app(spec.application_id)
        key = spec.allocation_key
        if key in self._s.allocs:
            raise ConflictError(f"allocation {key!r} already exists in partition {self.name!r}")
        if spec.node is not None and spec.node not in self._s.nodes:
            raise NotFoundError(f"node {spec.node!r} not found in partition {self.name!r}")
        t = self.clock()
        req = self._s.request(app, key, spec.resource, spec.priority, spec.preemptible, first=not app.counted,
                              t=t)
        before = (app.state, app.state_since, app.counted, app.anchor_seq, app.placeholder_since)
        mark = app.log_mark()
        refused, preempted = admit(self._s.policies, req)
        if refused:
            return Decision(False, refused, queue=app.queue_path, allocation_key=key), None, None
        undo = AllocationUndo(req, *before, self._s.pending.asks.get(key), mark)
        ev = E.Allocated(app=spec.application_id, key=key, resource=spec.resource, priority=spec.priority,
                         preemptible=spec.preemptible, placeholder=spec.placeholder,
                         task_group=spec.task_group, t=t,
                         preempted=tuple([k for _, k in preempted]) if preempted else (), node=spec.node,
                         tags=spec.tags)
        self._s.after_allocated(app, ev, preempted)
        return (Decision(True, [], list(ev.preempted or ()), queue=app.queue_path, allocation_key=key), ev,
                undo)

    def _admit_ask(self, ask: Ask) -> tuple[Decision, E.Allocated | None, AllocationUndo | None]:
        return self._admit(AllocationSpec(ask.application_id, ask.allocation_key, ask.resource, ask.priority,
                                          ask.preemptible, ask.placeholder, ask.task_group, tags=ask.tags))

    def release(self, allocation_key: str) -> None:
        """Release an allocation; the last one moves the application to Completing (seed 001)."""
        with self.lock:              # release_batch for one key
            self._usable()      # recover first: memory may be ahead of the journal
            if allocation_key not in self._s.allocs:
                raise NotFoundError(f"allocation {allocation_key!r} not found in partition {self.name!r}")
            ev = E.Released(key=allocation_key, t=self.clock(),
                            app=self._s.allocs[allocation_key].application_id)
            self._s.release_one(ev.key, ev.t)
            self._record([ev])
            self._s.pending.freed()

    def release_batch(self, allocation_keys: Sequence[str]) -> None:
        """Release several allocations in one journal transaction; an unknown key raises first."""
        with self.lock:
            self._usable()      # recover first: memory may be ahead of the journal
            seen: set[str] = set()
            for key in allocation_keys:
                if key not in self._s.allocs or key in seen:
                    raise NotFoundError(f"allocation {key!r} not found in partition {self.name!r}")
                seen.add(key)
            t = self.clock()
            allocs = self._s.allocs
            evs = [E.Released(key=key, t=t, app=allocs[key].application_id) for key in allocation_keys]
            for ev in evs:
                self._s.release_one(ev.key, ev.t)
            self._record(evs)
            self._s.pending.freed()

    def replace_placeholder(self, placeholder_key: str, allocation_key: str,
                            resource: Mapping[str, int] | Resource) -> Decision:
        """Replace a gang placeholder by the real allocation (seed 001, YUNIKORN-982).

        The real allocation may differ in size (:mod:`quotaplane.state.gang`); a larger one is admitted only
        if the increase fits. It inherits the placeholder's application, priority, preemptibility and
        task group. A refusal changes nothing.
        """
        check_id(placeholder_key, "placeholder key")
        check_id(allocation_key, "allocation key")
        res = as_resource(resource)
        with self.lock:
            self._usable()      # recover first: memory may be ahead of the journal
            ph = self._s.allocs.get(placeholder_key)
            if ph is None:
                raise NotFoundError(f"allocation {placeholder_key!r} not found in partition {self.name!r}")
            if not ph.placeholder:
                raise ConflictError(f"allocation {placeholder_key!r} is not a placeholder")
            if allocation_key in self._s.allocs:
                raise ConflictError(f"allocation {allocation_key!r} already exists in partition "
                                    f"{self.name!r}")
            app = self._active_app(ph.application_id)
            ev = E.Replaced(placeholder=placeholder_key, key=allocation_key, resource=res, t=self.clock())
            replacement = self._s.replacement(ev)
            refused = replacement.check()
            if refused:
                return Decision(False, refused, queue=app.queue_path, allocation_key=allocation_key)
            preempted = self._s.apply_replacement(ev, replacement)
            self._record([ev])
            return Decision(True, [], preempted, queue=app.queue_path, allocation_key=allocation_key)

    def check_timeouts(self, now: float | None = None) -> list[str]:
        """Apply every timeout due at ``now`` (default: the clock); return what happened, in order.

        See :mod:`quotaplane.state.timeouts`: placeholders, Completing, Starting, Completed/Failed expiry,
        and the elastic reclaim tick.
        """
        with self.lock:
            self._usable()
            t = self.clock() if now is None else float(now)
            state = self._s
            if state.preemption_due(t):
                state.pending.freed()          # asks whose preemption delay passed get a cycle (PR-Y3)
            quota_cuts = state.quota_preemption_tick(t)
            events: list[E.Event] = []
            out: list[str] = []
            if timeouts_due(state.apps.values(), t, state.options) or state.policies.reclaiming():
                ev = E.Timeouts(t=t)
                out = state.timeouts(ev)
                events.append(ev)
            for found in [*state.due_reclaims, *quota_cuts]:
                keys = tuple(k for k in found.keys if k in state.allocs)
                if state.hold_preempted:            # issue 31 #3: charged until released
                    held = state.hold(keys, found.reason.reason(), None, t)
                    out.extend(f"{k}: held for preemption by {found.reason.policy} ({found.reason.path})"
                               for k in held)
                    continue
                if not keys:
                    continue
                taken = E.Preempted(keys=keys, apps=tuple(state.allocs[k].application_id for k in keys),
                                    reason=found.reason.reason(), t=t)
                state.preempted(taken)
                events.append(taken)
                verb = "revoked" if found.reason.code == "elastic.revoked" else "preempted"
                out.extend(f"{k}: {verb} by {found.reason.policy} ({found.reason.path})" for k in keys)
            state.due_reclaims = []
            if not events and not state.notes:
                return []
            self._record(events)
            # the freed quota goes to the waiting asks now (E5: "B's asks are allocated"); a timeout
            # also moves applications between states, which no wake key tells
            self._s.pending.freed(full=bool(out))
            return out

    @property
    def hold_preempted(self) -> bool:
        """Preempted allocations stay charged until released (see :mod:`quotaplane.scheduling.preemption`);
        set by a front that removes victims itself (``quotaplane kube``)."""
        return self._s.hold_preempted

    @hold_preempted.setter
    def hold_preempted(self, value: bool) -> None:
        with self.lock:
            self._s.hold_preempted = bool(value)

    def preempting(self) -> dict[str, dict[str, Any]]:
        """Allocations preempted and held (not yet released): key → ``{reason, preemptor, t}``."""
        with self.lock:
            return {k: dict(v) for k, v in sorted(self._s.preempting.items())}

    def cancel_preemption(self, keys: Sequence[str]) -> None:
        """Give held preemptions up (their victims could not be removed): the allocations stay, and may be
        chosen again later."""
        with self.lock:
            for key in keys:
                self._s.preempting.pop(key, None)
            self._s.pending.freed(full=True)

    def validate_update(self, config: PartitionConfig) -> None:
        """Refuse (``ValueError``), before it is journalled, a config a policy's live state cannot take."""
        for policy in self._s.policies.all:
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
            self._s.apply_config(config, seq, t=t)

    def record_config(self, seq: int, *, follower_ok: bool = False) -> None:
        """Journal that config ``seq`` (a sequence number of the scheduler stream) is now in force.

        ``follower_ok``: an instance that does not hold the lease (NotLeaderError) keeps the config
        in memory without the marker; the leader writes it, and replaying it again changes nothing.
        """
        with self.lock:
            try:
                # t: the time releases made by apply_config happened
                marker = E.ConfigApplied(seq=seq, t=self._s.config_t)
                self._s.config_t = None
                self._record([marker], recoverable=follower_ok)
            except NotLeaderError:
                if not follower_ok:
                    raise
                return                    # a follower schedules nothing
            self._s.pending.freed(full=True)      # any limit, order or placement may have changed

    def standing(self, kind: str, name: str) -> dict[str, Any]:
        """Where queue, user, group or elastic quota ``name`` stands now (:mod:`quotaplane.state.standing`):
        guaranteed or min, max, used, waiting demand, borrowed and from whom, lent, the elastic runtime,
        running applications against their limits, the waiting asks with their reasons and position.
        ``kind``: ``queue``, ``user``, ``group`` or ``quota``. Unknown: NotFoundError."""
        from quotaplane.state.standing import standing

        with self.lock:
            out = standing(self._s, kind, name)
        if out is None:
            raise NotFoundError(f"{kind} {name!r} not found in partition {self.name!r}")
        return {"partition": self.name, **out}

    def __repr__(self) -> str:
        return f"Partition({self.name!r}, apps={len(self._s.apps)}, allocations={len(self._s.allocs)})"
