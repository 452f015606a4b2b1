"""A partition's allocations: admit one or a batch (Q2, preempting when a policy may make room), release
them, replace a gang placeholder, and the same decision answered without a change (``what_if``).

Each write is a function of the partition's transaction (:mod:`quotaplane.partition.txn`), which
applies, journals and takes back; what follows a change (the waiting asks' cycle) is asked of it with
:meth:`~quotaplane.partition.txn.Txn.after`.
"""

from __future__ import annotations

from collections.abc import Sequence

import quotaplane.events as E
from quotaplane.admission import AllocationSpec, check_all
from quotaplane.errors import ConflictError, NotFoundError
from quotaplane.flavors.catalog import FlavorRequest
from quotaplane.partition.asks import add_ask
from quotaplane.partition.follow_up import freed_all
from quotaplane.partition.txn import Txn
from quotaplane.policies.protocol import Decision
from quotaplane.resources import Resource
from quotaplane.scheduling import flavoring
from quotaplane.scheduling.preempting import preempt_for
from quotaplane.scheduling.preemption import plan
from quotaplane.state.handlers import PartitionState

__all__ = ["allocate", "allocate_specs", "cancel_preemption", "freed_all", "release",
           "release_batch", "what_if"]


def _after_direct(tx: Txn) -> None:
    """A direct allocation that let reserved quota go (the reserving ask itself was allocated, or an
    application start keeps a reserving one out): the asks it held back get their cycle now."""
    asks = tx.state.waiting.asks
    if asks.cycle_freed:
        asks.cycle_freed = False
        tx.core.scheduler.freed(tx)


def what_if(state: PartitionState, now: float, application_id: str, resource: Resource, priority: int,
            preemptible: bool, constraints: FlavorRequest | None = None,
            max_runtime: float | None = None) -> Decision:
    """The decision :func:`allocate` would give now, with every reason; changes nothing. A request it
    would admit by preempting others (E6) is answered allocated with those keys in ``preempted``; while
    the partition holds what it preempts, not allocated (it would wait for them), with the same keys.
    One counted per flavor names the flavors it would be charged under (docs/flavors.md)."""
    app = state.active_app(application_id)
    if state.flavors is not None:
        flavored = flavoring.what_if(state, app, AllocationSpec(application_id, "", resource, priority,
                                                                preemptible, constraints=constraints,
                                                                max_runtime=max_runtime), now)
        if flavored is not None:
            return flavored
    req = state.request(app, "", resource, priority, preemptible, first=not app.counted, t=now,
                        max_runtime=max_runtime)
    reasons = check_all(state.policies, req)
    if reasons:
        found = plan(state, app, "", resource, priority, preemptible, Decision(False, reasons), None, now)
        if found is not None:
            if state.hold_preempted:        # allocate would hold them and wait (issue 31)
                return Decision(False, reasons, list(found[0]), queue=app.queue_path)
            return Decision(True, [], list(found[0]), queue=app.queue_path)
    return Decision(not reasons, reasons, queue=app.queue_path)


def allocate(tx: Txn, spec: AllocationSpec, *, preempt: bool = True) -> Decision:
    """Admit one allocation through every policy, preempting when one may make room (E6, PR-Y;
    ``preempt=False``: never). A request whose victims are held (``hold_preempted``) waits for them
    as an ask (:func:`_wait_for_victims`)."""
    tx.state.waiting.asks.cycle_freed = False
    decision = tx.admit(spec)
    if decision.allocated:
        if tx.state.waiting.asks.cycle_freed:
            tx.after(_after_direct)
    elif decision.reasons and preempt:
        decision = _wait_for_victims(tx, spec, preempt_for(tx, spec, decision, None))
    if not decision.allocated:
        tx.state.history.decided(spec.application_id, decision)      # refusals by reason (issue 33)
    return decision


