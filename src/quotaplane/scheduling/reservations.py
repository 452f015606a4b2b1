"""Reservations: a waiting ask that later asks keep overtaking holds the quota it waits for (issue 13).

Without them a large ask can wait forever: each time quota frees at the queue that blocks it, a smaller,
later ask fits first and takes it (Kueue's BestEffortFIFO starvation). YuniKorn answers this with
reservations; quotaplane reserves *quota* (it places nothing on nodes):

- When an ask starts to wait, the **places** that hold it back are noted: the queues whose ``max`` it
  exceeds (``root``: the cluster), else the user and group ``maxresources`` limits it exceeds — the wake
  keys of :mod:`quotaplane.scheduling.wake`.
- Each allocation of a *later* request (a higher arrival number, or a direct allocation) of the same or
  a lower priority that consumes at one of those places **overtakes** the ask. After
  ``reservation.overtakes`` overtakes (default :data:`DEFAULT_OVERTAKES`, at most
  :data:`MAX_OVERTAKES`) — or, when ``reservation.delay`` is set, once it has waited that long — its
  reservation is **in force**.
- While it is in force, a later request of the same or a lower priority that would consume at a
  reserved place and shares a resource type with the ask is refused with ``queue.reserved``, naming
  the reserving ask and the place. Requests that do not touch the place go on; a higher priority is
  never held back (priorities come first). Among several reservations at a place the oldest ask wins.
- The reservation ends when the ask is allocated or withdrawn; the asks it held back are retried.

``reservation.policy: disabled`` on a queue (inherited like every property) lets its asks wait without
ever reserving: pure best-effort backfill.

Everything here follows journalled events (ask arrivals, allocations) and the clock, never which asks a
cycle happened to try: replay rebuilds it, and incremental and full cycles agree on it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from quotaplane.policies.protocol import Violation
from quotaplane.queues.properties import parse_duration, parsed_once

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.queues.queue import Queue
    from quotaplane.resources import Resource
    from quotaplane.scheduling.asks import Ask

__all__ = [
    "DEFAULT_OVERTAKES",
    "MAX_OVERTAKES",
    "PROP_RESERVATION_DELAY",
    "PROP_RESERVATION_OVERTAKES",
    "PROP_RESERVATION_POLICY",
    "RESERVED",
    "Reservations",
    "place_path",
    "reservation_settings",
]

PROP_RESERVATION_POLICY = "reservation.policy"
PROP_RESERVATION_OVERTAKES = "reservation.overtakes"
PROP_RESERVATION_DELAY = "reservation.delay"
#: how many overtakes an ask suffers before its reservation is in force, unless the queue says otherwise
DEFAULT_OVERTAKES = 3
#: the largest ``reservation.overtakes`` accepted (a larger or invalid value counts as the default)
MAX_OVERTAKES = 10
#: the violation code of a request held back by a reservation
RESERVED = "queue.reserved"

_NEVER = float("inf")


_SETTINGS: dict[int, tuple[Mapping[str, str], tuple[bool, int, float]]] = {}


def reservation_settings(leaf: Queue) -> tuple[bool, int, float]:
    """(reserves at all, overtakes bound, delay in seconds or 0) for the asks of ``leaf``."""
    return parsed_once(leaf.properties, _SETTINGS, _read_settings)


def _read_settings(props: Mapping[str, str]) -> tuple[bool, int, float]:
    if str(props.get(PROP_RESERVATION_POLICY, "default")).strip().lower() == "disabled":
        return False, DEFAULT_OVERTAKES, 0.0
    raw = str(props.get(PROP_RESERVATION_OVERTAKES, "")).strip()
    bound = int(raw) if raw.isdigit() and 1 <= int(raw) <= MAX_OVERTAKES else DEFAULT_OVERTAKES
    delay = parse_duration(props.get(PROP_RESERVATION_DELAY), 0.0)
    return True, bound, max(delay, 0.0)


def place_path(key: str, user: str) -> str:
    """The queue path of a place key (``q:<path>``, ``g:<path>``, ``u:<user>:<path>``)."""
    if key.startswith("u:"):
        return key[len(user) + 3:]
    return key[2:]


#: how many distinct sets of places :class:`Reservations` shares before it starts over
_SHARED_MAX = 65_536


class Reservations:
    """The places waiting asks watch, the reservations in force, and the checks against them."""

    __slots__ = ("_force", "_limits", "_shared", "_timed", "_watch")

    def __init__(self) -> None:
        #: place → waiting asks watching it (arrival order)
        self._watch: dict[str, dict[str, Ask]] = {}
        #: place → asks whose reservation is in force there (a cache of :meth:`in_force`)
        self._force: dict[str, dict[str, Ask]] = {}
        #: (time the reservation comes into force by its delay, seq, key, ask)
        self._timed: list[tuple[float, int, str, Ask]] = []
        #: how many watched places are user or group limits (none: allocations look at queues only)
        self._limits = 0
        #: one copy of each set of places (their keys, their paths): the asks held back at the same
        #: places share it (most asks of a leaf do), rather than two tuples and their strings each
        self._shared: dict[tuple[tuple[str, str], ...], tuple[tuple[str, ...], tuple[str, ...]]] = {}

    @property
    def active(self) -> bool:
        """Some reservation is in force or may come into force by its delay."""
        return bool(self._force) or bool(self._timed)

    @property
    def watching(self) -> bool:
        """Some waiting ask watches a place (allocations may overtake it)."""
        return bool(self._watch)

    def enter(self, ask: Ask, places: Iterable[tuple[str, str]], bound: int, delay: float) -> None:
        """``ask`` starts to wait, held back at ``places`` ((key, queue path) pairs; none: it never
        reserves)."""
        pairs = tuple(places)
        shared = self._shared.get(pairs)
        if shared is None:
            if len(self._shared) >= _SHARED_MAX:      # bounded: distinct place sets are few in practice
                self._shared.clear()
            shared = self._shared[pairs] = (tuple(k for k, _ in pairs), tuple(p for _, p in pairs))
        ask.places, ask.place_paths = shared
        ask.bound = bound
        ask.reserve_at = ask.created + delay if delay > 0 and ask.places else _NEVER
        self._watch_at(ask)
        if ask.reserve_at != _NEVER:
            heapq.heappush(self._timed, (ask.reserve_at, ask.seq, ask.allocation_key, ask))
        if ask.places and ask.overtaken >= bound:       # a snapshot restore puts it back in force
            self._promote(ask)

    def _watch_at(self, ask: Ask) -> None:
        """``ask`` watches its places (a user or group limit counts in ``_limits``)."""
        key = ask.allocation_key
        for place in ask.places:
            watchers = self._watch.get(place)
            if watchers is None:
                watchers = self._watch[place] = {}
                if place[0] != "q":
                    self._limits += 1
            watchers[key] = ask

    def leave(self, ask: Ask, now: float) -> list[str]:
        """``ask`` no longer waits; return the paths where its reservation was in force (their held-back
        requests may go now)."""
        key = ask.allocation_key
        ended = list(ask.place_paths) if self.in_force(ask, now) else []
        for place in ask.places:
            for index in (self._watch, self._force):
                asks = index.get(place)
                if asks is not None and asks.pop(key, None) is not None and not asks:
                    del index[place]
                    if index is self._watch and place[0] != "q":
                        self._limits -= 1
        return ended

    def in_force(self, ask: Ask, now: float) -> bool:
        """The ask's reservation is in force at ``now`` (by overtakes or by its delay)."""
        return bool(ask.places) and (ask.overtaken >= ask.bound or now >= ask.reserve_at)

    def consumed_in(self, leaf: Queue, user: str, priority: int, seq: float) -> None:
        """:meth:`consumed` for an allocation of ``user`` in ``leaf`` (its chain's places)."""
        watch = self._watch
        if not watch:
            return
        places: list[str] = []
        limits = self._limits > 0
        for q in leaf.chain:
            path = q.path
            if "q:" + path in watch:
                places.append("q:" + path)
            if limits:
                places += (f"u:{user}:{path}", "g:" + path)
        if places:
            self.consumed(places, priority, seq)

    def consumed(self, places: Iterable[str], priority: int, seq: float) -> None:
        """An allocation of priority ``priority`` and arrival number ``seq`` (``inf``: a direct one)
        consumed at ``places``: it overtakes the earlier asks of the same or a higher priority
        watching any of them (once each)."""
        for ask in self._overtaken(places, priority, seq):
            ask.overtaken += 1
            if ask.overtaken == ask.bound:
                self._promote(ask)

    def unconsumed(self, places: Iterable[str], priority: int, seq: float) -> None:
        """Reverse :meth:`consumed` exactly (an allocation that could not be journalled was undone)."""
        for ask in self._overtaken(places, priority, seq):
            if ask.overtaken == ask.bound:
                self._demote(ask)
            ask.overtaken -= 1

    def _overtaken(self, places: Iterable[str], priority: int, seq: float) -> list[Ask]:
        """The waiting asks an allocation (``priority``, arrival ``seq``) at ``places`` overtakes."""
        watch = self._watch
        found: dict[str, Ask] = {}
        if not watch:
            return []
        for place in places:
            for key, ask in watch.get(place, {}).items():
                if ask.seq < seq and ask.priority >= priority:
                    found.setdefault(key, ask)
        return list(found.values())

    def reenter(self, ask: Ask) -> None:
        """``ask`` waits again after its allocation was undone: the places it watched, as before."""
        delay = ask.reserve_at - ask.created if ask.reserve_at != _NEVER else 0.0
        self.enter(ask, zip(ask.places, ask.place_paths, strict=True), ask.bound, delay)

    def _demote(self, ask: Ask) -> None:
        for place in ask.places:
            asks = self._force.get(place)
            if asks is not None and asks.pop(ask.allocation_key, None) is not None and not asks:
                del self._force[place]

    def _promote(self, ask: Ask) -> None:
        force = self._force
        for place in ask.places:
            asks = force.get(place)
            if asks is None:
                force[place] = {ask.allocation_key: ask}
                continue
            later = asks and next(reversed(asks.values())).seq > ask.seq
            asks[ask.allocation_key] = ask
            if later:           # kept in arrival order: held() stops at the first that holds
                force[place] = dict(sorted(asks.items(), key=lambda item: item[1].seq))

    def _due(self, now: float) -> None:
        timed = self._timed
        while timed and timed[0][0] <= now:
            _, _, key, ask = heapq.heappop(timed)
            if ask.places and self._watch.get(ask.places[0], {}).get(key) is ask:
                self._promote(ask)

    def held(self, places: Iterable[tuple[str, str]], priority: int, seq: float, resource: Resource,
             now: float, idle: Callable[[Ask], bool]) -> list[Violation]:
        """Why a request (``priority``, arrival number ``seq``, ``resource``) consuming at ``places``
        ((key, queue path) pairs) is held back by reservations in force: one ``queue.reserved`` per
        reserved place, naming the oldest reserving ask there. ``[]``: it is not.

        A reserving ask for which ``idle`` is true (its application cannot start now for a reason
        no free quota cures) holds nothing back: what it would hold back may be the very work whose
        application keeps it from starting, and holding that would wait forever."""
        if self._timed:
            self._due(now)
        force = self._force
        if not force:
            return []
        wanted = [name for name, amount in resource._values.items() if amount > 0]
        out: list[Violation] = []
        idle_of: dict[str, bool] = {}
        for key, path in places:
            asks = force.get(key)
            if not asks:
                continue
            # in arrival order (_promote keeps them so): the oldest eligible one that is not idle
            # holds, found without looking at the rest (issue 38: with ~140 reservations in force at
            # the root, filtering and sorting them all for every check was most of a Kueue run)
            for ask in asks.values():
                if ask.seq >= seq:
                    break
                if ask.priority < priority or not _shares(ask, wanted):
                    continue
                k = ask.allocation_key
                if k not in idle_of:
                    idle_of[k] = idle(ask)
                if not idle_of[k]:
                    out.append(_violation(ask, key, path))
                    break
        return out

    def holds_all(self, place: str, seq: int, priority: int, names: Iterable[str], now: float,
                  idle: Callable[[Ask], bool]) -> bool:
        """A reservation in force at ``place`` holds back every request that arrived at ``seq`` or
        later, of ``priority`` or lower, requesting one of ``names`` at least: one older than ``seq``,
        of at least ``priority``, requesting one of ``names``, whose ``idle`` is false (:meth:`held`
        would name it or an older one for each such request)."""
        if self._timed:
            self._due(now)
        asks = self._force.get(place)
        if not asks:
            return False
        wanted = list(names)
        for ask in asks.values():
            if ask.seq >= seq:
                return False
            if ask.priority >= priority and _shares(ask, wanted) and not idle(ask):
                return True
        return False

    def first_holding(self, place: str, priority: int, names: Iterable[str], now: float,
                      idle: Callable[[Ask], bool]) -> int | None:
        """The arrival number of the oldest reservation in force at ``place`` that holds back a later
        request of ``priority`` or lower requesting one of ``names`` (None: none does):
        :meth:`holds_all` of an arrival ``seq`` is true exactly when this is below ``seq``."""
        if self._timed:
            self._due(now)
        asks = self._force.get(place)
        if not asks:
            return None
        wanted = list(names)
        for ask in asks.values():
            if ask.priority >= priority and _shares(ask, wanted) and not idle(ask):
                return ask.seq
        return None

    def in_force_asks(self) -> list[Ask]:
        """The asks whose reservation is in force somewhere (by overtakes; a delay that passed counts
        once an admission looked), oldest first."""
        found: dict[str, Ask] = {}
        for asks in self._force.values():
            for key, ask in asks.items():
                found.setdefault(key, ask)
        return sorted(found.values(), key=_arrival)

    def settings_changed(self, asks: Iterable[Ask], settings: Mapping[str, tuple[bool, int, float]],
                         leaf_of: Mapping[str, str]) -> None:
        """A new configuration: re-read every waiting ask's bound and delay from its leaf (an ask whose
        leaf stopped reserving keeps waiting without a reservation). ``settings`` by leaf path,
        ``leaf_of`` ask key → leaf path."""
        waiting = list(asks)
        self._watch.clear()
        self._force.clear()
        self._timed = []
        self._limits = 0
        for ask in waiting:
            off = (False, DEFAULT_OVERTAKES, 0.0)
            on, bound, delay = settings.get(leaf_of.get(ask.allocation_key, ""), off)
            self.enter(ask, zip(ask.places, ask.place_paths, strict=True) if on else (), bound, delay)


def _shares(ask: Ask, wanted: list[str]) -> bool:
    """``ask`` requests one of the resource types ``wanted``."""
    mine = ask.resource._values
    return any(mine.get(name, 0) > 0 for name in wanted)


def _arrival(ask: Ask) -> int:
    return ask.seq


def _violation(ask: Ask, key: str, path: str) -> Violation:
    what = {"q": f"queue {path!r}", "u": f"user limits at {path!r}", "g": f"group limits at {path!r}"}[key[0]]
    return Violation(policy="queue", code=RESERVED, path=path,
                     message=f"{what} reserved for waiting ask {ask.allocation_key!r} (priority "
                             f"{ask.priority}, overtaken {ask.overtaken} times): later requests of the "
                             f"same or a lower priority wait until it is allocated",
                     resource=None)
