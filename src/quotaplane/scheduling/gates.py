"""An incremental cycle's gates: what it re-tests at each woken application's turn (issue 38).

The wake index (:mod:`quotaplane.scheduling.wake`) says which applications a change could have
unblocked; the cycle then takes them in its own order, and its first allocations may use up the room
that woke the rest. This module passes those over without looking at their asks, and ends the cycle
once none is left that could fit — within the contract of :mod:`quotaplane.scheduling.wake`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, cast

from quotaplane.scheduling.wake import HeldSummary, Need, WakeIndex, fits_at, merge_held

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.queues.queue import Queue

__all__ = ["Gates"]

_UNSET = object()


class Gates:
    """What an incremental cycle re-tests at each woken application's turn (issue 38).

    A release frees room at the queues of its chain, and wakes every application whose need fits
    there (:meth:`~quotaplane.scheduling.wake.WakeIndex.woken`); the cycle takes them in its own
    order, and its first allocations may use that room up, or overtake an ask into a reservation in
    force that keeps it. An application woken by ``q:`` keys alone whose needs fit none of those
    queues any more at its turn, or all of whose asks such a reservation holds back, would be refused
    at every one of its asks, changing nothing (the contract of :mod:`quotaplane.scheduling.wake`):
    it is passed over without a look at its asks, keeps its keys (it was not retried,
    :meth:`looked_at`) and, when held, waits on the reservation too (``r:``). Once every woken
    application is of that kind, none with room left, the cycle ends (:meth:`exhausted`): each later
    one would be refused too. The cost of a release is then what it allocates, not what waits."""

    __slots__ = ("_gates", "_holds", "_index", "_live", "_made", "_now", "_pairs", "_spent", "_spent_at",
                 "_summary", "retried")

    def __init__(self, gates: Mapping[str, list[tuple[Queue, Need]] | None], only: Iterable[str],
                 index: WakeIndex, holds: Callable[[], Callable[[Queue, HeldSummary], str | None] | None]
                 ) -> None:
        self._gates = gates
        self._index = index
        #: a fresh reservation test (the reservations in force change with allocations only)
        self._holds = holds
        self._now: Callable[[Queue, HeldSummary], str | None] | None = None
        #: the applications retried (their asks looked at): the only gated ones re-indexed after
        self.retried: dict[str, None] = {}
        # per (queue, need) that woke some application: the applications (their HeldSummary merged
        # when first needed, :meth:`exhausted`)
        pairs: dict[tuple[int, Need], tuple[Queue, Need, list[str]]] = {}
        live = False
        for app in only:
            found = gates.get(app)
            if found is None:
                live = True
                break
            for q, need in found:
                entry = pairs.get((id(q), need))
                if entry is None:
                    pairs[(id(q), need)] = (q, need, [app])
                else:
                    entry[2].append(app)
        self._live = live
        self._pairs = list(pairs.values())
        self._made = self._spent_at = -1
        self._summary: dict[int, HeldSummary | object] = {}
        self._spent = False

    def _test(self, made: int) -> Callable[[Queue, HeldSummary], str | None] | None:
        if made != self._made:
            self._made = made
            self._now = self._holds()
        return self._now

    def open(self, application_id: str, made: int) -> bool:
        """Retry ``application_id`` now (``made``: the cycle's allocations so far): something other
        than a ``q:`` key woke it, or one of the queues that did still has room for its need there
        and no reservation in force holds back all its asks."""
        pairs = self._gates.get(application_id)
        if pairs is not None:
            room = [q for q, need in pairs if fits_at(q, need)]
            if not room:
                return False
            holds = self._test(made)
            if holds is not None and not self._index.may_fit(application_id, pairs, holds):
                return False
        self.retried[application_id] = None
        return True

    def looked_at(self, application_id: str) -> bool:
        """The cycle looked at ``application_id``'s asks (or may have: not woken by ``q:`` keys alone)."""
        return self._gates.get(application_id) is None or application_id in self.retried

    def keys_of(self, application_id: str) -> list[str]:
        """The ``q:`` keys of the queues whose room ``application_id`` is gated by."""
        return ["q:" + q.path for q, _ in self._gates.get(application_id) or ()]

    def looked_at_in(self, only: Mapping[str, Queue]) -> dict[str, Queue]:
        """The applications of ``only`` the cycle looked at."""
        return {app: leaf for app, leaf in only.items() if self.looked_at(app)}

    def exhausted(self, made: int) -> bool:
        """No application left to retry can be allocated (``made``: the cycle's allocations so far;
        re-tested only when it changed): only ``q:`` keys woke them, and at each queue that did either
        no need that woke one fits any more or a reservation in force holds back every ask of all of
        them."""
        if self._live:
            return False
        if made != self._spent_at:
            self._spent_at = made
            holds = self._test(made)
            self._spent = not any(fits_at(q, need) and (holds is None or holds(q, self._merged(i)) is None)
                                  for i, (q, need, _) in enumerate(self._pairs))
        return self._spent

    def _merged(self, i: int) -> HeldSummary:
        """The HeldSummary of all the applications of pair ``i`` (merged once)."""
        found = self._summary.get(i, _UNSET)
        if found is _UNSET:
            apps = self._pairs[i][2]
            found = self._index.summary_of(apps[0])
            for app in apps[1:]:
                if found is None:
                    break
                found = merge_held(found, self._index.summary_of(app))
            self._summary[i] = found
        return cast(HeldSummary, found)
