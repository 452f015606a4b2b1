"""One queue of a partition's tree, the record of a limit it sets, and queue-name rules (seed 004)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from quotaplane.config.model import ChildTemplateConfig, FungibilityConfig
from quotaplane.queues.acl import ACL
from quotaplane.resources import Resource

__all__ = [
    "ACTIVE",
    "DRAINING",
    "INVALID_QUEUE_NAME",
    "QUEUE_NAME",
    "FairOrder",
    "Queue",
    "QueueLimit",
    "invalid_queue_path",
]

ACTIVE = "Active"
DRAINING = "Draining"

#: Appendix B: a queue name (one path element).
QUEUE_NAME = re.compile(r"^[a-zA-Z0-9_:#/@-]{1,64}$")


class FairOrder(Protocol):
    """Kueue's fair sharing as the admission order reads it (:class:`quotaplane.queues.fair.FairShares`)."""

    def order_key(self, q: Queue) -> tuple[bool, tuple[int, float]]:
        """``q``'s place among its siblings: not borrowing first, then the lower share (KQ-S4)."""
        ...

    def head_key(self, q: Queue, request: Mapping[str, int]) -> tuple[bool, tuple[int, float]]:
        """The same with ``q``'s head workload (``request``) added to its usage (KQ-S4)."""
        ...


@dataclass(frozen=True, slots=True)
class QueueLimit:
    """One queue limit a request would break (M-2 ``queue.max`` / ``root.capacity``, M-4
    ``queue.maxapplications``). ``queue_path`` is the queue where the limit is set; ``shortfall`` holds,
    per resource name, how much the request goes over (None for application counts)."""

    code: str
    queue_path: str
    max: Resource | None
    allocated: Resource
    shortfall: Resource | None
    message: str
    max_applications: int = 0
    running_applications: int = 0


