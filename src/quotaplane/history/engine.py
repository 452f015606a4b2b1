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
someone reads. Nothing is ever rescanned. An allocation's or release's change of the application
and its queues with a guarantee is logged with its time and applied, in order and each at its own
time, with the others at the next read, period end or 1,024th change (:meth:`Accounting._settle`):
the same numbers, computed in one tight pass instead of between the partition's own work.

**Rollups.** When an event's time crosses a period boundary (minute, hour, day, week, month in
the configured time zone, :mod:`~quotaplane.history.calendar`), the scopes that changed in the
period that ended are written to :attr:`Accounting.outbox` as a :class:`Row`: their integrals and
levels *at the boundary* and the waits of the period. A scope that did not change writes nothing:
its integral at any later boundary is its last row's integral plus its level times the time since.
Applications (many, short-lived) write hour and day rows only.

Which application belongs to which group or elastic quota, and what each scope is guaranteed, is
read from the partition through a :class:`View` (read-only) when the event that decides it is seen.

The engine is three modules: :mod:`~quotaplane.history.scopes` (the data it counts in),
:mod:`~quotaplane.history.periods` (time, rollup periods, decayed usage, reading: :class:`Ledger`)
and this one (what each event means: allocations, asks, borrowing and lending). Its state as data
(snapshots) is :mod:`~quotaplane.history.snapshot`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import quotaplane.events as E
from quotaplane.history.calendar import RESOLUTIONS, Calendar
from quotaplane.history.periods import Ledger
from quotaplane.history.scopes import (
    APPLICATION,
    GROUP,
    KINDS,
    METRICS,
    QUEUE,
    QUOTA,
    TREE,
    USER,
    AppState,
    Charge,
    Row,
    Scope,
    ScopeInfo,
    Share,
    Siblings,
    Slot,
    TreeTarget,
    View,
    borrowed_level,
    bump,
    flavored_names,
    level_of,
    ms_of,
    vec_of,
)
from quotaplane.history.sketch import WaitSketch
from quotaplane.resources import Resource, shared

#: the elastic quotas and tree nodes of a charge when the config has neither (shared, never changed)
_NO_EAGER: list[Share] = []
#: changes of use logged at most before they are applied (:meth:`Accounting._settle`)
_LOG_MAX = 1024
#: a :class:`Charge` without its ``__init__`` call (filled by the caller, on the admission path)
_blank = object.__new__

__all__ = [
    "APPLICATION", "GROUP", "KINDS", "METRICS", "QUEUE", "QUOTA", "TREE", "USER",
    "Accounting", "Row", "Scope", "ScopeInfo", "TreeTarget", "View", "ms_of",
]


