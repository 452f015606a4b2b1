"""Application placement rules (seed 004 "Namespace to queue mapping", reference §1.14 P-1 … P-8).

A :class:`PlacementManager` runs the configured rules in order; the first rule that yields a queue the
user may submit to wins. Rules: ``provided`` (the queue the application asked for), ``tag`` (the value of
an application tag, e.g. ``namespace``), ``user``, ``group`` (the user's primary group),
``secondarygroup``, ``fixed``; each may carry a ``parent`` rule, a ``create`` flag and a user/group
``filter``. When no rule matches, ``root.default`` is used if it exists; otherwise the application is
rejected. The manager reads queues through the small :class:`QueueView` protocol and never creates
them: the caller creates dynamic queues for a returned path that does not exist yet.

Imports only :mod:`quotaplane.resources`, :mod:`quotaplane.config` and :mod:`quotaplane.errors`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from quotaplane.config.identity import UserGroup
from quotaplane.config.model import FilterConfig, PlacementRuleConfig
from quotaplane.errors import InputError, PlacementError, RejectedError

__all__ = [
    "DEFAULT_QUEUE",
    "RULE_NAMES",
    "Filter",
    "PlacementError",
    "PlacementManager",
    "QueueView",
    "Rule",
    "build_rule",
    "replace_dot",
]

ROOT = "root"
DOT = "."
DOT_REPLACEMENT = "_dot_"
#: P-6: the fallback queue.
DEFAULT_QUEUE = "root.default"
NO_RULE_MATCHED = "application rejected: no placement rule matched"

_QUEUE_NAME = re.compile(r"^[a-zA-Z0-9_:#/@-]{1,64}$")
_USER_NAME = re.compile(r"^[_a-zA-Z][a-zA-Z0-9:#/_.@-]*[$]?$")
_GROUP_NAME = re.compile(r"^[_a-zA-Z][a-zA-Z0-9:_.-]*$")


@runtime_checkable
class QueueView(Protocol):
    """What placement needs to know about the queues of a partition (a QueueTree satisfies it)."""

    def exists(self, path: str) -> bool:
        """True when the queue exists."""
        ...

    def is_leaf(self, path: str) -> bool:
        """True when the queue exists and is a leaf."""
        ...

    def is_draining(self, path: str) -> bool:
        """True when the queue exists and is draining."""
        ...

    def submit_allowed(self, path: str, user: UserGroup) -> bool:
        """May ``user`` submit to ``path`` (for a missing queue: to its deepest existing ancestor)?"""
        ...


def replace_dot(name: str) -> str:
    """P-4: a ``.`` inside a name taken from a tag, user or group becomes ``_dot_``."""
    return name.replace(DOT, DOT_REPLACEMENT)


def _qualify(name: str) -> str:
    return name if name.lower().startswith(ROOT + DOT) or name.lower() == ROOT else f"{ROOT}.{name}"


def _check_path(path: str) -> None:
    for part in path.split(DOT)[1:]:
        if not _QUEUE_NAME.fullmatch(part):
            raise PlacementError(f"application rejected: invalid queue name {part!r} in {path!r}")


class Filter:
    """A rule filter (YuniKorn ``filter.go``): allow or deny users and groups by name or one regexp.

    An empty filter allows everyone. Otherwise a match on the user name, then on any of the user's
    groups, returns the filter type (allow → True, deny → False); no match returns the opposite.
    """

    __slots__ = ("allow", "empty", "group_exp", "groups", "user_exp", "users")

    def __init__(self, config: FilterConfig | None) -> None:
        self.allow = True
        self.users: frozenset[str] = frozenset()
        self.groups: frozenset[str] = frozenset()
        self.user_exp: re.Pattern[str] | None = None
        self.group_exp: re.Pattern[str] | None = None
        if config is None:
            self.empty = True
            return
        self.allow = config.type.lower() != "deny"
        self.users, self.user_exp = self._parse(config.users, _USER_NAME)
        self.groups, self.group_exp = self._parse(config.groups, _GROUP_NAME)
        self.empty = not self.users and not self.groups and self.user_exp is None and self.group_exp is None

    @staticmethod
    def _parse(entries: Sequence[str],
               valid: re.Pattern[str]) -> tuple[frozenset[str], re.Pattern[str] | None]:
        # Appendix B: a single entry that is not a valid name is a regular expression.
        if len(entries) == 1 and not valid.fullmatch(entries[0]):
            try:
                return frozenset(), re.compile(entries[0])
            except re.error as exc:
                raise InputError(f"invalid placement filter expression {entries[0]!r}: {exc}") from None
        return frozenset(e for e in entries if valid.fullmatch(e)), None

    def allow_user(self, user: UserGroup) -> bool:
        """True when the rule may be used for ``user``."""
        if self.empty:
            return True
        if user.user in self.users or (self.user_exp is not None and self.user_exp.search(user.user)):
            return self.allow
        for group in user.groups:
            if group in self.groups or (self.group_exp is not None and self.group_exp.search(group)):
                return self.allow
        return not self.allow



def _tag_queue(value: str | None) -> str:
    """The queue a tag rule's tag value names: qualified as given, else a child name (dots replaced);
    no match (``""``) when the tag is missing or empty (P-2)."""
    if not value:
        return ""
    return value if value.lower().startswith(ROOT + DOT) else replace_dot(value)

class Rule:
    """One compiled placement rule. :meth:`place` returns a full queue path, ``""`` for no match, or
    raises :class:`PlacementError` (a rule error fails the whole placement)."""

    __slots__ = ("create", "filter", "name", "parent", "value")

    def __init__(self, name: str, value: str, create: bool, parent: Rule | None, filter_: Filter) -> None:
        self.name = name
        self.value = value
        self.create = create
        self.parent = parent
        self.filter = filter_

    # -- the rule-specific part: the name of the queue before qualification ---------------------------
    def _queue_name(self, application_id: str, user: UserGroup, tags: Mapping[str, str],
                    queues: QueueView, requested_queue: str | None) -> str:
        if self.name == "provided":
            return requested_queue or ""
        if self.name == "fixed":
            return self.value
        if self.name == "tag":
            return _tag_queue(_tag_value(tags, self.value))
        if self.name == "user":
            return replace_dot(user.user)
        if self.name in ("group", "primarygroup"):
            return replace_dot(user.groups[0]) if user.groups else ""
        if self.name == "secondarygroup":
            return self._secondary_group(application_id, user, tags, queues, requested_queue)
        return ""

    def _secondary_group(self, application_id: str, user: UserGroup, tags: Mapping[str, str],
                         queues: QueueView, requested_queue: str | None) -> str:
        """The first of the user's other groups for which a queue exists under the parent."""
        parent = self._parent_path(application_id, user, tags, queues, requested_queue)
        if parent is None:
            return ""
        for group in user.groups[1:]:
            if queues.exists(f"{parent}.{replace_dot(group)}"):
                return replace_dot(group)
        return ""

    def _parent_path(self, application_id: str, user: UserGroup, tags: Mapping[str, str],
                     queues: QueueView, requested_queue: str | None) -> str | None:
        """P-4: the parent from the parent rule (qualified), ``root`` without one, None on no match."""
        if self.parent is None:
            return ROOT
        parent = self.parent.place(application_id, user, tags, queues, requested_queue)
        if not parent:
            return None
        parent = _qualify(parent).lower()
        if queues.exists(parent) and queues.is_leaf(parent):
            raise PlacementError(f"application rejected: parent rule returned a leaf queue: {parent}")
        return parent

    def place(self, application_id: str, user: UserGroup, tags: Mapping[str, str], queues: QueueView,
              requested_queue: str | None = None) -> str:
        """The queue path this rule yields (lower case), or ``""`` when it does not match."""
        if not self.filter.allow_user(user):
            return ""  # P-2: a filter that refuses the user: no match
        name = self._queue_name(application_id, user, tags, queues, requested_queue)
        if not name:
            return ""
        lowered = name.lower()
        if lowered.startswith(ROOT + DOT) or (lowered == ROOT and self.name in ("provided", "fixed")):
            # P-3: a fully qualified name; the parent rule is not run. A bare "root" from a tag, user
            # or group is a child name (P-4: "root.root"), not the root queue itself.
            path = name.lower()
        else:
            if self.name not in ("provided", "fixed") and not _QUEUE_NAME.fullmatch(name):
                raise PlacementError(f"application rejected: invalid queue name {name!r}")
            parent = self._parent_path(application_id, user, tags, queues, requested_queue)
            if parent is None:
                return ""  # P-4: a parent rule with no match: no match
            path = f"{parent}.{name}".lower()
        return self._checked(path, queues)

    def _checked(self, path: str, queues: QueueView) -> str:
        """The placed path when valid and the queue exists or may be created; else no match (P-5)."""
        _check_path(path)
        if not self.create and not queues.exists(path):
            return ""  # P-5
        return path

    def __repr__(self) -> str:
        return f"Rule({self.name!r}, value={self.value!r}, create={self.create}, parent={self.parent!r})"


