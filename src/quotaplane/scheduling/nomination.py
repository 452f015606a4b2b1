"""Kueue's nomination of a head workload for the fair-sharing tournament (KQ-S4, docs/fair-sharing.md).

Kueue assigns a head workload's flavors before its fair-sharing iterator compares the queues' shares with
each head added, so what a head asks of a resource counted per flavor counts under the flavor it would
get. :class:`HeadCharger` answers that for :func:`quotaplane.scheduling.order.candidates`: the flavor
search of :func:`quotaplane.flavors.assign.choose` (the leaf's flavors and fungibility) judged on the
queue tree's quotas alone — as Kueue's flavor assigner judges it — changing nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from quotaplane.errors import InputError
from quotaplane.flavors.assign import NOFIT, choose
from quotaplane.flavors.catalog import Catalog, FlavorRequest
from quotaplane.policies.protocol import Violation
from quotaplane.queues.fair import FairShares
from quotaplane.resources import Resource

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.queues.queue import FairOrder, Queue
    from quotaplane.scheduling.asks import Ask

__all__ = ["AsAsked", "HeadCharger", "borrowing_level", "head_charger"]

_ANYWHERE = FlavorRequest()
_OVER = Violation("queue", "queue.max", "", "over a queue's quota")


def borrowing_level(guaranteed_of: Callable[[Queue], Mapping[str, int]], leaf: Queue, resource: Resource,
                    names: Sequence[str]) -> tuple[int, str]:
    """KQ-F5 in the queue tree: 0 when the leaf's guaranteed holds the request, else the number of
    queues up the chain to the first whose (effective) guaranteed holds it; the root's place when
    none does. With the queue whose guaranteed holds it (``""`` at level 0 or when none does)."""
    chain = leaf.chain
    for level, q in enumerate(chain):
        if q.is_root:
            break
        guaranteed = guaranteed_of(q)
        used = q._alloc
        if all(used.get(n, 0) + resource.get(n, 0) <= guaranteed.get(n, 0) for n in names):
            return level, "" if level == 0 else q.path
    return len(chain) - 1, ""


class _QuotaEvaluator:
    """The flavor search's questions answered from the queue tree's quotas alone, as Kueue's flavor
    assigner answers them for a head workload (no node, user or group limit; no preemption plan)."""

    __slots__ = ("fair", "leaf")

    def __init__(self, fair: FairShares, leaf: Queue) -> None:
        self.fair = fair
        self.leaf = leaf

    def check(self, resource: Resource) -> list[Violation]:
        fits = self.fair.fits
        if fits is None or fits(self.leaf.path, resource._values):
            return []
        return [_OVER]              # why is never shown: only the flavor chosen is used

    def borrowing(self, resource: Resource, names: Sequence[str]) -> tuple[int, str]:
        return borrowing_level(self.fair.guaranteed, self.leaf, resource, names)

    def preemptable(self, resource: Resource, reasons: list[Violation]) -> bool:
        return False


class HeadCharger:
    """A head ask as its queues' fair-sharing shares count it (KQ-S4): Kueue nominates a head workload —
    assigns its flavors — before the tournament compares shares with it added, so a request for a
    resource counted per flavor counts under the flavor the search would give it now. The search
    (:func:`quotaplane.flavors.assign.choose`, the leaf's flavors and fungibility) is judged on quota
    alone (the queue maxima, the root's size per flavor, borrowing and lending limits), as Kueue's flavor
    assigner judges it; when no flavor fits, the head counts under the first flavor of its list it may
    use (Kueue's would need preemption there, or the workload waits as inadmissible)."""

    __slots__ = ("_catalog", "_charged", "_fair")

    def __init__(self, fair: FairShares, catalog: Catalog) -> None:
        self._fair = fair
        self._catalog = catalog
        # (leaf, request, its constraints' identity) → the request charged: asks alike in a leaf get the
        # same flavors while no usage changes (a pending ask's constraints live as long as it waits)
        self._charged: dict[tuple[str, Resource, int], Mapping[str, int]] = {}

    def forget(self) -> None:
        """Usage changed (an ask was allocated): the flavors found so far may no longer be the ones."""
        self._charged.clear()

    def __call__(self, leaf: Queue, ask: Ask) -> Mapping[str, int]:
        """``ask``'s request, in ``leaf``, with its flavored names added as it would be charged."""
        key = (leaf.path, ask.resource, id(ask.constraints))
        found = self._charged.get(key)
        if found is None:
            found = self._charged[key] = self._charge(leaf, ask)
        return found

    def _charge(self, leaf: Queue, ask: Ask) -> Mapping[str, int]:
        catalog = self._catalog
        try:
            resource, pins = catalog.pins_in(ask.resource)
        except InputError:                  # refused when the ask was added: count it as asked
            return ask.resource._values
        constraints = ask.constraints or _ANYWHERE
        order = leaf.effective_flavors()
        choice = choose(catalog, resource, constraints, order, leaf.effective_fungibility(),
                        _QuotaEvaluator(self._fair, leaf), queue=leaf.path, pinned=pins)
        if choice is None:                  # nothing counted per flavor
            return ask.resource._values
        if choice.mode != NOFIT:
            return choice.resource._values
        return self._first_usable(resource, pins, constraints, order)

    def _first_usable(self, resource: Resource, pins: Mapping[str, str], constraints: FlavorRequest,
                      order: Sequence[str] | None) -> Mapping[str, int]:
        """``resource`` charged, in each group it asks from, under the first flavor of ``order`` it may
        use (a flavor it names itself kept)."""
        catalog = self._catalog
        listed = list(order) if order is not None else list(catalog.flavors)
        chosen = dict(pins)
        for g in catalog.groups_asked(resource):
            first = next((f for f in listed if f in g.flavors and catalog.eligible(f, constraints) is None),
                         None)
            if first is not None:
                chosen.setdefault(g.resources[0], first)
        return catalog.charge(resource, chosen)[0]._values


class AsAsked:
    """A head as asked: the partition has no flavors."""

    __slots__ = ()

    def __call__(self, leaf: Queue, ask: Ask) -> Mapping[str, int]:
        """``ask``'s request as it is."""
        return ask.resource._values

    def forget(self) -> None:
        """Nothing is kept."""


_AS_ASKED = AsAsked()


def head_charger(fair: FairOrder) -> HeadCharger | AsAsked:
    """The :class:`HeadCharger` of a tree with fair sharing on (:class:`AsAsked` without flavors)."""
    if not isinstance(fair, FairShares) or not fair.flavor_configs:
        return _AS_ASKED
    return HeadCharger(fair, Catalog(fair.flavor_configs))
