"""The quota-forest admission policy: a :class:`~quotaplane.forest.QuotaManager` behind QuotaPolicy.

Last in the admission path (decision Q2: queue → user/group → elastic → forest). An application's
allocation becomes a forest consumer whose id is the allocation key. Where it goes comes from the
application's tags:

* ``quotaplane.io/tree.<tree>`` = the group node (gNode, a leaf) of the consumer in tree ``<tree>``;
  one tag per tree;
* ``quotaplane.io/forest`` = the forest to allocate on (optional: the partition's default forest, or
  the forest all tagged trees belong to; a single tagged tree outside any forest is a tree call);
* ``quotaplane.io/consumer-type`` = the consumer ``type`` (an integer, default 0).

The request vector of each tree is read from the allocation's resource by the tree's resource names (a
tree resource ``cpu`` that the allocation does not name reads ``vcore``, i.e. milli-cores, as MCAD
does); priority is the allocation's; ``unPreemptable`` is ``not preemptible``. An application without
any of these tags is not subject to quota trees.

``check_replacement`` checks an allocation as if another were released, restoring that one exactly.
``check`` runs ``try_allocate`` + ``undo`` under the manager lock and reports a ``forest.quota``
violation whose path is ``<tree>/<node>`` (where the allocation stopped) and whose resource is what
was missing there. ``apply`` allocates (with a snapshot, so ``undo`` is exact while nothing else
changed); consumers it preempted are returned by :meth:`ForestPolicy.take_preempted` so the partition
releases them. ``undo`` / ``release`` de-allocate and forget the consumer.

Partition extension ``quotatrees`` (``build_policy``)::

    quotatrees:
      trees: [<QuotaTree object or JSON text>, ...]
      forests: {Forest-1: [ContextTree, ServiceTree]}     # optional, trees in this order
      defaultforest: Forest-1                              # optional
      mode: normal                                         # optional: normal (default) | maintenance

(a plain list is taken as ``trees``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from quotaplane.config.model import PartitionConfig
from quotaplane.forest import (
    AllocationResponse,
    ConsumerInfo,
    ConsumerTreeSpec,
    Mode,
    QuotaError,
    QuotaManager,
)
from quotaplane.forest.manager import Withdrawal
from quotaplane.policies.protocol import AdmissionRequest, Eviction, QuotaPolicy, Violation
from quotaplane.policies.registry import Plugin
from quotaplane.resources import Resource

__all__ = ["CONSUMER_TYPE_TAG", "FOREST_TAG", "PLUGIN", "TREE_TAG_PREFIX", "ForestPolicy", "build_policy"]

FOREST_TAG = "quotaplane.io/forest"
TREE_TAG_PREFIX = "quotaplane.io/tree."
CONSUMER_TYPE_TAG = "quotaplane.io/consumer-type"
_WHAT_IF_ID = "\x00what-if"

# (kind "tree" | "forest", tree or forest name, {tree: group})
_Target = tuple[str, str, dict[str, str]]


class _Refusal(Exception):
    def __init__(self, violation: Violation) -> None:
        super().__init__(violation.message)
        self.violation = violation


def _what(target: _Target) -> str:
    """How a message names where an allocation goes: ``quota forest 'F'`` or ``quota tree 'T'``."""
    return f"quota forest {target[1]!r}" if target[0] == "forest" else f"quota tree {target[1]!r}"


def _waiting(target: _Target, victims: list[str]) -> Violation:
    """Held preemption: the request fits only once ``victims``, held, are gone."""
    return _violation(target[1], f"the request fits {_what(target)} only by preempting "
                                 f"{', '.join(victims)}: it waits until they are gone")


def _violation(path: str, message: str, shortfall: Mapping[str, int] | None = None) -> Violation:
    return Violation(policy="forest", code="forest.quota", path=path, message=message,
                     resource=Resource(dict(shortfall)) if shortfall else None)


class ForestPolicy(QuotaPolicy):
    """Adapter from the admission protocol to one partition's :class:`QuotaManager`."""

    __slots__ = ("_last", "_preempted", "_targets", "default_forest", "holds", "manager")

    key: ClassVar[str] = "quotatrees"
    checks_replacement: ClassVar[bool] = True

    def __init__(self, manager: QuotaManager, *, default_forest: str | None = None) -> None:
        self.name = "forest"
        self.manager = manager
        self.default_forest = default_forest
        self._targets: dict[str, _Target] = {}      # allocation key -> where it is allocated
        self._preempted: list[str] = []
        #: the partition holds what it preempts (:meth:`hold_victims`)
        self.holds = False
        # the last successful apply: (key, target, [(victim key, info, target)])
        self._last: tuple[str, _Target, list[tuple[str, ConsumerInfo, _Target]]] | None = None

    @classmethod
    def from_definitions(cls, trees: Sequence[str | Mapping[str, Any]],
                         forests: Mapping[str, Sequence[str]] | None = None, *,
                         default_forest: str | None = None, mode: Mode = Mode.NORMAL) -> ForestPolicy:
        """A policy over a new manager holding ``trees`` (JSON text or objects) and ``forests``."""
        qm = QuotaManager()
        for t in trees:
            _add(qm, t)
        for fname, members in (forests or {}).items():
            qm.add_forest(fname)
            for tree in members:
                qm.add_tree_to_forest(fname, tree)
        if default_forest is not None and default_forest not in qm.forest_names():
            raise QuotaError(f"default forest {default_forest} is not defined")
        qm.set_mode(mode)
        return cls(qm, default_forest=default_forest)

    # ------------------------------------------------------------------------------------ mapping
    def target_of(self, request: AdmissionRequest) -> _Target | None:
        """Where ``request`` is allocated: (kind, name, {tree: group}); None if no tree applies.

        Raises ``_Refusal`` for tags that name unknown trees or forests.
        """
        tags = request.tags or {}
        groups = _tree_groups(tags)
        forest = tags.get(FOREST_TAG) or None
        if not groups and forest is None:
            return None
        qm = self.manager
        known = set(qm.tree_names())
        for tree in groups:
            if tree not in known:
                raise _Refusal(_violation(tree, f"quota tree {tree!r} named by the application "
                                                "does not exist"))
        if forest is None:
            if len(groups) == 1 and qm.tree_forest(next(iter(groups))) is None:
                return "tree", next(iter(groups)), groups
            forest = self._common_forest(groups)
        return "forest", forest, self._in_forest(forest, groups)

    def _common_forest(self, groups: Mapping[str, str]) -> str:
        """The one forest every tagged tree belongs to, else the default forest (or a refusal)."""
        homes = {self.manager.tree_forest(t) for t in groups}
        forest = homes.pop() if len(homes) == 1 and None not in homes else self.default_forest
        if forest is None:
            raise _Refusal(_violation(",".join(groups), "the quota trees "
                                      f"{', '.join(groups)} belong to no common forest; tag "
                                      f"{FOREST_TAG}"))
        return forest

    def _in_forest(self, forest: str, groups: Mapping[str, str]) -> dict[str, str]:
        """The groups of the trees of ``forest`` (B1: the intersection); a refusal when none."""
        if forest not in self.manager.forest_names():
            raise _Refusal(_violation(forest, f"quota forest {forest!r} does not exist"))
        members = self.manager.forest_tree_names(forest)
        inside = {t: g for t, g in groups.items() if t in members}
        if not inside:
            raise _Refusal(_violation(forest, "the application names no group in any tree of forest "
                                              f"{forest!r}"))
        return inside

    def _info(self, cid: str, request: AdmissionRequest, groups: Mapping[str, str]) -> ConsumerInfo:
        res = request.resource
        raw_type = (request.tags or {}).get(CONSUMER_TYPE_TAG, "0")
        try:
            ctype = int(raw_type)
        except ValueError:
            raise _Refusal(_violation(CONSUMER_TYPE_TAG,
                                      f"consumer type {raw_type!r} is not an integer")) from None
        specs: list[ConsumerTreeSpec] = []
        for tree, group in groups.items():
            amounts: dict[str, int] = {}
            for name in self.manager.tree_info(tree)["resource_names"]:
                if name in res:
                    amounts[name] = res[name]
                elif name == "cpu":
                    amounts[name] = res.get("vcore", 0)
            specs.append(ConsumerTreeSpec(tree, group, amounts, priority=request.priority, type=ctype,
                                          unpreemptable=not request.preemptible))
        return ConsumerInfo(cid, specs)

    def _refused(self, r: AllocationResponse, target: _Target) -> Violation:
        tree = r.failed_tree or next(iter(target[2]))
        node = r.failed_node or target[2].get(tree, "")
        what = _what(target)
        missing = ", ".join(f"{k} {v}" for k, v in sorted(r.shortfall.items()))
        message = (f"the request does not fit {what} at node {node!r} of tree {tree!r}"
                   + (f" (short by {missing})" if missing else "") + f":{r.message.rstrip()}")
        return _violation(f"{tree}/{node}", message, r.shortfall)

    def _allocate(self, target: _Target, cid: str, keep: bool) -> AllocationResponse:
        kind, name, _ = target
        qm = self.manager
        if kind == "forest":
            return qm.try_allocate_forest(name, cid) if keep else qm.allocate_forest(name, cid)
        if keep and qm.get_mode() is Mode.NORMAL:
            return qm.try_allocate(name, cid)
        return qm.allocate(name, cid)

    def _undo(self, target: _Target, cid: str) -> bool:
        kind, name, _ = target
        if kind == "forest":
            return self.manager.undo_allocate_forest(name, cid)
        return self.manager.get_mode() is Mode.NORMAL and self.manager.undo_allocate(name, cid)

    def _deallocate(self, target: _Target, cid: str) -> None:
        kind, name, groups = target
        if kind == "forest":
            for tree in groups:
                if self.manager.is_allocated(tree, cid):
                    self.manager.deallocate(tree, cid)
        elif self.manager.is_allocated(name, cid):
            self.manager.deallocate(name, cid)

    # ------------------------------------------------------------------------------------ protocol
    def check(self, request: AdmissionRequest) -> list[Violation]:
        """The ``forest.quota`` violation if ``request`` does not fit now, else ``[]``. Changes nothing.

        While victims are held (:meth:`hold_victims`), a request that fits only by preempting is
        refused too: it waits until the victims :meth:`victims_for` names are gone."""
        trial = self._trial(request)
        if isinstance(trial, list):
            return trial
        r, target = trial
        if not r.allocated:
            return [self._refused(r, target)]
        victims = self._victims(r)
        return [_waiting(target, victims)] if self.holds and victims else []

    def _trial(self, request: AdmissionRequest) -> tuple[AllocationResponse, _Target] | list[Violation]:
        """Try ``request`` on its trees and undo it: the manager's answer and where it went, or the
        violations that refuse it before any try (``[]``: no tree applies). Changes nothing."""
        try:
            target = self.target_of(request)
            if target is None:
                return []
            cid = request.allocation_key or _WHAT_IF_ID
            qm = self.manager
            with qm.transaction():
                if qm.has_consumer(cid):
                    return [_violation(target[1], f"allocation {cid!r} is already a quota-tree consumer")]
                qm.add_consumer(self._info(cid, request, target[2]))
                try:
                    if target[0] == "tree" and qm.get_mode() is not Mode.NORMAL:
                        # Maintenance: the allocation would be forced at the group node
                        if target[2][target[1]] in qm.node_ids(target[1]):
                            return []
                        node = target[2][target[1]]
                        return [_violation(f"{target[1]}/{node}",
                                           f"node {node!r} does not exist in tree {target[1]!r}")]
                    r = self._allocate(target, cid, keep=True)
                    self._undo(target, cid)
                finally:
                    qm.remove_consumer(cid)
            return r, target
        except _Refusal as refusal:
            return [refusal.violation]
        except QuotaError as exc:
            return [_violation(request.allocation_key, str(exc))]

    def _victims(self, r: AllocationResponse) -> list[str]:
        """The allocations an allocation answered ``r`` would preempt (MCAD's order)."""
        return [vid for vid in r.preempted_ids if vid in self._targets]

    def hold_victims(self, on: bool) -> None:
        """Held preemption (issue 31 #3, the Kubernetes front): a request that fits only by preempting
        is refused and its victims are proposed by :meth:`victims_for`; the partition holds them until
        they are released, and the request fits once they are gone. Off: :meth:`apply` preempts and
        the partition releases the victims at once (MCAD)."""
        self.holds = on

    def victims_for(self, request: AdmissionRequest, reasons: list[Violation]) -> Eviction | None:
        """While victims are held: the allocations MCAD would preempt to admit ``request`` (in its
        order), and why; None otherwise. Changes nothing."""
        if not self.holds:
            return None
        trial = self._trial(request)
        if isinstance(trial, list) or not trial[0].allocated:
            return None
        r, target = trial
        victims = self._victims(r)
        if not victims:
            return None
        what = _what(target)
        reason = Violation(policy="forest", code="forest.preempted", path=target[1],
                           message=f"preempted by {what} to admit {request.allocation_key!r}")
        return Eviction(reason=reason, keys=tuple(victims))

    def check_replacement(self, old: AdmissionRequest, new: AdmissionRequest) -> list[Violation]:
        """:meth:`check` of ``new`` as if the allocation ``old`` were released first. Changes nothing.

        Used for a gang placeholder replacement (seed 001): ``old`` is withdrawn from the trees with an
        exact undo log, ``new`` is checked, and ``old`` is restored at its very nodes and positions.
        Releasing and re-applying ``old`` instead would move it to the end of its node's consumer
        list, changing the preemption order (decision F1) and a state the journal, which records no
        refusal, cannot reproduce.
        """
        qm = self.manager
        with qm.transaction():
            if old.allocation_key not in self._targets or not qm.has_consumer(old.allocation_key):
                return self.check(new)
            withdrawal = qm.withdraw(old.allocation_key)
            try:
                return self.check(new)
            finally:
                qm.restore(withdrawal)

    def withdraw(self, request: AdmissionRequest) -> object:
        """Take the consumer out of its trees with an exact undo log (a preemption trial); ``restore``
        puts it back at its very nodes and positions (see :meth:`check_replacement` for why)."""
        qm = self.manager
        with qm.transaction():
            if request.allocation_key not in self._targets or not qm.has_consumer(request.allocation_key):
                return None
            return qm.withdraw(request.allocation_key)

    def restore(self, token: object) -> None:
        """Undo :meth:`withdraw` exactly."""
        if token is not None:
            qm = self.manager
            assert isinstance(token, Withdrawal)
            with qm.transaction():
                qm.restore(token)

    def apply(self, request: AdmissionRequest) -> list[Violation]:
        """Allocate the consumer; on refusal return the violation and change nothing."""
        try:
            target = self.target_of(request)
            if target is None:
                return []
            cid = request.allocation_key
            qm = self.manager
            with qm.transaction():
                if qm.has_consumer(cid):
                    return [_violation(target[1], f"allocation {cid!r} is already a quota-tree consumer")]
                qm.add_consumer(self._info(cid, request, target[2]))
                try:
                    r = self._allocate(target, cid, keep=True)
                except BaseException:
                    qm.remove_consumer(cid)
                    raise
                if not r.allocated:
                    qm.remove_consumer(cid)
                    return [self._refused(r, target)]
                if self.holds and self._victims(r):     # held preemption: check() refused it already
                    self._undo(target, cid)
                    qm.remove_consumer(cid)
                    return [_waiting(target, self._victims(r))]
                self._targets[cid] = target
                self._last = (cid, target, self._let_go(r.preempted_ids))
                self._preempted.extend(r.preempted_ids)
            return []
        except _Refusal as refusal:
            return [refusal.violation]
        except QuotaError as exc:
            return [_violation(request.allocation_key, str(exc))]

    def _let_go(self, preempted_ids: Sequence[str]) -> list[tuple[str, ConsumerInfo, _Target]]:
        """Drop the consumers the manager preempted for an admission; each with what undoes it."""
        qm = self.manager
        victims: list[tuple[str, ConsumerInfo, _Target]] = []
        for vid in preempted_ids:
            vt = self._targets.pop(vid, None)
            if vt is not None:
                victims.append((vid, qm.consumer_info(vid), vt))
                self._deallocate(vt, vid)      # e.g. trees outside the forest it was preempted in
                qm.remove_consumer(vid)
        return victims

    def undo(self, request: AdmissionRequest) -> None:
        """Reverse a successful :meth:`apply`: exactly (victims back) while nothing else changed since."""
        cid = request.allocation_key
        qm = self.manager
        with qm.transaction():
            target = self._targets.pop(cid, None)
            if target is None:
                return
            last = self._last
            self._last = None
            if last is not None and last[0] == cid and self._undo(target, cid):
                for vid, info, vt in last[2]:
                    qm.add_consumer(info)
                    self._targets[vid] = vt
                    if vid in self._preempted:
                        self._preempted.remove(vid)
            else:
                self._deallocate(target, cid)
            qm.remove_consumer(cid)

    def release(self, request: AdmissionRequest, *, last_allocation: bool) -> None:
        """Give back an allocation admitted earlier (de-allocate; forget the consumer)."""
        cid = request.allocation_key
        qm = self.manager
        with qm.transaction():
            target = self._targets.pop(cid, None)
            if target is None:
                return
            if self._last is not None and self._last[0] == cid:
                self._last = None
            self._deallocate(target, cid)
            if qm.has_consumer(cid):
                qm.remove_consumer(cid)

    def take_preempted(self) -> list[str]:
        """Allocation keys preempted by the applies since the last call (preemption order); clears."""
        out, self._preempted = self._preempted, []
        return out

    def forest_users(self, forest: str, tree: str | None = None) -> list[str]:
        """Allocation keys allocated through ``forest`` (only those holding ``tree``, if given), sorted."""
        with self.manager.transaction():
            return sorted(k for k, t in self._targets.items()
                          if t[0] == "forest" and t[1] == forest and (tree is None or tree in t[2]))

    # ------------------------------------------------------------------------------------ hooks
    def engine(self) -> QuotaManager:
        """The quota forest manager this policy adapts (the quota tree routes serve its API)."""
        return self.manager

    def dump_state(self) -> dict[str, Any]:
        """The manager's deterministic state plus which allocation sits on which trees."""
        with self.manager.transaction():
            return {"manager": self.manager.dump_state(),
                    "allocations": {k: {"kind": t[0], "name": t[1], "groups": dict(t[2])}
                                    for k, t in sorted(self._targets.items())}}

    def validate_update(self, partition_config: PartitionConfig) -> None:
        """Refuse, before anything is applied, a reload that would drop trees or forests in use.

        Called by the scheduler before the config event is journalled (and again by
        :meth:`update_config`). A tree that leaves the config while consumers are allocated on it, a
        forest that leaves it while allocations were made on it, and a tree that leaves a forest
        holding forest allocations on it raise :class:`QuotaError` (a ``ValueError``: a 400 over
        REST); the definitions must also build on their own (same checks as a fresh policy).
        """
        opts = _options(getattr(partition_config, "extensions", {}).get("quotatrees"))
        opts.policy()
        self._refusals(opts)

    def _refusals(self, opts: TreeOptions) -> None:
        with self.manager.transaction():
            problems = self._trees_in_use(opts) + self._forests_in_use(opts)
            if problems:
                raise QuotaError("; ".join(dict.fromkeys(problems)))

    def _trees_in_use(self, opts: TreeOptions) -> list[str]:
        qm = self.manager
        wanted = {_tree_of(doc) for doc in opts.trees}
        return [f"quota tree {tree!r} still has allocated consumers "
                f"({', '.join(qm.allocated_consumers(tree))}); release them first"
                for tree in qm.tree_names() if tree not in wanted and qm.allocated_consumers(tree)]

    def _forests_in_use(self, opts: TreeOptions) -> list[str]:
        qm = self.manager
        problems: list[str] = []
        for fname in qm.forest_names():
            users = self.forest_users(fname)
            if fname not in opts.forests:
                if users:
                    problems.append(f"quota forest {fname!r} still has allocated consumers "
                                    f"({', '.join(users)}); release them first")
                continue
            for tree in qm.forest_tree_names(fname):
                on = [k for k in users if tree in self._targets[k][2]]
                if tree not in opts.forests[fname] and on:
                    problems.append(f"quota tree {tree!r} cannot leave forest {fname!r}: forest "
                                    f"consumers are allocated on it ({', '.join(on)})")
        return problems

    def update_config(self, partition_config: PartitionConfig) -> None:
        """A config reload kept ``quotatrees``: trees, forests and mode become exactly the configured ones.

        All-or-nothing: the whole definition is first built on its own and checked by
        :meth:`validate_update` (a tree or forest still in use cannot be removed), then trees no
        longer listed are deleted, new ones added, the caches of the others replaced by their new
        definitions, forest memberships set in the configured order, the mode and default forest
        set, and everything updated (``update_all``). Consumers the update leaves unallocated are
        de-allocated everywhere and reported through :meth:`take_preempted`.
        """
        opts = _options(getattr(partition_config, "extensions", {}).get("quotatrees"))
        fresh = opts.policy().manager
        with self.manager.transaction():
            self._refusals(opts)
            self._sync_trees(opts, fresh)
            self._sync_forests(opts)
            self.default_forest = opts.default_forest
            self.manager.set_mode(opts.mode)
            self._drop(self.manager.update_all())

    def _sync_trees(self, opts: TreeOptions, fresh: QuotaManager) -> None:
        """Trees no longer listed deleted (none in use: checked), new ones added, others' caches replaced."""
        qm = self.manager
        wanted = fresh.tree_names()
        for fname in qm.forest_names():
            if fname not in opts.forests:
                qm.delete_forest(fname)          # its trees stay (and may join another forest)
        for tree in qm.tree_names():
            if tree not in wanted:
                qm.delete_tree(tree)
        for doc in opts.trees:
            name = _tree_of(doc)
            if name in qm.tree_names():
                qm.get_tree_cache(name).replace(fresh.get_tree_cache(name))
            else:
                _add(qm, doc)

    def _sync_forests(self, opts: TreeOptions) -> None:
        """Forest memberships exactly as configured, in the configured order."""
        qm = self.manager
        for fname, members in opts.forests.items():
            if fname not in qm.forest_names():
                qm.add_forest(fname)
            if qm.forest_tree_names(fname) == members:
                continue
            for tree in qm.forest_tree_names(fname):
                qm.delete_tree_from_forest(fname, tree)
        for fname, members in opts.forests.items():
            for tree in members:
                home = qm.tree_forest(tree)
                if home == fname:
                    continue
                if home is not None:             # moved from another forest (no forest consumer)
                    qm.delete_tree_from_forest(home, tree)
                qm.add_tree_to_forest(fname, tree)

    def _drop(self, dropped: list[str]) -> None:
        """Consumers the update left unallocated: de-allocated everywhere, reported as preempted."""
        for cid in dropped:
            target = self._targets.pop(cid, None)
            if target is not None:
                self._deallocate(target, cid)
                self.manager.remove_consumer(cid)
                self._preempted.append(cid)

