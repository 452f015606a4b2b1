"""Kueue's fair sharing on the queue tree: the dominant resource share of a queue (KQ-S1 … KQ-S3;
docs/fair-sharing.md).

A queue's guaranteed plays Kueue's nominal quota and its subtree is a cohort, as for the borrowing and
lending limits (:mod:`quotaplane.queues.limits`, whose ``(SQ, local, U)`` of a queue this module
reads). For a queue ``N`` below the root, per resource name:

- **borrowed** — ``max(0, U(N) − SQ(N))``: what its subtree uses beyond its subtree quota, summed over
  the flavors of a resource counted per flavor (``nvidia.com/gpu@a100`` and ``nvidia.com/gpu@h100``
  both count for ``nvidia.com/gpu``; the plain name of such a resource is then not counted again);
- **lendable** — the *potential* of ``N``'s parent summed the same way: what the parent's subtree could
  ever give it, ``local(P) + potential(parent(P))`` capped at ``SQ(P) + borrowinglimit(P)`` and at
  ``P``'s max; the root's potential is the cluster's size (KQ-L6);
- **share** — the largest ``borrowed × 1000 / lendable`` over the resources (ties: the alphabetically
  smaller name), divided by the queue's ``fairsharing.weight`` (default 1). A queue that borrows
  nothing has share 0; a queue of weight 0 that borrows has an infinite share (KQ-S2). The root's share
  is always 0.

Shares with each queue's head ask added order admission (lower first, :meth:`FairShares.head_key`)
and choose whom fair preemption takes from (higher first, :mod:`quotaplane.scheduling.fair_preemption`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from quotaplane.config.validate_flavors import PROP_FAIR_SHARING_WEIGHT, parse_weight
from quotaplane.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.config.model import FlavorConfig
    from quotaplane.queues.limits import Limits
    from quotaplane.queues.queue import Queue

__all__ = ["MAX_INT64", "FairShares", "Share", "resource_of"]

#: the reported share of a zero-weight queue that borrows (Kueue's ``math.MaxInt64``, KQ-S3)
MAX_INT64 = 9223372036854775807

_SEPARATOR = "@"


def resource_of(name: str) -> str:
    """The resource a (possibly flavored) name counts: ``nvidia.com/gpu@a100`` → ``nvidia.com/gpu``."""
    return name.partition(_SEPARATOR)[0]


@dataclass(frozen=True, slots=True)
class Share:
    """A queue's dominant resource share (KQ-S1): the unweighted ratio (per mille of what its parent
    could lend), its weight, the dominant resource, and the names it borrows on."""

    ratio: float = 0.0
    weight: float = 1.0
    resource: str = ""
    borrowed: frozenset[str] = frozenset()

    @property
    def borrowing(self) -> bool:
        """The queue uses more than its subtree quota of some resource (KQ-L7)."""
        return bool(self.borrowed)

    @property
    def infinite(self) -> bool:
        """A zero-weight queue that borrows: greater than every other share (KQ-S2)."""
        return self.weight == 0 and self.borrowing

    @property
    def weighted(self) -> float:
        """The share compared between queues: ``ratio / weight`` (``inf`` for a zero-weight borrower)."""
        if self.infinite:
            return math.inf
        if self.ratio == 0:
            return 0.0
        return self.ratio / self.weight

    def key(self) -> tuple[int, float]:
        """The order of Kueue's ``CompareDRS``: zero-weight borrowers above everything, compared by their
        unweighted ratio; the others by the weighted share."""
        return (1, self.ratio) if self.infinite else (0, self.weighted)

    def rounded(self) -> int:
        """The reported weighted share (KQ-S3): rounded up; :data:`MAX_INT64` for a zero-weight borrower."""
        return MAX_INT64 if self.infinite else math.ceil(self.weighted)

    def borrows_on(self, names: Iterable[str]) -> bool:
        """The queue borrows on one of ``names``."""
        return any(n in self.borrowed for n in names)


ZERO = Share()


class FairShares:
    """The shares of one queue tree's queues, computed from its usage when asked (nothing is kept but
    what depends on the configuration and the cluster's size alone: potentials and lendable amounts).

    ``flavored``: the resources counted per flavor (their plain names are not counted, the flavored
    ones are); ``cluster()``: the cluster's size now (the root's potential).
    """

    __slots__ = ("_cluster", "_eg", "_lendable", "_limits", "_potential", "fits", "flavor_configs",
                 "flavored", "strategies")

    def __init__(self, limits: Limits, effective_guaranteed: Callable[[Queue], Mapping[str, int]],
                 cluster: Callable[[], Mapping[str, int]], flavored: frozenset[str],
                 strategies: tuple[str, ...], *, flavor_configs: tuple[FlavorConfig, ...] = (),
                 fits: Callable[[str, Mapping[str, int]], bool] | None = None) -> None:
        self._limits = limits
        self._eg = effective_guaranteed
        self._cluster = cluster
        self.flavored = flavored
        #: the partition's resource flavors: a head workload's flavors are chosen on quota alone
        #: (:class:`quotaplane.scheduling.flavoring.HeadCharger`, KQ-S4)
        self.flavor_configs = flavor_configs
        #: the queue tree's quota check of a request in a leaf (M-2 and the borrowing and lending limits)
        self.fits = fits
        #: Kueue's ``fairSharing.preemptionStrategies``, in order
        self.strategies = strategies
        self._potential: dict[tuple[str, str], int] = {}
        self._lendable: dict[str, dict[str, int]] = {}

    def forget(self) -> None:
        """Drop what depends on the configuration or the cluster's size (either changed)."""
        self._potential.clear()
        self._lendable.clear()

    @staticmethod
    def weight(q: Queue) -> float:
        """The queue's own ``fairsharing.weight`` (default 1; never inherited: Kueue weighs each node)."""
        text = q.own_properties.get(PROP_FAIR_SHARING_WEIGHT)
        if text is None:
            return 1.0
        try:
            return float(parse_weight(text))
        except InputError:          # refused when the configuration loads; a dynamic queue's own: 1
            return 1.0

    def guaranteed(self, q: Queue) -> Mapping[str, int]:
        """``q``'s effective guaranteed (Kueue's nominal quota here)."""
        return self._eg(q)

    def counted(self, name: str) -> bool:
        """``name`` is a quota Kueue would keep (a flavor-resource): not the plain name of a resource
        counted per flavor."""
        return _SEPARATOR in name or name not in self.flavored

    def node(self, q: Queue, name: str) -> tuple[int, int, int]:
        """``(SQ, local, U)`` of ``q`` for ``name`` (:meth:`quotaplane.queues.limits.Limits.node`)."""
        return self._limits.node(q, name)

    def borrowed(self, q: Queue, extra: Mapping[str, int] | None = None) -> dict[str, int]:
        """Per counted name, what ``q`` uses beyond its subtree quota (only names it borrows on); with
        ``extra`` (a head workload's request) added to its usage."""
        out: dict[str, int] = {}
        names = set(self._eg(q)) | set(q._alloc)
        if extra:
            names.update(extra)
        for name in names:
            if not self.counted(name):
                continue
            sq, _, used = self._limits.node(q, name)
            if extra:
                used += extra.get(name, 0)
            if used > sq:
                out[name] = used - sq
        return out

    def share(self, q: Queue, extra: Mapping[str, int] | None = None) -> Share:
        """``q``'s dominant resource share now (KQ-S1, KQ-S2), with ``extra`` added to its usage if
        given; the root's is 0."""
        parent = q.parent
        if parent is None:
            return ZERO
        borrowed = self.borrowed(q, extra)
        weight = self.weight(q)
        if not borrowed:
            return Share(weight=weight)
        per_resource: dict[str, int] = {}
        for name, amount in borrowed.items():
            r = resource_of(name)
            per_resource[r] = per_resource.get(r, 0) + amount
        lendable = self.lendable(parent)
        ratio, dominant = 0.0, ""
        for r in sorted(per_resource):
            total = lendable.get(r, 0)
            if total > 0:
                value = per_resource[r] * 1000.0 / total
                if value > ratio:
                    ratio, dominant = value, r
        return Share(ratio, weight, dominant, frozenset(borrowed))

    def status(self, q: Queue) -> dict[str, object]:
        """What ``standing`` shows of ``q`` (Kueue's ``status.fairSharing``): the reported weighted share,
        the dominant resource, the weight and whether it borrows."""
        s = self.share(q)
        return {"weightedShare": s.rounded(), "dominantResource": s.resource, "weight": s.weight,
                "borrowing": s.borrowing}

    def order_key(self, q: Queue) -> tuple[bool, tuple[int, float]]:
        """The admission order's key of ``q`` among its siblings: not borrowing first, then the lower
        share (KQ-S4)."""
        share = self.share(q)
        return share.borrowing, share.key()

    def head_key(self, q: Queue, request: Mapping[str, int]) -> tuple[bool, tuple[int, float]]:
        """``q``'s place among its siblings with the head workload of its subtree (``request``) added to
        its usage (KQ-S4, Kueue's fair-sharing iterator): not borrowing, with it, on the resources the
        workload requests first, then the lower share with it. Costs one share of ``q`` alone.

        ``request`` is the head as charged (its flavors chosen: :class:`~quotaplane.scheduling.flavoring.
        HeadCharger`); the plain name of a resource counted per flavor that has no flavor in it (no
        flavor could be chosen) counts as borrowing when any flavor of that resource is borrowed on."""
        share = self.share(q, request)
        charged = {resource_of(n) for n in request if _SEPARATOR in n}
        wanted = {resource_of(n) for n in request if not self.counted(n)} - charged
        borrowing = share.borrows_on(request) or any(resource_of(n) in wanted for n in share.borrowed)
        return borrowing, share.key()

    def lendable(self, parent: Queue) -> dict[str, int]:
        """Per resource, what ``parent``'s subtree could lend a child: the potential of ``parent``
        summed over the flavors of the resource (Kueue's ``calculateLendable``)."""
        found = self._lendable.get(parent.path)
        if found is None:
            found = {}
            for name in self._cluster():
                if self.counted(name):
                    r = resource_of(name)
                    found[r] = found.get(r, 0) + self.potential(parent, name)
            self._lendable[parent.path] = found
        return found

    def potential(self, q: Queue, name: str) -> int:
        """The most ``q``'s subtree could ever use of ``name`` with nothing used elsewhere (KQ-L6): the
        cluster's size at the root; below, its private part plus its parent's potential, capped at its
        subtree quota plus its borrowing limit and at its max."""
        key = (q.path, name)
        found = self._potential.get(key)
        if found is not None:
            return found
        if q.parent is None:
            found = max(0, self._cluster().get(name, 0))
        else:
            sq, local, _ = self._limits.node(q, name)
            found = local + self.potential(q.parent, name)
            if q.borrowing_limit is not None and name in q.borrowing_limit:
                found = min(found, sq + q.borrowing_limit.get(name, 0))
            if q.max is not None and name in q.max:
                found = min(found, q.max.get(name, 0))
        self._potential[key] = found
        return found
