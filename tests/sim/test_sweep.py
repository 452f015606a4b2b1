"""Sweeps (issue 36 item 2): --vary grids, each variant equal to a single run, locally and on Dask."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quotaplane.cli import app
from quotaplane.sim import parse_events, simulate, trace_to_jsonl
from quotaplane.sim.sweep import (
    SweepError,
    Workload,
    apply_settings,
    parse_vary,
    run_dask,
    run_local,
    variants,
)

G = "nvidia.com/gpu"
CONFIG = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: team-a
            resources:
              guaranteed: {nvidia.com/gpu: 1}
          - name: team-b
            resources:
              guaranteed: {nvidia.com/gpu: 2}
              max: {nvidia.com/gpu: 6}
"""

# a and b each run 2 GPUs until 30 (a0, b1) and a runs 2 more until 10 (a1); a2 and b2 wait for the 2
# that free at 10. The cycle serves the queue furthest below its guaranteed first (fair share: usage
# over guaranteed): with team-a's guaranteed 1, b (2/2) goes before a (2/1): b2 at 10, a2 only when b2
# ends at 20. With 4, a (2/4) goes first: a2 at 10, b2 at 20.
TRACE: list[dict[str, Any]] = [
    {"t": 0, "op": "node", "node": "n1", "capacity": {G: 6}},
    {"t": 0, "op": "submit", "app": "A", "user": "alice", "queue": "root.team-a"},
    {"t": 0, "op": "submit", "app": "B", "user": "bob", "queue": "root.team-b"},
    {"t": 0, "op": "allocate", "app": "A", "key": "a0", "resource": {G: 2}, "duration": 30},
    {"t": 0, "op": "allocate", "app": "A", "key": "a1", "resource": {G: 2}, "duration": 10},
    {"t": 0, "op": "allocate", "app": "B", "key": "b1", "resource": {G: 2}, "duration": 30},
    {"t": 1, "op": "ask", "app": "A", "key": "a2", "resource": {G: 2}, "duration": 10},
    {"t": 2, "op": "ask", "app": "B", "key": "b2", "resource": {G: 2}, "duration": 10},
]
VARY = f"root.team-a.resources.guaranteed.{G}=1,4"


def _waits(summary: dict[str, Any], queue: str) -> dict[str, Any]:
    return dict(summary["metrics"]["queues"][queue]["wait"])


def test_a_larger_guaranteed_gives_the_hand_checked_shorter_waits() -> None:
    base = simulate(CONFIG, TRACE).summary
    (v1, v4) = variants([VARY])
    bigger = simulate(apply_settings(CONFIG, "default", v4), TRACE).summary
    assert _waits(base, "root.team-a") == {"count": 1, "p50": 19.0, "p90": 19.0, "max": 19.0}   # 1 -> 20
    assert _waits(base, "root.team-b") == {"count": 1, "p50": 8.0, "p90": 8.0, "max": 8.0}      # 2 -> 10
    assert _waits(bigger, "root.team-a") == {"count": 1, "p50": 9.0, "p90": 9.0, "max": 9.0}    # 1 -> 10
    assert _waits(bigger, "root.team-b") == {"count": 1, "p50": 18.0, "p90": 18.0, "max": 18.0}  # 2 -> 20
    assert apply_settings(CONFIG, "default", v1) != CONFIG      # rewritten, with the same meaning
    assert simulate(apply_settings(CONFIG, "default", v1), TRACE).summary == base


def test_vary_parses_settings_and_makes_a_grid() -> None:
    s, vals = parse_vary(VARY)
    assert (s.queue, s.kind, s.field, s.name) == ("root.team-a", "resources", "guaranteed", G)
    assert vals == ["1", "4"]
    grid = variants([VARY, f"root.team-b.resources.max.{G}=4,6,8", "root.team-b.maxapplications=1,2"])
    assert len(grid) == 12
    assert grid[0].name == f"team-a.guaranteed.{G}=1, team-b.max.{G}=4, team-b.maxapplications=1"
    assert grid[-1].to_json() == {f"root.team-a.resources.guaranteed.{G}": "4",
                                  f"root.team-b.resources.max.{G}": "8", "root.team-b.maxapplications": "2"}


