"""Who is asking: the user and their groups (YuniKorn's ``security.UserGroup``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from quotaplane.errors import InputError

__all__ = ["NAME_PATTERN", "UserGroup", "check_name"]

#: Characters no name may hold (issue 14 #8): the ASCII and Latin-1 controls, DEL, and the invisible format
#: characters (soft hyphen, zero-width, bidi marks, embeddings, overrides and isolates, line and
#: paragraph separators, word joiners, BOM, interlinear annotation).
_UNPRINTABLE = ("\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
                "\ufeff\ufff9-\ufffb")
#: The same rule as a JSON Schema / ECMA regex (the REST schema's ``pattern`` for names).
NAME_PATTERN = f"^[^{_UNPRINTABLE}]+$"
_BAD = re.compile(f"[{_UNPRINTABLE}]")


def check_name(value: object, what: str) -> str:
    """``value`` when it is a non-empty string without control or invisible format characters;
    ``ValueError`` naming ``what`` otherwise.

    NUL, newlines, bidi overrides such as U+202E and zero-width characters are refused (issue 14 #8):
    a name holding them could never be queried or shown faithfully.
    """
    if not isinstance(value, str) or not value:
        raise InputError(f"{what} must be a non-empty string")
    bad = _BAD.search(value)
    if bad is not None:
        raise InputError(f"{what} {value!r} must not hold control or invisible characters "
                         f"(found U+{ord(bad.group()):04X})")
    return value


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
        check_name(user, "user name")
        if isinstance(groups, str):
            raise TypeError("groups must be a sequence of group names, not a string")
        group_tuple = tuple(groups)
        for g in group_tuple:
            if not isinstance(g, str) or not g:
                raise InputError(f"invalid group name {g!r} for user {user!r}")
            check_name(g, f"group name of user {user!r}")
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
