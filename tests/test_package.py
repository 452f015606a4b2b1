"""The package root re-exports the contract's public names (contract.md "Python API")."""

from __future__ import annotations

import importlib

import pytest

import quotaplane as qp


@pytest.mark.parametrize("name", qp.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(qp, name) is not None


def test_lazy_table_and_all_agree() -> None:
    lazy = set(qp._LAZY)
    assert lazy <= set(qp.__all__) | {"Partition"}
    assert set(qp.__all__) - lazy == {"ConfigError", "ConflictError", "InputError", "JournalError",
                                      "NotFoundError", "NotLeaderError", "QuotaplaneError", "RejectedError",
                                      "Resource"}


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        qp.no_such_name  # noqa: B018


def test_engines_import_only_the_base() -> None:
    """product.md: an engine imports only resources, config and errors, never another engine."""
    import ast
    from pathlib import Path

    root = Path(qp.__file__).parent
    engines = ("ugm", "queues", "elastic", "forest")
    allowed = {"quotaplane.resources", "quotaplane.config", "quotaplane.errors"}
    for engine in engines:
        for path in sorted((root / engine).rglob("*.py")):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                mods: list[str] = []
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    mods = [node.module]
                elif isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                for mod in mods:
                    if not mod.startswith("quotaplane"):
                        continue
                    ok = mod.startswith(f"quotaplane.{engine}") or any(
                        mod == a or mod.startswith(a + ".") for a in allowed)
                    assert ok, f"{path.relative_to(root)} imports {mod}"


def test_contract_names_exist() -> None:
    ugm = importlib.import_module("quotaplane.ugm")
    for attr in ("update_config", "increase_tracked_resource", "decrease_tracked_resource", "headroom",
                 "can_run_app", "get_user_resources", "get_group_resources", "users_usage", "groups_usage"):
        assert callable(getattr(ugm.Manager, attr))
    elastic = importlib.import_module("quotaplane.elastic")
    for attr in ("apply_yaml", "upsert", "delete", "set_total", "set_request", "set_used", "add_pod",
                 "assign_pod", "remove_pod", "runtime", "request", "used", "check", "revoke"):
        assert callable(getattr(elastic.ElasticQuotaManager, attr))
    forest = importlib.import_module("quotaplane.forest")
    for attr in ("get_mode", "set_mode", "add_tree_from_string", "add_tree_by_name", "delete_tree",
                 "tree_names", "add_consumer", "remove_consumer", "consumer_ids", "allocate", "deallocate",
                 "is_allocated", "try_allocate", "undo_allocate", "add_forest", "delete_forest",
                 "forest_names", "add_tree_to_forest", "delete_tree_from_forest", "allocate_forest",
                 "deallocate_forest", "is_allocated_forest", "try_allocate_forest", "undo_allocate_forest",
                 "get_tree_cache", "update_tree", "update_forest", "update_all", "consumer_node",
                 "node_allocated", "node_consumers", "node_quota"):
        assert callable(getattr(forest.QuotaManager, attr))
    for attr in ("add_node", "remove_node", "add_application", "allocate", "what_if", "release",
                 "remove_application", "add_ask", "remove_ask", "pending", "schedule", "subscribe"):
        assert callable(getattr(qp.Partition, attr))


def test_the_package_ships_its_types_and_license_and_declares_only_what_it_uses() -> None:
    """Issue 17 #6: ``py.typed`` (a downstream ``mypy --strict`` reads the hints), the Apache-2.0
    LICENSE, and no dependency the code never imports (numpy was declared and unused)."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    assert (root / "src" / "quotaplane" / "py.typed").is_file()
    text = (root / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    extras = project["optional-dependencies"].values()
    declared = [*project["dependencies"], *(d for ds in extras for d in ds)]
    names = {d.split(";")[0].split("[")[0].split(">")[0].split("=")[0].strip().lower() for d in declared}
    code = "\n".join(p.read_text() for p in (root / "src").rglob("*.py"))
    assert "numpy" not in names
    for name in ("pydantic", "fastapi", "uvicorn", "typer", "rich", "matplotlib", "psycopg", "lightkube"):
        assert name in names, name
        assert f"import {name}" in code or f"from {name}" in code, name
