"""The shape of a quota tree (reference §1): nodes with their quota and free amounts, consumers as a
tree sees them, and the structure built from a tree cache (sorted resource names, first root by name)."""

from __future__ import annotations

from quotaplane.forest._model import NodeSpec, TreeCache

__all__ = ["Node", "TreeConsumer", "TreeStructure", "build_structure", "index_range"]


class Node:
    """A quota node (§1.2): quota, ``free`` (= quota − allocated), ordered consumers, links."""

    __slots__ = ("agg", "anc", "by_child", "children", "consumers", "depth", "free", "hard", "id",
                 "parent", "path", "quota")

    def __init__(self, node_id: str, hard: bool, quota: list[int]) -> None:
        self.id = node_id
        self.hard = hard
        self.quota = quota
        self.free = list(quota)
        self.parent: Node | None = None
        self.children: list[Node] = []
        self.consumers: dict[TreeConsumer, None] = {}
        self.by_child: dict[Node, dict[TreeConsumer, None]] = {}
        self.agg: dict[tuple[int, bool, int], list[int]] = {}
        self.path: list[Node] = []   # self, parent, …, root
        self.anc: list[Node] = []    # root, …, self (index = depth)
        self.depth = 0

    def allocated(self) -> list[int]:
        """a(n) = quota − free."""
        return [q - f for q, f in zip(self.quota, self.free, strict=True)]

    def __repr__(self) -> str:
        return f"Node({self.id})"


class TreeConsumer:
    """A consumer realised on one tree (§1.3). Identity-hashed: it is the key of node consumer dicts."""

    __slots__ = ("akey", "anode", "gleaf", "group_id", "id", "pos", "priority", "request", "request_map",
                 "rng", "seq", "type", "unpreemptable")

    def __init__(self, consumer_id: str, group_id: str, request_map: dict[str, int], request: list[int],
                 priority: int, ctype: int, unpreemptable: bool) -> None:
        self.id = consumer_id
        self.group_id = group_id
        self.request_map = request_map
        self.request = request
        self.rng = index_range(len(request))
        self.priority = priority
        self.type = ctype
        self.unpreemptable = unpreemptable
        self.akey = (ctype, unpreemptable, priority)
        self.anode: Node | None = None
        self.gleaf: Node | None = None   # the gNode when it is a leaf of the current tree (slide-down)
        self.seq = 0                      # allocation order (F3: update_tree re-places in this order)
        self.pos = 0                      # position in its aNode's list (see ``_positions``)

    def __repr__(self) -> str:
        return f"TreeConsumer({self.id}@{self.anode.id if self.anode else None})"


class TreeStructure:
    """An immutable-shape tree built from a cache (§7 ``CreateTree``)."""

    __slots__ = ("dangling", "leaves", "nodes", "resource_names", "root")

    def __init__(self, resource_names: tuple[str, ...]) -> None:
        self.resource_names = resource_names
        self.root: Node | None = None
        self.nodes: dict[str, Node] = {}
        self.leaves: dict[str, Node] = {}
        self.dangling: list[str] = []


def _first_root(specs: list[tuple[str, NodeSpec]]) -> str | None:
    """The first node (by name) without a parent: the root (§7)."""
    return next((name for name, spec in specs if spec.parent == ""), None)


def _link(root: Node, made: dict[str, Node], kids: dict[str, list[str]], tree: TreeStructure) -> None:
    """Link the nodes reachable from ``root`` (children in sorted name order) into ``tree``."""
    root.path = [root]
    root.anc = [root]
    stack = [root]
    while stack:
        n = stack.pop()
        tree.nodes[n.id] = n
        for cname in kids.get(n.id, ()):
            ch = made[cname]
            if ch.id in tree.nodes or ch.parent is not None:
                continue
            ch.parent = n
            ch.depth = n.depth + 1
            ch.path = [ch, *n.path]
            ch.anc = [*n.anc, ch]
            n.children.append(ch)
            n.by_child[ch] = {}
            stack.append(ch)


def _children_by_parent(by_name: dict[str, NodeSpec], root_name: str) -> dict[str, list[str]]:
    kids: dict[str, list[str]] = {}
    for name, spec in by_name.items():
        if name != root_name and spec.parent in by_name:
            kids.setdefault(spec.parent, []).append(name)
    return kids


def build_structure(cache: TreeCache) -> TreeStructure:
    """Build a fresh tree from ``cache`` (§7): sorted names, first root wins, dangling reported."""
    names = cache._effective_resources()
    tree = TreeStructure(names)
    specs = cache._specs_sorted()
    root_name = _first_root(specs)
    if root_name is None:
        tree.dangling = [n for n, _ in specs]
        return tree
    # later roots are skipped entirely (S59)
    by_name = {name: spec for name, spec in specs if spec.parent != "" or name == root_name}
    made = {name: Node(name, spec.hard, [spec.quota.get(r, 0) for r in names])
            for name, spec in by_name.items()}
    root = made[root_name]
    kids = _children_by_parent(by_name, root_name)
    _link(root, made, kids, tree)
    tree.root = root
    tree.nodes = dict(sorted(tree.nodes.items()))
    tree.leaves = {nid: n for nid, n in tree.nodes.items() if not n.children}
    tree.dangling = sorted(n for n in by_name if n not in tree.nodes)
    return tree


_INDEX_RANGES = tuple(range(k) for k in range(17))


def index_range(k: int) -> range:
    """``range(k)``, shared for the small k of resource vectors."""
    return _INDEX_RANGES[k] if k < 17 else range(k)
