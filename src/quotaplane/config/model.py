"""The validated configuration model: frozen, fully parsed, names normalised.

Built by :func:`quotaplane.config.load_config` from YuniKorn queue YAML (seeds 000 and 004). Engines
read these objects; they never see YAML. Queue names and paths are lower case (decision U10);
resources are parsed into :class:`~quotaplane.resources.Resource` (internal units). ``line`` fields
hold the 1-based line in the source text where the object starts, when it came from text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from quotaplane.errors import NotFoundError
from quotaplane.resources import Resource

__all__ = [
    "ChildTemplateConfig",
    "FairSharingConfig",
    "FilterConfig",
    "FlavorConfig",
    "FungibilityConfig",
    "LimitConfig",
    "NodeSortPolicyConfig",
    "PartitionConfig",
    "PlacementRuleConfig",
    "PreemptionConfig",
    "QueueConfig",
    "SchedulerConfig",
    "TaintConfig",
    "TolerationConfig",
]

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class LimitConfig:
    """One entry of a queue's ``limits`` list (seed 000): per user / per group, not combined."""

    limit: str = ""
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    max_resources: Resource | None = None     # None: no resource limit in this entry
    max_applications: int = 0                 # 0: no count limit (decision U11)
    line: int | None = None


@dataclass(frozen=True, slots=True)
class ChildTemplateConfig:
    """Settings a dynamic child queue takes from its parent (M-6)."""

    max_applications: int = 0
    properties: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    max: Resource | None = None
    guaranteed: Resource | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class FungibilityConfig:
    """Kueue's ``flavorFungibility`` of a queue (KQ-F6, KQ-F7): what the flavor search does when a flavor
    fits only by borrowing (``when_can_borrow``) or only by preempting (``when_can_preempt``) —
    ``MayStopSearch`` takes it, ``TryNextFlavor`` looks further — and which of two such flavors it
    prefers (``preference``: ``BorrowingOverPreemption``, ``PreemptionOverBorrowing``, "" = unset,
    which acts as ``BorrowingOverPreemption``)."""

    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    preference: str = ""
    line: int | None = None


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """A configured queue and its children. ``path`` is the full lower-case path (``root.a.b``)."""

    name: str
    path: str
    parent: bool = False                      # the YAML ``parent: true`` flag
    max: Resource | None = None
    guaranteed: Resource | None = None
    max_applications: int = 0
    submit_acl: str | None = None             # None: not set (inherits / denies, see queues.acl)
    admin_acl: str | None = None
    properties: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    child_template: ChildTemplateConfig | None = None
    limits: tuple[LimitConfig, ...] = ()
    queues: tuple[QueueConfig, ...] = ()
    line: int | None = None
    #: the resource flavors tried for this queue's requests, in order (None: the parent's; docs/flavors.md)
    flavors: tuple[str, ...] | None = None
    #: how the flavor search goes on (None: the parent's, else Kueue's defaults)
    flavor_fungibility: FungibilityConfig | None = None
    #: how much above its guaranteed the queue's subtree may use, per resource (None: unlimited)
    borrowing_limit: Resource | None = None
    #: how much of the subtree's unused guaranteed others may use, per resource (None: all of it)
    lending_limit: Resource | None = None

    @property
    def is_leaf(self) -> bool:
        """A queue with no children that is not flagged ``parent: true``."""
        return not self.queues and not self.parent

    def walk(self) -> Iterator[QueueConfig]:
        """This queue and every descendant, depth first, in config order."""
        yield self
        for child in self.queues:
            yield from child.walk()

    def find(self, path: str) -> QueueConfig | None:
        """The queue at the full ``path`` (case-insensitive), or None."""
        parts = path.lower().split(".")
        if parts[0] != self.name:
            return None
        node: QueueConfig = self
        for part in parts[1:]:
            for child in node.queues:
                if child.name == part:
                    node = child
                    break
            else:
                return None
        return node


