"""The ElasticQuota webhook rules (seed 002, Koordinator's quota validation), one function per rule.

A batch of definitions is validated all-or-nothing against a :class:`SpecView`: the committed quotas
plus the definitions staged so far in the batch. :func:`validate` runs the rules in Koordinator's
order and returns the definition as it will be stored (the tree id filled in from the parent); a
broken rule raises :class:`~quotaplane.elastic.errors.QuotaValidationError` naming the quota and the
rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from quotaplane.elastic._dims import Dims, add_into, fmt, le_completely
from quotaplane.elastic._state import Quota
from quotaplane.elastic.errors import QuotaValidationError
from quotaplane.elastic.model import DEFAULT_QUOTA, ROOT_QUOTA, SPECIAL_QUOTAS, SYSTEM_QUOTA, QuotaSpec

__all__ = ["SpecView", "parents_first", "same_topology", "validate"]



class SpecView:
    """Committed specs plus the specs staged so far in one all-or-nothing batch (reference §3)."""

    def __init__(self, quotas: Mapping[str, Quota], namespaces: Mapping[str, str]) -> None:
        self.quotas = quotas
        self.namespaces = namespaces
        self.overlay: dict[str, QuotaSpec] = {}
        self.added: dict[str, dict[str, None]] = {}
        self.removed: dict[str, set[str]] = {}
        self.min_delta: dict[str, Dims] = {}
        self.ns_overlay: dict[str, str | None] = {}

    def get(self, name: str) -> QuotaSpec | None:
        """The spec of ``name`` as the batch sees it (staged, else committed), or None."""
        spec = self.overlay.get(name)
        if spec is not None:
            return spec
        q = self.quotas.get(name)
        return q.spec if q is not None else None

    def children(self, name: str) -> list[str]:
        """The children of ``name`` as the batch sees them."""
        q = self.quotas.get(name)
        removed = self.removed.get(name, set())
        out = [c for c in q.children if c not in removed] if q is not None else []
        out.extend(self.added.get(name, {}))
        return out

    def child_min_sum(self, name: str) -> Dims:
        """Σ min of the children of ``name`` as the batch sees them."""
        q = self.quotas.get(name)
        out = dict(q.child_min_sum) if q is not None else {}
        add_into(out, self.min_delta.get(name, {}))
        return out

    def ns_owner(self, ns: str) -> str | None:
        """The quota namespace ``ns`` is bound to, or None."""
        if ns in self.ns_overlay:
            return self.ns_overlay[ns]
        return self.namespaces.get(ns)

    def size(self) -> int:
        """An upper bound of the number of quotas the batch sees (bounds the cycle walk)."""
        return len(self.quotas) + len(self.overlay)

    def stage(self, spec: QuotaSpec) -> None:
        """Make ``spec`` part of what the rest of the batch sees."""
        old = self.get(spec.name)
        if old is not None:
            for ns in old.namespaces:
                if self.ns_owner(ns) == spec.name:
                    self.ns_overlay[ns] = None
            if spec.name not in SPECIAL_QUOTAS:
                self._unlink(old)
        self.overlay[spec.name] = spec
        if spec.name not in SPECIAL_QUOTAS:
            self._link(spec)
        for ns in spec.namespaces:
            self.ns_overlay[ns] = spec.name

    def _unlink(self, spec: QuotaSpec) -> None:
        added = self.added.get(spec.parent)
        if added is not None and spec.name in added:
            del added[spec.name]
        else:
            self.removed.setdefault(spec.parent, set()).add(spec.name)
        add_into(self.min_delta.setdefault(spec.parent, {}), spec.min._values, -1)

    def _link(self, spec: QuotaSpec) -> None:
        removed = self.removed.get(spec.parent)
        if removed is not None and spec.name in removed:
            removed.discard(spec.name)
        else:
            self.added.setdefault(spec.parent, {})[spec.name] = None
        add_into(self.min_delta.setdefault(spec.parent, {}), spec.min._values)


def _fail(spec: QuotaSpec, rule: str, message: str) -> QuotaValidationError:
    return QuotaValidationError(spec.name, rule, message)


def _check_special(spec: QuotaSpec) -> None:
    """§1.1: root and system cannot be modified; default stays a leaf under the root."""
    if spec.name in (ROOT_QUOTA, SYSTEM_QUOTA):
        raise _fail(spec, "immutable", f"invalid quota {spec.name}: it cannot be modified")
    if spec.name == DEFAULT_QUOTA and (spec.is_parent or spec.parent != ROOT_QUOTA):
        raise _fail(spec, "special-quota", "the default quota must stay a leaf directly under the root")


def _check_min_within_max(spec: QuotaSpec) -> None:
    """§3.2 self checks (rules 1–3 are enforced while parsing: negative values, bad weights)."""
    for k in spec.min:
        if k not in spec.max:
            raise _fail(spec, "min-key-not-in-max", f"resourceKey {k} of quota {spec.name} is included in "
                                                    "min, which is not included in max")
        if spec.min[k] > spec.max[k]:
            raise _fail(spec, "min-greater-than-max", f"resourceKey {k} of quota {spec.name} min "
                                                      f"{spec.min[k]} > max {spec.max[k]}")


def _check_max_not_below_used(spec: QuotaSpec, live: Quota | None) -> None:
    """``strict_keys``: the max of those names may not go below what the quota uses now."""
    if not spec.strict_keys or live is None:
        return
    for k in spec.strict_keys:
        used = live.raw_used.get(k)
        if used is not None and (k not in spec.max or spec.max[k] < used):
            raise _fail(spec, "max-below-used", f"max of {k} must be at least the used amount {used}")


def _with_parent(view: SpecView, spec: QuotaSpec) -> tuple[QuotaSpec, QuotaSpec | None]:
    """§3.1 mutation: the parent must exist; the tree id is inherited from it."""
    parent = view.get(spec.parent) if spec.parent != ROOT_QUOTA else None
    if spec.parent != ROOT_QUOTA and parent is None:
        raise _fail(spec, "parent-not-found",
                    f"fill quota {spec.name} failed, parent {spec.parent} not exist")
    if not spec.tree_id and parent is not None and parent.tree_id:
        spec = replace(spec, tree_id=parent.tree_id)
    return spec, parent


def _check_namespaces(view: SpecView, spec: QuotaSpec) -> None:
    """§3.4: a namespace is bound to one quota only."""
    for ns in spec.namespaces:
        owner = view.ns_owner(ns)
        if owner is not None and owner != spec.name:
            raise _fail(spec, "namespace-bound", f"namespace {ns} is already bound to quota {owner}")


def _check_is_parent_change(spec: QuotaSpec, old: QuotaSpec, children: list[str], live: Quota | None) -> None:
    """§3.3 rule 1: is-parent may not turn false with children, nor true with bound pods."""
    if old.is_parent and not spec.is_parent and children:
        raise _fail(spec, "is-parent-change", "quota has children, isParent is forbidden to modify as "
                                              f"false, quotaName:{spec.name}")
    if not old.is_parent and spec.is_parent and live is not None and live.has_bound_pods():
        raise _fail(spec, "is-parent-change", "quota has bound pods, isParent is forbidden to modify as "
                                              f"true, quotaName: {spec.name}")


def _check_tree_id(view: SpecView, spec: QuotaSpec, old: QuotaSpec | None, parent: QuotaSpec | None,
                   children: list[str]) -> None:
    """§3.3 rule 2: the tree id never changes and is the same as the parent's and the children's."""
    if old is not None and old.tree_id != spec.tree_id:
        raise _fail(spec, "tree-id", "tree-id cannot change")
    if parent is not None and parent.tree_id != spec.tree_id:
        raise _fail(spec, "tree-id", f"tree-id {spec.tree_id!r} differs from the parent's {parent.tree_id!r}")
    for c in children:
        child = view.get(c)
        if child is not None and child.tree_id != spec.tree_id:
            raise _fail(spec, "tree-id", f"tree-id differs from the child {c}'s")


def _check_parent(view: SpecView, spec: QuotaSpec, parent: QuotaSpec) -> None:
    """§3.3 rule 4: the parent is a parent quota, and no cycle."""
    if spec.parent == spec.name:
        raise _fail(spec, "parent-cycle", "a quota cannot be its own parent")
    if not parent.is_parent or spec.parent in SPECIAL_QUOTAS:
        raise _fail(spec, "parent-not-parent", f"the parent {spec.parent} is not a parent quota "
                                               "(is-parent false)")
    anc: QuotaSpec | None = parent
    hops = 0
    while anc is not None and anc.parent not in (ROOT_QUOTA, ""):
        if anc.parent == spec.name or hops > view.size():
            raise _fail(spec, "parent-cycle",
                        f"making {spec.parent} the parent of {spec.name} creates a cycle")
        anc = view.get(anc.parent)
        hops += 1


def _check_keys_against(spec: QuotaSpec, upper: QuotaSpec, lower: QuotaSpec, what: str) -> None:
    """§3.3 rule 5 for one pair: equal max keys, and the lower quota's min keys within the upper's."""
    if set(lower.max) != set(upper.max):
        raise _fail(spec, "resource-keys", f"max keys {sorted(spec.max)} differ from {what}'s "
                                           f"{sorted((upper if lower is spec else lower).max)}")
    extra = sorted(set(lower.min) - set(upper.min))
    if extra:
        raise _fail(spec, "resource-keys", f"min keys {extra} are not in the parent's min" if lower is spec
                    else f"{what} has min keys {extra} missing from this min")


def _check_resource_keys(view: SpecView, spec: QuotaSpec, parent: QuotaSpec | None,
                         children: list[str]) -> None:
    """§3.3 rule 5: resource keys equal to the parent's and the children's."""
    if parent is not None:
        _check_keys_against(spec, parent, spec, "the parent")
    for c in children:
        child = view.get(c)
        if child is not None:
            _check_keys_against(spec, spec, child, f"the child {c}")


def _check_min_sums(view: SpecView, spec: QuotaSpec, old: QuotaSpec | None, parent: QuotaSpec | None,
                    children: list[str]) -> None:
    """§3.3 rule 6: Σ min of siblings ≤ parent min, Σ min of children ≤ own min (not under the root)."""
    if spec.force_update:
        return
    if parent is not None:
        total = view.child_min_sum(spec.parent)
        if old is not None and old.parent == spec.parent:
            add_into(total, old.min._values, -1)
        add_into(total, spec.min._values)
        bad = le_completely(total, parent.min)
        if bad:
            raise _fail(spec, "min-sum", f"the sum of the min of the children of {spec.parent} {fmt(total)} "
                                         f"exceeds its min {fmt(parent.min)} in {bad}")
    if children:
        total = view.child_min_sum(spec.name)
        bad = le_completely(total, spec.min)
        if bad:
            raise _fail(spec, "min-sum", f"the sum of the min of the children {fmt(total)} exceeds the min "
                                         f"{fmt(spec.min)} in {bad}")


def validate(view: SpecView, spec: QuotaSpec, live: Mapping[str, Quota]) -> QuotaSpec:
    """Every rule for ``spec`` in Koordinator's order; the spec as it will be stored."""
    _check_special(spec)
    _check_min_within_max(spec)
    live_q = live.get(spec.name)
    _check_max_not_below_used(spec, live_q)
    spec, parent = _with_parent(view, spec)
    _check_namespaces(view, spec)
    old = view.get(spec.name)
    if old is not None and same_topology(old, spec):
        return spec                 # §3.4: unchanged relevant fields are not re-checked
    children = view.children(spec.name) if old is not None else []
    if old is not None:
        _check_is_parent_change(spec, old, children, live_q)
    _check_tree_id(view, spec, old, parent, children)
    if spec.parent == ROOT_QUOTA and not spec.is_parent:
        return spec                 # §3.3 rule 3: a leaf directly under the root is valid
    if parent is not None:
        _check_parent(view, spec, parent)
    _check_resource_keys(view, spec, parent, children)
    _check_min_sums(view, spec, old, parent, children)
    return spec


def same_topology(old: QuotaSpec, new: QuotaSpec) -> bool:
    """True when nothing the rules look at changed between ``old`` and ``new``."""
    return (old.parent == new.parent and old.is_parent == new.is_parent and old.tree_id == new.tree_id
            and old.namespaces == new.namespaces and old.min == new.min and old.max == new.max
            and set(old.min) == set(new.min) and set(old.max) == set(new.max))


def parents_first(specs: list[QuotaSpec]) -> list[QuotaSpec]:
    """Order a batch so that a quota comes after its parent when both are in it (stable otherwise)."""
    names = {s.name for s in specs}
    emitted: set[str] = set()
    out: list[QuotaSpec] = []
    pending = list(specs)
    while pending:
        rest: list[QuotaSpec] = []
        for s in pending:
            if s.parent in names and s.parent not in emitted and s.parent != s.name:
                rest.append(s)
            else:
                out.append(s)
                emitted.add(s.name)
        if len(rest) == len(pending):       # a cycle inside the batch: validation will name it
            out.extend(rest)
            break
        pending = rest
    return out
