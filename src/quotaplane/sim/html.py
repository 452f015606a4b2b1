"""The plan's report: ``report.html`` with its plots (also written as PNG files under ``plots/``).

Four plots, each comparing the runs (``recorded`` first when there is one, then every variant; at
most :data:`MAX_LINES` runs are drawn, the table has them all):

- ``usage.png``: per top-level queue, usage over time of the main resource against its guaranteed
  (dashed) and max (dotted), one colour per run;
- ``waiting.png``: the waiting demand over time (the resources of the asks that wait);
- ``waits.png``: the distribution of waiting times per run (the share of asks that waited at most
  so long);
- ``refusals.png``: refusals per run by reason.

The HTML embeds the images (one file to mail around) and holds the variant × metric table, the
caveats and the reproduction check. Everything is deterministic: PNGs carry no version metadata.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["MAX_LINES", "PlotRun", "main_resource", "write_report"]

#: runs drawn in one plot at most (colours stay distinguishable); the table holds every run
MAX_LINES = 8


class PlotRun:
    """What a plot needs of one run: its name, metrics section and timeline samples."""

    __slots__ = ("metrics", "name", "samples")

    def __init__(self, name: str, metrics: Mapping[str, Any], samples: Sequence[Mapping[str, Any]]) -> None:
        self.name = name
        self.metrics = metrics
        self.samples = samples


def main_resource(runs: Sequence[PlotRun], prefer: str | None = None) -> str:
    """The resource the plots draw: ``prefer`` (the one a ``--vary`` changes) when used, else the one
    with the highest mean utilisation in the first run."""
    used = {r for run in runs for r in run.metrics.get("utilisation", {})}
    if prefer and prefer in used:
        return prefer
    if not runs:
        return prefer or "vcore"
    util: Mapping[str, Any] = runs[0].metrics.get("utilisation", {})
    if util:
        return str(max(sorted(util), key=lambda r: float(util[r]["mean"])))
    return str((sorted(used) or ["vcore"])[0])


def _unit(resource: str) -> tuple[float, str]:
    if resource == "vcore":
        return 1000.0, "cores"
    if resource == "memory":
        return float(1024 ** 3), "GiB"
    return 1.0, ""


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=80, metadata={"Software": None})
    _pyplot().close(fig)


def _time_axis(samples_end: float) -> tuple[float, str]:
    """Seconds per axis unit and its label: hours for windows over three hours."""
    if samples_end > 3 * 3600:
        return 3600.0, "hours since the start of the window"
    return 1.0, "seconds since the start of the window"


def _steps(samples: Sequence[Mapping[str, Any]], get: Any, t0: float, per: float = 1.0
           ) -> tuple[list[float], list[float]]:
    return [(float(s["t"]) - t0) / per for s in samples], [float(get(s)) for s in samples]


def _span(runs: Sequence[PlotRun], t0: float) -> float:
    return max((float(r.samples[-1]["t"]) - t0 for r in runs if r.samples), default=0.0)


def _limit_lines(ax: Any, cell: Mapping[str, Any], resource: str, scale: float, colour: str) -> None:
    """A queue's guaranteed (dashed) and max (dotted) of ``resource``, when it has them."""
    g = cell.get("guaranteed", {}).get(resource)
    m = cell.get("max", {}).get(resource)
    if g is not None:
        ax.axhline(g / scale, color=colour, linestyle="--", linewidth=1.0, alpha=0.8)
    if m is not None:
        ax.axhline(m / scale, color=colour, linestyle=":", linewidth=1.3, alpha=0.9)