@dataclass(frozen=True, slots=True)
class FilterConfig:
    """A placement rule filter: ``type`` allow|deny over users and groups (names or one regexp)."""

    type: str = "allow"
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PlacementRuleConfig:
    """One placement rule (seed 004): ``provided``, ``tag``, ``user``, ``group``, ``fixed`` …"""

    name: str
    value: str = ""
    create: bool = False
    parent: PlacementRuleConfig | None = None
    filter: FilterConfig | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class PreemptionConfig:
    """Partition preemption switches (M-5, PR-Y1, PR-Q1).

    ``enabled``: asks may preempt to restore their queue's guaranteed resources — on by default, as
    YuniKorn (decision P1). ``quota_preemption_enabled``: queues over a lowered max are cut back after
    their ``quota.preemption.delay`` — off by default.
    """

    enabled: bool = True
    quota_preemption_enabled: bool = False


@dataclass(frozen=True, slots=True)
class NodeSortPolicyConfig:
    """Partition node sorting policy (kept for YuniKorn compatibility; validated, not used)."""

    type: str = ""
    resource_weights: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class TaintConfig:
    """A taint of a resource flavor (Kubernetes' ``{key, value, effect}``; KQ-O1)."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class TolerationConfig:
    """A toleration (Kubernetes' ``{key, operator, value, effect}``): ``operator`` ``Equal`` or
    ``Exists``; an empty ``key`` with ``Exists`` tolerates every taint, an empty ``effect`` every
    effect."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class FlavorConfig:
    """A resource flavor (Kueue's ResourceFlavor, KQ-O1): a kind of node, told by its labels.

    ``resources`` are the resource names counted per flavor (Kueue's ``coveredResources``): a request
    for them is charged under the flavored names ``NAME@FLAVOR`` as well (docs/flavors.md). Nodes
    whose labels include every ``node_labels`` entry count for the flavor.
    """

    name: str
    resources: tuple[str, ...]
    node_labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    node_taints: tuple[TaintConfig, ...] = ()
    tolerations: tuple[TolerationConfig, ...] = ()
    line: int | None = None


#: Kueue's preemption strategies of fair sharing (KQ-S, ``fairSharing.preemptionStrategies``)
FAIR_SHARING_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


@dataclass(frozen=True, slots=True)
class FairSharingConfig:
    """Kueue's fair sharing for a partition (KQ-S): queues are ordered and preempt by their weighted
    share of what they borrow; ``preemption_strategies`` as Kueue's configuration lists them."""

    enabled: bool = True
    preemption_strategies: tuple[str, ...] = FAIR_SHARING_STRATEGIES
    line: int | None = None


@dataclass(frozen=True, slots=True)
class PartitionConfig:
    """One partition: its queue tree (``root``), placement rules and partition-wide settings.

    ``limits`` are the partition ``limits`` as written; after validation they equal the root
    queue's limits (V-11: partition limits are copied onto root). ``extensions`` carries the
    quotaplane-specific partition keys (elastic quotas, quota trees) as parsed plain data.
    """

    name: str
    root: QueueConfig
    placement_rules: tuple[PlacementRuleConfig, ...] = ()
    limits: tuple[LimitConfig, ...] = ()
    preemption: PreemptionConfig = field(default_factory=PreemptionConfig)
    node_sort_policy: NodeSortPolicyConfig = field(default_factory=NodeSortPolicyConfig)
    extensions: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    line: int | None = None
    #: YuniKorn's ``usergroupresolver.type`` (e.g. "os", "ldap"): accepted and kept; quotaplane takes the
    #: user and groups from each request and resolves nothing itself
    user_group_resolver: str = ""
    #: the resource flavors (``resourceflavors``; docs/flavors.md), in order
    resource_flavors: tuple[FlavorConfig, ...] = ()
    #: Kueue's fair sharing (``fairsharing``), None: off
    fair_sharing: FairSharingConfig | None = None

    def queue(self, path: str) -> QueueConfig | None:
        """The configured queue at ``path`` (case-insensitive), or None."""
        return self.root.find(path)


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """A whole validated configuration: every partition, plus the source text it came from."""

    partitions: tuple[PartitionConfig, ...]
    source: str = ""
    checksum: str = ""

    def partition(self, name: str) -> PartitionConfig:
        """The partition called ``name``; :class:`~quotaplane.errors.NotFoundError` if absent."""
        key = name.lower()
        for p in self.partitions:
            if p.name == key:
                return p
        raise NotFoundError(f"partition {name!r} not found")

    def partition_names(self) -> list[str]:
        """Partition names in config order."""
        return [p.name for p in self.partitions]
