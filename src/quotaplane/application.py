"""Applications and allocations of a partition, with the seed 001 application lifecycle.

States (seed 001 "Application tracking", YuniKorn's application states)::

    New ──first allocation──▶ Starting ──next allocation / starting timeout──▶ Running
     (Accepted is passed through:   the application has asks the moment it is allocated)
    Running/Starting ──last allocation released──▶ Completing ──completing timeout──▶ Completed
    Completing ──new allocation (pod restart)──▶ Running
    placeholders time out, style "hard", no real allocation ──▶ Failing ──▶ Failed
    placeholders time out, style "soft", no real allocation ──▶ Resuming ──allocation──▶ Running
    Completed / Failed ──terminated timeout──▶ Expired (and removed from the partition)
    Rejected: placement or ACL refused the submission (the application is not kept)

The *running count* (queue ``maxapplications`` and user/group ``maxapplications``) follows seed 001
"Running state entry/exit": the application enters at its first allocation (``counted`` becomes
true) and leaves when its last allocation is released (Completing), when it fails, or when it is
removed. A soft placeholder timeout keeps it counted (reference A-3: "not removed when the app is
resuming"; its real asks are still pending).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from quotaplane.config.identity import UserGroup
from quotaplane.resources import Resource

__all__ = [
    "ACCEPTED",
    "ACTIVE_STATES",
    "ALLOCATED",
    "ASKED",
    "COMPLETED",
    "COMPLETING",
    "COMPLETING_TIMEOUT",
    "EXPIRED",
    "FAILED",
    "FAILED_OUT",
    "FAILING",
    "GANG_HARD",
    "GANG_HARD_TIMEOUT",
    "GANG_SOFT",
    "GANG_SOFT_TIMEOUT",
    "IDLE",
    "IDLE_COUNTED",
    "LAST_RELEASED",
    "NEW",
    "REJECTED",
    "RESUMING",
    "RUNNING",
    "STARTING",
    "STARTING_TIMEOUT",
    "STATES",
    "STATE_LOG_LIMIT",
    "TERMINATED_TIMEOUT",
    "TRANSITIONS",
    "Allocation",
    "Application",
    "LogMark",
]

NEW = "New"
ACCEPTED = "Accepted"
STARTING = "Starting"
RUNNING = "Running"
COMPLETING = "Completing"
COMPLETED = "Completed"
FAILING = "Failing"
FAILED = "Failed"
REJECTED = "Rejected"
EXPIRED = "Expired"
RESUMING = "Resuming"

#: Every state name of seed 001, in lifecycle order.
STATES: tuple[str, ...] = (NEW, ACCEPTED, STARTING, RUNNING, COMPLETING, COMPLETED, FAILING, FAILED,
                           REJECTED, EXPIRED, RESUMING)

#: States in which an application may still receive allocations.
ACTIVE_STATES: frozenset[str] = frozenset({NEW, ACCEPTED, STARTING, RUNNING, COMPLETING, RESUMING})

#: What moves an application from one state to another (the triggers of :data:`TRANSITIONS`).
ALLOCATED = "allocated"                    # an allocation admitted (or a placeholder replaced)
LAST_RELEASED = "last_released"            # its last allocation released, no ask pending
ASKED = "asked"                            # a pending ask queued
IDLE = "idle"                              # its last ask withdrawn, no allocation, not counted
IDLE_COUNTED = "idle_counted"              # the same while it counted as running
GANG_HARD_TIMEOUT = "gang_hard_timeout"    # placeholders timed out, style hard, no real allocation
FAILED_OUT = "failed_out"                  # Failing finished (its running count ended)
GANG_SOFT_TIMEOUT = "gang_soft_timeout"    # placeholders timed out, style soft, no real allocation
COMPLETING_TIMEOUT = "completing_timeout"
STARTING_TIMEOUT = "starting_timeout"
TERMINATED_TIMEOUT = "terminated_timeout"

#: The lifecycle of seed 001 as one table: trigger → {from state: to state}. A trigger that has no
#: entry for the current state changes nothing.
TRANSITIONS: dict[str, dict[str, str]] = {
    ALLOCATED: {NEW: STARTING, ACCEPTED: STARTING, STARTING: RUNNING, COMPLETING: RUNNING,
                RESUMING: RUNNING},
    LAST_RELEASED: {NEW: COMPLETING, ACCEPTED: COMPLETING, STARTING: COMPLETING, RUNNING: COMPLETING,
                    RESUMING: COMPLETING},
    ASKED: {NEW: ACCEPTED, COMPLETING: RUNNING},
    IDLE: {ACCEPTED: NEW, RUNNING: COMPLETING},
    IDLE_COUNTED: {STARTING: COMPLETING, RUNNING: COMPLETING, RESUMING: COMPLETING},
    GANG_HARD_TIMEOUT: {state: FAILING for state in STATES},
    FAILED_OUT: {FAILING: FAILED},
    GANG_SOFT_TIMEOUT: {state: RESUMING for state in STATES},
    COMPLETING_TIMEOUT: {COMPLETING: COMPLETED},
    STARTING_TIMEOUT: {STARTING: RUNNING},
    TERMINATED_TIMEOUT: {COMPLETED: EXPIRED, FAILED: EXPIRED},
}

#: How many state changes an application's log keeps (the newest).
STATE_LOG_LIMIT = 100
_STARTED = frozenset({STARTING, RUNNING})


class LogMark(NamedTuple):
    """An application's state log before a change that may be taken back (:meth:`Application.log_undo`)."""

    moves: int
    length: int
    front: tuple[tuple[float, str], ...]      # the entries a full log may push out (at most two)
    started: float | None


