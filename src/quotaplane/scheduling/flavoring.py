"""The flavor choice of the write path: where Kueue's flavor assigner meets the partition (docs/flavors.md).

It plans on a read-only view of the state (:class:`~quotaplane.scheduling.view.StateView`), as the
preemptors do.

:meth:`~quotaplane.partition.txn.Txn.admit` asks :func:`choose_for` which flavors a request is charged
under before the policies admit it; the choice is part of the decision, of the journalled ``allocated``
event and of the allocation. The search itself is :func:`quotaplane.flavors.assign.choose`; this module
answers its questions from the partition's state — the full admission check of a request charged
under one flavor, its borrowing level along the queue chain, and whether preemption could admit it —
changing nothing.

:func:`for_preemption` hands the preemptor the request charged under the flavor the search chose for
preemption (or says that no flavor may preempt), and :func:`what_if` answers the same decision without
a change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from quotaplane.admission import AllocationSpec, check_all
from quotaplane.flavors.assign import FIT, NOFIT, PREEMPT, Choice, choose
from quotaplane.flavors.catalog import Catalog, FlavorRequest
from quotaplane.policies.protocol import Decision, Violation
from quotaplane.resources import Resource
from quotaplane.scheduling import questions
from quotaplane.scheduling.nomination import borrowing_level
from quotaplane.scheduling.preemption import plan

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Application
    from quotaplane.scheduling.asks import Ask
    from quotaplane.scheduling.view import StateView

__all__ = ["FIT", "choose_for", "for_preemption", "pinned", "refusal", "what_if"]

_ANYWHERE = FlavorRequest()


class _Evaluator:
    """The questions of the flavor search, answered from ``state`` for one request (changes nothing)."""

    __slots__ = ("app", "ask", "now", "spec", "state")

    def __init__(self, state: StateView, app: Application, spec: AllocationSpec, ask: Ask | None,
                 now: float) -> None:
        self.state = state
        self.app = app
        self.spec = spec
        self.ask = ask
        self.now = now

    def check(self, resource: Resource) -> list[Violation]:
        spec, app = self.spec, self.app
        req = self.state.request(app, spec.allocation_key, resource, spec.priority, spec.preemptible,
                                 first=not app.counted, t=self.now)
        return check_all(self.state.policies, req)

    def borrowing(self, resource: Resource, names: Sequence[str]) -> tuple[int, str]:
        """KQ-F5 in the queue tree (:func:`borrowing_level`)."""
        tree = self.state.queues
        leaf = tree.queue(self.app.queue_path)
        if leaf is None:
            return 0, ""
        return borrowing_level(tree.effective_guaranteed, leaf, resource, names)

    def preemptable(self, resource: Resource, reasons: list[Violation]) -> bool:
        state, spec, ask = self.state, self.spec, self.ask
        if state.hold_preempted and ask is None:
            return False
        # planning marks the ask's last attempt (PR-Y3): asking is not attempting
        saved = ask.preempt_after if ask is not None else 0.0
        try:
            found = plan(state, self.app, spec.allocation_key, resource, spec.priority, spec.preemptible,
                         Decision(False, reasons), ask, self.now)
        finally:
            if ask is not None:
                ask.preempt_after = saved
        return found is not None


def _order(state: StateView, app: Application) -> tuple[Sequence[str] | None, object]:
    leaf = state.queues.queue(app.queue_path)
    if leaf is None:
        return None, None
    return leaf.effective_flavors(), leaf.effective_fungibility()


def choose_for(state: StateView, app: Application, spec: AllocationSpec, ask: Ask | None,
               now: float) -> Choice | None:
    """The flavors of ``spec`` for ``app`` now (None: the partition has no flavors, or the request asks
    for nothing counted per flavor). A request naming flavored resources pins those flavors
    (``ValueError`` for an unknown one)."""
    catalog = state.flavors
    if catalog is None:
        return None
    resource, pins = catalog.pins_in(spec.resource)
    order, fungibility = _order(state, app)
    return choose(catalog, resource, spec.constraints or _ANYWHERE, order, fungibility,  # type: ignore[arg-type]
                  _Evaluator(state, app, spec, ask, now), queue=app.queue_path, pinned=pins)


def ask_reasons(state: StateView, app: Application, ask: Ask, now: float) -> list[Violation] | None:
    """Why waiting ``ask`` is not admitted now, found as its attempt finds them — through the flavor
    search (None: nothing of it is counted per flavor, the caller explains it as usual). Without the
    search, the request's resources are checked unflavored, which its flavors' limits never refuse."""
    spec = AllocationSpec(app.application_id, ask.allocation_key, ask.resource, ask.priority,
                          ask.preemptible, constraints=ask.constraints, max_runtime=ask.max_runtime)
    choice = choose_for(state, app, spec, ask, now)
    if choice is None:
        return None
    if choice.mode == NOFIT:
        return choice.reasons()
    if choice.mode == FIT and choice.attempts:
        return []
    return _Evaluator(state, app, spec, ask, now).check(choice.resource)


questions.flavored_reasons = ask_reasons


def refusal(choice: Choice, app: Application, key: str) -> Decision:
    """The refusal of a request no flavor admits now; when one needs preemption, the decision names
    it (``flavors``) for the preemptor."""
    flavors = choice.flavors if choice.mode == PREEMPT else {}
    return Decision(False, choice.reasons(), queue=app.queue_path, allocation_key=key, flavors=flavors,
                    flavor_attempts=choice.attempts)


def pinned(catalog: Catalog, spec: AllocationSpec, flavors: dict[str, str]) -> AllocationSpec:
    """``spec`` charged under ``flavors`` (resource → flavor), marked so that admission does not search."""
    resource, _ = catalog.pins_in(spec.resource)
    pins = {catalog.group_of[r].resources[0]: f for r, f in flavors.items() if r in catalog.group_of}
    charged, names = catalog.charge(resource, pins)
    return dataclasses.replace(spec, resource=charged, flavors=names)


def for_preemption(state: StateView, spec: AllocationSpec, refused: Decision
                   ) -> tuple[AllocationSpec, Decision] | None:
    """What the preemptor plans for: ``spec`` and its refusal when no flavor was searched; the request
    charged under the flavor the search chose for preemption, with that flavor's reasons; or None when
    every flavor was NoFit (nothing to preempt for)."""
    catalog = state.flavors
    if catalog is None or spec.flavors is not None or not refused.flavor_attempts:
        return spec, refused
    if not refused.flavors:
        return None
    chosen = set(refused.flavors.values())
    reasons = [v for a in refused.flavor_attempts if a.flavor in chosen and a.mode == PREEMPT
               for v in a.reasons]
    return pinned(catalog, spec, refused.flavors), Decision(False, reasons, queue=refused.queue,
                                                              allocation_key=refused.allocation_key)


def what_if(state: StateView, app: Application, spec: AllocationSpec, now: float) -> Decision | None:
    """The decision ``allocate`` would give for a request counted per flavor, changing nothing (None:
    nothing is flavored, the caller answers as usual)."""
    choice = choose_for(state, app, spec, None, now)
    if choice is None:
        return None
    if choice.mode == FIT and choice.attempts:
        return Decision(True, [], queue=app.queue_path, flavors=choice.flavors,
                        flavor_attempts=choice.attempts)
    if choice.mode == FIT:          # every group pinned by the request: check it charged so
        reasons = _Evaluator(state, app, spec, None, now).check(choice.resource)
        if not reasons:
            return Decision(True, [], queue=app.queue_path, flavors=choice.flavors)
        found = plan(state, app, "", choice.resource, spec.priority, spec.preemptible,
                     Decision(False, reasons), None, now)
        if found is not None:
            return Decision(True, [], list(found[0]), queue=app.queue_path, flavors=choice.flavors)
        return Decision(False, reasons, queue=app.queue_path)
    if choice.mode == NOFIT:
        return refusal(choice, app, "")
    reasons = _Evaluator(state, app, spec, None, now).check(choice.resource)
    found = plan(state, app, "", choice.resource, spec.priority, spec.preemptible, Decision(False, reasons),
                 None, now)
    if found is None:           # cannot happen: the search planned the same preemption
        return refusal(choice, app, "")
    return Decision(True, [], list(found[0]), queue=app.queue_path, flavors=choice.flavors,
                    flavor_attempts=choice.attempts)
