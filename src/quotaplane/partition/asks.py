"""A partition's waiting asks (issue: waiting work as demand): queue an ask, withdraw it, list the
pending ones with why they wait, and run a scheduling cycle; the switches of the automatic cycles.
Mixed into :class:`~quotaplane.partition.Partition` (its lock, state and journal) so the partition
module keeps one concern per part; the cycles themselves are :mod:`quotaplane.scheduling`.

An ask counts towards no quota until a cycle allocates it through the one admission path; an
elastic quota counts it as demand (PR-K3). Each change follows the partition's protocol: recover
first, change memory, journal (rule S1), and undo exactly when the journal refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import quotaplane.events as E
from quotaplane.admission import validate_spec
from quotaplane.errors import ConflictError, NotFoundError
from quotaplane.partition.nodes import PartitionHost, check_int64_sum
from quotaplane.resources import Resource
from quotaplane.scheduling.asks import Ask

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Allocation, Application
    from quotaplane.policy import Violation

__all__ = ["PartitionAsks"]


class _Host(PartitionHost, Protocol):
    """What the ask operations use of their partition: what the node operations use, and the
    check that an application takes allocations."""

    def _active_app(self, application_id: str) -> Application: ...


class PartitionAsks:
    """The waiting-ask operations of a partition (see the module docstring)."""

    @property
    def auto_schedule(self: _Host) -> bool:
        """Run a cycle right after anything that frees capacity or quota (and after :meth:`add_ask`)."""
        return self._s.pending.auto_schedule

    @auto_schedule.setter
    def auto_schedule(self: _Host, value: bool) -> None:
        self._s.pending.auto_schedule = value

    @property
    def incremental(self: _Host) -> bool:
        """Automatic cycles retry only the asks a change could have unblocked (the default); False:
        every automatic cycle is a full one, as :meth:`schedule` (docs/queueing.md)."""
        return self._s.pending.incremental

    @incremental.setter
    def incremental(self: _Host, value: bool) -> None:
        self._s.pending.incremental = bool(value)

    @property
    def schedule_error(self: _Host) -> Exception | None:
        """The error of the last automatic cycle that failed (None: none failed)."""
        return self._s.pending.schedule_error

    @schedule_error.setter
    def schedule_error(self: _Host, value: Exception | None) -> None:
        self._s.pending.schedule_error = value

    @property
    def schedule_needed(self: _Host) -> bool:
        """True when asks are pending and something changed since the last cycle."""
        return self._s.pending.schedule_needed

    def add_ask(self: _Host, application_id: str, allocation_key: str,
                resource: Mapping[str, int] | Resource, *, priority: int = 0, preemptible: bool = True,
                placeholder: bool = False, task_group: str | None = None,
                tags: Mapping[str, str] | None = None) -> Ask:
        """Queue a request: it counts towards no quota and is allocated by a later cycle once it fits.

        Unknown application: NotFoundError; a key already pending or allocated: ConflictError. With
        :attr:`auto_schedule` on, a cycle runs at once (so an ask that fits is allocated now).
        """
        spec = validate_spec(application_id, allocation_key, resource, priority, preemptible, placeholder,
                             task_group, tags=tags)
        with self.lock:
            self._usable()
            asks = self._s.pending.asks       # after a recovery: the rebuilt state's
            app = self._active_app(application_id)
            if allocation_key in self._s.allocs or allocation_key in asks:
                raise ConflictError(f"allocation {allocation_key!r} already exists in partition "
                                    f"{self.name!r}")
            root = self._s.queues.queue("root")
            if root is not None:        # pendingResource is served: demand stays within int64 too
                check_int64_sum(root._pending, spec.resource,
                                 f"ask {allocation_key!r}: the waiting asks' total")
            ev = E.AskAdded(key=allocation_key, app=application_id, resource=spec.resource,
                            priority=spec.priority, preemptible=spec.preemptible, seq=asks.next_seq(),
                            t=self.clock(), placeholder=True if placeholder else None,
                            task_group=spec.task_group, tags=spec.tags)
            prev_state, prev_since, prev_log = app.state, app.state_since, app.log_mark()
            was_dirty = asks.dirty
            self._s.ask_added(ev)
            try:
                self._record([ev], recoverable=True)
            except BaseException:
                asks.remove(allocation_key)
                asks.dirty = was_dirty
                app.state, app.state_since = prev_state, prev_since
                app.log_undo(prev_log)
                raise
            ask = asks.get(allocation_key)
            assert ask is not None
            # an elastic quota counts the ask as demand: other quotas' runtimes move (PR-K3)
            self._s.pending.after_add(ask, was_dirty,
                                      demand_moves=bool(self._s.policies.extension_policies))
            return ask

    def remove_ask(self: _Host, allocation_key: str) -> None:
        """Withdraw a pending ask. Unknown key: NotFoundError."""
        with self.lock:
            self._usable()      # recover first: memory may be ahead of the journal
            ask = self._s.pending.asks.get(allocation_key)
            if ask is None:
                raise NotFoundError(f"ask {allocation_key!r} not found in partition {self.name!r}")
            app = self._s.apps.get(ask.application_id)
            counted = app is not None and app.counted
            ev = E.AskRemoved(key=allocation_key, t=self.clock())
            self._s.ask_removed(ev)
            self._record([ev])
            if counted and app is not None and not app.counted:
                self._s.pending.freed()   # the application left the running count: maxapplications freed
            elif self._s.policies.extension_policies:
                self._s.pending.freed()   # less demand in an elastic quota: others' runtimes may grow
            else:
                self._s.pending.run_if_needed()   # a reservation it held ended: the held-back asks go

    def pending(self: _Host, application_id: str | None = None) -> list[Ask]:
        """The pending asks (of one application, or all), each with the reasons it waits.

        Reasons are those of the last attempt when nothing was journalled since; otherwise (or for
        an ask not yet tried) they are explained now with the same checks as :meth:`what_if`.
        """
        with self.lock:
            asks = self._s.pending.asks
            found = asks.of_application(application_id) if application_id is not None else asks.all()
            for ask in found:
                self._s.pending.reasons_of(ask)
            return found

    def get_ask(self: _Host, allocation_key: str) -> Ask | None:
        """The pending ask with ``allocation_key``, or None."""
        return self._s.pending.asks.get(allocation_key)

    def pending_reasons(self: _Host, allocation_key: str) -> list[Violation] | None:
        """Why the pending ask waits (None when no such ask is pending)."""
        with self.lock:
            ask = self._s.pending.asks.get(allocation_key)
            return None if ask is None else list(self._s.pending.reasons_of(ask))

    def schedule(self: _Host) -> list[Allocation]:
        """One scheduling cycle: allocate the pending asks that fit, in fair order; return the
        allocations made.

        Every allocation goes through the one admission path (all policies, nothing half applied).
        The cycle's allocations are journalled together, one transaction per
        :data:`~quotaplane.scheduling.runner.CYCLE_FLUSH_EVERY` and one at the end; if a write fails,
        that chunk's allocations are undone, their asks wait again, earlier chunks stand, and the
        error is raised. Subscribers hear of an allocation only once it is journalled.
        """
        with self.lock:
            if len(self._s.pending.asks):
                self._usable()
            made = self._s.pending.schedule()
            return [self._s.allocs[a.allocation_key] for a in made if a.allocation_key in self._s.allocs]
