"""What would admit a request later by itself: a budget's reset or a time window's edge (issue 35 item 2,
docs/eta.md).

* **Budgets** (docs/budgets.md): for each ``budget.exhausted`` refusal, the scope's next reset — the
  end of its period (calendar or duration) — or, for a decaying budget (``halflife``), the instant
  its consumption has decayed below what the request needs, given what the scope holds now
  (``0.5^(Δt/T½)`` toward the level its running work sustains; none when that level alone is too
  much). Each time is tried in order on a working copy whose clock stands at it: the copy's ledger
  reads the consumption of the new period (or the decayed one) with the same work still running and
  every declared runtime that ended by then no longer committed, exactly as the partition's own
  timer would find it (the reset admits a waiting ask at the reset itself, the simulator's
  ``_next_reset``). The first time the copy admits the request is reported, with every blocking
  scope that reset by then.
* **Windows** (docs/windows.md): the windows on the request's path — its queue or an ancestor, its
  user's or group's limit there — that set something the refusal is about (a queue's ``max`` or
  ``guaranteed``, a limit's ``maxresources`` or ``maxapplications``, a budget's ``resourcehours``).
  Each one's next edge (an opening of a closed window, a closing of an open one) is tried in time
  order on a working copy at that time, configured as the edge would leave it (the overrides written,
  or the saved values put back). The first that admits it is reported.

A reset or an edge that does not admit the request is not reported (a note says it was tried). At
most :data:`MAX_TRIES` of each are tried, in time order on one working copy moved forward
(:class:`Timeline`: the copy at each time, a window's edge applied as the service applies it). A
window on an elastic quota (``min``, ``max``) is tried for a refusal of the elastic policy whatever
quota the request maps to: the copy decides.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any
from zoneinfo import ZoneInfo

from quotaplane.config.model import LimitConfig, PartitionConfig, QueueConfig
from quotaplane.config.windows import WindowSpec, elastic_quota_objects, parse_windows
from quotaplane.eta.copy import working_copy
from quotaplane.partition.facade import Partition
from quotaplane.policies.budgets import CODE as BUDGET_CODE
from quotaplane.policies.budgets import BudgetPolicy
from quotaplane.policies.protocol import Violation
from quotaplane.resources import Resource

__all__ = ["HORIZON_DAYS", "MAX_TRIES", "InTime", "Later", "Timeline", "budget_resets", "in_time",
           "window_edges", "windowed"]

#: the most resets (and the most window edges) tried, each on its own working copy
MAX_TRIES = 4
#: how far ahead a window's next edge is looked for (days)
HORIZON_DAYS = 32

#: whether a partition admits the request (or the same with another resource), preempting nothing
_Admits = Callable[[Partition, Resource | None], bool]


@dataclass(frozen=True, slots=True)
class Later:
    """A change that comes by itself at ``at`` (seconds): ``kind`` is ``budget.reset``,
    ``budget.decayed``, ``window.opens`` or ``window.closes``; ``scope`` names the budget's scope or
    the window's (``root.a``, ``user alice in root.a``), ``path`` its queue, ``window`` its name."""

    kind: str
    at: float
    scope: str
    path: str
    window: str | None = None
    timezone: str = "UTC"

    @property
    def opens(self) -> bool:
        """A window's opening (not its closing)."""
        return self.kind == "window.opens"

    def when(self) -> str:
        """``at`` as an ISO 8601 time in the budget's or the window's zone."""
        # as budgets' and windows' messages write their times (the zone was validated with the config)
        return datetime.fromtimestamp(self.at, ZoneInfo(self.timezone)).isoformat(timespec="seconds")

    def sentence(self) -> str:
        """``the budget of root.a resets at …`` / ``window evening opens at … on root.a``."""
        if self.kind == "budget.reset":
            return f"the budget of {self.scope} resets at {self.when()}"
        if self.kind == "budget.decayed":
            return f"the budget of {self.scope} has decayed enough, at {self.when()}"
        verb = "opens" if self.opens else "closes"
        return f"window {self.window} {verb} at {self.when()} on {self.scope}"

    @property
    def message(self) -> str:
        """The verified answer: ``admitted when …``."""
        return f"admitted when {self.sentence()}"

    def to_dict(self) -> dict[str, Any]:
        """The REST shape (``at`` ISO 8601, ``time`` seconds since the epoch)."""
        return {"kind": self.kind, "scope": self.scope, "path": self.path, "window": self.window,
                "at": self.when(), "time": self.at, "message": self.message}


