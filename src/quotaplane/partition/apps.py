"""A partition's applications: can one be submitted (the submit ACL, placement rules P-1 … P-8), add
one (placed, a dynamic queue made from its parent's template, M-6), remove one (releasing all it
holds). Each write is a function of the partition's transaction (:mod:`quotaplane.partition.txn`)."""

from __future__ import annotations

from collections.abc import Mapping

import quotaplane.events as E
from quotaplane.admission import check_id
from quotaplane.application import GANG_HARD, GANG_SOFT
from quotaplane.config.identity import UserGroup
from quotaplane.errors import ConflictError, InputError, NotFoundError
from quotaplane.partition.submission import Submission
from quotaplane.partition.txn import Txn
from quotaplane.policies.protocol import Decision
from quotaplane.state.handlers import PartitionState
from quotaplane.state.timeouts import PartitionOptions

__all__ = ["add_application", "can_submit", "check_submission", "remove_application"]


def _submission(state: PartitionState) -> Submission:
    return Submission(state.queues, state.placement, has_rules=bool(state.config.placement_rules))


def can_submit(state: PartitionState, user: UserGroup, queue: str | None, tags: Mapping[str, str] | None,
               application_id: str) -> Decision:
    """Would :func:`add_application` accept this submission? Changes nothing (see
    :meth:`~quotaplane.partition.facade.Partition.can_submit`)."""
    if not isinstance(user, UserGroup):
        raise InputError("user must be a UserGroup")
    return _submission(state).can_submit(user, queue, tags or {}, application_id)


def check_submission(options: PartitionOptions, application_id: str, user: UserGroup, queue: str | None,
                     tags: Mapping[str, str] | None, gang_style: str, placeholder_timeout: float | None
                     ) -> tuple[dict[str, str], float]:
    """The arguments of :func:`add_application` checked; (tags as strings, placeholder timeout)."""
    check_id(application_id, "application id")
    if not isinstance(user, UserGroup):
        raise InputError("user must be a UserGroup")
    if gang_style not in (GANG_SOFT, GANG_HARD):
        raise InputError(f"gang_style must be 'soft' or 'hard', not {gang_style!r}")
    if queue is not None and not isinstance(queue, str):
        raise InputError("queue must be a string")
    timeout = options.placeholder_timeout if placeholder_timeout is None else float(placeholder_timeout)
    if timeout < 0:
        raise InputError("placeholder_timeout must not be negative")
    return {str(k): str(v) for k, v in (tags or {}).items()}, timeout


def add_application(tx: Txn, application_id: str, user: UserGroup, queue: str | None, tags: dict[str, str],
                    gang_style: str, placeholder_timeout: float) -> str:
    """Place and add an application (arguments checked by :func:`check_submission`); return its queue."""
    state = tx.state
    if application_id in state.apps:
        raise ConflictError(f"application {application_id!r} already exists in partition {state.name!r}")
    path = _submission(state).place(application_id, user, queue, tags)
    tx.apply(E.AppAdded(app=application_id, user=user.user, groups=tuple(user.groups), queue=path,
                        tags=dict(sorted(tags.items())), t=tx.clock(), gang_style=gang_style,
                        placeholder_timeout=placeholder_timeout))
    return path


def remove_application(tx: Txn, application_id: str) -> None:
    """Remove an application, releasing all its allocations; its running count ends (seed 001)."""
    state = tx.state
    if application_id not in state.apps:
        raise NotFoundError(f"application {application_id!r} not found in partition {state.name!r}")
    tx.apply(E.AppRemoved(app=application_id, t=tx.clock()))
    tx.after(tx.core.scheduler.freed)