class Queue:
    """One queue. Read the attributes; change them only through :class:`QueueTree`.

    ``max``/``guaranteed`` are the queue's own settings (``None`` = not set; the root's ``max`` is the
    cluster size). ``allocated`` is the sum of every allocation in the subtree (zero names pruned).
    ``running_apps`` is an insertion-ordered set (a dict with ``None`` values) of the applications that
    run in the subtree; ``applications`` the applications placed in this leaf (running or not).
    """

    __slots__ = (
        "_alloc",
        "_pending",
        "admin_acl",
        "applications",
        "asks_waiting",
        "borrowing_limit",
        "chain",
        "child_template",
        "children",
        "fair",
        "flavors",
        "fungibility",
        "guaranteed",
        "is_leaf",
        "lending_limit",
        "managed",
        "max",
        "max_applications",
        "name",
        "own_properties",
        "parent",
        "path",
        "properties",
        "running_apps",
        "status",
        "submit_acl",
    )

    name: str
    path: str
    parent: Queue | None
    children: dict[str, Queue]
    is_leaf: bool
    managed: bool
    status: str
    max: Resource | None
    guaranteed: Resource | None
    max_applications: int
    chain: tuple[Queue, ...]
    _alloc: dict[str, int]
    _pending: dict[str, int]
    asks_waiting: int
    running_apps: dict[str, None]
    applications: dict[str, None]
    own_properties: dict[str, str]
    properties: dict[str, str]
    child_template: ChildTemplateConfig | None
    submit_acl: ACL
    admin_acl: ACL
    flavors: tuple[str, ...] | None
    fungibility: FungibilityConfig | None
    borrowing_limit: Resource | None
    lending_limit: Resource | None
    fair: FairOrder | None

    def __init__(self, name: str, parent: Queue | None, *, is_leaf: bool, managed: bool) -> None:
        self.name = name
        self.parent = parent
        self.path = name if parent is None else f"{parent.path}.{name}"
        # this queue, its parent, ... the root: the M-2 walk, fixed for the queue's life
        self.chain = (self,) if parent is None else (self, *parent.chain)
        self.children = {}
        self.is_leaf = is_leaf
        self.managed = managed
        self.status = ACTIVE
        self.max = None
        self.guaranteed = None
        self.max_applications = 0
        self._alloc = {}
        self._pending = {}
        #: how many asks wait in the subtree (what ``_pending`` sums), so that a position counts the asks
        #: of the queues ordered before it in O(1) each (scheduling.positions)
        self.asks_waiting = 0
        self.running_apps = {}
        self.applications = {}
        self.own_properties = {}
        self.properties = {}
        self.child_template = None
        self.submit_acl = ACL(None)
        self.admin_acl = ACL(None)
        #: the resource flavors its requests try, in order (None: the parent's; docs/flavors.md)
        self.flavors = None
        #: the flavor search's fungibility (None: the parent's)
        self.fungibility = None
        #: how much above its guaranteed its subtree may use / how much of its unused guaranteed others
        #: may use, per resource (None: unlimited; queues.limits)
        self.borrowing_limit = None
        self.lending_limit = None
        #: the tree's fair-sharing shares when the partition turns fair sharing on (docs/fair-sharing.md)
        self.fair = None if parent is None else parent.fair

    @property
    def allocated(self) -> Resource:
        """The sum of every allocation in the subtree (a snapshot; zero names pruned)."""
        return Resource.of(dict(self._alloc))

    @property
    def pending(self) -> Resource:
        """YuniKorn ``pendingResource``: the sum of the waiting asks in the subtree (demand, not usage)."""
        return Resource.of(dict(self._pending))

    @property
    def is_root(self) -> bool:
        """True for the root queue."""
        return self.parent is None

    @property
    def is_draining(self) -> bool:
        """True when the queue was removed from the config and waits to become empty."""
        return self.status == DRAINING

    def sorted_children(self) -> list[Queue]:
        """The children ordered by name (deterministic listing)."""
        return [self.children[k] for k in sorted(self.children)]

    def effective_template(self) -> ChildTemplateConfig | None:
        """M-6: the child template of this queue, else of the nearest ancestor that has one."""
        q: Queue | None = self
        while q is not None:
            if q.child_template is not None:
                return q.child_template
            q = q.parent
        return None

    def effective_flavors(self) -> tuple[str, ...] | None:
        """The flavors this queue's requests try: its own list, else the nearest ancestor's (None: every
        flavor of the partition, in its order)."""
        for q in self.chain:
            if q.flavors is not None:
                return q.flavors
        return None

    def effective_fungibility(self) -> FungibilityConfig | None:
        """The flavor search's fungibility: this queue's, else the nearest ancestor's (None: Kueue's
        defaults)."""
        for q in self.chain:
            if q.fungibility is not None:
                return q.fungibility
        return None

    def fits_max(self, items: Iterable[tuple[str, int]]) -> bool:
        """M-2 for this queue alone: the requested amounts ``items`` fit under its max on top of what
        it holds, each requested name alone. Not the root: a name missing from the max, or an unset
        max, is unlimited (FitInMaxUndef); the root: strict against the cluster size, a name no node
        provides does not fit (FitIn). The one test of :meth:`~quotaplane.queues.tree.QueueTree.over_max`
        and of the scheduler's wake index (scheduling/wake.py)."""
        max_res = self.max
        strict = self.parent is None
        if max_res is None and not strict:
            return True
        maxv: Mapping[str, int] = max_res._values if max_res is not None else {}
        used = self._alloc
        for name, amount in items:
            limit = maxv.get(name)
            if limit is None:
                if not strict:
                    continue
                limit = 0
            if used.get(name, 0) + amount > (limit if limit > 0 else 0):
                return False
        return True

    def ancestors(self) -> Iterator[Queue]:
        """This queue, then its parent, … up to the root (the M-2 walk order)."""
        yield from self.chain

    def is_empty(self) -> bool:
        """No children, no usage, no running or placed applications."""
        return (not self.children and not self.running_apps and not self.applications
                and not any(self._alloc.values()))

    def __repr__(self) -> str:
        return f"Queue({self.path!r}, leaf={self.is_leaf}, managed={self.managed}, status={self.status})"


INVALID_QUEUE_NAME = ("invalid queue name, max 64 characters consisting of alphanumeric characters and "
                      "'-', '_', '#', '@', '/', ':' allowed")


def invalid_queue_path(path: str) -> str | None:
    """The YuniKorn error text when some dot-separated part of ``path`` is not a valid queue name
    (Appendix B; the REST queue handlers answer 400 with it), else None."""
    for part in path.split("."):
        if not QUEUE_NAME.fullmatch(part):
            return f"{INVALID_QUEUE_NAME}: {part!r}"
    return None
