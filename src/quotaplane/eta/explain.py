"""What would have to change for a request to be admitted now (issue 35, docs/eta.md).

For a refused request (or a waiting ask), the smallest changes that would admit it now, each verified
before it is reported — tried on the partition itself under its lock and taken back exactly
(:class:`_Live`: every policy's check with the allocations withdrawn, or a queue's max raised), or
with ``what_if`` on a working copy of the partition (:func:`~quotaplane.eta.copy.working_copy`) where
that cannot answer (resource flavors, a user's or group's limit raised). A change that does not
verify is not reported, its note says so:

* **releases**: which running allocations would have to end — the fewest, then the least important
  (lowest priority, then newest). The candidates are the allocations counted in a scope that refuses
  it (the queue at the violation's path and below; the user's or group's under it). Their number is
  found greedily by how much of what is missing each covers (largest first gives the fewest for one
  resource); then, most important first (of one priority, the smaller first), each candidate is left
  out while as many of the others still cover — the set whose most important member is least
  important, then its next (exact for one missing resource, up to :data:`MAX_EXACT` candidates no
  more important than the greedy set's);
* **limits**: how far each limit or max that blocks it would have to rise, per scope and resource —
  exactly the amount the violation says is missing (``Violation.resource``), for the queue's ``max``
  and the ``maxresources`` of the user and group limit entries that apply; the cluster's size for
  ``root.capacity``;
* **largest**: the largest request of the same shape (every resource scaled by one factor) admitted
  now, found by bisection with ``what_if`` on the partition itself (it changes nothing);
* **in time** (:mod:`quotaplane.eta.later`): when a budget resets (or a decaying one has decayed
  enough) or a time window opens (or closes), where that admits it — verified with ``what_if`` on a
  copy at that time, with the budget's new period and the window's overrides in force and the same
  running work (docs/budgets.md, docs/windows.md).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from quotaplane.admission import check_all
from quotaplane.config.model import LimitConfig, PartitionConfig, QueueConfig
from quotaplane.eta.copy import working_copy
from quotaplane.eta.later import InTime, Later, in_time
from quotaplane.partition.facade import Partition
from quotaplane.policies.budgets import CODE as BUDGET_EXHAUSTED
from quotaplane.policies.protocol import AdmissionRequest, Decision, Violation
from quotaplane.resources import Resource
from quotaplane.scheduling.preemption import admitted_without
from quotaplane.scheduling.questions import victims_of

__all__ = ["MAX_EXACT", "MAX_RELEASES", "Explanation", "Later", "LimitRaise", "Release", "explain",
           "explain_ask"]

#: the most allocations a release answer names (beyond it the answer is "no verified release")
MAX_RELEASES = 1000
#: the most candidates the least important choice weighs one by one (beyond: the fewest, largest first)
MAX_EXACT = 256
#: the violation codes whose limit the answer raises (others are named in a note, not raised)
_RAISABLE = frozenset({"queue.max", "user.maxresources", "group.maxresources", "root.capacity"})


@dataclass(frozen=True, slots=True)
class Release:
    """A running allocation that would have to end."""

    allocation_key: str
    application_id: str
    queue: str
    user: str
    priority: int
    resource: Resource

    def to_dict(self) -> dict[str, Any]:
        """The REST shape."""
        return {"allocationKey": self.allocation_key, "applicationID": self.application_id,
                "queue": self.queue, "user": self.user, "priority": self.priority,
                "resource": self.resource.to_dict()}


@dataclass(frozen=True, slots=True)
class LimitRaise:
    """A limit that would have to rise: ``code`` at ``path`` by ``by`` (per resource)."""

    policy: str
    code: str
    path: str
    by: Resource
    message: str

    def to_dict(self) -> dict[str, Any]:
        """The REST shape."""
        return {"policy": self.policy, "code": self.code, "path": self.path, "by": self.by.to_dict(),
                "message": self.message}


@dataclass(slots=True)
class Explanation:
    """What would admit one request now; each change listed is verified (see the module docstring)."""

    application_id: str
    resource: Resource
    decision: Decision
    releases: list[Release] | None = None
    limits: list[LimitRaise] | None = None
    largest: Resource | None = None
    #: the budget resets (or decays) at the earliest time that admits it (None: none verified)
    resets: list[Later] | None = None
    #: the window edge at the earliest time that admits it (None: none verified)
    windows: list[Later] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def admitted(self) -> bool:
        """True when the request is admitted now as it is (nothing has to change)."""
        return self.decision.allocated and not self.decision.preempted

    def to_dict(self) -> dict[str, Any]:
        """The REST shape: ``{admitted, reasons, releases, limits, largest, resets, windows, notes}``
        (null: no verified change of that kind)."""
        return {"applicationID": self.application_id, "resource": self.resource.to_dict(),
                "admitted": self.admitted, "reasons": [v.to_dict() for v in self.decision.reasons],
                "releases": _listed(self.releases), "limits": _listed(self.limits),
                "largest": None if self.largest is None else self.largest.to_dict(),
                "resets": _listed(self.resets), "windows": _listed(self.windows),
                "notes": list(self.notes)}

    def top(self) -> str | None:
        """The one change a person would try first, as a short sentence (None: none verified)."""
        if self.releases:
            keys = ", ".join(r.allocation_key for r in self.releases[:3])
            more = f" and {len(self.releases) - 3} more" if len(self.releases) > 3 else ""
            return f"starts if {keys}{more} ended"
        if self.limits:
            x = self.limits[0]
            return f"starts if {x.code} of {x.path} rose by {_fmt(x.by)}"
        if self.largest is not None:
            return f"{_fmt(self.largest)} would start now"
        timed = sorted((self.resets or []) + (self.windows or []), key=lambda x: x.at)
        if timed:
            return f"starts when {timed[0].sentence()}"
        return None


def _listed(found: list[Release] | list[LimitRaise] | list[Later] | None) -> list[dict[str, Any]] | None:
    """Each change's REST shape (None: none of that kind verified)."""
    return None if found is None else [x.to_dict() for x in found]


