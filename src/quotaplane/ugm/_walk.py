"""Walking one tracker's queue path: the user group manager's hot path and its slow twin.

Module functions, not methods: cheaper than bound methods, no attribute lookups on ``self``
(quality.md). :func:`fits` / :func:`add` / :func:`sub` are the hot path of an increase and a
decrease; :func:`explain` is the slow twin of :func:`fits` that names every exceeded limit (pinned to
it by ``tests/ugm/test_explain.py``). ``increase_known`` checks and applies a user and a group tracker
in one atomic step (rule U1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from quotaplane.config.identity import UserGroup
from quotaplane.errors import InputError
from quotaplane.resources import Resource
from quotaplane.ugm.limits import LimitEntry
from quotaplane.ugm.queue_tracker import QueueTracker

__all__ = ["LimitExceeded", "Lookup", "add", "can_run", "check_app", "check_user", "decrease_known",
           "dump_nodes", "explain", "fits", "headroom", "increase_known", "items_of", "relimit", "sub"]

Lookup = Callable[[str, str], LimitEntry | None]


@dataclass(frozen=True, slots=True)
class LimitExceeded:
    """One user or group limit that an increase would exceed (see :meth:`Manager.explain_increase`).

    ``kind`` is ``"user"`` or ``"group"``; ``name`` the user, or the group (``"*"`` for the shared
    wildcard group); ``limit`` is ``"maxresources"`` or ``"maxapplications"``; ``queue_path`` the
    queue where the limit is set. ``limit_resources`` / ``limit_applications`` are the limit's
    values, ``usage`` the usage tracked there now, ``running_applications`` the applications
    running there now. ``shortfall`` is, per exceeded resource name, request minus headroom (always
    positive), or ``None`` for a count limit. ``wildcard`` is true when a user's limit comes from
    the ``*`` user entry. ``code`` is the stable violation code (``user.maxresources`` …).
    """

    kind: str
    name: str
    limit: str
    queue_path: str
    limit_resources: Resource | None
    limit_applications: int
    usage: Resource
    shortfall: Resource | None
    message: str
    wildcard: bool = False
    running_applications: int = 0

    @property
    def code(self) -> str:
        """The contract's violation code: ``user.maxresources``, ``group.maxapplications`` …"""
        return f"{self.kind}.{self.limit}"


def fits(nodes: dict[str, QueueTracker], levels: tuple[str, ...], items: Iterable[tuple[str, int]],
          app: str, lookup: Lookup, name: str, known: bool) -> bool:
    """True when ``items`` fits every limit of one tracker on the path (U1, H-1, H-3, R-6).

    ``known``: the application already runs at every node of this path (its link says so), so no
    count limit can refuse it and every node exists.
    """
    for level in levels:
        node = nodes.get(level)
        if node is None:
            # Not tracked here yet: usage 0 and no running app, so only a resource limit below the
            # request can refuse it (a count limit is at least 1).
            entry = lookup(level, name)
            if entry is not None:
                mx = entry.max_resources
                if mx is not None:
                    for k, v in items:
                        if v > 0:
                            lim = mx.get(k)
                            if lim is not None and v > lim:
                                return False
            continue
        mx = node.max_resources
        if mx is not None:
            usage = node.usage
            for k, v in items:
                if v > 0:
                    lim = mx.get(k)
                    if lim is not None and usage.get(k, 0) + v > lim:
                        return False
        if not known:
            max_apps = node.max_applications
            if max_apps and app not in node.running and len(node.running) >= max_apps:
                return False
    return True


def add(nodes: dict[str, QueueTracker], levels: tuple[str, ...], items: Iterable[tuple[str, int]],
         app: str, lookup: Lookup, name: str, known: bool) -> None:
    """T-2: add ``items`` at every level root → leaf, creating nodes with their limit (seed 000)."""
    if known:
        # Steady state: every node exists and already counts the application.
        for level in levels:
            usage = nodes[level].usage
            for k, v in items:
                nv = usage.get(k, 0) + v
                if nv:
                    usage[k] = nv
                elif k in usage:
                    del usage[k]      # zero amounts are pruned
        return
    parent: QueueTracker | None = None
    for level in levels:
        node = nodes.get(level)
        if node is None:
            node = QueueTracker(lookup(level, name))
            nodes[level] = node
            if parent is not None:
                parent.children += 1
        usage = node.usage
        for k, v in items:
            nv = usage.get(k, 0) + v
            if nv:
                usage[k] = nv
            elif k in usage:
                del usage[k]
        node.add_running(app)
        parent = node


