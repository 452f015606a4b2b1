"""A partition: nodes, queues, users and groups, applications, and the one admission path.

The partition composes the engines (product.md "Architecture"): the queue tree (seed 004), the user
group manager (seeds 000/001) and, when the partition config switches them on, the elastic and forest
policies (:mod:`quotaplane.policies.registry`). Every change of the partition happens under
:attr:`Partition.lock` and is an **event**: the partition applies it, appends it to the journal, and
only then answers (decision S1). Replaying the events through the same code rebuilds the identical
state (:meth:`Partition.dump_state`).

Admission (decision Q2), :meth:`Partition.allocate`: build an :class:`~quotaplane.policy.AdmissionRequest`,
run ``check`` of every policy in order queue → user/group → elastic → forest and collect every
violation; if there is any, answer ``Decision(False, reasons=all)`` and change nothing. Otherwise apply
each policy in order, undoing the applied ones in reverse if one still refuses. :meth:`what_if` runs
the checks only.
"""

from __future__ import annotations

import json
import threading
import time as _time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from quotaplane.application import (
    ACCEPTED,
    ACTIVE_STATES,
    COMPLETED,
    COMPLETING,
    EXPIRED,
    FAILED,
    FAILING,
    GANG_HARD,
    GANG_SOFT,
    NEW,
    RESUMING,
    RUNNING,
    STARTING,
    Allocation,
    Application,
)
from quotaplane.config.identity import UserGroup
from quotaplane.config.model import PartitionConfig
from quotaplane.errors import ConflictError, NotFoundError, NotLeaderError, QuotaplaneError, RejectedError
from quotaplane.policy import AdmissionRequest, Decision, QuotaPolicy, Violation
from quotaplane.queueing import PendingAsksMixin
from quotaplane.resources import Resource

__all__ = ["Allocation", "Application", "JournalReplayError", "Partition"]

#: Default seconds before unreplaced placeholders time out (YuniKorn ``placeholderTimeoutInSeconds``).
DEFAULT_PLACEHOLDER_TIMEOUT = 900.0
#: Seconds an application stays Completing before it is Completed (YuniKorn ``completingTimeout``).
DEFAULT_COMPLETING_TIMEOUT = 30.0
#: Seconds an application stays Starting without a second allocation before it is Running.
DEFAULT_STARTING_TIMEOUT = 300.0
#: Seconds a Completed / Failed application is kept before it expires (YuniKorn: 3 days).
DEFAULT_TERMINATED_TIMEOUT = 3 * 86400.0
#: Take a snapshot of the partition after this many events (bounded restart time).
DEFAULT_SNAPSHOT_EVERY = 50_000

_EMPTY = Resource()


class JournalReplayError(QuotaplaneError):
    """Replaying a journalled event did not reproduce its recorded outcome."""


def _make_queue_tree(config: PartitionConfig) -> Any:
    from quotaplane.queues import QueueTree

    return QueueTree(config)


def _make_queue_policy(tree: Any) -> QuotaPolicy:
    from quotaplane.policies.queue import QueuePolicy

    policy: QuotaPolicy = QueuePolicy(tree)
    return policy


def _make_placement(config: PartitionConfig) -> Any:
    from quotaplane.placement import PlacementManager

    return PlacementManager(config.placement_rules)


def _as_resource(resource: Mapping[str, int] | Resource, what: str = "resource") -> Resource:
    if isinstance(resource, Resource):
        r = resource
    elif isinstance(resource, Mapping):
        r = Resource(resource)
    else:
        raise ValueError(f"{what} must be a mapping of resource name to integer, "
                         f"got {type(resource).__name__}")
    for name, amount in r.items():
        if amount < 0:
            raise ValueError(f"{what}: negative amount {amount} for {name!r}")
    return r


def _res_json(r: Mapping[str, int]) -> dict[str, int]:
    # key order is irrelevant: the journal writes canonical (sorted) JSON, dumps are normalised
    return dict(r._values) if isinstance(r, Resource) else {k: int(v) for k, v in r.items()}


