"""A short event list that rebuilds a partition's state (snapshot restore).

Every config that matters is applied again in order, and under each one: the live applications
submitted under it (their queue existed then), the applications that entered the running count under
it (their group link was chosen then, rule U4; an empty increase links and counts them, in entry
order), and the live allocations admitted under it (in admission order; one admitted after an
allocation of a later config — a placeholder's replacement — goes with that later one). Usage at
every step is then a part of the usage the original admissions saw, so limits admit them again.
Then the pending asks
in arrival order, each application's lifecycle fields, and what policies remember beyond their
allocations (:class:`~quotaplane.events.PolicyMemo`). The restore verifies the result against the
snapshot's dump and falls back to a full replay when they differ: this is an optimisation, never a
source of truth.
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterable, Mapping, Sequence

from quotaplane.application import Allocation, Application
from quotaplane.events import (
    Allocated,
    AppAdded,
    AppRestore,
    ConfigApplied,
    CountIn,
    Event,
    NodeAdded,
    PolicyMemo,
)
from quotaplane.policies.protocol import QuotaPolicy
from quotaplane.resources import Resource
from quotaplane.scheduling.asks import Ask

__all__ = ["AllocationAt", "RebuildCapture", "rebuild_events"]


def _app_added(app: Application) -> AppAdded:
    return AppAdded(app=app.application_id, user=app.user.user, groups=tuple(app.user.groups),
                    queue=app.queue_path, tags=dict(app.tags), t=app.submit_time, gang_style=app.gang_style,
                    placeholder_timeout=app.placeholder_timeout)


def _allocated(a: Allocation, node: str | None) -> Allocated:
    return Allocated(app=a.application_id, key=a.allocation_key, resource=a.resource, priority=a.priority,
                     preemptible=a.preemptible, placeholder=a.placeholder, task_group=a.task_group, t=a.time,
                     node=node, tags=dict(a.tags) if a.tags else None,
                     flavors=dict(a.flavors) if a.flavors else None, max_runtime=a.max_runtime)


def _restore(app: Application) -> AppRestore:
    return AppRestore(app=app.application_id, state=app.state, state_since=app.state_since,
                      placeholder_since=app.placeholder_since, anchor_seq=app.anchor_seq,
                      added_seq=app.added_seq, allocations=tuple(app.allocations),
                      state_log=tuple(app.state_log), started=app.started,
                      max_used=Resource.of(app.max_used))


#: a live allocation as a snapshot saw it: the allocation (only its node changes after admission)
#: and that node
AllocationAt = tuple[Allocation, str | None]


class RebuildCapture:
    """What :func:`rebuild_events` needs, taken from a partition at one instant and independent of
    it afterwards: the small parts as events (applications, asks, memos, nodes), the allocations as
    references with their node. Taking it costs a few milliseconds for 50,000 allocations; the
    allocation events — the bulk — are made by :meth:`events`, which may run later on another
    thread (a snapshot written in the background)."""

    __slots__ = ("_added", "_allocations", "_asks", "_config_seq", "_counted", "_memos", "_nodes",
                 "_restores")

    def __init__(self, config_seq: int, nodes: Mapping[str, Resource], apps: Sequence[Application],
                 allocations: Sequence[AllocationAt], asks: Iterable[Ask],
                 extensions: Iterable[tuple[str, QuotaPolicy]], unschedulable: Container[str] = (),
                 labels: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self._config_seq = config_seq
        self._nodes = _node_events(nodes, unschedulable, labels or {})
        self._added = [(app.added_seq, _app_added(app)) for app in apps]
        counted = sorted((a for a in apps if a.counted), key=lambda a: a.count_order)
        self._counted = [(app.anchor_seq, CountIn(app=app.application_id)) for app in counted]
        self._allocations = list(allocations)
        self._asks = [ask.event() for ask in asks]
        self._restores = [_restore(app) for app in apps]
        self._memos = _memos(extensions)

    def events(self) -> list[Event]:
        """Every config that matters, then what was submitted, counted and admitted under it (see the
        module docstring), then the asks, each application's lifecycle fields and the memos."""
        added, counted = _by_seq(self._added), _by_seq(self._counted)
        allocations: dict[int, list[AllocationAt]] = {}
        seq = 0
        for at in self._allocations:
            # in admission order, never in an earlier group than the one before it: a placeholder's
            # replacement keeps the placeholder's config but is admitted last (a tighter config in
            # between refuses it, and the restore replays the journal instead)
            seq = max(seq, at[0].config_seq)
            allocations.setdefault(seq, []).append(at)
        out: list[Event] = []
        # grouped once, not scanned once per config: a snapshot of many configs stays linear
        for i, seq in enumerate(sorted({*added, *counted, *allocations, self._config_seq})):
            out.append(ConfigApplied(seq=seq))
            if i == 0:
                out.extend(self._nodes)
            out.extend(added.get(seq, ()))
            out.extend(counted.get(seq, ()))
            out.extend(_allocated(a, node) for a, node in allocations.get(seq, ()))
        return [*out, *self._asks, *self._restores, *self._memos]


def _node_events(nodes: Mapping[str, Resource], unschedulable: Container[str],
                 labels: Mapping[str, Mapping[str, str]]) -> list[NodeAdded]:
    """Each node as the event that adds it, with its schedulability and its labels (the labels select
    its resource flavors: without them a rebuilt partition counts no flavored capacity, and the
    snapshot does not match its rebuild)."""
    return [NodeAdded(node=n, capacity=c, schedulable=False if n in unschedulable else None,
                      labels=dict(labels[n]) if labels.get(n) else None)
            for n, c in nodes.items()]


def _by_seq(pairs: Iterable[tuple[int, Event]]) -> dict[int, list[Event]]:
    """``(config seq, event)`` pairs grouped by seq, each group in the pairs' order."""
    out: dict[int, list[Event]] = {}
    for seq, ev in pairs:
        out.setdefault(seq, []).append(ev)
    return out


def _memos(extensions: Iterable[tuple[str, QuotaPolicy]]) -> list[Event]:
    # through JSON: a memo is plain data, and the copy shares nothing with the policy
    return [PolicyMemo(policy=key, memo=json.loads(json.dumps(memo)))
            for key, policy in sorted(extensions, key=lambda kv: kv[0])
            if (memo := policy.memo()) is not None]


def rebuild_events(config_seq: int, nodes: Mapping[str, Resource], apps: Sequence[Application],
                   allocations: Sequence[Allocation], asks: Iterable[Ask],
                   extensions: Iterable[tuple[str, QuotaPolicy]],
                   unschedulable: Container[str] = ()) -> list[Event]:
    """The events that rebuild this state from an empty partition (see the module docstring)."""
    return RebuildCapture(config_seq, nodes, apps, [(a, a.node) for a in allocations], asks, extensions,
                          unschedulable).events()
