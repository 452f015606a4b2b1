"""Reading the Kueue parts of a partition's configuration: resource flavors (KQ-O1), a queue's flavor
list and flavor fungibility (KQ-O2), borrowing and lending limits (KQ-L) and fair sharing (KQ-S).

:class:`FlavorFields` is a :class:`~quotaplane.config._fields.FieldReader` the loader's builder extends;
like every reader method, each returns the value (or a default) and records a ``(line, reason)``
problem naming the key and the place when the value is wrong (docs/flavors.md, docs/config.md).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from quotaplane.config._fields import FieldReader, describe
from quotaplane.config.model import (
    FAIR_SHARING_STRATEGIES,
    FairSharingConfig,
    FlavorConfig,
    FungibilityConfig,
    QueueConfig,
    TaintConfig,
    TolerationConfig,
)
from quotaplane.resources import Resource

__all__ = ["FlavorFields"]

_FLAVOR_KEYS = ("name", "resources", "nodelabels", "nodetaints", "tolerations")
_TAINT_KEYS = ("key", "value", "effect")
_TOLERATION_KEYS = ("key", "operator", "value", "effect", "tolerationseconds")
_FUNGIBILITY_KEYS = ("whencanborrow", "whencanpreempt", "preference")
_FAIR_SHARING_KEYS = ("enabled", "preemptionstrategies")
_LOCAL_QUEUE_KEYS = ("namespace", "name", "queue")
#: Kueue's fungibility words, and the deprecated aliases it still reads (KQ-O2)
_WHEN_CAN_BORROW = {"maystopsearch": "MayStopSearch", "trynextflavor": "TryNextFlavor",
                    "borrow": "MayStopSearch"}
_WHEN_CAN_PREEMPT = {"maystopsearch": "MayStopSearch", "trynextflavor": "TryNextFlavor",
                     "preempt": "MayStopSearch"}
_PREFERENCE = {"borrowingoverpreemption": "BorrowingOverPreemption",
               "preemptionoverborrowing": "PreemptionOverBorrowing"}
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class FlavorFields(FieldReader):
    """The readers of the flavor, limit and fair-sharing keys (docs/flavors.md)."""

    def queue_limits(self, qm: dict[Any, Any], what: str
                     ) -> tuple[tuple[Resource | None, bool], tuple[Resource | None, bool]]:
        """The queue's ``resources.borrowinglimit`` and ``resources.lendinglimit`` (docs/config.md
        "Borrowing and lending limits"), each with whether it parsed. An amount of 0 is a limit (it
        lends or borrows nothing): a name missing from the map is unlimited, ``{vcore: 0}`` is not."""
        raw_res = qm.get("resources")
        if not isinstance(raw_res, dict):
            return (None, True), (None, True)
        out: list[tuple[Resource | None, bool]] = []
        for key in ("borrowinglimit", "lendinglimit"):
            value = raw_res.get(key)
            if value is None:
                out.append((None, True))
                continue
            out.append(self.resource(raw_res, key, what))
        return out[0], out[1]

    def queue_flavors(self, qm: dict[Any, Any], what: str) -> tuple[str, ...] | None:
        """The queue's ``flavors``: the flavor names tried for its requests, in order."""
        if qm.get("flavors") is None:
            return None
        names, lines, ok = self.names(qm, "flavors", what)
        if not ok:
            return None
        seen: set[str] = set()
        for name, nline in zip(names, lines, strict=True):
            if name in seen:
                self.add(nline, f"flavor '{name}' is listed twice in the flavors of {what}")
            seen.add(name)
        return names

    def fungibility(self, qm: dict[Any, Any], what: str) -> FungibilityConfig | None:
        """Kueue's ``flavorFungibility`` of a queue (KQ-O2, KQ-O3 rule 8)."""
        raw = qm.get("flavorfungibility")
        if raw is None:
            return None
        fwhat = f"flavorfungibility of {what}"
        line = self.key_line(qm, "flavorfungibility")
        fm = self.mapping(raw, fwhat, _FUNGIBILITY_KEYS, line)
        if fm is None:
            return None
        borrow = self.choice(fm, "whencanborrow", fwhat, _WHEN_CAN_BORROW, "MayStopSearch")
        preempt = self.choice(fm, "whencanpreempt", fwhat, _WHEN_CAN_PREEMPT, "TryNextFlavor")
        preference = self.choice(fm, "preference", fwhat, _PREFERENCE, "")
        if preference and not (borrow == preempt == "TryNextFlavor"):
            # KQ-O3 rule 8: a preference only compares flavors the search went on past
            self.add(self.key_line(fm, "preference"),
                     f"'preference' of {fwhat} may be set only when whencanborrow and whencanpreempt are "
                     "both TryNextFlavor")
        return FungibilityConfig(when_can_borrow=borrow, when_can_preempt=preempt, preference=preference,
                                 line=line)

    def choice(self, m: dict[Any, Any], key: str, what: str, words: dict[str, str], default: str) -> str:
        """One of ``words`` (case-insensitive; the value is its canonical spelling), else ``default``
        and a problem naming the allowed words."""
        value = m.get(key)
        if value is None:
            return default
        if isinstance(value, str) and value.lower() in words:
            return words[value.lower()]
        allowed = sorted(set(words.values()))
        self.add(self.key_line(m, key), f"'{key}' of {what} must be one of {', '.join(allowed)}, got "
                                         f"{describe(value)}")
        return default

    def resource_flavors(self, pm: dict[Any, Any], what: str) -> tuple[FlavorConfig, ...]:
        """The partition's ``resourceflavors`` (Kueue's ResourceFlavor objects, KQ-O1)."""
        raw = pm.get("resourceflavors")
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.add(self.key_line(pm, "resourceflavors"),
                     f"'resourceflavors' of {what} must be a list, got {describe(raw)}")
            return ()
        out: list[FlavorConfig] = []
        for i, item in enumerate(raw):
            line = self.item_line(raw, i)
            fm = self.mapping(item, f"resource flavor {i + 1} of {what}", _FLAVOR_KEYS, line)
            if fm is None:
                continue
            name = self.string(fm, "name", f"resource flavor {i + 1} of {what}")
            fwhat = f"resource flavor '{name}' of {what}" if name else f"resource flavor {i + 1} of {what}"
            resources, res_lines, _ = self.names(fm, "resources", fwhat)
            flavor = FlavorConfig(
                name=name, resources=resources, node_labels=self.labels(fm, "nodelabels", fwhat),
                node_taints=self.taints(fm, fwhat), tolerations=self.tolerations(fm, "tolerations", fwhat),
                line=line)
            self.index.set(flavor, "name", self.key_line(fm, "name") if "name" in fm else line)
            self.index.set(flavor, "resources", self.key_line(fm, "resources") if "resources" in fm else line)
            for j, rline in enumerate(res_lines):
                self.index.set(flavor, f"resources[{j}]", rline)
            out.append(flavor)
        return tuple(out)

    def labels(self, m: dict[Any, Any], key: str, what: str) -> MappingProxyType[str, str]:
        """A map of label name to value, both strings."""
        value = m.get(key)
        if value is None:
            return MappingProxyType({})
        if not isinstance(value, dict):
            self.add(self.key_line(m, key), f"'{key}' of {what} must be a mapping of label to value, got "
                                             f"{describe(value)}")
            return MappingProxyType({})
        out: dict[str, str] = {}
        for name, raw in value.items():
            if not isinstance(name, str) or not isinstance(raw, str):
                self.add(self.key_line(value, name), f"label {name!r} of {what} must be a string with a "
                                                     f"string value (quote it), got {describe(raw)}")
                continue
            out[name] = raw
        return MappingProxyType(dict(sorted(out.items())))

    def taints(self, fm: dict[Any, Any], what: str) -> tuple[TaintConfig, ...]:
        raw = fm.get("nodetaints")
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.add(self.key_line(fm, "nodetaints"), f"'nodetaints' of {what} must be a list, got "
                                                       f"{describe(raw)}")
            return ()
        out: list[TaintConfig] = []
        for i, item in enumerate(raw):
            twhat = f"taint {i + 1} of {what}"
            tm = self.mapping(item, twhat, _TAINT_KEYS, self.item_line(raw, i))
            if tm is None:
                continue
            key = self.string(tm, "key", twhat)
            if not key:
                self.add(self.item_line(raw, i), f"{twhat} needs a key")
            effect = self.string(tm, "effect", twhat)
            if effect not in _TAINT_EFFECTS:
                self.add(self.key_line(tm, "effect") if "effect" in tm else self.item_line(raw, i),
                         f"'effect' of {twhat} must be one of {', '.join(_TAINT_EFFECTS)}, got "
                         f"{describe(tm.get('effect'))}")
            out.append(TaintConfig(key=key, value=self.string(tm, "value", twhat), effect=effect))
        return tuple(out)

    def tolerations(self, m: dict[Any, Any], key: str, what: str) -> tuple[TolerationConfig, ...]:
        raw = m.get(key)
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.add(self.key_line(m, key), f"'{key}' of {what} must be a list, got {describe(raw)}")
            return ()
        out: list[TolerationConfig] = []
        for i, item in enumerate(raw):
            twhat = f"toleration {i + 1} of {what}"
            tm = self.mapping(item, twhat, _TOLERATION_KEYS, self.item_line(raw, i))
            if tm is not None:
                out.append(self.toleration(tm, twhat, self.item_line(raw, i)))
        return tuple(out)

    def toleration(self, tm: dict[Any, Any], twhat: str, line: int | None) -> TolerationConfig:
        """One toleration, as Kubernetes validates it (an operator Equal or Exists; Exists takes no value;
        an empty key only with Exists; an effect of a taint's or none)."""
        operator = self.string(tm, "operator", twhat, "Equal")
        if operator not in ("Equal", "Exists"):
            self.add(self.key_line(tm, "operator"), f"'operator' of {twhat} must be Equal or Exists, "
                                                    f"got {describe(operator)}")
        effect = self.string(tm, "effect", twhat)
        if effect and effect not in _TAINT_EFFECTS:
            self.add(self.key_line(tm, "effect"), f"'effect' of {twhat} must be empty or one of "
                                                  f"{', '.join(_TAINT_EFFECTS)}, got {describe(effect)}")
        tkey = self.string(tm, "key", twhat)
        value = self.string(tm, "value", twhat)
        if operator == "Exists" and value:
            self.add(self.key_line(tm, "value"), f"{twhat}: a toleration with operator Exists has no value")
        if not tkey and operator != "Exists":
            self.add(line, f"{twhat}: an empty key needs operator Exists")
        return TolerationConfig(key=tkey, operator=operator, value=value, effect=effect)

    def fair_sharing(self, pm: dict[Any, Any], what: str) -> FairSharingConfig | None:
        """The partition's ``fairsharing`` (Kueue's configuration ``fairSharing``, KQ-S)."""
        raw = pm.get("fairsharing")
        if raw is None:
            return None
        fwhat = f"fairsharing of {what}"
        line = self.key_line(pm, "fairsharing")
        fm = self.mapping(raw, fwhat, _FAIR_SHARING_KEYS, line)
        if fm is None:
            return None
        enabled = self.boolean(fm, "enabled", fwhat) if "enabled" in fm else True
        strategies: tuple[str, ...] = FAIR_SHARING_STRATEGIES
        if "preemptionstrategies" in fm:
            names, _, ok = self.names(fm, "preemptionstrategies", fwhat)
            # KQ-S: Kueue accepts exactly these three lists (pkg/config/validation.go)
            allowed = ((FAIR_SHARING_STRATEGIES[0],), (FAIR_SHARING_STRATEGIES[1],), FAIR_SHARING_STRATEGIES)
            if ok and names in allowed:
                strategies = names
            elif ok:
                self.add(self.key_line(fm, "preemptionstrategies"),
                         f"'preemptionstrategies' of {fwhat} must be one of "
                         + "; ".join("[" + ", ".join(a) + "]" for a in allowed)
                         + f", got [{', '.join(names)}]")
        return FairSharingConfig(enabled=enabled, preemption_strategies=strategies, line=line)

    def local_queues(self, pm: dict[Any, Any], what: str, root: QueueConfig | None) -> list[dict[str, str]]:
        """The partition's ``localqueues`` (Kueue's LocalQueues, docs/from-kueue.md): each
        ``{namespace, name, queue}`` names a leaf queue, once per namespace and name."""
        raw = pm.get("localqueues")
        if raw is None:
            return []
        lwhat = f"localqueues of {what}"
        line = self.key_line(pm, "localqueues")
        if not isinstance(raw, list):
            self.add(line, f"{lwhat} must be a list, got {describe(raw)}")
            return []
        out: list[dict[str, str]] = []
        seen: set[tuple[str, str]] = set()
        for i, item in enumerate(raw):
            iwhat = f"local queue {i + 1} of {what}"
            at = self.item_line(raw, i)
            m = self.mapping(item, iwhat, _LOCAL_QUEUE_KEYS, at)
            if m is None:
                continue
            ns, name, queue = (self.string(m, k, iwhat) for k in _LOCAL_QUEUE_KEYS)
            target = root.find(queue) if root is not None and queue else None
            if not ns or not name or target is None or not target.is_leaf:
                self.add(at, f"{iwhat} needs a namespace, a name and the path of a leaf queue "
                             f"(got {ns!r}, {name!r}, {queue!r})")
            elif (ns, name) in seen:
                self.add(at, f"{iwhat}: {ns}/{name} is listed twice")
            else:
                seen.add((ns, name))
                out.append({"namespace": ns, "name": name, "queue": target.path})
        return out
