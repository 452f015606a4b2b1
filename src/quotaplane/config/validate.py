"""Semantic validation of a queue configuration: every rule V-1 … V-21 of the YuniKorn reference.

The rules are those of YuniKorn's ``configvalidator.go`` (reference §1.10–§1.11), with quotaplane's
decisions U10–U13 (decisions.md): queue names are lower case, ``maxapplications: 0`` together with
``maxresources`` is allowed, duplicates are errors, and a config is accepted only when every check
passes. Messages keep YuniKorn's wording so that operators can search for them.

Unlike YuniKorn, which stops at the first error, :func:`check_config` collects every problem it can
find as ``(line, reason)`` pairs; the caller (``loader.load_config``) turns them into one
:class:`~quotaplane.errors.ConfigError`. Validation works on the frozen model, so a configuration built
in Python can be checked too; a :class:`LineIndex` built by the loader adds precise line numbers and
marks the fields that failed to parse, so that one typo does not produce a cascade of follow-up errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from quotaplane.config.lines import LineIndex, Problem
from quotaplane.config.model import (
    FilterConfig,
    LimitConfig,
    PartitionConfig,
    PlacementRuleConfig,
    QueueConfig,
    SchedulerConfig,
)
from quotaplane.config.validate_flavors import check_flavors
from quotaplane.resources import (
    Resource,
    add,
    component_wise_min,
    fit_in_max_undef,
    is_zero,
    strictly_greater_than_zero,
)

__all__ = [
    "GROUP_NAME_RE",
    "NODE_SORT_POLICIES",
    "PLACEMENT_RULE_NAMES",
    "QUEUE_NAME_RE",
    "ROOT_QUEUE",
    "RULE_NAME_RE",
    "USER_NAME_RE",
    "WILDCARD",
    "LineIndex",
    "Problem",
    "check_acl",
    "check_config",
    "check_partition",
    "is_valid_queue_name",
]

# Appendix B of the reference (YuniKorn configvalidator.go). Go's "$" is the end of the text; Python's
# also matches before a final newline, so "\Z" is used: "team\n" is not a valid name.
QUEUE_NAME_RE = re.compile(r"^[a-zA-Z0-9_:#/@-]{1,64}\Z")
USER_NAME_RE = re.compile(r"^[_a-zA-Z][a-zA-Z0-9:#/_.@-]*[$]?\Z")
GROUP_NAME_RE = re.compile(r"^[_a-zA-Z][a-zA-Z0-9:_.-]*\Z")
RULE_NAME_RE = re.compile(r"^[_a-zA-Z][a-zA-Z0-9_]*\Z")
# A filter entry that is not a plain name must look like a regexp (contain a special character).
_SPECIAL_RE = re.compile(r"[\^$*+?()\[{}|]")
# Constructs Python accepts but Go's RE2 (YuniKorn) does not: look-around and back-references.
_NOT_RE2 = re.compile(r"\(\?[=!]|\(\?<[=!]|\\[1-9]|\(\?P=")

ROOT_QUEUE = "root"
WILDCARD = "*"
DOT = "."
# YuniKorn's placement rules (pkg/scheduler/placement/types), case-insensitive; "group" is
# quotaplane's alias of primarygroup (quotaplane.placement accepts it).
PLACEMENT_RULE_NAMES = ("provided", "user", "primarygroup", "secondarygroup", "group", "tag", "fixed")
# YuniKorn's node sorting policies (policies.SortingPolicyFromString); "" is the default (fair).
NODE_SORT_POLICIES = ("", "fair", "binpacking")

_QUEUE_NAME_MESSAGE = (
    "invalid queue name, max 64 characters consisting of alphanumeric characters and "
    "'-', '_', '#', '@', '/', ':' allowed"
)


def is_valid_queue_name(name: str) -> bool:
    """V-16: a queue name of 1–64 characters from ``[a-zA-Z0-9_:#/@-]`` (no dots)."""
    return QUEUE_NAME_RE.match(name) is not None


def check_acl(acl: str) -> str | None:
    """V-17: an ACL is ``""``, ``"*"`` or at most two whitespace-separated fields (users groups)."""
    trimmed = acl.strip()
    if not trimmed or trimmed == WILDCARD:
        return None
    if len(trimmed.split()) > 2:
        return f"multiple spaces found in ACL: '{trimmed}'"
    return None


def _res(r: Resource | None) -> str:
    # YuniKorn prints a *Resource with %s: "map[memory:10 vcore:1000]", nil as "nil resource".
    return "nil resource" if r is None else str(r)



def _bad_queue_names(path: str) -> list[str]:
    """The invalid names of a fixed rule's queue path (a leading ``root`` left out)."""
    parts = path.split(DOT)
    if parts[0].lower() == ROOT_QUEUE and len(parts) > 1:
        parts = parts[1:]
    return [p for p in parts if not is_valid_queue_name(p)]

class _Checker:
    """Runs the rules over one partition, appending ``(line, reason)`` to ``problems``."""

    __slots__ = ("idx", "problems")

    def __init__(self, idx: LineIndex, problems: list[Problem]) -> None:
        self.idx = idx
        self.problems = problems

    def add(self, line: int | None, message: str) -> None:
        self.problems.append((line, message))

    # -- partition ---------------------------------------------------------------------------------
    def partition(self, p: PartitionConfig) -> None:
        root = p.root
        if root.name != ROOT_QUEUE:
            # V-11 (checkLimitsStructure): unreachable through the loader, which inserts a root
            # above any other top queue (V-14), but a hand-built model may get it wrong.
            self.add(self.idx.line(root, "name"), f"top queue name is {root.name} not root")
        # V-15: the root's size is the cluster; it takes no configured resources.
        if root.max or root.guaranteed:
            field = "max" if root.max else "guaranteed"
            self.add(self.idx.line(root, field), "root queue must not have resource limits set")
        # V-11: partition limits and root limits must agree when both are set.
        if p.limits and root.limits and not _same_limits(p.limits, root.limits):
            self.add(self.idx.line(p, "limits"), "partition limits and root queue limits are not equivalent")
        self.queues(root, 1)
        self.queue_resource(root, None)
        for rule in p.placement_rules:
            self.placement_rule(rule, 0)
        self.node_sort_policy(p)
        self.queue_max_applications(root)
        self.limit_resource(root, {}, {})
        self.limit_max_applications(root, {}, {})
        self.problems.extend(check_flavors(p, self.idx))

    # -- checkQueues: ACLs, limits, child names ---------------------------------------------------
    def queues(self, q: QueueConfig, level: int) -> None:
        for field, acl in (("adminacl", q.admin_acl), ("submitacl", q.submit_acl)):
            if acl is not None:
                msg = check_acl(acl)
                if msg:
                    self.add(self.idx.line(q, field), msg)
        self.limits(q)
        self.child_template(q)
        seen: set[str] = set()
        for child in q.queues:
            # V-16: names are checked lower-cased (U10); the regexp is case-insensitive anyway.
            if not is_valid_queue_name(child.name):
                self.add(self.idx.line(child, "name"), f"{_QUEUE_NAME_MESSAGE}: '{child.name}'")
            key = child.name.lower()
            if key in seen:
                self.add(self.idx.line(child, "name"),
                         f"duplicate child name found with name '{child.name}', level {level}")
            seen.add(key)
        for child in q.queues:
            self.queues(child, level + 1)

    def child_template(self, q: QueueConfig) -> None:
        t = q.child_template
        if t is None or t.max is None or t.guaranteed is None:
            return
        if self.idx.ok(t, "max", "guaranteed") and not fit_in_max_undef(t.max, t.guaranteed):
            self.add(self.idx.line(t, "guaranteed"),
                     f"guaranteed resource {_res(t.guaranteed)} is larger than maximum resource "
                     f"{_res(t.max)} for child template of queue {q.path}")

    # -- checkLimits: V-1 … V-10 ------------------------------------------------------------------
    def limits(self, q: QueueConfig) -> None:
        users: set[str] = set()
        groups: set[str] = set()
        for limit in q.limits:
            self.limit(q, limit, users, groups)

    def limit(self, q: QueueConfig, limit: LimitConfig, users: set[str], groups: set[str]) -> None:
        idx = self.idx
        line = idx.line(limit)
        # V-1
        if not limit.users and not limit.groups and idx.ok(limit, "users", "groups"):
            self.add(line, f"empty user and group lists defined in limit '{limit.limit}'")
        self.limit_names(limit, "users", "user", USER_NAME_RE, users)
        self.limit_names(limit, "groups", "group", GROUP_NAME_RE, groups)
        # V-5: a "*" group needs a named group before it in the same queue (reported once).
        if groups == {WILDCARD} and limit.groups:
            self.add(line, "should not specify only one group limit that is using the wildcard. "
                           "There must be at least one limit with a group name defined ")
        # V-6 (parse errors) is reported by the loader; the rules below need a parsed value.
        if idx.ok(limit, "maxresources", "maxapplications"):
            self.limit_amounts(q, limit)

    def limit_names(self, limit: LimitConfig, field: str, kind: str, pattern: re.Pattern[str],
                    seen: set[str]) -> None:
        """V-2 … V-4 for the user (or group) names of one limit; ``seen`` holds the queue's names so far."""
        names: tuple[str, ...] = getattr(limit, field)
        for i, name in enumerate(names):
            nline = self.idx.line(limit, f"{field}[{i}]")
            # V-2
            if name != WILDCARD and pattern.match(name) is None:
                self.add(nline, f"invalid limit {kind} name '{name}' in limit definition")
            # V-3 (U12: duplicates are errors, a second "*" included)
            if name in seen:
                self.add(nline, f"duplicated {kind} name '{name}', already exists")
            seen.add(name)
            # V-4: no named entry after the wildcard, in this limit or a later one.
            if WILDCARD in seen and name != WILDCARD:
                self.add(nline, f"should not set no wildcard {kind} {name} after wildcard {kind} limit")

    def limit_amounts(self, q: QueueConfig, limit: LimitConfig) -> None:
        """V-7 … V-10: the limit's maxresources and maxapplications against each other and the queue."""
        idx = self.idx
        name = limit.limit
        res = limit.max_resources
        rline = idx.line(limit, "maxresources")
        if limit.max_applications == 0 and is_zero(res):
            # V-8: nothing limited at all (U11: maxapplications 0 is fine *with* maxresources).
            self.add(idx.line(limit), f"invalid resource combination for limit {name} all resource limits "
                                      "are null")
        elif res and not strictly_greater_than_zero(res):
            # V-7: a non-empty maxresources needs one amount above zero.
            self.add(rline, f"MaxResources should be greater than zero in '{name}' limit")
        self.limit_against_queue(q, limit, rline)

    def limit_against_queue(self, q: QueueConfig, limit: LimitConfig, rline: int | None) -> None:
        """V-9, V-10: the limit's maxapplications and maxresources within its queue's own."""
        idx, name, res = self.idx, limit.limit, limit.max_resources
        # V-9: only the same queue's maxapplications is compared.
        if q.max_applications != 0 and q.max_applications < limit.max_applications:
            self.add(idx.line(limit, "maxapplications"),
                     f"invalid MaxApplications settings for limit {name} exceed current the queue "
                     "MaxApplications")
        # V-10: the queue's own max (not the ancestors'); the root is exempt.
        if (q.path != ROOT_QUEUE and q.max is not None and res is not None and idx.ok(q, "max")
                and not fit_in_max_undef(q.max, res)):
            self.add(rline, f"invalid MaxResources settings for limit {name} exeecd current the queue "
                            "MaxResources")

    # -- checkQueueResource: V-18 -------------------------------------------------------------------
    def queue_resource(self, q: QueueConfig, parent_max: Resource | None) -> Resource | None:
        idx = self.idx
        own_max = q.max if idx.ok(q, "max") else None
        own_g = q.guaranteed if idx.ok(q, "guaranteed") else None
        self.own_resources(q, own_max, own_g, parent_max)
        eff_max = component_wise_min(own_max, parent_max)
        if not q.queues:
            return own_g
        sum_g = Resource()
        for child in q.queues:
            child_g = self.queue_resource(child, eff_max)
            if child_g:
                sum_g = add(sum_g, child_g)
        self.children_guaranteed(q, own_g, eff_max, sum_g)
        # A queue without guaranteed passes its children's sum up (V-18).
        return own_g if own_g else sum_g

    def own_resources(self, q: QueueConfig, own_max: Resource | None, own_g: Resource | None,
                      parent_max: Resource | None) -> None:
        """V-18 for the queue itself: guaranteed within max, max within the parent's max."""
        if own_max is not None and own_g is not None and not fit_in_max_undef(own_max, own_g):
            self.add(self.idx.line(q, "guaranteed"),
                     f"guaranteed resource {_res(own_g)} is larger than maximum resource {_res(own_max)} "
                     f"for queue {q.path}")
        if own_max is not None and not fit_in_max_undef(parent_max, own_max):
            self.add(self.idx.line(q, "max"),
                     f"max resource of parent {_res(parent_max)} is smaller than maximum resource "
                     f"{_res(own_max)} for queue {q.path}")

    def children_guaranteed(self, q: QueueConfig, own_g: Resource | None, eff_max: Resource | None,
                            sum_g: Resource) -> None:
        """V-18 for the children: the sum of their guaranteed within the queue's guaranteed and max."""
        if own_g and not fit_in_max_undef(own_g, sum_g):
            self.add(self.idx.line(q, "guaranteed"),
                     f"guaranteed resource of parent {_res(own_g)} is smaller than sum of guaranteed "
                     f"resources {_res(sum_g)} of the children for queue {q.path}")
        if eff_max is not None and not fit_in_max_undef(eff_max, sum_g):
            self.add(self.idx.line(q, "max"),
                     f"max resource {_res(eff_max)} is smaller than sum of guaranteed resources "
                     f"{_res(sum_g)} of the children for queue {q.path}")

    # -- checkPlacementRules ------------------------------------------------------------------------
    def placement_rule(self, rule: PlacementRuleConfig, depth: int) -> None:
        idx = self.idx
        line = idx.line(rule, "name")
        if RULE_NAME_RE.match(rule.name) is None:
            self.add(line, f"invalid rule name {rule.name}, a name must be a valid identifier")
        elif rule.name.lower() not in PLACEMENT_RULE_NAMES:
            self.add(line, f"unknown rule name specified {rule.name}, failing placement rule config")
        else:
            self.rule_value(rule)
        if rule.filter is not None:
            self.placement_filter(rule, rule.filter)
        if rule.parent is not None:
            self.placement_rule(rule.parent, depth + 1)

    def rule_value(self, rule: PlacementRuleConfig) -> None:
        """V-16: a tag rule names a tag; a fixed rule names a valid queue path."""
        kind = rule.name.lower()
        vline = self.idx.line(rule, "value")
        if kind == "tag" and not rule.value:
            self.add(vline, "a tag queue rule must have a tag name set")
        elif kind == "fixed" and not rule.value:
            self.add(vline, "a fixed queue rule must have a queue name set")
        elif kind == "fixed":
            bad = _bad_queue_names(rule.value)
            if bad:
                self.add(vline, f"{_QUEUE_NAME_MESSAGE}: '{bad[0]}' in fixed rule queue '{rule.value}'")

    def placement_filter(self, rule: PlacementRuleConfig, f: FilterConfig) -> None:
        line = self.idx.line(f) or self.idx.line(rule, "filter")
        if f.type.lower() not in ("", "allow", "deny"):
            self.add(self.idx.line(f, "type") or line,
                     f"invalid rule filter type {f.type}, filter type must be either 'allow' or 'deny'")
        for kind, names, name_re in (("user", f.users, USER_NAME_RE), ("group", f.groups, GROUP_NAME_RE)):
            msg = _check_filter_list(kind, names, name_re)
            if msg:
                self.add(self.idx.line(f, f"{kind}s") or line, msg)

    # -- checkNodeSortingPolicy -------------------------------------------------------------------
    def node_sort_policy(self, p: PartitionConfig) -> None:
        policy = p.node_sort_policy
        if policy.type.lower() not in NODE_SORT_POLICIES:
            self.add(self.idx.line(policy, "type") or self.idx.line(p, "nodesortpolicy"),
                     f"undefined policy: {policy.type}")
        for name, weight in policy.resource_weights.items():
            if weight < 0:
                line = self.idx.line(policy, f"resourceweights[{name}]") or self.idx.line(p, "nodesortpolicy")
                self.add(line, f"negative resource weight for {name} is not allowed")

    # -- checkQueueMaxApplications: V-19 ----------------------------------------------------------
    def queue_max_applications(self, q: QueueConfig) -> None:
        parent = q.max_applications
        for child in q.queues:
            if parent != 0 and self.idx.ok(q, "maxapplications") and self.idx.ok(child, "maxapplications"):
                line = self.idx.line(child, "maxapplications")
                if child.max_applications == 0:
                    self.add(line, "maxApplications is either undefined or zero, which is not allowed "
                                   "when parent queue's maxApplications is defined")
                elif parent < child.max_applications:
                    self.add(line, "parent maxApplications must be larger than child maxApplications")
            self.queue_max_applications(child)

    # -- checkLimitResource: V-12 ------------------------------------------------------------------
    def limit_within(self, q: QueueConfig, kind: str, name: str, res: Resource,
                     inherited: Mapping[str, Resource], line: int | None) -> Resource:
        """V-12: one user's or group's limit within the one an ancestor set for it (else within the
        ancestors' wildcard); the limit carried down to the children."""
        ancestor = inherited.get(name)
        wildcard = inherited.get(WILDCARD)
        if ancestor is not None:
            if not fit_in_max_undef(ancestor, res):
                self.add(line, f"{kind} {name} max resource {_res(res)} of queue {q.path} is "
                               "greater than immediate or ancestor parent maximum resource "
                               f"{_res(ancestor)}")
            return component_wise_min(res, ancestor) or Resource()
        if name != WILDCARD and wildcard is not None and not fit_in_max_undef(wildcard, res):
            self.add(line, f"{kind} {name} max resource {_res(res)} of queue {q.path} is "
                           f"greater than wildcard maximum resource {_res(wildcard)} of "
                           "immediate or ancestor parent queue")
        return res

    def limit_resource(self, q: QueueConfig, users: Mapping[str, Resource],
                       groups: Mapping[str, Resource]) -> None:
        new_users = dict(users)
        new_groups = dict(groups)
        for limit in q.limits:
            if not self.idx.ok(limit, "maxresources"):
                continue
            res = limit.max_resources if limit.max_resources is not None else Resource()
            line = self.idx.line(limit, "maxresources")
            for kind, names, inherited, carried in (("user", limit.users, users, new_users),
                                                    ("group", limit.groups, groups, new_groups)):
                for name in names:
                    carried[name] = self.limit_within(q, kind, name, res, inherited, line)
        for child in q.queues:
            self.limit_resource(child, new_users, new_groups)

    # -- checkLimitMaxApplications: V-13 -----------------------------------------------------------
    def limit_max_applications(self, q: QueueConfig, users: Mapping[str, int],
                               groups: Mapping[str, int]) -> None:
        new_users = dict(users)
        new_groups = dict(groups)
        for limit in q.limits:
            if not self.idx.ok(limit, "maxapplications"):
                continue
            count = limit.max_applications
            line = self.idx.line(limit, "maxapplications")
            for kind, names, inherited, carried in (("user", limit.users, users, new_users),
                                                    ("group", limit.groups, groups, new_groups)):
                for name in names:
                    problem = _max_apps_problem(name, count, inherited)
                    if problem:
                        self.add(line, f"{kind} {name} max applications {count} of queue {q.path} is "
                                       f"{problem}")
                    # The value carried down is the child's own, not the minimum (reference V-13).
                    carried[name] = count
        for child in q.queues:
            self.limit_max_applications(child, new_users, new_groups)


def _max_apps_problem(name: str, count: int, inherited: Mapping[str, int]) -> str | None:
    """V-13: how ``count`` exceeds the maxapplications an ancestor set for ``name`` (or ``*``), or None."""
    ancestor = inherited.get(name)
    if ancestor is not None:
        if ancestor != 0 and (ancestor < count or count == 0):
            return f"greater than immediate or ancestor parent max applications {ancestor}"
        return None
    wildcard = inherited.get(WILDCARD)
    if name != WILDCARD and wildcard is not None and wildcard != 0 and (wildcard < count or count == 0):
        return f"greater than wildcard max applications {wildcard} of immediate or ancestor parent queue"
    return None


def _check_filter_list(kind: str, names: tuple[str, ...], name_re: re.Pattern[str]) -> str | None:
    """Appendix B: one entry may be a regexp (with a special character); several must all be names."""
    if len(names) == 1:
        entry = names[0]
        if name_re.match(entry) is None:
            if _SPECIAL_RE.search(entry) is None or _NOT_RE2.search(entry) is not None:
                return f"invalid rule filter {kind} list is not a proper list or regexp: [{entry}]"
            try:
                re.compile(entry)
            except (re.error, RecursionError, OverflowError):
                return f"invalid rule filter {kind} list is not a proper list or regexp: [{entry}]"
        return None
    for entry in names:
        if name_re.match(entry) is None:
            return f"invalid rule filter {kind} list, {kind} name '{entry}' is not valid"
    return None


def _limit_key(limit: LimitConfig) -> tuple[object, ...]:
    return (limit.limit, limit.users, limit.groups,
            None if limit.max_resources is None else limit.max_resources.to_dict(),
            limit.max_applications)


def _same_limits(a: Iterable[LimitConfig], b: Iterable[LimitConfig]) -> bool:
    # V-11 compares the limit lists deeply (YuniKorn: reflect.DeepEqual); source lines do not count.
    return [_limit_key(x) for x in a] == [_limit_key(x) for x in b]


def check_partition(partition: PartitionConfig, index: LineIndex | None = None) -> list[Problem]:
    """Every rule of the reference for one partition; ``[]`` when it is valid."""
    problems: list[Problem] = []
    _Checker(index or LineIndex(), problems).partition(partition)
    return problems


def check_config(config: SchedulerConfig, index: LineIndex | None = None) -> list[Problem]:
    """Every rule V-1 … V-21 over every partition, as ``(line, reason)`` in check order.

    Also rejects duplicate partition names (YuniKorn: ``duplicate partition name found with name``)
    and a config without partitions.
    """
    idx = index or LineIndex()
    problems: list[Problem] = []
    if not config.partitions:
        problems.append((None, "no partitions defined"))
    seen: set[str] = set()
    for p in config.partitions:
        key = p.name.lower()
        if key in seen:
            problems.append((idx.line(p, "name"), f"duplicate partition name found with name {p.name}"))
        seen.add(key)
        _Checker(idx, problems).partition(p)
    return problems