#: Gang scheduling styles (YuniKorn ``gangSchedulingStyle``).
GANG_SOFT = "soft"
GANG_HARD = "hard"


class Allocation:
    """One admitted allocation: a key, its application, the amounts and the scheduling flags.

    ``placeholder`` marks a gang placeholder (seed 001 "Application tracking"); ``task_group`` is its
    task group (the real allocation that replaces it inherits it). ``time`` is the clock value at which
    it was admitted. ``node`` is the node it runs on, when known (issue 15 #2). ``max_runtime`` is its
    declared runtime in seconds, when declared (docs/eta.md).
    """

    __slots__ = ("allocation_key", "application_id", "config_seq", "flavors", "max_runtime", "node",
                 "placeholder", "preemptible", "priority", "resource", "tags", "task_group", "time")

    def __init__(self, allocation_key: str, application_id: str, resource: Resource, *, priority: int = 0,
                 preemptible: bool = True, placeholder: bool = False, task_group: str | None = None,
                 time: float = 0.0) -> None:
        self.allocation_key = allocation_key
        self.application_id = application_id
        self.resource = resource
        self.priority = priority
        self.preemptible = preemptible
        self.placeholder = placeholder
        self.task_group = task_group
        self.time = time
        self.config_seq = 0           # the config in force when it was admitted (snapshot rebuild)
        self.node: str | None = None
        #: YuniKorn's ``allocationTags`` (e.g. the pod it is), None when none were given
        self.tags: dict[str, str] | None = None
        #: the resource flavor of each requested resource counted per flavor (docs/flavors.md), None: none
        self.flavors: dict[str, str] | None = None
        #: the declared runtime in seconds, None when none was declared
        self.max_runtime: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (REST and ``dump_state``)."""
        return self.plain(self.node)

    def plain(self, node: str | None) -> dict[str, Any]:
        """:meth:`to_dict` with ``node`` as the node it runs on (a snapshot captured the node at its
        seq: the node is the one field that changes after admission)."""
        out: dict[str, Any] = {
            "allocationKey": self.allocation_key,
            "applicationID": self.application_id,
            "resource": dict(sorted(self.resource.items())),
            "priority": self.priority,
            "preemptible": self.preemptible,
            "placeholder": self.placeholder,
            "time": self.time,
        }
        if self.task_group is not None:
            out["taskGroupName"] = self.task_group
        if node is not None:
            out["nodeID"] = node
        if self.tags:
            out["allocationTags"] = dict(sorted(self.tags.items()))
        if self.flavors:
            out["flavors"] = dict(self.flavors)
        if self.max_runtime is not None:
            out["maxRuntime"] = self.max_runtime
        return out

    def __repr__(self) -> str:
        return (f"Allocation({self.allocation_key!r}, app={self.application_id!r}, {self.resource!r}"
                f"{', placeholder' if self.placeholder else ''})")


class Application:
    """An application of a partition: who submitted it, where it was placed, and its allocations.

    ``allocations`` maps allocation key → :class:`Allocation` in admission order. ``counted`` is true
    while the application counts as running (see the module docstring). ``anchor_seq`` is the config
    sequence number in force when it last entered the running count (used to rebuild snapshots).
    """

    __slots__ = (
        "added_seq",
        "allocations",
        "anchor_seq",
        "application_id",
        "count_order",
        "counted",
        "gang_style",
        "max_used",
        "moves",
        "placeholder_since",
        "placeholder_timeout",
        "placeholders_used",
        "queue_path",
        "reported_state",
        "started",
        "state",
        "state_log",
        "state_since",
        "submit_time",
        "tags",
        "used",
        "user",
        "watch",
    )

    def __init__(self, application_id: str, user: UserGroup, queue_path: str, *,
                 tags: Mapping[str, str] | None = None, submit_time: float = 0.0,
                 gang_style: str = GANG_SOFT, placeholder_timeout: float = 900.0, added_seq: int = 0) -> None:
        self.application_id = application_id
        self.user = user
        self.queue_path = queue_path
        self.tags: dict[str, str] = dict(sorted((tags or {}).items()))
        self.state = NEW
        self.state_since = submit_time
        #: the last :data:`STATE_LOG_LIMIT` state changes as ``(time, new state)``, oldest first
        #: (YuniKorn's ``stateLog``, bounded: an application that starts and completes for ever would
        #: otherwise grow without end)
        self.state_log: deque[tuple[float, str]] = deque(maxlen=STATE_LOG_LIMIT)
        #: when it first entered Starting or Running (YuniKorn's ``startTime``), None before
        self.started: float | None = None
        #: state changes made so far (:meth:`log_undo` counts the ones to take back)
        self.moves = 0
        self.submit_time = submit_time
        self.allocations: dict[str, Allocation] = {}
        #: the running totals of its real allocations and of its gang placeholders, kept apart as
        #: YuniKorn keeps ``allocatedResource`` and ``allocatedPlaceholder`` (objects/application.go)
        self.used: dict[str, int] = {}
        self.placeholders_used: dict[str, int] = {}
        #: the component-wise maximum either total ever reached (YuniKorn's ``maxAllocatedResource``,
        #: served as ``maxUsedResource``). Replaced, never changed in place, so that a mark taken
        #: before a change holds the value to put back.
        self.max_used: dict[str, int] = {}
        self.counted = False
        self.gang_style = gang_style
        self.placeholder_timeout = placeholder_timeout
        self.placeholder_since: float | None = None
        self.anchor_seq = added_seq
        self.added_seq = added_seq
        self.count_order = 0          # order among the partition's running-count entries
        #: the state last told to subscribers (an ``application`` notice is due when it differs)
        self.reported_state = NEW
        #: what :meth:`move` tells of a state change (the partition: its list of moved applications
        #: and its timers by due time)
        self.watch: Callable[[Application], None] | None = None

    @property
    def allocated(self) -> Resource:
        """The sum of the application's allocations (placeholders included)."""
        total: dict[str, int] = {}
        for a in self.allocations.values():
            for k, v in a.resource.items():
                total[k] = total.get(k, 0) + v
        return Resource.of(dict(sorted(total.items())))

    def charge(self, resource: Mapping[str, int], *, placeholder: bool) -> None:
        """Add an allocation's ``resource`` to its total (placeholders apart) and raise
        :attr:`max_used` where that total now exceeds it. Only the components of ``resource`` can
        grow, so only they are compared: O(components), not O(allocations)."""
        total = self.placeholders_used if placeholder else self.used
        peak = self.max_used
        rising: dict[str, int] | None = None
        # the Resource's own dict, and no dict.get: this runs on every admission (benchmarks/calls.py)
        for k, v in (resource._values if type(resource) is Resource else resource).items():
            now = total[k] + v if k in total else v
            total[k] = now
            if k not in peak or now > peak[k]:
                if rising is None:
                    rising = dict(peak)
                rising[k] = now
        if rising is not None:
            self.max_used = rising

    def discharge(self, resource: Mapping[str, int], *, placeholder: bool) -> None:
        """Take an allocation's ``resource`` off its total (released, replaced or taken back); the
        maximum stays (YuniKorn never lowers it)."""
        total = self.placeholders_used if placeholder else self.used
        for k, v in (resource._values if type(resource) is Resource else resource).items():
            total[k] -= v

    def move(self, trigger: str, t: float) -> bool:
        """Follow :data:`TRANSITIONS` for ``trigger`` at time ``t``; False when the state has no move."""
        target = TRANSITIONS[trigger].get(self.state)
        if target is None:
            return False
        self.state = target
        self.state_since = t
        self.state_log.append((t, target))
        self.moves += 1
        if self.started is None and target in _STARTED:
            self.started = t
        if self.watch is not None:
            self.watch(self)
        return True

    def started_at(self) -> float | None:
        """When it first left New/Accepted for Starting or Running (its first allocation), if it did."""
        return self.started

    def log_mark(self) -> LogMark:
        """What :meth:`log_undo` needs to take back the state changes made after this call."""
        log = self.state_log
        n = len(log)
        front = (log[0], log[1]) if n == log.maxlen else ()
        return LogMark(self.moves, n, front, self.started)

    def log_undo(self, mark: LogMark) -> None:
        """Take back the state changes made since ``mark`` (a change that could not be journalled):
        the entries they pushed out of the full log come back."""
        log = self.state_log
        moves = self.moves - mark.moves
        self.moves = mark.moves
        for _ in range(min(moves, len(log))):
            log.pop()
        dropped = max(0, mark.length + moves - (log.maxlen or 0)) if mark.front else 0
        for entry in reversed(mark.front[:dropped]):
            log.appendleft(entry)
        self.started = mark.started

    def finished_at(self) -> float | None:
        """When it entered its current terminal state (Completed, Failed, Expired), if it is in one."""
        if self.state in (COMPLETED, FAILED, EXPIRED) and self.state_log:
            return self.state_log[-1][0]
        return None

    def has_placeholders(self) -> bool:
        """True while at least one gang placeholder is allocated."""
        return any(a.placeholder for a in self.allocations.values())

    def has_real_allocations(self) -> bool:
        """True while at least one non-placeholder allocation is allocated."""
        return any(not a.placeholder for a in self.allocations.values())

    def to_dict(self) -> dict[str, Any]:
        """The REST shape: ``applicationID``, ``queueName``, ``state`` plus details."""
        return {
            "applicationID": self.application_id,
            "queueName": self.queue_path,
            "state": self.state,
            "user": self.user.user,
            "groups": list(self.user.groups),
            "tags": dict(self.tags),
            "allocatedResource": self.allocated.to_dict(),
            "allocations": sorted(self.allocations),
            "submissionTime": self.submit_time,
        }

    def dump(self) -> dict[str, Any]:
        """Everything about the application, as deterministic plain data (``dump_state``)."""
        return {
            "user": self.user.user,
            "groups": list(self.user.groups),
            "queue": self.queue_path,
            "state": self.state,
            "state_since": self.state_since,
            "submit_time": self.submit_time,
            "tags": dict(self.tags),
            "allocations": list(self.allocations),
            "counted": self.counted,
            "gang_style": self.gang_style,
            "placeholder_timeout": self.placeholder_timeout,
            "placeholder_since": self.placeholder_since,
            "state_log": [[t, s] for t, s in self.state_log],
            "started": self.started,
            "max_used": dict(sorted(self.max_used.items())),
        }

    def __repr__(self) -> str:
        return (f"Application({self.application_id!r}, user={self.user.user!r}, "
                f"queue={self.queue_path!r}, {self.state})")
