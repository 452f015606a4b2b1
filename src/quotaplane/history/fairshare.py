"""Fair share with memory: waiting work ordered by usage decayed with a half-life (issue 33 item 5).

Which rules are followed, and from where (reference time-based-quota.md):

* **What is decayed** (TM-U1, choice 1): allocated resources, integrated over time — a scope's decayed
  usage at ``t`` is ``∫ used(u) · 2^(−(t−u)/T½) du``, computed exactly in closed form from the
  accounting's own changes (Kueue and KAI use the exact ``0.5^(Δt/T½)``, TM-F12, TM-F16; Slurm's
  per-second ``1 − 0.693/T½`` is an approximation, TM-U5, not used). After ``T½`` without use it is
  exactly half. Default ``T½``: 7 days (Slurm's ``PriorityDecayHalfLife``).
* **Resources into one number** (choice 9): each resource's decayed usage divided by the partition's
  capacity of it, summed (KAI normalises per resource by capacity; no bytes trap, TM-F16).
* **Order, not quota** (choice 10, TM-F14, TM-F17): Kueue's Admission Fair Sharing — lower
  ``usage / weight`` admitted first — applied hierarchically: at every level of the queue tree the
  sibling queues by their decayed usage over their weight (``history.fairshare.weights``, default 1;
  Kueue's LocalQueue ``fairSharing.weight``), then YuniKorn's own fair order; inside a leaf the
  applications by their user's decayed usage, then the leaf's sort policy (``stateaware`` keeps its
  own order). Guarantees, limits and preemption are untouched; no entry penalty (TM-F15): decayed
  usage grows from the moment an allocation is made.
* **What standing shows** (Slurm ``sshare``): per queue and user the decayed usage, the normalised
  usage ``U`` (its share of its siblings' total), the share ``S`` (its weight over its siblings'),
  and Slurm's classic factor ``F = 2^(−U/S)`` (TM-F5) for reading; the order uses ``usage/weight``.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING

from quotaplane.history.engine import QUEUE, USER, Accounting

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Application
    from quotaplane.queues.queue import Queue

__all__ = ["FairRank", "normalised", "standing_of"]


def normalised(decayed: Mapping[str, float], capacity: Mapping[str, int]) -> float:
    """Decayed usage (resource-ms) in one number: per resource over the capacity of it, summed."""
    return sum(v / capacity[r] for r, v in decayed.items() if capacity.get(r, 0) > 0)


class FairRank:
    """The first key of the scheduling order in one cycle (decayed usage at the engine's time)."""

    __slots__ = ("_capacity", "_engine", "_queues", "_users", "_weights")

    def __init__(self, engine: Accounting, capacity: Mapping[str, int],
                 weights: Mapping[str, Decimal]) -> None:
        self._engine = engine
        self._capacity = capacity
        self._weights = weights
        self._queues: dict[str, float] = {}
        self._users: dict[str, float] = {}

    def usage(self, kind: str, name: str) -> float:
        """A queue's or user's decayed usage in one number (0 when it never used anything)."""
        s = self._engine.scopes.get((kind, name))
        return normalised(self._engine.decayed(s), self._capacity) if s is not None else 0.0

    def weight(self, path: str) -> float:
        """A queue's weight (``history.fairshare.weights``, default 1)."""
        return float(self._weights.get(path, 1))

    def queue(self, q: Queue) -> float:
        """Decayed usage over weight: lower goes first."""
        v = self._queues.get(q.path)
        if v is None:
            v = self._queues[q.path] = self.usage(QUEUE, q.path) / self.weight(q.path)
        return v

    def user(self, app: Application) -> float:
        """The application's user's decayed usage: lower goes first."""
        name = app.user.user
        v = self._users.get(name)
        if v is None:
            v = self._users[name] = self.usage(USER, name)
        return v


def standing_of(rank: FairRank, kind: str, name: str, siblings: list[str]) -> dict[str, object]:
    """What ``standing`` shows of fair share with memory for a queue or user: its decayed usage
    (resource-seconds), ``U`` its share of its siblings' decayed usage, ``S`` its share of their
    weights, Slurm's classic factor ``2^(−U/S)`` and the order key (usage over weight)."""
    engine = rank._engine
    s = engine.scopes.get((kind, name))
    decayed = engine.decayed(s) if s is not None else {}

    def weight_of(n: str) -> float:
        return rank.weight(n) if kind == QUEUE else 1.0     # users weigh the same

    weight = weight_of(name)
    group = [*siblings, name] if name not in siblings else list(siblings)
    total_usage = sum(rank.usage(kind, n) for n in group)
    total_weight = sum(weight_of(n) for n in group)
    own = rank.usage(kind, name)
    u = own / total_usage if total_usage > 0 else 0.0
    share = weight / total_weight if total_weight > 0 else 0.0
    return {"halfLife": engine.half_life / 1000, "decayedUsage": {r: round(v / 1000, 3) for r, v in
                                                                  sorted(decayed.items())},
            "weight": weight, "normalisedUsage": round(u, 6), "share": round(share, 6),
            "factor": round(2.0 ** (-u / share), 6) if share > 0 else 0.0,
            "orderKey": own / weight if weight else 0.0}
