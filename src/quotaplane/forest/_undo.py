"""The undo log of a quota tree: every mutation records its exact inverse (decision F2).

While a :class:`Log` is active, :func:`attach`, :func:`detach`, :func:`move`, :func:`take` and
:func:`give` append their inverse; :func:`rollback` replays the log backwards, so a failed allocation,
a forest rollback and ``undo_allocate`` leave every tree exactly as before — list order included:
every list insertion is stamped with an increasing position and a rollback re-sorts by it.
"""

from __future__ import annotations

import itertools
from typing import Any

from quotaplane.forest._structure import Node, TreeConsumer, index_range

#: undo-log entry kinds
ATTACH, DETACH, FREE, MAP_ADD, MAP_DEL, UNFREE, MOVE = range(7)

__all__ = ["ATTACH", "DETACH", "FREE", "MAP_ADD", "MAP_DEL", "MOVE", "UNFREE", "Log", "attach", "detach",
           "fits", "give", "move", "pos_key", "rollback", "take"]


class Log:
    """An undo log: the exact inverse of every mutation made while it is active."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: list[tuple[Any, ...]] = []


# Every insertion into a node's consumer dict is an append stamped with a fresh, increasing position, so
# each dict is always ordered by position; a rollback re-inserts removed consumers with their old
# position and re-sorts the dicts it touched (list order restored exactly, no copy on the hot path).
_positions = itertools.count(1)


def _agg_add(n: Node, c: TreeConsumer) -> None:
    a = n.agg.get(c.akey)
    if a is None:
        n.agg[c.akey] = list(c.request)
    else:
        req = c.request
        for i in c.rng:
            a[i] += req[i]


def _agg_sub(n: Node, c: TreeConsumer) -> None:
    a = n.agg[c.akey]
    req = c.request
    for i in c.rng:
        a[i] -= req[i]


def _sub_dict(n: Node, c: TreeConsumer) -> dict[TreeConsumer, None] | None:
    g = c.gleaf
    if g is not None and g.depth > n.depth and g.anc[n.depth] is n:
        return n.by_child[g.anc[n.depth + 1]]
    return None


def attach(n: Node, c: TreeConsumer, log: Log | None) -> None:
    """Append ``c`` to ``n``'s consumer list and make ``n`` its aNode (allocated vectors untouched)."""
    n.consumers[c] = None
    sub = _sub_dict(n, c)
    if sub is not None:
        sub[c] = None
    _agg_add(n, c)
    if log is not None:
        log.entries.append((ATTACH, n, c, c.anode, c.pos))
    c.anode = n
    c.pos = next(_positions)


def detach(n: Node, c: TreeConsumer, log: Log | None) -> None:
    """Remove ``c`` from ``n``'s consumer list (order of the others kept); ``c.anode`` becomes None."""
    sub = _sub_dict(n, c)
    if log is not None:
        log.entries.append((DETACH, n, c, c.anode, c.pos, sub))
    del n.consumers[c]
    if sub is not None:
        del sub[c]
    _agg_sub(n, c)
    c.anode = None


def move(src: Node, dst: Node, c: TreeConsumer, log: Log | None) -> None:
    """``detach(src, c)`` then ``attach(dst, c)`` (slide up / slide down), logged as one step."""
    sub = _sub_dict(src, c)
    del src.consumers[c]
    if sub is not None:
        del sub[c]
    _agg_sub(src, c)
    dst.consumers[c] = None
    sub_dst = _sub_dict(dst, c)
    if sub_dst is not None:
        sub_dst[c] = None
    _agg_add(dst, c)
    if log is not None:
        log.entries.append((MOVE, src, dst, c, c.pos, sub))
    c.anode = dst
    c.pos = next(_positions)


def take(free: list[int], req: list[int], log: Log | None) -> None:
    """``free -= req`` (i.e. a(n) += req)."""
    for i in index_range(len(req)):
        free[i] -= req[i]
    if log is not None:
        log.entries.append((FREE, free, req))


def give(free: list[int], req: list[int], log: Log | None) -> None:
    """``free += req`` (i.e. a(n) -= req)."""
    for i in index_range(len(req)):
        free[i] += req[i]
    if log is not None:
        log.entries.append((UNFREE, free, req))


def _shift(free: list[int], req: list[int], sign: int) -> None:
    """Add ``sign`` × ``req`` back to a node's free vector."""
    for i, r in enumerate(req):
        free[i] += sign * r


def _take_off(n: Node, c: TreeConsumer) -> None:
    """Undo an attachment: ``c`` leaves node ``n`` (its consumers, its sub-dict, its aggregates)."""
    n.consumers.pop(c, None)
    sub = _sub_dict(n, c)
    if sub is not None:
        sub.pop(c, None)
    _agg_sub(n, c)


def _put_back(n: Node, c: TreeConsumer, sub: dict[TreeConsumer, None] | None,
              dirty: dict[int, dict[TreeConsumer, None]]) -> None:
    """Undo a detachment: ``c`` back on node ``n``; the dicts it rejoins are marked for re-sorting."""
    n.consumers[c] = None
    dirty[id(n.consumers)] = n.consumers
    if sub is not None:
        sub[c] = None
        dirty[id(sub)] = sub
    _agg_add(n, c)


def rollback(log: Log) -> None:
    """Undo every logged mutation, newest first; the state is exactly what it was when ``log`` began."""
    entries = log.entries
    dirty: dict[int, dict[TreeConsumer, None]] = {}
    for e in reversed(entries):
        op = e[0]
        if op == FREE:
            _shift(e[1], e[2], 1)
        elif op == UNFREE:
            _shift(e[1], e[2], -1)
        elif op == ATTACH:
            n, c = e[1], e[2]
            _take_off(n, c)
            c.anode, c.pos = e[3], e[4]
        elif op == DETACH:
            n, c = e[1], e[2]
            c.anode, c.pos = e[3], e[4]
            _put_back(n, c, e[5], dirty)
        elif op == MOVE:
            src, c = e[1], e[3]
            _take_off(e[2], c)
            c.anode, c.pos = src, e[4]
            _put_back(src, c, e[5], dirty)
        elif op == MAP_ADD:
            e[1].pop(e[2], None)
        elif op == MAP_DEL:
            e[1][e[2]] = e[3]
    for d in dirty.values():
        order = sorted(d, key=pos_key)
        d.clear()
        d.update(dict.fromkeys(order))
    entries.clear()


def pos_key(c: TreeConsumer) -> int:
    return c.pos


def fits(req: list[int], free: list[int]) -> bool:
    for i in index_range(len(req)):  # noqa: SIM110 - a plain loop is faster than all() on the hot path
        if req[i] > free[i]:
            return False
    return True


# ---------------------------------------------------------------------------------------------- controller
