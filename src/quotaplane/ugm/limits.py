"""The limit configuration of the user group manager: a hierarchy of its own (seed 000).

Seed 000 "Configuration updates and storage": the limits are kept *inside* the user group manager,
separate from the scheduling queues and from the tracked users and groups, so that a change can be
prepared without touching either and then swapped in with one assignment. A :class:`LimitTable` is
immutable once built; :meth:`LimitTable.from_partition` turns a validated
:class:`~quotaplane.config.PartitionConfig` into one.

Lookups used by the trackers:

- :meth:`LimitTable.user_limit` — the named user entry at a queue, else the ``*`` user entry at that
  queue (W-1, W-2 / decision U2: a named user replaces the wildcard at the same queue).
- :meth:`LimitTable.group_limit` — the named group entry at a queue; the ``*`` group tracker gets the
  ``*`` group entry (G-5). Wildcard limits never reach a named group's tracker (W-4).
- :meth:`LimitTable.resolve_group` — rule G-3 / decision U4.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from quotaplane.config.model import LimitConfig, PartitionConfig, QueueConfig

__all__ = ["WILDCARD", "LimitEntry", "LimitTable"]

#: The wildcard user / group name of the limit configuration (seed 000 "Wildcard interpretation").
WILDCARD = "*"


class LimitEntry:
    """The limit of one user or group at one queue: resources and/or a running-application count.

    ``max_resources`` is a plain dict in internal units, or ``None`` when the entry has no resource
    limit (H-1: an all-zero limit counts as none). It is shared by every tracker node that carries
    this entry and must never be mutated. ``max_applications`` 0 means no count limit (U11).
    ``wildcard`` tells that the entry came from a ``*`` line; ``description`` is the ``limit:`` text.
    """

    __slots__ = ("description", "max_applications", "max_resources", "wildcard")

    max_resources: dict[str, int] | None
    max_applications: int
    wildcard: bool
    description: str

    def __init__(self, max_resources: Mapping[str, int] | None, max_applications: int,
                 wildcard: bool = False, description: str = "") -> None:
        res: dict[str, int] | None = None
        if max_resources:
            res = {k: int(v) for k, v in sorted(max_resources.items())}
            # H-1: a limit whose values are all 0 is "no resource limit" (validation rejects it, V-7).
            if all(v == 0 for v in res.values()):
                res = None
        self.max_resources = res
        self.max_applications = int(max_applications)
        self.wildcard = wildcard
        self.description = description

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LimitEntry):
            return NotImplemented
        return (self.max_resources == other.max_resources
                and self.max_applications == other.max_applications
                and self.wildcard == other.wildcard)

    def __hash__(self) -> int:
        res = tuple(sorted(self.max_resources.items())) if self.max_resources else ()
        return hash((res, self.max_applications, self.wildcard))

    def __repr__(self) -> str:
        return (f"LimitEntry(max_resources={self.max_resources!r}, "
                f"max_applications={self.max_applications}, wildcard={self.wildcard})")

    @property
    def is_empty(self) -> bool:
        """True when the entry limits nothing (no resources, no count)."""
        return self.max_resources is None and self.max_applications == 0


class LimitTable:
    """An immutable snapshot of every user and group limit of one partition, keyed by queue path.

    Queue paths are lower case (decision U10). Build it with :meth:`from_partition` or
    :meth:`from_queue`; an empty table (``LimitTable()``) limits nothing.
    """

    __slots__ = ("_configured_groups", "_group_named", "_group_wild", "_user_named", "_user_wild",
                 "paths")

    _user_named: dict[str, dict[str, LimitEntry]]
    _user_wild: dict[str, LimitEntry]
    _group_named: dict[str, dict[str, LimitEntry]]
    _group_wild: dict[str, LimitEntry]
    _configured_groups: dict[str, tuple[str, ...]]
    paths: frozenset[str]

    def __init__(self) -> None:
        self._user_named = {}
        self._user_wild = {}
        self._group_named = {}
        self._group_wild = {}
        self._configured_groups = {}
        self.paths = frozenset()

    # -- building -------------------------------------------------------------------------------
    @classmethod
    def from_partition(cls, partition: PartitionConfig) -> LimitTable:
        """The table of a validated partition config.

        Partition ``limits`` are the root queue's limits (V-11); when only the partition carries
        them (a model built by hand), they are used for the root.
        """
        root = partition.root
        root_limits = root.limits if root.limits else partition.limits
        return cls.from_queue(root, root_limits=root_limits)

    @classmethod
    def from_queue(cls, root: QueueConfig, *, root_limits: Iterable[LimitConfig] | None = None) -> LimitTable:
        """The table of a queue tree (``root`` is the top queue, normally ``root``)."""
        table = cls()
        stack: list[tuple[QueueConfig, str]] = [(root, (root.path or root.name).lower())]
        while stack:
            queue, path = stack.pop()
            limits = tuple(root_limits) if (queue is root and root_limits is not None) else queue.limits
            table._add_queue_limits(path, limits)
            for child in reversed(queue.queues):
                child_path = (child.path or f"{path}.{child.name}").lower()
                stack.append((child, child_path))
        table.paths = frozenset(set(table._user_named) | set(table._user_wild) | set(table._group_named)
                                | set(table._group_wild))
        return table

    def _add_queue_limits(self, path: str, limits: Iterable[LimitConfig]) -> None:
        configured: list[str] = []
        for lc in limits:
            for user in lc.users:
                if not user:       # C-1: empty entries are skipped
                    continue
                if user == WILDCARD:
                    self._user_wild.setdefault(
                        path, LimitEntry(lc.max_resources, lc.max_applications, True, lc.limit))
                else:
                    self._user_named.setdefault(path, {}).setdefault(
                        user, LimitEntry(lc.max_resources, lc.max_applications, False, lc.limit))
            for group in lc.groups:
                if not group:
                    continue
                if group == WILDCARD:
                    self._group_wild.setdefault(
                        path, LimitEntry(lc.max_resources, lc.max_applications, True, lc.limit))
                else:
                    named = self._group_named.setdefault(path, {})
                    if group not in named:
                        named[group] = LimitEntry(lc.max_resources, lc.max_applications, False, lc.limit)
                        configured.append(group)        # G-3a: config order decides
        if configured:
            self._configured_groups[path] = tuple(configured)

    # -- lookups ----------------------------------------------------------------------------------
    def user_limit(self, path: str, user: str) -> LimitEntry | None:
        """The limit of ``user`` at ``path``: the named entry, else the ``*`` entry (W-1, W-2)."""
        named = self._user_named.get(path)
        if named is not None:
            entry = named.get(user)
            if entry is not None:
                return entry
        return self._user_wild.get(path)

    def group_limit(self, path: str, group: str) -> LimitEntry | None:
        """The limit of the tracker of ``group`` at ``path``.

        For the shared ``*`` tracker this is the ``*`` group entry (G-5); a named group only gets
        its own named entry — the group wildcard is never copied onto named groups (W-4).
        """
        if group == WILDCARD:
            return self._group_wild.get(path)
        named = self._group_named.get(path)
        if named is None:
            return None
        return named.get(group)

    def resolve_group(self, levels: tuple[str, ...], groups: tuple[str, ...]) -> str | None:
        """Rule G-3 (decision U4): the group an application's usage is tracked against.

        ``levels`` is the queue path split into its prefixes, root first. No groups → no group,
        even when a ``*`` group limit exists. Otherwise from the leaf up: the first configured
        named group (config order) the user belongs to, else that level's ``*`` group.
        """
        if not groups:
            return None
        configured = self._configured_groups
        wild = self._group_wild
        for path in reversed(levels):
            names = configured.get(path)
            if names is not None:
                for name in names:
                    if name in groups:
                        return name
            if path in wild:
                return WILDCARD
        return None

    def user_paths(self) -> frozenset[str]:
        """The queue paths carrying a user limit (named or wildcard)."""
        return frozenset(set(self._user_named) | set(self._user_wild))

    def group_paths(self) -> frozenset[str]:
        """The queue paths carrying a group limit (named or wildcard)."""
        return frozenset(set(self._group_named) | set(self._group_wild))

    def describe(self) -> dict[str, object]:
        """A deterministic plain-data view of the table (for ``dump_state`` and debugging)."""

        def entry(e: LimitEntry) -> dict[str, object]:
            out: dict[str, object] = {}
            if e.max_resources is not None:
                out["maxResources"] = dict(e.max_resources)
            if e.max_applications:
                out["maxApplications"] = e.max_applications
            return out

        result: dict[str, object] = {}
        for path in sorted(self.paths):
            item: dict[str, object] = {}
            users = {n: entry(e) for n, e in sorted(self._user_named.get(path, {}).items())}
            if path in self._user_wild:
                users[WILDCARD] = entry(self._user_wild[path])
            groups = {n: entry(self._group_named[path][n]) for n in self._configured_groups.get(path, ())}
            if path in self._group_wild:
                groups[WILDCARD] = entry(self._group_wild[path])
            if users:
                item["users"] = users
            if groups:
                item["groups"] = groups
            result[path] = item
        return result
