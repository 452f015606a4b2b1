"""The accounting engine's state as plain JSON data: snapshots, and a restart that forgets the past."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from quotaplane.errors import InputError
from quotaplane.history.calendar import Calendar
from quotaplane.history.engine import Accounting
from quotaplane.history.scopes import (
    APPLICATION,
    GROUP,
    NRES,
    QUEUE,
    QUOTA,
    TREE,
    USER,
    AppState,
    Cells,
    Charge,
    Row,
    Scope,
    vec_of,
)
from quotaplane.history.sketch import WaitSketch
from quotaplane.resources import Resource, shared

__all__ = ["SNAPSHOT_VERSION", "restart_at_now", "restore_into", "snapshot_of"]

SNAPSHOT_VERSION = 1


def _cells_json(cells: Cells) -> dict[str, list[int]]:
    return {r: [c[0], c[1]] for r, c in sorted(cells.items())}


def _cells_of(data: Any) -> Cells:
    return {str(r): [int(c[0]), int(c[1])] for r, c in (data or {}).items()}


def _sketch_json(s: WaitSketch | None) -> dict[str, object] | None:
    return None if s is None else s.to_json()


def _sketch_of(data: Any) -> WaitSketch | None:
    return None if data is None else WaitSketch.from_json(data)


def _scope_json(kind: str, name: str, s: Scope) -> dict[str, Any]:
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
    return entry


def _app_json(app: AppState) -> dict[str, Any]:
    group = app.group
    return {"queue": app.queue, "user": app.user, "groups": list(app.groups),
            "tags": dict(app.tags), "group": group.name if isinstance(group, Scope) else group,
            "prop_u": _cells_json(app.prop_u), "prop_w": _cells_json(app.prop_w),
            "new_waits": _sketch_json(app.new_waits), "epoch": app.epoch,
            **({"prop_e": dict(sorted(app.prop_e.items()))} if app.prop_e else {})}


def snapshot_of(a: Accounting) -> dict[str, Any]:
    """The engine's state as plain JSON data (:func:`restore_into` reads it back).

    The live allocations are not in it: a snapshot restores the partition with them, and
    :func:`restore_into` takes them from there. The waiting asks' times are (they are the engine's
    own, never earlier than an event seen before them).
    """
    a.propagate()
    return {
        "version": SNAPSHOT_VERSION, "zone": a.calendar.name, "now": a.now, "origin": a.origin,
        "epoch": a._epoch, "next": list(a.next), "half_life": a.half_life, "e_origin": a._e_origin,
        "info": {kind: {name: [info[0], info[1], info[2]] for name, info in sorted(table.items())}
                 for kind, table in sorted(a._info.items())},
        "scopes": [_scope_json(kind, name, s) for (kind, name), s in sorted(a.scopes.items())],
        "dirty": [sorted([s.kind, s.name] for s in d) for d in a.dirty],
        "retired": sorted([s.kind, s.name] for s in a._retired),
        "apps": {app_id: _app_json(app) for app_id, app in sorted(a.apps.items())},
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
        s.open = [None] * NRES
    for app in a.apps.values():
        for own, prop in ((app.own.u, app.prop_u), (app.own.w, app.prop_w)):
            prop.clear()
            prop.update({r: [c[0], c[1]] for r, c in own.items()})
        app.new_waits = None
    a.dirty = [set() for _ in range(NRES)]
    a.outbox = []
    a._retired = set()


def _restore_clock(a: Accounting, data: Mapping[str, Any]) -> None:
    """Time, periods, half-life and the guarantee table."""
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


def _restore_scope(s: Scope, entry: Mapping[str, Any]) -> None:
    s.u, s.w, s.b, s.l = (_cells_of(entry.get(k)) for k in ("u", "w", "b", "l"))
    s.slots = None                  # they held the lists just replaced
    if s.sib is not None:
        s.sib.idle = None           # its levels are new: who has an idle guarantee, again
    s.counts = {str(k): int(v) for k, v in (entry.get("c") or {}).items()}
    if entry.get("o"):
        s.open = [_sketch_of(x) for x in entry["o"]]
    s.e = {str(r): float(v) for r, v in (entry.get("e") or {}).items()}


def _restore_scopes(a: Accounting, data: Mapping[str, Any]) -> None:
    """Every scope's cells, counters, open waits and decayed usage; the siblings' borrowed sums."""
    a.scopes = {}
    a._sibs = {}
    for entry in data["scopes"]:
        _restore_scope(a._scope(str(entry["k"]), str(entry["n"])), entry)
    for s in a.scopes.values():          # what the siblings borrow together, from the levels
        if s.sib is None:
            continue
        for r, c in s.b.items():
            if c[0]:
                s.sib.bsum[r] = s.sib.bsum.get(r, 0) + c[0]
    a.dirty = [{a._scope(k, n) for k, n in d} for d in data["dirty"]]
    a._retired = {a._scope(k, n) for k, n in data["retired"]}


def _restore_app(a: Accounting, app_id: str, x: Mapping[str, Any]) -> AppState:
    parts = str(x["queue"]).split(".")
    chain = [a._scope(QUEUE, ".".join(parts[:i])) for i in range(len(parts), 0, -1)]
    app = AppState(str(x["queue"]), str(x["user"]), tuple(x["groups"]), dict(x["tags"]),
                   a._scope(APPLICATION, app_id), chain, a._scope(USER, str(x["user"])))
    g = x["group"]
    app.group = a._scope(GROUP, g) if isinstance(g, str) else (None if g is None else False)
    app.prop_u, app.prop_w = _cells_of(x["prop_u"]), _cells_of(x["prop_w"])
    app.new_waits = _sketch_of(x.get("new_waits"))
    app.epoch = int(x["epoch"])
    app.prop_e = {str(r): float(v) for r, v in (x.get("prop_e") or {}).items()}
    a._split(app)
    return app


def _restore_charges(a: Accounting, data: Mapping[str, Any],
                     allocations: Iterable[tuple[str, str, Mapping[str, int]]],
                     asks: Iterable[tuple[str, str, Mapping[str, int]]]) -> None:
    """The partition's live allocations (at the snapshot's instant) and waiting asks (at their own
    times, which the snapshot kept)."""
    a.allocs, a.asks = {}, {}
    for key, app_id, resource in allocations:
        holder = a.apps.get(app_id)
        if holder is not None:
            vec = vec_of(resource)
            a.allocs[key] = Charge(app_id, vec, a.now or 0, a._eager(key, app_id, holder, vec))
            holder.allocs[key] = None
    times = data["asks"]
    for key, app_id, resource in asks:
        holder = a.apps.get(app_id)
        if holder is not None and key in times:     # one shared request per vector, as live
            want = shared(resource) if type(resource) is Resource else vec_of(resource)
            a.asks[key] = Charge(app_id, want, int(times[key]), a._eager(key, app_id, holder, want))
            holder.asks[key] = None


def restore_into(a: Accounting, data: Mapping[str, Any],
                 allocations: Iterable[tuple[str, str, Mapping[str, int]]],
                 asks: Iterable[tuple[str, str, Mapping[str, int]]]) -> None:
    """Put the state :func:`snapshot_of` wrote into the fresh engine ``a``, with the partition's live
    ``allocations`` and waiting ``asks`` (key, application, resource) at the snapshot's instant.
    ``ValueError`` when ``data`` is not such a state."""
    if data.get("version") != SNAPSHOT_VERSION:
        raise InputError(f"history snapshot version {data.get('version')!r} is not {SNAPSHOT_VERSION}")
    _restore_clock(a, data)
    _restore_scopes(a, data)
    a.apps = {app_id: _restore_app(a, app_id, x) for app_id, x in data["apps"].items()}
    _restore_charges(a, data, allocations, asks)
    a.outbox = [Row(int(r[0]), int(r[1]), str(r[2]), str(r[3]), r[4]) for r in data["outbox"]]
    a._pending = set()
    if a.half_life:
        a._weigh()
