"""The elastic-quota admission policy: an :class:`ElasticQuotaManager` behind the QuotaPolicy protocol.

Third in the admission path (decision Q2: queue → user/group → elastic → forest). An application maps to
a quota group through its tags (contract / issue 5): the tag ``quota.scheduling.koordinator.sh/name`` if
present, else the tag ``namespace`` matched against the quotas (a quota named like the namespace, then the
``namespaces`` annotations), else the default group — the pod rules of reference §1.1.

``check`` asks the manager whether ``used + request <= runtime`` with the request counted as pending (the
allocation is not registered anywhere before admission, reference §2.9 "the pending pod's own request is
already part of Request(q)"), and for a non-preemptible request also
``non-preemptible used + request <= min``.
Violations: ``elastic.runtime`` (path = the quota, resource = the shortfall) and ``elastic.min``. ``apply``
adds an assigned pod with id = the allocation key (without repeating the check); ``undo`` and ``release``
remove it. ``revoke(now)`` gives the allocation keys the over-use monitor wants released (decision E5).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, ClassVar

from quotaplane.config.model import PartitionConfig
from quotaplane.elastic import ElasticQuotaManager, QuotaValidationError
from quotaplane.elastic.manager import PodWithdrawal
from quotaplane.elastic.model import POD_LABEL_NAME, QuotaSpec, parse_elastic_quotas, spec_from_object
from quotaplane.errors import InputError
from quotaplane.policies.protocol import AdmissionRequest, Eviction, QuotaPolicy, Violation
from quotaplane.policies.registry import Plugin
from quotaplane.resources import Resource

__all__ = ["PLUGIN", "ElasticPolicy", "build_policy", "validate_extension"]

NAMESPACE_TAG = "namespace"


class ElasticPolicy(QuotaPolicy):
    """Adapter from the admission protocol to one partition's :class:`ElasticQuotaManager`."""

    __slots__ = ("first", "manager", "preemption", "spared")

    key: ClassVar[str] = "elasticquotas"
    reclaims: ClassVar[bool] = True
    checks_replacement: ClassVar[bool] = True

    def engine(self) -> ElasticQuotaManager:
        """The elastic quota manager this policy adapts (the elastic quota routes serve its API)."""
        return self.manager

    def __init__(self, manager: ElasticQuotaManager) -> None:
        self.name = "elastic"
        self.manager = manager
        #: E6 inner-quota preemption on (``elasticquotas: {preemption: false}`` turns it off)
        self.preemption = True
        #: allocations never taken as victims again (the partition's live set, :meth:`never_victims`)
        self.spared: AbstractSet[str] = frozenset()
        #: the partition's best-effort predicate at a time (:meth:`victims_first`)
        self.first: Callable[[float], Callable[[str], bool] | None] = _no_best_effort

    def never_victims(self, keys: AbstractSet[str]) -> None:
        """Held preemptions given up (issue 31): the reclaim and inner-quota preemption choose others."""
        self.spared = keys

    def victims_first(self, best_effort: Callable[[float], Callable[[str], bool] | None]) -> None:
        """Issue 34: the reclaim and inner-quota preemption take best-effort work first."""
        self.first = best_effort

    def quota_of(self, request: AdmissionRequest) -> str:
        """The quota group the request's application maps to (by its tags)."""
        tags = request.tags or {}
        return self.manager.quota_for_pod({POD_LABEL_NAME: tags[POD_LABEL_NAME]} if tags.get(POD_LABEL_NAME)
                                          else None, tags.get(NAMESPACE_TAG))

    def check(self, request: AdmissionRequest) -> list[Violation]:
        """Every elastic violation of ``request`` (runtime, and min when non-preemptible). Changes nothing."""
        quota = self.quota_of(request)
        try:
            # a waiting ask is in its quota's request already (PR-K2): the runtime counts it once
            waiting = self.manager.is_pending(request.allocation_key)
            extra = None
            if waiting:
                # charged under a resource flavor it did not wait with: that demand is not counted yet
                asked = self.manager.pod_request(request.allocation_key)
                extra = {k: v - asked.get(k, 0) for k, v in request.resource.items() if v > asked.get(k, 0)}
            found = self.manager.violations(quota, request.resource, preemptible=request.preemptible,
                                            include_request=not waiting, extra=extra)
        except QuotaValidationError as exc:
            # Reference §3.4: pods cannot be linked to a parent quota.
            return [Violation(policy="elastic", code="elastic.runtime", path=quota, message=exc.message,
                              resource=None)]
        return [Violation(policy="elastic", code=code, path=path, message=message,
                          resource=Resource.of(dict(short)))
                for code, path, message, short in found]

    def check_replacement(self, placeholder: AdmissionRequest, real: AdmissionRequest) -> list[Violation]:
        """Check ``real`` as if ``placeholder`` were released, then put the placeholder back exactly.

        Not release + re-apply: a re-applied placeholder would be mapped to a quota by the config in
        force now, which may differ from the quota it was admitted in.
        """
        if not self.manager.has_pod(placeholder.allocation_key):
            return self.check(real)
        withdrawn = self.manager.withdraw_pod(placeholder.allocation_key)
        try:
            return self.check(real)
        finally:
            self.manager.restore_pod(withdrawn)

    def apply(self, request: AdmissionRequest) -> list[Violation]:
        """Count the allocation as an assigned pod (id = allocation key) of its quota.

        The runtime check is :meth:`check`'s, which the partition runs first under its lock; apply does not
        repeat it, so that journal replay and the partition's restore paths (a placeholder put back) can
        never be refused by a runtime that moved meanwhile. It refuses, changing nothing, only what can
        never be counted: a parent quota (reference §3.4), or a quota fed by ``set_request``/``set_used``.
        """
        quota = self.quota_of(request)
        key = request.allocation_key
        try:
            if self.manager.is_pending(key):                               # the waiting ask is allocated
                self.manager.assign_pod(key, start_time=request.time, request=request.resource)
            else:
                self.manager.add_pod(quota, key, request.resource, priority=request.priority,
                                     preemptible=request.preemptible, assigned=True, start_time=request.time)
        except ValueError as exc:       # QuotaValidationError included
            message = exc.message if isinstance(exc, QuotaValidationError) else str(exc)
            return [Violation(policy="elastic", code="elastic.runtime", path=quota, message=message,
                              resource=None)]
        return []

    def undo(self, request: AdmissionRequest) -> None:
        """Reverse a successful :meth:`apply` exactly (an allocated ask waits again, as a pending pod)."""
        key = request.allocation_key
        if self.manager.has_pod(key):
            if self.manager.pod_asked(key):
                self.manager.unassign_pod(key)
            else:
                self.manager.remove_pod(key)

    def victims_for(self, request: AdmissionRequest, reasons: list[Violation]) -> Eviction | None:
        """E6 inner-quota preemption (PR-K6): a request refused only by its own quota's runtime may
        preempt strictly lower-priority, preemptible allocations of that quota, when the kept ones
        leave room (``used − preempted + request ≤ runtime``); off with ``preemption: false``."""
        quota = self.quota_of(request)
        if not self.preemption or any(v.code != "elastic.runtime" or v.path != quota for v in reasons):
            return None
        try:
            victims = self.manager.preemption_victims(quota, request.resource, request.priority,
                                                      skip=self.spared, first=self.first(request.time))
        except (KeyError, ValueError):
            return None
        if not victims:
            return None
        return Eviction(Violation(policy="elastic", code="elastic.preempted", path=quota,
                                  message=f"preempted in quota {quota} for a request of priority "
                                          f"{request.priority}"), tuple(victims))

    def withdraw(self, request: AdmissionRequest) -> object:
        """Take the pod out so that :meth:`restore` puts it back in its place (a preemption trial)."""
        if not self.manager.has_pod(request.allocation_key):
            return None
        return self.manager.withdraw_pod(request.allocation_key)

    def restore(self, token: object) -> None:
        """Undo :meth:`withdraw` exactly."""
        if token is not None:
            assert isinstance(token, PodWithdrawal)
            self.manager.restore_pod(token)

    def ask_added(self, request: AdmissionRequest) -> None:
        """A waiting ask is a pending pod of its quota (PR-K1): the quota's request grows, so runtimes
        move toward waiting demand (PR-K3); used does not."""
        try:
            self.manager.add_pod(self.quota_of(request), request.allocation_key, request.resource,
                                 priority=request.priority, preemptible=request.preemptible, assigned=False)
        except ValueError:
            return       # a parent quota or one fed by set_request: admission will say why it waits

    def ask_removed(self, request: AdmissionRequest) -> None:
        """The waiting ask was withdrawn: its pending pod goes (PR-K1 ``OnPodDelete``)."""
        if self.manager.is_pending(request.allocation_key):
            self.manager.remove_pod(request.allocation_key)

    def release(self, request: AdmissionRequest, *, last_allocation: bool) -> None:
        """Give back an allocation admitted earlier."""
        if self.manager.has_pod(request.allocation_key):
            self.manager.remove_pod(request.allocation_key)

    def set_cluster_resource(self, total: Resource) -> None:
        """The sum of node capacities changed: it is the elastic total (E4)."""
        self.manager.set_total(total)

    def revoke(self, now: float) -> list[Eviction]:
        """What to take back because its quota is over its runtime for longer than revokeDelay (E5)."""
        delay = self.manager.revoke_delay
        return [Eviction(Violation(policy="elastic", code="elastic.revoked", path=quota,
                                  message=f"quota {quota} used more than its runtime for longer than "
                                          f"revokeDelay ({delay:g}s)"), tuple(keys))
                for quota, keys in self.manager.revoke_groups(now, skip=self.spared, first=self.first(now))]

    def memo(self) -> dict[str, Any]:
        """State a snapshot rebuild cannot derive from allocations: the over-use monitor's clock."""
        return {"monitor": self.manager.monitor_state()}

    def restore_memo(self, memo: Mapping[str, Any]) -> None:
        """Put back what :meth:`memo` saved (snapshot restore)."""
        self.manager.restore_monitor(memo.get("monitor") or {})

    def dump_state(self) -> dict[str, Any]:
        """The manager's deterministic state."""
        return self.manager.dump_state()

    def validate_update(self, partition_config: PartitionConfig) -> None:
        """Refuse, before the scheduler journals a reload, what :meth:`update_config` would refuse.

        A quota dropped while it still holds allocations, or definitions that break a rule against the
        live quotas, raise :class:`QuotaValidationError` (a ``ValueError``); nothing changes. A reload
        that removes the whole ``elasticquotas`` key (the partition then drops this policy and its state)
        is refused with a ``ValueError`` while any quota — the default one included — holds allocations:
        added back later, those live allocations would not be counted again (as the forest refuses
        dropping ``quotatrees`` in use).
        """
        extensions = getattr(partition_config, "extensions", {})
        if "elasticquotas" not in extensions:
            in_use = self.manager.quotas_in_use()
            if in_use:
                raise InputError(f"elasticquotas cannot be removed: elastic quotas still hold allocations "
                                 f"({', '.join(in_use)}); release them first")
            return
        options = _options(extensions.get("elasticquotas"))
        self.manager.check_sync(options.specs)

    def update_config(self, partition_config: PartitionConfig) -> None:
        """A config reload kept the extension: the quota set and options become exactly the configured ones.

        All-or-nothing (:meth:`ElasticQuotaManager.sync_specs`): quotas no longer configured are deleted,
        which is refused — changing nothing — while they still hold allocations. The options
        ``scaleMin``, ``revokeDelay`` and ``checkParent`` (their defaults when absent) apply after the
        quotas, so a refused sync leaves them unchanged too.
        """
        options = _options(getattr(partition_config, "extensions", {}).get("elasticquotas"))
        self.manager.sync_specs(options.specs)
        self.manager.set_options(scale_min=options.scale_min, revoke_delay=options.revoke_delay,
                                 check_parent=options.check_parent)
        self.preemption = options.preemption


