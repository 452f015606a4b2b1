"""Outputs of a simulation: summary.json, timeline.csv, usage.png and the terminal table.

Everything written is deterministic: sorted keys, fixed float rounding, and a PNG without the
metadata matplotlib would otherwise stamp (software version), so the same trace gives the same files.
"""

from __future__ import annotations

import csv
import io
import json
from itertools import pairwise
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


#: top-level queues drawn in usage.png at most (one row each)
MAX_QUEUE_ROWS = 6


def write_plot(result: SimulationResult, path: Path) -> None:
    """usage.png, one column per resource:

    - the cluster: usage stacked by top-level queue, the capacity, and usage plus waiting demand;
    - each top-level queue (at most :data:`MAX_QUEUE_ROWS`): its usage against its guaranteed
      (dashed) and max (dotted), and its usage plus its waiting demand;
    - refusals per sample interval, stacked by reason.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    resources = result.resources or ["vcore"]
    samples = result.samples
    times = [s["t"] for s in samples]
    queues = result.top_queues[:MAX_QUEUE_ROWS]
    cells = result.summary.get("metrics", {}).get("queues", {})
    nrows = 2 + len(queues)
    fig, axes = plt.subplots(nrows, len(resources), figsize=(6.5 * len(resources) + 1, 2.3 * nrows + 0.6),
                             sharex=True, squeeze=False)
    for col, r in enumerate(resources):
        scale, unit = _plot_unit(r)
        label = f"{r} ({unit})" if unit else r
        ax = axes[0, col]
        stacks = [[s["queues"].get(q, {}).get(r, 0) / scale for s in samples] for q in result.top_queues]
        if stacks:
            ax.stackplot(times, stacks, labels=result.top_queues, step="post", alpha=0.85)
        ax.step(times, [s["capacity"].get(r, 0) / scale for s in samples], where="post", color="black",
                linewidth=1.2, label="capacity")
        ax.step(times, [(s["used"].get(r, 0) + s.get("demand", {}).get(r, 0)) / scale for s in samples],
                where="post", color="crimson", linestyle="-.", linewidth=1.0, label="used + waiting")
        ax.set_title(f"cluster: {label}", fontsize="medium", loc="left")
        ax.legend(loc="upper left", fontsize="x-small", ncol=2)
        for row, q in enumerate(queues, start=1):
            ax = axes[row, col]
            used = [s["queues"].get(q, {}).get(r, 0) / scale for s in samples]
            ax.step(times, used, where="post", color="tab:blue", linewidth=1.3, label="usage")
            ax.step(times, [u + s.get("queue_demand", {}).get(q, {}).get(r, 0) / scale
                            for u, s in zip(used, samples, strict=True)],
                    where="post", color="crimson", linestyle="-.", linewidth=1.0, label="usage + waiting")
            g = cells.get(q, {}).get("guaranteed", {}).get(r)
            m = cells.get(q, {}).get("max", {}).get(r)
            if g is not None:
                ax.axhline(g / scale, color="tab:green", linestyle="--", linewidth=1.1, label="guaranteed")
            if m is not None:
                ax.axhline(m / scale, color="tab:orange", linestyle=":", linewidth=1.4, label="max")
            ax.set_title(f"{q}: {label}", fontsize="medium", loc="left")
            ax.legend(loc="upper left", fontsize="x-small", ncol=4)
        ax = axes[-1, col]
        _refusal_bars(ax, samples, times)
        for a in axes[:, col]:
            a.grid(True, alpha=0.3)
        axes[-1, col].set_xlabel("simulated time (s)")
    fig.suptitle("quotaplane simulation: usage, guaranteed, max, waiting demand and refusals")
    fig.tight_layout()
    # no Software/creation metadata: the file depends on the trace only
    fig.savefig(path, format="png", dpi=80, metadata={"Software": None})
    plt.close(fig)


def _refusal_bars(ax: Any, samples: list[dict[str, Any]], times: list[float]) -> None:
    """Refusals in each sample interval (the samples hold running totals), stacked by reason."""
    codes = sorted({c for s in samples for c in s.get("refused", {})})
    widths = [b - a for a, b in pairwise(times)] or [1.0]
    bottom = [0] * max(0, len(samples) - 1)
    for code in codes:
        counts = [s2.get("refused", {}).get(code, 0) - s1.get("refused", {}).get(code, 0)
                  for s1, s2 in pairwise(samples)]
        if counts:
            ax.bar(times[:-1], counts, width=widths, bottom=bottom, align="edge", label=code)
            bottom = [x + y for x, y in zip(bottom, counts, strict=True)]
    ax.set_title("refusals per interval, by reason", fontsize="medium", loc="left")
    if codes:
        ax.legend(loc="upper left", fontsize="x-small", ncol=3)
    else:
        ax.text(0.5, 0.5, "no refusals", ha="center", va="center", transform=ax.transAxes)


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
