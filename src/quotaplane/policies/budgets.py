"""The budget admission policy: a :class:`~quotaplane.budgets.Ledger` behind QuotaPolicy (issue 34).

Last in the admission path (order 50, after the quota forest): a request that every quota admits is
then checked against every budget of its queue chain, its user and its group
(:meth:`~quotaplane.budgets.Ledger.resolve`). A refusal is a ``budget.exhausted`` violation whose
message names the scope, what is left and when the budget resets; a waiting ask stays waiting with it
and is retried after every change (and by the timer, so a reset admits it). On replay the journal's
``allocated`` and ``released`` events charge the budgets again at their own times, so a replay holds
exactly the same consumption (never a clock).

An allocation or an ask declares the longest it runs with ``maxRuntime`` (seconds; docs/eta.md), or
its application for all of them with the tag ``quotaplane.io/max-runtime`` (``2h``, ``90m``…): it
then commits ``resources × runtime`` from its start until it ends or the runtime passes (TM-B2's
safe rule: consumed + committed + the new commitment stay within the budget). ``exhausted: preempt``
budgets take back, after their grace delay, the allocations of a scope that consumed its budget,
lowest priority first (:meth:`BudgetPolicy.revoke`). ``exhausted: besteffort`` budgets let an exhausted
scope's work continue on otherwise-idle capacity only (:mod:`quotaplane.budgets.besteffort`), and the
same tick takes it back first when the waiting work of other scopes needs the room.

Partition extension ``budgets`` (:mod:`quotaplane.config.budgets`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from quotaplane.budgets import Ledger, Scope, Shortfall, iso, refusal_message, scope_status
from quotaplane.budgets.besteffort import Idle, Who
from quotaplane.budgets.status import hours
from quotaplane.config.budgets import BESTEFFORT, PREEMPT, BudgetSpec, check_budgets, parse_budgets, unit_of
from quotaplane.config.history import parse_duration
from quotaplane.elastic.model import POD_LABEL_NAME
from quotaplane.errors import InputError
from quotaplane.policies.elastic import NAMESPACE_TAG, ElasticPolicy
from quotaplane.policies.elastic import build_policy as build_elastic
from quotaplane.policies.protocol import AdmissionRequest, Eviction, MetricSample, QuotaPolicy, Violation
from quotaplane.policies.registry import Plugin
from quotaplane.resources import Resource

__all__ = ["CODE", "PLUGIN", "RUNTIME_CODE", "RUNTIME_TAG", "BudgetPolicy", "budget_standing", "build_policy"]

#: the violation (and preemption reason) code of an exhausted budget
CODE = "budget.exhausted"
#: the violation code of a declared runtime that is not a duration
RUNTIME_CODE = "budget.runtime"
#: the application tag that declares how long its allocations run at most
RUNTIME_TAG = "quotaplane.io/max-runtime"


def _ms(t: float) -> int:
    return round(t * 1000)


def _short_of(request: AdmissionRequest, s: Shortfall) -> Resource:
    """What of the request the budget of shortfall ``s`` cannot hold: its amount of the budgeted
    resource the budget is short of (the message says the resource-hours: consumed, committed, left)."""
    return Resource({s.resource: request.resource._values[s.resource]})


def _runtime(request: AdmissionRequest) -> int | None:
    """The declared runtime (ms) of a request: its own (``maxRuntime``), else its application's tag;
    None when none; InputError when the tag is not a duration."""
    if request.max_runtime is not None:
        return round(request.max_runtime * 1000) or None
    tags = request.tags
    raw = tags.get(RUNTIME_TAG) if tags else None
    if raw is None:
        return None
    ms = parse_duration(raw, f"tag {RUNTIME_TAG}")
    return ms or None


class BudgetPolicy(QuotaPolicy):
    """Budgets on a partition's queues, users and groups (see the module docstring)."""

    __slots__ = ("_chains", "_checked", "best_effort", "elastic", "idle", "ledger", "notes")
    key: ClassVar[str] = "budgets"
    # a preempt budget's monitor runs on every timeout tick (which also retries the asks a reset frees)
    reclaims: ClassVar[bool] = True

    def __init__(self, ledger: Ledger) -> None:
        self.name = "budget"
        self.ledger = ledger
        #: the warnings of the last tick, until the timer journals them (:meth:`take_notes`)
        self.notes: list[dict[str, Any]] = []
        #: capacity, what is held and what waits (``exhausted: besteffort``)
        self.idle = Idle()
        #: some budget is ``besteffort`` (only then are the waiting asks followed)
        self.best_effort = any(spec.mode == BESTEFFORT for spec in ledger.specs)
        #: with budgets on elastic quotas: the quota tree a request's quota is found in (an elastic
        #: policy of its own, built from the same configuration — Koordinator's pod rules, not a copy)
        self.elastic: ElasticPolicy | None = None
        #: (quota label, namespace) → the quota chain it maps to (the pod rules read nothing else)
        self._chains: dict[tuple[str | None, str | None], tuple[str, ...]] = {}
        #: the request the last check resolved, its scopes and runtime (the admission applies the same
        #: request right after its check: resolved once)
        self._checked: tuple[AdmissionRequest | None, tuple[Any, ...], int | None] = (None, (), None)

    def adopt_elastic(self, partition_config: Any) -> None:
        """Follow the configuration's elastic quotas when a budget is on one of them."""
        self.elastic = None
        self._chains = {}
        if self.ledger.on_elastic and partition_config.extensions.get("elasticquotas") is not None:
            self.elastic = build_elastic(partition_config, None)

    def _chain(self, request: AdmissionRequest, elastic: ElasticPolicy) -> tuple[str, ...]:
        tags = request.tags or {}
        key = (tags.get(POD_LABEL_NAME), tags.get(NAMESPACE_TAG))
        found = self._chains.get(key)
        if found is None:
            if len(self._chains) > 10_000:
                self._chains.clear()
            found = self._chains[key] = elastic.manager.ancestors(elastic.quota_of(request))
        return found

    def _who(self, request: AdmissionRequest) -> Who:
        """What the ledger resolves a request's budgets from: its queue, user, groups and quotas."""
        user = request.user
        elastic = self.elastic
        chain = self._chain(request, elastic) if elastic is not None else ()
        return request.queue_path, user.user, tuple(user.groups), chain

    def set_cluster_resource(self, total: Any) -> None:
        """The cluster's capacity (what best-effort work may use when nothing else wants it)."""
        self.idle.total = {r: int(u) for r, u in total.items()}

    def _exhausted(self, ms: int) -> Any:
        """``scope → bool``: a ``besteffort`` scope that consumed and committed all of a budgeted
        resource at ``ms`` (remembered per scope for one call)."""
        seen: dict[str, bool] = {}
        ledger = self.ledger

        def exhausted(scope: Scope) -> bool:
            found = seen.get(scope.key)
            if found is None:
                found = seen[scope.key] = scope.spec.mode == BESTEFFORT and bool(ledger.spent(scope, ms))
            return found
        return exhausted

    def best_effort_at(self, now: float) -> Callable[[str], bool] | None:
        """``allocation key → True`` for the allocations charged to an exhausted ``besteffort`` scope at
        ``now``: every victim search takes them first (issue 34); None while no budget is
        ``besteffort``. Changes nothing but ending the declared runtimes that ended by ``now`` (as a
        check does)."""
        if not self.best_effort:
            return None
        ledger = self.ledger
        ms = max(_ms(now), ledger.now)
        ledger.expire(ms)
        exhausted = self._exhausted(ms)
        entries = ledger.entries

        def on_best_effort(key: str) -> bool:
            e = entries.get(key)
            return e is not None and any(exhausted(s) for s in e.scopes)
        return on_best_effort

    def ask_added(self, request: AdmissionRequest) -> None:
        """A waiting ask is demand that best-effort work must leave room for."""
        if self.best_effort and request.resource:
            who = self._who(request)
            scopes = tuple(s for s in self.ledger.resolve(*who) if s.spec.mode == BESTEFFORT)
            self.idle.ask(request.allocation_key, request.resource, who, scopes or None)

    def ask_removed(self, request: AdmissionRequest) -> None:
        """A waiting ask was withdrawn."""
        self.idle.ask_gone(request.allocation_key)

    def _scopes(self, request: AdmissionRequest) -> tuple[Any, ...]:
        return self.ledger.resolve(*self._who(request))

    def check(self, request: AdmissionRequest) -> list[Violation]:
        """``budget.exhausted`` for every budget the request does not fit (changes nothing)."""
        if not self.ledger.specs or not request.resource._values:
            return []
        if self.elastic is None:        # the common case inline: _scopes(request) without its calls
            user = request.user
            scopes = self.ledger.resolve(request.queue_path, user.user, tuple(user.groups))
        else:
            scopes = self._scopes(request)
        if not scopes:
            return []
        try:
            runtime = _runtime(request)
        except InputError as exc:
            return [Violation(self.name, RUNTIME_CODE, request.queue_path,
                              f"{exc} (a duration such as 2h or 90m) on application "
                              f"{request.application_id!r}")]
        self._checked = (request, scopes, runtime)
        ms = round(request.time * 1000)        # the ledger keeps its own newest time
        found = self.ledger.shortfalls(scopes, request.resource, ms, runtime)
        return self._refusals(request, found, ms) if found else []

    def _refusals(self, request: AdmissionRequest, found: list[Any], ms: int) -> list[Violation]:
        """The violations of the budgets ``found`` short (best effort first looks for idle room)."""
        if self.best_effort and all(s.scope.spec.mode == BESTEFFORT for s in found):
            return self._best_effort(request, found, max(ms, self.ledger.now))
        return [Violation(self.name, CODE, s.scope.spec.path, refusal_message(s), _short_of(request, s))
                for s in found]

    def _best_effort(self, request: AdmissionRequest, found: list[Any], ms: int) -> list[Violation]:
        """Exhausted ``besteffort`` budgets only: the request runs if what it asks for is otherwise
        idle, else it waits with the budgets' reasons and what is not idle."""
        short = self.idle.short(request.resource, self._exhausted(ms))
        if not short:
            return []
        missing = ", ".join(f"{hours(r, u * 3_600_000):g} {r}" for r, u in sorted(short.items()))
        return [Violation(self.name, CODE, s.scope.spec.path,
                          f"{refusal_message(s)}; as best effort it runs only on otherwise-idle "
                          f"capacity, and {missing} of what it asks for is held or wanted by waiting "
                          "work", _short_of(request, s)) for s in found]

    def apply(self, request: AdmissionRequest) -> list[Violation]:
        """Charge the request from its time on (never refused: :meth:`check` decided, or the journal)."""
        if self.best_effort and request.resource:
            idle = self.idle
            idle.held(request.resource, 1)
            # a waiting ask turned into usage (an undo puts it back)
            idle.last_gone = (request.allocation_key, idle.ask_gone(request.allocation_key))
        if request.allocation_key and self.ledger.specs and request.resource._values:
            checked, scopes, runtime = self._checked
            if checked is not request:      # replay, or a request applied without its check
                scopes = self._scopes(request)
                try:
                    runtime = _runtime(request) if scopes else None
                except InputError:
                    runtime = None      # replay of an allocation a check would refuse: charge it anyway
            self._checked = (None, (), None)
            if scopes:
                self.ledger.charge(request.allocation_key, scopes, request.resource,
                                   round(request.time * 1000), runtime, request.priority)
        return []

    def undo(self, request: AdmissionRequest) -> None:
        """Take back :meth:`apply` exactly (an ask it turned into usage waits again)."""
        idle = self.idle
        if self.best_effort and request.resource:
            idle.held(request.resource, -1)
        key, gone = idle.last_gone
        if gone is not None and key == request.allocation_key:
            idle.ask_back(key, gone)
        self.ledger.undo(request.allocation_key)

    def release(self, request: AdmissionRequest, *, last_allocation: bool) -> None:
        """The allocation ended at the request's time (the release event's)."""
        if self.best_effort and request.resource:
            self.idle.held(request.resource, -1)
        if request.allocation_key:
            self.ledger.release(request.allocation_key, round(request.time * 1000))

    def withdraw(self, request: AdmissionRequest) -> object:
        """A preemption trial takes nothing from a budget: what ran was consumed."""
        return request

    def restore(self, token: object) -> None:
        """Nothing to put back (see :meth:`withdraw`)."""
        return None

    def update_config(self, partition_config: Any) -> None:
        """Adopt the reloaded budgets (what each kept scope consumed stays)."""
        self.ledger.configure(parse_budgets(partition_config.extensions.get("budgets")))
        self._checked = (None, (), None)
        self.adopt_elastic(partition_config)
        self.best_effort = any(spec.mode == BESTEFFORT for spec in self.ledger.specs)
        # the waiting asks' best-effort scopes under the new budgets (asks that waited before the
        # first besteffort budget was set are not known: they count from their next change on)
        idle = self.idle
        idle.best_effort_asks.clear()
        if self.best_effort:
            ledger = self.ledger
            for key, (_, who) in idle.asks.items():
                scopes = tuple(s for s in ledger.resolve(*who) if s.spec.mode == BESTEFFORT)
                if scopes:
                    idle.best_effort_asks[key] = scopes

    def validate_update(self, partition_config: Any) -> None:
        """Refuse a reload whose budgets are wrong, before it is journalled."""
        parse_budgets(partition_config.extensions.get("budgets"))

    def revoke(self, now: float) -> list[Eviction]:
        """``exhausted: preempt`` budgets: a scope that consumed its budget for ``grace`` gives back its
        allocations of the exhausted resource, lowest priority first (reason ``budget.exhausted``)."""
        ledger = self.ledger
        ms = max(_ms(now), ledger.now)
        ledger.expire(ms)
        out: list[Eviction] = []
        self.notes = []         # a replayed tick's warnings were journalled by the live one
        for key in sorted(ledger.scopes):
            scope = ledger.scopes[key]
            self._warn(scope, ms)
            if scope.spec.mode == PREEMPT:
                found = self._due(scope, ms)
                if found is not None:
                    out.append(found)
        if self.best_effort and self.idle.pending:
            taken = self._make_room(ms)
            if taken is not None:
                out.append(taken)
        return out

    def _make_room(self, ms: int) -> Eviction | None:
        """Best-effort work is the first taken back: when the waiting asks of scopes that are not
        exhausted ``besteffort`` ones want more than is idle, the running allocations of exhausted
        ``besteffort`` scopes go, lowest priority first, newest first among equals, until it fits
        (None: nothing to take)."""
        ledger = self.ledger
        exhausted = self._exhausted(ms)
        spent = _holding(ledger, exhausted)
        want = self.idle.wanted(exhausted, {r for s in spent for r in s.cells}) if spent else {}
        keys = _take(ledger, spent, want) if want else []
        if not keys:
            return None
        first = next(s for s in spent if s in ledger.entries[keys[0]].scopes)
        return Eviction(Violation(self.name, CODE, first.spec.path, _room_message(ledger, first, ms)),
                        tuple(keys))

    def _warn(self, scope: Scope, ms: int) -> None:
        """A ``budget_warning`` note when the scope's consumption reached a threshold (50, 80, 100 %) it
        had not reached this period; a new period (or decay) lowers the mark silently."""
        spec = scope.spec
        pct = max((100 * scope.consumed(c, ms) / spec.limits[r] for r, c in scope.cells.items()
                   if spec.limits.get(r)), default=0.0)
        reached = max((w for w in spec.warnings if pct >= w), default=0)
        if reached > scope.warned:
            end = scope.period(ms)[1]
            self.notes.append({"type": "budget_warning", "scope": scope.label, "queue": spec.queue or None,
                               **({"elasticQuota": spec.elastic} if spec.elastic is not None else {}),
                               "threshold": reached, "usedPercent": round(pct, 2),
                               "resetsAt": iso(end, spec.timezone) if end else None})
        scope.warned = reached

    def take_notes(self) -> list[dict[str, Any]]:
        """The warnings of the last tick, once (the timer journals them as notices)."""
        out, self.notes = self.notes, []
        return out

    def _due(self, scope: Scope, ms: int) -> Eviction | None:
        """The eviction a ``preempt`` scope calls for at ``ms`` (None: none yet); moves its monitor."""
        spec = scope.spec
        over = [r for r, cell in sorted(scope.cells.items())
                if cell.level and scope.consumed(cell, ms) >= spec.limits[r]]
        if not over:
            scope.exhausted_at = None
            return None
        if scope.exhausted_at is None:
            scope.exhausted_at = ms
        if ms - scope.exhausted_at < spec.grace_ms:
            return None
        keys = [k for r in over for k in self.ledger.victims(scope, r)]
        if not keys:
            return None
        r = over[0]
        msg = (f"budget of {scope.label} for {r} is exhausted: "
               f"{hours(r, scope.consumed(scope.cells[r], ms)):g} of {hours(r, spec.limits[r]):g} "
               f"{unit_of(r)[1]}-hours consumed this {spec.period_text()}")
        return Eviction(Violation(self.name, CODE, spec.path, msg), tuple(dict.fromkeys(keys)))

    # -- what the faces show ------------------------------------------------------------------------
    def statuses(self, now: float | None = None) -> list[dict[str, Any]]:
        """Every budgeted scope's status at ``now`` (default: the newest event time), sorted by scope."""
        ledger = self.ledger
        ms = ledger.now if now is None else max(_ms(now), ledger.now)
        shown = dict(ledger.scopes)
        # a budget on one scope is listed before anything charged it (nothing consumed, all left);
        # one per user or group by wildcard lists the users and groups it has seen
        for spec in ledger.specs:
            scope = _named_scope(ledger, spec)
            if scope is not None:
                shown.setdefault(scope.key, scope)
        return [scope_status(ledger, shown[k], ms) for k in sorted(shown)]

    def dump_state(self) -> dict[str, Any] | None:
        """Deterministic: what every scope consumed and committed at the newest event time."""
        ledger = self.ledger
        ms = ledger.now
        out: dict[str, Any] = {}
        for key in sorted(ledger.scopes):
            scope = ledger.scopes[key]
            if all(c.empty for c in scope.cells.values()):
                continue
            out[key] = {r: [round(scope.consumed(c, ms), 3), ledger.committed(scope, r, ms)]
                        for r, c in sorted(scope.cells.items())}
        return {"now": ms, "scopes": out}

    def view(self) -> dict[str, Any] | None:
        """``GET …/policies``: every budget's status."""
        return {"budgets": self.statuses()}

    def metrics(self) -> list[MetricSample]:
        """``quotaplane_policy_budget_used_ratio``: consumed + committed over the budget, per scope and
        resource (alert on it at 0.5, 0.8 and 1)."""
        out: list[MetricSample] = []
        for st in self.statuses():
            for r, v in st["resources"].items():
                out.append(MetricSample("budget_used_ratio", "Budget consumed and committed over its limit",
                                        (("scope", st["scope"]), ("resource", r)), v["usedPercent"] / 100))
        return out

    def memo(self) -> dict[str, Any] | None:
        """What each scope consumed (a snapshot cannot derive it from the live allocations)."""
        return self.ledger.memo()

    def restore_memo(self, memo: Mapping[str, Any]) -> None:
        """Put back :meth:`memo` (the live allocations were charged again before)."""
        self.ledger.restore(memo)