@dataclass(frozen=True, slots=True)
class ElasticOptions:
    """The ``elasticquotas`` partition extension, read (see :func:`_options`)."""

    specs: list[QuotaSpec] = field(default_factory=list)
    scale_min: bool = True
    revoke_delay: float = 120.0
    check_parent: bool = False
    preemption: bool = True


def _specs_of(quotas: Any) -> list[QuotaSpec]:
    if isinstance(quotas, str):
        return parse_elastic_quotas(quotas)
    if isinstance(quotas, Mapping):
        return [spec_from_object(quotas)]
    if isinstance(quotas, list):
        return [spec_from_object(q) for q in quotas]
    if quotas is not None:
        raise InputError(f"elasticquotas: quotas must be ElasticQuota YAML text or a list, got {quotas!r}")
    return []


def _delay(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise InputError(f"elasticquotas: revokeDelay must be a number of seconds >= 0, got {value!r}")
    return float(value)


def _options(raw: Any) -> ElasticOptions:
    """Read the ``elasticquotas`` partition extension.

    Accepted shapes: ElasticQuota YAML text; a list of ElasticQuota objects; or a mapping with
    ``quotas`` (either of the above) and the options ``scaleMin`` (bool), ``revokeDelay`` (seconds ≥ 0),
    ``checkParent`` (bool), ``preemption`` (bool: E6 inner-quota preemption, default true). Anything
    else is a ``ValueError`` naming the key.
    """
    if not (isinstance(raw, Mapping) and raw.get("kind") is None):
        return ElasticOptions(specs=_specs_of(raw))
    unknown = sorted(str(k) for k in raw if k not in _OPTION_KEYS)
    if unknown:
        raise InputError(f"elasticquotas: unknown keys {unknown}; expected {list(_OPTION_KEYS)}")
    defaults = ElasticOptions()
    scale_min = _flag("scaleMin", raw["scaleMin"]) if "scaleMin" in raw else defaults.scale_min
    check_parent = _flag("checkParent", raw["checkParent"]) if "checkParent" in raw else defaults.check_parent
    delay = _delay(raw["revokeDelay"]) if "revokeDelay" in raw else defaults.revoke_delay
    preemption = _flag("preemption", raw["preemption"]) if "preemption" in raw else defaults.preemption
    return ElasticOptions(specs=_specs_of(raw.get("quotas")), scale_min=scale_min, revoke_delay=delay,
                          check_parent=check_parent, preemption=preemption)


_OPTION_KEYS = ("quotas", "scaleMin", "revokeDelay", "checkParent", "preemption")


def _flag(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise InputError(f"elasticquotas: {key} must be true or false, got {value!r}")


def validate_extension(raw: Any) -> None:
    """Check an ``elasticquotas`` partition extension without side effects (for config validation).

    Raises :class:`QuotaValidationError` (or ``ValueError`` for a bad option) naming the quota and rule.
    """
    options = _options(raw)
    ElasticQuotaManager({}).apply_specs(options.specs)


def build_policy(partition_config: Any, context: Any) -> ElasticPolicy:
    """Builder used by ``quotaplane.policies.registry`` for the ``elasticquotas`` extension key."""
    options = _options(getattr(partition_config, "extensions", {}).get("elasticquotas"))
    manager = ElasticQuotaManager({}, scale_min=options.scale_min, revoke_delay=options.revoke_delay,
                                  check_parent=options.check_parent)
    if options.specs:
        manager.apply_specs(options.specs)
    policy = ElasticPolicy(manager)
    policy.preemption = options.preemption
    return policy


def _check(raw: Any) -> list[str]:
    try:
        validate_extension(raw)
    except ValueError as exc:
        return [str(exc)]
    return []


#: the ``elasticquotas`` key's plug-in (:mod:`quotaplane.policies.registry`)
PLUGIN = Plugin("elasticquotas", 30, build_policy, codes=("elastic.runtime", "elastic.min"), checker=_check)


def _no_best_effort(now: float) -> None:
    """No allocation runs on best-effort terms (until the partition says otherwise)."""
    return None
