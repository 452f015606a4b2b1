"""Pending asks: requests that wait until they fit, counting towards no quota (seed 004).

An :class:`Ask` is journalled as an :class:`~quotaplane.events.AskAdded` event and keeps its arrival
number ``seq`` across restarts; the :class:`AskQueue` indexes the asks of a partition by key and by
application.
"""

from __future__ import annotations

from typing import Any, cast

from quotaplane.events import AskAdded
from quotaplane.flavors.catalog import FlavorRequest
from quotaplane.policies.protocol import Violation
from quotaplane.resources import Resource, shared

__all__ = ["Ask", "AskQueue"]


class Ask:
    """One pending request of an application: it waits until it fits, counting towards no quota.

    ``seq`` is the arrival order within the partition; ``reasons`` are the violations that kept it
    waiting at the last attempt, exactly the ``what_if`` answer for the same request (``None`` before
    the first). ``reasons_at`` is the partition's journal position the reasons were computed at
    (``-1``: during the running cycle); reading them later recomputes them when anything was
    journalled since.
    """

    __slots__ = (
        "allocation_key",
        "application_id",
        "bound",
        "created",
        "overtaken",
        "place_paths",
        "places",
        "preempt_after",
        "preemptible",
        "priority",
        "reasons",
        "reasons_at",
        "reserve_at",
        "resource",
        "seq",
        "timer_at",
    )

    # The parts of a request that are rarely set are read from the class on a plain ask: no slot each
    # (40 bytes less per pending ask, issue 38). An ask that has any of them is a _FullAsk, which has
    # a slot for each; :meth:`__new__` picks the class, ``full`` asks for one whatever the arguments.
    #: a gang's placeholder (YuniKorn ``placeholder``)
    placeholder: bool = False
    #: its gang's task group, None: none
    task_group: str | None = None
    #: YuniKorn's ``allocationTags`` of the request (the allocation inherits them), None: none
    tags: dict[str, str] | None = None
    #: where it may run, for choosing its resource flavors (docs/flavors.md), None: anywhere
    constraints: FlavorRequest | None = None
    #: the declared runtime in seconds its allocation will have (docs/eta.md), None: none declared
    max_runtime: float | None = None

    def __new__(cls, allocation_key: str, application_id: str, resource: Resource, *,
                placeholder: bool = False, task_group: str | None = None, full: bool = False,
                **_: Any) -> Ask:
        if cls is Ask and (placeholder or task_group is not None or full):
            cls = _FullAsk
        return object.__new__(cls)

    def __init__(self, allocation_key: str, application_id: str, resource: Resource, *, priority: int = 0,
                 preemptible: bool = True, placeholder: bool = False, task_group: str | None = None,
                 seq: int = 0, created: float = 0.0, full: bool = False) -> None:
        self.allocation_key = allocation_key
        self.application_id = application_id
        # one Resource per distinct request: the many asks that request the same vector (a job's
        # pods, a class of workloads) share it, with the usage history's charge of each
        self.resource = shared(resource)
        self.priority = priority
        self.preemptible = preemptible
        if type(self) is not Ask:
            rich = cast(_FullAsk, self)
            rich.placeholder = placeholder
            rich.task_group = task_group
            rich.tags = rich.constraints = rich.max_runtime = None
        self.seq = seq
        self.created = created
        self.reasons: list[Violation] | None = None
        self.reasons_at = -2
        #: the ask may try YuniKorn preemption again from this time on (PR-Y3: once per 15 s)
        self.preempt_after = 0.0
        #: the time of its last entry in the scheduler's timer heap (:attr:`Waiting.timed`), so that one
        #: time is filed once
        self.timer_at = -1.0
        #: reservations (:mod:`quotaplane.scheduling.reservations`): the places that held it back when
        #: it arrived (wake keys, and their queue paths), how often later requests overtook it there,
        #: after how many overtakes and from when (its delay) its reservation is in force
        self.places: tuple[str, ...] = ()
        self.place_paths: tuple[str, ...] = ()
        self.overtaken = 0
        self.bound = 0
        self.reserve_at = float("inf")

    def sort_key(self) -> tuple[int, int]:
        """Priority first (highest), then age (oldest)."""
        return (-self.priority, self.seq)

    def to_dict(self) -> dict[str, Any]:
        """The REST shape of a pending ask, with the reasons it waits."""
        out: dict[str, Any] = {
            "allocationKey": self.allocation_key,
            "applicationID": self.application_id,
            "resource": self.resource.to_dict(),
            "priority": self.priority,
            "preemptible": self.preemptible,
            "createTime": self.created,
            "reasons": [v.to_dict() for v in (self.reasons or [])],
        }
        if self.placeholder:
            out["placeholder"] = True
        if self.task_group is not None:
            out["taskGroupName"] = self.task_group
        if self.tags:
            out["allocationTags"] = dict(sorted(self.tags.items()))
        if self.max_runtime is not None:
            out["maxRuntime"] = self.max_runtime
        if self.places:
            out["overtaken"] = self.overtaken
            out["reservedQueues"] = list(self.place_paths) if self.overtaken >= self.bound else []
        return out

    def event(self) -> AskAdded:
        """The journal event that adds this ask."""
        return AskAdded(key=self.allocation_key, app=self.application_id, resource=self.resource,
                        priority=self.priority, preemptible=self.preemptible, seq=self.seq, t=self.created,
                        placeholder=True if self.placeholder else None, task_group=self.task_group,
                        places=self.places or None, overtaken=self.overtaken or None,
                        tags=dict(self.tags) if self.tags else None,
                        constraints=self.constraints.to_dict() if self.constraints else None,
                        max_runtime=self.max_runtime)

    @classmethod
    def from_event(cls, ev: AskAdded) -> Ask:
        """Rebuild an ask from its ``ask_added`` event."""
        full = bool(ev.tags or ev.constraints or ev.max_runtime is not None)
        ask = cls(ev.key, ev.app, ev.resource, priority=ev.priority, preemptible=ev.preemptible,
                  placeholder=bool(ev.placeholder), task_group=ev.task_group, seq=ev.seq, created=ev.t,
                  full=full)
        ask.overtaken = ev.overtaken or 0
        if full:
            rich = cast(_FullAsk, ask)
            rich.tags = dict(ev.tags) if ev.tags else None
            if ev.constraints:
                rich.constraints = FlavorRequest.from_dict(ev.constraints) or None
            rich.max_runtime = ev.max_runtime
        return ask

    def __repr__(self) -> str:
        return f"Ask({self.allocation_key!r}, app={self.application_id!r}, {self.resource!r})"


