"""Semantic rules of resource flavors, borrowing and lending limits and fair sharing (docs/flavors.md,
docs/config.md "Borrowing and lending limits", docs/fair-sharing.md).

The rules follow Kueue's own validation where Kueue has one (KQ-O1 … KQ-O3, KQ-S) and are numbered
FL-1 … FL-9 in ``docs/rules.md``:

- FL-1  a flavor name is a DNS subdomain (Kueue's ResourceFlavor name); names are unique;
- FL-2  a flavor counts at least one resource, each a plain resource name (no ``@``), once;
- FL-3  two flavors count the same resources or none in common (a resource is in one group, KQ-O3 #2);
- FL-4  a flavor has at most 8 node labels, 8 taints and 8 tolerations (KQ-O1);
- FL-5  a queue's ``flavors`` name declared flavors, and only when the partition declares some;
- FL-6  a flavored name ``resource@flavor`` in a quota names a declared flavor that counts the resource;
- FL-7  the root takes no borrowing or lending limit (the root has no resources, V-15);
- FL-8  a leaf's lending limit is at most its guaranteed (Kueue: lendingLimit ≤ nominalQuota, KQ-O3 #6);
- FL-9  ``fairsharing.weight`` is a non-negative decimal, 0 or at least 10⁻⁹ (KQ-O3 #9);
- FL-10 ``preemption.withinclusterqueue`` is Never, LowerPriority or LowerOrNewerEqualPriority and
  ``preemption.reclaimwithincohort`` Never, LowerPriority or Any (Kueue's ClusterQueue preemption, KQ-P1).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from quotaplane.config.lines import LineIndex, Problem
from quotaplane.config.model import PartitionConfig, QueueConfig
from quotaplane.errors import InputError
from quotaplane.flavors.names import FLAVOR_NAME, SEPARATOR, split
from quotaplane.resources import Resource

__all__ = ["PREEMPTION_POLICIES", "PROP_FAIR_SHARING_WEIGHT", "check_flavors", "parse_weight"]

#: the queue property that sets a queue's fair-sharing weight (docs/fair-sharing.md)
PROP_FAIR_SHARING_WEIGHT = "fairsharing.weight"

#: FL-10: the values of Kueue's preemption policies as queue properties (docs/fair-sharing.md)
PREEMPTION_POLICIES = {
    "preemption.withinclusterqueue": ("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
    "preemption.reclaimwithincohort": ("Never", "LowerPriority", "Any"),
}

#: KQ-O1: at most this many node labels, taints and tolerations on a flavor
_MAX_FLAVOR_ENTRIES = 8


def parse_weight(text: str) -> Decimal:
    """A fair-sharing weight (FL-9): a non-negative decimal, 0 or at least 10⁻⁹; ``ValueError`` else."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise InputError(f"invalid weight {text!r}: must be a non-negative decimal number") from None
    if not value.is_finite() or value < 0:
        raise InputError(f"invalid weight {text!r}: must be a non-negative decimal number")
    if 0 < value < Decimal("1e-9"):
        raise InputError(f"invalid weight {text!r}: must be 0 or at least 0.000000001")
    return value


def check_flavors(p: PartitionConfig, idx: LineIndex) -> list[Problem]:
    """Every problem of ``p``'s flavors, limits and fair-sharing weights, as ``(line, reason)``."""
    problems: list[Problem] = []
    covered: dict[str, frozenset[str]] = {}        # flavor → the resources it counts
    group_of: dict[str, str] = {}                  # resource → the first flavor counting it
    for flavor in p.resource_flavors:
        name = flavor.name
        line = idx.line(flavor, "name")
        if not FLAVOR_NAME.match(name):
            problems.append((line, f"invalid resource flavor name {name!r}: lower-case letters, digits, '-' "
                                   "and '.', starting and ending with a letter or digit, at most 253"))
        if name in covered:
            problems.append((line, f"duplicate resource flavor name {name!r}"))
            continue
        if not flavor.resources:
            problems.append((idx.line(flavor, "resources"),
                             f"resource flavor {name!r} counts no resources: list them in 'resources'"))
        seen: set[str] = set()
        for i, res in enumerate(flavor.resources):
            rline = idx.line(flavor, f"resources[{i}]")
            if not res or SEPARATOR in res:
                problems.append((rline, f"invalid resource name {res!r} in resource flavor {name!r}: a plain "
                                        f"resource name, without '{SEPARATOR}'"))
            elif res in seen:
                problems.append((rline, f"resource {res!r} is listed twice in resource flavor {name!r}"))
            seen.add(res)
        mine = frozenset(seen)
        for res in sorted(mine):
            other = group_of.get(res)
            if other is None:
                group_of[res] = name
            elif covered[other] != mine:
                problems.append((idx.line(flavor, "resources"),
                                 f"resource flavor {name!r} counts {res!r} as flavor {other!r} does, but not "
                                 f"the same resources ({', '.join(sorted(mine))} against "
                                 f"{', '.join(sorted(covered[other]))}): flavors that share a resource must "
                                 "count the same ones"))
                break
        covered[name] = mine
        for what, count in (("node labels", len(flavor.node_labels)),
                            ("node taints", len(flavor.node_taints)),
                            ("tolerations", len(flavor.tolerations))):
            if count > _MAX_FLAVOR_ENTRIES:
                problems.append((line, f"resource flavor {name!r} has {count} {what}: at most "
                                       f"{_MAX_FLAVOR_ENTRIES}"))
    _Queues(p, idx, covered, problems).walk(p.root)
    return problems


