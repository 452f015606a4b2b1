"""What ``exhausted: besteffort`` needs besides the ledger: what the partition holds and what waits
(docs/budgets.md "When a budget is exhausted").

A scope with a ``besteffort`` budget that is exhausted keeps running, but only on *otherwise-idle*
capacity: capacity that no allocation holds and that no waiting ask of another scope asks for. So the
policy counts, per resource, the cluster's capacity, what every allocation holds (two additions per
admission or release, whatever its budgets), what every ask waits for, and — apart — the asks charged
to a ``besteffort`` budget (only they can stop counting as demand, while their own scope is exhausted).
Nothing here is journalled: it is a function of the events a replay applies again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from quotaplane.budgets.ledger import Scope

__all__ = ["Gone", "Idle", "Who"]

#: whose an ask is: its queue, user, groups and elastic quotas (what the ledger resolves budgets from)
Who = tuple[str, str, tuple[str, ...], tuple[str, ...]]
#: what :meth:`Idle.ask_gone` returns: the ask's amounts, whose it is, its best-effort scopes
Gone = tuple[Mapping[str, int], Who, "tuple[Scope, ...] | None"]


def _add(into: dict[str, int], vec: Mapping[str, int], sign: int) -> None:
    for r, u in vec.items():
        if u:
            into[r] = into.get(r, 0) + sign * u


class Idle:
    """Capacity, what is held and what waits, per resource (see the module docstring)."""

    __slots__ = ("asks", "best_effort_asks", "last_gone", "pending", "total", "used")

    def __init__(self) -> None:
        self.total: dict[str, int] = {}
        self.used: dict[str, int] = {}
        #: what every waiting ask asks for, summed
        self.pending: dict[str, int] = {}
        #: every waiting ask's amounts and whose it is (queue, user, groups), by allocation key
        self.asks: dict[str, tuple[Mapping[str, int], Who]] = {}
        #: the waiting asks charged to a ``besteffort`` budget, with the scopes they are charged to
        self.best_effort_asks: dict[str, tuple[Scope, ...]] = {}
        #: the ask the newest admission turned into usage, for its undo
        self.last_gone: tuple[str, Gone | None] = ("", None)

    def held(self, vec: Mapping[str, int], sign: int) -> None:
        """An allocation of ``vec`` was admitted (``sign`` 1) or ended (-1)."""
        _add(self.used, vec, sign)

    def ask(self, key: str, vec: Mapping[str, int], who: Who, scopes: tuple[Scope, ...] | None) -> None:
        """Ask ``key`` of ``who`` waits for ``vec``; ``scopes``: its ``besteffort`` budgets' scopes."""
        if key in self.asks:
            return
        self.asks[key] = (vec, who)
        _add(self.pending, vec, 1)
        if scopes:
            self.best_effort_asks[key] = scopes

    def ask_gone(self, key: str) -> Gone | None:
        """Ask ``key`` waits no more (allocated or withdrawn): what :meth:`ask` was told (None: unknown)."""
        found = self.asks.pop(key, None)
        if found is None:
            return None
        _add(self.pending, found[0], -1)
        return found[0], found[1], self.best_effort_asks.pop(key, None)

    def ask_back(self, key: str, gone: Gone) -> None:
        """Undo :meth:`ask_gone` (an admission that was taken back)."""
        self.ask(key, gone[0], gone[1], gone[2])

    def demand(self, exhausted: Callable[[Scope], bool]) -> dict[str, int]:
        """What the waiting asks of the scopes that are not exhausted ``besteffort`` ones ask for."""
        out = dict(self.pending)
        for key, scopes in self.best_effort_asks.items():
            if any(exhausted(s) for s in scopes):
                _add(out, self.asks[key][0], -1)
        return out

    def short(self, vec: Mapping[str, int], exhausted: Callable[[Scope], bool]) -> dict[str, int]:
        """Per resource of ``vec``, how much of it is not otherwise idle (``{}``: all of it is)."""
        demand = self.demand(exhausted)
        out: dict[str, int] = {}
        for r, u in vec.items():
            if u:
                over = self.used.get(r, 0) + max(demand.get(r, 0), 0) + u - self.total.get(r, 0)
                if over > 0:
                    out[r] = over
        return out

    def wanted(self, exhausted: Callable[[Scope], bool], resources: Iterable[str]) -> dict[str, int]:
        """Per resource, how much the other scopes' waiting asks want beyond what is idle (the room
        best-effort work must give back; only positive amounts)."""
        demand = self.demand(exhausted)
        out: dict[str, int] = {}
        for r in resources:
            want = demand.get(r, 0)
            if want > 0:
                over = self.used.get(r, 0) + want - self.total.get(r, 0)
                if over > 0:
                    out[r] = over
        return out
