"""The user group manager: usage tracking (seed 001) and limit enforcement (seed 000) per partition.

Semantics follow decisions U1–U15 (which deviate from YuniKorn's code where the seeds say otherwise):

- ``increase_tracked_resource`` enforces (U1): it checks every limit of the user **and** of the
  application's group at every level of the queue path, and applies the change only when all of
  them fit — otherwise it returns ``False`` and nothing changes anywhere. Decreases are never
  refused. ``headroom``, ``can_run_app`` and ``explain_increase`` answer ahead of time and change
  nothing (no tracker, node or group link is created).
- The group is chosen at the first increase of an application (U4, G-3) and never changes while
  the application runs (a "no group" choice included).
- Trackers are created by increases only, never by config (U8), and removed when empty (U9).
- Limits come from a :class:`~quotaplane.ugm.limits.LimitTable` (the separate limit hierarchy of
  seed 000), swapped in one step by :meth:`Manager.update_config`; each tracker node keeps its
  limit precomputed, and a reload re-derives the limit of every existing node at every queue whose
  limits may have changed (so wildcard updates reach every tracker), without touching usage (U6, U7).

Thread safety: one manager lock serialises every call. That makes every increase, decrease,
clean-up and reload atomic, so the seed 001 "Update consistency" race (a tracker unlinked by a
clean-up while another call holds it) cannot happen: a tracker is only looked up and removed under
the lock.

Hot path (quality.md): the queue path is split once and the level tuple cached; usage is added to
plain dicts (no :class:`~quotaplane.resources.Resource` objects are built); nodes are found by one
dict lookup per level; no logging.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from quotaplane.config.identity import UserGroup
from quotaplane.config.model import PartitionConfig
from quotaplane.resources import Resource
from quotaplane.ugm.dao import group_dao, user_dao
from quotaplane.ugm.group_tracker import GroupTracker
from quotaplane.ugm.limits import LimitEntry, LimitTable
from quotaplane.ugm.queue_tracker import QueueTracker
from quotaplane.ugm.user_tracker import UserTracker

__all__ = ["LimitExceeded", "Manager", "split_queue_path"]

_EMPTY_NODES: dict[str, QueueTracker] = {}
_MAX_CACHED_PATHS = 200_000

_Lookup = Callable[[str, str], LimitEntry | None]


def split_queue_path(queue_path: str) -> tuple[str, ...]:
    """``"root.a.b"`` → ``("root", "root.a", "root.a.b")``, lower case (U10).

    Raises :class:`ValueError` for an empty path (U14), an empty segment, or a path that does not
    start at ``root``.
    """
    if not isinstance(queue_path, str) or not queue_path:
        raise ValueError("queue path must be a non-empty string")
    parts = queue_path.lower().split(".")
    if parts[0] != "root" or any(not p for p in parts):
        raise ValueError(f"invalid queue path {queue_path!r}: must be a full path starting at 'root'")
    levels: list[str] = []
    current = ""
    for part in parts:
        current = f"{current}.{part}" if current else part
        # Interned: every path sharing a prefix uses the same string object, so node lookups hit
        # on identity instead of comparing characters, and nodes share their key strings.
        levels.append(sys.intern(current))
    return tuple(levels)


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


# --------------------------------------------------------------------------------------------------
# hot-path helpers (module functions: cheaper than bound methods, no attribute lookups on self)
# --------------------------------------------------------------------------------------------------
def _fits(nodes: dict[str, QueueTracker], levels: tuple[str, ...], items: Iterable[tuple[str, int]],
          app: str, lookup: _Lookup, name: str, known: bool) -> bool:
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


def _add(nodes: dict[str, QueueTracker], levels: tuple[str, ...], items: Iterable[tuple[str, int]],
         app: str, lookup: _Lookup, name: str, known: bool) -> None:
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


def _increase_known(unodes: dict[str, QueueTracker], gnodes: dict[str, QueueTracker] | None,
                    levels: tuple[str, ...], items: Iterable[tuple[str, int]]) -> bool:
    """Check and apply an increase of a running application on its own path (user and group).

    Same rules as :func:`_fits` + :func:`_add` with ``known=True``, fused: one call, and the user
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


