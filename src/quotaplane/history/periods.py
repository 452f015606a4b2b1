"""Time in the accounting engine: event times, rollup periods, decayed usage, reading.

:class:`Ledger` is the part of :class:`~quotaplane.history.engine.Accounting` that moves time (to an
event's own time, never a clock), closes the rollup periods an event crosses (writing their rows),
gives applications' changes to their lazily fed scopes once per period, keeps decayed usage (fair
share with memory) and answers reads. What events mean (allocations, asks, borrowing, lending) is
the subclass in :mod:`quotaplane.history.engine`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import quotaplane.events as E
from quotaplane.history.calendar import RESOLUTIONS, Calendar
from quotaplane.history.scopes import (
    APPLICATION,
    NRES,
    QUEUE,
    QUOTA,
    ROLL_UP,
    TREE,
    AppState,
    Cells,
    Charge,
    Row,
    Scope,
    ScopeInfo,
    Siblings,
    View,
    copy_sketch,
    scope_order,
)
from quotaplane.history.sketch import WaitSketch

__all__ = ["Ledger"]


class Ledger(ABC):
    """Time, periods, decayed usage and reading of one partition's accounting (see the module
    docstring; :class:`~quotaplane.history.engine.Accounting` is the whole engine).

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
        self.next: list[int] = [0] * NRES
        self.scopes: dict[tuple[str, str], Scope] = {}
        self._sibs: dict[tuple[str, str | None], Siblings] = {}
        self._info: dict[str, dict[str, ScopeInfo]] = {QUEUE: {}, QUOTA: {}, TREE: {}}
        self.apps: dict[str, AppState] = {}
        self.allocs: dict[str, Charge] = {}
        self.asks: dict[str, Charge] = {}
        #: per resolution: the scopes changed since its last boundary
        self.dirty: list[set[Scope]] = [set() for _ in range(NRES)]
        #: applications whose changes the lazily fed scopes have not received yet
        self._pending: set[AppState] = set()
        #: changes of applications' use not applied yet, in order: (application, amount, sign, time);
        #: applied (:meth:`_settle`) before anything reads a scope or a period closes
        self._log: list[tuple[AppState, Mapping[str, int], int, int]] = []
        #: rows of the periods that ended, oldest first, until the store takes them
        self.outbox: list[Row] = []
        #: scopes of removed applications, forgotten once their last periods are written
        self._retired: set[Scope] = set()
        #: event type -> its handler (the subclass fills it)
        self._handlers: dict[type[E.Event], Callable[[Any], None]] = {}

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
        for i, res in enumerate(RESOLUTIONS):
            if ms < nxt[i]:
                continue
            if self.dirty[i]:
                self._close(i, nxt[i])
            nxt[i] = cal.next(res, ms)
        if self._retired:
            self._forget_retired()

    def _close(self, i: int, b: int) -> None:
        """The period of resolution ``i`` ending at ``b`` closed: a row for every scope that changed
        in it, whose open waits and changes go on to the coarser periods."""
        dirty = self.dirty[i]
        up = ROLL_UP[i]
        rows = self.outbox
        for s in sorted(dirty, key=scope_order):
            sketch = s.open[i]
            if i or s.kind != APPLICATION:    # applications: hours and days (there are many)
                rows.append(Row(i, b, s.kind, s.name, s.row(b - self.origin, sketch)))
            if sketch is not None:
                s.open[i] = None
                _roll_up(s, sketch, up)
        for j in up:
            if j > 2:   # applications roll up to days, not weeks and months (they come and go)
                self.dirty[j] |= {s for s in dirty if s.kind != APPLICATION}
            else:
                self.dirty[j] |= dirty
        dirty.clear()

    def _forget_retired(self) -> None:
        """Forget the scopes of removed applications once their last periods are written."""
        dirty = self.dirty
        for s in list(self._retired):
            if any(s in d for d in dirty[:3]) or any(x is not None for x in s.open[:3]):
                continue
            self._retired.discard(s)
            self.scopes.pop((s.kind, s.name), None)

    @abstractmethod
    def _settle(self) -> None:
        """Apply the changes of use :attr:`_log` holds (the subclass knows what they mean)."""

    def propagate(self) -> None:
        """Apply the changes of use not applied yet, then give every application's changes since
        the last call to its lazily fed scopes."""
        if self._log:
            self._settle()
        pending = self._pending
        if not pending:
            return
        dirty = self.dirty[0]
        for app in pending:
            _feed(app.own.u, app.prop_u, app.lazy_u, "u")
            _feed(app.own.w, app.prop_w, app.lazy_w, "w")
            dirty.update(app.lazy_u)
            dirty.update(app.lazy_w)
            if app.own.e:
                _feed_decayed(app)
            waits = app.new_waits
            if waits is not None:
                app.new_waits = None
                for s in app.lazy_w:
                    _merge_open(s, 0, waits)
        pending.clear()

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


def _merge_open(s: Scope, j: int, sketch: WaitSketch) -> None:
    """Add ``sketch`` to ``s``'s open waits of resolution ``j``."""
    have = s.open[j]
    if have is None:
        s.open[j] = copy_sketch(sketch)
    else:
        have.merge(sketch)


def _roll_up(s: Scope, sketch: WaitSketch, up: Sequence[int]) -> None:
    """The waits of a closed period go on to the coarser open periods ``up``."""
    for j in up:
        _merge_open(s, j, sketch)


def _feed(own: Cells, prop: Cells, lazy: Sequence[Scope], key: str) -> None:
    """What an application's cells ``own`` changed by since ``prop`` (what was given) goes to the
    ``key`` cells of its ``lazy`` scopes."""
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


def _feed_decayed(app: AppState) -> None:
    """An application's decayed usage since the last call goes to its lazily fed use scopes."""
    prop_e = app.prop_e
    for r, e in app.own.e.items():
        de = e - prop_e.get(r, 0.0)
        if de:
            prop_e[r] = e
            for s in app.lazy_u:
                s.e[r] = s.e.get(r, 0.0) + de
