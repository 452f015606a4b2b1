"""Who is asking: the user and their groups (YuniKorn's ``security.UserGroup``)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["UserGroup"]


class UserGroup:
    """A user name and the (ordered) groups the user belongs to.

    The group order carries no meaning for quota tracking (seed 001 "Group limitations"): the
    configuration order decides which group an application is tracked against.
    """

    __slots__ = ("_hash", "groups", "user")

    user: str
    groups: tuple[str, ...]
    _hash: int

    def __init__(self, user: str, groups: Sequence[str] = ()) -> None:
        if not isinstance(user, str) or not user:
            raise ValueError("user name must be a non-empty string")
        if isinstance(groups, str):
            raise TypeError("groups must be a sequence of group names, not a string")
        group_tuple = tuple(groups)
        for g in group_tuple:
            if not isinstance(g, str) or not g:
                raise ValueError(f"invalid group name {g!r} for user {user!r}")
        object.__setattr__(self, "user", user)
        object.__setattr__(self, "groups", group_tuple)
        object.__setattr__(self, "_hash", hash((user, group_tuple)))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("UserGroup is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UserGroup):
            return NotImplemented
        return self.user == other.user and self.groups == other.groups

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"UserGroup({self.user!r}, {list(self.groups)!r})"
