"""A short event list that rebuilds a partition's state (snapshot restore).

Every config that matters is applied again in order, and under each one: the live applications
submitted under it (their queue existed then), the applications that entered the running count under
it (their group link was chosen then, rule U4; an empty increase links and counts them, in entry
order), and the live allocations admitted under it (in admission order). Usage at every step is then
a part of the usage the original admissions saw, so limits admit them again. Then the pending asks
in arrival order, each application's lifecycle fields, and what policies remember beyond their
allocations (:class:`~quotaplane.events.PolicyMemo`). The restore verifies the result against the
snapshot's dump and falls back to a full replay when they differ: this is an optimisation, never a
source of truth.
"""

from __future__ import annotations

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
from quotaplane.policy import QuotaPolicy
from quotaplane.resources import Resource
from quotaplane.scheduling.asks import Ask

__all__ = ["rebuild_events"]


def _app_added(app: Application) -> AppAdded:
    return AppAdded(app=app.application_id, user=app.user.user, groups=tuple(app.user.groups),
                    queue=app.queue_path, tags=dict(app.tags), t=app.submit_time, gang_style=app.gang_style,
                    placeholder_timeout=app.placeholder_timeout)


def _allocated(a: Allocation) -> Allocated:
    return Allocated(app=a.application_id, key=a.allocation_key, resource=a.resource, priority=a.priority,
                     preemptible=a.preemptible, placeholder=a.placeholder, task_group=a.task_group, t=a.time,
                     node=a.node)


def _restore(app: Application) -> AppRestore:
    return AppRestore(app=app.application_id, state=app.state, state_since=app.state_since,
                      placeholder_since=app.placeholder_since, anchor_seq=app.anchor_seq,
                      added_seq=app.added_seq, allocations=tuple(app.allocations),
                      state_log=tuple(app.state_log), started=app.started)


def _under_configs(config_seq: int, nodes: Mapping[str, Resource], apps: Sequence[Application],
                   allocations: Sequence[Allocation], unschedulable: Container[str]) -> list[Event]:
    """Each config that matters, then what was submitted, counted and admitted under it."""
    out: list[Event] = []
    counted = sorted((a for a in apps if a.counted), key=lambda a: a.count_order)
    seqs = sorted({a.added_seq for a in apps} | {a.anchor_seq for a in counted}
                  | {a.config_seq for a in allocations} | {config_seq})
    for i, seq in enumerate(seqs):
        out.append(ConfigApplied(seq=seq))
        if i == 0:
            out.extend(NodeAdded(node=n, capacity=c, schedulable=False if n in unschedulable else None)
                       for n, c in nodes.items())
        out.extend(_under(seq, apps, counted, allocations))
    return out


def _under(seq: int, apps: Sequence[Application], counted: Sequence[Application],
           allocations: Sequence[Allocation]) -> list[Event]:
    """What was submitted, counted as running and admitted under config ``seq``, in that order."""
    return [*(_app_added(app) for app in apps if app.added_seq == seq),
            *(CountIn(app=app.application_id) for app in counted if app.anchor_seq == seq),
            *(_allocated(a) for a in allocations if a.config_seq == seq)]


def _memos(extensions: Iterable[tuple[str, QuotaPolicy]]) -> list[Event]:
    return [PolicyMemo(policy=key, memo=memo) for key, policy in sorted(extensions, key=lambda kv: kv[0])
            if (memo := policy.memo()) is not None]


def rebuild_events(config_seq: int, nodes: Mapping[str, Resource], apps: Sequence[Application],
                   allocations: Sequence[Allocation], asks: Iterable[Ask],
                   extensions: Iterable[tuple[str, QuotaPolicy]],
                   unschedulable: Container[str] = ()) -> list[Event]:
    """The events that rebuild this state from an empty partition (see the module docstring)."""
    return [*_under_configs(config_seq, nodes, apps, allocations, unschedulable),
            *(ask.event() for ask in asks),
            *(_restore(app) for app in apps), *_memos(extensions)]