@dataclass(frozen=True, slots=True)
class TreeOptions:
    """The ``quotatrees`` partition extension, read (see the module docstring)."""

    trees: list[str | dict[str, Any]] = field(default_factory=list)
    forests: dict[str, list[str]] = field(default_factory=dict)
    default_forest: str | None = None
    mode: Mode = Mode.NORMAL

    def policy(self) -> ForestPolicy:
        """A fresh policy holding exactly these definitions (their own checks included)."""
        return ForestPolicy.from_definitions(self.trees, self.forests, default_forest=self.default_forest,
                                             mode=self.mode)


def _options(raw: Any) -> TreeOptions:
    """Read the ``quotatrees`` partition extension (see the module docstring)."""
    if raw is None:
        return TreeOptions()
    if isinstance(raw, list):
        raw = {"trees": raw}
    if not isinstance(raw, Mapping):
        raise QuotaError("quotatrees must be a list of trees or a mapping with 'trees'")
    trees = raw.get("trees") or []
    if not isinstance(trees, list):
        raise QuotaError("quotatrees.trees must be a list")
    default = raw.get("defaultforest", raw.get("defaultForest"))
    return TreeOptions(trees=[t if isinstance(t, str) else _plain(t) for t in trees],
                       forests=_forests_option(raw.get("forests") or {}),
                       default_forest=str(default) if default else None, mode=_mode_option(raw))


