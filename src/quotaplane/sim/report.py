"""Outputs of a simulation: summary.json, timeline.csv, usage.png and the terminal table.

Everything written is deterministic: sorted keys, fixed float rounding, and a PNG without the
metadata matplotlib would otherwise stamp (software version), so the same trace gives the same files.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from quotaplane.sim.engine import SimulationResult

__all__ = ["format_amount", "render_summary", "summary_json", "timeline_csv", "write_outputs", "write_plot"]

_GI = 1024 ** 3


def format_amount(resource: str, value: int) -> str:
    """A human form of an internal amount: vcore in cores, memory in GiB, others as given."""
    if resource == "vcore":
        return f"{value / 1000:g}"
    if resource == "memory":
        return f"{value / _GI:.1f}Gi"
    return str(value)


def _num(x: float) -> str:
    """A float as fixed-point text with at most 6 decimals and no trailing zeros (``10``, ``2.5``)."""
    return f"{x:.6f}".rstrip("0").rstrip(".")


def summary_json(result: SimulationResult) -> str:
    """The summary as the exact text written to summary.json."""
    return json.dumps(result.summary, indent=2, sort_keys=True) + "\n"


def timeline_csv(result: SimulationResult) -> str:
    """The timeline as the exact text written to timeline.csv (one row per sample)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(result.columns)
    for row in result.rows:
        w.writerow([_num(v) if isinstance(v, float) else v for v in row])
    return buf.getvalue()


def _plot_unit(resource: str) -> tuple[float, str]:
    """How a resource is drawn: (divisor, unit) — cores for vcore, GiB for memory, else as counted."""
    if resource == "vcore":
        return 1000.0, "cores"
    if resource == "memory":
        return float(_GI), "GiB"
    return 1.0, ""


def write_plot(result: SimulationResult, path: Path) -> None:
    """usage.png: per resource, usage stacked by top-level queue over time and the cluster capacity."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    resources = result.resources or ["vcore"]
    times = [s["t"] for s in result.samples]
    fig, axes = plt.subplots(len(resources), 1, figsize=(9, 2.8 * len(resources) + 0.6), sharex=True,
                             squeeze=False)
    for ax, r in zip(axes[:, 0], resources, strict=True):
        scale, unit = _plot_unit(r)
        stacks = [[s["queues"].get(q, {}).get(r, 0) / scale for s in result.samples]
                  for q in result.top_queues]
        if stacks:
            ax.stackplot(times, stacks, labels=result.top_queues, step="post", alpha=0.85)
        ax.step(times, [s["capacity"].get(r, 0) / scale for s in result.samples], where="post",
                color="black", linewidth=1.2, label="capacity")
        ax.set_ylabel(f"{r} ({unit})" if unit else r)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize="small", ncol=2)
    axes[-1, 0].set_xlabel("simulated time (s)")
    fig.suptitle("quotaplane simulation: usage per top-level queue")
    fig.tight_layout()
    # no Software/creation metadata: the file depends on the trace only
    fig.savefig(path, format="png", dpi=80, metadata={"Software": None})
    plt.close(fig)


def write_outputs(result: SimulationResult, out: Path, *, plot: bool = True) -> list[Path]:
    """Write summary.json, timeline.csv and (with ``plot``) usage.png into ``out``; return the paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "summary.json", out / "timeline.csv"]
    paths[0].write_text(summary_json(result), encoding="utf-8")
    paths[1].write_text(timeline_csv(result), encoding="utf-8")
    if plot:
        png = out / "usage.png"
        write_plot(result, png)
        paths.append(png)
    return paths


def render_summary(summary: dict[str, Any], console: Any = None) -> None:
    """Print a short table of the run with rich (to ``console``, or a new stdout console)."""
    from rich.console import Console
    from rich.table import Table

    con = console if console is not None else Console()
    a, k, apps, tm = summary["allocations"], summary["asks"], summary["applications"], summary["time"]
    t = Table(title=f"simulation of partition {summary['partition']!r}", show_header=False)
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("trace events", str(summary["events"]["trace"]))
    t.add_row("simulated seconds", f"{tm['simulated_seconds']:g}")
    moved = apps["moved_by_placement"]
    t.add_row("applications accepted / moved / rejected",
              f"{apps['accepted']} / {moved['count']} / {apps['rejected']}")
    t.add_row("allocations admitted / refused", f"{a['admitted']} / {a['refused']}")
    if moved["count"]:
        m = a["of_moved_applications"]
        t.add_row("  of moved applications", f"{m['admitted']} / {m['refused']}")
    for code, n in a["refused_by_code"].items():
        t.add_row(f"  refused: {code}", str(n))
    t.add_row("asks allocated / pending at end", f"{k['allocated']} / {k['pending_at_end']}")
    w = k["wait_seconds"]
    if w["count"]:
        t.add_row("ask wait p50 / p95 / max (s)", f"{w['p50']:g} / {w['p95']:g} / {w['max']:g}")
    for r, u in summary["utilisation"]["resources"].items():
        t.add_row(f"utilisation {r} mean / peak", f"{u['mean']:.1%} / {u['peak']:.1%}")
    con.print(t)
    peaks = _peak_table(summary["peak_usage"]["queues"])
    if peaks is not None:
        con.print(peaks)


def _peak_table(peaks: dict[str, dict[str, int]]) -> Any:
    """The rich table of peak usage per top-level queue, or None without top-level queues."""
    from rich.table import Table

    top = [q for q in peaks if q.count(".") == 1]
    if not top:
        return None
    resources = sorted({r for q in top for r in peaks[q]})
    pt = Table(title="peak usage per top-level queue")
    pt.add_column("queue")
    for r in resources:
        pt.add_column(r, justify="right")
    for q in top:
        pt.add_row(q, *(format_amount(r, peaks[q].get(r, 0)) for r in resources))
    return pt