@pytest.mark.parametrize(("spec", "message"), [
    ("root.team-a.resources.guaranteed.gpu", "expected PATH=VALUE"),
    ("root.team-a.resources.min.gpu=1", "guaranteed.<resource> or max.<resource>"),
    ("root.team-a.weight=1", "expected <queue>.resources"),
    ("root.team-a.maxapplications=x", "whole numbers"),
    ("root.team-a.resources.max.gpu=1,1", "given twice"),
])
def test_a_bad_vary_names_itself(spec: str, message: str) -> None:
    with pytest.raises(SweepError, match=message) as err:
        variants([spec])
    assert repr(spec) in str(err.value)


def test_a_variant_that_is_not_a_valid_configuration_is_refused_naming_it() -> None:
    with pytest.raises(SweepError, match=r"no queue 'root.team-c'.*there: root.team-a, root.team-b"):
        apply_settings(CONFIG, "default", variants(["root.team-c.resources.max.gpu=1"])[0])
    # team-b: guaranteed 8 above its max 6
    with pytest.raises(SweepError, match=r"variant team-b.guaranteed.nvidia.com/gpu=8: .*"):
        apply_settings(CONFIG, "default", variants([f"root.team-b.resources.guaranteed.{G}=8"])[0])
    with pytest.raises(SweepError, match="same setting is varied twice"):
        variants([VARY, f"root.team-a.resources.guaranteed.{G}=2"])


def _grid() -> tuple[Workload, list[tuple[str, str]]]:
    configs = [(v.name, apply_settings(CONFIG, "default", v))
               for v in variants([VARY, f"root.team-b.resources.max.{G}=2,6"])]
    return Workload(parse_events(enumerate(TRACE, start=1))), configs


def test_each_variant_on_local_processes_equals_a_single_run() -> None:
    workload, configs = _grid()
    seen: list[tuple[int, int]] = []
    runs = run_local(workload, configs, workers=2, done=lambda n, total: seen.append((n, total)))
    assert [r.name for r in runs] == [name for name, _ in configs]
    for run, (_, text) in zip(runs, configs, strict=True):
        single = simulate(text, TRACE)
        assert run.summary == single.summary and run.samples == single.samples
    assert seen[-1] == (4, 4)
    # team-b's max 2: b2 waits for b1's end at 30 (b runs 2 already) — the grid tells the variants apart
    assert _waits(runs[0].summary, "root.team-b")["max"] == 28.0
    assert _waits(runs[1].summary, "root.team-b")["max"] == 8.0


@pytest.fixture(scope="module")
def dask_address() -> Iterator[str]:
    """A Dask LocalCluster of 2 worker processes (skipped, saying why, without the 'dask' extra)."""
    distributed = pytest.importorskip(
        "distributed", reason="the Dask path needs the 'dask' extra (pip install 'quotaplane[dask]')")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster:
        yield str(cluster.scheduler_address)


def test_each_variant_on_a_local_dask_cluster_equals_a_single_run(dask_address: str) -> None:
    workload, configs = _grid()
    runs = run_dask(dask_address, workload, configs)
    assert [r.name for r in runs] == [name for name, _ in configs]
    for run, (_, text) in zip(runs, configs, strict=True):
        assert run.summary == simulate(text, TRACE).summary


def test_the_command_runs_a_sweep_on_dask(dask_address: str, tmp_path: Path) -> None:
    cfg, trace = tmp_path / "q.yaml", tmp_path / "t.jsonl"
    cfg.write_text(CONFIG)
    trace.write_text(trace_to_jsonl(TRACE))
    res = CliRunner().invoke(app, ["simulate", "--config", str(cfg), "--trace", str(trace), "--vary", VARY,
                                   "--dask", dask_address, "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "o" / "results.json").read_text())["table"]["rows"]
    assert [r["queue[root.team-a].wait.p90"] for r in rows] == [19.0, 9.0]


def test_an_unreachable_dask_scheduler_is_one_clear_error() -> None:
    pytest.importorskip("distributed", reason="the Dask path needs the 'dask' extra")
    workload, configs = _grid()
    with pytest.raises(SweepError, match="cannot reach the Dask scheduler"):
        run_dask("tcp://127.0.0.1:9", workload, configs[:1], connect_timeout=1)