def _holding(ledger: Ledger, exhausted: Any) -> list[Scope]:
    """The scopes ``exhausted`` selects that hold something now."""
    return [s for s in ledger.scopes.values() if exhausted(s) and any(c.level for c in s.cells.values())]


def _room_message(ledger: Ledger, scope: Scope, ms: int) -> str:
    """Why best-effort work of ``scope`` is taken back: its spent budget, and the room it gives."""
    r = ledger.spent(scope, ms)[0]
    used = hours(r, scope.consumed(scope.cells[r], ms))
    return (f"budget of {scope.label} for {r} is exhausted: {used:g} "
            f"of {hours(r, scope.spec.limits[r]):g} {unit_of(r)[1]}-hours consumed this "
            f"{scope.spec.period_text()}; its best effort work gives its room back to waiting work")


def _named_scope(ledger: Ledger, spec: BudgetSpec) -> Scope | None:
    """The scope a budget on one scope names (its queue, elastic quota, user or group), as the ledger
    has it; None for a budget per user or group by wildcard (it lists those it has seen)."""
    kind = spec.kind
    if kind == "elasticquota":
        return ledger.peek("", elastic=spec.elastic)
    if kind == "queue":
        return ledger.peek(spec.queue)
    if kind == "user" and spec.user != "*":
        return ledger.peek(spec.queue, user=spec.user)
    if kind == "group" and spec.group != "*":
        return ledger.peek(spec.queue, group=spec.group)
    return None


