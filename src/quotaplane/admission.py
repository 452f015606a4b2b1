"""The one admission path (decision Q2): check every policy, apply them all, undo exactly on a refusal.

:class:`PolicySet` holds a partition's policies by role (queue, user/group, extensions) and in
admission order. :func:`admit` is the live path: every check runs before the first change and a
refusal lists every violation of every policy, in policy order, each computed once. The user group
manager checks and applies in one atomic step (rule U1), so when every other policy admits, its
trackers are walked once, not twice. :func:`apply_all` is the replay path: the recorded outcome,
without checks.

:class:`AllocationSpec` is a validated allocation request (what ``Partition.allocate`` takes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from quotaplane.config.identity import check_name
from quotaplane.errors import InputError
from quotaplane.flavors.catalog import FlavorRequest
from quotaplane.policies.protocol import AdmissionRequest, QuotaPolicy, Violation
from quotaplane.policies.queue import QueuePolicy
from quotaplane.policies.ugm import UgmPolicy
from quotaplane.resources import Resource

__all__ = ["AllocationSpec", "PolicySet", "admit", "apply_all", "as_resource", "check_all", "check_id",
           "check_labels", "check_max_runtime", "validate_spec"]

#: (policy that let it go, allocation key): an allocation a policy preempted while admitting another
Preempted = tuple[QuotaPolicy, str]


class PolicySet:
    """The policies of a partition by role, and in admission order (decision Q2).

    ``queue`` and ``ugm`` are always there; ``extensions`` are the policies switched on by partition
    config keys (elastic, forest, plug-ins) with their keys, in their registered order. ``all`` is the
    admission order: queue, user/group, then the extensions.
    """

    __slots__ = ("_best_effort", "all", "extension_policies", "extensions", "held", "preempting", "queue",
                 "ugm")

    def __init__(self, queue: QueuePolicy, ugm: UgmPolicy,
                 extensions: Sequence[tuple[str, QuotaPolicy]] = ()) -> None:
        self.queue = queue
        self.ugm = ugm
        self.extensions: tuple[tuple[str, QuotaPolicy], ...] = tuple(extensions)
        self.extension_policies: tuple[QuotaPolicy, ...] = tuple(p for _, p in self.extensions)
        self.all: tuple[QuotaPolicy, ...] = (queue, ugm, *self.extension_policies)
        #: the policies that may preempt (they override ``take_preempted``): asked after every apply
        self.preempting: tuple[QuotaPolicy, ...] = tuple(
            p for p in self.all if type(p).take_preempted is not QuotaPolicy.take_preempted)
        #: the reservations that hold a request back (``queue.reserved``, issue 13); set by the state
        self.held: Callable[[AdmissionRequest], list[Violation]] = _nothing_held
        #: the policies that may put allocations on best-effort terms (they override ``best_effort_at``)
        self._best_effort: tuple[QuotaPolicy, ...] = tuple(
            p for p in self.extension_policies if type(p).best_effort_at is not QuotaPolicy.best_effort_at)

    @property
    def core(self) -> tuple[QuotaPolicy, QuotaPolicy]:
        """The policies that hold the running-application count: queue and user/group."""
        return (self.queue, self.ugm)

    def extension(self, key: str) -> QuotaPolicy | None:
        """The extension policy switched on by partition config key ``key``, or None."""
        for k, p in self.extensions:
            if k == key:
                return p
        return None

    def best_effort_at(self, now: float) -> Callable[[str], bool] | None:
        """``allocation key → True`` for the allocations running on best-effort terms at ``now`` (issue
        34: every victim search takes them first, among the victims its own rules allow); None when no
        policy puts any on such terms (the searches then keep their own order, at no cost)."""
        found = [f for p in self._best_effort if (f := p.best_effort_at(now)) is not None]
        if len(found) < 2:
            return found[0] if found else None
        return lambda key: any(f(key) for f in found)

    def reclaiming(self) -> list[QuotaPolicy]:
        """The extension policies whose over-use monitor may name allocations to release (E5)."""
        return [p for p in self.extension_policies if p.reclaims]

    def take_preempted(self) -> list[Preempted]:
        """What each policy let go in its last apply or config update, with the policy."""
        return [(p, key) for p in self.preempting for key in p.take_preempted()]


def _nothing_held(request: AdmissionRequest) -> list[Violation]:
    return []


def check_all(policies: PolicySet, request: AdmissionRequest) -> list[Violation]:
    """Every violation of every policy, in admission order; changes nothing (``what_if``). The
    reservations holding the request back come right after the queue's own violations."""
    reasons: list[Violation] = []
    for policy in policies.all:
        reasons.extend(policy.check(request))
        if policy is policies.queue:
            reasons.extend(policies.held(request))
    return reasons


