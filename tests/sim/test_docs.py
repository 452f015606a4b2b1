"""docs/simulator.md stays true: its example output is what the CLI prints for the example files."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from quotaplane.cli import app
from quotaplane.sim import parse_csv

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "simulator.md").read_text()


def _blocks(text: str) -> list[str]:
    """The bodies of the fenced blocks, in order."""
    out: list[str] = []
    body: list[str] | None = None
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if body is None:
                body = []
            else:
                out.append("".join(body))
                body = None
        elif body is not None:
            body.append(line)
    return out


BLOCKS = _blocks(DOC)


def test_the_example_output_is_what_the_cli_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shown = next(b for b in BLOCKS if "simulation of partition" in b)
    monkeypatch.chdir(tmp_path)          # the doc writes to the relative directory sim-out
    res = CliRunner().invoke(app, [
        "simulate", "--config", str(ROOT / "examples" / "trace-queues.yaml"),
        "--trace", str(ROOT / "examples" / "trace.jsonl"), "--out", "sim-out", "--sample-interval", "10"],
        env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    printed = [line.rstrip() for line in res.stdout.splitlines()]
    assert printed == [line.rstrip() for line in shown.splitlines()]
    timeline = next(b for b in BLOCKS if b.startswith("t,capacity"))
    assert (tmp_path / "sim-out" / "timeline.csv").read_text().startswith(timeline)


def test_the_csv_example_parses() -> None:
    block = next(b for b in BLOCKS if b.startswith("t,op,"))
    events = parse_csv(block)
    assert [e.op for e in events] == ["node", "submit", "allocate"]
    assert events[2].duration == 60.0
