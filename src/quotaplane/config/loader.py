"""Load YuniKorn queue configuration YAML into the frozen model, strictly and with line numbers.

The format is YuniKorn's (seeds 000 and 004; reference §1.10–§1.11)::

    partitions:
      - name: default
        placementrules: [...]
        limits: [...]
        preemption: {enabled: false, quotapreemptionenabled: false}
        nodesortpolicy: {type: fair, resourceweights: {vcore: 1.0}}
        queues:
          - name: root
            submitacl: '*'
            queues: [...]

Parsing composes the YAML with ``ruamel.yaml`` (its C parser from ``ruamel.yaml.clib`` when installed)
and builds the values itself, so that every key and list item carries its line. Like
YuniKorn's ``KnownFields(true)`` decoding, any unknown key is an error (naming the key and its line).
The loader checks structure and types, applies the structural rules (V-14 root insertion, V-11
partition limits onto root, U10 lower-case queue names) and then runs every semantic rule of
:mod:`quotaplane.config.validate`. Every problem found is collected; the first (by line) becomes the
message of the :class:`~quotaplane.errors.ConfigError`. Nothing is shared with any previous config:
a failing load returns nothing, which makes validation all-or-nothing (U13).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from datetime import date, datetime
from types import MappingProxyType
from typing import Any

import quotaplane.config.extensions as extensions
from quotaplane.config._fields import describe, is_bool
from quotaplane.config.flavor_fields import FlavorFields
from quotaplane.config.kueue import is_kueue, kueue_to_yaml
from quotaplane.config.model import (
    ChildTemplateConfig,
    FilterConfig,
    LimitConfig,
    NodeSortPolicyConfig,
    PartitionConfig,
    PlacementRuleConfig,
    PreemptionConfig,
    QueueConfig,
    SchedulerConfig,
)
from quotaplane.config.settings import PLAIN_SETTINGS, setting_problems
from quotaplane.config.validate import (
    PLACEMENT_RULE_NAMES,
    ROOT_QUEUE,
    Problem,
    check_config,
)
from quotaplane.config.yaml_tree import parse_yaml, raise_problems
from quotaplane.errors import ConfigError
from quotaplane.resources import Resource

__all__ = ["DEFAULT_CONFIG_YAML", "DEFAULT_PARTITION", "default_config", "load_config", "parse_config"]

DEFAULT_PARTITION = "default"

# P-8: YuniKorn's DefaultSchedulerConfig — one tag rule on the namespace that creates queues, and a
# root everyone may submit to.
DEFAULT_CONFIG_YAML = """\
partitions:
  - name: default
    placementrules:
      - name: tag
        value: namespace
        create: true
    queues:
      - name: root
        submitacl: '*'
