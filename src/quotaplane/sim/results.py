"""The variant × metric table of a plan (a replay of a recorded history, or a sweep) and its files.

One row per run — ``recorded`` first when the workload came from a store, then each variant — and
one column per metric (:func:`~quotaplane.sim.metrics.flat_metrics` names them:
``utilisation.vcore``, ``wait.p90``, ``refused[root.a queue.max]``, ``queue[root.a].wait.p90``,
``user[alice].borrowed.vcore``, …). A cell is empty where a metric does not apply or is unknown
(the recorded refusals: refused requests are not journalled).

``results.json`` holds everything (the table, every run's metrics, the caveats and the reproduction
check); ``results.csv`` holds the table.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from quotaplane.sim.metrics import flat_metrics

__all__ = ["headline", "render_table", "short_names", "table", "table_csv", "write_results"]


def table(recorded: Mapping[str, Any] | None, runs: Sequence[tuple[str, Mapping[str, Any]]],
          *, recorded_refusals_known: bool = False) -> tuple[list[str], list[dict[str, Any]]]:
    """``(columns, rows)``: ``columns`` is ``["variant", metric…]``; each row maps them to values."""
    named: list[tuple[str, dict[str, float]]] = []
    if recorded is not None:
        flat = flat_metrics(recorded)
        if not recorded_refusals_known:
            flat = {k: (math.nan if k.startswith("refused") else v) for k, v in flat.items()}
        named.append(("recorded", flat))
    named += [(name, flat_metrics(m)) for name, m in runs]
    metrics = list(dict.fromkeys(k for _, flat in named for k in flat))   # first-seen order
    rows = []
    for name, flat in named:
        row: dict[str, Any] = {"variant": name}
        for k in metrics:
            row[k] = _table_value(flat, k)
        rows.append(row)
    return ["variant", *metrics], rows


def _table_value(flat: Mapping[str, float], k: str) -> Any:
    """One run's value of metric ``k``: ``None`` when unknown (absent or NaN), 0 for a count another run
    has and this one has none of."""
    v = flat.get(k)
    if v is None and (k.startswith("preempted") or (
            k.startswith("refused") and not math.isnan(flat.get("refused", 0)))):
        v = 0                 # a count another run has: none here (unknown stays unknown)
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def headline(columns: Sequence[str], max_queues: int = 6) -> list[str]:
    """The columns worth a terminal: utilisation, waits, refusals, preemptions, and per top-level
    queue its p90 wait (for at most ``max_queues`` queues)."""
    base = [c for c in columns if c.startswith("utilisation.") or c in
            ("wait.p50", "wait.p90", "wait.max", "refused", "preempted")]
    queues = [c for c in columns if c.startswith("queue[") and c.endswith("].wait.p90")]
    return base + queues[:max_queues]


def _cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.4e}"
    return str(v)


def _short(column: str) -> str:
    """A terminal header: ``util gpu`` for ``utilisation.nvidia.com/gpu``, ``team-a p90`` for
    ``queue[root.team-a].wait.p90``."""
    if column.startswith("utilisation."):
        return "util " + column.removeprefix("utilisation.").rsplit("/", 1)[-1]
    if column.startswith("queue[") and column.endswith("].wait.p90"):
        return column[len("queue["):-len("].wait.p90")].removeprefix("root.") + " p90"
    return column


#: variant names longer than this are numbered in the terminal table, with a legend below it
_NAME_WIDTH = 18


def short_names(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """Labels for tables and plots: the names, or ``#1``, ``#2``… (``recorded`` stays) when one is
    long; and the legend lines ``#1  <name>``."""
    if all(len(n) <= _NAME_WIDTH for n in names):
        return list(names), []
    labels: list[str] = []
    legend: list[str] = []
    for n in names:
        if n == "recorded":
            labels.append(n)
        else:
            labels.append(f"#{len(legend) + 1}")
            legend.append(f"{labels[-1]}  {n}")
    return labels, legend


def render_table(columns: Sequence[str], rows: Sequence[Mapping[str, Any]], console: Any = None,
                 title: str = "variant × metric") -> None:
    """Print the headline columns of the table with rich (waits in seconds, utilisation as a ratio).

    Long variant names are shown as ``#1``, ``#2``… with a legend under the table."""
    from rich.console import Console
    from rich.table import Table

    con = console if console is not None else Console()
    shown = headline(columns)
    labels, legend = short_names([str(row["variant"]) for row in rows])
    t = Table(title=title)
    t.add_column("variant", no_wrap=True)
    for c in shown:
        t.add_column(_short(c), justify="right")
    for label, row in zip(labels, rows, strict=True):
        t.add_row(label, *(_cell(row.get(c)) for c in shown))
    # rich shares a shortage of width among the columns and cuts each with "…" ("924…", "res…"): a
    # figure cut is a figure lost, so the table is wider than the terminal (or the pipe's 80) instead
    needed = con.measure(t, options=con.options.update_width(10_000)).maximum
    if needed > con.width:
        con.width = needed
    con.print(t)
    for line in legend:
        con.print(line, highlight=False)


def table_csv(columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """The table as CSV (empty cells for metrics that do not apply or are unknown)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow(["" if row.get(c) is None else row.get(c) for c in columns])
    return buf.getvalue()


def write_results(out: Path, doc: Mapping[str, Any], columns: Sequence[str],
                  rows: Sequence[Mapping[str, Any]]) -> list[Path]:
    """Write ``results.json`` (``doc`` plus the table) and ``results.csv`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    full = dict(doc)
    full["table"] = {"columns": list(columns), "rows": list(rows)}
    paths = [out / "results.json", out / "results.csv"]
    paths[0].write_text(json.dumps(full, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    paths[1].write_text(table_csv(columns, rows), encoding="utf-8")
    return paths
