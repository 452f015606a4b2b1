"""The architecture map (product.md "Architecture"), checked on the import graph of ``src/``.

Every module belongs to exactly one part; each part may import only the parts listed for it. The
base (resources, config, errors) imports nothing above it; the engines import only the base and never
each other; the core (partition, admission, scheduling, journal …) imports no HTTP or terminal code;
and there is no import circle between parts.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "quotaplane"

#: part -> the modules (dotted, below ``quotaplane``; a package name covers its submodules)
PARTS: dict[str, tuple[str, ...]] = {
    "base": ("resources", "config", "errors", "units", "flavors.names"),
    "ugm": ("ugm",), "queues": ("queues",), "elastic": ("elastic",), "forest": ("forest",),
    "budgets": ("budgets",), "windows": ("windows",),
    "k8s": ("k8s", "placement"),
    "policies": ("policy", "policies"),
    "flavors": ("flavors",),
    "events": ("events",),
    "journal": ("journal",),
    "core": ("application", "admission", "notices", "state", "scheduling", "partition", "cluster",
             "scheduler", "history", "eta"),
    "server": ("server",),
    "client": ("client", "_client_api"),
    "kube": ("kube",),
    "sim": ("sim",),
    "cli": ("cli", "cli_remote", "cli_report", "cli_eta", "cli_budgets", "console"),
    "package": ("__init__",),
}

#: part -> parts it may import (itself always allowed)
ALLOWED: dict[str, set[str]] = {
    "base": set(),
    "ugm": {"base"}, "queues": {"base"}, "elastic": {"base"}, "forest": {"base"}, "budgets": {"base"},
    "windows": {"base"},
    "k8s": {"base"},
    "policies": {"base", "ugm", "queues", "elastic", "forest", "budgets"},
    "flavors": {"base", "policies"},
    "events": {"base"},
    "journal": {"base", "events"},
    "core": {"base", "ugm", "queues", "elastic", "forest", "k8s", "policies", "flavors", "events", "journal"},
    "server": {"base", "ugm", "queues", "elastic", "forest", "k8s", "policies", "flavors", "events",
               "journal", "core", "package", "budgets", "windows"},
    "client": {"base", "policies"},
    "kube": {"base", "k8s", "policies", "events", "core", "server", "package", "windows"},
    "sim": {"base", "core", "policies", "events", "journal", "package", "windows"},
    "cli": {"base", "core", "events", "journal", "server", "sim", "package", "k8s", "kube", "client"},
    "package": {"base", "ugm", "queues", "elastic", "forest", "k8s", "policies", "flavors", "events",
                "journal", "core", "windows"},
}

#: third-party modules the core must never import (HTTP, terminal, plotting)
NOT_IN_CORE = ("fastapi", "starlette", "uvicorn", "httpx", "typer", "rich", "click", "matplotlib", "numpy",
               "prometheus_client")


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = rel.parts
    return ".".join(parts[:-1]) if parts[-1] == "__init__" and len(parts) > 1 else ".".join(parts)


def _part_of(module: str) -> str | None:
    for part, prefixes in PARTS.items():
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                return part
    return None


@functools.cache
def _all_modules() -> frozenset[str]:
    return frozenset("quotaplane." + _module_name(p) if _module_name(p) != "__init__" else "quotaplane"
                     for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path, name: str | None = None) -> list[str]:
    """Every module ``path`` imports: absolute and relative import statements anywhere in it (a
    relative one resolved against its package), and a module loaded by its name as a string — an
    argument of ``importlib.import_module`` or ``__import__``, or any string constant that is the
    exact dotted name of a module of ``src/`` (a table of module names a loader walks)."""
    name = _module_name(path) if name is None else name
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    modules = _all_modules()
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                out.append(node.module or "")
                continue
            parts = ["quotaplane", *([p for p in package.split(".") if p] if package != "__init__" else [])]
            base = parts[: len(parts) - (node.level - 1)]
            origin = ".".join([*base, *([node.module] if node.module else [])])
            out.append(origin)
            out.extend(f"{origin}.{a.name}" for a in node.names if f"{origin}.{a.name}" in modules)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value \
                and node.value in modules:
            out.append(node.value)
    return [m for m in out if m]


def test_imports_are_seen_relative_and_by_name(tmp_path: Path) -> None:
    """The map cannot be walked around: a relative import and a module loaded by its name count as
    imports (the configuration layer once loaded the budget policy by a string in a table)."""
    probe = tmp_path / "_architecture_probe.py"          # read as if it were config/_architecture_probe.py
    probe.write_text("import importlib\nfrom ..policies import budgets\n"
                     "TABLE = {'x': 'quotaplane.policies.forest'}\n"
                     "importlib.import_module('quotaplane.ugm')\n")
    seen = _imports(probe, "config._architecture_probe")
    assert "quotaplane.policies" in seen and "quotaplane.policies.budgets" in seen
    assert "quotaplane.policies.forest" in seen and "quotaplane.ugm" in seen


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_belongs_to_a_part() -> None:
    orphans = [str(p.relative_to(SRC)) for p in _modules() if _part_of(_module_name(p)) is None]
    assert not orphans, f"modules outside the architecture map: {orphans}"


def test_each_part_imports_only_what_the_map_allows() -> None:
    wrong: list[str] = []
    for path in _modules():
        part = _part_of(_module_name(path))
        assert part is not None
        for imported in _imports(path):
            if imported == "quotaplane":
                target: str | None = "package"
            elif imported.startswith("quotaplane."):
                target = _part_of(imported[len("quotaplane."):])
            else:
                continue
            if target is not None and target != part and target not in ALLOWED[part]:
                wrong.append(f"{path.relative_to(SRC)} ({part}) imports {imported} ({target})")
    assert not wrong, "\n".join(wrong)


#: modules kept under an earlier name for code outside quotaplane (plug-ins); nothing inside imports them
COMPAT_ALIASES = ("quotaplane.policy",      # the admission protocol: quotaplane.policies (issue 29)
                  "quotaplane.scheduler")   # the Scheduler: quotaplane.cluster, apart from scheduling/


def test_a_compatibility_alias_is_the_module_it_names() -> None:
    import quotaplane.cluster
    import quotaplane.policies.protocol
    import quotaplane.policy
    import quotaplane.scheduler

    assert quotaplane.scheduler.Scheduler is quotaplane.cluster.Scheduler
    assert quotaplane.policy.QuotaPolicy is quotaplane.policies.protocol.QuotaPolicy


def test_nothing_inside_imports_a_compatibility_alias() -> None:
    wrong = [f"{path.relative_to(SRC)} imports {imported}" for path in _modules()
             if _module_name(path) not in {a.removeprefix("quotaplane.") for a in COMPAT_ALIASES}
             for imported in _imports(path) if imported in COMPAT_ALIASES]
    assert not wrong, wrong


def test_the_core_imports_no_http_or_terminal_code() -> None:
    wrong: list[str] = []
    for path in _modules():
        part = _part_of(_module_name(path))
        if part in ("server", "client", "kube", "cli", "sim", "package"):
            continue
        for imported in _imports(path):
            if imported.split(".")[0] in NOT_IN_CORE:
                wrong.append(f"{path.relative_to(SRC)} imports {imported}")
    assert not wrong, wrong


def test_no_import_circle_between_parts() -> None:
    edges: dict[str, set[str]] = {part: set() for part in PARTS}
    for path in _modules():
        part = _part_of(_module_name(path))
        assert part is not None
        for imported in _imports(path):
            if imported.startswith("quotaplane."):
                target = _part_of(imported[len("quotaplane."):])
                if target is not None and target != part and part != "package" and target != "package":
                    edges[part].add(target)
    seen: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state = seen.get(node, 0)
        assert state != 1, f"import circle: {' -> '.join([*trail, node])}"
        if state == 2:
            return
        seen[node] = 1
        for nxt in sorted(edges[node]):
            visit(nxt, [*trail, node])
        seen[node] = 2

    for part in sorted(edges):
        visit(part, [])


# -- the module map (issue 29) ---------------------------------------------------------------------------


def _module_of(path: Path) -> str:
    return "quotaplane." + _module_name(path) if _module_name(path) != "__init__" else "quotaplane"


def _module_imports(path: Path, modules: set[str]) -> set[str]:
    """Every module of ``src/`` that ``path`` imports anywhere: at the top, inside functions, under
    ``TYPE_CHECKING`` (a type-only import is an import: it ties the two modules' meanings together).
    ``from package import name`` is an import of the submodule when ``name`` is one, else of the package."""
    me = _module_of(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            for alias in node.names:
                sub = f"{origin}.{alias.name}"
                if sub in modules:
                    out.add(sub)
                elif origin in modules:
                    out.add(origin)
    out.discard(me)
    return out


def test_no_import_circle_between_modules() -> None:
    """Issue 29: 0 import circles between modules, type-only and in-function imports included (before:
    four, each hidden behind ``TYPE_CHECKING`` or a function-level import)."""
    paths = {_module_of(p): p for p in _modules()}
    modules = set(paths)
    edges = {m: _module_imports(p, modules) for m, p in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def connect(v: str) -> None:       # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for module in sorted(modules):
        if module not in index:
            connect(module)
    shown = [f"{' <-> '.join(c)}: " + "; ".join(f"{m} imports {sorted(edges[m] & set(c))}" for m in c)
             for c in circles]
    assert not circles, "import circles:\n" + "\n".join(shown)


#: modules over :data:`MAX_LINES`, each with the reason it is one module (issue 29: "no module is over
#: 600 lines without a stated reason"). A module that shrinks under the limit must leave this list.
LONG_MODULES: dict[str, str] = {
    "history/engine.py": "the accounting's per-event handlers, one per event type, on the admission path "
                         "(periods, scopes, snapshots and queries are split out already; the handlers "
                         "share inlined per-resource updates that the on/off cost bar keeps together)",
    "kube/controller.py": "the Kubernetes front's one controller: a task per watched kind sharing one "
                          "action queue; the kinds' handlers are short and read together",
    "partition/facade.py": "the public Partition API (docs/library.md): one documented method per operation, "
                           "each a few lines handing a transaction to partition/'s write modules",
    "state/handlers.py": "the only code that changes a partition's state: one short method per event "
                         "type (events.py), kept together so every change of state is in one place",
    "events.py": "the journal's vocabulary: one dataclass per event type with its JSON form, and the "
                 "written-out encoders and decoders of the events replayed in bulk (allocations, asks) "
                 "beside the generic ones they must equal",
    "sim/recorded.py": "a journal read back as a workload: one reader per event type of the journal",
    "sim/engine.py": "the replay engine: the trace's event kinds driven through a real partition",
    "forest/manager.py": "MCAD's quota manager (seed 003): trees, forests and consumers behind one lock, "
                         "as upstream keeps them",
    "elastic/manager.py": "Koordinator's elastic quota manager (seed 002) as upstream keeps it: quota "
                          "groups, runtime quota, admission and reclaim",
    "queues/tree.py": "YuniKorn's queue tree (seed 004, rules M-1 … M-6): configured and dynamic queues "
                      "and their usage, one structure",
    "sim/metrics.py": "what a replay measures, per queue, user and quota: one recorder per event kind",
    "client.py": "the REST client, sync and async side by side (each method twice, the same shape)",
    "policies/forest.py": "the quota forest behind the policy protocol: admission, release, replacement "
                          "and its REST/metric views of one engine",
}

MAX_LINES = 600


def test_no_module_over_600_lines_without_a_stated_reason() -> None:
    long = {str(p.relative_to(SRC)): len(p.read_text().splitlines()) for p in _modules()}
    over = sorted(name for name, n in long.items() if n > MAX_LINES and name not in LONG_MODULES)
    assert not over, f"modules over {MAX_LINES} lines with no reason in LONG_MODULES: {over}"
    stale = sorted(name for name in LONG_MODULES if long.get(name, 0) <= MAX_LINES)
    assert not stale, f"no longer over {MAX_LINES} lines (or gone): take them off LONG_MODULES: {stale}"


#: radon grade C or worse (cyclomatic complexity over 10), as a share of the functions and methods, must
#: stay under these ceilings. Issue 29 asks for under 4 % overall and in ``scheduling/`` (5.2 % and
#: 10.4 % at f16ba7b). ``scheduling/``, the core (the write path, the state, the journal, the
#: policies) and the whole of ``src/`` are under 4 % (src/: 5.74 % before the simulator, the Kubernetes
#: front, the engines, the server and the configuration loader had their longest functions split;
#: 3.33 % then; 3.46 % -> 3.13 % when the core's were split, the core 3.03 % -> 1.66 %). A ceiling only
#: goes down: new code splits its long functions rather than raise it.
RADON_CEILINGS: dict[str, tuple[tuple[str, ...], float]] = {
    "src": ((), 3.3),
    "scheduling": (("scheduling/",), 4.0),
    "core": (("partition/", "state/", "journal/", "policies/", "admission.py", "application.py", "events.py",
              "notices.py", "policy.py", "cluster.py", "errors.py", "resources.py"), 3.0),
}


def _radon_share(prefixes: tuple[str, ...]) -> tuple[float, list[str]]:
    from radon.complexity import cc_rank, cc_visit
    from radon.visitors import Class

    total, bad = 0, []
    for path in _modules():
        rel = str(path.relative_to(SRC))
        if prefixes and not rel.startswith(prefixes):
            continue
        for block in cc_visit(path.read_text()):
            if isinstance(block, Class):       # its methods are listed on their own
                continue
            total += 1
            if cc_rank(block.complexity) >= "C":
                bad.append(f"{rel}:{block.lineno} {block.name} ({block.complexity})")
    return 100.0 * len(bad) / max(total, 1), bad


def test_radon_grade_c_or_worse_stays_under_its_ceiling() -> None:
    for name, (prefixes, ceiling) in RADON_CEILINGS.items():
        share, bad = _radon_share(prefixes)
        assert share < ceiling, (f"{name}: {share:.2f} % of functions at radon grade C or worse "
                                 f"(ceiling {ceiling} %):\n" + "\n".join(sorted(bad)))
