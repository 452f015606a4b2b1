"""Standing: "what is my share right now, and why is my job not admitted?" in one answer (issue 17 #1).

For a queue, a user, a group or an elastic quota: what it is guaranteed (or its min) and its max, what
it uses and what its waiting asks want, what it **borrows** (use above its guarantee or min) and from
whom where the model knows (siblings whose guarantee is unused), what it **lends** (guarantee it does
not use that others use now), the elastic runtime, running applications against their limits, and its
waiting asks with their reasons and their position in the scheduling order.

The position is where the next scheduling cycle would try the ask if none before it were allocated
(:func:`~quotaplane.scheduling.order.candidates` over the current usage): 1 is tried first.
Everything here reads; nothing changes (the caller holds the partition lock).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from quotaplane.errors import InputError
from quotaplane.scheduling.positions import positions
from quotaplane.scheduling.questions import reasons_of

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.scheduling.asks import Ask
    from quotaplane.state.handlers import PartitionState

__all__ = ["KINDS", "standing"]


#: what a standing can be asked for
KINDS = ("queue", "user", "group", "quota")


def _sub(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """Per resource of ``a``: ``a - b`` where positive."""
    return {k: v - b.get(k, 0) for k, v in sorted(a.items()) if v - b.get(k, 0) > 0}


def _borrowed(used: Mapping[str, int], guaranteed: Mapping[str, int]) -> dict[str, int]:
    """Use above the guarantee, judged per flavored resource (docs/flavors.md; KQ: borrowing is per flavor
    and resource): a plain name used through flavors (``nvidia.com/gpu`` = the sum of its
    ``nvidia.com/gpu@…``) and not guaranteed itself borrows the sum of what its flavors borrow, not all
    its use.
    Without flavors this is :func:`_sub`."""
    out = _sub(used, guaranteed)
    for name in [k for k in out if "@" not in k and k not in guaranteed]:
        flavored = [k for k in used if k.startswith(name + "@")]
        if flavored:
            total = sum(out.get(k, 0) for k in flavored)
            if total:
                out[name] = total
            else:
                del out[name]
    return out


def _min(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {k: min(v, b[k]) for k, v in sorted(a.items()) if k in b and min(v, b[k]) > 0}


def _sum(items: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in items:
        for k, v in r.items():
            out[k] = out.get(k, 0) + v
    return dict(sorted(out.items()))


def _positions(state: PartitionState, asks: list[Ask]) -> dict[str, int]:
    """The positions of ``asks`` alone (:func:`~quotaplane.scheduling.positions.positions`: the global
    order is never built; issue 39)."""
    root = state.queues.queue("root")
    if root is None or not asks:
        return {}
    return positions(state.waiting.asks, root, state.apps, asks, rank=state.history.rank(),
                     quiet=state.waiting.quiet_asks(state.apps), stateaware=state.queues.stateaware_leaves())


def _waiting(state: PartitionState, asks: list[Ask], at: int) -> list[dict[str, Any]]:
    positions_of = _positions(state, asks)
    out = []
    for ask in asks:
        app = state.apps.get(ask.application_id)
        out.append({"allocationKey": ask.allocation_key, "applicationID": ask.application_id,
                    "queue": app.queue_path if app is not None else "",
                    "resource": dict(sorted(ask.resource.items())), "priority": ask.priority,
                    "position": positions_of.get(ask.allocation_key),
                    "reasons": [v.to_dict() for v in reasons_of(state, ask, at)]})
    out.sort(key=lambda w: (w["position"] is None, w["position"] or 0, w["allocationKey"]))
    return out


def _asks_of(state: PartitionState, apps: Iterable[str]) -> list[Ask]:
    """The waiting asks of ``apps`` (O(their asks): the other waiting asks are not looked at)."""
    waiting = state.waiting.asks
    return [ask for a in apps for ask in waiting.of_application_unsorted(a)]


def _apps_below(state: PartitionState, path: str) -> list[str]:
    """The applications with waiting asks placed in queue ``path`` or below it."""
    waiting = state.waiting.asks
    stack = [q] if (q := state.queues.queue(path)) is not None else []
    out: list[str] = []
    while stack:
        q = stack.pop()
        if q.is_leaf:
            out += [a for a in q.applications if waiting.has_application(a)]
        else:
            stack.extend(q.children.values())
    return out


def _queue_view(state: PartitionState, path: str) -> dict[str, Any]:
    dao = state.queues.dao(path, subtree=False, partition="")
    guaranteed = dao.get("guaranteedResource") or {}
    used = dao.get("allocatedResource") or {}
    out: dict[str, Any] = {
        "queue": path, "guaranteed": guaranteed, "max": dao.get("maxResource") or {}, "used": used,
        "waiting": dao.get("pendingResource") or {},
        "borrowed": _borrowed(used, guaranteed) if guaranteed else {},
        "runningApplications": dao.get("runningApps", 0), "maxApplications": dao.get("maxRunningApps", 0)}
    parent = path.rpartition(".")[0]
    siblings = []
    if parent:
        pdao = state.queues.dao(parent, subtree=True, partition="")
        siblings = [c for c in pdao.get("children") or () if c["queuename"] != path]
    # lenders: siblings whose guarantee is partly unused; what they lend is what the others borrow.
    # A flavored resource is lent only where this queue borrows that flavor (its H100s do not lend A100s)
    lenders = [{"queue": s["queuename"],
                "unused": {k: v for k, v in _sub(s.get("guaranteedResource") or {},
                                                 s.get("allocatedResource") or {}).items()
                           if "@" not in k or k in out["borrowed"]}}
               for s in siblings if s.get("guaranteedResource")]
    out["lenders"] = [x for x in lenders if x["unused"]] if out["borrowed"] else []
    others_borrow = _sum(_borrowed(s.get("allocatedResource") or {}, s.get("guaranteedResource") or {})
                         for s in siblings if s.get("guaranteedResource"))
    out["lent"] = _min(_sub(guaranteed, used), others_borrow) if guaranteed else {}
    return out


def _elastic_view(state: PartitionState, name: str) -> dict[str, Any] | None:
    policy = state.policies.extension("elasticquotas")
    manager = getattr(policy, "manager", None)
    if manager is None or name not in manager.quota_names():
        return None
    d = manager.describe(name)
    lo, used = d.get("min") or {}, d.get("used") or {}
    parent = d.get("parent")
    others = [manager.describe(n) for n in manager.quota_names()
              if n != name and manager.describe(n).get("parent") == parent]
    borrowing = _sum(_sub(o.get("used") or {}, o.get("min") or {}) for o in others)
    out = {"quota": name, "min": lo, "max": d.get("max") or {}, "runtime": d.get("runtime") or {},
           "used": used, "waiting": (d.get("request") and _sub(d["request"], used)) or {},
           "borrowed": _sub(used, lo), "lent": _min(_sub(lo, used), borrowing)}
    out["lenders"] = ([{"quota": o["name"], "unused": _sub(o.get("min") or {}, o.get("used") or {})}
                       for o in others if _sub(o.get("min") or {}, o.get("used") or {})]
                      if out["borrowed"] else [])
    return out


def _flatten_usage(dao: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    stack = [dao] if dao else []
    while stack:
        node = stack.pop()
        out.append({"queue": node["queuePath"], "used": node.get("resourceUsage") or {},
                    "max": node.get("maxResources") or {},
                    "runningApplications": list(node.get("runningApplications") or ()),
                    "maxApplications": node.get("maxApplications", 0)})
        stack.extend(reversed(node.get("children") or ()))
    return out


def standing(state: PartitionState, kind: str, name: str, at: int) -> dict[str, Any] | None:
    """The standing of queue, user, group or elastic quota ``name`` (None: not known)."""
    if kind == "queue":
        if state.queues.queue(name) is None:
            return None
        asks = _asks_of(state, _apps_below(state, name))
        return {"kind": kind, "name": name, "queue": _queue_view(state, name),
                "waiting": _waiting(state, asks, at)}
    if kind in ("user", "group"):
        dao = state.ugm.user_usage(name) if kind == "user" else state.ugm.group_usage(name)
        apps = state.owners.of(kind, name)
        if dao is None and not apps:
            return None
        asks = _asks_of(state, apps)
        queues = sorted({state.apps[a].queue_path for a in apps})
        return {"kind": kind, "name": name, "limits": _flatten_usage((dao or {}).get("queues")),
                "queues": [_queue_view(state, q) for q in queues if state.queues.queue(q) is not None],
                "waiting": _waiting(state, asks, at)}
    if kind == "quota":
        view = _elastic_view(state, name)
        if view is None:
            return None
        tag = "quota.scheduling.koordinator.sh/name"
        apps = {a.application_id for a in state.apps.values()
                if a.tags.get(tag) == name or a.tags.get("namespace") == name}
        asks = _asks_of(state, apps)
        return {"kind": kind, "name": name, "elastic": view, "waiting": _waiting(state, asks, at)}
    raise InputError(f"standing of a {kind!r}: ask for one of {', '.join(KINDS)}")
