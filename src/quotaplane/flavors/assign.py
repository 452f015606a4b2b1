"""Choosing a request's flavors: Kueue's flavor assigner with its fungibility rules (KQ-F1 … KQ-F7).

For each group of flavors a request asks from, the flavors the request's queue lists are tried in
order. A flavor the request may not use (taints, node selector, affinity: KQ-F2) is skipped. Each other
flavor is evaluated with the request charged under it, by the partition's own admission checks:

- **Fit**: every policy admits it now; its *borrowing level* is 0 when the leaf's guaranteed holds it,
  else how many queues up the chain the first guaranteed that holds it is (KQ-F5);
- **Preempt**: refused now, but preemption could make room (the partition plans the victims);
- **NoFit**: refused, and nothing may be preempted for it.

The search stops at the first flavor that is not NoFit unless the queue's ``flavorfungibility`` says to
try the next one — ``whencanborrow: TryNextFlavor`` for a flavor that fits only by borrowing,
``whencanpreempt: TryNextFlavor`` (the default) for one that needs preemption (KQ-F6); a Fit without
borrowing always stops it. Otherwise the best flavor seen is taken, by ``preference`` (KQ-F7):
``BorrowingOverPreemption`` (default) ranks (Fit, no borrowing) > (Fit, borrowing) > (Preempt, no
borrowing) > (Preempt, borrowing); ``PreemptionOverBorrowing`` ranks a lower borrowing level first. Ties
keep the earlier flavor.

The choice changes nothing: the evaluator answers questions about the state, the partition then admits
(or preempts for) the request charged under the chosen flavors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from quotaplane.config.model import FungibilityConfig
from quotaplane.flavors.catalog import Catalog, FlavorRequest
from quotaplane.flavors.names import flavored
from quotaplane.policies.protocol import Violation
from quotaplane.resources import Resource

__all__ = ["FIT", "NOFIT", "PREEMPT", "Attempt", "Choice", "Evaluator", "choose", "is_preferred",
           "should_try_next"]

FIT = "Fit"
PREEMPT = "Preempt"
NOFIT = "NoFit"
_RANK = {NOFIT: 0, PREEMPT: 1, FIT: 2}

_DEFAULT_FUNGIBILITY = FungibilityConfig()


class Evaluator(Protocol):
    """What the search asks of the partition about a request charged under one flavor."""

    def check(self, resource: Resource) -> list[Violation]:
        """Every violation of the request with ``resource`` now (``[]``: it fits). Changes nothing."""
        ...

    def borrowing(self, resource: Resource, names: Sequence[str]) -> tuple[int, str]:
        """KQ-F5 over ``names``: (level, the queue whose guaranteed holds it — ``""`` at level 0 or when
        none does)."""
        ...

    def preemptable(self, resource: Resource, reasons: list[Violation]) -> bool:
        """True when preemption could admit the request refused for ``reasons``."""
        ...


@dataclass(frozen=True, slots=True)
class Attempt:
    """One flavor tried for a request: its mode, borrowing level and, when not Fit, why."""

    flavor: str
    mode: str
    borrowing: int = 0
    reasons: tuple[Violation, ...] = ()
    #: the queue whose guaranteed holds the request at ``borrowing`` ("" at level 0 or none)
    borrows_from: str = ""
    #: the request may not use the flavor at all (taints, node selector, affinity)
    ineligible: bool = False

    def summary(self) -> str:
        """One phrase for people: ``a100 fits``, ``h100 needs to borrow from queue root.org``, ``no a100
        quota left (queue.max at root.a)``, ``a100 needs preemption``."""
        f = self.flavor
        if self.mode == FIT:
            if not self.borrowing:
                return f"{f} fits"
            return f"{f} needs to borrow" + (f" from queue {self.borrows_from}" if self.borrows_from else "")
        if self.mode == PREEMPT:
            return f"{f} needs preemption"
        if self.ineligible:
            return self.reasons[0].message if self.reasons else f"{f} does not match the request"
        if self.reasons:
            v = self.reasons[0]
            return f"no {f} quota left ({v.code} at {v.path})"
        return f"no {f} quota left"

    def to_dict(self) -> dict[str, Any]:
        """The REST shape (``flavorAttempts`` of a decision)."""
        out: dict[str, Any] = {"flavor": self.flavor, "mode": self.mode, "borrowing": self.borrowing,
                               "summary": self.summary()}
        if self.reasons:
            out["reasons"] = [v.to_dict() for v in self.reasons]
        return out


@dataclass(frozen=True, slots=True)
class Choice:
    """The flavors chosen for a request and what the search saw.

    ``resource`` is what the request is charged (its plain names and, for each chosen flavor, the
    flavored names); ``flavors`` maps each requested resource that is counted per flavor to its flavor.
    ``mode`` is the worst over the groups (Fit, Preempt, or NoFit when some group has no usable flavor).
    """

    resource: Resource
    flavors: dict[str, str]
    mode: str
    borrowing: int = 0
    attempts: tuple[Attempt, ...] = ()
    #: when no flavor is usable at all (``mode`` NoFit without attempts): why
    problem: Violation | None = None
    groups: dict[str, str] = field(default_factory=dict)

    def reasons(self) -> list[Violation]:
        """Why the request cannot have any flavor now: every tried flavor's reasons, each message
        saying which flavor it is about."""
        out: list[Violation] = []
        if self.problem is not None:
            out.append(self.problem)
        for a in self.attempts:
            for v in a.reasons:
                msg = v.message if a.ineligible else f"flavor {a.flavor}: {v.message}"
                out.append(Violation(v.policy, v.code, v.path, msg, v.resource))
        return out

    def summary(self) -> str:
        """The attempts in one line: ``no a100 quota left: …; h100 fits by borrowing from queue root``."""
        return "; ".join(a.summary() for a in self.attempts)


def should_try_next(mode: str, borrowing: int, fungibility: FungibilityConfig) -> bool:
    """KQ-F6 (``shouldTryNextFlavor``): go on past a flavor in ``mode`` at ``borrowing``."""
    if mode == NOFIT:
        return True
    if mode == PREEMPT and fungibility.when_can_preempt == "TryNextFlavor":
        return True
    return borrowing > 0 and fungibility.when_can_borrow == "TryNextFlavor"


def is_preferred(a: Attempt, b: Attempt | None, fungibility: FungibilityConfig) -> bool:
    """KQ-F7 (``isPreferred``): ``a`` is strictly better than ``b`` (None: nothing yet)."""
    if a.mode == NOFIT:
        return False
    if b is None or b.mode == NOFIT:
        return True
    ra, rb = _RANK[a.mode], _RANK[b.mode]
    if fungibility.preference == "PreemptionOverBorrowing":
        if a.borrowing != b.borrowing:
            return a.borrowing < b.borrowing
        return ra > rb
    if ra != rb:
        return ra > rb
    return a.borrowing < b.borrowing


def choose(catalog: Catalog, resource: Resource, request: FlavorRequest, order: Sequence[str] | None,
           fungibility: FungibilityConfig | None, evaluator: Evaluator, *, queue: str,
           pinned: Mapping[str, str] | None = None) -> Choice | None:
    """The flavors of a request for ``resource`` in ``queue`` whose flavor list is ``order`` (None: every
    flavor, in the partition's order), or None when it asks for nothing counted per flavor.

    ``pinned`` (group's first resource → flavor) fixes groups without a search (a flavor named by the
    request, a placeholder's flavor, a preemption already planned for a flavor).
    """
    groups = catalog.groups_asked(resource)
    if not groups:
        return None
    fung = fungibility or _DEFAULT_FUNGIBILITY
    chosen: dict[str, str] = dict(pinned or {})
    attempts: list[Attempt] = []
    worst, level = FIT, 0
    listed = list(order) if order is not None else list(catalog.flavors)
    for g in groups:
        key = g.resources[0]
        if key in chosen:
            continue
        candidates = [f for f in listed if f in g.flavors]
        if not candidates:
            problem = Violation(policy="flavor", code="flavor.none", path=queue,
                                message=f"queue {queue} may use no flavor that counts "
                                        f"{', '.join(r for r in g.resources if resource.get(r))} "
                                        f"(its flavors: {', '.join(listed) or 'none'})")
            return Choice(resource, {}, NOFIT, 0, tuple(attempts), problem)
        best: Attempt | None = None
        for f in candidates:
            why = catalog.eligible(f, request)
            if why is not None:
                attempts.append(Attempt(f, NOFIT, 0, (Violation("flavor", "flavor.nomatch", queue, why),),
                                        ineligible=True))
                continue
            trial, _ = catalog.charge(resource, {**chosen, key: f})
            names = [flavored(r, f) for r in g.resources if resource.get(r)]
            borrowing, at = evaluator.borrowing(trial, names)
            reasons = evaluator.check(trial)
            if not reasons:
                mode = FIT
            elif evaluator.preemptable(trial, reasons):
                mode = PREEMPT
            else:
                mode = NOFIT
            attempt = Attempt(f, mode, borrowing, tuple(reasons), at)
            attempts.append(attempt)
            if mode != NOFIT and not should_try_next(mode, borrowing, fung):
                best = attempt
                break
            if is_preferred(attempt, best, fung):
                best = attempt
        if best is None:
            return Choice(resource, {}, NOFIT, 0, tuple(attempts))
        chosen[key] = best.flavor
        if _RANK[best.mode] < _RANK[worst]:
            worst = best.mode
        level = max(level, best.borrowing)
    charged, names_of = catalog.charge(resource, chosen)
    return Choice(charged, names_of, worst, level, tuple(attempts), groups=dict(chosen))