def _fmt(r: Resource) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(r.items()))


def explain(partition: Partition, application_id: str, resource: Resource, *, priority: int = 0,
            preemptible: bool = True, placement: Mapping[str, Any] | None = None,
            max_runtime: float | None = None) -> Explanation:
    """What would admit the request ``resource`` of ``application_id`` now (module docstring);
    ``placement``: ``what_if``'s node selector, affinity and tolerations; ``max_runtime``: its declared
    runtime in seconds (what a budget counts it to commit)."""
    where: dict[str, Any] = dict(placement or {})
    if max_runtime is not None:
        where["max_runtime"] = max_runtime
    decision = partition.what_if(application_id, resource, priority=priority, preemptible=preemptible,
                                 **where)
    out = Explanation(application_id, resource, decision)
    if out.admitted:
        return out

    admitted = _admits(application_id, resource, priority, preemptible, where)
    # the live trial builds its own request (no placement): a copy decides one with a placement
    live = None if placement else _Live(partition, application_id, resource, priority, preemptible,
                                        max_runtime)
    blocking = _blocking(decision.reasons, out.notes)
    if blocking or decision.preempted:
        out.releases = _releases(partition, application_id, blocking, admitted, out.notes, live)
        out.limits = _limits(partition, application_id, blocking, admitted, out.notes, live)
    out.largest = _largest(partition, application_id, resource, admitted)
    timed = _in_time(partition, application_id, resource, priority, preemptible, where, decision.reasons,
                     admitted)
    out.resets = None if timed.resets is None else list(timed.resets)
    out.windows = None if timed.windows is None else list(timed.windows)
    out.notes.extend(timed.notes)
    return out


#: per partition: its version (last journalled event, configuration) and the answers in time found at it
_IN_TIME: weakref.WeakKeyDictionary[Partition, tuple[tuple[int, int], dict[Hashable, InTime]]] = \
    weakref.WeakKeyDictionary()
_IN_TIME_LOCK = threading.Lock()
#: the most answers in time kept per partition (one per request explained since its last change)
MAX_CACHED = 1024