def _forests_option(forests: Any) -> dict[str, list[str]]:
    """``quotatrees.forests``: each forest's tree names."""
    if not isinstance(forests, Mapping) or not all(isinstance(v, list) for v in forests.values()):
        raise QuotaError("quotatrees.forests must map a forest name to a list of tree names")
    return {str(k): [str(t) for t in v] for k, v in forests.items()}


def _mode_option(raw: Mapping[str, Any]) -> Mode:
    """``quotatrees.mode``: normal (the default) or maintenance."""
    mode = str(raw.get("mode", "normal")).lower()
    if mode not in ("normal", "maintenance"):
        raise QuotaError(f"quotatrees.mode must be normal or maintenance, not {mode!r}")
    return Mode.NORMAL if mode == "normal" else Mode.MAINTENANCE


def _tree_groups(tags: Mapping[str, str]) -> dict[str, str]:
    """The ``{tree: group}`` an application's tags name (``quotaplane.io/tree.<tree>: <group>``), by tree."""
    return {k[len(TREE_TAG_PREFIX):]: v for k, v in sorted(tags.items())
            if k.startswith(TREE_TAG_PREFIX) and len(k) > len(TREE_TAG_PREFIX)}


def _tree_of(doc: str | Mapping[str, Any]) -> str:
    """The name of a tree definition (JSON text or object)."""
    return str(QuotaManager().add_tree_from_string(doc) if isinstance(doc, str)
               else QuotaManager().add_tree_from_dict(doc))


def _add(qm: QuotaManager, doc: str | Mapping[str, Any]) -> str:
    return qm.add_tree_from_string(doc) if isinstance(doc, str) else qm.add_tree_from_dict(doc)


def _plain(value: Any) -> Any:
    """Plain dicts/lists (config extensions may hold read-only mappings)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def build_policy(partition_config: Any, context: Any) -> ForestPolicy:
    """Builder used by ``quotaplane.policies.registry`` for the ``quotatrees`` extension key."""
    return _options(getattr(partition_config, "extensions", {}).get("quotatrees")).policy()


def _check(raw: Any) -> list[str]:
    try:
        _options(raw).policy()
    except ValueError as exc:
        return [str(exc)]
    return []


#: the ``quotatrees`` key's plug-in (:mod:`quotaplane.policies.registry`)
PLUGIN = Plugin("quotatrees", 40, build_policy, codes=("forest.quota",), checker=_check)
