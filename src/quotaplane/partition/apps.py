"""A partition's applications: can one be submitted (the submit ACL, placement rules P-1 … P-8), add
one (placed, a dynamic queue made from its parent's template, M-6), remove one (releasing all it
holds), and the application an allocation must belong to. Mixed into
:class:`~quotaplane.partition.Partition` (its lock, state and journal) so the partition module keeps
one concern per part; each change follows the partition's protocol (recover first, change memory,
journal, undo exactly when the journal refuses)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import quotaplane.events as E
from quotaplane.admission import check_id
from quotaplane.application import ACTIVE_STATES, GANG_HARD, GANG_SOFT, Application
from quotaplane.config.identity import UserGroup
from quotaplane.errors import ConflictError, NotFoundError
from quotaplane.partition.nodes import PartitionHost
from quotaplane.partition.submission import Submission
from quotaplane.policy import Decision

__all__ = ["PartitionApps"]


class _Host(PartitionHost, Protocol):
    """What the application operations use of their partition."""

    def _submission(self) -> Submission: ...

    def _check_submission(self, application_id: str, user: UserGroup, queue: str | None,
                          tags: Mapping[str, str] | None, gang_style: str, placeholder_timeout: float | None
                          ) -> tuple[dict[str, str], float]: ...


class PartitionApps:
    """The application operations of a partition (see the module docstring)."""

    def can_submit(self: _Host, user: UserGroup, *, queue: str | None = None,
                   tags: Mapping[str, str] | None = None, application_id: str = "what-if") -> Decision:
        """Would ``add_application`` accept this submission? Changes nothing.

        ``Decision(True, queue=path)``, or ``Decision(False)`` with an ``acl.submit`` violation when the
        submit ACL refuses; a placement that finds no queue raises :class:`RejectedError` as
        ``add_application`` does.
        """
        if not isinstance(user, UserGroup):
            raise ValueError("user must be a UserGroup")
        with self.lock:
            return self._submission().can_submit(user, queue, tags or {}, application_id)

    def _submission(self: _Host) -> Submission:
        return Submission(self._s.queues, self._s.placement, has_rules=bool(self._s.config.placement_rules))

    def add_application(self: _Host, application_id: str, user: UserGroup, *, queue: str | None = None,
                        tags: Mapping[str, str] | None = None, gang_style: str = GANG_SOFT,
                        placeholder_timeout: float | None = None) -> str:
        """Place and add an application; return the full queue path (contract).

        Placement rules pick the queue (P-1 … P-8; with none, ``queue`` as given); a dynamic queue is
        created with its parent's child template (M-6) and namespace tags applied (N-2). The submit
        ACL is checked (RejectedError). A duplicate id is a ConflictError. The application is accepted
        even when a maxapplications limit is reached: counts are enforced at :meth:`allocate`.
        ``gang_style`` (``soft``/``hard``) and ``placeholder_timeout`` (seconds) drive gang timeouts.
        """
        tag_map, timeout = self._check_submission(application_id, user, queue, tags, gang_style,
                                                  placeholder_timeout)
        with self.lock:
            self._usable()      # recover first: memory may be ahead of the journal
            if application_id in self._s.apps:
                raise ConflictError(f"application {application_id!r} already exists in partition "
                                    f"{self.name!r}")
            path = self._submission().place(application_id, user, queue, tag_map)
            ev = E.AppAdded(app=application_id, user=user.user, groups=tuple(user.groups), queue=path,
                            tags=dict(sorted(tag_map.items())), t=self.clock(), gang_style=gang_style,
                            placeholder_timeout=timeout)
            self._s.app_added(ev)
            try:
                self._record([ev], recoverable=True)
            except BaseException:
                self._s.drop_app(self._s.apps[application_id])
                raise
            return path

    def _check_submission(self: _Host, application_id: str, user: UserGroup, queue: str | None,
                          tags: Mapping[str, str] | None, gang_style: str, placeholder_timeout: float | None
                          ) -> tuple[dict[str, str], float]:
        """The arguments of :meth:`add_application` checked; (tags as strings, placeholder timeout)."""
        check_id(application_id, "application id")
        if not isinstance(user, UserGroup):
            raise ValueError("user must be a UserGroup")
        if gang_style not in (GANG_SOFT, GANG_HARD):
            raise ValueError(f"gang_style must be 'soft' or 'hard', not {gang_style!r}")
        if queue is not None and not isinstance(queue, str):
            raise ValueError("queue must be a string")
        timeout = (self._s.options.placeholder_timeout if placeholder_timeout is None
                   else float(placeholder_timeout))
        if timeout < 0:
            raise ValueError("placeholder_timeout must not be negative")
        return {str(k): str(v) for k, v in (tags or {}).items()}, timeout

    def remove_application(self: _Host, application_id: str) -> None:
        """Remove an application, releasing all its allocations; its running count ends (seed 001)."""
        with self.lock:
            self._usable()      # recover first: memory may be ahead of the journal
            if application_id not in self._s.apps:
                raise NotFoundError(f"application {application_id!r} not found in partition {self.name!r}")
            ev = E.AppRemoved(app=application_id, t=self.clock())
            self._s.app_removed(ev)
            self._record([ev])
            self._s.pending.freed()

    def _active_app(self: _Host, application_id: str) -> Application:
        app = self._s.apps.get(application_id)
        if app is None:
            raise NotFoundError(f"application {application_id!r} not found in partition {self.name!r}")
        if app.state not in ACTIVE_STATES:
            raise ConflictError(f"application {application_id!r} is {app.state} and takes no allocations")
        if self._s.queues.queue(app.queue_path) is None:
            raise NotFoundError(f"queue {app.queue_path!r} of application {application_id!r} "
                                "no longer exists")
        return app