def _in_time(partition: Partition, application_id: str, resource: Resource, priority: int,
             preemptible: bool, where: Mapping[str, Any], reasons: list[Violation],
             admitted: Callable[[Partition, Resource | None], bool]) -> InTime:
    """:func:`~quotaplane.eta.later.in_time`, kept until the partition changes (a commit or a new
    configuration) or the clock reaches the first time it tried. Every try is on a working copy of the
    partition's state at a later time: an unchanged state gives the same copies, so the same answer —
    the Kubernetes front explains its waiting pods every 30 s, mostly of an unchanged partition. The
    request's reasons now are part of the key (what is tried follows from them; not their messages,
    which tell amounts consumed by now)."""
    version = (partition.last_seq, partition.config_seq)
    key = (application_id, tuple(sorted(resource.items())), priority, preemptible,
           json.dumps(where, sort_keys=True, default=str),
           tuple((v.policy, v.code, v.path, str(v.resource)) for v in reasons))
    now = partition.clock()
    with _IN_TIME_LOCK:
        held = _IN_TIME.get(partition)
        found = held[1].get(key) if held is not None and held[0] == version else None
    if found is not None and now < found.until:
        return found
    timed = in_time(partition, application_id, resource, reasons, admitted, where.get("max_runtime"))
    if (partition.last_seq, partition.config_seq) == version:      # not changed while it was found
        with _IN_TIME_LOCK:
            held = _IN_TIME.get(partition)
            if held is None or held[0] != version or len(held[1]) >= MAX_CACHED:
                held = _IN_TIME[partition] = (version, {})
            held[1][key] = timed
    return timed


def _blocking(reasons: list[Violation], notes: list[str]) -> list[Violation]:
    """The reasons about resources (with what is missing); the others are named in ``notes``."""
    blocking = [v for v in reasons if v.resource is not None and any(v.resource.values())]
    other = [v for v in reasons if v not in blocking]
    if other:
        notes.append("not a matter of resources: " + "; ".join(f"{v.code} at {v.path}" for v in other))
    return blocking


def _admits(application_id: str, resource: Resource, priority: int, preemptible: bool,
            where: Mapping[str, Any]) -> Callable[[Partition, Resource | None], bool]:
    """Whether a partition (a working copy) admits the request — or the same with another
    ``resource`` — preempting nothing."""
    def admitted(p: Partition, other: Resource | None = None) -> bool:
        d = p.what_if(application_id, resource if other is None else other, priority=priority,
                      preemptible=preemptible, **where)
        return d.allocated and not d.preempted
    return admitted


class _Live:
    """The checks of a change on the partition itself, under its lock, taken back exactly before it
    is let go — instead of a working copy (a rebuild of every allocation: 1.7 s at 10,000).

    * releases: every policy checks the request as if the allocations were gone — each policy takes
      them out and puts them back exactly (:func:`~quotaplane.scheduling.preemption.admitted_without`,
      the same trial as a preemption's, PR-Y9);
    * a queue's ``max`` (or the cluster's size, the root's) raised: the queue's own ``max`` is set
      higher and set back, and every policy checks the request (``check_all``, as ``what_if``).

    Both answer exactly what ``what_if`` on a copy would — admitted without preempting — when the
    partition declares no resource flavors (their search charges other names) and no other policy
    counts the cluster (an elastic quota's total); :meth:`usable` says when, else the copy is used."""

    def __init__(self, partition: Partition, app_id: str, resource: Resource, priority: int,
                 preemptible: bool, max_runtime: float | None = None) -> None:
        self.partition, self.app_id = partition, app_id
        self.resource, self.priority, self.preemptible = resource, priority, preemptible
        self.max_runtime = max_runtime

    def usable(self, limits: Iterable[LimitRaise] = ()) -> bool:
        """The live check answers as a copy would (see the class docstring)."""
        state = self.partition.state
        if state.flavors is not None or state.apps.get(self.app_id) is None:
            return False
        return all(x.code in ("queue.max", "root.capacity") for x in limits) and \
            (not any(x.code == "root.capacity" for x in limits) or not state.policies.extension_policies)

    def _request(self) -> AdmissionRequest:
        state = self.partition.state
        app = state.apps[self.app_id]
        return state.request(app, "", self.resource, self.priority, self.preemptible, first=not app.counted,
                             t=self.partition.clock(), max_runtime=self.max_runtime)

    def admits_without(self, keys: Iterable[str]) -> bool | None:
        """Every policy admits the request with the allocations ``keys`` gone (None: not usable)."""
        with self.partition.lock:
            if not self.usable():
                return None
            state = self.partition.state
            live = [k for k in keys if k in state.allocs]
            return not admitted_without(state.policies, self._request(), victims_of(state, live))

    def admits_raised(self, raises: list[LimitRaise]) -> bool | None:
        """Every policy admits the request with each queue's ``max`` raised (None: not usable)."""
        with self.partition.lock:
            if not self.usable(raises):
                return None
            tree = self.partition.state.queues
            saved: list[tuple[Any, Resource | None]] = []
            try:
                for x in raises:
                    q = tree.queue(x.path if x.code == "queue.max" else "root")
                    if q is None:
                        return None
                    saved.append((q, q.max))
                    q.max = (q.max or Resource()) + x.by
                return not check_all(self.partition.state.policies, self._request())
            finally:
                for q, before in reversed(saved):
                    q.max = before


