"""What waiting applications need, as the wake index keeps it (issue 38): the least a queue's room
must hold for one of their asks (:data:`Need`), what a reservation in force must cover to hold them all
back (:data:`HeldSummary`), both per priority (:data:`Bands`), and the tests on them. Its own module,
below :mod:`quotaplane.scheduling.wake` (which re-exports these names) and the cycle's gates."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.queues.queue import Queue
    from quotaplane.scheduling.asks import Ask

__all__ = ["Band", "Bands", "HeldSummary", "Need", "band_fit", "bands_of", "fits_at", "held_summary",
           "merge_bands", "merge_held", "need_of", "refusal", "summary_of_bands"]


#: What an application waiting on a ``q:`` key needs at that queue at least: (name, amount) pairs, the
#: names every one of its asks waiting on the key requests, each at the least of their amounts (None:
#: not known, woken whenever the key is freed). Interned: applications with the same sizes share one.
Need = tuple[tuple[str, int], ...] | None


def need_of(amounts: Iterable[Mapping[str, int]]) -> Need:
    """The least of ``amounts`` per name that each of them names (:data:`Need`; None when none)."""
    it = iter(amounts)
    first = next(it, None)
    if first is None:
        return None
    least = dict(first)
    for more in it:
        for name in [n for n in least if n not in more]:
            del least[name]
        for name, amount in more.items():
            if name in least and amount < least[name]:
                least[name] = amount
    return tuple(sorted(least.items())) if least else None


#: What an application waiting on an ``r:`` key asks there, over its asks waiting on it: (the earliest
#: arrival, the highest priority, the resource types each of them requests); None: not known, woken
#: whenever the key is freed.
HeldSummary = tuple[int, int, tuple[str, ...]] | None


def held_summary(asks: Iterable[Ask]) -> HeldSummary:
    """The :data:`HeldSummary` of ``asks`` (None when one of them is a gang's, or no type is common)."""
    names: set[str] | None = None
    seq, priority = -1, 0
    for ask in asks:
        if ask.placeholder or ask.task_group is not None:
            return None             # (as surely_held: a gang's ask is not passed over)
        mine = {name for name, amount in ask.resource._values.items() if amount > 0}
        if names is None:
            names, seq, priority = mine, ask.seq, ask.priority
        else:
            names &= mine
            seq, priority = min(seq, ask.seq), max(priority, ask.priority)
    return (seq, priority, tuple(sorted(names))) if names else None


#: One priority's asks of an application: (priority, the earliest arrival, the resource types each
#: requests, the least each requests of those) — what a reservation may hold back whole and what
#: must fit for one of them to be allocated (issue 38: an application's small asks held back by a
#: reservation, its large one by the cluster's size, is refused whole).
Band = tuple[int, int, tuple[str, ...], tuple[tuple[str, int], ...]]
#: an application's bands, highest priority first (None: not known)
Bands = tuple[Band, ...] | None


def bands_of(asks: Iterable[Ask]) -> Bands:
    """The :data:`Bands` of ``asks`` (None when one is a gang's, or a band has no common type)."""
    by: dict[int, list[Ask]] = {}
    for ask in asks:
        if ask.placeholder or ask.task_group is not None:
            return None
        by.setdefault(ask.priority, []).append(ask)
    out: list[Band] = []
    for priority in sorted(by, reverse=True):
        found = by[priority]
        summary = held_summary(found)
        need = need_of([a.resource._values for a in found])
        if summary is None or need is None:
            return None
        out.append((priority, summary[0], summary[2], need))
    return tuple(out)


def merge_bands(a: Bands, b: Bands) -> Bands:
    """The :data:`Bands` of two sets of asks together (None when either is unknown)."""
    if a is None or b is None:
        return None
    by = {band[0]: band for band in a}
    for band in b:
        was = by.get(band[0])
        merged = band if was is None else _merge_band(was, band)
        if merged is None:
            return None
        by[band[0]] = merged
    return tuple(by[p] for p in sorted(by, reverse=True))


def _merge_band(a: Band, b: Band) -> Band | None:
    """Two bands of one priority together (None: no type in common)."""
    names = tuple(n for n in a[2] if n in b[2])
    need = need_of((dict(a[3]), dict(b[3])))
    if not names or need is None:
        return None
    return (a[0], min(a[1], b[1]), names, need)


def summary_of_bands(bands: Bands) -> HeldSummary:
    """The :data:`HeldSummary` of all the asks of ``bands``."""
    if not bands:
        return None
    names = tuple(n for n in bands[0][2] if all(n in b[2] for b in bands))
    return (min(b[1] for b in bands), bands[0][0], names) if names else None


def merge_held(a: HeldSummary, b: HeldSummary) -> HeldSummary:
    """The :data:`HeldSummary` of two sets of asks together (None when either is unknown)."""
    if a is None or b is None:
        return None
    names = tuple(n for n in a[2] if n in b[2])
    return (min(a[0], b[0]), max(a[1], b[1]), names) if names else None


def refusal(q: Queue, bands: Bands, holds: Callable[[Queue, HeldSummary], str | None]
            ) -> tuple[tuple[str, ...], list[Need] | None]:
    """Whether every ask of ``bands`` would be refused for the room at ``q`` or a reservation in force
    on ``q``'s chain: (the paths of the reservations holding back a band whole, none when none does;
    the needs of the bands they do not hold, each of which exceeds ``q``) — ((), None) when some band
    may fit."""
    if not bands:
        return (), None
    paths: list[str] = []
    others: list[Need] = []
    for priority, seq, names, need in bands:
        found = holds(q, (seq, priority, names))
        if found is not None:
            paths.append(found)
        elif fits_at(q, need):
            return (), None
        else:
            others.append(need)
    return tuple(dict.fromkeys(paths)), others


def band_fit(pairs: Sequence[tuple[Queue, Need]], bands: Bands,
             holds: Callable[[Queue, HeldSummary], str | None]) -> tuple[bool, tuple[str, ...], list[Need]]:
    """Whether some band of ``bands`` is held back whole by no reservation in force (on the chain of
    the deepest queue of ``pairs``) and may fit one of ``pairs``' queues; else the paths of the
    reservations holding a band whole and the needs of the bands none holds."""
    if not bands or not pairs:
        return True, (), []
    # the deepest queue: its chain holds every other one's
    deepest = max((q for q, _ in pairs), key=lambda q: len(q.chain))
    paths: list[str] = []
    others: list[Need] = []
    for priority, seq, names, need in bands:
        found = holds(deepest, (seq, priority, names))
        if found is not None:
            paths.append(found)
        elif any(fits_at(q, need) and fits_at(q, n) for q, n in pairs):
            return True, (), []
        else:
            others.append(need)
    return False, tuple(dict.fromkeys(paths)), others


def fits_at(q: Queue, need: Need) -> bool:
    """An ask needing at least ``need`` may fit under queue ``q``'s max (the cluster's at the root):
    False only when every such ask would exceed it — exactly the per-queue test of
    :meth:`~quotaplane.queues.tree.QueueTree.over_max` (M-2)."""
    return need is None or q.fits_max(need)