def _decrease_known(unodes: dict[str, QueueTracker], gnodes: dict[str, QueueTracker] | None,
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


def _sub(nodes: dict[str, QueueTracker], levels: tuple[str, ...], items: Iterable[tuple[str, int]],
         app: str, remove_app: bool) -> None:
    """T-4/T-6: subtract at every existing level, then remove empty nodes leaf → root (U9)."""
    for level in levels:
        node = nodes.get(level)
        if node is None:
            break                     # T-6: a missing level (and everything below it) is skipped
        usage = node.usage
        for k, v in items:
            nv = usage.get(k, 0) - v
            if nv:
                usage[k] = nv
            elif k in usage:
                del usage[k]
        if remove_app:
            node.remove_running(app)
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


def _headroom(nodes: dict[str, QueueTracker], levels: tuple[str, ...], lookup: _Lookup, name: str,
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


def _can_run(nodes: dict[str, QueueTracker], levels: tuple[str, ...], lookup: _Lookup, name: str,
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


def _items_of(usage: Mapping[str, int]) -> Iterable[tuple[str, int]]:
    if type(usage) is Resource:
        return usage._values.items()
    if not isinstance(usage, Mapping):
        raise TypeError(f"usage must be a Resource, got {type(usage).__name__}")
    return Resource(usage)._values.items()


def _check_app(application_id: str) -> None:
    if not isinstance(application_id, str) or not application_id:
        raise ValueError("application id must be a non-empty string")


def _check_user(user: UserGroup) -> str:
    if not isinstance(user, UserGroup):
        raise TypeError(f"user must be a UserGroup, got {type(user).__name__}")
    return user.user


class Manager:
    """The user group manager of one partition (seed 001 "User Group Manager", decision U3).

    See the module docstring for the rules. Every public method is thread safe.
    """

    __slots__ = ("_groups", "_levels", "_links", "_lock", "_table", "_users")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: dict[str, UserTracker] = {}
        self._groups: dict[str, GroupTracker] = {}
        self._table = LimitTable()
        self._levels: dict[str, tuple[str, ...]] = {}
        # Interned (group, leaf) links: 100,000 applications share a handful of tuples (memory).
        self._links: dict[tuple[str | None, str], tuple[str | None, str]] = {}

    # -- paths ------------------------------------------------------------------------------------
    def _split(self, queue_path: str) -> tuple[str, ...]:
        levels = self._levels.get(queue_path)
        if levels is None:
            levels = split_queue_path(queue_path)
            if len(self._levels) >= _MAX_CACHED_PATHS:
                self._levels.clear()
            self._levels[queue_path] = levels
        return levels

    # -- configuration ----------------------------------------------------------------------------
    def update_config(self, partition_config: PartitionConfig) -> None:
        """Apply the limits of a validated partition config in one step (seed 000, C-7, U6–U8).

        The new :class:`LimitTable` is built outside the lock, then swapped in; every existing
        tracker node at a queue that had or has limits gets its limit re-derived (set, changed or
        cleared). Usage, running applications and group links are never changed; no tracker is
        created.
        """
        if not isinstance(partition_config, PartitionConfig):
            raise TypeError("update_config expects a PartitionConfig")
        self.set_limit_table(LimitTable.from_partition(partition_config))

    def set_limit_table(self, table: LimitTable) -> None:
        """Swap in a prepared :class:`LimitTable` (what :meth:`update_config` does after building it)."""
        with self._lock:
            old = self._table
            self._table = table
            user_paths = old.user_paths() | table.user_paths()
            group_paths = old.group_paths() | table.group_paths()
            for ut in self._users.values():
                _relimit(ut.nodes, user_paths, table.user_limit, ut.name)
            for gt in self._groups.values():
                _relimit(gt.nodes, group_paths, table.group_limit, gt.name)

    @property
    def limit_table(self) -> LimitTable:
        """The limit configuration in force (immutable)."""
        return self._table

    # -- tracking ---------------------------------------------------------------------------------
    def increase_tracked_resource(self, queue_path: str, application_id: str, usage: Resource,
                                  user: UserGroup) -> bool:
        """Track ``usage`` for the application's user and group over the whole queue path.

        Returns ``False`` and changes nothing when any user or group limit at any level would be
        exceeded (U1; :meth:`explain_increase` lists them). The first increase of an application
        links it to its group (U4) and makes it count as running at every level (A-1).
        """
        levels = self._levels.get(queue_path)
        if levels is None:
            levels = self._split(queue_path)
        if not application_id or not isinstance(application_id, str):
            _check_app(application_id)
        name = user.user if type(user) is UserGroup else _check_user(user)
        items = usage._values.items() if type(usage) is Resource else _items_of(usage)
        with self._lock:
            table = self._table
            ut = self._users.get(name)
            link = None if ut is None else ut.apps.get(application_id)
            if link is None:
                group = table.resolve_group(levels, user.groups)     # U4: first increase decides
                known = False
                unodes = _EMPTY_NODES if ut is None else ut.nodes
            else:
                group = link[0]
                known = link[1] == levels[-1]
                unodes = ut.nodes if ut is not None else _EMPTY_NODES
                if known:
                    # Steady state: the application runs on this path already, so every node of
                    # the user (and of its group) exists and no count limit can refuse it.
                    if group is None:
                        return _increase_known(unodes, None, levels, items)
                    gt_known = self._groups.get(group)
                    if gt_known is not None:
                        return _increase_known(unodes, gt_known.nodes, levels, items)
            if not _fits(unodes, levels, items, application_id, table.user_limit, name, known):
                return False
            gt: GroupTracker | None = None
            if group is not None:
                gt = self._groups.get(group)
                gnodes = gt.nodes if gt is not None else _EMPTY_NODES
                if not _fits(gnodes, levels, items, application_id, table.group_limit, group, known):
                    return False
            # Everything fits: apply to the user, then to the group (seed 001 update order).
            if ut is None:
                ut = UserTracker(name)
                self._users[name] = ut
            _add(ut.nodes, levels, items, application_id, table.user_limit, name, known)
            if link is None:
                key = (group, levels[-1])
                new_link = self._links.get(key)
                if new_link is None:
                    if len(self._links) >= _MAX_CACHED_PATHS:
                        self._links.clear()
                    new_link = self._links[key] = key
                ut.apps[application_id] = new_link
            if group is not None:
                if gt is None:
                    gt = GroupTracker(group)
                    self._groups[group] = gt
                    known = False
                _add(gt.nodes, levels, items, application_id, table.group_limit, group, known)
                if not known:
                    gt.applications[application_id] = name
            return True

    def decrease_tracked_resource(self, queue_path: str, application_id: str, usage: Resource,
                                  remove_app: bool, user: UserGroup) -> None:
        """Give back ``usage``; never refused (seed 000). ``remove_app`` ends the application (A-1).

        A user that is not tracked is a no-op (T-4). The application's group is read before the
        link is dropped. Empty nodes and trackers are removed (U9).
        """
        levels = self._levels.get(queue_path)
        if levels is None:
            levels = self._split(queue_path)
        if not application_id or not isinstance(application_id, str):
            _check_app(application_id)
        name = user.user if type(user) is UserGroup else _check_user(user)
        items = usage._values.items() if type(usage) is Resource else _items_of(usage)
        with self._lock:
            ut = self._users.get(name)
            if ut is None:
                return
            link = ut.apps.get(application_id)       # T-4: read before the link is dropped
            if not remove_app and link is not None and link[1] == levels[-1]:
                # Steady state: the application keeps running on its own path, so every node
                # exists and none can become empty (its running set holds the app): subtract only.
                group = link[0]
                gt = None if group is None else self._groups.get(group)
                _decrease_known(ut.nodes, None if gt is None else gt.nodes, levels, items)
                return
            _sub(ut.nodes, levels, items, application_id, remove_app)
            if remove_app and link is not None:
                del ut.apps[application_id]
            if not ut.nodes:
                del self._users[name]
            group = None if link is None else link[0]
            if group is not None:
                gt = self._groups.get(group)
                if gt is not None:
                    _sub(gt.nodes, levels, items, application_id, remove_app)
                    if remove_app:
                        gt.applications.pop(application_id, None)
                        if not gt.applications:      # U9: a group without applications goes
                            del self._groups[group]

    # -- ahead-of-time answers ----------------------------------------------------------------------
    def _context(self, levels: tuple[str, ...], application_id: str, user: UserGroup
                 ) -> tuple[dict[str, QueueTracker], str | None, dict[str, QueueTracker]]:
        """(user nodes, group, group nodes) as the next increase would see them; changes nothing."""
        table = self._table
        ut = self._users.get(user.user)
        if ut is None:
            unodes = _EMPTY_NODES
            link = None
        else:
            unodes = ut.nodes
            link = ut.apps.get(application_id)
        group = table.resolve_group(levels, user.groups) if link is None else link[0]
        gnodes = _EMPTY_NODES
        if group is not None:
            gt = self._groups.get(group)
            if gt is not None:
                gnodes = gt.nodes
        return unodes, group, gnodes

    def headroom(self, queue_path: str, application_id: str, user: UserGroup) -> Resource | None:
        """H-2: the component-wise min of the user's and the group's headroom; ``None`` = no limit.

        Amounts may be negative (a limit lowered below usage, H-6); a name missing is unlimited.
        Uses the group the first increase would choose (U4) and changes nothing.
        """
        levels = self._split(queue_path)
        _check_app(application_id)
        name = _check_user(user)
        with self._lock:
            table = self._table
            unodes, group, gnodes = self._context(levels, application_id, user)
            result = _headroom(unodes, levels, table.user_limit, name, None)
            if group is not None:
                result = _headroom(gnodes, levels, table.group_limit, group, result)
        return None if result is None else Resource.of(dict(sorted(result.items())))

    def can_run_app(self, queue_path: str, application_id: str, user: UserGroup) -> bool:
        """H-3/H-4: the application may run (or already runs) under every user and group count limit."""
        levels = self._split(queue_path)
        _check_app(application_id)
        name = _check_user(user)
        with self._lock:
            table = self._table
            unodes, group, gnodes = self._context(levels, application_id, user)
            if not _can_run(unodes, levels, table.user_limit, name, application_id):
                return False
            return group is None or _can_run(gnodes, levels, table.group_limit, group, application_id)

    def explain_increase(self, queue_path: str, application_id: str, usage: Resource,
                         user: UserGroup) -> list[LimitExceeded]:
        """Every user and group limit, at every level, that this increase would exceed.

        Changes nothing. Empty exactly when :meth:`increase_tracked_resource` would accept the
        same call now. Order: the user's limits leaf → root, then the group's; at one queue the
        resource limit before the count limit.
        """
        levels = self._split(queue_path)
        _check_app(application_id)
        name = _check_user(user)
        items = tuple(_items_of(usage))
        with self._lock:
            table = self._table
            unodes, group, gnodes = self._context(levels, application_id, user)
            # Fast path (the admission path checks every request): the same test the increase runs.
            if _fits(unodes, levels, items, application_id, table.user_limit, name, False) and (
                    group is None
                    or _fits(gnodes, levels, items, application_id, table.group_limit, group, False)):
                return []
            out = _explain(unodes, levels, items, application_id, table.user_limit, "user", name)
            if group is not None:
                out.extend(_explain(gnodes, levels, items, application_id, table.group_limit,
                                    "group", group))
        return out

    # -- reading ----------------------------------------------------------------------------------
    def get_user_resources(self, user: UserGroup) -> Resource | None:
        """The user's total usage (root), or ``None`` when the user is not tracked."""
        name = _check_user(user)
        with self._lock:
            ut = self._users.get(name)
            return None if ut is None else Resource.of(ut.usage())

    def get_group_resources(self, group: str) -> Resource | None:
        """The group's total usage (root), or ``None`` when the group is not tracked."""
        if not isinstance(group, str) or not group:
            raise ValueError("group name must be a non-empty string")
        with self._lock:
            gt = self._groups.get(group)
            return None if gt is None else Resource.of(gt.usage())

    def users_usage(self) -> list[dict[str, Any]]:
        """``GET …/usage/users``: every tracked user, by name (reference §2.1)."""
        with self._lock:
            return [user_dao(self._users[n]) for n in sorted(self._users)]

    def groups_usage(self) -> list[dict[str, Any]]:
        """``GET …/usage/groups``: every tracked group, by name (reference §2.1)."""
        with self._lock:
            return [group_dao(self._groups[n]) for n in sorted(self._groups)]

    def user_usage(self, name: str) -> dict[str, Any] | None:
        """``GET …/usage/user/{user}``, or ``None`` when the user is not tracked (REST: 404)."""
        with self._lock:
            ut = self._users.get(name)
            return None if ut is None else user_dao(ut)

    def group_usage(self, name: str) -> dict[str, Any] | None:
        """``GET …/usage/group/{group}``, or ``None`` when the group is not tracked (REST: 404)."""
        with self._lock:
            gt = self._groups.get(name)
            return None if gt is None else group_dao(gt)

    def tracked_users(self) -> list[str]:
        """The names of the tracked users, sorted."""
        with self._lock:
            return sorted(self._users)

    def tracked_groups(self) -> list[str]:
        """The names of the tracked groups, sorted."""
        with self._lock:
            return sorted(self._groups)

    def app_group(self, application_id: str, user: UserGroup) -> str | None:
        """The group the application is linked to (``None``: not linked, or linked to no group)."""
        with self._lock:
            ut = self._users.get(_check_user(user))
            if ut is None:
                return None
            return ut.group_for_app(application_id)

    def is_tracked_app(self, application_id: str, user: UserGroup) -> bool:
        """True while the application counts as running for ``user`` (from its first accepted
        increase until a decrease with ``remove_app``). An admission path that undoes an increase
        uses it: undoing the application's first increase is ``decrease(..., remove_app=True)``.
        """
        with self._lock:
            ut = self._users.get(_check_user(user))
            return ut is not None and application_id in ut.apps

    def dump_state(self) -> dict[str, Any]:
        """Everything the manager holds, as deterministic sorted plain data (tests, journal checks)."""
        with self._lock:
            users: dict[str, Any] = {}
            for uname in sorted(self._users):
                ut = self._users[uname]
                users[uname] = {
                    "groups": {app: ut.apps[app][0] for app in sorted(ut.apps)},
                    "queues": _dump_nodes(ut.nodes),
                }
            groups: dict[str, Any] = {}
            for gname in sorted(self._groups):
                gt = self._groups[gname]
                groups[gname] = {
                    "applications": {app: gt.applications[app] for app in sorted(gt.applications)},
                    "queues": _dump_nodes(gt.nodes),
                }
            return {"limits": self._table.describe(), "users": users, "groups": groups}

    def reset(self) -> None:
        """Forget every tracked user and group (the limit configuration is kept)."""
        with self._lock:
            self._users.clear()
            self._groups.clear()


# --------------------------------------------------------------------------------------------------
def _relimit(nodes: dict[str, QueueTracker], paths: frozenset[str], lookup: _Lookup, name: str) -> None:
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


def _dump_nodes(nodes: dict[str, QueueTracker]) -> dict[str, Any]:
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


def _explain(nodes: dict[str, QueueTracker], levels: tuple[str, ...], items: tuple[tuple[str, int], ...],
             app: str, lookup: _Lookup, kind: str, name: str) -> list[LimitExceeded]:
    """The slow, detailed twin of :func:`_fits`: every exceeded limit of one tracker, leaf → root."""
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