# -- budgets ---------------------------------------------------------------------------------------------

def budget_resets(partition: Partition, app_id: str, resource: Resource, reasons: list[Violation],
                  admitted: _Admits, notes: list[str],
                  max_runtime: float | None = None) -> list[Later] | None:
    """The earliest reset (or decay) of the budgets that refuse the request at which a copy admits it
    (None: no budget refuses it, or none verified); ``max_runtime``: its declared runtime (seconds).
    See the module docstring."""
    found = _resets(partition, app_id, resource, reasons, max_runtime)
    return _walk(partition, found, [], admitted, notes).resets


def _resets(partition: Partition, app_id: str, resource: Resource, reasons: list[Violation],
            max_runtime: float | None) -> list[Later]:
    paths = {v.path for v in reasons if v.code == BUDGET_CODE}
    runtime = round(max_runtime * 1000) or None if max_runtime is not None else None
    return _budget_times(partition, app_id, resource, paths, runtime) if paths else []


@dataclass(frozen=True, slots=True)
class InTime:
    """What comes by itself (:func:`in_time`): the verified ``resets`` and ``windows`` (None: none),
    the ``notes`` of what was tried and did not admit it, and ``until``: the earliest time tried (or
    a window's edge could come within :data:`HORIZON_DAYS`, :func:`in_time`) — the answer holds
    while the partition does not change and the clock is before it."""

    resets: list[Later] | None
    windows: list[Later] | None
    notes: tuple[str, ...]
    until: float


def in_time(partition: Partition, app_id: str, resource: Resource, reasons: list[Violation],
            admitted: _Admits, max_runtime: float | None = None) -> InTime:
    """The budget resets and the window edges that would admit the request (see the module
    docstring), all tried in time order on one working copy. Its ``until`` is also no later than the
    time a window without an edge within :data:`HORIZON_DAYS` could get one (the horizon moves with
    the clock: the answer would change with nothing committed)."""
    beyond: list[float] = []
    timed = _walk(partition, _resets(partition, app_id, resource, reasons, max_runtime),
                  _edges(partition, app_id, _fields(reasons), beyond)[:MAX_TRIES], admitted, None)
    if beyond and min(beyond) < timed.until:
        return replace(timed, until=min(beyond))
    return timed