"""

# The keys YuniKorn's structs accept (yaml tags are the lower-cased field names).
_TOP_KEYS = ("partitions", "checksum")
_PARTITION_KEYS = ("name", "queues", "placementrules", "limits", "preemption", "nodesortpolicy",
                   "usergroupresolver",
                   # the usage history's settings and the time windows (docs/history.md, windows.md): kept
                   # with the extensions as plain data, checked here; not policies
                   *PLAIN_SETTINGS,
                   # Kueue: flavors, fair sharing, LocalQueues (flavors.md, fair-sharing.md, from-kueue.md)
                   "resourceflavors", "fairsharing", "localqueues")
# beside them, the keys of the declared policy plug-ins (quotaplane.config.extensions): their values are
# kept as plain data and checked by their plug-in
_QUEUE_KEYS = ("name", "parent", "resources", "maxapplications", "properties", "adminacl", "submitacl",
               "childtemplate", "queues", "limits", "flavors", "flavorfungibility")
_RESOURCES_KEYS = ("guaranteed", "max", "borrowinglimit", "lendinglimit")
_TEMPLATE_RESOURCES_KEYS = ("guaranteed", "max")
_TEMPLATE_KEYS = ("maxapplications", "properties", "resources")
_LIMIT_KEYS = ("limit", "users", "groups", "maxresources", "maxapplications")
_RULE_KEYS = ("name", "value", "create", "parent", "filter")
_FILTER_KEYS = ("type", "users", "groups")
_PREEMPTION_KEYS = ("enabled", "quotapreemptionenabled")
_NODE_SORT_KEYS = ("type", "resourceweights")
_RESOLVER_KEYS = ("type",)

# Guards against pathological input (aliases can make a short text describe a huge or cyclic tree).
_MAX_QUEUE_DEPTH = 64
_MAX_QUEUES = 50_000
_MAX_RULE_DEPTH = 16
_MAX_EXTENSION_DEPTH = 64


class _TooLarge(Exception):
    """Raised inside the builder when the input exceeds the size guards."""


class _Builder(FlavorFields):
    """Turns the line-aware YAML data into model objects, recording problems, lines and broken fields."""

    # -- the tree -----------------------------------------------------------------------------------
    def build(self, data: object) -> SchedulerConfig | None:
        if data is None:
            self.add(None, "configuration is empty: a 'partitions' list is required")
            return None
        top = self.mapping(data, "the configuration", _TOP_KEYS, self.node_line(data) or 1)
        if top is None:
            return None
        raw_partitions = top.get("partitions")
        if raw_partitions is None or raw_partitions == []:
            self.add(self.key_line(top, "partitions") if "partitions" in top else self.node_line(top),
                     "no partitions defined: a non-empty 'partitions' list is required")
            return None
        if not isinstance(raw_partitions, list):
            self.add(self.key_line(top, "partitions"),
                     f"'partitions' must be a list, got {describe(raw_partitions)}")
            return None
        try:
            return self.partitions(raw_partitions)
        except _TooLarge:
            return None

    def partitions(self, raw_partitions: list[Any]) -> SchedulerConfig:
        partitions: list[PartitionConfig] = []
        default_seen = False
        for i, raw in enumerate(raw_partitions):
            line = self.item_line(raw_partitions, i)
            pm = self.mapping(raw, "partition", (*_PARTITION_KEYS, *extensions.declared()), line)
            if pm is None:
                continue
            name = self.string(pm, "name", "partition")
            # YuniKorn: an unnamed partition is the default one; there can be only one.
            if not name or name.lower() == DEFAULT_PARTITION:
                if default_seen:
                    self.add(self.key_line(pm, "name"), "multiple default partitions defined")
                    continue
                default_seen = True
                name = DEFAULT_PARTITION
            partition = self.partition(pm, name.lower(), line)
            if partition is not None:
                partitions.append(partition)
        for owner, field in self.broken:
            self.index.mark_broken(owner, field)
        return SchedulerConfig(partitions=tuple(partitions))

    def partition(self, pm: dict[Any, Any], name: str, line: int | None) -> PartitionConfig | None:
        what = f"partition '{name}'"
        limits = self.limits(pm, "limits", what)
        root = self.root_queue(pm, what, limits)
        rules = self.placement_rules(pm, what)
        preemption = self.preemption(pm, what)
        node_sort = self.node_sort_policy(pm, what)
        resolver = self.user_group_resolver(pm, what)
        flavors, fair = self.resource_flavors(pm, what), self.fair_sharing(pm, what)
        plugged = self.plugged(pm, what, root)
        if local := self.local_queues(pm, what, root):
            plugged["localqueues"] = local
        if root is None:
            return None
        part = PartitionConfig(
            # After V-11 the partition limits equal the root's (copied when root had none).
            name=name, root=root, placement_rules=tuple(rules), limits=limits or root.limits,
            preemption=preemption, node_sort_policy=node_sort,
            extensions=MappingProxyType(plugged), line=line, user_group_resolver=resolver,
            resource_flavors=flavors, fair_sharing=fair)
        self.index.set(part, "name", self.key_line(pm, "name") if "name" in pm else line)
        self.index.set(part, "limits", self.key_line(pm, "limits") if "limits" in pm else line)
        self.index.set(part, "nodesortpolicy", self.key_line(pm, "nodesortpolicy"))
        self.index.set(part, "resourceflavors", self.key_line(pm, "resourceflavors"))
        return part

    def placement_rules(self, pm: dict[Any, Any], what: str) -> list[PlacementRuleConfig]:
        """The partition's ``placementrules`` (none when absent)."""
        raw_rules = pm.get("placementrules")
        if raw_rules is not None and not isinstance(raw_rules, list):
            self.add(self.key_line(pm, "placementrules"),
                     f"'placementrules' of {what} must be a list, got {describe(raw_rules)}")
            return []
        rules = (self.rule(raw, self.item_line(raw_rules, i), 0) for i, raw in enumerate(raw_rules or ()))
        return [rule for rule in rules if rule is not None]

    def preemption(self, pm: dict[Any, Any], what: str) -> PreemptionConfig:
        """The ``preemption`` section; absent, or without ``enabled``: on, as YuniKorn (decision P1)."""
        raw_pre, where = pm.get("preemption"), f"preemption of {what}"
        pre = None if raw_pre is None else self.mapping(raw_pre, where, _PREEMPTION_KEYS,
                                                         self.key_line(pm, "preemption"))
        if pre is None:
            return PreemptionConfig()
        return PreemptionConfig(enabled=self.boolean(pre, "enabled", where) if "enabled" in pre else True,
                                quota_preemption_enabled=self.boolean(pre, "quotapreemptionenabled", where))

    def plugged(self, pm: dict[Any, Any], what: str, root: QueueConfig | None) -> dict[str, Any]:
        """Plug-in sections (:mod:`quotaplane.config.extensions`), checked by their plug-ins; history and
        windows (:mod:`quotaplane.config.settings`)."""
        plugged: dict[str, Any] = {}
        for key in (k for k in extensions.declared() if k in pm):
            line_of, found = self.key_line(pm, key), len(self.problems)
            plugged[key] = value = self.plain(pm[key], line_of, key, 0, {})
            if len(self.problems) == found:     # else not plain data: its plug-in cannot check it
                for problem in extensions.check(key, value):
                    self.add(line_of, f"{key} of {what}: {problem}")
        for key in (k for k in PLAIN_SETTINGS if k in pm):
            line_of = self.key_line(pm, key)
            plugged[key] = self.plain(pm[key], line_of, key, 0, {})
            for problem in setting_problems(key, plugged[key], root, plugged):
                self.add(line_of, f"{problem} (in {what})")
        return plugged

    def root_queue(self, pm: dict[Any, Any], what: str,
                   partition_limits: tuple[LimitConfig, ...]) -> QueueConfig | None:
        raw_queues = pm.get("queues")
        qline = self.key_line(pm, "queues") if "queues" in pm else self.node_line(pm)
        if not isinstance(raw_queues, list):        # V-14: absent
            self.add(qline, "queue config is not set" if raw_queues is None else
                     f"'queues' of {what} must be a list, got {describe(raw_queues)}")
            return None
        single_root = (len(raw_queues) == 1 and isinstance(raw_queues[0], dict)
                       and isinstance(raw_queues[0].get("name"), str)
                       and raw_queues[0]["name"].lower() == ROOT_QUEUE)
        if single_root:
            root = self.queue(raw_queues[0], "", self.item_line(raw_queues, 0), 0, is_root=True)
            if root is None:
                return None
        else:
            # V-14: several top queues, or one not called root: insert a root parent above them.
            children = self.children(raw_queues, ROOT_QUEUE, 1, what, qline)
            root = QueueConfig(name=ROOT_QUEUE, path=ROOT_QUEUE, parent=True, queues=children, line=qline)
        return self.with_partition_limits(root, partition_limits) if partition_limits and not root.limits \
            else root

    def with_partition_limits(self, old: QueueConfig, limits: tuple[LimitConfig, ...]) -> QueueConfig:
        """V-11: partition limits are copied onto a root that has none (YUNIKORN-2260)."""
        root = dataclasses.replace(old, parent=True, limits=limits)
        self.index.move(old, root)
        self.broken = [(root if o is old else o, f) for (o, f) in self.broken]
        return root

    def children(self, raw: list[Any], path: str, depth: int, what: str,
                 line: int | None) -> tuple[QueueConfig, ...]:
        out: list[QueueConfig] = []
        for i, item in enumerate(raw):
            child = self.queue(item, path, self.item_line(raw, i), depth, is_root=False)
            if child is not None:
                out.append(child)
        return tuple(out)

    def queue(self, raw: object, parent_path: str, line: int | None, depth: int,
              *, is_root: bool) -> QueueConfig | None:
        if not self.queue_allowed(line, depth):
            return None
        peek = raw.get("name") if isinstance(raw, dict) else None
        name = peek.lower() if isinstance(peek, str) else ""  # U10: names and paths are lower case
        path = name if is_root else f"{parent_path}.{name}"
        what = f"queue '{path}'" if name or is_root else f"a queue under '{parent_path}'"
        qm = self.mapping(raw, what, _QUEUE_KEYS, line)
        if qm is None:
            return None
        self.string(qm, "name", what)  # reports a name that is not a string
        max_res, guaranteed, res_ok = self.queue_resources(qm, what)
        borrowing, lending = self.queue_limits(qm, what)
        template = self.child_template(qm, what)
        limits = self.limits(qm, "limits", what)
        children = self.queue_children(qm, path, depth, what)
        max_apps, apps_ok = self.count(qm, "maxapplications", what)
        q = QueueConfig(
            name=name, path=path,
            parent=True if is_root else self.boolean(qm, "parent", what),  # V-14: root is a parent
            max=max_res, guaranteed=guaranteed, max_applications=max_apps,
            submit_acl=self.optional_string(qm, "submitacl", what),
            admin_acl=self.optional_string(qm, "adminacl", what),
            properties=self.properties(qm, "properties", what),
            child_template=template, limits=limits, queues=children, line=line,
            flavors=self.queue_flavors(qm, what), flavor_fungibility=self.fungibility(qm, what),
            borrowing_limit=borrowing[0], lending_limit=lending[0])
        for ok, field in ((apps_ok, "maxapplications"), (res_ok[0], "max"), (res_ok[1], "guaranteed"),
                          (borrowing[1], "borrowinglimit"), (lending[1], "lendinglimit")):
            if not ok:
                self.broken.append((q, field))
        self.index_queue(q, qm, line)
        return q

    def queue_allowed(self, line: int | None, depth: int) -> bool:
        """The size guards: too many queues stops the build, too deep a queue is refused."""
        self.queue_count += 1
        if self.queue_count > _MAX_QUEUES:
            # Aliases can describe an exponential tree in a few lines: stop building at once.
            self.add(line, f"too many queues: more than {_MAX_QUEUES}")
            raise _TooLarge
        if depth > _MAX_QUEUE_DEPTH:
            self.add(line, f"queue hierarchy too deep: more than {_MAX_QUEUE_DEPTH} levels")
            return False
        return True

    def queue_resources(self, qm: dict[Any, Any], what: str
                        ) -> tuple[Resource | None, Resource | None, tuple[bool, bool]]:
        """The queue's ``resources``: (max, guaranteed, (max parsed, guaranteed parsed))."""
        raw_res = qm.get("resources")
        if raw_res is None:
            return None, None, (True, True)
        rm = self.mapping(raw_res, f"resources of {what}", _RESOURCES_KEYS, self.key_line(qm, "resources"))
        if rm is None:
            return None, None, (True, True)
        max_res, max_ok = self.resource(rm, "max", what)
        guaranteed, g_ok = self.resource(rm, "guaranteed", what)
        return max_res, guaranteed, (max_ok, g_ok)

    def queue_children(self, qm: dict[Any, Any], path: str, depth: int, what: str
                       ) -> tuple[QueueConfig, ...]:
        raw_children = qm.get("queues")
        if raw_children is None:
            return ()
        if not isinstance(raw_children, list):
            self.add(self.key_line(qm, "queues"),
                     f"'queues' of {what} must be a list, got {describe(raw_children)}")
            return ()
        return self.children(raw_children, path, depth + 1, what, self.key_line(qm, "queues"))

    def index_queue(self, q: QueueConfig, qm: dict[Any, Any], line: int | None) -> None:
        """Record the lines of the queue's fields (validation messages name them)."""
        idx = self.index
        idx.set(q, "name", self.key_line(qm, "name") if "name" in qm else line)
        for key in ("maxapplications", "submitacl", "adminacl", "properties"):
            if key in qm:
                idx.set(q, key, self.key_line(qm, key))
        raw_res = qm.get("resources")
        if isinstance(raw_res, dict):
            for key in ("max", "guaranteed", "borrowinglimit", "lendinglimit"):
                if key in raw_res:
                    idx.set(q, key, self.key_line(raw_res, key))
        for key in ("flavors", "flavorfungibility"):
            if key in qm:
                idx.set(q, key, self.key_line(qm, key))

    def child_template(self, qm: dict[Any, Any], what: str) -> ChildTemplateConfig | None:
        raw = qm.get("childtemplate")
        if raw is None:
            return None
        twhat = f"childtemplate of {what}"
        line = self.key_line(qm, "childtemplate")
        tm = self.mapping(raw, twhat, _TEMPLATE_KEYS, line)
        if tm is None:
            return None
        max_res, guaranteed, ok = None, None, (True, True)
        raw_res = tm.get("resources")
        if raw_res is not None:
            rm = self.mapping(raw_res, f"resources of {twhat}", _TEMPLATE_RESOURCES_KEYS,
                              self.key_line(tm, "resources"))
            if rm is not None:
                max_res, max_ok = self.resource(rm, "max", twhat)
                guaranteed, g_ok = self.resource(rm, "guaranteed", twhat)
                ok = (max_ok, g_ok)
        max_apps, _ = self.count(tm, "maxapplications", twhat)
        t = ChildTemplateConfig(
            max_applications=max_apps,
            properties=self.properties(tm, "properties", twhat),
            max=max_res, guaranteed=guaranteed, line=line)
        if not ok[0]:
            self.broken.append((t, "max"))
        if not ok[1]:
            self.broken.append((t, "guaranteed"))
        if isinstance(raw_res, dict) and "guaranteed" in raw_res:
            self.index.set(t, "guaranteed", self.key_line(raw_res, "guaranteed"))
        return t

    def limits(self, m: dict[Any, Any], key: str, what: str) -> tuple[LimitConfig, ...]:
        raw = m.get(key)
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.add(self.key_line(m, key), f"'limits' of {what} must be a list, got {describe(raw)}")
            return ()
        out: list[LimitConfig] = []
        for i, item in enumerate(raw):
            limit = self.limit(item, f"limit {i + 1} of {what}", self.item_line(raw, i))
            if limit is not None:
                out.append(limit)
        return tuple(out)

    def limit(self, item: object, lwhat: str, line: int | None) -> LimitConfig | None:
        lm = self.mapping(item, lwhat, _LIMIT_KEYS, line)
        if lm is None:
            return None
        # A misspelt key (``user:``) would otherwise also read as "no users" (V-1): report once.
        misspelt = self.unknown_keys
        users, user_lines, users_ok = self.names(lm, "users", lwhat)
        groups, group_lines, groups_ok = self.names(lm, "groups", lwhat)
        max_res, res_ok = self.resource(lm, "maxresources", lwhat)
        max_apps, apps_ok = self.count(lm, "maxapplications", lwhat)
        limit = LimitConfig(
            limit=self.string(lm, "limit", lwhat), users=users, groups=groups, max_resources=max_res,
            max_applications=max_apps, line=line)
        for ok, field in ((apps_ok, "maxapplications"), (users_ok and not misspelt, "users"),
                          (groups_ok, "groups"), (res_ok, "maxresources")):
            if not ok:
                self.broken.append((limit, field))
        for j, uline in enumerate(user_lines):
            self.index.set(limit, f"users[{j}]", uline)
        for j, gline in enumerate(group_lines):
            self.index.set(limit, f"groups[{j}]", gline)
        for k in ("maxresources", "maxapplications"):
            if k in lm:
                self.index.set(limit, k, self.key_line(lm, k))
        return limit

    def rule(self, raw: object, line: int | None, depth: int) -> PlacementRuleConfig | None:
        if depth > _MAX_RULE_DEPTH:
            self.add(line, f"placement rule parents nested too deeply: more than {_MAX_RULE_DEPTH} levels")
            return None
        rm = self.mapping(raw, "placement rule", _RULE_KEYS, line)
        if rm is None:
            return None
        name = self.string(rm, "name", "placement rule")
        what = f"placement rule '{name}'"
        parent = None
        if rm.get("parent") is not None:
            parent = self.rule(rm["parent"], self.key_line(rm, "parent"), depth + 1)
        filt = self.rule_filter(rm, what)
        rule = PlacementRuleConfig(
            name=name.lower() if name.lower() in PLACEMENT_RULE_NAMES else name,
            value=self.string(rm, "value", what), create=self.boolean(rm, "create", what),
            parent=parent, filter=filt, line=line)
        self.index.set(rule, "name", self.key_line(rm, "name") if "name" in rm else line)
        self.index.set(rule, "value", self.key_line(rm, "value") if "value" in rm else line)
        return rule

    def rule_filter(self, rm: dict[Any, Any], what: str) -> FilterConfig | None:
        raw_filter = rm.get("filter")
        if raw_filter is None:
            return None
        fline = self.key_line(rm, "filter")
        fm = self.mapping(raw_filter, f"filter of {what}", _FILTER_KEYS, fline)
        if fm is None:
            return None
        users, _, _ = self.names(fm, "users", f"filter of {what}")
        groups, _, _ = self.names(fm, "groups", f"filter of {what}")
        ftype = self.string(fm, "type", f"filter of {what}")
        # An empty filter type means allow (YuniKorn); the type is case-insensitive.
        lowered = ftype.lower()
        kind = "allow" if lowered == "" else lowered if lowered in ("allow", "deny") else ftype
        filt = FilterConfig(type=kind, users=users, groups=groups)
        self.index.set(filt, "type", self.key_line(fm, "type") if "type" in fm else fline)
        for k in ("users", "groups"):
            self.index.set(filt, k, self.key_line(fm, k) if k in fm else fline)
        return filt

    def user_group_resolver(self, pm: dict[Any, Any], what: str) -> str:
        """YuniKorn's ``usergroupresolver: {type: …}`` (the type, lower case; "" when absent)."""
        raw = pm.get("usergroupresolver")
        if raw is None:
            return ""
        rwhat = f"usergroupresolver of {what}"
        rm = self.mapping(raw, rwhat, _RESOLVER_KEYS, self.key_line(pm, "usergroupresolver"))
        if rm is None:
            return ""
        # any type is accepted, as YuniKorn does (an unknown one means "no resolver" there)
        return self.string(rm, "type", rwhat).lower()

    def node_sort_policy(self, pm: dict[Any, Any], what: str) -> NodeSortPolicyConfig:
        raw = pm.get("nodesortpolicy")
        if raw is None:
            return NodeSortPolicyConfig()
        nwhat = f"nodesortpolicy of {what}"
        nm = self.mapping(raw, nwhat, _NODE_SORT_KEYS, self.key_line(pm, "nodesortpolicy"))
        if nm is None:
            return NodeSortPolicyConfig()
        ptype = self.string(nm, "type", nwhat)
        weights, lines = self.resource_weights(nm, nwhat)
        policy = NodeSortPolicyConfig(type=ptype.lower() if ptype.lower() in ("", "fair", "binpacking")
                                      else ptype, resource_weights=MappingProxyType(weights))
        self.index.set(policy, "type", self.key_line(nm, "type") if "type" in nm else None)
        for name, wline in lines.items():
            self.index.set(policy, f"resourceweights[{name}]", wline)
        return policy

    def resource_weights(self, nm: dict[Any, Any], nwhat: str
                         ) -> tuple[dict[str, float], dict[str, int | None]]:
        """The ``resourceweights`` of a node sort policy, with the line of each weight."""
        weights: dict[str, float] = {}
        lines: dict[str, int | None] = {}
        raw_w = nm.get("resourceweights")
        if raw_w is None:
            return weights, lines
        if not isinstance(raw_w, dict):
            self.add(self.key_line(nm, "resourceweights"),
                     f"'resourceweights' of {nwhat} must be a mapping, got {describe(raw_w)}")
            return weights, lines
        for name, w in raw_w.items():
            wline = self.key_line(raw_w, name)
            if not isinstance(name, str):
                self.add(wline, f"resource name {name!r} in {nwhat} must be a string")
            elif is_bool(w) or not isinstance(w, int | float) or w != w or w in (math.inf, -math.inf):
                self.add(wline, f"resource weight for {name} in {nwhat} must be a number, got {describe(w)}")
            else:
                weights[name] = float(w)
                lines[name] = wline
        return weights, lines

    def plain(self, value: object, line: int | None, where: str, depth: int,
              memo: dict[int, object], active: set[int] | None = None) -> object:
        """Extension data as plain Python (dict, list, str, int, float, bool, None).

        Aliased nodes stay shared (so a short text cannot expand exponentially); cycles are errors.
        """
        active = set() if active is None else active
        if depth > _MAX_EXTENSION_DEPTH:
            self.add(line, f"'{where}' is nested too deeply")
            return None
        if value is None or isinstance(value, str | bool | int | float):
            return value
        if isinstance(value, datetime | date):
            return value.isoformat()
        if not isinstance(value, dict | list):
            self.add(line, f"'{where}' contains a value of unsupported type {type(value).__name__}")
            return None
        key = id(value)
        if key in active:
            self.add(line, f"'{where}' contains a cycle (an alias inside its own anchor)")
            return None
        if key in memo:
            return memo[key]
        active.add(key)
        if isinstance(value, dict):
            result: object = {k: self.plain(v, self.key_line(value, k), where, depth + 1, memo, active)
                              for k, v in value.items()}
        else:
            result = [self.plain(v, self.item_line(value, i), where, depth + 1, memo, active)
                      for i, v in enumerate(value)]
        active.discard(key)
        memo[key] = result
        return result