def admit(policies: PolicySet, request: AdmissionRequest) -> tuple[list[Violation], list[Preempted]]:
    """Admit ``request`` through every policy or change nothing; return (refusal, preempted).

    The pure checks of queue and extensions run first; if any refuses, the user/group check is added
    in its place so the reasons are in policy order, each computed once. Otherwise the user group
    manager checks and applies atomically (U1), then the others apply; a late refusal undoes the
    applied ones in reverse.
    """
    ugm = policies.ugm
    reasons = policies.queue.check(request)
    reasons.extend(policies.held(request))
    ext: list[Violation] = []
    for policy in policies.extension_policies:
        ext.extend(policy.check(request))
    if reasons or ext:
        reasons.extend(ugm.check(request))
        reasons.extend(ext)
        return reasons, []
    if not ugm.admit(request):
        return ugm.refusal(request), []
    return apply_all(policies, request, admitted=ugm)


def apply_all(policies: PolicySet, request: AdmissionRequest, admitted: QuotaPolicy | None = None
              ) -> tuple[list[Violation], list[Preempted]]:
    """Apply every policy in order; on a refusal undo the applied ones in reverse (Q2).

    ``admitted``: a policy that has already applied the request; it is skipped here but undone like
    the others on a refusal. Returns the refusal (empty on success) and the allocations the policies
    preempted, each with the policy that let it go.
    """
    every = policies.all
    for i, policy in enumerate(every):
        if policy is not admitted:
            refused = policy.apply(request)
            if refused:
                for done in reversed(every[:i]):    # the ones before it, which applied it
                    done.undo(request)
                return refused, []
    # no call when no policy preempts (every admission comes here: benchmarks/calls.py)
    return [], policies.take_preempted() if policies.preempting else []


@dataclass(slots=True)
class AllocationSpec:
    """A validated allocation request: ids non-empty, amounts non-negative integers, flags booleans."""

    application_id: str
    allocation_key: str
    resource: Resource
    priority: int = 0
    preemptible: bool = True
    placeholder: bool = False
    task_group: str | None = None
    #: the node it runs on, when the caller knows it (issue 15 #2)
    node: str | None = None
    #: YuniKorn's ``allocationTags`` (string to string), None: none
    tags: dict[str, str] | None = None
    #: where it may run (node selector, affinity, tolerations), for choosing its flavors; None: anywhere
    constraints: FlavorRequest | None = None
    #: set when ``resource`` is already charged per these flavors (resource → flavor): no search
    flavors: dict[str, str] | None = None
    #: the declared runtime in seconds (:func:`check_max_runtime`), None: none declared
    max_runtime: float | None = None


def check_id(value: object, what: str) -> str:
    """``value`` when it is a non-empty string without control or invisible characters; ``ValueError``
    naming ``what`` otherwise (:func:`~quotaplane.config.identity.check_name`)."""
    if type(value) is str and value and value.isascii() and value.isprintable():
        return value                      # the common case (printable ASCII), without a regex
    return check_name(value, what)


