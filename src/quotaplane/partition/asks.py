"""A partition's waiting asks (issue: waiting work as demand): queue an ask, withdraw it, list the
pending ones with why they wait, and run a scheduling cycle. Each write is a function of the
partition's transaction (:mod:`quotaplane.partition.txn`); the cycles themselves are
:mod:`quotaplane.scheduling`.

An ask counts towards no quota until a cycle allocates it through the one admission path; an elastic
quota counts it as demand (PR-K3).
"""

from __future__ import annotations

import functools

import quotaplane.events as E
from quotaplane.admission import AllocationSpec
from quotaplane.application import Allocation
from quotaplane.errors import ConflictError, NotFoundError
from quotaplane.partition.nodes import check_int64_sum
from quotaplane.partition.txn import Txn
from quotaplane.scheduling.asks import Ask

__all__ = ["add_ask", "remove_ask", "schedule"]


def add_ask(tx: Txn, spec: AllocationSpec) -> Ask:
    """Queue a request: it counts towards no quota and is allocated by a later cycle once it fits (at
    once, when automatic cycles are on and it fits). A key pending or allocated already: ConflictError."""
    state = tx.state
    asks = state.waiting.asks
    state.active_app(spec.application_id)
    key = spec.allocation_key
    if key in state.allocs or key in asks:
        raise ConflictError(f"allocation {key!r} already exists in partition {state.name!r}")
    root = state.queues.queue("root")
    if root is not None:        # pendingResource is served: demand stays within int64 too
        check_int64_sum(root._pending, spec.resource, f"ask {key!r}: the waiting asks' total")
    was_dirty = asks.dirty
    tx.apply(E.AskAdded(key=key, app=spec.application_id, resource=spec.resource, priority=spec.priority,
                        preemptible=spec.preemptible, seq=asks.next_seq(), t=tx.clock(),
                        placeholder=True if spec.placeholder else None, task_group=spec.task_group,
                        tags=spec.tags, constraints=spec.constraints.to_dict() if spec.constraints else None,
                        max_runtime=spec.max_runtime))
    ask = asks.get(key)
    assert ask is not None
    tx.after(functools.partial(_after_add, ask, was_dirty))
    return ask


def _after_add(ask: Ask, was_dirty: bool, tx: Txn) -> None:
    # an elastic quota counts the ask as demand: other quotas' runtimes move (PR-K3)
    tx.core.scheduler.after_add(tx, ask, was_dirty, demand_moves=bool(tx.state.policies.extension_policies))


def remove_ask(tx: Txn, allocation_key: str) -> None:
    """Withdraw a pending ask. Unknown key: NotFoundError."""
    state = tx.state
    ask = state.waiting.asks.get(allocation_key)
    if ask is None:
        raise NotFoundError(f"ask {allocation_key!r} not found in partition {state.name!r}")
    app = state.apps.get(ask.application_id)
    counted = app is not None and app.counted
    tx.apply(E.AskRemoved(key=allocation_key, t=tx.clock()))
    if counted and app is not None and not app.counted:
        tx.after(tx.core.scheduler.freed)   # the application left the running count: maxapplications freed
    elif state.policies.extension_policies:
        tx.after(tx.core.scheduler.freed)   # less demand in an elastic quota: others' runtimes may grow
    else:                           # a reservation it held ended: the held-back asks go
        tx.after(tx.core.scheduler.run_if_needed)


def schedule(tx: Txn) -> list[Allocation]:
    """One scheduling cycle (and more while one ends early because quota came back); the allocations
    made, committed every :data:`~quotaplane.scheduling.runner.CYCLE_FLUSH_EVERY`."""
    made = tx.core.scheduler.schedule(tx)
    allocs = tx.state.allocs
    return [allocs[a.allocation_key] for a in made if a.allocation_key in allocs]
