"""A partition's group commit (issue 18, :mod:`quotaplane.journal.group_commit`): start and stop it."""

from __future__ import annotations

from collections.abc import Callable

from quotaplane.journal.group_commit import DEFAULT_MAX_EVENTS, Background, GroupCommit, Offload
from quotaplane.partition.txn import Core

__all__ = ["start_group_commit", "stop_group_commit"]


def start_group_commit(core: Core, *, schedule: Callable[[Callable[[], None]], object] | None,
                       owner: int | None, offload: Offload | None, max_events: int = DEFAULT_MAX_EVENTS,
                       background: Background | None) -> GroupCommit | None:
    """Journal changes by group commit from now on (idempotent; None without a journal); see
    :meth:`~quotaplane.partition.facade.Partition.start_group_commit`."""
    log = core.log
    with core.lock:
        if core.group is None and log.journal is not None:
            core.group = log.group = GroupCommit(log, core.name, core.lock, schedule=schedule,
                                                 owner=owner, offload=offload, max_events=max_events,
                                                 background=background)
        return core.group


def stop_group_commit(core: Core) -> None:
    """Commit what is queued and go back to one append per change (idempotent)."""
    log = core.log
    with core.lock:
        group = core.group
        if group is None:
            return
        group.stop()
        core.group = log.group = None
        if log.poisoned is not None:
            core.recover()
