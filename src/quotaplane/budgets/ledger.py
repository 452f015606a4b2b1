"""The arithmetic of budgets: what each scope consumed and committed, exactly, from event times.

A scope (a queue's subtree, a user or a group inside a queue) keeps per budgeted resource the same
cells as the usage history (docs/history.md "Cost per event"): its level ``L`` (units held now) and its
moment ``M = Σ Δ·t``, so its integral up to any later instant ``T`` is ``L·T − M`` in unit-milliseconds
(integers, exact; TM-U1: what is charged is what was allocated, whatever it measured). A change costs
two additions; nothing is rescanned.

- **Period**: at the first change at or after a period's end, the integral at the new period's start
  becomes the base (``consumed = L·T − M − base``), exact because nothing changed in between. Reading a
  later period without a change computes the same value without storing it (``L × (T − start)``), so
  a read never changes what a replay would hold.
- **Half-life** (TM-B6: a leaky bucket, not a calendar allowance): the decayed consumption ``D`` at its
  last change, with the exact closed form ``D·2^(−Δ/T½) + L·T½/ln 2·(1 − 2^(−Δ/T½))`` (not Slurm's
  approximate per-second factor, TM-U5).
- **Committed** (TM-B5): an allocation whose application declares a maximum runtime commits
  ``units × (start + runtime − T)`` until it ends or its runtime passes; per scope ``C = Σ u·end`` and
  ``K = Σ u`` give ``C − K·T``. Runtimes that pass are dropped in order of their end (one heap).

Every charge keeps what it changed, so :meth:`Ledger.undo` (a refused write) puts back exactly the
state before it. Time never goes back: an event older than the newest one seen counts at the newest.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from quotaplane.budgets.periods import period_of
from quotaplane.config.budgets import BudgetSpec
from quotaplane.resources import Resource

__all__ = ["Cell", "Entry", "Ledger", "Scope", "Shortfall"]

_LN2 = math.log(2)


class Cell:
    """One budgeted resource of one scope (see the module docstring)."""

    __slots__ = ("base", "c_level", "c_moment", "decay", "decay_at", "level", "moment")

    def __init__(self) -> None:
        self.level = 0
        self.moment = 0
        self.base = 0
        self.decay = 0.0
        self.decay_at = 0
        self.c_level = 0
        self.c_moment = 0

    def save(self) -> tuple[int, int, int, float, int, int, int]:
        """Everything the cell holds (for an exact undo)."""
        return (self.level, self.moment, self.base, self.decay, self.decay_at, self.c_level, self.c_moment)

    def load(self, saved: tuple[int, int, int, float, int, int, int]) -> None:
        """Put back what :meth:`save` returned."""
        (self.level, self.moment, self.base, self.decay, self.decay_at, self.c_level,
         self.c_moment) = saved

    @property
    def empty(self) -> bool:
        """Nothing was ever charged here (or everything charged was taken back)."""
        return not (self.level or self.moment or self.base or self.decay or self.c_level)


class Scope:
    """A budget applied to one scope: ``key`` (``queue:root.a``, ``user:root.a:alice``,
    ``group:root.a:ml``), ``label`` for people, its spec, its cells, and its current period."""

    __slots__ = ("cells", "end", "exhausted_at", "key", "label", "spec", "start", "warned")

    def __init__(self, key: str, label: str, spec: BudgetSpec, ms: int) -> None:
        self.key = key
        self.label = label
        self.spec = spec
        self.cells = {r: Cell() for r in spec.limits}
        self.start, self.end = (0, 0) if spec.decayed else period_of(spec, ms)
        #: since when a ``preempt`` budget is exhausted (None: it is not)
        self.exhausted_at: int | None = None
        #: the highest warning threshold (percent) reported in this period (0: none)
        self.warned = 0

    # -- pure reads ---------------------------------------------------------------------------------
    def consumed(self, cell: Cell, ms: int) -> float:
        """What the scope consumed of ``cell``'s resource by ``ms`` (unit-ms; decayed when it decays)."""
        spec = self.spec
        if spec.half_life_ms:
            dt = ms - cell.decay_at
            if dt <= 0:
                return cell.decay
            f: float = 0.5 ** (dt / spec.half_life_ms)
            return cell.decay * f + cell.level * spec.half_life_ms / _LN2 * (1.0 - f)
        if ms >= self.end:      # a later period, nothing changed since its start: read, do not store
            return cell.level * (ms - period_of(spec, ms)[0])
        return cell.level * ms - cell.moment - cell.base

    def period(self, ms: int) -> tuple[int, int]:
        """The period holding ``ms`` (``(0, 0)`` for a decayed budget)."""
        if self.spec.decayed:
            return 0, 0
        return (self.start, self.end) if ms < self.end else period_of(self.spec, ms)

    # -- changes ------------------------------------------------------------------------------------
    def roll(self, ms: int) -> None:
        """Before a change at ``ms``: start the period that holds it (the base is the integral at its
        start, exact since nothing changed after the last change, which was before the old end)."""
        if ms >= self.end and not self.spec.decayed:
            start, end = period_of(self.spec, ms)
            for cell in self.cells.values():
                cell.base = cell.level * start - cell.moment
            self.start, self.end = start, end

    def change(self, cell: Cell, delta: int, ms: int) -> None:
        """The level of ``cell`` moves by ``delta`` at ``ms`` (after :meth:`roll`)."""
        if self.spec.half_life_ms:
            cell.decay = self.consumed(cell, ms)
            cell.decay_at = ms
        cell.level += delta
        cell.moment += delta * ms


