"""The admission protocol that composes the engines (product.md "Architecture", decision Q2).

Each quota policy can *check* a request (listing every violation, changing nothing), *apply* it and
*undo* it. The partition admits a request by checking every policy, applying all of them, and undoing
the applied ones if a later apply refuses. ``what_if`` runs only the checks, so "why not" answers are
exactly the admission answers.

:class:`Violation` and :class:`Decision` are public (``qp.Violation``, ``qp.Decision``); the codes are
stable tokens listed in contract.md.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

from quotaplane.config.identity import UserGroup
from quotaplane.config.model import PartitionConfig
from quotaplane.resources import Resource

__all__ = [
    "CODES",
    "PREEMPTION_CODES",
    "AdmissionRequest",
    "Decision",
    "Eviction",
    "MetricSample",
    "QuotaPolicy",
    "Violation",
]

#: Every stable violation code (contract.md "Violation codes").
CODES: tuple[str, ...] = (
    "queue.max",
    "queue.maxapplications",
    "queue.reserved",
    "queue.borrowinglimit",
    "queue.lendinglimit",
    "root.capacity",
    "user.maxresources",
    "user.maxapplications",
    "group.maxresources",
    "group.maxapplications",
    "acl.submit",
    "elastic.runtime",
    "elastic.min",
    "forest.quota",
    "flavor.nomatch",
    "flavor.none",
    "budget.exhausted",      # docs/budgets.md: a budget of the request's queue, user or group is spent
    "budget.runtime",        # docs/budgets.md: the declared runtime tag is not a duration
)

#: Why allocations were taken away (the ``reason`` of a ``preempted`` event; docs/preemption.md).
PREEMPTION_CODES: tuple[str, ...] = (
    "elastic.revoked",       # E5: the quota stayed over its runtime for revokeDelay
    "elastic.preempted",     # E6: a higher-priority request of the same quota
    "queue.guaranteed",      # PR-Y: an ask restoring its queue's guaranteed resources
    "queue.quota",           # PR-Q: the queue stayed over its (lowered) max for quota.preemption.delay
    "queue.fairsharing",     # KQ-S: Kueue's fair-sharing preemption for an ask of another queue
    "forest.preempted",      # seed 003: a quota tree made room for a higher-priority consumer
    "budget.exhausted",      # docs/budgets.md: an exhausted budget with exhausted: preempt, after its grace
)


@dataclass(frozen=True, slots=True)
class Violation:
    """One reason a request does not fit.

    ``policy`` names the policy ("queue", "user", "group", "elastic", "forest", "acl"); ``code`` is a
    stable token from :data:`CODES`; ``path`` is the queue or quota where the exceeded limit is set;
    ``message`` is a sentence for people; ``resource`` holds the amounts that do not fit (how much is
    missing per resource name), when the limit is about resources.
    """

    policy: str
    code: str
    path: str
    message: str
    resource: Resource | None = None

    def reason(self) -> dict[str, str]:
        """The violation-shaped reason of a preemption: ``{policy, code, path, message}``."""
        return {"policy": self.policy, "code": self.code, "path": self.path, "message": self.message}

    def to_dict(self) -> dict[str, Any]:
        """The REST shape: ``{policy, code, path, message, resource}`` (resource ``{}`` when none)."""
        return {
            "policy": self.policy,
            "code": self.code,
            "path": self.path,
            "message": self.message,
            "resource": self.resource.to_dict() if self.resource is not None else {},
        }


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer of ``Partition.allocate`` / ``what_if``.

    ``allocated`` is true when every policy admitted the request (for ``what_if``: would admit it).
    ``reasons`` lists every violation of every policy when it is false. ``preempted`` lists the
    allocation keys that a policy preempted to make room (quota forests): the partition has already
    released them, and the caller should stop the work they stand for. While the partition holds what
    it preempts (``hold_preempted``, the Kubernetes front), a request that needs preemption is not
    allocated: ``preempted`` names the victims it waits for (they stay charged until released) and
    the request waits for their room as a pending ask.

    With resource flavors (docs/flavors.md), ``flavors`` gives the flavor chosen for each requested
    resource counted per flavor, and ``flavor_attempts`` every flavor the search tried, in order, with
    its mode, borrowing level and reasons (:class:`quotaplane.flavors.assign.Attempt`).
    """

    allocated: bool
    reasons: list[Violation] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    queue: str = ""
    allocation_key: str = ""
    flavors: dict[str, str] = field(default_factory=dict)
    flavor_attempts: tuple[Any, ...] = ()

    def __bool__(self) -> bool:
        return self.allocated

    def to_dict(self) -> dict[str, Any]:
        """The REST shape of a decision."""
        out: dict[str, Any] = {"allocated": self.allocated}
        if self.allocation_key:
            out["allocationKey"] = self.allocation_key
        if self.queue:
            out["queueName"] = self.queue
        out["reasons"] = [v.to_dict() for v in self.reasons]
        if self.preempted:
            out["preempted"] = list(self.preempted)
        if self.flavors:
            out["flavors"] = dict(self.flavors)
        if self.flavor_attempts:
            out["flavorAttempts"] = [a.to_dict() for a in self.flavor_attempts]
        return out