class _FullAsk(Ask):
    """An ask with a slot for each rarely set part of a request (see :class:`Ask`)."""

    __slots__ = ("constraints", "max_runtime", "placeholder", "tags", "task_group")


class AskQueue:
    """The pending asks of one partition, in arrival order, indexed by key and by application."""

    __slots__ = ("_by_app", "_by_key", "_next_seq", "cycle_freed", "dirty")

    def __init__(self) -> None:
        self._by_key: dict[str, Ask] = {}
        self._by_app: dict[str, dict[str, Ask]] = {}
        self._next_seq = 1
        #: Something freed capacity or quota since the last cycle (or an ask was added).
        self.dirty = False
        #: Set by the consumer when an attempt of the running cycle freed quota (another cycle runs).
        self.cycle_freed = False

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def get(self, key: str) -> Ask | None:
        """The pending ask with ``key``, or None."""
        return self._by_key.get(key)

    def next_seq(self) -> int:
        """The arrival number the next ask gets."""
        return self._next_seq

    def reset_seq(self, next_seq: int) -> None:
        """The next ask gets ``next_seq`` again (an ask added since was taken back)."""
        self._next_seq = next_seq

    def add(self, ask: Ask) -> None:
        """Queue ``ask`` (its ``seq`` is kept; later asks get a higher one)."""
        self._by_key[ask.allocation_key] = ask
        self._by_app.setdefault(ask.application_id, {})[ask.allocation_key] = ask
        if ask.seq >= self._next_seq:
            self._next_seq = ask.seq + 1
        self.dirty = True

    def remove(self, key: str) -> Ask | None:
        """Drop the ask with ``key``; return it (None when unknown)."""
        ask = self._by_key.pop(key, None)
        if ask is not None:
            app_asks = self._by_app.get(ask.application_id)
            if app_asks is not None:
                app_asks.pop(key, None)
                if not app_asks:
                    del self._by_app[ask.application_id]
        return ask

    def remove_application(self, application_id: str) -> list[Ask]:
        """Drop every ask of an application; return them in arrival order."""
        asks = self._by_app.pop(application_id, {})
        for key in asks:
            self._by_key.pop(key, None)
        return sorted(asks.values(), key=lambda a: a.seq)

    def has_application(self, application_id: str) -> bool:
        """True while ``application_id`` has at least one pending ask."""
        return application_id in self._by_app

    def count_of(self, application_id: str) -> int:
        """How many asks of ``application_id`` wait. O(1)."""
        return len(self._by_app.get(application_id, ()))

    def of_application(self, application_id: str) -> list[Ask]:
        """The pending asks of one application, in scheduling order."""
        return sorted(self._by_app.get(application_id, {}).values(), key=Ask.sort_key)

    def of_application_unsorted(self, application_id: str) -> list[Ask]:
        """The pending asks of one application, in no particular order."""
        return list(self._by_app.get(application_id, {}).values())

    def applications(self) -> list[str]:
        """The applications with pending asks (sorted)."""
        return sorted(self._by_app)

    def all(self) -> list[Ask]:
        """Every pending ask in arrival order."""
        return sorted(self._by_key.values(), key=lambda a: a.seq)

    def unsorted(self) -> list[Ask]:
        """Every pending ask, in no particular order (for work whose result does not depend on it)."""
        return list(self._by_key.values())

    def dump(self) -> list[dict[str, Any]]:
        """Deterministic plain data (arrival order) for ``dump_state``."""
        return [a.event().to_json() for a in self.all()]