def explain_ask(partition: Partition, allocation_key: str) -> Explanation | None:
    """:func:`explain` for the waiting ask ``allocation_key`` (None: no such ask waits)."""
    ask = partition.get_ask(allocation_key)
    if ask is None:
        return None
    return explain(partition, ask.application_id, ask.resource, priority=ask.priority,
                   preemptible=ask.preemptible, max_runtime=ask.max_runtime)


# -- releases -------------------------------------------------------------------------------------------

def _in_scope(v: Violation, queue: str, user: str, groups: Iterable[str],
              requester: tuple[str, frozenset[str]], committing: bool = False) -> bool:
    """True when an allocation of ``queue`` and ``user`` counts in the scope violation ``v`` names
    (``committing``: it still commits consumption by its declared runtime)."""
    under = v.path in ("", "root") or queue == v.path or queue.startswith(v.path + ".")
    if v.policy == "queue":
        return under
    if v.code == BUDGET_EXHAUSTED:
        # what ran stays consumed: ending work gives a budget back only what it still commits (its
        # declared runtime not yet passed, docs/budgets.md "Committed"), and only under the budget's
        # queue (a user's or group's budget there counts fewer: the check decides)
        return under and committing
    if v.policy == "user":
        return under and user == requester[0]
    if v.policy == "group":
        return under and not requester[1].isdisjoint(groups)
    return True                   # another policy's scope (elastic, forest): any allocation may count


def _cover(a: Resource, missing: Mapping[str, int], left: Mapping[str, int]) -> float:
    """How much of what is still missing ``a`` covers, as a share of what was missing per resource."""
    return float(sum(min(int(a.get(r, 0)), n) / missing[r] for r, n in left.items()
                     if n > 0 and missing[r] > 0))


_Candidate = tuple[Release, list[bool]]
#: whether a partition admits the request (or the same with another resource), preempting nothing
_Admits = Callable[[Partition, Resource | None], bool]


def _candidates(partition: Partition, app_id: str, blocking: list[Violation]) -> list[_Candidate]:
    """The running allocations counted in a scope that refuses the request, each with the violations
    whose scope it counts in (all of them for a refusal by preemption alone)."""
    with partition.lock:
        state = partition.state
        app = state.apps.get(app_id)
        requester = (app.user.user, frozenset(app.user.groups)) if app is not None else ("", frozenset())
        now = partition.clock()
        out: list[_Candidate] = []
        for key, a in state.allocs.items():
            owner = state.apps.get(a.application_id)
            if owner is None or key in state.preempting:
                continue
            committing = a.max_runtime is not None and a.time + a.max_runtime > now
            scopes = [_in_scope(v, owner.queue_path, owner.user.user, owner.user.groups, requester,
                                committing) for v in blocking]
            if not blocking or any(scopes):
                out.append((Release(key, a.application_id, owner.queue_path, owner.user.user, a.priority,
                                    a.resource), scopes))
        return out


def _releases(partition: Partition, app_id: str, blocking: list[Violation],
              admitted: _Admits, notes: list[str], live: _Live | None = None) -> list[Release] | None:
    chosen = _greedy(_candidates(partition, app_id, blocking), blocking)
    if chosen is None:
        notes.append("no set of running allocations covers what is missing")
        return None
    keys = {r.allocation_key for r in chosen}
    # a budget's preemption trial gives back nothing (policies/budgets.py withdraw: what ran was
    # consumed), but a release frees what the allocation still commits: only a copy without them says
    budgeted = any(v.code == BUDGET_EXHAUSTED for v in blocking)
    verified = live.admits_without(keys) if live is not None and not budgeted else None
    if verified is None:
        verified = admitted(working_copy(partition, partition.clock, without=keys), None)
    if not verified:
        notes.append(f"ending {len(chosen)} allocations covers what is missing but does not admit it "
                     "(another rule refuses it then); no release is reported")
        return None
    return sorted(chosen, key=_importance)