def _take(ledger: Ledger, spent: list[Scope], want: dict[str, int]) -> list[str]:
    """The allocations of the ``spent`` scopes to take back so that ``want`` (per resource) is free:
    lowest priority first, newest first among equals, only those holding something wanted."""
    candidates = sorted({(e.priority, -e.start, k) for k, e in ledger.entries.items()
                         if any(s in e.scopes for s in spent)})
    keys: list[str] = []
    for _, _, key in candidates:
        vec = ledger.entries[key].vec
        if not any(vec.get(r) for r in want):
            continue
        keys.append(key)
        for r in list(want):
            want[r] -= vec.get(r, 0)
            if want[r] <= 0:
                del want[r]
        if not want:
            break
    return keys


def budget_standing(policy: QuotaPolicy | None, kind: str, name: str, now: float) -> dict[str, Any]:
    """``{"budgets": [...]}``: the budgets of queue, user or group ``name`` for ``standing`` (a queue's
    own, a user's or group's in any queue), read at ``now``; ``{}`` when it has none."""
    if not isinstance(policy, BudgetPolicy):
        return {}
    found = [st for st in policy.statuses(now) if st["kind"] == kind
             and (st["scope"] == name if kind == "queue" else st["scope"].startswith(f"{kind} {name} in "))]
    return {"budgets": found} if found else {}


def build_policy(partition_config: Any, context: Any) -> BudgetPolicy:
    """Builder used by :mod:`quotaplane.policies.registry` for the ``budgets`` extension key."""
    policy = BudgetPolicy(Ledger(parse_budgets(partition_config.extensions.get("budgets"))))
    policy.adopt_elastic(partition_config)
    return policy


#: the ``budgets`` key's plug-in (:mod:`quotaplane.policies.registry`)
PLUGIN = Plugin("budgets", 50, build_policy, codes=(CODE, RUNTIME_CODE), checker=check_budgets)