class Timeline:
    """One working copy for the tries of one explanation, moved forward in time (each try's time no
    earlier than the last) instead of a copy per try — a copy rebuilds every allocation (0.2 s at
    10,000), and an explanation tries up to :data:`MAX_TRIES` resets and as many window edges.

    The copy is made at the first try's time; a later try moves its clock (the budget ledger reads
    consumption in closed form at any time: nothing is accumulated step by step) and, for a window's
    edge, applies the configuration the edge leaves — as the service's window timer does at the edge
    (:func:`quotaplane.windows.tick` → a new configuration), the next edge's replacing it. A
    configuration whose policies let allocations go (an elastic quota's lowered max) changed the
    state itself: the next try gets a fresh copy. A property test compares the answers with a fresh
    copy per try (tests/eta/test_explain_timed.py)."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        self.t = -math.inf
        self._copy: Partition | None = None
        #: the configuration the copy was made with (the partition's, as a copy keeps it)
        self.base: PartitionConfig | None = None
        #: the configuration applied since (None: none)
        self._applied: PartitionConfig | None = None

    def at(self, t: float,
           configure: Callable[[PartitionConfig], PartitionConfig] | None = None) -> Partition:
        """The copy at time ``t`` (never earlier than the last try's) with its configuration mapped by
        ``configure`` (None: the partition's, as copied)."""
        if t < self.t:
            raise RuntimeError(f"a timeline moves forward: {t} is before {self.t}")  # a caller's bug
        self.t = t
        copy = self._copy
        if copy is None:
            copy = self._copy = working_copy(self.partition, self._clock)
            self.base, self._applied = copy.state.config, None
        assert self.base is not None
        target = configure(self.base) if configure is not None else None
        if target != self._applied:
            seq = copy.config_seq + 1
            held = len(copy.state.allocs)
            copy.apply_config(target if target is not None else self.base, seq, t=t)
            copy.record_config(seq)
            self._applied = target
            if len(copy.state.allocs) != held:      # a policy let allocations go: not reusable
                self._copy = None
        return copy

    def _clock(self) -> float:
        return self.t


def _walk(partition: Partition, resets: list[Later], edges: list[tuple[int, WindowSpec]], admitted: _Admits,
          notes: list[str] | None) -> InTime:
    """Try the resets' times (the scopes freed by the earliest that admits it) and the window edges
    (the earliest that admits it) in one time order on one :class:`Timeline`; a kind stops at its
    first success. The notes of what did not admit it go to ``notes`` (None: into the answer)."""
    times = sorted({x.at for x in resets})[:MAX_TRIES]
    tries: list[tuple[float, int, Later | None, WindowSpec | None]] = [(t, 0, None, None) for t in times]
    for edge, spec in edges:
        later = Later("window.closes" if spec.active else "window.opens", edge / 1000, spec.scope,
                      spec.queue.lower() or spec.target, spec.name, spec.timezone)
        tries.append((edge / 1000, 1, later, spec))
    # at one instant the partition's own configuration first: the copy changes it once
    tries.sort(key=lambda x: (x[0], x[1]))
    timeline = Timeline(partition)
    reset_at: float | None = None
    window: Later | None = None
    tried: list[Later] = []
    for t, kind, found, w in tries:
        if kind == 0 and reset_at is None:
            if admitted(timeline.at(t), None):
                reset_at = t
        elif kind == 1 and window is None and found is not None and w is not None:
            if admitted(timeline.at(t, _windowed_by(w)), None):
                window = found
            else:
                tried.append(found)
    out: list[str] = []
    if reset_at is None:
        _tried(out, [x for x in resets if x.at in times], " (another rule refuses it then)")
    if window is None:
        _tried(out, tried)
    if notes is not None:
        notes.extend(out)
    return InTime(None if reset_at is None else [x for x in resets if x.at <= reset_at],
                  None if window is None else [window], tuple(out),
                  min((x[0] for x in tries), default=math.inf))


def _tried(notes: list[str], tried: list[Later], why: str = "") -> None:
    if tried:
        notes.append("; ".join(x.sentence() for x in tried) + f": that would not admit it{why}; not reported")


def _budget_times(partition: Partition, app_id: str, resource: Resource, paths: set[str],
                  runtime: int | None) -> list[Later]:
    """When each budget at ``paths`` on the request's chain stops refusing it by itself."""
    with partition.lock:
        state = partition.state
        app = state.apps.get(app_id)
        policy = next((pol for _, pol in state.policies.extensions if isinstance(pol, BudgetPolicy)), None)
        if app is None or policy is None:
            return []
        ledger = policy.ledger
        now = partition.clock()
        ms = max(round(now * 1000), ledger.now)
        chain: tuple[str, ...] = ()
        elastic = policy.elastic
        if elastic is not None and ledger.on_elastic:
            # the request's elastic quota and its parents, as the policy charges it (Koordinator's
            # pod rules on the application's tags: docs/budgets.md "Budgets on elastic quotas")
            request = state.request(app, "", resource, 0, True, t=now)
            chain = elastic.manager.ancestors(elastic.quota_of(request))
        scopes = [s for s in ledger.resolve(app.queue_path, app.user.user, tuple(app.user.groups), chain)
                  if s.spec.path in paths]
        found = (_scope_time(policy, scope, resource, ms, runtime) for scope in scopes)
        return [x for x in found if x is not None]


def _scope_time(policy: BudgetPolicy, scope: Any, resource: Resource, ms: int,
                runtime: int | None) -> Later | None:
    """When one scope's budget stops refusing the request: its period's end, or when its consumption
    has decayed enough (None: never, or no later time)."""
    spec = scope.spec
    if spec.decayed:
        # typed through the policy: the ledger's own signature is checked (eta does not import budgets/)
        t = _decayed_by(policy.ledger.shortfalls((scope,), resource, ms, runtime), spec.half_life_ms, ms,
                        policy.ledger.next_end())
        kind = "budget.decayed"
    else:
        end = scope.period(ms)[1]
        t, kind = (end if end > ms else None), "budget.reset"
    return None if t is None else Later(kind, t / 1000, scope.label, spec.path, None, spec.timezone)


def _decayed_by(shortfalls: Iterable[Any], half_life_ms: int, ms: int,
                first_end: int | None = None) -> int | None:
    """When a decaying scope's consumption is low enough for every shortfall (ms; None: never, the
    level its running work holds decays toward is too much by itself). The consumption ``C`` decays
    toward ``A = level × T½ / ln 2``: ``C(t) = A + (C − A) · 0.5^(Δt/T½)``. That time, with the
    committed part held as it is now, is a time it fits; the committed part of the running work's
    declared runtimes runs out meanwhile, so the earliest is searched before it (:func:`_earliest`)."""
    latest = ms
    for s in shortfalls:
        level = s.scope.cells[s.resource].level
        floor = level * half_life_ms / math.log(2)
        # a request that commits nothing starts while consumed + committed is below the budget
        target = s.limit - s.committed - s.need - (0 if s.need else 1)
        if target <= floor or s.consumed <= floor:
            return None
        if s.consumed <= target:
            continue
        dt = half_life_ms * math.log2((s.consumed - floor) / (target - floor))
        latest = max(latest, _earliest(s, ms, ms + math.ceil(dt) + 1, first_end))
    return latest if latest > ms else None


def _earliest(s: Any, ms: int, fits_at: int, first_end: int | None) -> int:
    """The earliest time (ms) after ``ms`` at which shortfall ``s`` is gone, knowing it is gone at
    ``fits_at``: consumed and committed both only fall (a decaying consumption above the level it
    tends to; declared runtimes running out), so it is found by halving. The committed part is read
    as ``c_moment - c_level × t``, exact until ``first_end`` (the ledger's first declared end): past
    it the answer is ``fits_at``. One millisecond is added — the told time in seconds is read back."""
    scope, cell = s.scope, s.scope.cells[s.resource]

    def fits(t: int) -> bool:
        used = scope.consumed(cell, t) + (cell.c_moment - cell.c_level * t)
        return bool(used + s.need <= s.limit if s.need else used < s.limit)

    hi = fits_at if first_end is None else min(fits_at, first_end)
    if hi <= ms or (hi < fits_at and not fits(hi)):
        return fits_at
    lo = ms
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return min(hi + 1, fits_at)


# -- windows ---------------------------------------------------------------------------------------------

def _fields(reasons: Iterable[Violation]) -> set[str]:
    """The window settings that may lift these refusals."""
    out: set[str] = set()
    for v in reasons:
        if v.code.startswith("queue."):
            out |= {"max", "guaranteed"}
        elif v.code.startswith(("user.", "group.")):
            out |= {"maxresources", "maxapplications"}
        elif v.code == BUDGET_CODE:
            out.add("resourcehours")
        elif v.code.startswith("elastic."):
            out |= {"min", "max"}
    return out


def _on_path(w: WindowSpec, queue: str, user: str, groups: Iterable[str]) -> bool:
    wq = w.queue.lower()
    if not (queue == wq or queue.startswith(wq + ".")):
        return False
    if w.kind == "queue":
        return True
    if w.kind == "user":
        return w.target == user
    return w.kind == "group" and w.target in groups


def _next_edge(w: WindowSpec, ms: int, days: int = HORIZON_DAYS) -> int | None:
    """The next edge of ``w`` after ``ms`` that changes what is in force: its opening when it is
    closed, its closing when it is open (None: none within ``days``)."""
    lo = datetime.fromtimestamp(ms / 1000, UTC)
    for start, end in w.spans(lo, lo + timedelta(days=days)):
        if not w.active and start > ms:
            return start
        if w.active and end > ms:
            return end
    return None


def _within_from(w: WindowSpec, ms: int) -> float:
    """When (seconds) ``w``, with no edge within :data:`HORIZON_DAYS` of ``ms``, may have one within
    the horizon from then on: its next edge less the horizon, or a horizon from ``ms`` (none within
    two)."""
    horizon = HORIZON_DAYS * 86_400_000
    far = _next_edge(w, ms, 2 * HORIZON_DAYS)
    return (ms + horizon if far is None else far - horizon) / 1000


def window_edges(partition: Partition, app_id: str, reasons: list[Violation], admitted: _Admits,
                 notes: list[str]) -> list[Later] | None:
    """The earliest edge of a window on the request's path at which a copy configured as the edge
    leaves it admits the request (None: none verified). See the module docstring."""
    edges = _edges(partition, app_id, _fields(reasons))[:MAX_TRIES]
    return _walk(partition, [], edges, admitted, notes).windows


def _edges(partition: Partition, app_id: str, fields: set[str],
           beyond: list[float] | None = None) -> list[tuple[int, WindowSpec]]:
    """The next edge of every window on the request's path that sets one of ``fields``, in time order;
    for each such window without one within :data:`HORIZON_DAYS`, ``beyond`` gets the time (seconds)
    from which it may have one: its next edge less the horizon, or a horizon from now."""
    with partition.lock:
        state = partition.state
        raw = state.config.extensions.get("windows")
        app = state.apps.get(app_id)
        if not fields or not raw or app is None:
            return []
        queue, user, groups = app.queue_path, app.user.user, tuple(app.user.groups)
    ms = round(partition.clock() * 1000)
    edges: list[tuple[int, WindowSpec]] = []
    for w in _parsed(raw):
        # an elastic quota's window is tried whatever quota the request maps to (the copy decides)
        on_path = w.kind == "elasticquota" or _on_path(w, queue, user, groups)
        if on_path and fields & set(w.overrides):
            edge = _next_edge(w, ms)
            if edge is not None:
                edges.append((edge, w))
            elif beyond is not None:
                beyond.append(_within_from(w, ms))
    return sorted(edges, key=lambda e: (e[0], e[1].index))


#: the windows of a configuration, parsed once: (the raw value, kept so its id is not reused; its windows)
_PARSED: dict[int, tuple[Any, tuple[WindowSpec, ...]]] = {}


def _parsed(raw: Any) -> tuple[WindowSpec, ...]:
    """``parse_windows(raw)``, once per configuration (a configuration never changes): its overlap
    check walks every occurrence of every window for a year — 30 ms for ten windows, at each
    explanation."""
    found = _PARSED.get(id(raw))
    if found is not None and found[0] is raw:
        return found[1]
    specs = parse_windows(raw)
    if len(_PARSED) >= 16:
        _PARSED.clear()
    _PARSED[id(raw)] = (raw, specs)
    return specs


def _windowed_by(w: WindowSpec) -> Callable[[PartitionConfig], PartitionConfig]:
    return lambda config: windowed(config, w)


def windowed(config: PartitionConfig, w: WindowSpec) -> PartitionConfig:
    """``config`` as window ``w``'s next edge leaves it: its overrides written when it is closed (it
    opens), the values it saved put back when it is open (it closes) — what
    :func:`quotaplane.windows.driver.edges` writes into the configuration text."""
    values = {f: (v if not w.active else w.saved.get(f)) for f, v in w.overrides.items()}
    if "resourcehours" in values:
        hours = values.pop("resourcehours")
        config = _budget_hours(config, w.queue.lower(), hours) if w.kind != "elasticquota" else \
            _budget_hours(config, w.target, hours, key="elasticquota")
    if w.kind == "elasticquota":
        return _elastic(config, w.target, values)
    if not values:
        return config
    return dataclasses.replace(config, root=_in_queue(config.root, w, values))


def _res(value: Any) -> Resource | None:
    return Resource.from_config(value) if value else None


def _in_queue(q: QueueConfig, w: WindowSpec, values: Mapping[str, Any]) -> QueueConfig:
    path = w.queue.lower()
    if q.path == path:
        if w.kind == "queue":
            if "max" in values:
                q = dataclasses.replace(q, max=_res(values["max"]))
            if "guaranteed" in values:
                q = dataclasses.replace(q, guaranteed=_res(values["guaranteed"]))
            return q
        return dataclasses.replace(q, limits=tuple(_in_limit(lim, w, values) for lim in q.limits))
    if not path.startswith(q.path + "."):
        return q
    return dataclasses.replace(q, queues=tuple(_in_queue(c, w, values) for c in q.queues))


def _in_limit(lim: LimitConfig, w: WindowSpec, values: Mapping[str, Any]) -> LimitConfig:
    if w.target not in (lim.users if w.kind == "user" else lim.groups):
        return lim
    if "maxresources" in values:
        lim = dataclasses.replace(lim, max_resources=_res(values["maxresources"]))
    if "maxapplications" in values:
        lim = dataclasses.replace(lim, max_applications=int(values["maxapplications"] or 0))
    return lim


def _budget_hours(config: PartitionConfig, target: str, hours: Any, key: str = "queue") -> PartitionConfig:
    """``config`` with the budget of queue ``target`` (its own: no user, no group) — or of elastic quota
    ``target`` (``key`` ``elasticquota``) — at ``hours`` resource-hours."""
    budgets = config.extensions.get("budgets")
    if hours is None or not isinstance(budgets, list | tuple):
        return config
    changed = [dict(b, resourcehours=dict(hours)) if isinstance(b, Mapping) and
               str(b.get(key, "")).lower() == target.lower() and "user" not in b and "group" not in b else b
               for b in budgets]
    return dataclasses.replace(config, extensions=MappingProxyType({**config.extensions, "budgets": changed}))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _elastic(config: PartitionConfig, name: str, values: Mapping[str, Any]) -> PartitionConfig:
    """``config`` with elastic quota ``name``'s ``spec`` set to ``values`` (None: removed), its quotas
    written as a list of objects as the window's edge writes them (docs/windows.md)."""
    value = config.extensions.get("elasticquotas")
    objects = _plain(elastic_quota_objects(value))
    for obj in objects:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(meta, dict) and meta.get("name") == name:
            spec = dict(obj.get("spec") or {})
            for f, v in values.items():
                if v is None:
                    spec.pop(f, None)
                else:
                    spec[f] = _plain(v)
            obj["spec"] = spec
    # a mapping with ``quotas`` (and settings such as revokeDelay) keeps its settings
    wrapped = isinstance(value, Mapping) and value.get("kind") is None
    held = {**_plain(value), "quotas": objects} if wrapped else objects
    extensions = MappingProxyType({**config.extensions, "elasticquotas": held})
    return dataclasses.replace(config, extensions=extensions)