def _importance(r: Release) -> tuple[int, str]:
    return (r.priority, r.allocation_key)


def _greedy(candidates: list[_Candidate], blocking: list[Violation]) -> list[Release] | None:
    """The fewest candidates that cover every missing amount, then the least important of that size."""
    missing = [dict(v.resource.items()) if v.resource is not None else {} for v in blocking]
    # least important first among equal gains: the sort is stable and max() keeps the first maximum
    pool = sorted(candidates, key=lambda c: _importance(c[0]))
    chosen = _fewest(list(pool), missing)
    if chosen is None:
        return None
    # a set of as many no more important than the greedy one's most important member
    bound = max(_importance(c[0]) for c in chosen)
    pool = [c for c in pool if _importance(c[0]) <= bound]
    if len(pool) > MAX_EXACT:
        return [c[0] for c in chosen]
    # within one priority the leave-out pass tries the smaller first: the larger kept cover with fewer
    # of that priority (three of priority 2 with 4, 4 and 6 cores and one of priority 0 with 1 core,
    # 7 missing: 6 + 1 ends one job of priority 2, 4 + 4 two)
    pool.sort(key=lambda c: (c[0].priority, -_size(c, missing), c[0].allocation_key))
    return [c[0] for c in _least_important(len(chosen), pool, missing)]


def _size(c: _Candidate, missing: list[dict[str, int]]) -> float:
    """How much of everything missing ``c`` covers on its own."""
    return sum(_cover(c[0].resource, m, m) for i, m in enumerate(missing) if c[1][i])


def _fewest(pool: list[_Candidate], missing: list[dict[str, int]],
            most: int = MAX_RELEASES) -> list[_Candidate] | None:
    """Take from ``pool`` the candidate that covers most of what is still missing until nothing is
    (at most ``most`` of them; None when they do not cover it). For one missing resource the largest
    first are the fewest that cover it."""
    left = [dict(m) for m in missing]

    def gain(c: _Candidate) -> float:
        return sum(_cover(c[0].resource, missing[i], left[i]) for i in range(len(missing)) if c[1][i])

    chosen: list[_Candidate] = []
    while any(n > 0 for m in left for n in m.values()):
        best = max(pool, key=gain) if pool and len(chosen) < most else None
        if best is None or gain(best) <= 0:
            return None
        pool.remove(best)
        chosen.append(best)
        _take(left, best)
    return chosen


def _least_important(k: int, pool: list[_Candidate], missing: list[dict[str, int]]) -> list[_Candidate]:
    """The least important ``k`` candidates that cover everything: its most important member as
    unimportant as can be, then the next, and so on (``pool`` sorted least important first).

    Every candidate, most important first, is left out when ``k`` of those still kept cover without
    it: a set that needs it has a more important member than one that does not. What is kept then is
    what a set of ``k`` needs (exact for one missing resource, where ``k`` of them cover when the
    ``k`` largest do)."""
    kept = list(pool)
    for c in reversed(pool):
        trial = [o for o in kept if o is not c]
        if _fewest(list(trial), missing, k) is not None:
            kept = trial
    return _fewest(kept, missing, k) or []


def _take(left: list[dict[str, int]], c: tuple[Release, list[bool]]) -> None:
    for i, m in enumerate(left):
        if c[1][i]:
            for r in m:
                m[r] = max(0, m[r] - int(c[0].resource.get(r, 0)))


def _covers(chosen: list[tuple[Release, list[bool]]], missing: list[dict[str, int]]) -> bool:
    left = [dict(m) for m in missing]
    for c in chosen:
        _take(left, c)
    return not any(n > 0 for m in left for n in m.values())


# -- limits ---------------------------------------------------------------------------------------------

