"""``quotaplane simulate`` as a plan: a recorded history and/or variants, compared in one table.

Called by :mod:`quotaplane.sim.command` for ``--from-store`` (replay what happened, under the
configuration in force or a proposed one) and for ``--vary`` (a sweep, on a trace or a history).
Prints the caveats, the reproduction check and the variant × metric table; with ``--out`` writes
``report.html`` (with ``plots/``), ``results.json`` and ``results.csv``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from quotaplane.sim.progress import ProgressLines

__all__ = ["PlanOptions", "run_plan"]


@dataclass
class PlanOptions:
    """The command's options (see ``quotaplane simulate --help``)."""

    config: Path | None = None
    trace: Path | None = None
    from_store: str | None = None
    since: str | None = None
    until: str | None = None
    vary: list[str] = field(default_factory=list)
    workers: int | None = None
    dask: str | None = None
    out: Path | None = None
    partition: str = "default"
    sample_interval: float | None = None
    cycle_interval: float = 0.0
    plot: bool = True


class _VariantLines:
    """One line per finished variant (stderr), so a long sweep shows it is moving."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.start = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        self.out.write(f"variants: {done}/{total} done ({time.monotonic() - self.start:.1f} s)\n")
        self.out.flush()


def run_plan(o: PlanOptions, fail: Callable[[str], NoReturn]) -> None:
    """Run the plan ``o`` describes; ``fail(message)`` reports a bad input (one line) and exits."""
    from rich.console import Console

    from quotaplane.errors import ConfigError
    from quotaplane.journal import mask_url
    from quotaplane.sim.compare import replay, reproduction, sample_interval_of
    from quotaplane.sim.recorded import Recorded, RecordedError, load_recorded, parse_when
    from quotaplane.sim.results import render_table, short_names, table, write_results
    from quotaplane.sim.sweep import SweepError, Workload, apply_settings, run_dask, run_local, variants
    from quotaplane.sim.trace import InputError, TraceError, load_trace, read_input

    err = sys.stderr
    console = Console()
    recorded: Recorded | None = None
    partition = o.partition.lower()
    try:
        vs = variants(o.vary)
        if o.from_store is not None:
            since = parse_when(o.since, "--since") if o.since is not None else None
            until = parse_when(o.until, "--until") if o.until is not None else None
            err.write(f"reading partition {partition!r} from {mask_url(o.from_store)}\n")
            recorded = load_recorded(o.from_store, partition=partition, since=since, until=until,
                                     sample_interval=o.sample_interval)
            events, window = recorded.events, recorded.window()
            interval: float | None = sample_interval_of(recorded, o.sample_interval)
            source = (f"history of partition {partition!r} in {mask_url(o.from_store)}, "
                      f"{_when(recorded.since)} to {_when(recorded.until)} ({len(events)} workload events "
                      f"from {recorded.counts['journal_events']} journal events)")
        else:
            assert o.trace is not None
            events, window, interval = load_trace(o.trace), None, o.sample_interval
            source = f"trace {o.trace} ({len(events)} events)"
        if o.config is not None:
            base_text = read_input(o.config, "configuration file")
            base_name = "proposed"
        else:
            assert recorded is not None
            base_text, base_name = recorded.config_text, "in force"
        from quotaplane.config import load_config

        load_config(base_text)
        configs = [(v.name, apply_settings(base_text, partition, v)) for v in vs] if vs else \
            [(base_name, base_text)]
    except ConfigError as exc:
        where = f"{o.config}:{exc.line}" if o.config is not None and getattr(exc, "line", None) else \
            str(o.config or "the configuration in force")
        fail(f"{where}: {exc}")
    except (RecordedError, SweepError, InputError, TraceError, ValueError) as exc:
        fail(str(exc))

    workload = Workload(events, partition, window, interval, o.cycle_interval)
    check = None
    try:
        if not vs and recorded is not None:
            label = "the history" if o.config is None else "the history under the proposed configuration"
            result = replay(recorded, base_text, cycle_interval=o.cycle_interval, sample_interval=interval,
                            progress=None if err.isatty() else ProgressLines(label, err))
            runs = [(configs[0][0], result.summary, result.samples)]
            if o.config is None or base_text == recorded.config_text:
                check = reproduction(recorded, result).to_json()
        elif o.dask is not None:
            done = run_dask(o.dask, workload, configs, _VariantLines(err))
            runs = [(r.name, r.summary, r.samples) for r in done]
        else:
            done = run_local(workload, configs, workers=o.workers, done=_VariantLines(err))
            runs = [(r.name, r.summary, r.samples) for r in done]
    except (SweepError, ValueError) as exc:
        fail(str(exc))

    if recorded is not None:
        for c in recorded.caveats:
            console.print(f"[dim]note:[/dim] {c}", highlight=False)
    if check is not None:
        if check["exact"]:
            console.print(f"reproduced exactly: all {check['recorded']} recorded decisions", highlight=False)
        else:
            console.print(f"reproduced {check['matched']} of {check['recorded']} recorded decisions; first "
                          "differences:", highlight=False)
            for d in check["differences"][:10]:
                console.print(f"  {d}", highlight=False)
    columns, rows = table(recorded.metrics if recorded is not None else None,
                          [(name, summary["metrics"]) for name, summary, _ in runs])
    render_table(columns, rows, console)
    if o.out is None:
        return
    doc: dict[str, Any] = {
        "source": source,
        "base_configuration": str(o.config) if o.config is not None else "in force",
        "window": {"since": recorded.since, "until": recorded.until} if recorded is not None else None,
        "caveats": recorded.caveats if recorded is not None else [],
        "reproduction": check,
        "recorded": recorded.metrics if recorded is not None else None,
        "variants": [{"name": name, "settings": vs[i].to_json() if vs else {}, "metrics": summary["metrics"]}
                     for i, (name, summary, _) in enumerate(runs)],
    }
    written = write_results(o.out, doc, columns, rows)
    if o.plot:
        from quotaplane.sim.html import PlotRun, write_report

        labels, legend = short_names([str(r["variant"]) for r in rows])
        plot_runs = [PlotRun("recorded", recorded.metrics, recorded.samples)] if recorded is not None else []
        plot_runs += [PlotRun(name, summary["metrics"], samples) for name, summary, samples in runs]
        for run, label in zip(plot_runs, labels, strict=True):
            run.name = label
        prefer = next((s.name for v in vs for s, _ in v.values if s.kind == "resources"), None)
        written.insert(0, write_report(o.out, title="quotaplane capacity plan", source=source,
                                       runs=plot_runs, columns=columns, rows=rows,
                                       caveats=recorded.caveats if recorded is not None else (),
                                       reproduction=check, resource=prefer, legend=legend,
                                       recorded_unknown=recorded is not None))
    console.print("wrote " + ", ".join(str(p) for p in written), highlight=False)


def _when(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
