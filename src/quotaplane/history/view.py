"""What the accounting engine reads of a partition's state (a read-only ``View``).

The engine decides nothing; it needs to know, when an event is applied, what only the partition
knows: each queue's ``guaranteed`` and ``max`` (config, or a dynamic queue's template and namespace
tags), each elastic quota's ``min``, ``max`` and parent (the runtime calculator's view, min scaling
included), each quota-tree node's ``quota`` and parent, the group the user group manager chose for
an application (seed 001 U4: the first allocation decides), and which elastic quota and which tree
nodes an allocation counts in. Everything is read, nothing is changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from quotaplane.config.history import HistorySettings, SettingsError, parse_settings
from quotaplane.config.identity import UserGroup
from quotaplane.history.engine import QUEUE, QUOTA, TREE, ScopeInfo, TreeTarget
from quotaplane.policies.protocol import AdmissionRequest
from quotaplane.resources import Resource

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.admission import PolicySet
    from quotaplane.application import Allocation
    from quotaplane.config.model import PartitionConfig
    from quotaplane.queues import QueueTree
    from quotaplane.scheduling.waiting import Waiting
    from quotaplane.ugm import Manager

__all__ = ["PartitionState", "StateView", "settings_of"]


@runtime_checkable
class _QuotaMapping(Protocol):
    """What the history reads of the elastic quota policy (quotaplane.policies.elastic), declared here
    so the history neither imports it (it is loaded only when a partition uses elastic quotas) nor
    reads it untyped."""

    @property
    def manager(self) -> Any: ...

    def quota_of(self, request: AdmissionRequest) -> str: ...


@runtime_checkable
class _TreeMapping(Protocol):
    """What the history reads of the quota-tree policy (quotaplane.policies.forest): where a request is
    placed in the trees, and the trees' engine."""

    def target_of(self, request: AdmissionRequest) -> tuple[str, str, dict[str, str]] | None: ...

    def engine(self) -> Any: ...


class PartitionState(Protocol):
    """What the usage accounting reads of a partition's state
    (:class:`quotaplane.state.handlers.PartitionState` is one). Declared here, where it is read, so
    that the history imports nothing of the state that feeds it (no import circle, issue 29)."""

    @property
    def name(self) -> str: ...
    @property
    def config(self) -> PartitionConfig: ...
    @property
    def config_seq(self) -> int: ...
    @property
    def total(self) -> Resource: ...
    @property
    def queues(self) -> QueueTree: ...
    @property
    def ugm(self) -> Manager: ...
    @property
    def policies(self) -> PolicySet: ...
    @property
    def allocs(self) -> Mapping[str, Allocation]: ...
    @property
    def waiting(self) -> Waiting: ...


def settings_of(extensions: Mapping[str, object]) -> HistorySettings:
    """The history settings of a partition config's extensions (validated when it loaded; defaults
    if somehow not)."""
    try:
        return parse_settings(extensions.get("history"))
    except SettingsError:
        return HistorySettings()


def _plain(r: Mapping[str, int] | None) -> dict[str, int] | None:
    return None if r is None else {k: int(v) for k, v in r.items()}


