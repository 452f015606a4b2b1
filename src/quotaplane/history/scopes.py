"""What the accounting engine counts in: scopes, their cells, the live charges and applications.

The data of :mod:`quotaplane.history.engine` (whose docstring explains cells, moments and rollups):
:class:`Scope` (one queue, user, group, elastic quota, quota-tree node or application), :class:`Row`
(a scope at the end of a rollup period), :class:`Charge` (a live allocation or waiting ask),
:class:`AppState` (an application the engine knows) and :class:`View` (what the engine reads of its
partition).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from quotaplane.errors import InputError
from quotaplane.history.calendar import RESOLUTIONS
from quotaplane.history.sketch import WaitSketch
from quotaplane.resources import Resource

__all__ = [
    "APPLICATION", "GROUP", "KINDS", "METRICS", "NRES", "QUEUE", "QUOTA", "ROLL_UP", "TREE", "USER",
    "AppState", "Cells", "Charge", "Row", "Scope", "ScopeInfo", "Share", "Siblings", "Slot", "TreeTarget",
    "View",
    "borrowed_level", "bump", "copy_sketch", "flavored_names", "level_of", "ms_of", "scope_order", "vec_of",
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
ROLL_UP = {0: (1,), 1: (2,), 2: (3, 4), 3: (), 4: ()}
NRES = len(RESOLUTIONS)


def ms_of(t: float) -> int:
    """An event time (seconds, float) in whole milliseconds, as the engine counts it."""
    return round(t * 1000)


class View(Protocol):
    """What the engine reads of its partition (read-only; see :mod:`quotaplane.history.view`)."""

    def guarantees(self) -> dict[str, dict[str, ScopeInfo]]:
        """Per kind (queue, quota, tree), every scope with what it is guaranteed, its parent, its max."""

    def cluster_bound(self) -> dict[str, dict[str, ScopeInfo]]:
        """The part of :meth:`guarantees` that follows the cluster's size, read again at each node
        event: the root queue (its max is the cluster, M-1) and the elastic quotas (min scaling)."""

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


class Siblings:
    """The children of one parent: what they borrow together (per resource), who may lend, and per
    resource the lenders with an idle part of their guarantee of it (the only ones whose lending a
    change of the others' borrowing can move: a sibling that uses all its guarantee lends nothing)."""

    __slots__ = ("bsum", "idle", "lenders")

    def __init__(self) -> None:
        self.bsum: dict[str, int] = {}
        self.lenders: list[Scope] = []
        #: per resource the lenders whose use of it is below their guarantee of it; None: to be
        #: rebuilt from :attr:`lenders` (after a change of guarantees or a restore)
        self.idle: dict[str, set[Scope]] | None = None

    def idle_of(self) -> dict[str, set[Scope]]:
        """:attr:`idle`, rebuilt from the lenders' guarantees and levels when it was dropped."""
        idx = self.idle
        if idx is None:
            idx = self.idle = {}
            for s in self.lenders:
                g = s.guar
                if not g or s.sib is not self:
                    continue                # it lost its guarantee or moved: it lends nothing here
                for r, gv in g.items():
                    if gv > level_of(s.u, r):
                        idx.setdefault(r, set()).add(s)
        return idx


#: per resource ``[level, moment]`` (see the module docstring)
Cells = dict[str, list[int]]


class Slot:
    """One resource of a scope with a guarantee, for the admission path: the guarantee of it and the
    scope's used, borrowed and lent cells of it — the very ``[level, moment]`` lists of the scope's
    cell dicts (None while it has none), so that an allocation reads one slot per resource instead of
    four dicts. A cache: whoever adds a list to those dicts for that resource, replaces them or
    changes the guarantee drops the scope's slots (:attr:`Scope.slots` None)."""

    __slots__ = ("b", "g", "l", "u")

    def __init__(self, g: int, u: list[int], b: list[int] | None, lent: list[int] | None) -> None:
        self.g = g
        self.u = u
        self.b = b
        self.l = lent
#: a scope and the amount an allocation or ask counts in it
Share = tuple["Scope", Mapping[str, int]]


class Scope:
    """One scope: per metric its cells (see the module docstring), its guarantee and max, its
    counters and the waits of its open periods. Times are relative to the engine's origin."""

    __slots__ = ("b", "counts", "e", "flavored", "guar", "kind", "l", "max", "name", "open", "sib", "slots",
                 "u", "w")

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        self.u: Cells = {}
        self.w: Cells = {}
        self.b: Cells = {}
        self.l: Cells = {}
        #: None: no guarantee (a queue without one, users, groups, applications); else per resource
        self.guar: dict[str, int] | None = None
        #: the plain names it borrows per flavor (:func:`borrowed_level`): not guaranteed themselves,
        #: some of their flavors (``name@flavor``) are; None: none
        self.flavored: frozenset[str] | None = None
        self.max: dict[str, int] | None = None
        self.sib: Siblings | None = None
        #: a scope with a guarantee: per resource it used, its :class:`Slot` (None: to be made)
        self.slots: dict[str, Slot] | None = None
        self.counts: dict[str, int] = {}
        self.open: list[WaitSketch | None] = [None] * NRES
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


def bump(cells: Cells, r: str, d: int, t: int) -> None:
    """Change the level of ``r`` by ``d`` at relative time ``t``."""
    c = cells.get(r)
    if c is None:
        cells[r] = [d, d * t]
    else:
        c[0] += d
        c[1] += d * t


def flavored_names(guar: Mapping[str, int] | None) -> frozenset[str] | None:
    """The plain names of ``guar``'s flavored resources that ``guar`` does not guarantee itself
    (``nvidia.com/gpu`` of ``{nvidia.com/gpu@a100: 8}``): they borrow per flavor; None: none."""
    if not guar:
        return None
    names = frozenset(k.partition("@")[0] for k in guar if "@" in k) - guar.keys()
    return names or None


def borrowed_level(used: Cells, guar: Mapping[str, int], r: str, flavored: frozenset[str] | None) -> int:
    """What a scope with guarantee ``guar`` borrows of ``r``: its use above its guarantee, judged per
    flavored resource (``standing``'s rule, docs/flavors.md; KQ: borrowing is per flavor and resource)
    — a plain name used through flavors and not guaranteed itself borrows the sum of what its flavors
    borrow, not all its use (8 A100s against 8 guaranteed borrow nothing)."""
    if flavored is not None and r in flavored:
        prefix = r + "@"
        parts = [k for k in used if k.startswith(prefix)]
        if parts:
            return sum(max(0, used[k][0] - guar.get(k, 0)) for k in parts)
    return max(0, level_of(used, r) - guar.get(r, 0))


def level_of(cells: Cells, r: str) -> int:
    c = cells.get(r)
    return c[0] if c is not None else 0


class Charge:
    """A live allocation or waiting ask: its application, amount, when, and the elastic quotas and
    quota-tree nodes it counts in (with the amount in each; its application's scopes are the
    application's)."""

    __slots__ = ("app", "eager", "resource", "t")

    def __init__(self, app: str, resource: Mapping[str, int], t: int,
                 eager: list[tuple[Scope, Mapping[str, int]]]) -> None:
        self.app = app
        self.resource = resource
        self.t = t
        self.eager = eager


class AppState:
    """An application the engine knows: where it runs, its scopes, its live allocations and asks."""

    __slots__ = ("allocs", "asks", "chain", "eager_q", "epoch", "group", "groups", "lazy_u", "lazy_w",
                 "new_waits", "own", "prop_e", "prop_u", "prop_w", "queue", "tags", "user", "user_scope")

    def __init__(self, queue: str, user: str, groups: tuple[str, ...], tags: dict[str, str], own: Scope,
                 chain: list[Scope], user_scope: Scope) -> None:
        self.queue = queue
        self.user = user
        self.groups = groups
        self.tags = tags
        # ordered sets as dicts (values None): a dict of up to five keys takes 184 bytes, a set of five
        # 728 — 100 bytes per waiting ask when an application has five (issue 38, memory per ask)
        self.allocs: dict[str, None] = {}
        self.asks: dict[str, None] = {}
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


def vec_of(resource: Mapping[str, int]) -> dict[str, int]:
    items = resource.plain() if isinstance(resource, Resource) else resource   # no Mapping protocol per item
    return {r: v for r, v in items.items() if v}


def scope_order(s: Scope) -> tuple[str, str]:
    return s.kind, s.name


def copy_sketch(sketch: WaitSketch) -> WaitSketch:
    out = WaitSketch()
    out.merge(sketch)
    return out
