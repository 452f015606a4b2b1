"""Editing and validating the partition config extensions ``elasticquotas`` and ``quotatrees``.

Elastic quotas and quota trees are part of a partition's configuration (policies registry), so the
REST writes on them are configuration edits: the service edits the running YAML text (round-trip, so
comments and order survive), validates the result completely — the queue config *and* the
extensions, which the config loader passes through unchecked — and applies it with
``Scheduler.update_config``. That journals it (decision S1), makes it all-or-nothing, and replays
identically after a restart.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from ruamel.yaml import YAML

from quotaplane.config.bodies import load_yaml_documents
from quotaplane.config.kueue import is_kueue, kueue_to_yaml
from quotaplane.errors import ConfigError, NotFoundError

__all__ = ["edit_extension", "policy_of", "validate_extensions", "yaml_documents"]


def _rt() -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096
    return y


def yaml_documents(text: str) -> list[Any]:
    """Every YAML document of ``text`` as plain data, bounded (a ConfigError when it does not parse)."""
    return load_yaml_documents(text, "the body")


def edit_extension(config_text: str, partition: str, key: str,
                   edit: Callable[[Any], Any]) -> str:
    """The config text with ``partitions[name=partition][key]`` replaced by ``edit(old)``.

    ``edit`` receives the current value as plain data (None when absent) and returns the new one
    (None removes the key).
    """
    if is_kueue(config_text):       # Kueue's objects: edit the queue configuration they map to
        config_text = kueue_to_yaml(config_text)
    y = _rt()
    data = y.load(config_text)
    parts = data.get("partitions") if hasattr(data, "get") else None
    if not parts:
        raise ConfigError("the running configuration has no partitions")
    for pm in parts:
        if str(pm.get("name", "")).lower() == partition.lower():
            old = pm.get(key)
            plain = YAML(typ="safe").load(_dump(y, old)) if old is not None else None
            new = edit(plain)
            if new is None:
                pm.pop(key, None)
            else:
                pm[key] = new
            return _dump(y, data)
    raise NotFoundError("Partition not found")


def _dump(y: YAML, value: Any) -> str:
    buf = io.StringIO()
    y.dump(value, buf)
    return buf.getvalue()


def validate_extensions(text: str) -> None:
    """Load ``text`` and check every partition's extensions; ConfigError / ValueError on a problem.

    Builds each extension's policy on its own (no side effects) the way the partition will, so an
    extension that would fail after the config event is journalled is refused before.
    """
    from quotaplane.config import load_config
    from quotaplane.policies.registry import check_extensions

    problems = check_extensions(load_config(text))       # every plug-in's policy, built on its own
    if problems:
        raise ConfigError(problems[0])


def policy_of(partition: Any, name: str) -> Any:
    """The admission policy called ``name`` ("elastic", "forest") of ``partition``, or None."""
    for policy in partition.policies():
        if getattr(policy, "name", None) == name:
            return policy
    return None
