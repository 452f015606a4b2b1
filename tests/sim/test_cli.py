"""``quotaplane simulate`` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from quotaplane.cli import app

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "examples" / "trace-queues.yaml")
TRACE = str(ROOT / "examples" / "trace.jsonl")


def test_simulate_writes_outputs_and_prints_a_table(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["simulate", "--config", CONFIG, "--trace", TRACE, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "allocations admitted / refused" in res.output
    assert "3 / 4" in res.output
    assert "root.prod" in res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["allocations"]["refused_by_code"]["queue.max"] == 2
    assert (out / "timeline.csv").read_text().startswith("t,")
    assert (out / "usage.png").stat().st_size > 0


def test_simulate_without_out_writes_nothing(tmp_path: Path, monkeypatch: object) -> None:
    res = CliRunner().invoke(app, ["simulate", "--config", CONFIG, "--trace", TRACE, "--no-plot"])
    assert res.exit_code == 0, res.output
    assert "wrote" not in res.output


def test_simulate_bad_trace_exits_1_naming_the_line(tmp_path: Path) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"t": 0, "op": "node", "node": "n", "capacity": {"vcore": 1}}\n'
                     '{"t": 1, "op": "allocate", "app": "ghost", "resource": {"vcore": 1}}\n')
    res = CliRunner().invoke(app, ["simulate", "--config", CONFIG, "--trace", str(trace),
                                   "--out", str(tmp_path / "o")])
    assert res.exit_code == 1
    assert f"{trace}: line 2: field 'app': application 'ghost' has not been submitted" in res.output
    assert not (tmp_path / "o").exists()


def test_simulate_bad_config_exits_1(tmp_path: Path) -> None:
    cfg = tmp_path / "q.yaml"
    cfg.write_text("partitions:\n  - name: default\n    queues:\n      - name: root\n"
                   "        resources:\n          max: {vcore: -1}\n")
    res = CliRunner().invoke(app, ["simulate", "--config", str(cfg), "--trace", TRACE])
    assert res.exit_code == 1
    assert f"{cfg}:6" in res.output


def test_simulate_unknown_partition_exits_1() -> None:
    res = CliRunner().invoke(app, ["simulate", "--config", CONFIG, "--trace", TRACE, "--partition", "gpu"])
    assert res.exit_code == 1
    assert "partition 'gpu' is not in the configuration" in res.output
