"""Which optional quota policies a partition runs, keyed by partition config extension.

A partition always runs the queue policy and the user/group policy (decision Q2). The elastic and
forest engines are switched on per partition by a quotaplane extension key in the partition config
(``PartitionConfig.extensions``): ``elasticquotas`` and ``quotatrees``. This module maps such a key to
a *builder* that makes the policy object, and to an *order* that places it in the admission path
(queue 10 → user/group 20 → elastic 30 → forest 40).

The two known keys are resolved lazily by module name, so this module imports no engine: the module
named must define ``build_policy(partition_config, context) -> QuotaPolicy``. Other keys can be added
with :func:`register` (tests, plug-ins).

A built policy is a :class:`~quotaplane.policy.QuotaPolicy`; the hooks it does not override
(``update_config``, ``set_cluster_resource``, ``take_preempted``, ``dump_state`` …) are no-ops.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

from quotaplane.config.model import PartitionConfig
from quotaplane.errors import InputError
from quotaplane.policy import QuotaPolicy

__all__ = ["PolicyBuilder", "PolicyContext", "build_policy", "register", "registered_keys", "unregister"]


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a builder may use besides the partition config: the partition name and its clock."""

    partition: str
    clock: Callable[[], float]


PolicyBuilder = Callable[[PartitionConfig, PolicyContext], QuotaPolicy]

#: extension key -> (module defining ``build_policy``, order in the admission path)
_DEFAULTS: dict[str, tuple[str, int]] = {
    "elasticquotas": ("quotaplane.policies.elastic", 30),
    "quotatrees": ("quotaplane.policies.forest", 40),
}

_lock = threading.Lock()
_registered: dict[str, tuple[PolicyBuilder, int]] = {}


def register(key: str, builder: PolicyBuilder, *, order: int) -> None:
    """Register (or replace) the builder for extension ``key``; ``order`` sorts it in the path."""
    if not key:
        raise InputError("extension key must be a non-empty string")
    with _lock:
        _registered[key] = (builder, order)


def unregister(key: str) -> None:
    """Forget a builder registered with :func:`register` (the lazy defaults stay)."""
    with _lock:
        _registered.pop(key, None)


def registered_keys() -> list[tuple[str, int]]:
    """Every known extension key with its order, sorted by order then key."""
    with _lock:
        keys = {k: o for k, (_, o) in _registered.items()}
    for k, (_, o) in _DEFAULTS.items():
        keys.setdefault(k, o)
    return sorted(keys.items(), key=lambda kv: (kv[1], kv[0]))


def _builder(key: str) -> tuple[PolicyBuilder, int] | None:
    with _lock:
        found = _registered.get(key)
    if found is not None:
        return found
    default = _DEFAULTS.get(key)
    if default is None:
        return None
    module_name, order = default
    module = importlib.import_module(module_name)
    builder: PolicyBuilder = module.build_policy
    return builder, order


def build_policy(key: str, partition_config: PartitionConfig,
                 context: PolicyContext) -> tuple[QuotaPolicy, int]:
    """Build the policy for extension ``key``; ``KeyError`` if no builder is known for it."""
    found = _builder(key)
    if found is None:
        raise KeyError(f"no quota policy is registered for partition extension {key!r}")
    builder, order = found
    policy = builder(partition_config, context)
    if not isinstance(policy, QuotaPolicy):
        raise TypeError(f"the builder for partition extension {key!r} returned {type(policy).__name__}, "
                        "not a quotaplane.policy.QuotaPolicy")
    return policy, order
