"""The accounting engine: usage over time of every scope of one partition, exact, from its events.

:class:`Accounting` is fed the partition's journalled events in journal order (:meth:`observe`),
live and on replay, and keeps for every **scope** — each queue (leaves and every ancestor), user,
group (the one the user group manager chose for the application), elastic quota (and its
ancestors), quota-tree node (the consumer's group node and its ancestors) and application:

* ``used``: the resources its allocations hold, and its integral (resource-milliseconds);
* ``waiting``: the resources its waiting asks want, and its integral;
* ``borrowed``: the part of ``used`` above its guarantee (queue ``guaranteed``, elastic ``min``,
  quota-tree node ``quota``), and its integral;
* ``lent``: the part of its guarantee it does not use that its siblings use above theirs, and its
  integral (the instantaneous value is the one ``standing`` shows);
* counters: preemptions by reason code, refusals by reason code;
* the wait of every ask until it was allocated (a :class:`~quotaplane.history.sketch.WaitSketch`
  per rollup period).

**Exact and deterministic.** Time is the events' own ``t``, in whole milliseconds
(``round(t * 1000)``), never a clock. An event older than one already seen counts at the newest time
seen (time never runs backwards), the same on every replay. Levels are integers in the resources'
own units; an integral is ``Σ level × Δt`` in resource-milliseconds, an exact integer.

**O(1) per event.** A scope keeps, per metric and resource, a cell ``[L, M]``: its level ``L``
and its moment ``M = Σ Δ·t`` over its changes (Δ the change of level at time ``t``, counted from the
engine's origin); its integral up to any later ``T`` is ``L·T − M``. A change of level costs two
additions, whatever the time since the last one, and integrals are linear: a change of an
application's level changes its user's, its group's and its queues' by the same Δ and Δ·t. So an
event changes the application's cells and, at once, only the scopes whose *borrowing* depends on
the instantaneous level (queues with a guarantee, elastic quotas, quota-tree nodes) and their
siblings' lending of that resource; the application's other scopes (its user, group and queues
without a guarantee) receive its accumulated ΔL and ΔM once per period, when the period closes or
someone reads. Nothing is ever rescanned.

**Rollups.** When an event's time crosses a period boundary (minute, hour, day, week, month in
the configured time zone, :mod:`~quotaplane.history.calendar`), the scopes that changed in the
period that ended are written to :attr:`Accounting.outbox` as a :class:`Row`: their integrals and
levels *at the boundary* and the waits of the period. A scope that did not change writes nothing:
its integral at any later boundary is its last row's integral plus its level times the time since.
Applications (many, short-lived) write hour and day rows only.

Which application belongs to which group or elastic quota, and what each scope is guaranteed, is
read from the partition through a :class:`View` (read-only) when the event that decides it is seen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import quotaplane.events as E
from quotaplane.errors import InputError
from quotaplane.history.calendar import RESOLUTIONS, Calendar
from quotaplane.history.sketch import WaitSketch
from quotaplane.resources import Resource

__all__ = [
    "APPLICATION",
    "GROUP",
    "KINDS",
    "METRICS",
    "QUEUE",
    "QUOTA",
    "TREE",
    "USER",
    "Accounting",
    "Row",
    "ScopeInfo",
    "TreeTarget",
    "View",
    "ms_of",
    "restart_at_now",
    "restore_into",
    "snapshot_of",
]

QUEUE, USER, GROUP, QUOTA, TREE, APPLICATION = "queue", "user", "group", "quota", "tree", "application"
#: every kind of scope, in the order reports list them
KINDS = (QUEUE, USER, GROUP, QUOTA, TREE, APPLICATION)
#: the integrated metrics, by their key in a row
METRICS = {"used": "u", "waiting": "w", "borrowed": "b", "lent": "l"}

#: a scope's guarantee (``None``: it has none and neither borrows nor lends), its parent scope's
#: name (``None``: a top scope), its max (``None``: not set)
ScopeInfo = tuple[dict[str, int] | None, str | None, dict[str, int] | None]
#: a quota tree an allocation counts in: the tree, its group node, the amounts in the tree's units
TreeTarget = tuple[str, str, dict[str, int]]

# the coarser resolutions a period's changes roll into: minute → hour → day → week and month
_UP = {0: (1,), 1: (2,), 2: (3, 4), 3: (), 4: ()}
_NRES = len(RESOLUTIONS)


def ms_of(t: float) -> int:
    """An event time (seconds, float) in whole milliseconds, as the engine counts it."""
    return round(t * 1000)


class View(Protocol):
    """What the engine reads of its partition (read-only; see :mod:`quotaplane.history.view`)."""

    def guarantees(self) -> dict[str, dict[str, ScopeInfo]]:
        """Per kind (queue, quota, tree), every scope with what it is guaranteed, its parent, its max."""

    def timezone(self) -> str:
        """The time zone of the periods (the partition's ``history.timezone``)."""

    def half_life(self) -> int:
        """The half-life of decayed usage in ms when fair share with memory is on, else 0."""

    def queue_info(self, path: str) -> ScopeInfo:
        """One queue's guarantee, parent and max (a dynamic queue made by an application)."""

    def group_of(self, app: str, user: str, groups: tuple[str, ...], queue: str) -> str | None:
        """The group the user group manager chose (or would choose) for ``app``; None: none."""

    def quota_of(self, key: str, tags: Mapping[str, str]) -> str | None:
        """The elastic quota allocation or ask ``key`` counts in; None without elastic quotas."""

    def tree_targets(self, key: str, app: str, queue: str, user: str, groups: tuple[str, ...],
                     tags: Mapping[str, str], resource: Mapping[str, int]) -> list[TreeTarget]:
        """Per quota tree an allocation or ask of ``resource`` counts in: the tree, its group node
        and the amounts in the tree's units; empty without trees."""



@dataclass(frozen=True, slots=True)
class Row:
    """One scope at the end of one rollup period (a boundary) in which it changed.

    ``data``: ``{"u"|"w"|"b"|"l": {resource: [integral, level]}, "g": guarantee, "x": max,
    "c": {counter: total}, "s": waits of the period}`` — integrals in resource-milliseconds since
    history began, levels at the boundary; keys absent when empty.
    """

    resolution: int
    t: int
    kind: str
    name: str
    data: dict[str, Any]


class _Sib:
    """The children of one parent: what they borrow together (per resource) and who may lend."""

    __slots__ = ("bsum", "lenders")

    def __init__(self) -> None:
        self.bsum: dict[str, int] = {}
        self.lenders: list[Scope] = []


#: per resource ``[level, moment]`` (see the module docstring)
Cells = dict[str, list[int]]
#: a scope and the amount an allocation or ask counts in it
_Share = tuple["Scope", dict[str, int]]


class Scope:
    """One scope: per metric its cells (see the module docstring), its guarantee and max, its
    counters and the waits of its open periods. Times are relative to the engine's origin."""

    __slots__ = ("b", "counts", "e", "guar", "kind", "l", "max", "name", "open", "sib", "u", "w")

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        self.u: Cells = {}
        self.w: Cells = {}
        self.b: Cells = {}
        self.l: Cells = {}
        #: None: no guarantee (a queue without one, users, groups, applications); else per resource
        self.guar: dict[str, int] | None = None
        self.max: dict[str, int] | None = None
        self.sib: _Sib | None = None
        self.counts: dict[str, int] = {}
        self.open: list[WaitSketch | None] = [None] * _NRES
        #: per resource ``Σ Δ·2^(t/T½)`` over the changes of ``used`` (decayed usage; fair share on)
        self.e: dict[str, float] = {}

    def cells(self, metric: str) -> Cells:
        """The cells of ``metric`` (used, waiting, borrowed, lent)."""
        key = METRICS.get(metric)
        if key is None:
            raise InputError(f"unknown metric {metric!r}; one of {', '.join(METRICS)}")
        cells: Cells = getattr(self, key)
        return cells

    def integral(self, metric: str, at: int) -> dict[str, int]:
        """The integral of ``metric`` up to relative time ``at`` (not before its last change)."""
        out = {r: c[0] * at - c[1] for r, c in self.cells(metric).items()}
        return {r: v for r, v in out.items() if v}

    def level(self, metric: str) -> dict[str, int]:
        """The level of ``metric`` now."""
        return {r: c[0] for r, c in self.cells(metric).items() if c[0]}

    def row(self, at: int, sketch: WaitSketch | None) -> dict[str, Any]:
        """This scope at relative time ``at`` (a boundary) as a row's data."""
        data: dict[str, Any] = {}
        for key in ("u", "w", "b", "l"):
            cells: Cells = getattr(self, key)
            if cells:
                data[key] = {r: [c[0] * at - c[1], c[0]] for r, c in sorted(cells.items())}
        if self.guar is not None:
            data["g"] = dict(sorted(self.guar.items()))
        if self.max is not None:
            data["x"] = dict(sorted(self.max.items()))
        if self.counts:
            data["c"] = dict(sorted(self.counts.items()))
        if sketch is not None and sketch.count:
            data["s"] = sketch.to_json()
        return data


def _bump(cells: Cells, r: str, d: int, t: int) -> None:
    """Change the level of ``r`` by ``d`` at relative time ``t``."""
    c = cells.get(r)
    if c is None:
        cells[r] = [d, d * t]
    else:
        c[0] += d
        c[1] += d * t


def _level(cells: Cells, r: str) -> int:
    c = cells.get(r)
    return c[0] if c is not None else 0


class _Charge:
    """A live allocation or waiting ask: its application, amount, when, and the elastic quotas and
    quota-tree nodes it counts in (with the amount in each; its application's scopes are the
    application's)."""

    __slots__ = ("app", "eager", "resource", "t")

    def __init__(self, app: str, resource: dict[str, int], t: int, eager: list[tuple[Scope, dict[str, int]]]
                 ) -> None:
        self.app = app
        self.resource = resource
        self.t = t
        self.eager = eager


class _App:
    """An application the engine knows: where it runs, its scopes, its live allocations and asks."""

    __slots__ = ("allocs", "asks", "chain", "eager_q", "epoch", "group", "groups", "lazy_u", "lazy_w",
                 "new_waits", "own", "prop_e", "prop_u", "prop_w", "queue", "tags", "user", "user_scope")

    def __init__(self, queue: str, user: str, groups: tuple[str, ...], tags: dict[str, str], own: Scope,
                 chain: list[Scope], user_scope: Scope) -> None:
        self.queue = queue
        self.user = user
        self.groups = groups
        self.tags = tags
        self.allocs: set[str] = set()
        self.asks: set[str] = set()
        self.own = own
        #: the queue chain, leaf first
        self.chain = chain
        self.user_scope = user_scope
        #: the group its allocations and asks count in (None: no group; False: not asked yet)
        self.group: Scope | bool | None = False
        #: the scopes that take the application's used (queues without a guarantee, user, group)
        #: and waiting (every queue, user, group) once per period: ``prop_*`` is what they have
        self.lazy_u: list[Scope] = []
        self.lazy_w: list[Scope] = []
        self.prop_u: Cells = {}
        self.prop_w: Cells = {}
        self.prop_e: dict[str, float] = {}
        #: waits not yet given to the lazily fed scopes
        self.new_waits: WaitSketch | None = None
        #: the queues of its chain with a guarantee: its allocations change them at once
        self.eager_q: list[Scope] = []
        #: the config epoch its group was asked in
        self.epoch = -1

    def scopes(self) -> list[Scope]:
        """Every scope the application counts in by itself (queues, user, group, its own)."""
        group = self.group
        return [*self.chain, self.user_scope, *([group] if isinstance(group, Scope) else []), self.own]


def _vec(resource: Mapping[str, int]) -> dict[str, int]:
    items = resource.plain() if isinstance(resource, Resource) else resource   # no Mapping protocol per item
    return {r: v for r, v in items.items() if v}


class Accounting:
    """The accounting of one partition (see the module docstring).

    ``view`` is what the engine reads of its partition; ``calendar`` where periods start.
    ``now`` is the newest event time seen (ms), None before the first timed event; ``origin`` the
    first one (moments count time from it).
    """

    def __init__(self, view: View, calendar: Calendar | None = None) -> None:
        self.view = view
        self.calendar = calendar if calendar is not None else Calendar()
        self.now: int | None = None
        self.origin = 0
        self._rel = 0
        #: configs applied so far (an application's group is asked once per config)
        self._epoch = 0
        #: decayed usage (fair share with memory): the half-life in ms (0: off), the time the
        #: exponential moments count from, and ``2^((now − that)/T½)``
        self.half_life = 0
        self._e_origin = 0
        self._w = 1.0
        #: the next boundary of each resolution after ``now``
        self.next: list[int] = [0] * _NRES
        self.scopes: dict[tuple[str, str], Scope] = {}
        self._sibs: dict[tuple[str, str | None], _Sib] = {}
        self._info: dict[str, dict[str, ScopeInfo]] = {QUEUE: {}, QUOTA: {}, TREE: {}}
        self.apps: dict[str, _App] = {}
        self.allocs: dict[str, _Charge] = {}
        self.asks: dict[str, _Charge] = {}
        #: per resolution: the scopes changed since its last boundary
        self.dirty: list[set[Scope]] = [set() for _ in range(_NRES)]
        #: applications whose changes the lazily fed scopes have not received yet
        self._pending: set[_App] = set()
        #: rows of the periods that ended, oldest first, until the store takes them
        self.outbox: list[Row] = []
        #: scopes of removed applications, forgotten once their last periods are written
        self._retired: set[Scope] = set()
        self._handlers: dict[type[E.Event], Callable[[Any], None]] = {
            E.ConfigApplied: self._config, E.NodeAdded: self._nodes, E.NodeUpdated: self._nodes,
            E.NodeRemoved: self._node_removed, E.AppAdded: self._app_added, E.AppRemoved: self._app_removed,
            E.Allocated: self._allocated, E.Released: self._released, E.Replaced: self._replaced,
            E.Timeouts: self._timeouts, E.AskAdded: self._ask_added, E.AskRemoved: self._ask_removed,
            E.Preempted: self._preempted, E.Noted: self._noted,
        }

    # -- feeding -------------------------------------------------------------------------------------
    def observe(self, events: Iterable[E.Event]) -> None:
        """Account for ``events`` (journalled, in journal order)."""
        handlers = self._handlers
        for ev in events:
            handler = handlers.get(type(ev))
            if handler is not None:
                handler(ev)

    def _at(self, t: float) -> int:
        """Move time to event time ``t`` (never backwards), closing the periods it crosses."""
        ms = round(t * 1000)
        now = self.now
        if now is None:
            self.now = self.origin = ms
            self.next = [self.calendar.next(res, ms) for res in RESOLUTIONS]
            return ms
        if ms <= now:
            return now
        if ms >= self.next[0]:
            self._cross(ms)
        self.now = ms
        self._rel = ms - self.origin
        if self.half_life:
            self._weigh()
        return ms

    def _weigh(self) -> None:
        """``2^((now − e_origin)/T½)`` (exact powers of two for whole half-lives); every 32 half-lives
        the moments are rebased (they would lose their precision)."""
        half = self.half_life
        k, rem = divmod(self._rel - self._e_origin, half)
        if k >= 32:
            self.propagate()
            shift = math.ldexp(1.0, -k)
            for s in self.scopes.values():
                for r in s.e:
                    s.e[r] *= shift
            for app in self.apps.values():
                for r in app.prop_e:
                    app.prop_e[r] *= shift
            self._e_origin += k * half
            k = 0
        self._w = math.ldexp(2.0 ** (rem / half), k)

    def decayed(self, s: Scope, at: int | None = None) -> dict[str, float]:
        """``s``'s usage decayed with the half-life, ``∫ used(u)·2^(−(t−u)/T½) du`` per resource, in
        resource-milliseconds, at ``at`` ms (default: now; never before now). Empty while off."""
        half = self.half_life
        if not half or self.now is None:
            return {}
        self.propagate()
        t = max(self.now if at is None else at, self.now) - self.origin - self._e_origin
        k, rem = divmod(t, half)
        back = math.ldexp(2.0 ** (-rem / half), -k)
        scale = half / math.log(2)
        out = {}
        for r, e in s.e.items():
            c = s.u.get(r)
            v = scale * ((c[0] if c is not None else 0) - e * back)
            if v > 0:
                out[r] = v
        return out

    def set_half_life(self, half_life_ms: int) -> None:
        """Decay usage with this half-life (0: stop). A new half-life starts decayed usage at zero."""
        if half_life_ms == self.half_life:
            return
        self.propagate()
        self.half_life = half_life_ms
        self._e_origin = self._rel
        self._w = 1.0
        for s in self.scopes.values():
            s.e = {r: float(c[0]) for r, c in s.u.items() if c[0]} if half_life_ms else {}
        for app in self.apps.values():
            app.prop_e = dict(app.own.e)

    def advance(self, t: float) -> None:
        """Move time to ``t`` (seconds) with no event: close the periods it crosses (a quiet
        partition's open periods end without waiting for its next event)."""
        if self.now is not None:
            self._at(t)

    def _cross(self, ms: int) -> None:
        self.propagate()
        cal = self.calendar
        nxt = self.next
        origin = self.origin
        for i, res in enumerate(RESOLUTIONS):
            b = nxt[i]
            if ms < b:
                continue
            dirty = self.dirty[i]
            if dirty:
                up = _UP[i]
                rows = self.outbox
                for s in sorted(dirty, key=_scope_order):
                    sketch = s.open[i]
                    if i or s.kind != APPLICATION:    # applications: hours and days (there are many)
                        rows.append(Row(i, b, s.kind, s.name, s.row(b - origin, sketch)))
                    if sketch is not None:
                        s.open[i] = None
                        for j in up:
                            have = s.open[j]
                            if have is None:
                                s.open[j] = _copy(sketch)
                            else:
                                have.merge(sketch)
                for j in up:
                    if j > 2:   # applications roll up to days, not weeks and months (they come and go)
                        self.dirty[j] |= {s for s in dirty if s.kind != APPLICATION}
                    else:
                        self.dirty[j] |= dirty
                dirty.clear()
            nxt[i] = cal.next(res, ms)
        if self._retired:
            self._forget_retired()

    def _forget_retired(self) -> None:
        """Forget the scopes of removed applications once their last periods are written."""
        dirty = self.dirty
        for s in list(self._retired):
            if any(s in d for d in dirty[:3]) or any(x is not None for x in s.open[:3]):
                continue
            self._retired.discard(s)
            self.scopes.pop((s.kind, s.name), None)

    def propagate(self) -> None:
        """Give every application's changes since the last call to its lazily fed scopes."""
        pending = self._pending
        if not pending:
            return
        dirty = self.dirty[0]
        for app in pending:
            for own, prop, lazy in ((app.own.u, app.prop_u, app.lazy_u), (app.own.w, app.prop_w, app.lazy_w)):
                key = "u" if own is app.own.u else "w"
                for r, c in own.items():
                    p = prop.get(r)
                    if p is None:
                        dl, dm = c[0], c[1]
                        prop[r] = [dl, dm]
                    else:
                        dl, dm = c[0] - p[0], c[1] - p[1]
                        if not dl and not dm:
                            continue
                        p[0], p[1] = c[0], c[1]
                    for s in lazy:
                        cells: Cells = getattr(s, key)
                        have = cells.get(r)
                        if have is None:
                            cells[r] = [dl, dm]
                        else:
                            have[0] += dl
                            have[1] += dm
                dirty.update(lazy)
            if app.own.e:
                prop_e = app.prop_e
                for r, e in app.own.e.items():
                    de = e - prop_e.get(r, 0.0)
                    if de:
                        prop_e[r] = e
                        for s in app.lazy_u:
                            s.e[r] = s.e.get(r, 0.0) + de
            waits = app.new_waits
            if waits is not None:
                app.new_waits = None
                for s in app.lazy_w:
                    sk = s.open[0]
                    if sk is None:
                        s.open[0] = _copy(waits)
                    else:
                        sk.merge(waits)
        pending.clear()

    # -- scopes ----------------------------------------------------------------------------------------
    def _scope(self, kind: str, name: str) -> Scope:
        s = self.scopes.get((kind, name))
        if s is None:
            s = Scope(kind, name)
            self.scopes[(kind, name)] = s
            info = self._info.get(kind, {}).get(name)
            if info is not None:
                self._set_info(s, info)
        return s

    def _set_info(self, s: Scope, info: ScopeInfo) -> None:
        guar, parent, mx = info
        if s.kind == QUEUE and not guar:
            guar = None             # a queue without a guarantee neither borrows nor lends (standing)
        s.guar = dict(guar) if guar is not None else None
        s.max = dict(mx) if mx is not None else None
        s.sib = None
        if s.guar is not None and (parent is not None or s.kind != TREE):   # trees' roots share nothing
            sib = self._sibs.get((s.kind, parent))
            if sib is None:
                sib = self._sibs[(s.kind, parent)] = _Sib()
            s.sib = sib
            if s.guar and s not in sib.lenders:
                sib.lenders.append(s)

    def _chain(self, kind: str, name: str | None) -> list[Scope]:
        """``name`` and its ancestors (by the guarantee table's parents)."""
        out: list[Scope] = []
        table = self._info[kind]
        seen: set[str] = set()
        while name is not None and name not in seen:
            seen.add(name)
            out.append(self._scope(kind, name))
            info = table.get(name)
            name = info[1] if info is not None else None
        return out

    def _use(self, s: Scope, vec: Mapping[str, int], sign: int) -> None:
        """``s`` uses ``sign × vec`` more from now on, and borrows and lends accordingly."""
        t = self._rel
        used = s.u
        self.dirty[0].add(s)
        g = s.guar
        if self.half_life:
            e, w = s.e, self._w
            for r, v in vec.items():
                e[r] = e.get(r, 0.0) + (v if sign > 0 else -v) * w
        if g is None:
            for r, v in vec.items():
                d = v if sign > 0 else -v
                c = used.get(r)
                if c is None:
                    used[r] = [d, d * t]
                else:
                    c[0] += d
                    c[1] += d * t
            return
        bor, sib, lent = s.b, s.sib, s.l
        moved: list[str] | None = None
        idle: list[str] | None = None
        for r, v in vec.items():
            d = v if sign > 0 else -v
            c = used.get(r)
            if c is None:
                used[r] = [d, d * t]
                level = d
            else:
                c[0] += d
                c[1] += d * t
                level = c[0]
            gv = g.get(r, 0)
            nb = level - gv if level > gv else 0
            bc = bor.get(r)
            ob = bc[0] if bc is not None else 0
            if nb != ob:
                db = nb - ob
                if bc is None:
                    bor[r] = [db, db * t]
                else:
                    bc[0] = nb
                    bc[1] += db * t
                if sib is not None:
                    bsum = sib.bsum
                    total = bsum.get(r, 0) + db
                    if total:
                        bsum[r] = total
                    else:
                        del bsum[r]
                    if moved is None:
                        moved = [r]
                    else:
                        moved.append(r)
            if gv and sib is not None:
                lc = lent.get(r)
                if level < gv or (lc is not None and lc[0]):
                    if idle is None:
                        idle = [r]
                    else:
                        idle.append(r)
        if idle is not None:
            self._relend(s, idle)
        if moved is not None and sib is not None:
            for lender in sib.lenders:
                if lender is not s:
                    self._relend(lender, moved)

    def _want(self, s: Scope, vec: Mapping[str, int], sign: int) -> None:
        """``s``'s waiting asks want ``sign × vec`` more from now on."""
        t = self._rel
        wait = s.w
        for r, v in vec.items():
            d = v if sign > 0 else -v
            c = wait.get(r)
            if c is None:
                wait[r] = [d, d * t]
            else:
                c[0] += d
                c[1] += d * t
        self.dirty[0].add(s)

    def _relend(self, s: Scope, resources: Iterable[str]) -> None:
        """``s`` lends, per resource of ``resources`` in its guarantee, the part of its guarantee it
        does not use that its siblings use above theirs (``standing``'s rule)."""
        g, sib = s.guar, s.sib
        if not g or sib is None:
            return
        bsum, used, bor, lent = sib.bsum, s.u, s.b, s.l
        for r in resources:
            gv = g.get(r)
            if gv is None:
                continue
            c = used.get(r)
            idle = gv - (c[0] if c is not None else 0)
            lc = lent.get(r)
            if idle <= 0:
                if lc is None or not lc[0]:
                    continue
                v = 0
            else:
                bc = bor.get(r)
                others = bsum.get(r, 0) - (bc[0] if bc is not None else 0)
                v = idle if idle < others else others
                if v < 0:
                    v = 0
            d = v - (lc[0] if lc is not None else 0)
            if d:
                if lc is None:
                    lent[r] = [d, d * self._rel]
                else:
                    lc[0] = v
                    lc[1] += d * self._rel
                self.dirty[0].add(s)

    def _refresh_guarantees(self) -> bool:
        """Read every guarantee, parent and max again; True when something changed."""
        fresh = self.view.guarantees()
        for kind in (QUEUE, QUOTA, TREE):
            fresh.setdefault(kind, {})
        if fresh == self._info:
            return False
        self._info = fresh
        self._recompute_all()
        return True

    def _recompute_all(self) -> None:
        t = self._rel
        self._sibs = {}
        kinds = self._info
        for kind, table in kinds.items():      # a scope with a guarantee lends before it ever uses
            for name in table:
                if (kind, name) not in self.scopes:
                    self.scopes[(kind, name)] = Scope(kind, name)
        for (kind, name), s in self.scopes.items():
            if kind not in kinds:
                continue
            old = (s.guar, s.max)
            info = kinds[kind].get(name)
            if info is not None:
                self._set_info(s, info)
            else:
                s.guar, s.max, s.sib = None, None, None
            if (s.guar, s.max) != old:
                self.dirty[0].add(s)
        for s in self.scopes.values():
            if s.kind not in kinds:
                continue
            g = s.guar
            for r in set(s.u) | set(s.b):
                nb = 0 if g is None else max(0, _level(s.u, r) - g.get(r, 0))
                d = nb - _level(s.b, r)
                if d:
                    _bump(s.b, r, d, t)
                    self.dirty[0].add(s)
            if s.sib is not None:
                bsum = s.sib.bsum
                for r, c in s.b.items():
                    if c[0]:
                        bsum[r] = bsum.get(r, 0) + c[0]
        for s in self.scopes.values():
            if s.kind not in kinds:
                continue
            if s.guar and s.sib is not None:
                self._relend(s, set(s.guar) | set(s.l))
            else:
                for r, c in list(s.l.items()):
                    if c[0]:
                        _bump(s.l, r, -c[0], t)
                        self.dirty[0].add(s)

    # -- an application's scopes ---------------------------------------------------------------------
    def _split(self, app: _App) -> None:
        """Which of the application's scopes take its changes at once (queues with a guarantee)
        and which once per period (the others); the lazily fed ones must be up to date."""
        group = app.group if isinstance(app.group, Scope) else None
        tail = [app.user_scope] if group is None else [app.user_scope, group]
        app.lazy_u = [q for q in app.chain if q.guar is None] + tail
        app.lazy_w = [*app.chain, *tail]
        app.eager_q = [q for q in app.chain if q.guar is not None]

    def _regroup(self, app_id: str, app: _App) -> None:
        """The group of an application without allocations is asked again (seed 001 U4: its next
        first allocation decides, by the limits in force); what it waits for moves to the new group
        now. The answer changes only with the config, so it is asked once per config."""
        app.epoch = self._epoch
        name = self.view.group_of(app_id, app.user, app.groups, app.queue)
        group = self._scope(GROUP, name) if name is not None else None
        old = app.group
        if group is old:
            return
        if isinstance(old, Scope) or isinstance(group, Scope):
            self.propagate()
            t = self._rel
            for r, c in app.own.w.items():
                if c[0]:
                    if isinstance(old, Scope):
                        _bump(old.w, r, -c[0], t)
                        self.dirty[0].add(old)
                    if isinstance(group, Scope):
                        _bump(group.w, r, c[0], t)
                        self.dirty[0].add(group)
        app.group = group
        self._split(app)

    def _eager(self, key: str, app_id: str, app: _App, vec: dict[str, int]) -> list[_Share]:
        """The scopes other than the application's own an allocation (or ask) changes at once: the
        elastic quota chain and the quota-tree nodes (its queues with a guarantee: ``eager_q``)."""
        out: list[_Share] = []
        info = self._info
        if not info[QUOTA] and not info[TREE]:
            return out
        view = self.view
        if info[QUOTA]:
            quota = view.quota_of(key, app.tags)
            if quota is not None:
                out.extend((s, vec) for s in self._chain(QUOTA, quota))
        if info[TREE]:
            for tree, node, amounts in view.tree_targets(key, app_id, app.queue, app.user, app.groups,
                                                         app.tags, vec):
                amounts = _vec(amounts)
                out.extend((s, amounts) for s in self._chain(TREE, f"{tree}/{node}"))
        return out

    # -- allocations and asks ------------------------------------------------------------------------
    def _alloc(self, key: str, app_id: str, resource: Mapping[str, int], t: int) -> None:
        app = self.apps.get(app_id)
        if app is None or key in self.allocs:
            return
        if not app.allocs and app.epoch != self._epoch:
            self._regroup(app_id, app)
        vec = _vec(resource)
        charge = _Charge(app_id, vec, t, self._eager(key, app_id, app, vec))
        self.allocs[key] = charge
        app.allocs.add(key)
        use = self._use
        use(app.own, vec, 1)
        for q in app.eager_q:
            use(q, vec, 1)
        for s, v in charge.eager:
            use(s, v, 1)
        self._pending.add(app)

    def _release(self, key: str) -> _Charge | None:
        charge = self.allocs.pop(key, None)
        if charge is None:
            return None
        app = self.apps.get(charge.app)
        use = self._use
        if app is not None:
            app.allocs.discard(key)
            vec = charge.resource
            use(app.own, vec, -1)
            for q in app.eager_q:
                use(q, vec, -1)
            self._pending.add(app)
        for s, v in charge.eager:
            use(s, v, -1)
        return charge

    def _ask_leaves(self, key: str, allocated_at: int | None) -> None:
        ask = self.asks.pop(key, None)
        if ask is None:
            return
        app = self.apps.get(ask.app)
        wait = None if allocated_at is None else max(0, allocated_at - ask.t)
        scopes = [s for s, _ in ask.eager]
        if app is not None:
            app.asks.discard(key)
            self._want(app.own, ask.resource, -1)
            self._pending.add(app)
            scopes.append(app.own)
            if wait is not None:
                if app.new_waits is None:
                    app.new_waits = WaitSketch()
                app.new_waits.add(wait)
        for s, v in ask.eager:
            self._want(s, v, -1)
        if wait is not None:
            for s in scopes:
                sk = s.open[0]
                if sk is None:
                    sk = s.open[0] = WaitSketch()
                sk.add(wait)

    def _count(self, key: str, counter: str) -> None:
        charge = self.allocs.get(key)
        if charge is None:
            return
        app = self.apps.get(charge.app)
        scopes = [s for s, _ in charge.eager]
        if app is not None:
            scopes += [*app.chain, *app.lazy_u, app.own]
        for s in dict.fromkeys(scopes):
            s.counts[counter] = s.counts.get(counter, 0) + 1
            self.dirty[0].add(s)

    # -- the events ------------------------------------------------------------------------------------
    def _config(self, ev: E.ConfigApplied) -> None:
        if ev.t is not None:
            self._at(ev.t)
        self.set_half_life(self.view.half_life())
        zone = self.view.timezone()
        if zone != self.calendar.name:
            # periods end where the new zone says from now on (the periods open now end there)
            self.calendar = Calendar(zone)
            if self.now is not None:
                self.next = [self.calendar.next(res, self.now) for res in RESOLUTIONS]
        self.propagate()
        self._epoch += 1
        if self._refresh_guarantees():
            self._recharge_all()
        for app_id, app in self.apps.items():     # limits decide groups of the applications to come
            if not app.allocs:
                self._regroup(app_id, app)

    def _recharge_all(self) -> None:
        """A new config: queues may have gained or lost a guarantee (fed at once or per period),
        live allocations and asks may count in other elastic quotas or tree nodes."""
        for each in self.apps.values():
            self._split(each)
        for table, waiting in ((self.allocs, False), (self.asks, True)):
            for key, charge in table.items():
                app = self.apps.get(charge.app)
                if app is None:
                    continue
                fresh = self._eager(key, charge.app, app, charge.resource)
                if fresh == charge.eager:
                    continue
                for s, v in charge.eager:
                    if waiting:
                        self._want(s, v, -1)
                    else:
                        self._use(s, v, -1)
                for s, v in fresh:
                    if waiting:
                        self._want(s, v, 1)
                    else:
                        self._use(s, v, 1)
                charge.eager = fresh

    def _nodes(self, ev: E.NodeAdded | E.NodeUpdated | E.NodeRemoved) -> None:
        if ev.t is not None:
            self._at(ev.t)
        if self.now is not None:
            self.propagate()
            if self._refresh_guarantees():      # elastic min scaling and the root's max follow the cluster
                self._recharge_all()

    def _node_removed(self, ev: E.NodeRemoved) -> None:
        self._nodes(ev)

    def _app_added(self, ev: E.AppAdded) -> None:
        self._at(ev.t)
        table = self._info[QUEUE]
        parts = ev.queue.split(".")
        for i in range(len(parts), 0, -1):
            path = ".".join(parts[:i])
            if path in table:
                break
            # a dynamic queue (or one placed by tags): its guarantee as the partition made it
            info = self.view.queue_info(path)
            table[path] = info
            s = self.scopes.get((QUEUE, path))
            if s is not None:
                self._set_info(s, info)
        chain = [self._scope(QUEUE, ".".join(parts[:i])) for i in range(len(parts), 0, -1)]
        own = self._scope(APPLICATION, ev.app)
        self._retired.discard(own)
        app = _App(ev.queue, ev.user, tuple(ev.groups), dict(ev.tags), own, chain, self._scope(USER, ev.user))
        self.apps[ev.app] = app
        self._regroup(ev.app, app)

    def _app_removed(self, ev: E.AppRemoved) -> None:
        self._at(ev.t)
        self._drop_app(ev.app)

    def _drop_app(self, app_id: str) -> None:
        app = self.apps.get(app_id)
        if app is None:
            return
        for key in sorted(app.asks):
            self._ask_leaves(key, None)
        for key in sorted(app.allocs):
            self._release(key)
        self.propagate()
        del self.apps[app_id]
        self._retired.add(app.own)

    def _allocated(self, ev: E.Allocated) -> None:
        now = self._at(ev.t)
        if ev.key in self.asks:
            self._ask_leaves(ev.key, now)
        self._alloc(ev.key, ev.app, ev.resource, now)

    def _released(self, ev: E.Released) -> None:
        self._at(ev.t)
        self._release(ev.key)

    def _replaced(self, ev: E.Replaced) -> None:
        now = self._at(ev.t)
        ph = self._release(ev.placeholder)
        if ev.key in self.asks:
            self._ask_leaves(ev.key, now)
        if ph is not None:
            self._alloc(ev.key, ph.app, ev.resource, now)

    def _timeouts(self, ev: E.Timeouts) -> None:
        # what a timeout released and which applications expired (removed with their asks) is told
        # by the ``noted`` events that follow
        self._at(ev.t)

    def _ask_added(self, ev: E.AskAdded) -> None:
        now = self._at(ev.t)
        app = self.apps.get(ev.app)
        if app is None or ev.key in self.asks:
            return
        if not app.allocs and app.epoch != self._epoch:
            self._regroup(ev.app, app)
        vec = _vec(ev.resource)
        ask = _Charge(ev.app, vec, now, self._eager(ev.key, ev.app, app, vec))
        self.asks[ev.key] = ask
        app.asks.add(ev.key)
        self._want(app.own, vec, 1)
        self._pending.add(app)
        for s, v in ask.eager:
            self._want(s, v, 1)

    def _ask_removed(self, ev: E.AskRemoved) -> None:
        self._at(ev.t)
        self._ask_leaves(ev.key, None)

    def _preempted(self, ev: E.Preempted) -> None:
        self._at(ev.t)
        code = ev.reason.get("code", "")
        for key in ev.keys:
            self._count(key, "preempted:" + code)
            self._release(key)

    def _noted(self, ev: E.Noted) -> None:
        if ev.t is not None:
            self._at(ev.t)          # the time of the change it tells (older journals lack it)
        n = ev.notice
        kind = n.get("type")
        if kind == "released":
            key = n.get("allocationKey")
            if isinstance(key, str):
                self._release(key)
        elif kind == "application":
            if n.get("state") == "Expired":        # removed by the terminated timeout
                app = n.get("applicationID")
                if isinstance(app, str):
                    self._drop_app(app)
        elif kind == "preempted":
            reason = n.get("reason") or {}
            code = reason.get("code", "") if isinstance(reason, Mapping) else ""
            for a in n.get("allocations") or ():
                key = a.get("allocationKey") if isinstance(a, Mapping) else None
                if isinstance(key, str):
                    self._count(key, "preempted:" + code)
                    self._release(key)

    # -- refusals (decisions that change nothing: not journalled) ------------------------------------
    def refused(self, app_id: str, codes: Sequence[str]) -> None:
        """Count a refused admission of ``app_id`` by each reason code in ``codes``. A refusal makes no
        row of its own (rows are a function of the journal, which refusals are not in): the counter
        reaches the rows with the scope's next change."""
        app = self.apps.get(app_id)
        if app is None or self.now is None:
            return
        for s in app.scopes():
            for code in dict.fromkeys(codes):
                s.counts["refused:" + code] = s.counts.get("refused:" + code, 0) + 1

    # -- reading -------------------------------------------------------------------------------------
    def parent_of(self, kind: str, name: str) -> str | None:
        """The parent of a queue, elastic quota or tree node (None: a top one, or another kind)."""
        info = self._info.get(kind, {}).get(name)
        if info is not None:
            return info[1]
        if kind == QUEUE and "." in name:
            return name.rpartition(".")[0]
        return None

    def scope(self, kind: str, name: str) -> Scope | None:
        """The scope ``kind``/``name`` (up to date), or None when it never counted anything."""
        self.propagate()
        return self.scopes.get((kind, name))

    def integral(self, kind: str, name: str, metric: str, at: int | None = None) -> dict[str, int]:
        """The integral (resource-ms) of ``metric`` of a scope up to ``at`` ms (default and at
        least: now)."""
        self.propagate()
        s = self.scopes.get((kind, name))
        if s is None or self.now is None:
            return {}
        return s.integral(metric, max(at if at is not None else self.now, self.now) - self.origin)

    def take_rows(self) -> list[Row]:
        """The rows of the periods that ended (the store takes them)."""
        rows, self.outbox = self.outbox, []
        return rows


def _scope_order(s: Scope) -> tuple[str, str]:
    return s.kind, s.name


def _copy(sketch: WaitSketch) -> WaitSketch:
    out = WaitSketch()
    out.merge(sketch)
    return out


# -- the engine's state as data (snapshots) ---------------------------------------------------------------
SNAPSHOT_VERSION = 1


def _cells_json(cells: Cells) -> dict[str, list[int]]:
    return {r: [c[0], c[1]] for r, c in sorted(cells.items())}


def _cells_of(data: Any) -> Cells:
    return {str(r): [int(c[0]), int(c[1])] for r, c in (data or {}).items()}


def _sketch_json(s: WaitSketch | None) -> dict[str, object] | None:
    return None if s is None else s.to_json()


def _sketch_of(data: Any) -> WaitSketch | None:
    return None if data is None else WaitSketch.from_json(data)


def snapshot_of(a: Accounting) -> dict[str, Any]:
    """The engine's state as plain JSON data (:func:`restore_into` reads it back).

    The live allocations are not in it: a snapshot restores the partition with them, and
    :func:`restore_into` takes them from there. The waiting asks' times are (they are the engine's
    own, never earlier than an event seen before them).
    """
    a.propagate()
    scopes = []
    for (kind, name), s in sorted(a.scopes.items()):
        entry: dict[str, Any] = {"k": kind, "n": name}
        for key in ("u", "w", "b", "l"):
            cells: Cells = getattr(s, key)
            if cells:
                entry[key] = _cells_json(cells)
        if s.counts:
            entry["c"] = dict(sorted(s.counts.items()))
        if any(x is not None for x in s.open):
            entry["o"] = [_sketch_json(x) for x in s.open]
        if s.e:
            entry["e"] = dict(sorted(s.e.items()))
        scopes.append(entry)
    apps = {}
    for app_id, app in sorted(a.apps.items()):
        group = app.group
        apps[app_id] = {"queue": app.queue, "user": app.user, "groups": list(app.groups),
                        "tags": dict(app.tags), "group": group.name if isinstance(group, Scope) else group,
                        "prop_u": _cells_json(app.prop_u), "prop_w": _cells_json(app.prop_w),
                        "new_waits": _sketch_json(app.new_waits), "epoch": app.epoch,
                        **({"prop_e": dict(sorted(app.prop_e.items()))} if app.prop_e else {})}
    return {
        "version": SNAPSHOT_VERSION, "zone": a.calendar.name, "now": a.now, "origin": a.origin,
        "epoch": a._epoch, "next": list(a.next), "half_life": a.half_life, "e_origin": a._e_origin,
        "info": {kind: {name: [info[0], info[1], info[2]] for name, info in sorted(table.items())}
                 for kind, table in sorted(a._info.items())},
        "scopes": scopes,
        "dirty": [sorted([s.kind, s.name] for s in d) for d in a.dirty],
        "retired": sorted([s.kind, s.name] for s in a._retired),
        "apps": apps,
        "asks": {key: ask.t for key, ask in sorted(a.asks.items())},
        "outbox": [[r.resolution, r.t, r.kind, r.name, r.data] for r in a.outbox],
    }


def restart_at_now(a: Accounting) -> None:
    """Keep the levels, forget the past: every integral is zero now (a snapshot written before the
    history existed restores the partition without it; history starts again there)."""
    a.propagate()
    t = a._rel
    for s in a.scopes.values():
        for key in ("u", "w", "b", "l"):
            cells: Cells = getattr(s, key)
            for c in cells.values():
                c[1] = c[0] * t
        s.counts = {}
        s.open = [None] * _NRES
    for app in a.apps.values():
        for own, prop in ((app.own.u, app.prop_u), (app.own.w, app.prop_w)):
            prop.clear()
            prop.update({r: [c[0], c[1]] for r, c in own.items()})
        app.new_waits = None
    a.dirty = [set() for _ in range(_NRES)]
    a.outbox = []
    a._retired = set()


def restore_into(a: Accounting, data: Mapping[str, Any],
                 allocations: Iterable[tuple[str, str, Mapping[str, int]]],
                 asks: Iterable[tuple[str, str, Mapping[str, int]]]) -> None:
    """Put the state :func:`snapshot_of` wrote into the fresh engine ``a``, with the partition's live
    ``allocations`` and waiting ``asks`` (key, application, resource) at the snapshot's instant.
    ``ValueError`` when ``data`` is not such a state."""
    if data.get("version") != SNAPSHOT_VERSION:
        raise InputError(f"history snapshot version {data.get('version')!r} is not {SNAPSHOT_VERSION}")
    a.calendar = Calendar(str(data["zone"]))
    a.now = None if data["now"] is None else int(data["now"])
    a.origin = int(data["origin"])
    a._rel = (a.now - a.origin) if a.now is not None else 0
    a._epoch = int(data["epoch"])
    a.half_life = int(data.get("half_life") or 0)
    a._e_origin = int(data.get("e_origin") or 0)
    a.next = [int(x) for x in data["next"]]
    a._info = {kind: {name: (info[0], info[1], info[2]) for name, info in table.items()}
               for kind, table in data["info"].items()}
    for kind in (QUEUE, QUOTA, TREE):
        a._info.setdefault(kind, {})
    a.scopes = {}
    a._sibs = {}
    for entry in data["scopes"]:
        s = a._scope(str(entry["k"]), str(entry["n"]))
        s.u, s.w, s.b, s.l = (_cells_of(entry.get(k)) for k in ("u", "w", "b", "l"))
        s.counts = {str(k): int(v) for k, v in (entry.get("c") or {}).items()}
        if entry.get("o"):
            s.open = [_sketch_of(x) for x in entry["o"]]
        s.e = {str(r): float(v) for r, v in (entry.get("e") or {}).items()}
    for s in a.scopes.values():          # what the siblings borrow together, from the levels
        if s.sib is not None:
            for r, c in s.b.items():
                if c[0]:
                    s.sib.bsum[r] = s.sib.bsum.get(r, 0) + c[0]
    a.dirty = [{a._scope(k, n) for k, n in d} for d in data["dirty"]]
    a._retired = {a._scope(k, n) for k, n in data["retired"]}
    a.apps = {}
    for app_id, x in data["apps"].items():
        parts = str(x["queue"]).split(".")
        chain = [a._scope(QUEUE, ".".join(parts[:i])) for i in range(len(parts), 0, -1)]
        app = _App(str(x["queue"]), str(x["user"]), tuple(x["groups"]), dict(x["tags"]),
                   a._scope(APPLICATION, app_id), chain, a._scope(USER, str(x["user"])))
        g = x["group"]
        app.group = a._scope(GROUP, g) if isinstance(g, str) else (None if g is None else False)
        app.prop_u, app.prop_w = _cells_of(x["prop_u"]), _cells_of(x["prop_w"])
        app.new_waits = _sketch_of(x.get("new_waits"))
        app.epoch = int(x["epoch"])
        app.prop_e = {str(r): float(v) for r, v in (x.get("prop_e") or {}).items()}
        a._split(app)
        a.apps[app_id] = app
    a.allocs, a.asks = {}, {}
    for key, app_id, resource in allocations:
        holder = a.apps.get(app_id)
        if holder is None:
            continue
        vec = _vec(resource)
        a.allocs[key] = _Charge(app_id, vec, a.now or 0, a._eager(key, app_id, holder, vec))
        holder.allocs.add(key)
    times = data["asks"]
    for key, app_id, resource in asks:
        holder = a.apps.get(app_id)
        if holder is None or key not in times:
            continue
        vec = _vec(resource)
        a.asks[key] = _Charge(app_id, vec, int(times[key]), a._eager(key, app_id, holder, vec))
        holder.asks.add(key)
    a.outbox = [Row(int(r[0]), int(r[1]), str(r[2]), str(r[3]), r[4]) for r in data["outbox"]]
    a._pending = set()
    if a.half_life:
        a._weigh()
