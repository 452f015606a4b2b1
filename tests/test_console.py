"""The console script names the extra to install when an optional dependency is missing (issue 14 #11:
it died with a traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("module", "extra", "args"), [
    ("typer", "cli", ["validate", "examples/queues.yaml"]),
    ("uvicorn", "server", ["serve", "--port", "1", "--store", "sqlite:///must-not-be-created.db"]),
])
def test_a_missing_extra_is_named_with_its_install_line(module: str, extra: str, args: list[str]) -> None:
    code = (f"import sys; sys.modules[{module!r}] = None; from quotaplane.console import main; "
            f"sys.argv = ['quotaplane', *{args!r}]; main()")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"pip install 'quotaplane[{extra}]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (ROOT / "must-not-be-created.db").exists()       # refused before any store is opened


def test_the_console_script_runs_the_cli() -> None:
    code = "import sys; from quotaplane.console import main; sys.argv = ['quotaplane', 'validate', " \
           "'examples/queues.yaml']; main()"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "examples/queues.yaml: ok" in proc.stdout
