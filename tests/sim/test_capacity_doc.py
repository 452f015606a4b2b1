"""docs/capacity-planning.md stays true: its worked example prints what the doc shows, its images
exist, and the example trace is what examples/gpu_trace.py writes."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quotaplane.cli import app
from tests.sim.test_docs import _blocks

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "capacity-planning.md").read_text()
BLOCKS = _blocks(DOC)


def test_the_worked_example_prints_what_the_doc_shows(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    command = next(b for b in BLOCKS if b.startswith("quotaplane simulate --config examples/gpu-queues.yaml"))
    args = command.replace("\\\n", " ").split()[2:]
    args = [a.strip("'") for a in args]
    monkeypatch.chdir(tmp_path)
    for i, a in enumerate(args):
        if a.startswith("examples/"):
            args[i] = str(ROOT / a)
    res = CliRunner().invoke(app, ["simulate", *args], env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    shown = next(b for b in BLOCKS if "variant × metric" in b)
    assert [ln.rstrip() for ln in res.stdout.splitlines()] == [ln.rstrip() for ln in shown.splitlines()]
    doc = json.loads((tmp_path / "plan" / "results.json").read_text())
    assert [v["settings"] for v in doc["variants"]][1] == {
        "root.team-a.resources.guaranteed.nvidia.com/gpu": "8",
        "root.team-a.resources.max.nvidia.com/gpu": "20"}
    for name in ("usage", "waiting", "waits", "refusals"):
        assert (tmp_path / "plan" / "plots" / f"{name}.png").exists()


def test_the_images_the_doc_shows_exist() -> None:
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", DOC)
    assert len(images) == 4
    for img in images:
        assert (ROOT / "docs" / img).read_bytes().startswith(b"\x89PNG"), img


def test_the_example_trace_is_what_its_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("gpu_trace", ROOT / "examples" / "gpu_trace.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    lines = (ROOT / "examples" / "gpu-trace.jsonl").read_text().splitlines()
    assert [json.loads(ln) for ln in lines] == mod.trace()
