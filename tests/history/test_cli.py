"""``quotaplane report`` against a real service: the month of tests/history/test_rest.py — GPU-hours per
team last month and how much was borrowed, the bill, CSV and JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.client.test_client import _Server
from tests.history.test_rest import november

EXE = str(Path(sys.executable).with_name("quotaplane"))


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Server]:
    s, _ = november(monkeypatch)
    srv = _Server(s)
    yield srv
    srv.stop()
    s.close()


def _report(srv: _Server, *args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUOTAPLANE_SERVER": srv.url, "COLUMNS": str(columns)}
    return subprocess.run([EXE, "report", *args], env=env, capture_output=True, text=True, timeout=60)


def test_gpu_hours_per_team_last_month_with_the_borrowed_share(server: _Server) -> None:
    out = _report(server, "--period", "last-month", "--resource", "nvidia.com/gpu")
    assert out.returncode == 0, out.stderr
    speech = next(ln for ln in out.stdout.splitlines() if "root.teams.speech" in ln)
    assert "2,880.0 GPU-h" in speech and "960.0 GPU-h (33.3 %)" in speech
    vision = next(ln for ln in out.stdout.splitlines() if "root.teams.vision" in ln)
    assert "2,880.0 GPU-h" in vision


def test_the_bill_as_a_table_and_csv(server: _Server) -> None:
    out = _report(server, "--period", "last-month", "--cost")
    assert out.returncode == 0, out.stderr
    speech = next(ln for ln in out.stdout.splitlines() if "root.teams.speech" in ln)
    assert "4800.00" in speech and "3840.00" in speech and "8640.00" in speech
    assert "15840.00" in out.stdout                         # vision 7,200 + speech 8,640
    csv_out = _report(server, "--period", "last-month", "--cost", "--output", "csv")
    assert csv_out.stdout.splitlines()[0].startswith("queue,resource,hours")


def test_json_is_the_service_answer_and_errors_are_one_line(server: _Server) -> None:
    out = _report(server, "--period", "last-month", "--step", "week", "--group-by", "user", "-o", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["groupBy"] == "user" and data["step"] == "week"
    bad = _report(server, "--period", "last-year")
    assert bad.returncode == 1 and bad.stderr.count("\\n") <= 1 and "period" in bad.stderr


def test_names_are_never_cut_at_80_columns_and_a_piped_row_stays_one_line(server: _Server) -> None:
    # defect: at 80 columns rich cut "root.teams.speech" to "root.tea…", "nvidia.com/gpu" to "nvidia.c…"
    # and folded every figure over two lines, so neither a reader nor grep found a queue's row
    for args in (("--period", "last-month"), ("--period", "last-month", "--cost"),
                 ("--period", "last-month", "--step", "week", "--group-by", "user")):
        out = _report(server, *args, columns=80)
        assert out.returncode == 0, out.stderr
        assert "…" not in out.stdout, out.stdout
        assert "nvidia.com/gpu" in out.stdout
    plain = _report(server, "--period", "last-month", columns=80).stdout
    speech = next(ln for ln in plain.splitlines() if "root.teams.speech" in ln)
    assert "2,880.0 GPU-h" in speech and "960.0 GPU-h (33.3 %)" in speech
    weeks = _report(server, "--period", "last-month", "--step", "week", "--group-by", "user",
                    columns=80).stdout
    assert "2026-11-02T00:00" in weeks


def test_a_terminal_of_80_columns_wraps_the_figures_never_a_name() -> None:
    from rich.console import Console

    from quotaplane.cli_report import print_table, usage_table

    long = "root.research.computer-vision.self-supervised.pretraining"
    point = {"start": "2026-11-01T00:00:00+01:00", "used": {"nvidia.com/gpu": 3_600_000 * 1234},
             "borrowed": {"nvidia.com/gpu": 3_600_000 * 34}, "lent": {}, "waiting": {},
             "waits": {"count": 2, "p50": 90_000, "p90": 5_400_000, "max": 7_200_000}}
    data = {"start": "2026-11-01", "end": "2026-12-01", "timeZone": "UTC",
            "series": [{"name": long, "points": [point]}]}
    console = Console(width=80, force_terminal=True, record=True, color_system=None)
    print_table(console, usage_table(data, "queue", several_steps=False))
    text = console.export_text()
    assert long in text and "nvidia.com/gpu" in text and "…" not in text, text


def test_the_bill_without_prices_says_so() -> None:
    """Found as a new user: ``report --cost`` with no ``history.prices`` printed an empty bill with a
    total of 0.00 and nothing telling why."""
    import quotaplane as qp

    s = qp.Scheduler.from_yaml((Path(__file__).resolve().parents[2] / "examples" / "queues.yaml").read_text())
    srv = _Server(s)
    try:
        out = _report(srv, "--cost")
        assert out.returncode == 0, out.stderr
        assert "no prices are configured" in out.stderr and "history.prices" in out.stderr, out.stderr
        assert json.loads(_report(srv, "--cost", "-o", "json").stdout)["prices"] == {}
    finally:
        srv.stop()
        s.close()


def test_the_bill_refuses_options_it_would_ignore() -> None:
    """Found as a new user: ``report --cost --resource vcore`` (or ``--step day``, ``--top 3``) printed the
    whole bill as if the option had not been given."""
    for extra in (("--resource", "vcore"), ("--step", "day"), ("--top", "3")):
        out = subprocess.run([EXE, "report", "--cost", *extra, "--server", "http://127.0.0.1:9"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and extra[0] in out.stderr and "--cost" in out.stderr, out.stderr


def test_a_resource_nobody_used_says_so_and_an_unknown_one_is_an_error(server: _Server) -> None:
    """Found as a new user: ``report --resource gpu`` printed an empty table and nothing else."""
    bad = _report(server, "--period", "last-month", "--resource", "gpu")
    assert bad.returncode == 1 and "'gpu'" in bad.stderr and "nvidia.com/gpu" in bad.stderr
    idle = _report(server, "--start", "2026-10-01", "--end", "2026-10-15", "--resource", "nvidia.com/gpu")
    assert idle.returncode == 0, idle.stderr
    assert "no usage of nvidia.com/gpu" in idle.stderr