def plot_usage(runs: Sequence[PlotRun], resource: str, path: Path, t0: float) -> None:
    """Per top-level queue: usage of ``resource`` over time per run, with its guaranteed and max."""
    from matplotlib.lines import Line2D

    plt = _pyplot()
    queues = sorted({q for run in runs for q in run.metrics.get("queues", {}) if q.count(".") == 1})
    queues = queues[:8] or ["root"]
    scale, unit = _unit(resource)
    per, xlabel = _time_axis(_span(runs, t0))
    fig, axes = plt.subplots(len(queues), 1, figsize=(9, 2.3 * len(queues) + 1.2), sharex=True, squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    drawn = runs[:MAX_LINES]
    for ax, q in zip(axes[:, 0], queues, strict=True):
        for i, run in enumerate(drawn):
            c = colours[i % len(colours)]
            ts, ys = _steps(run.samples, lambda s, q=q: s["queues"].get(q, {}).get(resource, 0) / scale,
                            t0, per)
            ax.step(ts, ys, where="post", color=c, linewidth=1.4)

            def demand(s: Mapping[str, Any], q: str = q) -> float:
                return float(s["queues"].get(q, {}).get(resource, 0)
                             + s.get("queue_demand", {}).get(q, {}).get(resource, 0)) / scale

            ts, ys = _steps(run.samples, demand, t0, per)
            ax.step(ts, ys, where="post", color=c, linewidth=0.8, alpha=0.6, linestyle="-.")
            _limit_lines(ax, run.metrics.get("queues", {}).get(q, {}), resource, scale, c)
        ax.set_title(q, fontsize="medium", loc="left")
        ax.set_ylabel(f"{resource} ({unit})" if unit else resource.rsplit("/", 1)[-1])
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel(xlabel)
    handles = [Line2D([], [], color=colours[i % len(colours)], linewidth=2, label=run.name)
               for i, run in enumerate(drawn)]
    handles += [Line2D([], [], color="grey", linestyle="-", label="usage"),
                Line2D([], [], color="grey", linestyle="-.", label="usage + waiting"),
                Line2D([], [], color="grey", linestyle="--", label="guaranteed"),
                Line2D([], [], color="grey", linestyle=":", label="max")]
    fig.legend(handles=handles, loc="lower center", ncol=min(6, len(handles)), fontsize="small",
               frameon=False)
    fig.suptitle(f"usage against guaranteed and max: {resource}")
    fig.tight_layout(rect=(0, 0.05 + 0.015 * (len(handles) // 6), 1, 1))
    fig.savefig(path, format="png", dpi=80, metadata={"Software": None})
    plt.close(fig)


def plot_waiting(runs: Sequence[PlotRun], resource: str, path: Path, t0: float) -> None:
    """The waiting demand (resources of waiting asks) over time per run."""
    plt = _pyplot()
    scale, unit = _unit(resource)
    per, xlabel = _time_axis(_span(runs, t0))
    fig, ax = plt.subplots(figsize=(9, 3.2))
    for run in runs[:MAX_LINES]:
        ts, ys = _steps(run.samples, lambda s: s.get("demand", {}).get(resource, 0) / scale, t0, per)
        ax.step(ts, ys, where="post", linewidth=1.3, label=run.name)
    ax.set_ylabel(f"waiting {resource} ({unit})" if unit else f"waiting {resource.rsplit('/', 1)[-1]}")
    ax.set_xlabel(xlabel)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper right", fontsize="small")
    fig.suptitle("waiting demand")
    _save(fig, path)


def plot_waits(runs: Sequence[PlotRun], path: Path) -> None:
    """The distribution of waiting times per run: share of asks that waited at most x seconds."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.2))
    drawn = 0
    for run in runs[:MAX_LINES]:
        q = run.metrics.get("wait_quantiles") or []
        if q:
            ax.step(q, [i / 100 for i in range(len(q))], where="post", linewidth=1.3,
                    label=f"{run.name} (n={run.metrics['wait']['count']})")
            drawn += 1
    if not drawn:
        ax.text(0.5, 0.5, "no ask waited", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("wait (s)")
    ax.set_ylabel("share of asks")
    ax.set_ylim(0, 1.02)
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(loc="lower right", fontsize="small")
    fig.suptitle("wait-time distribution")
    _save(fig, path)


def plot_refusals(runs: Sequence[PlotRun], path: Path, recorded_unknown: bool) -> None:
    """Refusals by reason (violation code), one stacked bar per run."""
    plt = _pyplot()
    names = [r.name for r in runs]
    by_code: dict[str, list[int]] = {}
    for i, run in enumerate(runs):
        root = run.metrics.get("queues", {}).get("root", {})
        for code, n in root.get("refused", {}).items():
            by_code.setdefault(code, [0] * len(runs))[i] = n
    fig, ax = plt.subplots(figsize=(9, 0.5 + 0.45 * max(3, len(runs))))
    left = [0] * len(runs)
    for code in sorted(by_code):
        ax.barh(names, by_code[code], left=left, label=code)
        left = [a + b for a, b in zip(left, by_code[code], strict=True)]
    if recorded_unknown and names and names[0] == "recorded":
        ax.text(0, 0, "  not journalled", va="center", fontsize="small", color="grey")
    if not by_code:
        ax.text(0.5, 0.5, "no refusals", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.legend(loc="lower right", fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel("refused allocation requests")
    ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle("refusals by reason")
    _save(fig, path)


def write_plots(runs: Sequence[PlotRun], out: Path, *, resource: str, t0: float,
                recorded_unknown: bool = False) -> dict[str, Path]:
    """Write the four plots into ``out`` (created); return their paths by name."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"usage": out / "usage.png", "waiting": out / "waiting.png", "waits": out / "waits.png",
             "refusals": out / "refusals.png"}
    plot_usage(runs, resource, paths["usage"], t0)
    plot_waiting(runs, resource, paths["waiting"], t0)
    plot_waits(runs, paths["waits"])
    plot_refusals(runs, paths["refusals"], recorded_unknown)
    return paths


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 7px}
th{background:#f3f3f3;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#176b2c}.bad{color:#a4161a}img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.scroll{overflow-x:auto}code{background:#f5f5f5;padding:0 3px}"""


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _list_html(heading: str, items: Sequence[str]) -> list[str]:
    """A headed bullet list of ``items`` (already escaped); nothing when there are none."""
    if not items:
        return []
    return [f"<h2>{heading}</h2><ul>", *[f"<li>{i}</li>" for i in items], "</ul>"]


def _table_row(row: Mapping[str, Any], columns: Sequence[str]) -> str:
    """One variant's row of the variant × metric table."""
    e = html.escape
    return "<tr>" + "".join(f"<td>{e(str(row.get(c)))}</td>" if c == "variant"
                            else f"<td class='n'>{e(_fmt(row.get(c)))}</td>" for c in columns) + "</tr>"


def _reproduction_html(reproduction: Mapping[str, Any]) -> list[str]:
    """Whether the replay under the configuration in force reproduced the recorded decisions."""
    if reproduction["exact"]:
        return [f"<p class='ok'>Replayed under the configuration in force: all "
                f"{reproduction['recorded']} recorded decisions reproduced exactly.</p>"]
    return [f"<p class='bad'>Replayed under the configuration in force: "
            f"{reproduction['matched']} of {reproduction['recorded']} recorded decisions "
            "reproduced. First differences:</p><ul>",
            *[f"<li><code>{html.escape(d)}</code></li>" for d in reproduction["differences"]], "</ul>"]


def write_report(out: Path, *, title: str, source: str, runs: Sequence[PlotRun],
                 columns: Sequence[str], rows: Sequence[Mapping[str, Any]], caveats: Sequence[str] = (),
                 reproduction: Mapping[str, Any] | None = None, resource: str | None = None,
                 recorded_unknown: bool = False, legend: Sequence[str] = ()) -> Path:
    """Write ``report.html`` and ``plots/*.png`` into ``out``; return the report's path. ``legend``:
    lines naming the variants the plots label ``#1``, ``#2``…"""
    res = main_resource(runs, resource)
    t0 = min((float(r.samples[0]["t"]) for r in runs if r.samples), default=0.0)
    plots = write_plots(runs, out / "plots", resource=res, t0=t0, recorded_unknown=recorded_unknown)
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{e(title)}</h1><p>{e(source)}</p>"]
    if reproduction is not None:
        parts += _reproduction_html(reproduction)
    parts += _list_html("What this replay cannot tell", [e(c) for c in caveats])
    parts += _list_html("Variants", [f"<code>{e(line)}</code>" for line in legend])
    parts.append("<h2>Variant × metric</h2><p>Waits in seconds; utilisation as a share of the cluster; "
                 "usage, borrowed and lent as time-weighted means in internal units (vcore in milli-cores, "
                 "memory in bytes). Also in <code>results.csv</code> and <code>results.json</code>.</p>"
                 "<div class='scroll'><table><tr>")
    parts += [f"<th>{e(c)}</th>" for c in columns]
    parts.append("</tr>")
    parts += [_table_row(row, columns) for row in rows]
    parts.append("</table></div>")
    captions = {"usage": f"Usage of {res} per top-level queue against its guaranteed and max, and usage plus "
                         "waiting demand",
                "waiting": f"Waiting demand ({res})", "waits": "Wait-time distribution per run",
                "refusals": "Refusals by reason"}
    for name, path in plots.items():
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        parts.append(f"<h2>{e(captions[name])}</h2><img alt='{e(captions[name])}' "
                     f"src='data:image/png;base64,{data}'>")
    parts.append("</body></html>\n")
    report = out / "report.html"
    report.write_text("".join(parts), encoding="utf-8")
    return report
