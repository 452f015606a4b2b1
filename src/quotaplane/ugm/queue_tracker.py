"""One node of a user's or group's private queue hierarchy (seed 001 "Queue tracking").

A tracker (user or group) owns its nodes in a flat dict keyed by the full lower-case queue path
(``root``, ``root.a``, ``root.a.b``): one lookup per level instead of a walk down child maps, and
the hierarchy is still implied by the paths. A node holds the usage and running applications of
everything tracked at or below its queue, and the limit that applies to its owner at this queue
(seed 000 "Queue tracking": the queue tracker is where the limits are stored), copied from the
:class:`~quotaplane.ugm.limits.LimitTable` when the node is created and replaced on every reload.
"""

from __future__ import annotations

from quotaplane.ugm.limits import LimitEntry

__all__ = ["SMALL", "QueueTracker"]

#: Up to this many running applications a node keeps them in a tuple (48 bytes for one id, where an
#: empty set already takes 216); above it, a set (membership in O(1)).
SMALL = 8


class QueueTracker:
    """Usage, running applications and the applicable limit at one queue of one tracker.

    ``usage`` is a plain dict with zero amounts pruned (R-3); ``running`` the application ids that
    had an increase at this queue and have not been removed (A-1) — a tuple while there are few
    (memory: most nodes run one or two applications), a set beyond :data:`SMALL`. ``max_resources`` /
    ``max_applications`` are the precomputed limit (``None`` / 0 = none); ``limit`` is the entry
    they came from. ``children`` counts the child nodes that exist (clean-up, decision U9).
    """

    __slots__ = ("children", "limit", "max_applications", "max_resources", "running", "usage")

    usage: dict[str, int]
    running: tuple[str, ...] | set[str]
    limit: LimitEntry | None
    max_resources: dict[str, int] | None
    max_applications: int
    children: int

    def __init__(self, limit: LimitEntry | None = None) -> None:
        self.usage = {}
        self.running = ()
        self.children = 0
        self.limit = None
        self.max_resources = None
        self.max_applications = 0
        if limit is not None:
            self.set_limit(limit)

    def set_limit(self, limit: LimitEntry | None) -> bool:
        """Set, change or clear the limit transparently (seed 000 setter semantics).

        ``None`` clears it. Returns True when something changed (the comparison the seed asks for,
        so wildcard updates over many trackers stay cheap).
        """
        if limit is self.limit:
            return False
        if limit is not None and self.limit is not None and limit == self.limit:
            self.limit = limit
            return False
        self.limit = limit
        if limit is None:
            self.max_resources = None
            self.max_applications = 0
        else:
            self.max_resources = limit.max_resources
            self.max_applications = limit.max_applications
        return True

    def add_running(self, app: str) -> None:
        """Count ``app`` as running here (idempotent)."""
        running = self.running
        if app in running:
            return
        if isinstance(running, tuple):
            if len(running) < SMALL:
                self.running = (*running, app)
            else:
                self.running = {*running, app}
        else:
            running.add(app)

    def remove_running(self, app: str) -> None:
        """Stop counting ``app`` here (no-op when it is not running here)."""
        running = self.running
        if isinstance(running, tuple):
            if app in running:
                self.running = tuple(a for a in running if a != app)
        else:
            running.discard(app)
            if not running:
                self.running = ()

    def is_empty(self) -> bool:
        """No usage, no running application and no child node: the node can be removed (U9)."""
        return not self.usage and not self.running and not self.children

    def headroom(self) -> dict[str, int] | None:
        """H-1 at this level: ``max - usage`` for the limited names only, or None without a limit."""
        mx = self.max_resources
        if mx is None:
            return None
        usage = self.usage
        return {k: v - usage.get(k, 0) for k, v in mx.items()}