def parse_config(text: str | bytes, *, validate: bool = True) -> tuple[SchedulerConfig, list[Problem]]:
    """Build the model from ``text`` and return it with every problem found (``[]`` when valid).

    Raises :class:`ConfigError` only when no model can be built at all (bad YAML, no partitions).
    ``load_config`` is the normal entry point; this one serves tools that want to show all problems.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"configuration is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    if not isinstance(text, str):
        raise TypeError(f"configuration must be text, got {type(text).__name__}")
    text = kueue_to_yaml(text) if is_kueue(text) else text      # Kueue's objects (docs/from-kueue.md)
    data = parse_yaml(text)
    builder = _Builder()
    config = builder.build(data)
    if config is None or not config.partitions:
        raise_problems(builder.problems or [(None, "no partitions defined")])
        raise AssertionError("unreachable")  # pragma: no cover
    problems = list(builder.problems)
    if validate:
        problems.extend(check_config(config, builder.index))
    checksum = hashlib.sha256(text.encode("utf-8")).hexdigest().upper()
    final = SchedulerConfig(partitions=config.partitions, source=text, checksum=checksum)
    return final, problems


def load_config(text: str | bytes) -> SchedulerConfig:
    """Parse and fully validate YuniKorn queue YAML (rules V-1 … V-21, decisions U10–U13).

    Returns a new frozen :class:`SchedulerConfig`, or raises :class:`ConfigError` whose ``str`` is the
    first problem (``"line N: reason"``), ``.line`` its 1-based line and ``.problems`` every
    ``(line, reason)`` found, ordered by line.
    """
    config, problems = parse_config(text)
    if problems:
        raise_problems(problems)
    return config


_DEFAULT: list[SchedulerConfig] = []


def default_config() -> SchedulerConfig:
    """P-8: YuniKorn's default — a ``tag`` rule on ``namespace`` with create, root open to ``*``."""
    if not _DEFAULT:
        _DEFAULT.append(load_config(DEFAULT_CONFIG_YAML))
    return _DEFAULT[0]

