"""Queue access control lists (YuniKorn ``security/acl.go``).

Syntax: ``"user1,user2 group1,group2"`` — a user list, one space, a group list. ``"*"`` allows everyone;
``""`` (or an ACL that is not set) allows nobody; ``" group1"`` (leading space) lists groups only.
An ACL never denies explicitly: it only grants.
"""

from __future__ import annotations

from quotaplane.config.identity import UserGroup

__all__ = ["ACL"]

_WILDCARD = "*"


class ACL:
    """A parsed access control list. ``text`` is the source string (``None`` when not configured)."""

    __slots__ = ("all_allowed", "groups", "text", "users")

    text: str | None
    all_allowed: bool
    users: frozenset[str]
    groups: frozenset[str]

    def __init__(self, text: str | None = None) -> None:
        self.text = text
        self.all_allowed, users, groups = _parse(text)
        self.users = frozenset(users)
        self.groups = frozenset(groups)

    def check_access(self, user: UserGroup) -> bool:
        """Wildcard, then the user list, then any of the user's groups (acls.md "Access check")."""
        if self.all_allowed:
            return True
        if user.user in self.users:
            return True
        return any(g in self.groups for g in user.groups)

    def __repr__(self) -> str:
        return f"ACL({self.text!r})"


def _parse(text: str | None) -> tuple[bool, list[str], list[str]]:
    """(everyone allowed, users, groups) of an ACL text (V-17: at most two fields)."""
    if not text:
        return False, [], []
    if text.strip() == _WILDCARD:
        return True, [], []
    # split on the FIRST space only, so a leading space means "no users, these groups" as in YuniKorn
    user_part, _, group_part = text.partition(" ")
    user_list = _names(user_part)
    group_list = _names(group_part.strip())
    # YuniKorn: a list that is just the wildcard allows everyone.
    everyone = user_list == [_WILDCARD] or group_list == [_WILDCARD]
    return (everyone, [u for u in user_list if u != _WILDCARD], [g for g in group_list if g != _WILDCARD])


def _names(field: str) -> list[str]:
    """The non-empty comma-separated names of one ACL field."""
    return [n.strip() for n in field.split(",") if n.strip()]