def _tag_value(tags: Mapping[str, str], key: str) -> str:
    # P-1: the tag key lookup is case-insensitive.
    value = tags.get(key)
    if value is None:
        lowered = key.lower()
        for k in sorted(tags):
            if k.lower() == lowered:
                value = tags[k]
                break
    return value.strip() if isinstance(value, str) else ""


#: Rule names understood by :func:`build_rule`.
RULE_NAMES = ("provided", "tag", "user", "group", "primarygroup", "secondarygroup", "fixed")


def build_rule(config: PlacementRuleConfig) -> Rule:
    """Compile a rule config; ValueError for an unknown rule or a missing value (P-1)."""
    name = config.name.lower()
    if name not in RULE_NAMES:
        raise InputError(f"unknown placement rule {config.name!r}")
    if name == "tag" and not config.value:
        raise InputError("a tag queue rule must have a tag name set")
    if name == "fixed" and not config.value:
        raise InputError("a fixed queue rule must have a queue name set")
    parent = build_rule(config.parent) if config.parent is not None else None
    return Rule(name, config.value, config.create, parent, Filter(config.filter))


class PlacementManager:
    """Places applications in queues with the configured rules (P-1 … P-8).

    With no rules configured, the requested queue is used as given: it must exist (a bare name is
    qualified with ``root.``); without one, or when it does not qualify, ``root.default`` is used if it
    exists (YuniKorn's implicit ``provided`` rule with ``create: false``).
    """

    __slots__ = ("_rules",)

    def __init__(self, rules: Sequence[PlacementRuleConfig] = ()) -> None:
        self._rules: tuple[Rule, ...] = ()
        self.update_rules(rules)

    def update_rules(self, rules: Sequence[PlacementRuleConfig]) -> None:
        """Replace the rules (all-or-nothing: a bad rule raises ValueError and keeps the old ones)."""
        compiled = tuple(build_rule(r) for r in rules)
        if not compiled:
            compiled = (Rule("provided", "", False, None, Filter(None)),)
        self._rules = compiled

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The compiled rules in order."""
        return self._rules

    def place(self, application_id: str, user: UserGroup, tags: Mapping[str, str], queues: QueueView,
              requested_queue: str | None = None) -> str:
        """The full lower-case queue path for the application (P-6).

        For each rule in order: a rule error rejects the application; no match tries the next rule. An
        existing queue must be a leaf, not draining, and allow the user to submit; a queue that does not
        exist yet needs an existing ancestor (not a leaf, not draining) that allows the user to submit —
        otherwise the next rule is tried. When no rule gives a queue, ``root.default`` is used if it
        exists and is usable; else :class:`~quotaplane.errors.RejectedError`.
        """
        requested = requested_queue.strip() if requested_queue else None
        for rule in self._rules:
            path = rule.place(application_id, user, tags, queues, requested)
            if not path:
                continue
            if self._usable(path, user, queues):
                return path
        if self._usable(DEFAULT_QUEUE, user, queues, must_exist=True):
            return DEFAULT_QUEUE
        raise RejectedError(NO_RULE_MATCHED)

    @staticmethod
    def _usable(path: str, user: UserGroup, queues: QueueView, *, must_exist: bool = False) -> bool:
        if queues.exists(path):
            return (queues.is_leaf(path) and not queues.is_draining(path)
                    and queues.submit_allowed(path, user))
        if must_exist:
            return False
        # walk up to the first existing ancestor: it must be able to hold the new queue
        parts = path.split(DOT)
        while len(parts) > 1:
            parts.pop()
            ancestor = DOT.join(parts)
            if queues.exists(ancestor):
                return (not queues.is_leaf(ancestor) and not queues.is_draining(ancestor)
                        and queues.submit_allowed(ancestor, user))
        return False
