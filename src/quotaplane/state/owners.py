"""The applications of a partition by user and by group (issue 39), for the standing of one
(:mod:`quotaplane.state.standing`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.application import Application

__all__ = ["Owners"]


class Owners:
    """The partition's applications by user and by group (issue 39): the standing of a user or a
    group reads its own applications instead of looking at every application in the partition."""

    __slots__ = ("_groups", "_users")

    def __init__(self) -> None:
        self._users: dict[str, dict[str, None]] = {}
        self._groups: dict[str, dict[str, None]] = {}

    def enter(self, app: Application) -> None:
        """``app`` was added to the partition."""
        aid = app.application_id
        self._users.setdefault(app.user.user, {})[aid] = None
        for group in app.user.groups:
            self._groups.setdefault(group, {})[aid] = None

    def leave(self, app: Application) -> None:
        """``app`` left the partition."""
        aid = app.application_id
        for index, name in ((self._users, app.user.user), *((self._groups, g) for g in app.user.groups)):
            apps = index.get(name)
            if apps is not None:
                apps.pop(aid, None)
                if not apps:
                    del index[name]

    def of(self, kind: str, name: str) -> set[str]:
        """The applications of user (``kind`` ``"user"``) or group ``name``."""
        return set((self._users if kind == "user" else self._groups).get(name, ()))