class StateView:
    """The engine's read-only view of one partition state."""

    __slots__ = ("_state",)

    def __init__(self, state: PartitionState) -> None:
        self._state = state

    def guarantees(self) -> dict[str, dict[str, ScopeInfo]]:
        """Every queue, elastic quota and quota-tree node: guarantee, parent, max."""
        st = self._state
        queues = {path: self.queue_info(path) for path in st.queues.paths()}
        return {QUEUE: queues, QUOTA: self._quotas(), TREE: self._tree_nodes()}

    def cluster_bound(self) -> dict[str, dict[str, ScopeInfo]]:
        """The root queue (its max is the cluster size, M-1) and the elastic quotas (min scaling):
        what a node event may change — read per node event, so not every queue of a large tree."""
        root = self._state.queues.root.path
        return {QUEUE: {root: self.queue_info(root)}, QUOTA: self._quotas()}

    def _quotas(self) -> dict[str, ScopeInfo]:
        manager = getattr(self._state.policies.extension("elasticquotas"), "manager", None)
        if manager is None:
            return {}
        out: dict[str, ScopeInfo] = {}
        for name in manager.quota_names():
            d = manager.describe(name)
            out[name] = (_plain(d.get("min")) or {}, d.get("parent") or None, _plain(d.get("max")))
        return out

    def _tree_nodes(self) -> dict[str, ScopeInfo]:
        qm = getattr(self._state.policies.extension("quotatrees"), "manager", None)
        if qm is None:
            return {}
        out: dict[str, ScopeInfo] = {}
        dump = qm.dump_state()
        for tree, tdump in sorted((dump.get("trees") or {}).items()):
            for node, n in sorted((tdump.get("nodes") or {}).items()):
                parent = n.get("parent")
                out[f"{tree}/{node}"] = (_plain(n.get("quota")) or {},
                                         f"{tree}/{parent}" if parent is not None else None, None)
        return out

    def timezone(self) -> str:
        """The partition's ``history.timezone`` (UTC when not set)."""
        return settings_of(self._state.config.extensions).timezone

    def half_life(self) -> int:
        """The decay half-life (ms) when ``history.fairshare`` is on, else 0."""
        fair = settings_of(self._state.config.extensions).fairshare
        return fair.half_life_ms if fair.enabled else 0

    def queue_info(self, path: str) -> ScopeInfo:
        """One queue's guarantee (None: not set), parent path and max."""
        q = self._state.queues.queue(path)
        if q is None:
            return None, path.rpartition(".")[0] or None, None
        parent = q.parent.path if q.parent is not None else None
        return _plain(q.guaranteed), parent, _plain(q.max)

    def group_of(self, app: str, user: str, groups: tuple[str, ...], queue: str) -> str | None:
        """The group linked to the application (U4), else the one its first allocation would link."""
        ugm = self._state.ugm
        ug = UserGroup(user, groups)
        linked = ugm.app_group(app, ug)
        if linked is not None:
            return linked
        if ugm.is_tracked_app(app, ug):
            return None             # linked to no group
        return ugm.limit_table.resolve_group(tuple(queue.split(".")), groups)

    def quota_of(self, key: str, tags: Mapping[str, str]) -> str | None:
        """The elastic quota of a pod (an allocation or a waiting ask), else the one its tags map to."""
        policy = self._state.policies.extension("elasticquotas")
        if not isinstance(policy, _QuotaMapping):
            return None
        manager = policy.manager
        if manager.has_pod(key):
            quota: str = manager.pod_quota(key)
            return quota
        try:
            return str(policy.quota_of(_request(key, "", "", "", (), tags, {})))
        except Exception:   # no quota to count in
            return None

    def tree_targets(self, key: str, app: str, queue: str, user: str, groups: tuple[str, ...],
                     tags: Mapping[str, str], resource: Mapping[str, int]) -> list[TreeTarget]:
        """The group node of each quota tree the allocation is tagged for, with the amounts in the
        tree's resource names (``cpu`` reads ``vcore`` as the forest policy does)."""
        policy = self._state.policies.extension("quotatrees")
        if not isinstance(policy, _TreeMapping):
            return []
        try:
            target = policy.target_of(_request(key, app, queue, user, groups, tags, resource))
        except Exception:   # tags the forest refuses: nothing counts in a tree
            return []
        if target is None:
            return []
        # the forest's engine through the declared policy protocol (issue 29: no face reads .manager)
        qm: Any = policy.engine()
        if qm is None:
            return []
        out: list[TreeTarget] = []
        for tree, group in sorted(target[2].items()):
            try:
                names = qm.tree_info(tree)["resource_names"]
            except Exception:   # a tree removed meanwhile
                continue
            amounts = {n: (resource[n] if n in resource else resource.get("vcore", 0) if n == "cpu" else 0)
                       for n in names}
            out.append((tree, group, amounts))
        return out


def _request(key: str, app: str, queue: str, user: str, groups: tuple[str, ...], tags: Mapping[str, str],
             resource: Mapping[str, int]) -> AdmissionRequest:
    return AdmissionRequest(app, key, queue, UserGroup(user or "nobody", groups), Resource.of(dict(resource)),
                            tags=dict(tags))
