"""Which optional quota policies a partition runs, keyed by partition config extension.

A partition always runs the queue policy and the user/group policy (decision Q2). Other policies are
switched on per partition by a key of its configuration (``PartitionConfig.extensions``), declared by
a plug-in (:class:`~quotaplane.config.extensions.PolicyPlugin`): ``elasticquotas`` and ``quotatrees``
ship with quotaplane (their modules are imported only when a configuration uses them); others register
with :func:`register_plugin` (or :func:`register` for a builder alone). The plug-in gives the key, the
*order* that places the policy in the admission path (queue 10 → user/group 20 → elastic 30 → forest
40), the violation codes of its policy, the check of the key's value — which the configuration loader
runs, so ``quotaplane validate`` and every reload report a bad value with its line — and the builder
of the policy. The policy itself (a :class:`~quotaplane.policies.QuotaPolicy`) shows its state over REST
and as metrics through the same protocol (``view``, ``metrics``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import quotaplane.config.extensions as extensions
from quotaplane.config.extensions import PolicyPlugin
from quotaplane.config.model import PartitionConfig, SchedulerConfig
from quotaplane.policies.protocol import QuotaPolicy

__all__ = ["Plugin", "PolicyBuilder", "PolicyContext", "PolicyPlugin", "build_policy", "check_extensions",
           "plugin", "register", "register_plugin", "registered_keys", "unregister"]


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a builder may use besides the partition config: the partition name and its clock."""

    partition: str
    clock: Callable[[], float]


PolicyBuilder = Callable[[PartitionConfig, PolicyContext], QuotaPolicy]


@dataclass(frozen=True, slots=True)
class Plugin:
    """A :class:`~quotaplane.config.extensions.PolicyPlugin` made of its parts."""

    key: str
    order: int
    builder: PolicyBuilder
    codes: tuple[str, ...] = ()
    checker: Callable[[Any], list[str]] | None = field(default=None)

    def check(self, value: Any) -> list[str]:
        """The problems of the key's value (``[]``: valid, or no check declared)."""
        return [] if self.checker is None else self.checker(value)

    def build(self, partition_config: Any, context: Any) -> QuotaPolicy:
        """The policy for one partition."""
        return self.builder(partition_config, context)


def register_plugin(plugin: PolicyPlugin) -> None:
    """Declare (or replace) the plug-in of ``plugin.key``: the loader accepts the key from now on."""
    extensions.declare(plugin)


def register(key: str, builder: PolicyBuilder, *, order: int, check: Callable[[Any], list[str]] | None = None,
             codes: tuple[str, ...] = ()) -> None:
    """Register (or replace) the builder for extension ``key``; ``order`` sorts it in the path;
    ``check`` (optional) is the check of the key's value the loader runs."""
    register_plugin(Plugin(key, order, builder, codes, check))


def unregister(key: str) -> None:
    """Forget a plug-in registered with :func:`register` (the built-in keys stay)."""
    extensions.forget(key)


def registered_keys() -> list[tuple[str, int]]:
    """Every known extension key with its order, sorted by order then key."""
    return sorted(extensions.declared().items(), key=lambda kv: (kv[1], kv[0]))


def plugin(key: str) -> PolicyPlugin | None:
    """The plug-in of extension ``key``, or None."""
    return extensions.plugin(key)


def build_policy(key: str, partition_config: PartitionConfig,
                 context: PolicyContext) -> tuple[QuotaPolicy, int]:
    """Build the policy for extension ``key``; ``KeyError`` if no plug-in declares it."""
    found = extensions.plugin(key)
    if found is None:
        raise KeyError(f"no quota policy is registered for partition extension {key!r}")
    policy = found.build(partition_config, context)
    if not isinstance(policy, QuotaPolicy):
        raise TypeError(f"the builder for partition extension {key!r} returned {type(policy).__name__}, "
                        "not a quotaplane.policies.QuotaPolicy")
    return policy, found.order


def check_extensions(config: SchedulerConfig) -> list[str]:
    """Every problem of the extension values of ``config`` found by building each policy on its own
    (no side effects), the way a partition will: an extension that would fail after its configuration
    is journalled is refused before. ``[]``: all build."""
    problems: list[str] = []
    policies = dict(registered_keys())
    for pc in config.partitions:
        for key in sorted(pc.extensions):
            if key not in policies:
                continue        # plain settings beside the policies (``history``), checked by the loader
            try:
                build_policy(key, pc, PolicyContext(pc.name, lambda: 0.0))
            except Exception as exc:  # any failure to build it means the extension is invalid
                problems.append(f"partition {pc.name!r}: {key}: {exc}")
    return problems
