"""Borrowing and lending limits on the queue tree: Kueue's ``borrowingLimit`` and ``lendingLimit`` (KQ-L1 …
KQ-L8) in YuniKorn's terms (docs/flavors.md "Borrowing and lending limits").

A queue's **guaranteed** plays Kueue's nominal quota. Per resource name:

- ``EG(q)`` — the effective guaranteed: the queue's own amount, else the sum of its children's (V-18);
- ``N(q) = EG(q) − Σ EG(child)`` — what the queue adds above its children (a cohort's own nominal);
- ``SQ(q) = N(q) + Σ (SQ(child) − local(child))`` — the subtree quota: what the subtree holds and offers
  up (KQ-L3); with no lending limit below, ``SQ(q) = EG(q)``;
- ``local(q) = max(0, SQ(q) − lendinglimit(q))`` — the part kept for the subtree (KQ-L2; 0 without a
  lending limit);
- ``U(q)`` — usage as Kueue counts it up: a leaf's allocated, a parent's ``Σ max(0, U(child) −
  local(child))`` (KQ-L4): usage within a child's private part does not reach the parent.

Two checks then join YuniKorn's ``max`` (M-2) on every allocation of ``v`` in leaf ``X``:

- **borrowing** (KQ-L5's cap): at each queue ``q`` of the chain with a borrowing limit, what its subtree
  draws from its parent after the allocation — ``max(0, U'(q) − local(q)) − (SQ(q) − local(q))`` — is at
  most the limit; for a leaf that is ``allocated + v ≤ guaranteed + limit``;
- **lending**: the unused private part of a queue, ``held(d) = max(0, local(d) − U(d))``, is not for
  others. At each queue ``A`` above ``X`` that has a max (the root: the cluster's size), the allocation
  fits only with the private parts of every queue below ``A`` that is not ``X`` or one of its ancestors
  left free: ``allocated(A) + v + Σ held(d) ≤ max(A)``.

On Kueue's trees this gives Kueue's numbers: with ``team-a`` guaranteed 9 and ``team-b`` guaranteed 12
lending 1 under a parent of max 21 (a Kueue cohort's total), ``team-a`` may use 10 while ``team-b`` is idle
and 9 once ``team-b`` uses 12 (KQ-L5, docs ``cluster_queue.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from quotaplane.queues.queue import QueueLimit
from quotaplane.resources import Resource

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.queues.queue import Queue

__all__ = ["Limits"]


class Limits:
    """The borrowing and lending limits of one queue tree, and the arithmetic of both checks.

    ``effective_guaranteed`` is the tree's (cached per configuration); ``lending`` lists, per resource
    name, the queues with a lending limit on it, in tree order.
    """

    __slots__ = ("_eg", "borrowing", "lending", "lends_below")

    def __init__(self, effective_guaranteed: object) -> None:
        self._eg = effective_guaranteed
        #: resource → queues with a borrowing limit on it
        self.borrowing: dict[str, list[Queue]] = {}
        #: resource → queues with a lending limit on it
        self.lending: dict[str, list[Queue]] = {}
        #: queue path → the resources some queue of its subtree (itself included) lends with a limit
        self.lends_below: dict[str, set[str]] = {}

    def rebuild(self, queues: list[Queue]) -> None:
        """Index the limits of ``queues`` (every queue of the tree, parents before children)."""
        self.borrowing = {}
        self.lending = {}
        self.lends_below = {}
        for q in queues:
            if q.borrowing_limit is not None:
                for name in q.borrowing_limit:
                    self.borrowing.setdefault(name, []).append(q)
            if q.lending_limit is not None:
                for name in q.lending_limit:
                    self.lending.setdefault(name, []).append(q)
                    for a in q.chain:
                        self.lends_below.setdefault(a.path, set()).add(name)

    @property
    def active(self) -> bool:
        """True when some queue sets a limit (the checks cost nothing otherwise)."""
        return bool(self.borrowing or self.lending)

    # -- Kueue's node quantities ---------------------------------------------------------------------
    def _guaranteed(self, q: Queue) -> Mapping[str, int]:
        eg: Mapping[str, int] = self._eg(q)  # type: ignore[operator]
        return eg

    def node(self, q: Queue, name: str) -> tuple[int, int, int]:
        """``(SQ, local, U)`` of ``q`` for resource ``name`` (see the module docstring)."""
        if name not in self.lends_below.get(q.path, ()):
            return self._guaranteed(q).get(name, 0), 0, q._alloc.get(name, 0)
        own = self._guaranteed(q).get(name, 0)
        sq = own
        used = 0
        if q.children:
            sq = max(0, own - sum(self._guaranteed(c).get(name, 0) for c in q.children.values()))
            for c in q.children.values():
                c_sq, c_local, c_used = self.node(c, name)
                sq += c_sq - c_local
                used += max(0, c_used - c_local)
        else:
            used = q._alloc.get(name, 0)
        local = 0
        limit = q.lending_limit.get(name) if q.lending_limit is not None else None
        if limit is not None:
            local = max(0, sq - limit)
        return sq, local, used

    def held(self, q: Queue, name: str) -> int:
        """The unused private part of ``q``'s subtree quota (0 without a lending limit on ``name``)."""
        if q.lending_limit is None or name not in q.lending_limit:
            return 0
        _, local, used = self.node(q, name)
        return max(0, local - used)

    def held_off(self, leaf: Queue, at: Queue, name: str) -> int:
        """The private parts kept below ``at`` for queues other than ``leaf`` and its ancestors: what an
        allocation in ``leaf`` must leave free under ``at``'s max."""
        if name not in self.lending:
            return 0
        path = {q.path for q in leaf.chain}
        prefix = at.path + "."
        return sum(self.held(d, name) for d in self.lending[name]
                   if d.path not in path and (at.is_root or d.path.startswith(prefix)))

    # -- the checks ----------------------------------------------------------------------------------
    def check(self, leaf: Queue, request: Mapping[str, int], cluster: Mapping[str, int] | None
              ) -> list[QueueLimit]:
        """Every borrowing and lending limit ``request`` in ``leaf`` would break; ``[]`` when none."""
        out: list[QueueLimit] = []
        for name, amount in request.items():
            if amount <= 0:
                continue
            if name in self.borrowing:
                out.extend(self._borrowing(leaf, name, amount, request))
            if name in self.lending:
                out.extend(self._lending(leaf, name, amount, request, cluster))
        return out

    def _borrowing(self, leaf: Queue, name: str, amount: int, request: Mapping[str, int]) -> list[QueueLimit]:
        out: list[QueueLimit] = []
        inc = amount
        for q in leaf.chain:
            if inc <= 0 or q.is_root:
                break
            sq, local, used = self.node(q, name)
            after = used + inc
            limit = q.borrowing_limit.get(name) if q.borrowing_limit is not None else None
            if limit is not None:
                draw = max(0, after - local) - (sq - local)
                if draw > limit:
                    out.append(_limit("queue.borrowinglimit", q, name, draw - limit, request,
                                      f"puts queue '{q.path}' {draw} {name} above its guaranteed "
                                      f"({sq}), beyond its borrowing limit ({limit})"))
            inc = max(0, after - local) - max(0, used - local)
        return out

    def _lending(self, leaf: Queue, name: str, amount: int, request: Mapping[str, int],
                 cluster: Mapping[str, int] | None) -> list[QueueLimit]:
        path = {q.path for q in leaf.chain}
        for a in leaf.chain[1:]:
            if a.is_root:
                cap = cluster.get(name) if cluster is not None else None
            else:
                cap = a.max.get(name) if a.max is not None else None
            if cap is None:
                continue
            used = a._alloc.get(name, 0) + amount
            if used > cap:
                return []           # the max itself refuses it (queue.max / root.capacity)
            prefix = a.path + "."
            holders = [(d, self.held(d, name)) for d in self.lending[name]
                       if d.path not in path and (a.is_root or d.path.startswith(prefix))]
            holders = [(d, h) for d, h in holders if h > 0]
            over = used + sum(h for _, h in holders) - cap
            if over > 0:
                out: list[QueueLimit] = []
                for d, h in holders:
                    lent = d.lending_limit.get(name, 0) if d.lending_limit is not None else 0
                    out.append(_limit("queue.lendinglimit", d, name, min(h, over), request,
                                      f"would use {min(h, over)} {name} of the unused guaranteed of queue "
                                      f"'{d.path}', which lends at most {lent} (queue '{a.path}' has "
                                      f"{cap - used + amount} {name} left, {h} of it kept for '{d.path}')"))
                return out
        return []


def _limit(code: str, q: Queue, name: str, short: int, request: Mapping[str, int], what: str) -> QueueLimit:
    return QueueLimit(code=code, queue_path=q.path, max=None, allocated=q.allocated,
                      shortfall=Resource.of({name: short}),
                      message=f"allocation ({Resource.of(dict(request))}) {what}")
