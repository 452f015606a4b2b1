"""Answers wait for the store (decision S1 under group commit, issue 18).

With group commit (:mod:`quotaplane.journal.group_commit`) a partition call returns once the change is decided
and queued for the next commit. The service therefore holds back **every** answer — a change's, but
also a read's or a refusal's, which may rest on a change not yet durable — until everything its
partition decided before the answer was formed is committed. The request handlers stay as they are:
the outer middleware calls :meth:`CommitBarrier.settle` just before the response starts.

A request that changed a partition waits for the exact mark of its last change (the committer notes
it in the request's context): 201 if that commit held, 503 if it failed
(:class:`~quotaplane.journal.group_commit.CommitFailedError`) — the partition is then rebuilt from the
journal before it serves anything again, so a refused change is never seen. A request that changed
nothing there (a read, a refusal) waits for everything decided so far; if a commit failed while it
was served (the partition's failure ``epoch`` moved between its start and its answer) it answers 503
too, since it may have seen a change that was undone — harmless, nothing was changed by it (a request
that changed the partition is judged by its own commit alone, even when the partition's group was
replaced while it waited: its change was decided on the rebuilt state). Health and
metrics routes do not wait.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal

from quotaplane.journal.group_commit import CommitFailedError, GroupCommit, marks_in_context, reset_marks

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.cluster import Scheduler

__all__ = ["CommitBarrier", "is_exempt", "partition_of_path"]

_PARTITION_PATH = re.compile(r"^/ws/v1/partition/([^/]+)(?:/|$)")

#: routes that report the process or the store, not partition state: they never wait
_EXEMPT = frozenset({"/healthz", "/readyz", "/metrics", "/ws/v1/metrics", "/ws/v1/scheduler/healthcheck",
                     "/docs", "/openapi.json"})

#: the failure epochs of the partitions a request may touch: ``(group, epoch)`` pairs
Epochs = tuple[tuple[GroupCommit, int], ...]


def is_exempt(path: str) -> bool:
    """True for the routes that report the process or the store, not partition state."""
    return path in _EXEMPT


def partition_of_path(path: str) -> str | None:
    """The partition a ``/ws/v1/partition/{name}/…`` path names (None: another route)."""
    m = _PARTITION_PATH.match(path)
    return m.group(1) if m else None


class CommitBarrier:
    """Holds answers back until their partition's changes are durable (see the module docstring)."""

    __slots__ = ("_scheduler", "deciding")

    def __init__(self, scheduler: Callable[[], Scheduler]) -> None:
        self._scheduler = scheduler
        #: requests the barrier will hold back that have not reached their answer yet (the outer
        #: layer counts them, on the loop's thread): the one reaching it with none other is ``alone``
        self.deciding = 0

    def _groups(self, path: str) -> list[GroupCommit]:
        if path in _EXEMPT:
            return []
        name = partition_of_path(path)
        scheduler = self._scheduler()
        if name is not None:
            try:
                p = scheduler.partition(name)
            except Exception:      # unknown partition: the route answers 404 by itself
                return []
            return [p.group] if p.group is not None else []
        return [p.group for p in scheduler.partitions() if p.group is not None]

    def epochs(self, path: str) -> Epochs:
        """At a request's start: the failure epochs of the partitions it may touch (and no marks of
        changes yet in this request's context)."""
        reset_marks()
        return tuple((g, g.epoch) for g in self._groups(path))

    def epochs_of(self, partition: str) -> Epochs:
        """:meth:`epochs` of a request to partition ``partition`` (a hot path's, whose route named
        it already): the same pairs, without matching the path again."""
        reset_marks()
        try:
            group = self._scheduler().partition(partition).group
        except Exception:          # unknown partition: the route answers 404 by itself
            return ()
        return () if group is None else ((group, group.epoch),)

    def settle_alone(self, epochs: Epochs) -> BaseException | Literal[False] | None:
        """:meth:`settle` of a request no other is being decided beside (``alone``), without a
        coroutine, when it is the common case — one partition, changed by this request, committed
        inline (:meth:`GroupCommit.decide_inline`): the error to answer instead, or None. False when
        it is not: then ``await`` :meth:`settle` (issue 38: a lone decision's CPU)."""
        if len(epochs) != 1:
            return False
        group = epochs[0][0]
        marks = marks_in_context()
        if len(marks) != 1:
            return False
        mark = marks.get(group)
        if mark is None:
            return False
        if mark <= group.durable:
            return None
        return group.decide_inline(mark)

    async def settle(self, epochs: Epochs, alone: bool = False) -> BaseException | None:
        """Just before the answer: wait until every change those partitions decided so far is
        durable. Returns the error to answer instead when a commit failed meanwhile (503; with the
        leader's URL when the failure was a lost lease). ``alone``: no other request is being
        decided, so no other change joins the group before its scheduled flush — the group is
        committed here, in this turn of the loop, instead (issue 38: no future, no wake-up, no second
        turn — 6–16 µs of a lone decision's CPU, measured in-process)."""
        loop = asyncio.get_running_loop()
        changed = marks_in_context()
        for group, mark in changed.items():
            if mark > group.durable:
                if alone and group.flush_inline():
                    # committed (or failed) here, as :func:`_durable` does, without its coroutine
                    told: list[BaseException | None] = []
                    if group.notify(mark, told.append):
                        if told[0] is not None:
                            return told[0]
                        continue
                outcome = await _durable(loop, group, mark, alone)
                if outcome is not None:
                    return outcome
        if len(epochs) == 1 and epochs[0][0] in changed:
            return None         # the one partition it may touch is judged by its own change (below)
        # a partition this request changed is judged by its own change's commit alone: a group of
        # that partition replaced while the request waited (the lease lapsed and was taken again, a
        # rebuild) failed before the change was decided on the rebuilt state, so that failure undid
        # nothing the answer rests on — answering 503 "nothing was changed" for it would be false
        # (issue 32 #3, found by the fault suite under SIGSTOP)
        return await _seen_durable(loop, epochs, changed, alone)


async def _seen_durable(loop: asyncio.AbstractEventLoop, epochs: Epochs,
                        changed: Mapping[GroupCommit, int], alone: bool) -> BaseException | None:
    """Wait until what the request saw of the partitions it did not change is durable; the error to
    answer when one of their commits failed meanwhile."""
    changed_partitions = {group.name for group in changed}
    for group, epoch in epochs:
        if group in changed or group.name in changed_partitions:
            continue
        if group.epoch != epoch:
            return CommitFailedError(f"partition {group.name!r}: a journal commit failed while this "
                                     "request was served; what it saw may have been undone")
        if not group.idle:
            outcome = await _durable(loop, group, group.submitted, alone)
            if outcome is not None:
                return outcome
    return None


async def _durable(loop: asyncio.AbstractEventLoop, group: GroupCommit, mark: int,
                   alone: bool) -> BaseException | None:
    if alone and group.flush_inline():
        # committed (or failed) here: the outcome is decided, told at once — no future, no wake-up
        told: list[BaseException | None] = []
        if group.notify(mark, told.append):
            return told[0]
    done: asyncio.Future[BaseException | None] = loop.create_future()
    group.notify(mark, functools.partial(_wake, loop, done))
    return await done


def _wake(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[BaseException | None],
          outcome: BaseException | None) -> None:
    # usually the loop's own flush; a worker thread's call (a scheduling cycle) may commit it too
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        _resolve(fut, outcome)
    else:
        loop.call_soon_threadsafe(_resolve, fut, outcome)


def _resolve(fut: asyncio.Future[BaseException | None], outcome: BaseException | None) -> None:
    if not fut.done():
        fut.set_result(outcome)
