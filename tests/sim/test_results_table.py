"""The variant × metric table printed whole. Found as a new user running docs/capacity-planning.md's
sweep into a pipe: at 80 columns rich cut every figure and header ("924…", "0.53…", "res…"), so the
numbers the page discusses could not be read."""

from __future__ import annotations

import io

from rich.console import Console

from quotaplane.sim.results import render_table

COLUMNS = ["utilisation.nvidia.com/gpu", "wait.p50", "wait.p90", "wait.max", "refused", "preempted",
           "queue[root.research].wait.p90", "queue[root.team-a].wait.p90", "queue[root.team-b].wait.p90"]


def test_no_figure_or_header_is_cut_at_80_columns() -> None:
    row = {"variant": "team-a.guaranteed.nvidia.com/gpu=8, team-a.max.nvidia.com/gpu=16",
           "utilisation.nvidia.com/gpu": 0.537412, "wait.p50": 102.1, "wait.p90": 4335.0,
           "wait.max": 6903.0, "refused": 0, "preempted": 1, "queue[root.research].wait.p90": 3768.0,
           "queue[root.team-a].wait.p90": 6218.0, "queue[root.team-b].wait.p90": 924.7}
    out = io.StringIO()
    render_table(COLUMNS, [row], console=Console(file=out, width=80, force_terminal=False))
    text = out.getvalue()
    assert "…" not in text, text
    assert "924.7" in text and "6903" in text and "team-b" in text