def _limits(partition: Partition, app_id: str, blocking: list[Violation],
            admitted: _Admits, notes: list[str], live: _Live | None = None) -> list[LimitRaise] | None:
    skipped = [v for v in blocking if v.code not in _RAISABLE]
    if skipped:
        notes.append("no limit change is computed for " + ", ".join(f"{v.code} at {v.path}" for v in skipped))
        return None
    if not blocking:
        return None
    found = [LimitRaise(v.policy, v.code, v.path, v.resource or Resource(), _sentence(v)) for v in blocking]
    verified = live.admits_raised(found) if live is not None else None
    if verified is None:
        verified = admitted(_raised_copy(partition, app_id, found), None)
    if not verified:
        notes.append("raising every blocking limit by what is missing does not admit it (another rule "
                     "refuses it then); no limit change is reported")
        return None
    return found


def _raised_copy(partition: Partition, app_id: str, found: list[LimitRaise]) -> Partition:
    """A working copy with every limit of ``found`` raised (the cluster grown for ``root.capacity``)."""
    with partition.lock:
        app = partition.state.apps.get(app_id)
        user = app.user.user if app is not None else ""
        groups = frozenset(app.user.groups) if app is not None else frozenset()
    capacity = Resource()
    for x in found:
        if x.code == "root.capacity":
            capacity = capacity + x.by
    limits = [x for x in found if x.code != "root.capacity"]
    copy = working_copy(partition, partition.clock, configure=lambda c: _raised(c, limits, user, groups))
    if any(capacity.values()):
        copy.add_node("quotaplane-eta-extra-capacity", capacity)
    return copy


def _sentence(v: Violation) -> str:
    what = {"queue.max": "the queue's max", "user.maxresources": "the user's maxresources",
            "group.maxresources": "the group's maxresources",
            "root.capacity": "the cluster's capacity"}.get(v.code, v.code)
    return f"{what} at {v.path} would have to rise by {_fmt(v.resource or Resource())}"


def _raised(config: PartitionConfig, raises: list[LimitRaise], user: str,
            groups: frozenset[str]) -> PartitionConfig:
    """``config`` with every limit in ``raises`` higher by its amount."""
    root = config.root
    for x in raises:
        root = _raise_in(root, x, user, groups)
    limits = config.limits
    for x in raises:
        # a partition-wide limit entry is reported at the root
        if x.path in ("", "root") and x.code != "queue.max":
            limits = tuple(_raise_limit(lim, x, user, groups) for lim in limits)
    return dataclasses.replace(config, root=root, limits=limits)


def _raise_in(q: QueueConfig, x: LimitRaise, user: str, groups: frozenset[str]) -> QueueConfig:
    if q.path == x.path:
        if x.code == "queue.max":
            return dataclasses.replace(q, max=(q.max or Resource()) + x.by)
        return dataclasses.replace(q, limits=tuple(_raise_limit(lim, x, user, groups) for lim in q.limits))
    if not x.path.startswith(q.path + "."):
        return q
    return dataclasses.replace(q, queues=tuple(_raise_in(c, x, user, groups) for c in q.queues))


def _raise_limit(lim: LimitConfig, x: LimitRaise, user: str, groups: frozenset[str]) -> LimitConfig:
    applies = (x.code == "user.maxresources" and (user in lim.users or "*" in lim.users)) or \
        (x.code == "group.maxresources" and (not groups.isdisjoint(lim.groups) or "*" in lim.groups))
    if not applies or lim.max_resources is None:
        return lim
    return dataclasses.replace(lim, max_resources=lim.max_resources + x.by)


# -- the largest request of the same shape ---------------------------------------------------------------

def _largest(partition: Partition, app_id: str, resource: Resource,
             admitted: _Admits) -> Resource | None:
    """The largest ``resource`` scaled by one factor k/N (N its largest amount) admitted now without
    preempting anything (bisection: admission is monotone in the amount asked); None when not even
    the smallest step is."""
    amounts = {r: v for r, v in resource.items() if v > 0}
    if not amounts:
        return None
    steps = max(amounts.values())

    def at(k: int) -> Resource:
        return Resource({r: v * k // steps for r, v in amounts.items()})

    lo, hi = 0, steps            # nothing asked is admitted; all of it is not (else no question)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if admitted(partition, at(mid)):
            lo = mid
        else:
            hi = mid
    return at(lo) if lo > 0 else None
