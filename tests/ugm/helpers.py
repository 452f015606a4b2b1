"""Small builders for user group manager tests: configs without YAML, resources, users."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from quotaplane.config.identity import UserGroup
from quotaplane.config.model import LimitConfig, PartitionConfig, QueueConfig
from quotaplane.resources import Resource
from quotaplane.ugm import Manager

GIB = 2**30


def R(**amounts: int) -> Resource:
    """A resource in internal units; ``R(vcore=1000, memory=GIB)``."""
    return Resource(amounts)


def lim(*, users: Sequence[str] = (), groups: Sequence[str] = (), res: Mapping[str, int] | None = None,
        apps: int = 0, name: str = "") -> LimitConfig:
    """One limit entry (internal units)."""
    return LimitConfig(limit=name, users=tuple(users), groups=tuple(groups),
                       max_resources=Resource(res) if res is not None else None, max_applications=apps)


def partition(limits: Mapping[str, Sequence[LimitConfig]] | None = None,
              queues: Sequence[str] = ()) -> PartitionConfig:
    """A partition whose queue tree holds every path in ``limits`` and ``queues``.

    ``limits`` maps a full queue path to that queue's limits list.
    """
    limits = dict(limits or {})
    tree: dict[str, Any] = {}
    for path in [*limits, *queues]:
        node = tree
        for part in path.split(".")[1:]:
            node = node.setdefault(part, {})

    def make(name: str, path: str, children: dict[str, Any]) -> QueueConfig:
        kids = tuple(make(k, f"{path}.{k}", v) for k, v in children.items())
        return QueueConfig(name=name, path=path, parent=bool(kids), limits=tuple(limits.get(path, ())),
                           queues=kids)

    return PartitionConfig(name="default", root=make("root", "root", tree))


def manager(limits: Mapping[str, Sequence[LimitConfig]] | None = None, queues: Sequence[str] = ()) -> Manager:
    """A manager configured with :func:`partition`."""
    m = Manager()
    m.update_config(partition(limits, queues))
    return m


def ug(name: str, *groups: str) -> UserGroup:
    """``UserGroup(name, groups)``."""
    return UserGroup(name, groups)


def node(m: Manager, kind: str, name: str, path: str) -> dict[str, Any] | None:
    """The dumped state of one tracker node, or None."""
    state = m.dump_state()[kind + "s"].get(name)
    if state is None:
        return None
    result: dict[str, Any] | None = state["queues"].get(path)
    return result


def from_yaml(text: str, partition_name: str = "default") -> Manager:
    """A manager configured from YuniKorn queues YAML through the real loader (``qp.load_config``)."""
    from quotaplane.config import load_config

    m = Manager()
    m.update_config(load_config(text).partition(partition_name))
    return m