def _wait_for_victims(tx: Txn, spec: AllocationSpec, decision: Decision) -> Decision:
    """A synchronous request whose victims are held (issue 31: they stay charged until their pods are
    gone) cannot be admitted now: it is queued as an ask, so that their room goes to it once they are
    released (YuniKorn allocates the ask that triggered a preemption when its victims are gone). The
    refusal names the victims in ``preempted``; a request already waiting stays as it is."""
    if decision.allocated or not decision.preempted or not tx.state.hold_preempted:
        return decision
    if spec.allocation_key not in tx.state.waiting.asks:

        add_ask(tx, spec)
    return decision


def allocate_specs(tx: Txn, specs: Sequence[AllocationSpec]) -> list[Decision]:
    """Admit validated allocations in order, committed together (a preemption commits what came
    before it, keeping the journal in decision order); an unknown application or a duplicate key raises
    before anything changes."""
    _check_batch(tx.state, specs)
    tx.state.waiting.asks.cycle_freed = False
    decisions: list[Decision] = []
    for spec in specs:
        decision = tx.admit(spec)
        if not decision.allocated and decision.reasons:
            decision = _wait_for_victims(tx, spec, preempt_for(tx, spec, decision, None))
        tx.state.history.decided(spec.application_id, decision)  # refusals by reason (issue 33)
        decisions.append(decision)
    if tx.state.waiting.asks.cycle_freed:
        tx.after(_after_direct)
    return decisions


def _check_batch(state: PartitionState, specs: Sequence[AllocationSpec]) -> None:
    """Every application active and every key new, before anything changes."""
    seen: set[str] = set()
    active: set[str] = set()      # applications checked already
    for spec in specs:
        if spec.application_id not in active:
            state.active_app(spec.application_id)
            active.add(spec.application_id)
        key = spec.allocation_key
        if key in state.allocs or key in seen:
            raise ConflictError(f"allocation {key!r} already exists in partition {state.name!r}")
        seen.add(key)
        if spec.node is not None and spec.node not in state.nodes:
            raise NotFoundError(f"node {spec.node!r} not found in partition {state.name!r}")


def cancel_preemption(tx: Txn, keys: Sequence[str]) -> None:
    """Give held preemptions up (issue 31 #3): the allocations stay and are never chosen as victims
    again while they live (YuniKorn's victim stays marked; the next preemption picks others); every
    waiting ask is retried, and the preemptor may try again at once: its attempt took nothing, and
    the eviction was refused for far longer than YuniKorn's 15 s between attempts (PR-Y3)."""
    state = tx.state
    for key in keys:
        held = state.preempting.pop(key, None)
        if key in state.allocs:
            state.spared.add(key)
        preemptor = state.waiting.asks.get(str((held or {}).get("preemptor") or ""))
        if preemptor is not None:
            preemptor.preempt_after = 0.0
    tx.after(freed_all)


def release(tx: Txn, allocation_key: str) -> None:
    """Release an allocation; the last one moves its application to Completing (seed 001)."""
    state = tx.state
    allocs = state.allocs
    if allocation_key not in allocs:    # one key: no batch bookkeeping (benchmarks/partition.py)
        raise NotFoundError(f"allocation {allocation_key!r} not found in partition {state.name!r}")
    tx.apply(E.Released(key=allocation_key, t=tx.clock(), app=allocs[allocation_key].application_id))
    if state.waiting.asks:          # _after_release written out: every release comes here
        tx.after(tx.core.scheduler.freed)


def _after_release(tx: Txn) -> None:
    """The waiting asks get their cycle once the release is committed; with none waiting there is
    nothing to retry (a later ask marks the queue for a cycle when it is added)."""
    if tx.state.waiting.asks:
        tx.after(tx.core.scheduler.freed)


def release_batch(tx: Txn, allocation_keys: Sequence[str]) -> None:
    """Release several allocations in one commit, all at one time; an unknown key raises first."""
    state = tx.state
    allocs = state.allocs
    seen: set[str] = set()
    for key in allocation_keys:
        if key not in allocs or key in seen:
            raise NotFoundError(f"allocation {key!r} not found in partition {state.name!r}")
        seen.add(key)
    t = tx.clock()
    for ev in [E.Released(key=key, t=t, app=allocs[key].application_id) for key in allocation_keys]:
        tx.apply(ev)
    _after_release(tx)