def as_resource(resource: object, what: str = "resource") -> Resource:
    """A Resource of non-negative amounts from a Resource or a mapping; ``ValueError`` otherwise."""
    if type(resource) is Resource or isinstance(resource, Resource):
        r = resource
    elif isinstance(resource, Mapping):
        r = Resource(resource)
    else:
        raise InputError(f"{what} must be a mapping of resource name to integer, "
                         f"got {type(resource).__name__}")
    for name, amount in r._values.items():     # the dict itself: every admission walks it
        if amount < 0:
            raise InputError(f"{what}: negative amount {amount} for {name!r}")
    return r


def validate_spec(application_id: Any, allocation_key: Any, resource: Any, priority: Any = 0,
                  preemptible: Any = True, placeholder: Any = False, task_group: Any = None,
                  node: Any = None, tags: Any = None, node_selector: Any = None, node_affinity: Any = None,
                  tolerations: Any = None, max_runtime: Any = None) -> AllocationSpec:
    """Check the arguments of ``Partition.allocate`` (``ValueError`` naming the first bad one)."""
    check_id(application_id, "application id")
    check_id(allocation_key, "allocation key")
    if resource is None:
        raise InputError("resource is required")
    res = as_resource(resource)
    _check_flags(priority, preemptible, placeholder, task_group)
    if node is not None:
        check_id(node, "node id")
    constraints = None
    if node_selector is not None or node_affinity is not None or tolerations is not None:
        constraints = FlavorRequest.parse(node_selector, node_affinity, tolerations) or None
    # no call for the absent tags and runtime: this runs on every admission (benchmarks/calls.py)
    return AllocationSpec(application_id, allocation_key, res, priority, preemptible, placeholder,
                          task_group or None, node, None if tags is None else check_tags(tags), constraints,
                          max_runtime=None if max_runtime is None else check_max_runtime(max_runtime))


def check_labels(labels: Any) -> dict[str, str] | None:
    """Node labels: an object of non-empty label names to string values (``ValueError`` naming the
    first bad entry); None: none given."""
    if labels is None:
        return None
    if not isinstance(labels, Mapping):
        raise InputError("node labels must be an object of label to value")
    for k, v in labels.items():
        if not isinstance(k, str) or not k:
            raise InputError(f"node label {k!r}: the name must be a non-empty string")
        if not isinstance(v, str):
            raise InputError(f"node label {k!r}: the value must be a string, not {type(v).__name__}")
    return dict(labels)



def check_max_runtime(value: Any) -> float | None:
    """A declared runtime: the most the work is expected to run once allocated, in seconds — a
    positive finite number (``ValueError`` naming it otherwise); None: none declared. The waiting-time
    forecast takes it as the allocation's end (docs/eta.md); nothing is stopped when it passes."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value <= 0:
        raise InputError(f"max runtime must be a positive number of seconds, got {value!r}")
    return float(value)


def check_tags(tags: Any) -> dict[str, str] | None:
    """Allocation tags: an object of strings (``ValueError`` naming the first bad entry); None or
    empty: none."""
    if tags is None:
        return None
    if not isinstance(tags, Mapping):
        raise InputError("allocation tags must be an object of strings")
    for k, v in tags.items():
        if not isinstance(k, str) or not k:
            raise InputError(f"allocation tag name {k!r}: must be a non-empty string")
        if not isinstance(v, str):
            raise InputError(f"allocation tag {k!r}: value must be a string, not {type(v).__name__}")
    return dict(tags) or None


def _check_flags(priority: Any, preemptible: Any, placeholder: Any, task_group: Any) -> None:
    # exact types first, no call in the common case (every admission); bool has no subclasses
    if type(priority) is not int and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise InputError("priority must be an integer")
    if type(preemptible) is not bool or type(placeholder) is not bool:
        raise InputError("preemptible and placeholder must be booleans")
    if placeholder and not task_group:
        raise InputError("a placeholder allocation needs a task group")
    if task_group is not None and not isinstance(task_group, str):
        raise InputError("task_group must be a string")