def increase_known(unodes: dict[str, QueueTracker], gnodes: dict[str, QueueTracker] | None,
                    levels: tuple[str, ...], items: Iterable[tuple[str, int]]) -> bool:
    """Check and apply an increase of a running application on its own path (user and group).

    Same rules as :func:`fits` + :func:`add` with ``known=True``, fused: one call, and the user
    and the group are both checked before either is changed (U1).
    """
    for level in levels:
        node = unodes[level]
        mx = node.max_resources
        if mx is not None:
            usage = node.usage
            for k, v in items:
                if v > 0:
                    lim = mx.get(k)
                    if lim is not None and usage.get(k, 0) + v > lim:
                        return False
        if gnodes is not None:
            node = gnodes[level]
            mx = node.max_resources
            if mx is not None:
                usage = node.usage
                for k, v in items:
                    if v > 0:
                        lim = mx.get(k)
                        if lim is not None and usage.get(k, 0) + v > lim:
                            return False
    for level in levels:
        usage = unodes[level].usage
        for k, v in items:
            nv = usage.get(k, 0) + v
            if nv:
                usage[k] = nv
            elif k in usage:
                del usage[k]          # zero amounts are pruned
        if gnodes is not None:
            usage = gnodes[level].usage
            for k, v in items:
                nv = usage.get(k, 0) + v
                if nv:
                    usage[k] = nv
                elif k in usage:
                    del usage[k]
    return True


def decrease_known(unodes: dict[str, QueueTracker], gnodes: dict[str, QueueTracker] | None,
                    levels: tuple[str, ...], items: Iterable[tuple[str, int]]) -> None:
    """Subtract from the user's and the group's nodes of a path the application keeps running on."""
    for level in levels:
        usage = unodes[level].usage
        for k, v in items:
            nv = usage.get(k, 0) - v
            if nv:
                usage[k] = nv
            elif k in usage:
                del usage[k]          # zero amounts are pruned
        if gnodes is not None:
            usage = gnodes[level].usage
            for k, v in items:
                nv = usage.get(k, 0) - v
                if nv:
                    usage[k] = nv
                elif k in usage:
                    del usage[k]


def sub(nodes: dict[str, QueueTracker], levels: tuple[str, ...], items: Iterable[tuple[str, int]],
         app: str, remove_app: bool) -> None:
    """T-4/T-6: subtract at every level, then remove empty nodes leaf → root (U9). A path that ends
    below the last existing node subtracts only above that node: the node whose child is missing
    returns early (T-6), as do the levels below it."""
    depth = len(levels)
    for i, level in enumerate(levels):
        if level not in nodes:
            depth = max(0, i - 1)     # T-6: the level above the missing one changes nothing either
            break
    for level in levels[:depth]:
        usage = nodes[level].usage
        for k, v in items:
            nv = usage.get(k, 0) - v
            if nv:
                usage[k] = nv
            elif k in usage:
                del usage[k]
        if remove_app:
            nodes[level].remove_running(app)
    i = len(levels) - 1
    while i >= 0:
        node = nodes.get(levels[i])
        if node is not None:
            if node.usage or node.running or node.children:
                break                 # an ancestor of a kept node has a child: nothing above goes
            del nodes[levels[i]]
            if i > 0:
                parent = nodes.get(levels[i - 1])
                if parent is not None:
                    parent.children -= 1
        i -= 1


def headroom(nodes: dict[str, QueueTracker], levels: tuple[str, ...], lookup: Lookup, name: str,
              into: dict[str, int] | None) -> dict[str, int] | None:
    """H-1: component-wise min over the levels with a resource limit of ``max - usage``."""
    for level in levels:
        node = nodes.get(level)
        if node is None:
            entry = lookup(level, name)
            mx = entry.max_resources if entry is not None else None
            usage: dict[str, int] = {}
        else:
            mx = node.max_resources
            usage = node.usage
        if mx is None:
            continue
        if into is None:
            into = {}
        for k, lim in mx.items():
            h = lim - usage.get(k, 0)
            cur = into.get(k)
            if cur is None or h < cur:
                into[k] = h
    return into