@dataclass(frozen=True, slots=True)
class Eviction:
    """Allocations to take away (E5 revoke, E6 preemption, PR-Y, PR-Q): why, and which (in order)."""

    reason: Violation
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MetricSample:
    """One sample a policy shows on ``GET /metrics``: the gauge ``quotaplane_policy_<name>`` with the
    labels ``partition`` and ``policy`` (added by the service) and ``labels``."""

    name: str
    help: str
    labels: tuple[tuple[str, str], ...]
    value: float


#: the tags of a request without any (shared: read-only)
NO_TAGS: Mapping[str, str] = MappingProxyType({})


class AdmissionRequest(NamedTuple):
    """What the partition hands every policy: one allocation of one application (read-only).

    A named tuple rather than a frozen dataclass: two are built per allocate+release pair, and a
    frozen dataclass sets each of its 11 fields through ``object.__setattr__`` (about four times the
    cost of the tuple, benchmarks/partition.py); it is as immutable."""

    application_id: str
    allocation_key: str
    queue_path: str
    user: UserGroup
    resource: Resource
    priority: int = 0
    preemptible: bool = True
    first_allocation: bool = False            # the application has no allocation yet (seed 001)
    tags: Mapping[str, str] = NO_TAGS
    time: float = 0.0                         # when it is admitted (decision P6: victims' age)
    max_runtime: float | None = None          # its declared runtime in seconds (budgets commit it)