@dataclass(slots=True)
class Entry:
    """A charged allocation: its scopes, its budgeted amounts, when it started, the end of its
    declared runtime (None: none declared), its priority, whether its commitment still counts, and
    what an undo needs (the newest time before it, the decayed cells as they were)."""

    scopes: tuple[Scope, ...]
    vec: dict[str, int]
    start: int
    end: int | None
    priority: int
    active: bool
    saved: Any = None


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Why a request does not fit a budget: the scope, the resource, what was consumed and committed
    (unit-ms), what the request would commit, the limit, and the end of the period (0: decayed)."""

    scope: Scope
    resource: str
    consumed: float
    committed: int
    need: int
    limit: int
    resets_at: int


class Ledger:
    """Every budget of a partition and what each scope charged (see the module docstring)."""

    __slots__ = ("_by_elastic", "_by_queue", "_heap", "_names", "_resolved", "entries", "now", "scopes",
                 "specs")

    def __init__(self, specs: Sequence[BudgetSpec] = ()) -> None:
        self.specs: tuple[BudgetSpec, ...] = ()
        self._by_queue: dict[str, list[BudgetSpec]] = {}
        #: elastic quota name → its budget
        self._by_elastic: dict[str, BudgetSpec] = {}
        #: the resources some of a resolved set of scopes budget (what a charge keeps of a request), and
        #: whether one of them decays (its cells are saved for an undo)
        #: per scope chain: its budgeted resources, whether one of them decays, and each scope's
        #: cells (a charge and a release walk them without a call per scope)
        self._names: dict[tuple[Scope, ...], tuple[frozenset[str], bool, _Flat]] = {}
        self.scopes: dict[str, Scope] = {}
        self.entries: dict[str, Entry] = {}
        self._heap: list[tuple[int, str]] = []
        self._resolved: dict[tuple[str, str, tuple[str, ...], tuple[str, ...]], tuple[Scope, ...]] = {}
        #: the newest event time seen (ms)
        self.now = 0
        self.configure(specs)

    # -- configuration ------------------------------------------------------------------------------
    def configure(self, specs: Sequence[BudgetSpec]) -> None:
        """Adopt ``specs``: scopes whose budget is still set keep what they consumed (a new period
        definition starts a new period at the newest event time); the others are dropped."""
        self.specs = tuple(specs)
        by_queue: dict[str, list[BudgetSpec]] = {}
        for spec in self.specs:
            if spec.elastic is None:
                by_queue.setdefault(spec.queue, []).append(spec)
        self._by_queue = by_queue
        self._by_elastic = {spec.elastic: spec for spec in self.specs if spec.elastic is not None}
        self._resolved.clear()
        self._names.clear()
        kept: dict[str, Scope] = {}
        for key, scope in self.scopes.items():
            found = self._spec_of(key)
            if found is None:
                continue
            old, spec = scope.spec, found
            scope.spec = spec
            for r in spec.limits:
                scope.cells.setdefault(r, Cell())
            same_period = (old.period, old.period_ms, old.timezone, old.reset_day, old.start_ms,
                           old.half_life_ms) == (spec.period, spec.period_ms, spec.timezone, spec.reset_day,
                                                 spec.start_ms, spec.half_life_ms)
            if not same_period:
                self._restart(scope)
            kept[key] = scope
        self.scopes = kept

    def _restart(self, scope: Scope) -> None:
        ms = self.now
        spec = scope.spec
        for cell in scope.cells.values():
            cell.base = cell.level * ms - cell.moment
            cell.decay, cell.decay_at = 0.0, ms
        if spec.decayed:
            scope.start, scope.end = 0, 0
        else:
            _, scope.end = period_of(spec, ms)
            scope.start = ms
        scope.exhausted_at = None

    def _spec_of(self, key: str) -> BudgetSpec | None:
        kind, _, rest = key.partition(":")
        if kind == "queue":
            return next((s for s in self._by_queue.get(rest, ()) if s.kind == "queue"), None)
        if kind == "elastic":
            return self._by_elastic.get(rest)
        queue, _, who = rest.rpartition(":")
        found = None
        for s in self._by_queue.get(queue, ()):
            name = s.user if kind == "user" else s.group if kind == "group" else None
            if name == who:
                return s
            if name == "*":
                found = s
        return found

    # -- which budgets a request meets ---------------------------------------------------------------
    def resolve(self, queue_path: str, user: str, groups: tuple[str, ...],
                elastic: tuple[str, ...] = ()) -> tuple[Scope, ...]:
        """The scopes an allocation in ``queue_path`` of ``user`` (in ``groups``) is charged to: every
        queue on its chain that has a budget, and per queue the user's budget (by name, else ``*``) and
        one group's (the first of the user's groups with a budget there, else ``*`` for the first
        group); then every quota of its elastic quota chain (``elastic``: its quota, then the parents)
        that has a budget."""
        cache_key = (queue_path, user, groups, elastic)
        found = self._resolved.get(cache_key)
        if found is not None:
            return found
        out: list[Scope] = []
        by_queue = self._by_queue
        if by_queue:
            parts = queue_path.split(".")
            for depth in range(1, len(parts) + 1):
                specs = by_queue.get(".".join(parts[:depth]))
                if specs:
                    out.extend(self._scopes_at(specs, user, groups))
        by_elastic = self._by_elastic
        for name in elastic if by_elastic else ():
            spec = by_elastic.get(name)
            if spec is not None:
                out.append(self._scope(f"elastic:{name}", spec.name, spec))
        result = tuple(out)
        if len(self._resolved) > 100_000:
            self._resolved.clear()
        self._resolved[cache_key] = result
        return result

    def _scopes_at(self, specs: list[BudgetSpec], user: str, groups: tuple[str, ...]) -> list[Scope]:
        user_key, group, group_key = _who(specs, user, groups)
        out: list[Scope] = []
        for s in specs:
            if s.kind == "queue":
                out.append(self._scope(f"queue:{s.queue}", s.queue, s))
            elif s.kind == "user" and s.user == user_key:
                out.append(self._scope(f"user:{s.queue}:{user}", f"user {user} in {s.queue}", s))
            elif s.kind == "group" and group is not None and s.group == group_key:
                out.append(self._scope(f"group:{s.queue}:{group}", f"group {group} in {s.queue}", s))
        return out

    @property
    def on_elastic(self) -> bool:
        """Some budget is on an elastic quota (the admission then resolves the request's quotas)."""
        return bool(self._by_elastic)

    def peek(self, queue: str, user: str | None = None, group: str | None = None,
             elastic: str | None = None) -> Scope | None:
        """The budget of ``queue`` (or of ``user`` / ``group`` in it, by name or wildcard), or of the
        elastic quota ``elastic``, as it stands, without creating it (None: no budget there)."""
        if elastic is not None:
            key = f"elastic:{elastic}"
            spec = self._by_elastic.get(elastic)
            found = self.scopes.get(key)
            return found if found is not None or spec is None else Scope(key, spec.name, spec, self.now)
        kind, who = ("user", user) if user is not None else ("group", group) if group is not None else \
            ("queue", None)
        key = f"queue:{queue}" if who is None else f"{kind}:{queue}:{who}"
        found = self.scopes.get(key)
        if found is not None:
            return found
        spec = self._spec_of(key)
        if spec is None:
            return None
        return Scope(key, queue if who is None else f"{kind} {who} in {queue}", spec, self.now)

    def _scope(self, key: str, label: str, spec: BudgetSpec) -> Scope:
        scope = self.scopes.get(key)
        if scope is None:
            scope = self.scopes[key] = Scope(key, label, spec, self.now)
        return scope

    # -- admission ----------------------------------------------------------------------------------
    def next_end(self) -> int | None:
        """No later than the earliest end (ms) of a declared runtime still committing (None: none):
        until then every scope's committed part is ``c_moment - c_level * ms`` (changes nothing)."""
        return self._heap[0][0] if self._heap else None

    def expire(self, ms: int) -> None:
        """Declared runtimes that ended by ``ms`` commit nothing any more."""
        heap = self._heap
        while heap and heap[0][0] <= ms:
            end, key = heapq.heappop(heap)
            e = self.entries.get(key)
            if e is None or not e.active or e.end != end:
                continue
            e.active = False
            self._commit(e, -1)

    def _commit(self, e: Entry, sign: int) -> None:
        end = e.end
        assert end is not None
        for scope in e.scopes:
            for r, cell in scope.cells.items():
                u = e.vec.get(r)
                if u:
                    cell.c_level += sign * u
                    cell.c_moment += sign * u * end

    def shortfalls(self, scopes: tuple[Scope, ...], vec: Mapping[str, int], ms: int,
                   runtime_ms: int | None) -> list[Shortfall]:
        """Where ``vec`` (an allocation declaring ``runtime_ms``, None: none) does not fit a budget at
        ``ms``: consumed + committed + what it commits must stay within the budget, and a request that
        commits nothing is admitted only while consumed + committed is below it (docs/budgets.md)."""
        ms = max(ms, self.now)
        if self._heap and self._heap[0][0] <= ms:
            self.expire(ms)
        out: list[Shortfall] = []
        if isinstance(vec, Resource):
            vec = vec._values           # a Resource's ``get`` is a Python call
        rt = runtime_ms or 0
        for scope, cells in (self._names.get(scopes) or self._layout(scopes))[2]:
            spec = scope.spec
            limits = spec.limits
            # a calendar or duration period whose current period holds ms: the closed form inline
            fast = not spec.half_life_ms and ms < scope.end
            for r, cell in cells:
                u = vec.get(r)
                if not u:
                    continue
                consumed = cell.level * ms - cell.moment - cell.base if fast else scope.consumed(cell, ms)
                committed = cell.c_moment - cell.c_level * ms
                used = consumed + committed
                need = u * rt
                if used + need > limits[r] or (not need and used >= limits[r]):
                    out.append(Shortfall(scope, r, consumed, committed, need, limits[r], scope.period(ms)[1]))
        return out

    def spent(self, scope: Scope, ms: int) -> list[str]:
        """The resources of which ``scope`` consumed and committed all its budget at ``ms`` (after
        :meth:`expire` of ``ms``; changes nothing)."""
        limits = scope.spec.limits
        return [r for r, cell in scope.cells.items()
                if scope.consumed(cell, ms) + (cell.c_moment - cell.c_level * ms) >= limits[r]]

    def charge(self, key: str, scopes: tuple[Scope, ...], vec: Mapping[str, int], ms: int,
               runtime_ms: int | None, priority: int = 0) -> None:
        """Charge allocation ``key`` from ``ms`` on (never refused: the admission checked it)."""
        ms = max(ms, self.now)
        if self._heap and self._heap[0][0] <= ms:
            self.expire(ms)
        _, decays, flat = self._names.get(scopes) or self._layout(scopes)
        # the request's own dict, shared (a Resource never changes): every reader takes only the
        # budgeted resources of it (``vec.get`` per cell), so a copy of those would only cost
        kept = vec._values if isinstance(vec, Resource) else dict(vec)
        end = ms + runtime_ms if runtime_ms else None
        active = end is not None and end > ms
        decayed = [(c, c.save()) for s in scopes if s.spec.half_life_ms for c in s.cells.values()] \
            if decays else []
        self.entries[key] = Entry(scopes, kept, ms, end, priority, active, (self.now, decayed))
        if decays:
            for scope in scopes:
                _move(scope, kept, 1, ms, end if active else None)
        else:
            _add(flat, kept, 1, ms, end if active else None)
        if end is not None and active:
            heapq.heappush(self._heap, (end, key))
        self.now = ms

    def _layout(self, scopes: tuple[Scope, ...]) -> tuple[frozenset[str], bool, _Flat]:
        """What :meth:`charge` and :meth:`release` keep of a scope chain (remembered until the budgets
        change)."""
        if len(self._names) > 100_000:
            self._names.clear()
        found = self._names[scopes] = (frozenset(r for s in scopes for r in s.cells),
                                       any(s.spec.half_life_ms for s in scopes),
                                       tuple((s, tuple(s.cells.items())) for s in scopes))
        return found

    def undo(self, key: str) -> None:
        """Take back :meth:`charge` of ``key`` exactly (the newest charge first). A period it started
        stays started: where a period starts depends on the time alone, and reads never store it."""
        e = self.entries.pop(key, None)
        if e is None or e.saved is None:
            return
        now, decayed = e.saved
        for scope in e.scopes:
            if not scope.spec.half_life_ms:
                _move(scope, e.vec, -1, e.start, e.end if e.active else None, roll=False)
        for cell, saved in decayed:
            cell.load(saved)
        self.now = now

    def release(self, key: str, ms: int) -> None:
        """Allocation ``key`` ended at ``ms``: its level leaves its scopes, its commitment too."""
        e = self.entries.pop(key, None)
        if e is None:
            return          # charged by no budget (admitted before its budget was set)
        ms = max(ms, self.now)
        if self._heap and self._heap[0][0] <= ms:
            self.expire(ms)
        scopes = e.scopes
        _, decays, flat = self._names.get(scopes) or self._layout(scopes)
        if decays:
            for scope in scopes:
                _move(scope, e.vec, -1, ms, e.end if e.active else None)
        else:
            _add(flat, e.vec, -1, ms, e.end if e.active else None)
        e.active = False
        self.now = ms

    def settle(self) -> None:
        """The pending charges are committed: they need no undo any more (memory)."""
        for e in self.entries.values():
            e.saved = None

    # -- what the faces show ------------------------------------------------------------------------
    def committed(self, scope: Scope, resource: str, ms: int) -> int:
        """What the running allocations with a declared runtime commit in ``scope`` at ``ms`` (pure)."""
        total = 0
        for e in self.entries.values():
            u = e.vec.get(resource)
            if u and e.end is not None and e.end > ms and scope in e.scopes:
                total += u * (e.end - ms)
        return total

    def victims(self, scope: Scope, resource: str) -> list[str]:
        """The allocations charged to ``scope`` for ``resource``, lowest priority first, newest first
        among equals (the order a ``preempt`` budget takes them)."""
        found = [(e.priority, -e.start, k) for k, e in self.entries.items()
                 if scope in e.scopes and e.vec.get(resource)]
        found.sort(key=lambda x: (x[0], x[1], x[2]))
        return [k for _, _, k in found]

    def memo(self) -> dict[str, Any]:
        """What a snapshot cannot derive from the live allocations: every scope's cells and period."""
        scopes: dict[str, Any] = {}
        for key, scope in sorted(self.scopes.items()):
            if all(c.empty for c in scope.cells.values()) and scope.exhausted_at is None and not scope.warned:
                continue
            scopes[key] = {"start": scope.start, "end": scope.end, "exhaustedAt": scope.exhausted_at,
                           "warned": scope.warned,
                           "cells": {r: [c.level, c.moment, c.base, c.decay, c.decay_at]
                                     for r, c in sorted(scope.cells.items())}}
        return {"now": self.now, "scopes": scopes}

    def restore(self, memo: Mapping[str, Any]) -> None:
        """Put back :meth:`memo` over a state whose live allocations were charged again: the cells come
        from the memo, the commitments from the live allocations (those whose runtime has not ended)."""
        self.now = int(memo.get("now", 0))
        self._names.clear()
        data = memo.get("scopes", {})
        for key, scope in self.scopes.items():
            if key not in data:         # charged again by the live allocations alone: start it empty
                scope.cells = {r: Cell() for r in scope.spec.limits}
                scope.start, scope.end = (0, 0) if scope.spec.decayed else period_of(scope.spec, self.now)
                scope.exhausted_at = None
                scope.warned = 0
        for key, raw in data.items():
            self._load(key, raw)
        self._heap = []
        for key, e in self.entries.items():
            e.saved = None
            e.active = e.end is not None and e.end > self.now
            if e.end is not None and e.active:
                self._commit(e, 1)
                self._heap.append((e.end, key))
        heapq.heapify(self._heap)

    def _load(self, key: str, raw: Mapping[str, Any]) -> None:
        spec = self._spec_of(key)
        if spec is None:
            return
        scope = self.scopes.get(key)
        if scope is None:
            kind, _, rest = key.partition(":")
            label = rest if kind == "queue" else spec.name if kind == "elastic" else \
                f"{kind} {rest.rpartition(':')[2]} in {spec.queue}"
            scope = self.scopes[key] = Scope(key, label, spec, self.now)
        scope.start, scope.end = int(raw["start"]), int(raw["end"])
        scope.exhausted_at = raw.get("exhaustedAt")
        scope.warned = int(raw.get("warned", 0))
        for r, (level, moment, base, decay, decay_at) in raw["cells"].items():
            cell = scope.cells.setdefault(r, Cell())
            cell.load((int(level), int(moment), int(base), float(decay), int(decay_at), 0, 0))


def _who(specs: Sequence[BudgetSpec], user: str, groups: tuple[str, ...]) -> tuple[str, str | None, str]:
    """Which user and group budgets of one queue apply: a budget by name wins over the wildcard's (as
    the user group manager's limits do); the group is the first of the user's groups with a budget
    there, else its first group under the wildcard. ``(user key, group, group key)``."""
    user_key = user if any(s.user == user for s in specs) else "*"
    named = [g for g in groups if any(s.group == g for s in specs)]
    if named:
        return user_key, named[0], named[0]
    return user_key, groups[0] if groups else None, "*"


#: a scope chain's scopes, each with its cells by resource
_Flat = tuple[tuple[Scope, tuple[tuple[str, Cell], ...]], ...]


def _add(flat: _Flat, vec: Mapping[str, int], sign: int, ms: int, end: int | None) -> None:
    """:func:`_move` of every scope of a chain none of which decays, in one call (the admission path
    charges and releases every budget of the chain: a call per scope was a tenth of their cost)."""
    for scope, cells in flat:
        if ms >= scope.end:
            scope.roll(ms)
        for r, cell in cells:
            u = vec.get(r)
            if u:
                d = sign * u
                cell.level += d
                cell.moment += d * ms
                if end is not None:
                    cell.c_level += d
                    cell.c_moment += d * end


def _move(scope: Scope, vec: Mapping[str, int], sign: int, ms: int, end: int | None,
          *, roll: bool = True) -> None:
    """The levels of ``scope`` move by ``sign × vec`` at ``ms`` (its period started first), and its
    commitment by ``sign × vec`` until ``end`` (None: nothing committed). ``vec`` holds only budgeted
    resources (:meth:`Ledger.charge` keeps them)."""
    if roll and ms >= scope.end:
        scope.roll(ms)
    decayed = scope.spec.half_life_ms
    cells = scope.cells
    for r, u in vec.items():
        cell = cells.get(r)
        if cell is None:
            continue
        d = sign * u
        if decayed:
            scope.change(cell, d, ms)
        else:
            cell.level += d
            cell.moment += d * ms
        if end is not None:
            cell.c_level += d
            cell.c_moment += d * end
