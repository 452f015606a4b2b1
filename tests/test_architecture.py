"""The architecture map (product.md "Architecture"), checked on the import graph of ``src/``.

Every module belongs to exactly one part; each part may import only the parts listed for it. The
base (resources, config, errors) imports nothing above it; the engines import only the base and never
each other; the core (partition, admission, scheduling, journal …) imports no HTTP or terminal code;
and there is no import circle between parts.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "quotaplane"

#: part -> the modules (dotted, below ``quotaplane``; a package name covers its submodules)
PARTS: dict[str, tuple[str, ...]] = {
    "base": ("resources", "config", "errors", "units"),
    "ugm": ("ugm",), "queues": ("queues",), "elastic": ("elastic",), "forest": ("forest",),
    "k8s": ("k8s", "placement"),
    "policies": ("policy", "policies"),
    "events": ("events",),
    "journal": ("journal",),
    "core": ("application", "admission", "notices", "state", "scheduling", "partition", "scheduler",
             "history"),
    "server": ("server",),
    "client": ("client", "_client_api"),
    "kube": ("kube",),
    "sim": ("sim",),
    "cli": ("cli", "cli_remote", "cli_report", "console"),
    "package": ("__init__",),
}

#: part -> parts it may import (itself always allowed)
ALLOWED: dict[str, set[str]] = {
    "base": set(),
    "ugm": {"base"}, "queues": {"base"}, "elastic": {"base"}, "forest": {"base"},
    "k8s": {"base"},
    "policies": {"base", "ugm", "queues", "elastic", "forest"},
    "events": {"base"},
    "journal": {"base", "events"},
    "core": {"base", "ugm", "queues", "elastic", "forest", "k8s", "policies", "events", "journal"},
    "server": {"base", "ugm", "queues", "elastic", "forest", "k8s", "policies", "events", "journal", "core",
               "package"},
    "client": {"base", "policies"},
    "kube": {"base", "k8s", "policies", "events", "core", "server", "package"},
    "sim": {"base", "core", "policies", "events", "journal", "package"},
    "cli": {"base", "core", "events", "journal", "server", "sim", "package", "k8s", "kube", "client"},
    "package": {"base", "ugm", "queues", "elastic", "forest", "k8s", "policies", "events", "journal", "core"},
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


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


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