class QuotaPolicy(ABC):
    """A quota policy plugged into the admission path: subclass it and override what applies.

    ``check`` must not change state. ``apply`` may still refuse (return a non-empty list) when the
    policy's own check-then-apply is atomic (the user group manager's); it then must have changed
    nothing. ``undo`` reverses a successful ``apply`` exactly. ``release`` gives back an allocation
    admitted earlier. The other methods are hooks with no-op defaults; the partition calls every one
    of them on every policy, so a policy overrides only those it needs.
    """

    __slots__ = ("name",)

    #: The policy's name in violations and in ``Partition.policies()``.
    name: str
    #: The partition-config key that switches it on (its plug-in's, :mod:`quotaplane.policies.registry`);
    #: ``""`` for the queue and user/group policies, which always run.
    key: ClassVar[str] = ""
    #: True when :meth:`revoke` may name allocations (the partition then ticks it on every timeout check).
    reclaims: ClassVar[bool] = False
    #: True when :meth:`check_replacement` checks a placeholder replacement without changing anything;
    #: otherwise the partition releases the placeholder, checks, and applies it again on a refusal.
    checks_replacement: ClassVar[bool] = False

    @abstractmethod
    def check(self, request: AdmissionRequest) -> list[Violation]:
        """Every violation of this policy for ``request``; ``[]`` when it fits. Changes nothing."""
        ...

    @abstractmethod
    def apply(self, request: AdmissionRequest) -> list[Violation]:
        """Count ``request``; return ``[]`` on success, or the violations (and change nothing)."""
        ...

    @abstractmethod
    def undo(self, request: AdmissionRequest) -> None:
        """Reverse a successful :meth:`apply` of ``request`` exactly."""
        ...

    @abstractmethod
    def release(self, request: AdmissionRequest, *, last_allocation: bool) -> None:
        """Give back an allocation admitted earlier (``last_allocation``: the app has none left)."""
        ...

    # -- hooks (no-op defaults) ---------------------------------------------------------------------
    def update_config(self, partition_config: PartitionConfig) -> None:
        """A config reload kept this policy: adopt ``partition_config``."""
        return None  # a hook: nothing to do unless a policy overrides it

    def validate_update(self, partition_config: PartitionConfig) -> None:
        """Refuse (``ValueError``), before a reload is journalled, what :meth:`update_config` would."""
        return None  # a hook: nothing to do unless a policy overrides it

    def set_cluster_resource(self, total: Resource) -> None:
        """The sum of node capacities changed."""
        return None  # a hook: nothing to do unless a policy overrides it

    def ask_added(self, request: AdmissionRequest) -> None:
        """A request now waits (a pending ask): count it as demand where the policy has demand (PR-K1).

        Demand is not usage: no limit may count it. :meth:`apply` of the same allocation key later turns
        it into usage; :meth:`ask_removed` drops it when it is withdrawn.
        """
        return None  # a hook: nothing to do unless a policy overrides it

    def ask_removed(self, request: AdmissionRequest) -> None:
        """A waiting request was withdrawn (not allocated): forget the demand :meth:`ask_added` counted."""
        return None  # a hook: nothing to do unless a policy overrides it

    def victims_for(self, request: AdmissionRequest, reasons: list[Violation]) -> Eviction | None:
        """Allocations this policy would preempt so that ``request``, refused only by this policy for
        ``reasons``, fits (E6 inner-quota preemption); None when it preempts nothing. Changes nothing."""
        return None

    def never_victims(self, keys: AbstractSet[str]) -> None:
        """The allocations the partition never takes as victims again (held preemptions given up,
        issue 31): a policy that chooses its victims itself chooses others. ``keys`` is the partition's
        own live set. The others need do nothing (the partition drops such victims from their plans)."""
        return None

    def best_effort_at(self, now: float) -> Callable[[str], bool] | None:
        """``allocation key → True`` for the allocations that run on best-effort terms at ``now`` (an
        exhausted ``besteffort`` budget, issue 34): every victim search takes them first, among the
        victims its own rules allow. None: this policy puts no allocation on such terms."""
        return None

    def victims_first(self, best_effort: Callable[[float], Callable[[str], bool] | None]) -> None:
        """The partition's best-effort predicate (:meth:`PolicySet.best_effort_at`): a policy that chooses
        its victims itself takes those allocations first (issue 34); the others need do nothing."""
        return None

    def hold_victims(self, on: bool) -> None:
        """Held preemption (issue 31 #3): the partition holds what it preempts until it is released.
        A policy that preempts inside :meth:`apply` (reported by :meth:`take_preempted`) then refuses
        instead and names its victims through :meth:`victims_for`; the others need do nothing."""
        return None

    def withdraw(self, request: AdmissionRequest) -> object:
        """Take an admitted allocation out for a moment (a preemption trial): :meth:`restore` puts it
        back exactly. The running count is left alone."""
        self.release(request, last_allocation=False)
        return request

    def restore(self, token: object) -> None:
        """Undo :meth:`withdraw` exactly (never refused: the allocation was admitted)."""
        assert isinstance(token, AdmissionRequest)
        if self.apply(token):
            raise RuntimeError(f"{type(self).__name__} refused to restore allocation "
                               f"{token.allocation_key!r}")

    def take_preempted(self) -> list[str]:
        """Allocation keys the last :meth:`apply` or :meth:`update_config` let go (already released here)."""
        return []

    def check_replacement(self, placeholder: AdmissionRequest, real: AdmissionRequest) -> list[Violation]:
        """Check ``real`` as if ``placeholder`` were released, changing nothing (``checks_replacement``)."""
        raise TypeError(f"{type(self).__name__} does not check a replacement in place "
                        "(its checks_replacement is False)")

    def revoke(self, now: float) -> list[Eviction]:
        """One tick of the policy's over-use monitor at ``now`` (``reclaims``): what to take back now
        because its quota was over its share too long. The tick itself may change the monitor's clock,
        so it runs on replay too (its answer is then ignored: the journal holds the decision)."""
        return []

    def dump_state(self) -> dict[str, Any] | None:
        """Deterministic state for ``Partition.dump_state()`` (None: nothing to show)."""
        return None

    # -- what the faces show (REST, metrics): the plug-in protocol's views ------------------------
    def view(self) -> dict[str, Any] | None:
        """What ``GET /ws/v1/partition/{p}/policies`` shows of the policy (default: :meth:`dump_state`)."""
        return self.dump_state()

    def metrics(self) -> list[MetricSample]:
        """Samples for ``GET /metrics`` (``quotaplane_policy_<name>``; default: none)."""
        return []

    def engine(self) -> object | None:
        """The engine this policy adapts, for a face that serves the engine's own API (the elastic
        quota manager, the quota forest manager); None for a policy that is its own engine."""
        return None

    def memo(self) -> dict[str, Any] | None:
        """State a snapshot rebuild cannot derive from the allocations (None: none)."""
        return None

    def restore_memo(self, memo: Mapping[str, Any]) -> None:
        """Put back what :meth:`memo` returned (snapshot restore)."""
        return None  # a hook: nothing to do unless a policy overrides it
