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
from typing import Any

from quotaplane.config.identity import UserGroup
from quotaplane.config.model import PartitionConfig
from quotaplane.errors import InputError, ReleaseError
from quotaplane.resources import Resource
from quotaplane.ugm._walk import (
    LimitExceeded,
    add,
    can_run,
    check_app,
    check_user,
    decrease_known,
    dump_nodes,
    explain,
    fits,
    headroom,
    increase_known,
    items_of,
    relimit,
    sub,
)
from quotaplane.ugm.dao import group_dao, user_dao
from quotaplane.ugm.group_tracker import GroupTracker
from quotaplane.ugm.limits import LimitTable
from quotaplane.ugm.queue_tracker import QueueTracker
from quotaplane.ugm.user_tracker import UserTracker

__all__ = ["LimitExceeded", "Manager", "split_queue_path"]

_EMPTY_NODES: dict[str, QueueTracker] = {}
_MAX_CACHED_PATHS = 200_000



def split_queue_path(queue_path: str) -> tuple[str, ...]:
    """``"root.a.b"`` → ``("root", "root.a", "root.a.b")``, lower case (U10).

    Raises :class:`ValueError` for an empty path (U14), an empty segment, or a path that does not
    start at ``root``.
    """
    if not isinstance(queue_path, str) or not queue_path:
        raise InputError("queue path must be a non-empty string")
    parts = queue_path.lower().split(".")
    if parts[0] != "root" or any(not p for p in parts):
        raise InputError(f"invalid queue path {queue_path!r}: must be a full path starting at 'root'")
    levels: list[str] = []
    current = ""
    for part in parts:
        current = f"{current}.{part}" if current else part
        # Interned: every path sharing a prefix uses the same string object, so node lookups hit
        # on identity instead of comparing characters, and nodes share their key strings.
        levels.append(sys.intern(current))
    return tuple(levels)


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
                relimit(ut.nodes, user_paths, table.user_limit, ut.name)
            for gt in self._groups.values():
                relimit(gt.nodes, group_paths, table.group_limit, gt.name)

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
            check_app(application_id)
        name = user.user if type(user) is UserGroup else check_user(user)
        items = usage._values.items() if type(usage) is Resource else items_of(usage)
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
                        return increase_known(unodes, None, levels, items)
                    gt_known = self._groups.get(group)
                    if gt_known is not None:
                        return increase_known(unodes, gt_known.nodes, levels, items)
            if not fits(unodes, levels, items, application_id, table.user_limit, name, known):
                return False
            gt: GroupTracker | None = None
            if group is not None:
                gt = self._groups.get(group)
                gnodes = gt.nodes if gt is not None else _EMPTY_NODES
                if not fits(gnodes, levels, items, application_id, table.group_limit, group, known):
                    return False
            # Everything fits: apply to the user, then to the group (seed 001 update order).
            if ut is None:
                ut = UserTracker(name)
                self._users[name] = ut
            add(ut.nodes, levels, items, application_id, table.user_limit, name, known)
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
                add(gt.nodes, levels, items, application_id, table.group_limit, group, known)
                if not known:
                    gt.applications[application_id] = name
            return True

    def restore_tracked_resource(self, queue_path: str, application_id: str, usage: Resource,
                                 user: UserGroup) -> None:
        """Put back ``usage`` that :meth:`decrease_tracked_resource` (``remove_app`` false) took from a
        running application a moment ago, without checking limits (a preemption trial's undo)."""
        levels = self._levels.get(queue_path)
        if levels is None:
            levels = self._split(queue_path)
        name = user.user if type(user) is UserGroup else check_user(user)
        items = list(usage._values.items() if type(usage) is Resource else items_of(usage))
        with self._lock:
            table = self._table
            ut = self._users.get(name)
            link = None if ut is None else ut.apps.get(application_id)
            if ut is None or link is None:
                raise KeyError(f"application {application_id!r} of user {name!r} is not tracked")
            add(ut.nodes, levels, items, application_id, table.user_limit, name, True)
            group = link[0]
            gt = None if group is None else self._groups.get(group)
            if gt is not None and group is not None:
                add(gt.nodes, levels, items, application_id, table.group_limit, group, True)

    def decrease_tracked_resource(self, queue_path: str, application_id: str, usage: Resource,
                                  remove_app: bool, user: UserGroup) -> None:
        """Give back ``usage``; never refused for lack of quota (seed 000). ``remove_app`` ends the
        application (A-1).

        A user that is not tracked is a no-op (T-4). The application's group is read before the
        link is dropped. Empty nodes and trackers are removed (U9). A queue path other than the one
        the application runs on is refused with :class:`~quotaplane.errors.ReleaseError`, changing
        nothing (decision U16: it would subtract from queues its usage was never added to).
        """
        levels = self._levels.get(queue_path)
        if levels is None:
            levels = self._split(queue_path)
        if not application_id or not isinstance(application_id, str):
            check_app(application_id)
        name = user.user if type(user) is UserGroup else check_user(user)
        items = usage._values.items() if type(usage) is Resource else items_of(usage)
        with self._lock:
            ut = self._users.get(name)
            if ut is None:
                return
            link = ut.apps.get(application_id)       # T-4: read before the link is dropped
            if link is not None and link[1] != levels[-1]:
                raise ReleaseError(f"release of application {application_id!r} of user {name!r} names queue "
                                   f"{queue_path!r}, but the application runs on {link[1]!r}: nothing was "
                                   "released (decision U16)")
            if not remove_app and link is not None and link[1] == levels[-1]:
                # Steady state: the application keeps running on its own path, so every node
                # exists and none can become empty (its running set holds the app): subtract only.
                group = link[0]
                gt = None if group is None else self._groups.get(group)
                decrease_known(ut.nodes, None if gt is None else gt.nodes, levels, items)
                return
            sub(ut.nodes, levels, items, application_id, remove_app)
            if remove_app and link is not None:
                del ut.apps[application_id]
            if not ut.nodes:
                del self._users[name]
            group = None if link is None else link[0]
            if group is not None:
                gt = self._groups.get(group)
                if gt is not None:
                    sub(gt.nodes, levels, items, application_id, remove_app)
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
        check_app(application_id)
        name = check_user(user)
        with self._lock:
            table = self._table
            unodes, group, gnodes = self._context(levels, application_id, user)
            result = headroom(unodes, levels, table.user_limit, name, None)
            if group is not None:
                result = headroom(gnodes, levels, table.group_limit, group, result)
        return None if result is None else Resource.of(dict(sorted(result.items())))

    def can_run_app(self, queue_path: str, application_id: str, user: UserGroup) -> bool:
        """H-3/H-4: the application may run (or already runs) under every user and group count limit."""
        levels = self._split(queue_path)
        check_app(application_id)
        name = check_user(user)
        with self._lock:
            table = self._table
            unodes, group, gnodes = self._context(levels, application_id, user)
            if not can_run(unodes, levels, table.user_limit, name, application_id):
                return False
            return group is None or can_run(gnodes, levels, table.group_limit, group, application_id)

    def explain_increase(self, queue_path: str, application_id: str, usage: Resource,
                         user: UserGroup) -> list[LimitExceeded]:
        """Every user and group limit, at every level, that this increase would exceed.

        Changes nothing. Empty exactly when :meth:`increase_tracked_resource` would accept the
        same call now. Order: the user's limits leaf → root, then the group's; at one queue the
        resource limit before the count limit.
        """
        levels = self._split(queue_path)
        check_app(application_id)
        name = check_user(user)
        items = tuple(items_of(usage))
        with self._lock:
            table = self._table
            unodes, group, gnodes = self._context(levels, application_id, user)
            # Fast path (the admission path checks every request): the same test the increase runs.
            if fits(unodes, levels, items, application_id, table.user_limit, name, False) and (
                    group is None
                    or fits(gnodes, levels, items, application_id, table.group_limit, group, False)):
                return []
            out = explain(unodes, levels, items, application_id, table.user_limit, "user", name)
            if group is not None:
                out.extend(explain(gnodes, levels, items, application_id, table.group_limit,
                                    "group", group))
        return out

    # -- reading ----------------------------------------------------------------------------------
    def get_user_resources(self, user: UserGroup) -> Resource | None:
        """The user's total usage (root), or ``None`` when the user is not tracked."""
        name = check_user(user)
        with self._lock:
            ut = self._users.get(name)
            return None if ut is None else Resource.of(ut.usage())

    def get_group_resources(self, group: str) -> Resource | None:
        """The group's total usage (root), or ``None`` when the group is not tracked."""
        if not isinstance(group, str) or not group:
            raise InputError("group name must be a non-empty string")
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
            ut = self._users.get(check_user(user))
            if ut is None:
                return None
            return ut.group_for_app(application_id)

    def is_tracked_app(self, application_id: str, user: UserGroup) -> bool:
        """True while the application counts as running for ``user`` (from its first accepted
        increase until a decrease with ``remove_app``). An admission path that undoes an increase
        uses it: undoing the application's first increase is ``decrease(..., remove_app=True)``.
        """
        with self._lock:
            ut = self._users.get(check_user(user))
            return ut is not None and application_id in ut.apps

    def dump_state(self) -> dict[str, Any]:
        """Everything the manager holds, as deterministic sorted plain data (tests, journal checks)."""
        with self._lock:
            users: dict[str, Any] = {}
            for uname in sorted(self._users):
                ut = self._users[uname]
                users[uname] = {
                    "groups": {app: ut.apps[app][0] for app in sorted(ut.apps)},
                    "queues": dump_nodes(ut.nodes),
                }
            groups: dict[str, Any] = {}
            for gname in sorted(self._groups):
                gt = self._groups[gname]
                groups[gname] = {
                    "applications": {app: gt.applications[app] for app in sorted(gt.applications)},
                    "queues": dump_nodes(gt.nodes),
                }
            return {"limits": self._table.describe(), "users": users, "groups": groups}

    def reset(self) -> None:
        """Forget every tracked user and group (the limit configuration is kept)."""
        with self._lock:
            self._users.clear()
            self._groups.clear()


