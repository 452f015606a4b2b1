"""A working copy of a partition: the same state in a new partition with no journal and its own clock.

The forecast and the "what would make it start" answers run the real engines forward or try changes;
they do it on a copy, never on the partition itself. The copy is made the way a snapshot restore
makes a partition (:class:`~quotaplane.state.rebuild.RebuildCapture`: every config that matters, what
was submitted, counted and admitted under it, the waiting asks, the applications' lifecycle and the
policies' memos), applied through the same handlers, so every later decision on it is the one the
partition itself would make from the same state.

``without`` leaves allocations out of the copy (the state as if they had ended); ``configure`` maps
each configuration the copy applies (a raised limit). The copy never schedules by itself
(``auto_schedule`` off): its user runs the cycles.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from types import MappingProxyType

from quotaplane.config.model import PartitionConfig
from quotaplane.events import AppRestore, AskAdded, Event
from quotaplane.history.view import settings_of
from quotaplane.partition import gcfreeze
from quotaplane.partition.facade import Partition
from quotaplane.state.handlers import PartitionState
from quotaplane.state.rebuild import RebuildCapture

__all__ = ["working_copy"]


def working_copy(partition: Partition, clock: Callable[[], float], *, without: Collection[str] = (),
                 configure: Callable[[PartitionConfig], PartitionConfig] | None = None,
                 keys: dict[str, tuple[str, ...]] | None = None) -> Partition:
    """A copy of ``partition``'s state now, on ``clock``, with no journal (see the module docstring).
    ``keys``: filled, when the partition is settled — its cycles ran after its last change, none is
    due — with the wake keys its cycles left to each waiting application (what the copy's first full
    cycle would leave, :meth:`~quotaplane.scheduling.runner.Scheduler.adopt`); left empty otherwise."""
    # every object the rebuild makes survives it: the collections it would trigger walk them all and
    # free nothing (40 % of a copy's CPU at 10,000 allocations) — paused, as a restore does
    with gcfreeze.paused():
        return _copy(partition, clock, without, configure, keys)


def _copy(partition: Partition, clock: Callable[[], float], without: Collection[str],
          configure: Callable[[PartitionConfig], PartitionConfig] | None,
          keys: dict[str, tuple[str, ...]] | None) -> Partition:
    with partition.lock:
        state = partition.state
        waiting = state.waiting
        if keys is not None and not (waiting.asks.dirty or waiting.woken or waiting.due or waiting.full_due):
            index = waiting.index
            keys.update((app_id, index.keys_of(app_id)) for app_id in waiting.asks.applications())
        allocations = [(a, a.node) for key, a in state.allocs.items() if key not in without]
        capture = RebuildCapture(state.config_seq, state.nodes, list(state.apps.values()), allocations,
                                 state.waiting.asks.all(), state.policies.extensions,
                                 state.node_index.unschedulable, state.node_labels)
        events = capture.events()
        source = state.config_source
        current = state.config
        options = state.options
    if without:
        # an application's lifecycle record names its allocations: the left-out ones are not there
        events = [_without(ev, without) for ev in events]

    def config_at(seq: int) -> PartitionConfig:
        # a partition made without a scheduler has no config history: its config in force stands in
        config = _without_accounting(source(seq) if source is not None else current)
        return configure(config) if configure is not None else config

    first = events[0]
    seq0 = getattr(first, "seq", state.config_seq)
    copy = Partition(config_at(seq0), journal=None, clock=clock, config_seq=seq0, config_source=config_at,
                     options=options)
    copy.auto_schedule = False
    target = copy.state
    asks: list[AskAdded] = []
    for ev in events:
        if type(ev) is AskAdded:
            asks.append(ev)
            continue
        if asks:
            _asks_in(target, asks)
        target.apply(ev)
        target.notes_recorded(target.take_notes())
    if asks:
        _asks_in(target, asks)
    return copy


def _asks_in(state: PartitionState, asks: list[AskAdded]) -> None:
    """A run of waiting asks put back in one pass, as a snapshot restore does (issue 38: the same
    state as one by one, tests/partition/test_restore_bulk.py); in a 10,000-ask copy one by one
    was half of its cost."""
    state.asks_restored(asks)
    state.notes_recorded(state.take_notes())
    asks.clear()



def _without_accounting(config: PartitionConfig) -> PartitionConfig:
    """``config`` with the usage history off: the copy's future is not accounted (nobody reads it),
    and accounting every allocation of a copy made to look ahead was a third of its cost. Kept when
    it orders waiting work (fair share with memory, docs/history.md), which the copy must do alike."""
    settings = settings_of(config.extensions)
    if not settings.enabled or settings.fairshare.enabled:
        return config
    history = dict(config.extensions.get("history") or {})
    history["enabled"] = False
    return dataclasses.replace(config, extensions=MappingProxyType({**config.extensions, "history": history}))


def _without(ev: Event, keys: Collection[str]) -> Event:
    if not isinstance(ev, AppRestore) or ev.allocations is None or not any(k in keys for k in ev.allocations):
        return ev
    return dataclasses.replace(ev, allocations=tuple(k for k in ev.allocations if k not in keys))
