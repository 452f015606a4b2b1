"""Configuration: the YuniKorn queue configuration format, its loader and its validation.

``load_config(text)`` parses YuniKorn queues YAML (seeds 000 and 004) strictly with ``ruamel.yaml``,
runs every validation rule (V-1 … V-21, decisions U10–U13) and returns a frozen
:class:`SchedulerConfig`, or raises :class:`~quotaplane.errors.ConfigError` carrying the line.
"""

from __future__ import annotations

from quotaplane.config.identity import UserGroup
from quotaplane.config.model import (
    ChildTemplateConfig,
    FilterConfig,
    LimitConfig,
    NodeSortPolicyConfig,
    PartitionConfig,
    PlacementRuleConfig,
    PreemptionConfig,
    QueueConfig,
    SchedulerConfig,
)
from quotaplane.errors import ConfigError

__all__ = [
    "ChildTemplateConfig",
    "ConfigError",
    "FilterConfig",
    "LimitConfig",
    "NodeSortPolicyConfig",
    "PartitionConfig",
    "PlacementRuleConfig",
    "PreemptionConfig",
    "QueueConfig",
    "SchedulerConfig",
    "UserGroup",
    "load_config",
]


def load_config(text: str) -> SchedulerConfig:
    """Parse and fully validate YuniKorn queue YAML; raise ConfigError (with ``.line``) if invalid."""
    from quotaplane.config.loader import load_config as _load

    return _load(text)
