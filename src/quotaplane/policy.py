"""The admission protocol that composes the engines (product.md "Architecture", decision Q2).

Each quota policy can *check* a request (listing every violation, changing nothing), *apply* it and
*undo* it. The partition admits a request by checking every policy, applying all of them, and undoing
the applied ones if a later apply refuses. ``what_if`` runs only the checks, so "why not" answers are
exactly the admission answers.

:class:`Violation` and :class:`Decision` are public (``qp.Violation``, ``qp.Decision``); the codes are
stable tokens listed in contract.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from quotaplane.config.identity import UserGroup
from quotaplane.resources import Resource

__all__ = [
    "CODES",
    "AdmissionRequest",
    "Decision",
    "QuotaPolicy",
    "Violation",
]

#: Every stable violation code (contract.md "Violation codes").
CODES: tuple[str, ...] = (
    "queue.max",
    "queue.maxapplications",
    "root.capacity",
    "user.maxresources",
    "user.maxapplications",
    "group.maxresources",
    "group.maxapplications",
    "acl.submit",
    "elastic.runtime",
    "elastic.min",
    "forest.quota",
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
    released them, and the caller should stop the work they stand for.
    """

    allocated: bool
    reasons: list[Violation] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    queue: str = ""
    allocation_key: str = ""

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
        return out


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """What the partition hands every policy: one allocation of one application."""

    application_id: str
    allocation_key: str
    queue_path: str
    user: UserGroup
    resource: Resource
    priority: int = 0
    preemptible: bool = True
    first_allocation: bool = False            # the application has no allocation yet (seed 001)
    tags: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class QuotaPolicy(Protocol):
    """A quota policy plugged into the admission path.

    ``check`` must not change state. ``apply`` may still refuse (return a non-empty list) when the
    policy's own check-then-apply is atomic (the user group manager's); it then must have changed
    nothing. ``undo`` reverses a successful ``apply`` exactly. ``release`` gives back an allocation
    admitted earlier. Policies that preempt return the preempted allocation keys from
    ``take_preempted`` after an apply.
    """

    name: str

    def check(self, request: AdmissionRequest) -> list[Violation]:
        """Every violation of this policy for ``request``; ``[]`` when it fits. Changes nothing."""
        ...

    def apply(self, request: AdmissionRequest) -> list[Violation]:
        """Count ``request``; return ``[]`` on success, or the violations (and change nothing)."""
        ...

    def undo(self, request: AdmissionRequest) -> None:
        """Reverse a successful :meth:`apply` of ``request`` exactly."""
        ...

    def release(self, request: AdmissionRequest, *, last_allocation: bool) -> None:
        """Give back an allocation admitted earlier (``last_allocation``: the app has none left)."""
        ...
