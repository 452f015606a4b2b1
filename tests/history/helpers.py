"""A brute-force integrator for the history tests: levels read from the partition's own state after
every operation, integrated step by step (independent of the engine's bookkeeping)."""

from __future__ import annotations

from typing import Any

from quotaplane.config.identity import UserGroup
from quotaplane.history.engine import APPLICATION, GROUP, QUEUE, QUOTA, USER, ms_of
from quotaplane.history.view import StateView
from quotaplane.partition import Partition

Levels = dict[tuple[str, str, str], dict[str, int]]   # (kind, name, metric) -> resource -> level


def _add(out: Levels, key: tuple[str, str, str], res: Any) -> None:
    level = out.setdefault(key, {})
    for r, v in dict(res).items():
        if v:
            level[r] = level.get(r, 0) + v


def levels(p: Partition) -> Levels:
    """Every scope's used, waiting, borrowed and lent now, from the partition state (standing for
    borrowed and lent, the queues' own counters for queues)."""
    out: Levels = {}
    state = p._core.state
    view = StateView(state)
    for path in state.queues.paths():
        q = state.queues.queue(path)
        assert q is not None
        _add(out, (QUEUE, path, "used"), q.allocated)
        _add(out, (QUEUE, path, "waiting"), q.pending)
        st = p.standing("queue", path)["queue"]
        _add(out, (QUEUE, path, "borrowed"), st["borrowed"])
        _add(out, (QUEUE, path, "lent"), st["lent"])
    for a in p.allocations():
        app = state.apps[a.application_id]
        _add(out, (USER, app.user.user, "used"), a.resource)
        _add(out, (APPLICATION, app.application_id, "used"), a.resource)
        group = state.ugm.app_group(app.application_id, app.user)
        if group is not None:
            _add(out, (GROUP, group, "used"), a.resource)
    for ask in p.pending():
        app = state.apps[ask.application_id]
        _add(out, (USER, app.user.user, "waiting"), ask.resource)
        _add(out, (APPLICATION, app.application_id, "waiting"), ask.resource)
        group = view.group_of(app.application_id, app.user.user, app.user.groups, app.queue_path)
        if group is not None:
            _add(out, (GROUP, group, "waiting"), ask.resource)
    elastic = state.policies.extension("elasticquotas")
    manager = getattr(elastic, "manager", None)
    if manager is not None:
        for name in manager.quota_names():
            st = p.standing("quota", name)["elastic"]
            for metric in ("used", "borrowed", "lent"):
                _add(out, (QUOTA, name, metric), st[metric])
    return {k: v for k, v in out.items() if v}


class BruteForce:
    """∫ level dt per scope, metric and resource, stepping from one operation to the next."""

    def __init__(self, p: Partition) -> None:
        self.p = p
        self.t = ms_of(p.clock())
        self.levels = levels(p)
        self.totals: Levels = {}
        #: (from when, levels): the levels' history
        self.timeline: list[tuple[int, Levels]] = [(self.t, self.levels)]

    def step(self) -> None:
        """Call after every operation: integrate up to now, then read the new levels."""
        now = ms_of(self.p.clock())
        self._integrate(now)
        self.levels = levels(self.p)
        self.timeline.append((max(now, self.timeline[-1][0]), self.levels))

    def between(self, lo: int, hi: int) -> Levels:
        """∫ level over ``[lo, hi]`` per scope, metric and resource, from the timeline."""
        out: Levels = {}
        line = self.timeline
        for i, (t, lv) in enumerate(line):
            t_next = line[i + 1][0] if i + 1 < len(line) else max(hi, t)
            a, b = max(t, lo), min(t_next, hi)
            if b > a:
                for key, level in lv.items():
                    _add(out, key, {r: v * (b - a) for r, v in level.items()})
        return {k: v for k, v in out.items() if v}

    def _integrate(self, now: int) -> None:
        dt = now - self.t
        if dt > 0:
            for key, level in self.levels.items():
                _add(self.totals, key, {r: v * dt for r, v in level.items()})
        self.t = max(self.t, now)

    def at(self, now: int) -> Levels:
        """The integrals up to ``now`` (≥ the last step)."""
        self._integrate(now)
        return {k: v for k, v in self.totals.items() if v}


def engine_integrals(p: Partition, at: int) -> Levels:
    """The engine's integrals of every scope up to ``at``."""
    engine = p.history.engine
    assert engine is not None, p.history.error
    out: Levels = {}
    engine.propagate()
    for (kind, name), s in engine.scopes.items():
        for metric in ("used", "waiting", "borrowed", "lent"):
            v = s.integral(metric, at - engine.origin)
            if v:
                out[(kind, name, metric)] = v
    # a removed application's scope is forgotten once its last day is written: its rows hold it
    last: dict[tuple[str, str], Any] = {}
    for row in engine.outbox:
        if (row.kind, row.name) not in engine.scopes:
            last[(row.kind, row.name)] = row
    for (kind, name), row in last.items():
        for metric, key in (("used", "u"), ("waiting", "w"), ("borrowed", "b"), ("lent", "l")):
            v = {r: c[0] + c[1] * (at - row.t) for r, c in (row.data.get(key) or {}).items()}
            v = {r: x for r, x in v.items() if x}
            if v:
                out[(kind, name, metric)] = v
    return out


def user(name: str, *groups: str) -> UserGroup:
    return UserGroup(name, groups)
