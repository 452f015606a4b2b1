"""Builders shared by the quota-forest tests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from quotaplane.forest import ConsumerInfo, Mode, QuotaManager

NodeDef = tuple[str, bool, Mapping[str, int]]   # parent ("" = root), hard, quota


def tree_doc(name: str, nodes: Mapping[str, NodeDef], resources: tuple[str, ...] = ("cpu",)) -> str:
    """A QuotaTree JSON document (quota values as strings, like the seed)."""
    return json.dumps({
        "kind": "QuotaTree",
        "metadata": {"name": name},
        "spec": {
            "resourceNames": list(resources),
            "nodes": {n: {"parent": p or "nil", "hard": "true" if h else "false",
                          "quota": {k: str(v) for k, v in q.items()}}
                      for n, (p, h, q) in nodes.items()},
        },
    })


def consumer(cid: str, *trees: tuple[str, str, Mapping[str, int]], priority: int = 0, ctype: int = 0,
             unpreemptable: bool = False) -> ConsumerInfo:
    """A ConsumerInfo with one entry per (tree, group, request)."""
    return ConsumerInfo.from_string(json.dumps({
        "kind": "Consumer", "metadata": {"name": cid},
        "spec": {"id": cid, "trees": [
            {"treeName": t, "groupID": g, "request": dict(r), "priority": priority, "type": ctype,
             "unPreemptable": unpreemptable} for t, g, r in trees]},
    }))


def manager(*trees: str, normal: bool = True) -> QuotaManager:
    """A manager holding ``trees`` (JSON), in Normal mode unless told otherwise."""
    qm = QuotaManager()
    for t in trees:
        qm.add_tree_from_string(t)
    if normal:
        qm.set_mode(Mode.NORMAL)
    return qm


def add_alloc(qm: QuotaManager, tree: str, cid: str, group: str, req: Mapping[str, int], **kw: Any) -> Any:
    """Register a single-tree consumer and allocate it; returns the response."""
    qm.add_consumer(consumer(cid, (tree, group, req), **kw))
    return qm.allocate(tree, cid)


def check_invariant(qm: QuotaManager) -> None:
    """allocated(n) = Σ requests of consumers whose aNode is n or below, for every node of every tree."""
    state = qm.dump_state()
    for tname, t in state["trees"].items():
        nodes = t["nodes"]
        names = t["resource_names"]
        expect = {n: dict.fromkeys(names, 0) for n in nodes}
        for cid, anode in t["allocated"].items():
            assert anode is not None, f"{cid} allocated without a node on {tname}"
            spec = qm.consumer_info(cid).trees[tname] if cid in qm.consumer_ids() else None
            if spec is None:
                continue
            n: str | None = anode
            while n is not None:
                for r in names:
                    expect[n][r] += spec.request.get(r, 0)
                n = nodes[n]["parent"]
        for n, data in nodes.items():
            assert data["allocated"] == expect[n], (tname, n, data["allocated"], expect[n])
            assert all(v >= 0 for v in data["allocated"].values())
            for cid in data["consumers"]:
                assert t["allocated"].get(cid) == n