class Accounting(Ledger):
    """The accounting of one partition (see the module docstring and :class:`Ledger`)."""

    def __init__(self, view: View, calendar: Calendar | None = None) -> None:
        super().__init__(view, calendar)
        self._handlers.update({
            E.ConfigApplied: self._config, E.NodeAdded: self._nodes, E.NodeUpdated: self._nodes,
            E.NodeRemoved: self._node_removed, E.AppAdded: self._app_added, E.AppRemoved: self._app_removed,
            E.Allocated: self._allocated, E.Released: self._released, E.Replaced: self._replaced,
            E.Timeouts: self._timeouts, E.AskAdded: self._ask_added, E.AskRemoved: self._ask_removed,
            E.Preempted: self._preempted, E.Noted: self._noted,
        })

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
        s.flavored = flavored_names(s.guar)
        s.max = dict(mx) if mx is not None else None
        if s.sib is not None:
            s.sib.idle = None       # its guarantee may have changed: who has an idle part, again
        s.sib = None
        s.slots = None
        if s.guar is not None and (parent is not None or s.kind != TREE):   # trees' roots share nothing
            sib = self._sibs.get((s.kind, parent))
            if sib is None:
                sib = self._sibs[(s.kind, parent)] = Siblings()
            s.sib = sib
            sib.idle = None
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
        else:
            self._use_guaranteed(s, g, vec, sign)

    def _use_guaranteed(self, s: Scope, g: Mapping[str, int], vec: Mapping[str, int], sign: int) -> None:
        """:meth:`_use` of a scope with guarantee ``g``: one pass per resource over used, borrowed,
        the siblings' sum and this scope's own lending (:meth:`_relend`'s rule, inlined: every
        allocation and release comes here for each queue with a guarantee above it), each resource's
        cells read from its :class:`Slot`."""
        t = self._rel
        bor, sib, lent = s.b, s.sib, s.l
        bsum = sib.bsum if sib is not None else None
        slots = s.slots
        if slots is None:
            slots = s.slots = {}
        moved: list[str] | None = None
        # quiet: it never borrowed nor lent, and none of its siblings borrows — then a resource
        # whose level stays within its guarantee changes neither borrowing nor lending
        quiet = not bor and not lent and not bsum
        idx = sib.idle if sib is not None else None
        flavored = s.flavored
        # a plain name borrowed per flavor comes after its flavors: its borrowing is their sum's
        items = vec.items() if flavored is None else sorted(vec.items(), key=lambda rv: rv[0] in flavored)
        for r, v in items:
            d = v if sign > 0 else -v
            x = slots.get(r)
            if x is None:
                x = slots[r] = _slot(s, g, r)
            c = x.u
            c[0] += d
            c[1] += d * t
            level = c[0]
            gv = x.g
            if idx is not None and (level < gv) != (level - d < gv):
                # its guarantee of r became idle or busy: whether others' borrowing moves its lending
                if level < gv:
                    idx.setdefault(r, set()).add(s)
                elif r in idx:
                    idx[r].discard(s)
            if quiet and level <= gv:
                continue
            if flavored is not None and r in flavored:
                nb = borrowed_level(s.u, g, r, flavored)
            else:
                nb = level - gv if level > gv else 0
            bc = x.b
            ob = bc[0] if bc is not None else 0
            if nb != ob:
                db = nb - ob
                if bc is None:
                    x.b = bor[r] = [db, db * t]
                else:
                    bc[0] = nb
                    bc[1] += db * t
                if bsum is not None:
                    total = bsum.get(r, 0) + db
                    if total:
                        bsum[r] = total
                    else:
                        del bsum[r]
                    if moved is None:
                        moved = [r]
                    else:
                        moved.append(r)
            if not gv or bsum is None:
                continue
            # its lending of r: the idle part of its guarantee its siblings use above theirs
            lc = x.l
            total = bsum.get(r, 0)
            if not total and lc is None:
                continue                            # nobody borrows r, and it never lent it
            lv = gv - level                         # idle
            if lv <= 0:
                lv = 0
            else:
                total -= nb                         # the others' borrowing
                if total < lv:
                    lv = total if total > 0 else 0
            if lc is None:
                if lv:
                    x.l = lent[r] = [lv, lv * t]
            elif lv != lc[0]:
                lc[1] += (lv - lc[0]) * t
                lc[0] = lv
        if moved is not None and sib is not None:
            # only the siblings with an idle part of their guarantee of a moved resource lend it
            # (the others lend none of it, before and after): not every guaranteed sibling (issue 38)
            if idx is None:
                idx = sib.idle_of()
            relend = self._relend
            for r in moved:
                lenders = idx.get(r)
                if lenders:
                    one = (r,)
                    for lender in lenders:
                        if lender is not s:
                            relend(lender, one)

    def _want(self, s: Scope, vec: Mapping[str, int], sign: int) -> None:
        """``s``'s waiting asks want ``sign × vec`` more from now on."""
        t = self._rel
        wait = s.w
        for r, v in vec.items():
            if not v:
                continue                        # an ask's shared request may name a resource at 0
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
            lc = lent.get(r)
            if gv is None:                      # not (or no longer) guaranteed: it lends none of it
                if lc is not None and lc[0]:
                    lc[1] -= lc[0] * self._rel
                    lc[0] = 0
                    self.dirty[0].add(s)
                continue
            c = used.get(r)
            idle = gv - (c[0] if c is not None else 0)
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
                    lc = lent[r] = [d, d * self._rel]
                    slot = s.slots.get(r) if s.slots is not None else None
                    if slot is not None:
                        slot.l = lc
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
        self.propagate()            # every scope is recomputed, the lazily fed ones too: up to date first
        self._info = fresh
        self._recompute_all()
        return True

    def _refresh_cluster_bound(self) -> bool:
        """A node came, changed or went: read again what follows the cluster's size (the root's max,
        the elastic quotas: :meth:`View.cluster_bound`), and recompute only the scopes whose values
        changed and their siblings; True (after a full refresh) when more than values changed."""
        info = self._info
        changed: list[tuple[str, str, ScopeInfo]] = []
        for kind, table in self.view.cluster_bound().items():
            have = info.get(kind, {})
            for name, fresh in table.items():
                was = have.get(name)
                if was == fresh:
                    continue
                if was is None or not _same_shape(was, fresh):
                    return self._refresh_guarantees()
                changed.append((kind, name, fresh))
        for kind, name, fresh in changed:
            info[kind][name] = fresh
        if changed:
            self._reguarantee(changed)
        return False

    def _reguarantee(self, changed: list[tuple[str, str, ScopeInfo]]) -> None:
        """New guarantees or maxima of the scopes ``changed`` (none gained or lost a guarantee, none
        changed parent): each borrows and lends anew, and so do its siblings where what they borrow
        together moved — what :meth:`_recompute_all` would change, and nothing else (a node added at
        100,000 allocations costs what changed, not a pass over every scope and charge: issue 39)."""
        t = self._rel
        moved: dict[Siblings, set[str]] = {}
        for kind, name, info in changed:
            s = self.scopes.get((kind, name))
            if s is None:
                self._scope(kind, name)         # a scope with a guarantee lends before it ever uses
                continue
            before = s.guar
            self._reinfo(s, info)
            g, sib = s.guar, s.sib
            if g == before:
                continue                        # its max only
            for r in set(s.u) | set(s.b):
                nb = 0 if g is None else borrowed_level(s.u, g, r, s.flavored)
                d = nb - level_of(s.b, r)
                if d:
                    bump(s.b, r, d, t)
                    self.dirty[0].add(s)
                    if sib is not None:
                        total = sib.bsum.get(r, 0) + d
                        if total:
                            sib.bsum[r] = total
                        else:
                            sib.bsum.pop(r, None)
                        moved.setdefault(sib, set()).add(r)
            if g and sib is not None:
                self._relend(s, set(before or ()) | set(g) | set(s.l))
            else:
                self._unlend(s)
        for sib, resources in moved.items():
            for lender in sib.lenders:
                self._relend(lender, resources)

    def _recompute_all(self) -> None:
        """After a change of guarantees, parents or maxima: every scope's info, borrowed and lent
        levels again (from now on; the integrals so far stay)."""
        kinds = self._info
        self._sibs = {}
        for kind, table in kinds.items():      # a scope with a guarantee lends before it ever uses
            self._ensure(kind, table)
        counted = [s for (kind, _), s in self.scopes.items() if kind in kinds]
        for s in counted:
            self._reinfo(s, kinds[s.kind].get(s.name))
        for s in counted:
            self._reborrow(s)
        for s in counted:
            if s.guar and s.sib is not None:
                self._relend(s, set(s.guar) | set(s.l))
            else:
                self._unlend(s)

    def _ensure(self, kind: str, names: Iterable[str]) -> None:
        scopes = self.scopes
        for name in names:
            if (kind, name) not in scopes:
                scopes[(kind, name)] = Scope(kind, name)

    def _reinfo(self, s: Scope, info: ScopeInfo | None) -> None:
        old = (s.guar, s.max)
        if info is not None:
            self._set_info(s, info)
        else:
            if s.sib is not None:
                s.sib.idle = None
            s.guar, s.max, s.sib, s.slots, s.flavored = None, None, None, None, None
        if (s.guar, s.max) != old:
            self.dirty[0].add(s)

    def _reborrow(self, s: Scope) -> None:
        """``s`` borrows what its use is above its (new) guarantee; its siblings' sum counts it."""
        g, t = s.guar, self._rel
        s.slots = None                  # bump may add borrowed lists
        for r in set(s.u) | set(s.b):
            nb = 0 if g is None else borrowed_level(s.u, g, r, s.flavored)
            d = nb - level_of(s.b, r)
            if d:
                bump(s.b, r, d, t)
                self.dirty[0].add(s)
        if s.sib is not None:
            bsum = s.sib.bsum
            for r, c in s.b.items():
                if c[0]:
                    bsum[r] = bsum.get(r, 0) + c[0]

    def _unlend(self, s: Scope) -> None:
        """``s`` has no guarantee (or no siblings) any more: it lends nothing from now on."""
        for r, c in list(s.l.items()):
            if c[0]:
                bump(s.l, r, -c[0], self._rel)
                self.dirty[0].add(s)

    # -- an application's scopes ---------------------------------------------------------------------
    def _split(self, app: AppState) -> None:
        """Which of the application's scopes take its changes at once (queues with a guarantee)
        and which once per period (the others); the lazily fed ones must be up to date."""
        group = app.group if isinstance(app.group, Scope) else None
        tail = [app.user_scope] if group is None else [app.user_scope, group]
        app.lazy_u = [q for q in app.chain if q.guar is None] + tail
        app.lazy_w = [*app.chain, *tail]
        app.eager_q = [q for q in app.chain if q.guar is not None]

    def _regroup(self, app_id: str, app: AppState) -> None:
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
                        bump(old.w, r, -c[0], t)
                        self.dirty[0].add(old)
                    if isinstance(group, Scope):
                        bump(group.w, r, c[0], t)
                        self.dirty[0].add(group)
        app.group = group
        self._split(app)

    def _eager(self, key: str, app_id: str, app: AppState, vec: Mapping[str, int]) -> list[Share]:
        """The scopes other than the application's own an allocation (or ask) changes at once: the
        elastic quota chain and the quota-tree nodes (its queues with a guarantee: ``eager_q``)."""
        info = self._info
        if not info[QUOTA] and not info[TREE]:
            return _NO_EAGER                    # shared: a charge's list is replaced, never changed
        out: list[Share] = []
        view = self.view
        if info[QUOTA]:
            quota = view.quota_of(key, app.tags)
            if quota is not None:
                out.extend((s, vec) for s in self._chain(QUOTA, quota))
        if info[TREE]:
            for tree, node, amounts in view.tree_targets(key, app_id, app.queue, app.user, app.groups,
                                                         app.tags, vec):
                amounts = vec_of(amounts)
                out.extend((s, amounts) for s in self._chain(TREE, f"{tree}/{node}"))
        return out or _NO_EAGER

    # -- allocations and asks ------------------------------------------------------------------------
    def _alloc(self, key: str, app_id: str, resource: Mapping[str, int], t: int) -> None:
        app = self.apps.get(app_id)
        if app is None or key in self.allocs:
            return
        if not app.allocs and app.epoch != self._epoch:
            self._regroup(app_id, app)
        # vec_of and Charge(...) written out, and the change of use logged here (_charge_app):
        # every allocation comes here, and each Python call counts (issue 33, accounting on vs off)
        vec = resource.plain() if type(resource) is Resource else dict(resource)
        if 0 in vec.values():
            vec = {r: v for r, v in vec.items() if v}
        info = self._info
        eager = self._eager(key, app_id, app, vec) if info[QUOTA] or info[TREE] else _NO_EAGER
        charge = _blank(Charge)
        charge.app, charge.resource, charge.t, charge.eager = app_id, vec, t, eager
        self.allocs[key] = charge
        app.allocs[key] = None
        if self.half_life:
            self._charge_app(app, vec, 1)
        else:
            log = self._log
            log.append((app, vec, 1, self._rel))
            if len(log) >= _LOG_MAX:
                self._settle()
        for s, v in eager:
            self._use(s, v, 1)

    def _release(self, key: str) -> Charge | None:
        charge = self.allocs.pop(key, None)
        if charge is None:
            return None
        app = self.apps.get(charge.app)
        if app is not None:
            app.allocs.pop(key, None)
            if self.half_life:
                self._charge_app(app, charge.resource, -1)
            else:                               # _charge_app written out, as in _alloc
                log = self._log
                log.append((app, charge.resource, -1, self._rel))
                if len(log) >= _LOG_MAX:
                    self._settle()
        for s, v in charge.eager:
            self._use(s, v, -1)
        return charge

    def _charge_app(self, app: AppState, vec: Mapping[str, int], sign: int) -> None:
        """:meth:`_use` of the application's own scope and its queues with a guarantee. Without fair
        share with memory it is logged, and applied with the others at the next read or period end
        (:meth:`_settle`): in one tight pass rather than between the partition's own work at every
        allocation and release (issue 33, accounting on vs off)."""
        if self.half_life:          # decayed usage weighs a change by the time it is applied at
            self._pending.add(app)
            self._use(app.own, vec, sign)
            for q in app.eager_q:
                self._use(q, vec, sign)
            return
        log = self._log
        log.append((app, vec, sign, self._rel))
        if len(log) >= _LOG_MAX:
            self._settle()

    def _settle(self) -> None:
        """Apply the logged changes of use, each at its own time, in order: the application's own
        cells, and its queues with a guarantee (used, borrowed, the siblings' lending)."""
        log, self._log = self._log, []
        rel = self._rel
        dirty, pending = self.dirty[0], self._pending
        try:
            for app, vec, sign, t in log:
                self._rel = t
                pending.add(app)
                own = app.own
                dirty.add(own)
                cells = own.u
                for r, n in vec.items():        # the application's own cells: no guarantee
                    d = n if sign > 0 else -n
                    c = cells.get(r)
                    if c is None:
                        cells[r] = [d, d * t]
                    else:
                        c[0] += d
                        c[1] += d * t
                for q in app.eager_q:
                    g = q.guar
                    if g is None:
                        self._use(q, vec, sign)
                    else:
                        dirty.add(q)
                        self._use_guaranteed(q, g, vec, sign)
        finally:
            self._rel = rel

    def _ask_leaves(self, key: str, allocated_at: int | None) -> None:
        ask = self.asks.pop(key, None)
        if ask is None:
            return
        app = self.apps.get(ask.app)
        wait = None if allocated_at is None else max(0, allocated_at - ask.t)
        scopes = [s for s, _ in ask.eager]
        if app is not None:
            app.asks.pop(key, None)
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
                _wait_in(s, wait)

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
            # What changes here reads only the scopes with a guarantee, which the log feeds; the lazily
            # fed scopes (queues without one, users, groups) take their applications' changes at the
            # next read or period end, as after any allocation — feeding every application touched
            # since (all of them after a build: 0.6 s at 100,000) is not the node's to pay (issue 39)
            if self._log:
                self._settle()
            if self._refresh_cluster_bound():     # the root's max and elastic min scaling follow it
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
        app = AppState(ev.queue, ev.user, tuple(ev.groups), dict(ev.tags), own, chain,
                       self._scope(USER, ev.user))
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
        now = self.now
        if now is None or round(ev.t * 1000) > now:    # _at only when time moves (a call saved)
            now = self._at(ev.t)
        if ev.key in self.asks:
            self._ask_leaves(ev.key, now)
        self._alloc(ev.key, ev.app, ev.resource, now)

    def _released(self, ev: E.Released) -> None:
        now = self.now
        if now is None or round(ev.t * 1000) > now:
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
        # one shared Resource per distinct request (it is immutable), not a copy per waiting ask
        # (issue 38, memory per pending ask); _want skips a resource at 0
        vec = shared(ev.resource) if type(ev.resource) is Resource else vec_of(ev.resource)
        ask = Charge(ev.app, vec, now, self._eager(ev.key, ev.app, app, vec))
        self.asks[ev.key] = ask
        app.asks[ev.key] = None
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
            if isinstance(key, str) and key in self.allocs:     # a journalled release came first
                self._release(key)
        elif kind == "application":
            app = n.get("applicationID")
            if n.get("state") == "Expired" and isinstance(app, str):    # the terminated timeout
                self._drop_app(app)
        elif kind == "preempted":
            self._noted_preemption(n)

    def _noted_preemption(self, n: Mapping[str, Any]) -> None:
        """A preemption told by a notice: each allocation taken away counts by the reason's code."""
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
        keys = ["refused:" + code for code in dict.fromkeys(codes)]
        for s in app.scopes():          # no call per scope and code: every refusal comes here
            counts = s.counts
            for k in keys:
                counts[k] = counts[k] + 1 if k in counts else 1


def _wait_in(s: Scope, wait: int) -> None:
    """An ask of ``s`` waited ``wait`` ms until it was allocated (this minute's open waits)."""
    sk = s.open[0]
    if sk is None:
        sk = s.open[0] = WaitSketch()
    sk.add(wait)


def _same_shape(was: ScopeInfo, fresh: ScopeInfo) -> bool:
    """Whether only the values of a scope's guarantee or max changed: it did not change parent, nor
    gain or lose a guarantee (then which scopes an application's changes reach at once changes)."""
    return was[1] == fresh[1] and (was[0] is None) == (fresh[0] is None) and bool(was[0]) == bool(fresh[0])


def _slot(s: Scope, g: Mapping[str, int], r: str) -> Slot:
    """The :class:`Slot` of resource ``r`` of ``s`` (guarantee ``g``), its used cell made if it has none."""
    u = s.u.get(r)
    if u is None:
        u = s.u[r] = [0, 0]
    return Slot(g.get(r, 0), u, s.b.get(r), s.l.get(r))
