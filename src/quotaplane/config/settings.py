"""The partition keys kept as plain data beside the policies' extensions and checked when the
configuration loads: ``history`` (docs/history.md) and ``windows`` (docs/windows.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quotaplane.config.history import SettingsError, parse_settings
from quotaplane.config.model import QueueConfig
from quotaplane.config.windows import check_windows

__all__ = ["PLAIN_SETTINGS", "setting_problems"]

#: the keys, in the order they are checked (windows after the budgets they may override)
PLAIN_SETTINGS = ("history", "windows")


def _paths(root: QueueConfig) -> set[str]:
    """Every configured queue's full path."""
    out = {root.path}
    for child in root.queues:
        out |= _paths(child)
    return out


def _limits(root: QueueConfig) -> dict[str, list[tuple[tuple[str, ...], tuple[str, ...]]]]:
    """Every configured queue's limits: per full path, each limit's users and groups."""
    out = {root.path: [(lim.users, lim.groups) for lim in root.limits]}
    for child in root.queues:
        out.update(_limits(child))
    return out


def setting_problems(key: str, value: Any, root: QueueConfig | None, plugged: Mapping[str, Any]) -> list[str]:
    """The problems of ``value`` under ``key`` (``root``: the partition's queues, None when they are
    wrong themselves; ``plugged``: its other extension values)."""
    if key == "history":
        try:
            parse_settings(value)
        except SettingsError as exc:
            return [str(exc)]
        return []
    if root is None:
        return []
    return check_windows(value, _paths(root), plugged.get("budgets"), elastic=plugged.get("elasticquotas"),
                         limits=_limits(root))
