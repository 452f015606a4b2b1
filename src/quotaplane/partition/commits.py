"""A partition's group commit (issue 18, :mod:`quotaplane.journal.group_commit`): start and stop it, and flush
what it holds. Mixed into :class:`~quotaplane.partition.Partition` (its lock and journal stream) so
the partition module keeps one concern per part."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from quotaplane.journal.group_commit import DEFAULT_MAX_EVENTS, Background, GroupCommit, Offload

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.journal.log import PartitionLog

__all__ = ["PartitionCommits"]


class _Host(Protocol):
    """What group commit uses of its partition."""

    name: str
    lock: threading.RLock
    _log: PartitionLog

    def recover(self) -> bool: ...


class PartitionCommits:
    """The group-commit operations of a partition (see the module docstring)."""

    @property
    def group(self: _Host) -> GroupCommit | None:
        """The group committer, or None: each change is journalled before its call returns."""
        return self._log.group

    def start_group_commit(self: _Host, *, schedule: Callable[[Callable[[], None]], object] | None = None,
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
        with self.lock:
            if self._log.group is None and self._log.journal is not None:
                self._log.group = GroupCommit(self._log, self.name, self.lock, schedule=schedule,
                                              owner=owner, offload=offload, max_events=max_events,
                                              background=background)
            return self._log.group

    def stop_group_commit(self: _Host) -> None:
        """Commit what is queued and go back to one append per change (idempotent)."""
        with self.lock:
            group = self._log.group
            if group is None:
                return
            group.stop()
            self._log.group = None
            if self._log.poisoned is not None:
                self.recover()

    def flush(self: _Host) -> None:
        """Commit every change made so far now; :class:`~quotaplane.journal.group_commit.CommitFailedError`
        if that failed (the changes were undone). Without group commit every change is durable when
        its call returns: nothing to do."""
        group = self._log.group
        if group is not None:
            group.wait()