class _Queues:
    __slots__ = ("covered", "idx", "partition", "problems")

    def __init__(self, p: PartitionConfig, idx: LineIndex, covered: dict[str, frozenset[str]],
                 problems: list[Problem]) -> None:
        self.partition = p
        self.idx = idx
        self.covered = covered
        self.problems = problems

    def add(self, line: int | None, message: str) -> None:
        self.problems.append((line, message))

    def walk(self, q: QueueConfig) -> None:
        idx = self.idx
        if q.flavors is not None:
            line = idx.line(q, "flavors")
            if not self.covered:
                self.add(line, f"queue {q.path} lists flavors but partition '{self.partition.name}' declares "
                               "no resourceflavors")
            else:
                for name in q.flavors:
                    if name not in self.covered:
                        self.add(line, f"queue {q.path} lists flavor {name!r}, which is not a declared "
                                       f"resource flavor (declared: {', '.join(self.covered)})")
        for field, res in (("max", q.max), ("guaranteed", q.guaranteed),
                           ("borrowinglimit", q.borrowing_limit),
                           ("lendinglimit", q.lending_limit)):
            if res is not None and idx.ok(q, field):
                self.flavored_names(res, idx.line(q, field), f"{field} of queue {q.path}")
        if q.child_template is not None:
            for field, res in (("max", q.child_template.max), ("guaranteed", q.child_template.guaranteed)):
                if res is not None:
                    self.flavored_names(res, idx.line(q.child_template, field),
                                        f"{field} of the child template of queue {q.path}")
        for limit in q.limits:
            if limit.max_resources is not None:
                self.flavored_names(limit.max_resources, idx.line(limit, "maxresources"),
                                    f"maxresources of limit '{limit.limit}' of queue {q.path}")
        if q.path == "root" and (q.borrowing_limit is not None or q.lending_limit is not None):
            field = "borrowinglimit" if q.borrowing_limit is not None else "lendinglimit"
            self.add(idx.line(q, field), "root queue must not have resource limits set")
        if q.lending_limit is not None and q.is_leaf and idx.ok(q, "lendinglimit", "guaranteed"):
            guaranteed = q.guaranteed or Resource()
            over = sorted(name for name, amount in q.lending_limit.items()
                          if amount > guaranteed.get(name, 0))
            if over:
                self.add(idx.line(q, "lendinglimit"),
                         f"lendinglimit of queue {q.path} must be less than or equal to its guaranteed for "
                         f"{', '.join(over)}: a leaf lends only what it is guaranteed")
        weight = q.properties.get("fairsharing.weight")
        if weight is not None:
            try:
                parse_weight(weight)
            except ValueError as exc:
                self.add(idx.line(q, "properties"), f"property fairsharing.weight of queue {q.path}: {exc}")
        for prop, allowed in PREEMPTION_POLICIES.items():
            value = q.properties.get(prop)
            if value is not None and value.strip().lower() not in {a.lower() for a in allowed}:
                self.add(idx.line(q, "properties"),
                         f"property {prop} of queue {q.path}: {value!r} is not one of {', '.join(allowed)}")
        for child in q.queues:
            self.walk(child)

    def flavored_names(self, res: Resource, line: int | None, what: str) -> None:
        """FL-6: every flavored name names a declared flavor that counts its resource."""
        for name in res:
            base, flavor = split(name)
            if flavor is None:
                continue
            counted = self.covered.get(flavor)
            if counted is None:
                self.add(line, f"{what}: {name!r} names flavor {flavor!r}, which is not a declared resource "
                               "flavor")
            elif base not in counted:
                self.add(line, f"{what}: {name!r}: flavor {flavor!r} does not count {base!r} (it counts "
                               f"{', '.join(sorted(counted)) or 'nothing'})")