def _check_id(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    return value


def _positive_part(a: Mapping[str, int], b: Mapping[str, int]) -> tuple[Resource, Resource]:
    """(max(a-b, 0), max(b-a, 0)) per name: the increase and the decrease from ``b`` to ``a``."""
    up: dict[str, int] = {}
    down: dict[str, int] = {}
    for k in sorted(set(a) | set(b)):
        d = a.get(k, 0) - b.get(k, 0)
        if d > 0:
            up[k] = d
        elif d < 0:
            down[k] = -d
    return Resource._wrap(up), Resource._wrap(down)


class Partition(PendingAsksMixin):
    """One partition of the scheduler (contract "Scheduler and partitions").

    All changes are serialised by :attr:`lock` (an ``RLock``); reads that need a consistent view can
    hold it too (``with p.lock: …`` or :meth:`read`). ``clock`` is injectable (seconds, float) and
    drives placeholder and state timeouts (:meth:`check_timeouts`).
    """

    def __init__(self, config: PartitionConfig, *, journal: Any | None = None, stream: str | None = None,
                 clock: Callable[[], float] | None = None, config_seq: int = 0,
                 config_source: Callable[[int], PartitionConfig] | None = None,
                 snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
                 placeholder_timeout: float = DEFAULT_PLACEHOLDER_TIMEOUT,
                 completing_timeout: float = DEFAULT_COMPLETING_TIMEOUT,
                 starting_timeout: float = DEFAULT_STARTING_TIMEOUT,
                 terminated_timeout: float = DEFAULT_TERMINATED_TIMEOUT,
                 holder: str | None = None) -> None:
        from quotaplane.policies.ugm import UgmPolicy
        from quotaplane.ugm import Manager

        self.name: str = config.name
        self.config: PartitionConfig = config
        self.config_seq = config_seq
        self.lock = threading.RLock()
        self.clock: Callable[[], float] = clock if clock is not None else _time.time
        self.journal = journal
        self.stream = stream if stream is not None else config.name
        self.holder = holder
        self.snapshot_every = snapshot_every
        self.placeholder_timeout = placeholder_timeout
        self.completing_timeout = completing_timeout
        self.starting_timeout = starting_timeout
        self.terminated_timeout = terminated_timeout
        self._config_source = config_source
        self.queues: Any = _make_queue_tree(config)
        self.ugm = Manager()
        self.ugm.update_config(config)
        self.placement: Any = _make_placement(config)
        self._queue_policy = _make_queue_policy(self.queues)
        self._ugm_policy = UgmPolicy(self.ugm)
        self._extensions: dict[str, tuple[int, QuotaPolicy]] = {}
        self._policies: list[QuotaPolicy] = []
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
        self._init_asks()
        self._build_extensions(config)
        self.queues.set_cluster_resource(self._total)

    # ------------------------------------------------------------------------------------------------
    # policies

    def _build_extensions(self, config: PartitionConfig) -> None:
        from quotaplane.policies.registry import PolicyContext, build_policy, registered_keys

        keep: dict[str, tuple[int, QuotaPolicy]] = {}
        for key, _order in registered_keys():
            if key not in config.extensions:
                continue
            existing = self._extensions.get(key)
            if existing is not None:
                upd = getattr(existing[1], "update_config", None)
                if upd is not None:
                    upd(config)
                keep[key] = existing
            else:
                policy, order = build_policy(key, config, PolicyContext(self.name, self.clock))
                setter = getattr(policy, "set_cluster_resource", None)
                if setter is not None:
                    setter(self._total)
                keep[key] = (order, policy)
        self._extensions = keep
        ext = sorted(keep.items(), key=lambda kv: (kv[1][0], kv[0]))
        self._policies = [self._queue_policy, self._ugm_policy, *(p for _, (_, p) in ext)]

    def policies(self) -> list[QuotaPolicy]:
        """The admission policies in order (queue, user/group, then configured extensions)."""
        return list(self._policies)

    # ------------------------------------------------------------------------------------------------
    # journal

    def _record(self, events: list[dict[str, Any]], *, recoverable: bool = False) -> None:
        """Append ``events`` durably (S1); take a snapshot every ``snapshot_every`` events.

        The change is already applied in memory. If the append fails, a caller that can roll the
        change back passes ``recoverable=True`` and does so; otherwise the partition refuses every
        further change (its memory is ahead of its journal) until it is restored from the journal.
        """
        if self.journal is None or self._replaying or not events:
            return
        try:
            if self.holder is not None:
                seq = self.journal.append(self.stream, events, holder=self.holder)
            else:
                seq = self.journal.append(self.stream, events)
        except BaseException as exc:
            if not recoverable:
                self._poisoned = exc
            raise
        self._last_seq = seq
        self._wrote = True
        if self.snapshot_every > 0 and seq - self._snapshot_seq >= self.snapshot_every:
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
            state = {"dump": self.dump_state(), "rebuild": self._rebuild_events(),
                     "config_seq": self.config_seq}
            self.journal.save_snapshot(self.stream, seq, state)
            self._snapshot_seq = seq
            self._wrote = False
            return seq

    @property
    def last_seq(self) -> int:
        """The sequence number of the last event this partition journalled or replayed."""
        return self._last_seq

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
            if root is not None:
                return Resource(root.allocated)
            total: dict[str, int] = {}
            for a in self._allocs.values():
                for k, v in a.resource.items():
                    total[k] = total.get(k, 0) + v
            return Resource(total)

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
            policies: dict[str, Any] = {}
            for key, (_, p) in sorted(self._extensions.items()):
                dump = getattr(p, "dump_state", None)
                policies[key] = dump() if dump is not None else None
            state = {
                "name": self.name,
                "config_seq": self.config_seq,
                "nodes": {n: _res_json(r) for n, r in sorted(self._nodes.items())},
                "applications": {a: self._apps[a].dump() for a in sorted(self._apps)},
                "allocations": {k: self._allocs[k].to_dict() for k in sorted(self._allocs)},
                "queues": self.queues.dump_state(),
                "ugm": self.ugm.dump_state(),
                "policies": policies,
                "asks": self._asks.dump(),
            }
            # normalise through JSON so tuples/lists and key order never differ between runs
            normal: dict[str, Any] = json.loads(json.dumps(state, sort_keys=True))
            return normal

    # ------------------------------------------------------------------------------------------------
    # nodes

    def add_node(self, node_id: str, capacity: Mapping[str, int] | Resource) -> None:
        """Register a node; the root queue's max grows by its capacity (seed 004); duplicate: Conflict."""
        _check_id(node_id, "node id")
        cap = _as_resource(capacity, "capacity")
        with self.lock:
            if node_id in self._nodes:
                raise ConflictError(f"node {node_id!r} already exists in partition {self.name!r}")
            self._usable()
            ev = {"type": "node_added", "node": node_id, "capacity": _res_json(cap)}
            self._ev_node_added(ev)
            try:
                self._record([ev], recoverable=True)
            except BaseException:
                self._ev_node_removed(ev)
                raise
            self._freed()

    def remove_node(self, node_id: str) -> None:
        """Remove a node; the root queue's max shrinks. Unknown node: NotFoundError."""
        with self.lock:
            if node_id not in self._nodes:
                raise NotFoundError(f"node {node_id!r} not found in partition {self.name!r}")
            self._usable()
            ev = {"type": "node_removed", "node": node_id}
            capacity = _res_json(self._nodes[node_id])
            self._ev_node_removed(ev)
            try:
                self._record([ev], recoverable=True)
            except BaseException:
                self._ev_node_added({"node": node_id, "capacity": capacity})
                raise

    def _set_total(self) -> None:
        total: dict[str, int] = {}
        for cap in self._nodes.values():
            for k, v in cap.items():
                total[k] = total.get(k, 0) + v
        self._total = Resource._wrap(dict(sorted(total.items())))
        self.queues.set_cluster_resource(self._total)
        for _, p in self._extensions.values():
            setter = getattr(p, "set_cluster_resource", None)
            if setter is not None:
                setter(self._total)

    def _ev_node_added(self, ev: Mapping[str, Any]) -> None:
        self._nodes[ev["node"]] = Resource(ev["capacity"])
        self._set_total()

    def _ev_node_removed(self, ev: Mapping[str, Any]) -> None:
        del self._nodes[ev["node"]]
        self._set_total()

    # ------------------------------------------------------------------------------------------------
    # applications

    def _explicit_acl_denied(self, queue: str | None, user: UserGroup) -> str | None:
        """The path of an explicitly requested, existing queue whose submit ACL refuses ``user``."""
        if not queue:
            return None
        path = queue.strip().lower()
        if path != "root" and not path.startswith("root."):
            path = "root." + path
        if self.queues.queue(path) is not None and not self.queues.check_submit_acl(path, user):
            return path
        return None

    def _place(self, application_id: str, user: UserGroup, queue: str | None,
               tags: Mapping[str, str]) -> str:
        denied = self._explicit_acl_denied(queue, user)
        if denied is not None and not self.config.placement_rules:
            raise RejectedError(f"application {application_id!r} rejected: user {user.user!r} may not "
                                f"submit to queue {denied!r} (submit ACL)")
        path: str = self.placement.place(application_id, user, tags, self.queues, requested_queue=queue)
        path = path.lower()
        q = self.queues.queue(path)
        if q is not None:
            if not q.is_leaf:
                raise RejectedError(f"application {application_id!r} rejected: queue {path!r} "
                                    "is not a leaf queue")
            if q.status == "Draining":
                raise RejectedError(f"application {application_id!r} rejected: queue {path!r} is draining")
        if not self._submit_allowed(path, user):
            raise RejectedError(f"application {application_id!r} rejected: user {user.user!r} may not "
                                f"submit to queue {path!r} (submit ACL)")
        return path

    def _submit_allowed(self, path: str, user: UserGroup) -> bool:
        # A queue that does not exist yet (to be created by placement) is covered by its first
        # existing ancestor's ACL (P-6).
        probe = path
        while self.queues.queue(probe) is None and "." in probe:
            probe = probe.rsplit(".", 1)[0]
        return bool(self.queues.check_submit_acl(probe, user))

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
            denied = self._explicit_acl_denied(queue, user)
            if denied is not None and not self.config.placement_rules:
                return Decision(False, [Violation("acl", "acl.submit", denied,
                                                  f"user {user.user!r} may not submit to queue {denied!r}")],
                                queue=denied)
            path: str = self.placement.place(application_id, user, dict(tags or {}), self.queues,
                                             requested_queue=queue).lower()
            if not self._submit_allowed(path, user):
                return Decision(False, [Violation("acl", "acl.submit", path,
                                                  f"user {user.user!r} may not submit to queue {path!r}")],
                                queue=path)
            return Decision(True, queue=path)

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
        _check_id(application_id, "application id")
        if not isinstance(user, UserGroup):
            raise ValueError("user must be a UserGroup")
        if gang_style not in (GANG_SOFT, GANG_HARD):
            raise ValueError(f"gang_style must be 'soft' or 'hard', not {gang_style!r}")
        if queue is not None and not isinstance(queue, str):
            raise ValueError("queue must be a string")
        tag_map = {str(k): str(v) for k, v in (tags or {}).items()}
        timeout = self.placeholder_timeout if placeholder_timeout is None else float(placeholder_timeout)
        if timeout < 0:
            raise ValueError("placeholder_timeout must not be negative")
        with self.lock:
            if application_id in self._apps:
                raise ConflictError(f"application {application_id!r} already exists in partition "
                                    f"{self.name!r}")
            self._usable()
            path = self._place(application_id, user, queue, tag_map)
            ev = {"type": "app_added", "app": application_id, "user": user.user, "groups": list(user.groups),
                  "queue": path, "tags": dict(sorted(tag_map.items())), "t": self.clock(),
                  "gang_style": gang_style, "placeholder_timeout": timeout}
            self._ev_app_added(ev)
            try:
                self._record([ev], recoverable=True)
            except BaseException:
                self._drop_app(self._apps[application_id])
                raise
            return path

    def _ev_app_added(self, ev: Mapping[str, Any]) -> None:
        path = ev["queue"]
        if self.queues.queue(path) is None:
            self.queues.ensure_dynamic_queue(path)
        if ev["tags"]:
            self.queues.apply_namespace_tags(path, ev["tags"])
        app = Application(ev["app"], UserGroup(ev["user"], ev["groups"]), path, tags=ev["tags"],
                          submit_time=ev["t"], gang_style=ev.get("gang_style", GANG_SOFT),
                          placeholder_timeout=ev.get("placeholder_timeout", self.placeholder_timeout),
                          added_seq=self.config_seq)
        self._apps[app.application_id] = app
        self.queues.add_application(path, app.application_id)

    def _drop_app(self, app: Application) -> None:
        del self._apps[app.application_id]
        self._asks.remove_application(app.application_id)      # queueing: no orphan asks (expiry)
        # the queue tree drops a draining or dynamic queue once it is empty
        self.queues.remove_application(app.queue_path, app.application_id)

    def remove_application(self, application_id: str) -> None:
        """Remove an application, releasing all its allocations; its running count ends (seed 001)."""
        with self.lock:
            if application_id not in self._apps:
                raise NotFoundError(f"application {application_id!r} not found in partition {self.name!r}")
            self._usable()
            ev = {"type": "app_removed", "app": application_id, "t": self.clock()}
            self._ev_app_removed(ev)
            self._record([ev])
            self._freed()

    def _ev_app_removed(self, ev: Mapping[str, Any]) -> None:
        app = self._apps[ev["app"]]
        self._asks.remove_application(app.application_id)
        for key in list(app.allocations):
            self._release_one(key, ev["t"], terminal=True)
        if app.counted:
            self._leave(app)
        self._drop_app(app)

    # ------------------------------------------------------------------------------------------------
    # admission

    def _request(self, app: Application, key: str, resource: Resource, priority: int = 0,
                 preemptible: bool = True, first: bool = False) -> AdmissionRequest:
        return AdmissionRequest(app.application_id, key, app.queue_path, app.user, resource, priority,
                                preemptible, first, app.tags)

    def _check(self, request: AdmissionRequest) -> list[Violation]:
        reasons: list[Violation] = []
        for policy in self._policies:
            reasons.extend(policy.check(request))
        return reasons

    def _apply_all(self, request: AdmissionRequest, admitted: QuotaPolicy | None = None
                   ) -> tuple[list[Violation], list[tuple[QuotaPolicy, str]]]:
        """Apply every policy in order; on a refusal undo the applied ones in reverse (Q2).

        ``admitted``: a policy that has already applied the request (checked and applied in one
        pass); it is skipped here but undone like the others on a refusal. Returns the refusal
        (empty on success) and the allocations preempted by a policy, each with the policy that
        preempted it (that policy has already let it go).
        """
        applied: list[QuotaPolicy] = []
        preempted: list[tuple[QuotaPolicy, str]] = []
        for policy in self._policies:
            if policy is admitted:
                applied.append(policy)
                continue
            refused = policy.apply(request)
            if refused:
                for done in reversed(applied):
                    done.undo(request)
                return refused, []
            applied.append(policy)
        for policy in self._policies:
            take = getattr(policy, "take_preempted", None)
            if take is not None:
                preempted.extend((policy, key) for key in take())
        return [], preempted

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
                preemptible: bool = True, placeholder: bool = False,
                task_group: str | None = None) -> Decision:
        """The decision :meth:`allocate` would give now, with every reason; changes nothing."""
        res = _as_resource(resource)
        with self.lock:
            app = self._active_app(application_id)
            req = self._request(app, "", res, priority, preemptible, first=not app.counted)
            reasons = self._check(req)
            return Decision(not reasons, reasons, queue=app.queue_path)

    def allocate(self, application_id: str, allocation_key: str, resource: Mapping[str, int] | Resource, *,
                 priority: int = 0, preemptible: bool = True, placeholder: bool = False,
                 task_group: str | None = None) -> Decision:
        """Admit one allocation through every policy (Q2), journal it, then answer (S1).

        ``placeholder=True`` marks a gang placeholder (``task_group`` required). Unknown application:
        NotFoundError; existing ``allocation_key``: ConflictError (nothing counted twice).
        """
        ev, res = self._validate_alloc(application_id, allocation_key, resource, priority, preemptible,
                                       placeholder, task_group)
        with self.lock:
            self._usable()
            decision, done, undo = self._allocate_locked(ev, res, own=True)
            if done is not None:
                try:
                    self._record([done], recoverable=True)
                except BaseException:
                    self._undo_allocated(done, undo)
                    raise
            return decision

    def allocate_batch(self, items: Sequence[Mapping[str, Any]]) -> list[Decision]:
        """Admit several allocations in order, journalled in one transaction; a decision per entry.

        Each item has the keys of :meth:`allocate` (``application_id`` or ``applicationID``,
        ``allocation_key`` or ``allocationKey``, ``resource``, optional ``priority``, ``preemptible``,
        ``placeholder``, ``task_group``). An invalid item (unknown application, duplicate key, bad
        amounts) raises before anything changes.
        """
        evs: list[tuple[dict[str, Any], Resource]] = []
        for item in items:
            if not isinstance(item, Mapping):
                raise ValueError("each batch entry must be a mapping")
            app_id = item.get("application_id", item.get("applicationID"))
            key = item.get("allocation_key", item.get("allocationKey"))
            evs.append(self._validate_alloc(app_id, key, item.get("resource"), item.get("priority", 0),
                                            item.get("preemptible", True), item.get("placeholder", False),
                                            item.get("task_group", item.get("taskGroupName"))))
        return self.allocate_validated_batch(evs)

    def allocate_validated_batch(self, evs: Sequence[tuple[dict[str, Any], Resource]]) -> list[Decision]:
        """:meth:`allocate_batch` for entries a caller has already validated (the REST batch path).

        Each entry is ``(event, resource)``: a fresh ``"allocated"`` event dict as
        :meth:`_validate_alloc` builds it (the partition adopts and completes it) and its amounts as
        a :class:`Resource`. The server's request models check the same things (ids, int64 amounts,
        booleans), so checking each entry twice was a fifth of a batch's cost.
        """
        with self.lock:
            self._usable()
            seen: set[str] = set()
            active: set[str] = set()      # applications checked already (nothing changes until below)
            allocs = self._allocs
            for ev, _ in evs:
                app_id = ev["app"]
                if app_id not in active:
                    self._active_app(app_id)
                    active.add(app_id)
                key = ev["key"]
                if key in allocs or key in seen:
                    raise ConflictError(f"allocation {key!r} already exists in partition {self.name!r}")
                seen.add(key)
            decisions: list[Decision] = []
            done_evs: list[dict[str, Any]] = []
            undos: list[tuple[Any, ...]] = []
            for ev, res in evs:
                decision, done, undo = self._allocate_locked(ev, res, own=True)
                decisions.append(decision)
                if done is not None:
                    done_evs.append(done)
                    undos.append(undo)
            try:
                self._record(done_evs, recoverable=True)
            except BaseException:
                for done, undo in zip(reversed(done_evs), reversed(undos), strict=True):
                    self._undo_allocated(done, undo)
                raise
            return decisions

    def _validate_alloc(self, application_id: Any, allocation_key: Any, resource: Any, priority: Any,
                        preemptible: Any, placeholder: Any, task_group: Any
                        ) -> tuple[dict[str, Any], Resource]:
        _check_id(application_id, "application id")
        _check_id(allocation_key, "allocation key")
        if resource is None:
            raise ValueError("resource is required")
        res = _as_resource(resource)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise ValueError("priority must be an integer")
        if not isinstance(preemptible, bool) or not isinstance(placeholder, bool):
            raise ValueError("preemptible and placeholder must be booleans")
        if placeholder and not task_group:
            raise ValueError("a placeholder allocation needs a task group")
        if task_group is not None and not isinstance(task_group, str):
            raise ValueError("task_group must be a string")
        return ({"type": "allocated", "app": application_id, "key": allocation_key,
                 "resource": _res_json(res), "priority": priority, "preemptible": preemptible,
                 "placeholder": placeholder,
                 "task_group": task_group or None}, res)

    def _allocate_locked(self, ev: dict[str, Any], res: Resource, *, own: bool = False
                         ) -> tuple[Decision, dict[str, Any] | None, tuple[Any, ...]]:
        # own: ``ev`` is a fresh dict of this call's caller, completed in place instead of copied
        app = self._active_app(ev["app"])
        key = ev["key"]
        if key in self._allocs:
            raise ConflictError(f"allocation {key!r} already exists in partition {self.name!r}")
        req = self._request(app, key, res, ev["priority"], ev["preemptible"], first=not app.counted)
        # Q2 with one walk of the user/group trackers instead of two: check every other policy
        # (pure checks), then let the user/group manager check and apply in one atomic step (U1:
        # a refusal changes nothing), then apply the others. Every check still runs before the
        # first change; a refusal lists every violation in policy order.
        policies = self._policies
        ugm = self._ugm_policy
        reasons = policies[0].check(req)
        for policy in policies[2:]:
            reasons.extend(policy.check(req))
        if reasons:
            reasons = self._check(req)
            return Decision(False, reasons, queue=app.queue_path, allocation_key=key), None, ()
        undo = (req, app.state, app.state_since, app.counted, app.anchor_seq, app.placeholder_since)
        if not ugm.admit(req):
            return (Decision(False, ugm.refusal(req), queue=app.queue_path, allocation_key=key), None,
                    ())
        if not own:
            ev = dict(ev)
        ev["t"] = self.clock()
        refused, preempted = self._apply_all(req, admitted=ugm)
        if refused:
            return Decision(False, refused, queue=app.queue_path, allocation_key=key), None, ()
        ev["preempted"] = [k for _, k in preempted]
        self._after_allocated(app, ev, preempted, res)
        return (Decision(True, [], list(ev["preempted"]), queue=app.queue_path, allocation_key=key), ev,
                undo)

    def _after_allocated(self, app: Application, ev: Mapping[str, Any],
                         preempted: Sequence[tuple[QuotaPolicy, str]] = (),
                         res: Resource | None = None) -> None:
        """Record an allocation whose policies are applied; lifecycle transitions (seed 001)."""
        t = ev["t"]
        # an allocation made for a pending ask ends the ask in the same event (queueing)
        self._asks.remove(ev["key"])
        if res is None:
            res = Resource(ev["resource"])
        alloc = Allocation(ev["key"], app.application_id, res, priority=ev["priority"],
                           preemptible=ev["preemptible"], placeholder=ev["placeholder"],
                           task_group=ev["task_group"], time=t)
        alloc.config_seq = self.config_seq
        if alloc.placeholder and not app.has_placeholders():
            app.placeholder_since = t
        app.allocations[alloc.allocation_key] = alloc
        self._allocs[alloc.allocation_key] = alloc
        if not app.counted:
            # Running state entry (seed 001): the first allocation counts the application.
            app.counted = True
            app.anchor_seq = self.config_seq
            self._count_seq += 1
            app.count_order = self._count_seq
        if app.state in (NEW, ACCEPTED):
            self._set_state(app, STARTING, t)           # New → Accepted → Starting in one step
        elif app.state in (STARTING, COMPLETING, RESUMING):
            self._set_state(app, RUNNING, t)
        for policy, key in preempted:
            if key in self._allocs:
                self._release_one(key, t, skip=policy)

    def _undo_allocated(self, ev: Mapping[str, Any], undo: tuple[Any, ...]) -> None:
        """Reverse an allocation that could not be journalled (the caller re-raises).

        Preemptions a policy made for it cannot be reversed; they are rare (quota forests only).
        """
        key = ev["key"]
        alloc = self._allocs.get(key)
        if alloc is None or not undo:
            return
        req, state, since, counted, anchor, ph_since = undo
        app = self._apps[alloc.application_id]
        for policy in reversed(self._policies):
            policy.undo(req)
        del self._allocs[key]
        del app.allocations[key]
        app.state, app.state_since, app.counted = state, since, counted
        app.anchor_seq, app.placeholder_since = anchor, ph_since

    def _set_state(self, app: Application, state: str, t: float) -> None:
        app.state = state
        app.state_since = t

    def _ev_allocated(self, ev: Mapping[str, Any]) -> None:
        """Replay: apply the recorded outcome without re-running the checks."""
        app = self._apps[ev["app"]]
        req = self._request(app, ev["key"], Resource(ev["resource"]), ev["priority"], ev["preemptible"],
                            first=not app.counted)
        refused, preempted = self._apply_all(req)
        if refused:
            raise JournalReplayError(f"replay of allocation {ev['key']!r} was refused: "
                                     f"{'; '.join(v.message for v in refused)}")
        self._after_allocated(app, ev, preempted)

    def _count_in(self, app: Application) -> None:
        """Enter the running count with no resources (rebuilding a soft-timed-out application)."""
        req = self._request(app, "", _EMPTY, first=True)
        refused: list[Violation] = []
        for policy in self._policies[:2]:       # the running count lives in queue and user/group
            refused = policy.apply(req)
            if refused:
                break
        if refused:
            raise JournalReplayError(f"replay could not count application {app.application_id!r} as running")
        app.counted = True
        self._count_seq += 1
        app.count_order = self._count_seq

    def _leave(self, app: Application) -> None:
        """Leave the running count with no allocation left (seed 001 running state exit)."""
        req = self._request(app, "", _EMPTY)
        for policy in reversed(self._policies[:2]):   # the running count lives in queue and user/group
            policy.release(req, last_allocation=True)
        app.counted = False

    # ------------------------------------------------------------------------------------------------
    # release

    def release(self, allocation_key: str) -> None:
        """Release an allocation; the last one moves the application to Completing (seed 001)."""
        with self.lock:
            if allocation_key not in self._allocs:
                raise NotFoundError(f"allocation {allocation_key!r} not found in partition {self.name!r}")
            self._usable()
            ev = {"type": "released", "key": allocation_key, "t": self.clock()}
            self._ev_released(ev)
            self._record([ev])
            self._freed()

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
            evs = [{"type": "released", "key": key, "t": t} for key in allocation_keys]
            for ev in evs:
                self._ev_released(ev)
            self._record(evs)
            self._freed()

    def _ev_released(self, ev: Mapping[str, Any]) -> None:
        self._release_one(ev["key"], ev["t"])

    def _release_one(self, key: str, t: float, *, terminal: bool = False, keep_counted: bool = False,
                     skip: QuotaPolicy | None = None) -> None:
        alloc = self._allocs.pop(key)
        app = self._apps[alloc.application_id]
        del app.allocations[key]
        # with asks still pending the application keeps running (and counting)
        last = (app.counted and not app.allocations and not keep_counted
                and not self._has_pending(app.application_id))
        req = self._request(app, key, alloc.resource, alloc.priority, alloc.preemptible)
        for policy in reversed(self._policies):
            if policy is not skip:
                policy.release(req, last_allocation=last)
        if last:
            app.counted = False
        if alloc.placeholder and not app.has_placeholders():
            app.placeholder_since = None
        if last and not terminal and app.state in (STARTING, RUNNING, RESUMING, ACCEPTED, NEW):
            self._set_state(app, COMPLETING, t)      # running state exit (seed 001)

    # ------------------------------------------------------------------------------------------------
    # gang placeholders

    def replace_placeholder(self, placeholder_key: str, allocation_key: str,
                            resource: Mapping[str, int] | Resource) -> Decision:
        """Replace a gang placeholder by the real allocation (seed 001, YUNIKORN-982).

        The real allocation may differ in size: queue and user/group usage move by the delta. A larger
        real allocation is admitted only if the increase fits (the same checks as :meth:`allocate`,
        for the increase only); a smaller one gives the difference back. Extension policies (elastic,
        forest), which track allocations one by one, see the placeholder released and the real
        allocation admitted. The real allocation inherits the placeholder's application, priority,
        preemptibility and task group. A refusal changes nothing.
        """
        _check_id(placeholder_key, "placeholder key")
        _check_id(allocation_key, "allocation key")
        res = _as_resource(resource)
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
            ev = {"type": "replaced", "placeholder": placeholder_key, "key": allocation_key,
                  "resource": _res_json(res), "t": self.clock()}
            refused, preempted = self._ev_replaced(ev, live=True)
            if refused:
                return Decision(False, refused, queue=app.queue_path, allocation_key=allocation_key)
            self._record([ev])
            return Decision(True, [], preempted, queue=app.queue_path, allocation_key=allocation_key)

    def _ev_replaced(self, ev: Mapping[str, Any], live: bool = False) -> tuple[list[Violation], list[str]]:
        ph = self._allocs[ev["placeholder"]]
        app = self._apps[ph.application_id]
        res = Resource(ev["resource"])
        up, down = _positive_part(res, ph.resource)
        core, ext = self._policies[:2], self._policies[2:]
        req_up = self._request(app, ev["key"], up, ph.priority, ph.preemptible)
        req_down = self._request(app, ph.allocation_key, down, ph.priority, ph.preemptible)
        req_ph = self._request(app, ph.allocation_key, ph.resource, ph.priority, ph.preemptible)
        req_real = self._request(app, ev["key"], res, ph.priority, ph.preemptible)
        reasons: list[Violation] = []
        if live:
            for policy in core:
                reasons.extend(policy.check(req_up))
            # A policy offering ``check_replacement`` checks the real allocation as if the placeholder
            # were released without changing anything (the forest: a release + re-apply would move the
            # placeholder to the end of its node's consumer list, decision F1, and the journal records
            # no refusal). The others see the placeholder released and, on refusal, applied again.
            # Engines are independent, so releasing the former only once admitted gives the same state
            # as the replay below.
            probes = [getattr(policy, "check_replacement", None) for policy in ext]
            for policy, probe in zip(reversed(ext), reversed(probes), strict=True):
                if probe is None:
                    policy.release(req_ph, last_allocation=False)
            for policy, probe in zip(ext, probes, strict=True):
                reasons.extend(policy.check(req_real) if probe is None else probe(req_ph, req_real))
            if reasons:
                for policy, probe in zip(ext, probes, strict=True):
                    if probe is None:       # the placeholder back: the state before its release
                        policy.apply(req_ph)
                return reasons, []
            for policy, probe in zip(reversed(ext), reversed(probes), strict=True):
                if probe is not None:
                    policy.release(req_ph, last_allocation=False)
        else:
            for policy in reversed(ext):
                policy.release(req_ph, last_allocation=False)
        # Checked under the lock: the applies below cannot refuse unless an engine misbehaves.
        for policy in core:
            if policy.apply(req_up):
                raise JournalReplayError(f"{policy.name} refused placeholder replacement {ev['key']!r} "
                                         "after its check passed")
        for policy in reversed(core):
            policy.release(req_down, last_allocation=False)
        preempted: list[tuple[QuotaPolicy, str]] = []
        for policy in ext:
            if policy.apply(req_real):
                raise JournalReplayError(f"{policy.name} refused placeholder replacement {ev['key']!r} "
                                         "after its check passed")
            take = getattr(policy, "take_preempted", None)
            if take is not None:
                preempted.extend((policy, key) for key in take())
        self._asks.remove(ev["key"])        # queueing: a pending ask replacing a placeholder ends
        real = Allocation(ev["key"], app.application_id, res, priority=ph.priority,
                          preemptible=ph.preemptible, placeholder=False, task_group=ph.task_group,
                          time=ev["t"])
        # snapshot rebuild re-admits it under this config: the placeholder's when the replacement
        # asked for nothing more (its usage was admitted then, a later config may be tighter)
        real.config_seq = self.config_seq if any(v > 0 for v in up.values()) else ph.config_seq
        # keep admission order: the real allocation takes the placeholder's place
        app.allocations = {(real.allocation_key if k == ph.allocation_key else k):
                           (real if k == ph.allocation_key else a) for k, a in app.allocations.items()}
        del self._allocs[ph.allocation_key]
        self._allocs[real.allocation_key] = real
        if not app.has_placeholders():
            app.placeholder_since = None
        if app.state in (STARTING, RESUMING, COMPLETING):
            self._set_state(app, RUNNING, ev["t"])
        for policy, key in preempted:
            if key in self._allocs and key != real.allocation_key:
                self._release_one(key, ev["t"], skip=policy)
        return [], [k for _, k in preempted]

    # ------------------------------------------------------------------------------------------------
    # timeouts

    def check_timeouts(self, now: float | None = None) -> list[str]:
        """Apply every timeout due at ``now`` (default: the clock); return what happened, in order.

        - placeholders unreplaced for ``placeholder_timeout``: released; with real allocations the
          application continues; without, style ``soft`` → Resuming (still counted), style ``hard``
          → Failing → Failed (running count ends) (seed 001 gang cases);
        - Completing for ``completing_timeout`` → Completed; Starting for ``starting_timeout`` → Running;
        - Completed / Failed for ``terminated_timeout`` → Expired and removed.
        """
        with self.lock:
            self._usable()
            t = self.clock() if now is None else float(now)
            if not self._timeouts_due(t) and not self._revokers():
                return []
            ev = {"type": "timeouts", "t": t}
            out = self._ev_timeouts(ev)
            self._record([ev])
            self._freed()
            return out

    def _timeouts_due(self, t: float) -> bool:
        for app in self._apps.values():
            if app.placeholder_since is not None and t - app.placeholder_since >= app.placeholder_timeout:
                return True
            if app.state == COMPLETING and t - app.state_since >= self.completing_timeout:
                return True
            if app.state == STARTING and t - app.state_since >= self.starting_timeout:
                return True
            if app.state in (COMPLETED, FAILED) and t - app.state_since >= self.terminated_timeout:
                return True
        return False

    def _ev_timeouts(self, ev: Mapping[str, Any]) -> list[str]:
        t = ev["t"]
        out: list[str] = []
        expired: list[Application] = []
        for app in list(self._apps.values()):
            aid = app.application_id
            if app.placeholder_since is not None and t - app.placeholder_since >= app.placeholder_timeout:
                phs = [k for k, a in app.allocations.items() if a.placeholder]
                real = app.has_real_allocations()
                hard = not real and app.gang_style == GANG_HARD
                if hard:
                    self._set_state(app, FAILING, t)
                for k in phs:
                    self._release_one(k, t, terminal=True, keep_counted=not hard)
                out.append(f"{aid}: {len(phs)} placeholder(s) timed out")
                if hard:
                    if app.counted:
                        self._leave(app)
                    self._set_state(app, FAILED, t)
                    out.append(f"{aid}: Failed (gang style hard)")
                elif not real:
                    self._set_state(app, RESUMING, t)
                    out.append(f"{aid}: Resuming (gang style soft)")
                continue
            if app.state == COMPLETING and t - app.state_since >= self.completing_timeout:
                self._set_state(app, COMPLETED, t)
                out.append(f"{aid}: Completed")
            elif app.state == STARTING and t - app.state_since >= self.starting_timeout:
                self._set_state(app, RUNNING, t)
                out.append(f"{aid}: Running")
            elif app.state in (COMPLETED, FAILED) and t - app.state_since >= self.terminated_timeout:
                expired.append(app)
        for app in expired:
            app.state = EXPIRED
            self._drop_app(app)
            out.append(f"{app.application_id}: Expired")
        # Reclaim (elastic quota, E5): a policy names allocations to evict; they are released through
        # every policy. The over-use clock lives in the policy, so every tick is an event.
        for policy in self._revokers():
            for key in policy.revoke(t):
                if key in self._allocs:
                    self._release_one(key, t)
                    out.append(f"{key}: revoked by {policy.name}")
        return out

    def _revokers(self) -> list[Any]:
        return [p for _, (_, p) in sorted(self._extensions.items(), key=lambda kv: (kv[1][0], kv[0]))
                if getattr(p, "revoke", None) is not None]

    # ------------------------------------------------------------------------------------------------
    # configuration

    def _ev_config(self, ev: Mapping[str, Any]) -> None:
        seq = int(ev["seq"])
        if self._config_source is None:
            raise JournalReplayError(f"partition {self.name!r} cannot resolve config #{seq}")
        t = ev.get("t")
        self.apply_config(self._config_source(seq), seq, t=None if t is None else float(t))

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
            dropped: list[tuple[QuotaPolicy, str]] = []
            for policy in self._policies[2:]:
                take = getattr(policy, "take_preempted", None)
                if take is not None:
                    dropped.extend((policy, key) for key in take())
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
                marker: dict[str, Any] = {"type": "config", "seq": seq}
                if self._config_t is not None:      # releases made by apply_config happened then
                    marker["t"] = self._config_t
                self._config_t = None
                self._record([marker], recoverable=follower_ok)
            except NotLeaderError:
                if not follower_ok:
                    raise
                return                    # a follower schedules nothing
            self._freed()

    # ------------------------------------------------------------------------------------------------
    # replay

    _HANDLERS: ClassVar[dict[str, str]] = {
        "node_added": "_ev_node_added",
        "node_removed": "_ev_node_removed",
        "app_added": "_ev_app_added",
        "app_removed": "_ev_app_removed",
        "allocated": "_ev_allocated",
        "released": "_ev_released",
        "replaced": "_ev_replaced",
        "timeouts": "_ev_timeouts",
        "config": "_ev_config",
        "count_in": "_ev_count_in",
        "app_restore": "_ev_app_restore",
        "ask_added": "_ev_ask_added",
        "ask_removed": "_ev_ask_removed",
        "policy_memo": "_ev_policy_memo",
    }

    def apply_event(self, event: Mapping[str, Any]) -> None:
        """Apply one journalled event (replay): the recorded outcome, through the live code."""
        name = self._HANDLERS.get(str(event.get("type")))
        if name is None:
            raise JournalReplayError(f"unknown event type {event.get('type')!r}")
        getattr(self, name)(event)

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

    def _ev_count_in(self, ev: Mapping[str, Any]) -> None:
        self._count_in(self._apps[ev["app"]])

    def _ev_policy_memo(self, ev: Mapping[str, Any]) -> None:
        found = self._extensions.get(ev["policy"])
        restore = getattr(found[1], "restore_memo", None) if found is not None else None
        if restore is None:
            raise JournalReplayError(f"no policy {ev['policy']!r} to restore a snapshot memo into")
        restore(ev["memo"])

    def _ev_app_restore(self, ev: Mapping[str, Any]) -> None:
        app = self._apps[ev["app"]]
        order = ev.get("allocations")
        if order is not None and set(order) == set(app.allocations):
            app.allocations = {k: app.allocations[k] for k in order}
        app.state = ev["state"]
        app.state_since = ev["state_since"]
        app.placeholder_since = ev["placeholder_since"]
        app.anchor_seq = ev["anchor_seq"]
        app.added_seq = ev["added_seq"]

    def _rebuild_events(self) -> list[dict[str, Any]]:
        """A short event list that rebuilds the current state (snapshot restore).

        Every config that matters is applied again in order, and under each one: the live applications
        submitted under it (their queue existed then), the applications that entered the running count
        under it (their group link was chosen then, U4; an empty increase links and counts them, in
        entry order), and the live allocations admitted under it (in admission order). Usage at every
        step is then a part of the usage the original admissions saw, so limits admit them again.
        The restore verifies the result against the snapshot's ``dump`` and falls back to a full replay
        when they differ: this is an optimisation, never a source of truth.
        """
        out: list[dict[str, Any]] = []
        apps = list(self._apps.values())
        allocs = list(self._allocs.values())
        counted = sorted((a for a in apps if a.counted), key=lambda a: a.count_order)
        seqs = sorted({a.added_seq for a in apps} | {a.anchor_seq for a in counted}
                      | {a.config_seq for a in allocs} | {self.config_seq})
        for i, seq in enumerate(seqs):
            out.append({"type": "config", "seq": seq})
            if i == 0:
                out.extend({"type": "node_added", "node": n, "capacity": _res_json(c)}
                           for n, c in self._nodes.items())
            out.extend({"type": "app_added", "app": app.application_id, "user": app.user.user,
                        "groups": list(app.user.groups), "queue": app.queue_path, "tags": dict(app.tags),
                        "t": app.submit_time, "gang_style": app.gang_style,
                        "placeholder_timeout": app.placeholder_timeout}
                       for app in apps if app.added_seq == seq)
            out.extend({"type": "count_in", "app": app.application_id}
                       for app in counted if app.anchor_seq == seq)
            out.extend({"type": "allocated", "app": a.application_id, "key": a.allocation_key,
                        "resource": _res_json(a.resource), "priority": a.priority,
                        "preemptible": a.preemptible, "placeholder": a.placeholder,
                        "task_group": a.task_group, "t": a.time}
                       for a in allocs if a.config_seq == seq)
        out.extend(ask.event() for ask in self._asks.all())     # queueing: the pending asks, in order
        for app in apps:
            out.append({"type": "app_restore", "app": app.application_id, "state": app.state,
                        "state_since": app.state_since, "placeholder_since": app.placeholder_since,
                        "anchor_seq": app.anchor_seq, "added_seq": app.added_seq,
                        "allocations": list(app.allocations)})
        for key, (_, policy) in sorted(self._extensions.items()):
            memo = getattr(policy, "memo", None)
            if memo is not None:
                out.append({"type": "policy_memo", "policy": key, "memo": memo()})
        return out

    def __repr__(self) -> str:
        return f"Partition({self.name!r}, apps={len(self._apps)}, allocations={len(self._allocs)})"
