"""How long allocations hold their resources: the observed hold-time distributions of a partition.

The forecast (:mod:`quotaplane.eta.forecast`) needs, for a running allocation that declared no
runtime, when it will probably end. The answer comes from what was observed: every allocation that
ended (released, preempted, removed with its node, replaced) adds its hold time — the time from its
``allocated`` event to its end, both the times the events carry, never the wall clock — to the
distribution of its leaf queue and of its user. The holds that ended before the distributions were
attached (before a restart, or before the first forecast) are read once from the partition's journal,
so a restart keeps them — all but those whose start a compaction removed.

A distribution is kept in bounded space as the history's log-linear histogram buckets
(:func:`quotaplane.history.sketch.bucket_of`: exact below 128 ms, within 0.8 % above), in
milliseconds. A quantile is the nearest-rank quantile; the *remaining* hold of an allocation that has
already run ``age`` seconds is taken from the holds longer than ``age`` only (a job that has run an
hour is not expected to end in the median's ten minutes). Fewer than :data:`MIN_BASIS` such holds is
no basis: the answer is None ("unknown"), never an invented number.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import quotaplane.events as E
from quotaplane.errors import JournalCompactedError
from quotaplane.history.sketch import bucket_low, bucket_of, bucket_value
from quotaplane.journal.base import Journal
from quotaplane.partition.facade import Partition
from quotaplane.state.handlers import PartitionState

__all__ = ["MIN_BASIS", "HoldEstimate", "HoldSketch", "HoldTimes"]

#: the fewest observed holds (longer than the allocation's age) a remaining-time estimate rests on
MIN_BASIS = 5


class HoldSketch:
    """One hold-time distribution: bucket counts of milliseconds, merged exactly by adding counts."""

    __slots__ = ("_keys", "counts", "total")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.total = 0
        self._keys: list[int] | None = []       # sorted bucket keys; None: to be sorted again

    def add(self, seconds: float) -> None:
        """Count one hold of ``seconds`` (negative times, from a clock set back, count as zero)."""
        key = bucket_of(max(0, round(seconds * 1000)))
        if key not in self.counts:
            self._keys = None
        self.counts[key] = self.counts.get(key, 0) + 1
        self.total += 1

    def _sorted(self) -> list[int]:
        if self._keys is None:
            self._keys = sorted(self.counts)
        return self._keys

    def longer_than(self, seconds: float) -> int:
        """How many holds were longer than ``seconds`` (by their bucket's value)."""
        keys = self._sorted()
        start = bisect.bisect_right(keys, bucket_of(max(0, round(seconds * 1000))))
        return sum(self.counts[k] for k in keys[start:])

    def next_drop(self, seconds: float, at_least: int = 0) -> float | None:
        """The least age (seconds) above ``seconds`` at which fewer holds are longer than it
        (:meth:`longer_than`, all of them at 0): where an estimate from the holds longer than an
        allocation's age may change as it runs (inf: none ever); None when fewer than ``at_least``
        are longer than ``seconds`` (counted no further than that: one call per running allocation
        of a forecast)."""
        keys = self._sorted()
        start = bisect.bisect_right(keys, bucket_of(max(0, round(seconds * 1000)))) if seconds > 0 else 0
        seen = 0
        counts = self.counts
        for k in keys[start:]:
            if seen >= at_least:
                break
            seen += counts[k]
        if seen < at_least:
            return None
        if start >= len(keys):
            return math.inf
        # as its age is rounded to ms; a hold of 0 ms (key 0) drops at once
        return max(0.0, (bucket_low(keys[start]) - 0.5) / 1000)

    def quantile(self, q: float, *, longer_than: float = 0.0) -> float | None:
        """The nearest-rank ``q``-quantile in seconds of the holds longer than ``longer_than`` seconds
        (all of them when 0); None when there are none."""
        keys = self._sorted()
        start = bisect.bisect_right(keys, bucket_of(max(0, round(longer_than * 1000)))) if longer_than > 0 \
            else 0
        n = sum(self.counts[k] for k in keys[start:])
        if n == 0:
            return None
        rank = max(1, math.ceil(q * n))
        seen = 0
        for k in keys[start:]:
            seen += self.counts[k]
            if seen >= rank:
                return bucket_value(k) / 1000.0
        return bucket_value(keys[-1]) / 1000.0     # pragma: no cover - rank <= n


@dataclass(frozen=True, slots=True)
class HoldEstimate:
    """When an allocation is expected to end: ``seconds`` after it started (None: unknown), from
    ``basis`` (a sentence: "declared runtime", "from 1,156 past allocations of root.team-a")."""

    seconds: float | None
    basis: str
    #: the scope the hold times came from ("queue root.a", "user bob"); "" for a declared runtime
    scope: str = ""
    #: how many observed holds the estimate rests on (0 for a declared runtime)
    samples: int = 0


class HoldTimes:
    """The hold-time distributions of one partition, by leaf queue and by user, fed by an observer of
    its committed events (:meth:`attach`)."""

    def __init__(self) -> None:
        #: queue path -> its holds; user -> theirs
        self.queues: dict[str, HoldSketch] = {}
        self.users: dict[str, HoldSketch] = {}
        #: live allocation key -> (start time, queue path, user), for the allocations seen starting
        self._live: dict[str, tuple[float, str, str]] = {}
        #: commits observed: the forecast's cache key (any change of the partition is a commit)
        self.commits = 0
        self._partition: Partition | None = None

    def attach(self, partition: Partition) -> None:
        """Observe ``partition``'s commits from now on; the allocations running now are known by their
        own start times (so their holds count when they end); the holds that ended before are read
        from the partition's journal (:meth:`replay`), so that a restart keeps them."""
        self._partition = partition
        with partition.lock:
            state = partition.state
            for key, a in state.allocs.items():
                app = state.apps.get(a.application_id)
                if app is not None:
                    self._live[key] = (a.time, app.queue_path, app.user.user)
            partition.hooks.after_commit(self._observe)
            upto = partition.last_seq
            journal = partition.journal
        if journal is not None and upto > 0:
            # outside the lock: the commits after ``upto`` are the observer's
            try:
                self.replay(journal.read(partition.stream), upto)
            except JournalCompactedError:
                self.replay(_after_snapshot(journal, partition.stream), upto)

    def replay(self, events: Iterable[tuple[int, Mapping[str, Any]]], upto: int) -> int:
        """Count the holds that ended in the journalled ``events`` (``(seq, event)`` as the journal
        reads them) up to sequence number ``upto``, each in its queue and user as it was placed;
        return how many. A hold whose start the journal no longer has (compacted away after a
        snapshot) is not counted; nor is one still running at ``upto``."""
        owners: dict[str, tuple[str, str]] = {}
        live: dict[str, tuple[float, str, str, str, str | None]] = {}   # key -> start, queue, user, app, node
        counted = 0

        def end(key: str, t: Any) -> None:
            nonlocal counted
            found = live.pop(key, None)
            if found is not None and t is not None:
                self.add(found[1], found[2], float(t) - found[0])
                counted += 1

        for seq, ev in events:
            if seq > upto:
                break
            kind = ev.get("type")
            if kind == "app_added":
                owners[ev["app"]] = (ev["queue"], ev["user"])
            elif kind == "allocated":
                owner = owners.get(ev["app"])
                if owner is not None:
                    live[ev["key"]] = (float(ev["t"]), owner[0], owner[1], ev["app"], ev.get("node"))
            elif kind == "released":
                end(ev["key"], ev.get("t"))
            elif kind == "preempted":
                for key in ev.get("keys", ()):
                    end(key, ev.get("t"))
            elif kind == "replaced":
                # the real allocation takes the placeholder's place and runs from now
                ph = live.pop(ev["placeholder"], None)
                if ph is not None:
                    live[ev["key"]] = (float(ev["t"]), ph[1], ph[2], ph[3], ph[4])
            elif kind == "app_removed":
                for key in [k for k, v in live.items() if v[3] == ev["app"]]:
                    end(key, ev.get("t"))
            elif kind == "node_removed" and ev.get("t") is not None:
                for key in [k for k, v in live.items() if v[4] == ev["node"]]:
                    end(key, ev.get("t"))
        return counted

    def observe(self, partition: Partition, events: Sequence[E.Event]) -> None:
        """Take ``events`` (one commit of ``partition``, applied already) into the distributions."""
        self.commits += 1
        state = partition.state
        for ev in events:
            if isinstance(ev, E.Allocated):
                self._started(state, ev.key, ev.app, ev.t)
            elif isinstance(ev, E.Released):
                self._ended(ev.key, ev.t)
            elif isinstance(ev, E.Preempted):
                for key in ev.keys:
                    self._ended(key, ev.t)
            elif isinstance(ev, E.Replaced):
                # the real allocation takes the placeholder's place and runs from now
                self._live.pop(ev.placeholder, None)
                real = state.allocs.get(ev.key)
                if real is not None:
                    self._started(state, ev.key, real.application_id, ev.t)
        if len(self._live) > len(state.allocs):
            self._ended_silently(state, events)

    def _started(self, state: PartitionState, key: str, app_id: str, t: float) -> None:
        app = state.apps.get(app_id)
        if app is not None:
            self._live[key] = (t, app.queue_path, app.user.user)

    def _ended_silently(self, state: PartitionState, events: Sequence[E.Event]) -> None:
        """Allocations that ended without an event of their own (a node removed, an application
        removed, a timeout) end at the commit's last time."""
        t = next((ev_t for ev in reversed(events) if (ev_t := getattr(ev, "t", None)) is not None), None)
        for key in [k for k in self._live if k not in state.allocs]:
            if t is None:
                self._live.pop(key)
            else:
                self._ended(key, float(t))

    def _observe(self, events: Sequence[E.Event], _seq: int) -> None:
        if self._partition is not None:
            self.observe(self._partition, events)

    def _ended(self, key: str, t: float) -> None:
        found = self._live.pop(key, None)
        if found is None:
            return
        start, queue, user = found
        self._count(queue, user, t - start)

    def _count(self, queue: str, user: str, hold: float) -> None:
        # a sketch is made only for a new queue or user (``setdefault`` would build one per release)
        sketch = self.queues.get(queue)
        if sketch is None:
            sketch = self.queues[queue] = HoldSketch()
        sketch.add(hold)
        sketch = self.users.get(user)
        if sketch is None:
            sketch = self.users[user] = HoldSketch()
        sketch.add(hold)

    def add(self, queue: str, user: str, seconds: float) -> None:
        """Count one observed hold directly (a history loaded from elsewhere, a test)."""
        self._count(queue, user, seconds)

    def remaining(self, queue: str, user: str, age: float, q: float) -> HoldEstimate:
        """The ``q``-quantile hold of an allocation of ``queue`` and ``user`` that has run ``age``
        seconds, in seconds from its start: from its queue's holds when there are at least
        :data:`MIN_BASIS` longer than ``age``, else from its user's; else unknown."""
        scopes = ((f"queue {queue}", self.queues.get(queue)), (f"user {user}", self.users.get(user)))
        for scope, sketch in scopes:
            if sketch is None:
                continue
            n = sketch.longer_than(age) if age > 0 else sketch.total
            if n < MIN_BASIS:
                continue
            value = sketch.quantile(q, longer_than=age)
            if value is None:       # pragma: no cover - n >= MIN_BASIS
                continue
            name = scope.split(" ", 1)[1]
            return HoldEstimate(max(value, age), f"from {n:,} past allocations of {name}", scope, n)
        return HoldEstimate(None, f"no basis: fewer than {MIN_BASIS} past allocations of {queue} or {user}"
                            + (f" ran longer than {age:g} s" if age > 0 else ""))

    def changes_at(self, queue: str, user: str, age: float) -> float:
        """The age (seconds) past ``age`` at which :meth:`remaining` of an allocation of ``queue`` and
        ``user`` may answer otherwise (inf: never): its basis's next hold it outlives — a scope with
        too few holds longer than ``age`` only has fewer later, so the basis is the same one."""
        for sketch in (self.queues.get(queue), self.users.get(user)):
            drop = None if sketch is None else sketch.next_drop(age, MIN_BASIS)
            if drop is not None:
                return drop
        return math.inf


def _after_snapshot(journal: Journal, stream: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """The events of ``stream`` when a snapshot compacted its head away: the snapshot's rebuild (its
    applications with their queue and user, the allocations running then with their start times),
    then the events after it. The holds that ended before the snapshot are not in the store any more;
    those that ended after it are counted in full."""
    loaded = journal.load_snapshot(stream)
    if loaded is None:
        return
    seq, state = loaded
    for ev in state.get("rebuild") or ():
        yield seq, ev
    yield from journal.read(stream, seq)