def can_run(nodes: dict[str, QueueTracker], levels: tuple[str, ...], lookup: Lookup, name: str,
             app: str) -> bool:
    """H-3: every level's count limit admits ``app`` (already running there counts as admitted)."""
    for level in levels:
        node = nodes.get(level)
        if node is None:
            continue                  # no app runs there yet and a count limit is at least 1
        max_apps = node.max_applications
        if max_apps and app not in node.running and len(node.running) >= max_apps:
            return False
    return True


def items_of(usage: Mapping[str, int]) -> Iterable[tuple[str, int]]:
    if type(usage) is Resource:
        return usage._values.items()
    if not isinstance(usage, Mapping):
        raise TypeError(f"usage must be a Resource, got {type(usage).__name__}")
    return Resource(usage)._values.items()


def check_app(application_id: str) -> None:
    if not isinstance(application_id, str) or not application_id:
        raise InputError("application id must be a non-empty string")


def check_user(user: UserGroup) -> str:
    if not isinstance(user, UserGroup):
        raise TypeError(f"user must be a UserGroup, got {type(user).__name__}")
    return user.user


def relimit(nodes: dict[str, QueueTracker], paths: frozenset[str], lookup: Lookup, name: str) -> None:
    """Re-derive the limit of the nodes at ``paths`` (seed 000 setters; wildcard updates, C-5/C-6)."""
    if len(nodes) <= len(paths):
        for path, node in nodes.items():
            if path in paths:
                node.set_limit(lookup(path, name))
    else:
        for path in paths:
            found = nodes.get(path)
            if found is not None:
                found.set_limit(lookup(path, name))


def dump_nodes(nodes: dict[str, QueueTracker]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(nodes):
        node = nodes[path]
        out[path] = {
            "usage": {k: node.usage[k] for k in sorted(node.usage)},
            "running": sorted(node.running),
            "maxResources": (None if node.max_resources is None
                             else {k: node.max_resources[k] for k in sorted(node.max_resources)}),
            "maxApplications": node.max_applications,
            "children": node.children,
        }
    return out


def explain(nodes: dict[str, QueueTracker], levels: tuple[str, ...], items: tuple[tuple[str, int], ...],
             app: str, lookup: Lookup, kind: str, name: str) -> list[LimitExceeded]:
    """The slow, detailed twin of :func:`fits`: every exceeded limit of one tracker, leaf → root."""
    out: list[LimitExceeded] = []
    request = {k: v for k, v in items}
    for level in reversed(levels):
        node = nodes.get(level)
        if node is None:
            entry = lookup(level, name)
            usage: dict[str, int] = {}
            running: tuple[str, ...] | set[str] = ()
        else:
            entry = node.limit
            usage = node.usage
            running = node.running
        if entry is None:
            continue
        who = f"{kind} {name!r}"
        source = " (the '*' user limit)" if entry.wildcard and kind == "user" else ""
        mx = entry.max_resources
        if mx is not None:
            short: dict[str, int] = {}
            for k, v in items:
                if v > 0:
                    lim = mx.get(k)
                    if lim is not None and usage.get(k, 0) + v > lim:
                        short[k] = v - (lim - usage.get(k, 0))
            if short:
                limit_res = Resource.of(dict(mx))
                short_res = Resource.of(dict(sorted(short.items())))
                used = Resource.of({k: usage[k] for k in sorted(usage)})
                req = Resource.of(dict(sorted(request.items())))
                out.append(LimitExceeded(
                    kind=kind, name=name, limit="maxresources", queue_path=level,
                    limit_resources=limit_res, limit_applications=entry.max_applications,
                    usage=used, shortfall=short_res, wildcard=entry.wildcard,
                    running_applications=len(running),
                    message=(f"{who} would exceed its maxresources limit {limit_res}{source} at queue "
                             f"{level}: usage {used} plus request {req} is over by {short_res}."),
                ))
        max_apps = entry.max_applications
        if max_apps and app not in running and len(running) >= max_apps:
            used = Resource.of({k: usage[k] for k in sorted(usage)})
            out.append(LimitExceeded(
                kind=kind, name=name, limit="maxapplications", queue_path=level,
                limit_resources=Resource.of(dict(mx)) if mx is not None else None,
                limit_applications=max_apps, usage=used, shortfall=None, wildcard=entry.wildcard,
                running_applications=len(running),
                message=(f"{who} already runs {len(running)} of at most {max_apps} applications"
                         f"{source} at queue {level}; application {app!r} cannot start."),
            ))
    return out
