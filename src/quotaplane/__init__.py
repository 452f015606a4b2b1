"""quotaplane — the quota engine for shared clusters.

The public surface is re-exported here (see ``contract.md``)::

    import quotaplane as qp
    qp.Resource, qp.UserGroup, qp.load_config, qp.ConfigError, qp.Scheduler, qp.Decision, qp.Violation
    qp.QuotaplaneError, qp.InputError, qp.NotFoundError, …   # the errors (quotaplane.errors)
    qp.ugm, qp.elastic, qp.forest          # the self-contained engines

Sub-packages and heavier names are loaded lazily so that ``import quotaplane`` stays cheap and an
engine can be used without importing the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from quotaplane.errors import (
    ConfigError,
    ConflictError,
    InputError,
    JournalError,
    NotFoundError,
    NotLeaderError,
    QuotaplaneError,
    RejectedError,
)
from quotaplane.resources import Resource

__version__ = "0.1.0"

# name -> (module, attribute or None for the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "UserGroup": ("quotaplane.config.identity", "UserGroup"),
    "load_config": ("quotaplane.config", "load_config"),
    "SchedulerConfig": ("quotaplane.config", "SchedulerConfig"),
    "PartitionConfig": ("quotaplane.config", "PartitionConfig"),
    "QueueConfig": ("quotaplane.config", "QueueConfig"),
    "Scheduler": ("quotaplane.cluster", "Scheduler"),
    "Partition": ("quotaplane.partition", "Partition"),
    "Decision": ("quotaplane.policies.protocol", "Decision"),
    "Violation": ("quotaplane.policies.protocol", "Violation"),
    "config": ("quotaplane.config", None),
    "ugm": ("quotaplane.ugm", None),
    "queues": ("quotaplane.queues", None),
    "elastic": ("quotaplane.elastic", None),
    "forest": ("quotaplane.forest", None),
    "placement": ("quotaplane.placement", None),
    "k8s": ("quotaplane.k8s", None),
    "journal": ("quotaplane.journal", None),
}

__all__ = [
    "ConfigError",
    "ConflictError",
    "Decision",
    "InputError",
    "JournalError",
    "NotFoundError",
    "NotLeaderError",
    "Partition",
    "PartitionConfig",
    "QueueConfig",
    "QuotaplaneError",
    "RejectedError",
    "Resource",
    "Scheduler",
    "SchedulerConfig",
    "UserGroup",
    "Violation",
    "config",
    "elastic",
    "forest",
    "journal",
    "k8s",
    "load_config",
    "placement",
    "queues",
    "ugm",
]


def _provide_policies() -> None:
    """Give the configuration layer the loaders of the policy keys that ship with quotaplane
    (``elasticquotas``, ``quotatrees``, ``budgets``): it validates and builds them without naming the
    policies layer above it, and each policy's module is imported only when its key is used."""
    from quotaplane.config import extensions

    def elastic() -> Any:
        from quotaplane.policies.elastic import PLUGIN
        return PLUGIN

    def forest() -> Any:
        from quotaplane.policies.forest import PLUGIN
        return PLUGIN

    def budgets() -> Any:
        from quotaplane.policies.budgets import PLUGIN
        return PLUGIN

    extensions.provide("elasticquotas", elastic)
    extensions.provide("quotatrees", forest)
    extensions.provide("budgets", budgets)


def _provide_window_check() -> None:
    """Give the configuration layer the time windows' check — each window opens to a valid
    configuration (docs/windows.md) — which it cannot import (the windows sit above it)."""
    from quotaplane.config import files

    def opened(text: str) -> list[str]:
        from quotaplane.windows import opened_problems
        return opened_problems(text)

    files.provide_check(opened)


_provide_policies()
_provide_window_check()


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'quotaplane' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from quotaplane import config, elastic, forest, journal, k8s, placement, queues, ugm
    from quotaplane.cluster import Scheduler
    from quotaplane.config import PartitionConfig, QueueConfig, SchedulerConfig, load_config
    from quotaplane.config.identity import UserGroup
    from quotaplane.partition import Partition
    from quotaplane.policies.protocol import Decision, Violation
