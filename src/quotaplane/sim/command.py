"""``quotaplane simulate``: the command's options and body (registered by :mod:`quotaplane.cli`).

Kept here, beside the simulator, so the CLI module only registers it. Heavy imports (the engines,
rich, matplotlib) happen inside the command, so ``quotaplane --help`` stays fast.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from quotaplane.sim.progress import ProgressLines

__all__ = ["ProgressLines", "register"]

def _fail(message: str) -> NoReturn:
    typer.echo(message, err=True)
    raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``simulate`` to the command line ``app``."""

    @app.command()
    def simulate(
        config: Annotated[Path | None, typer.Option(
            help="Queue configuration YAML file (with --from-store: the proposed one; default: the one "
                 "in force when it was recorded).")] = None,
        trace: Annotated[Path | None, typer.Option(
            help="Trace file: JSON lines, or CSV when it ends in .csv.")] = None,
        from_store: Annotated[str | None, typer.Option(
            "--from-store", help="Replay the history recorded in this store (sqlite:///… or postgresql://…).")
        ] = None,
        since: Annotated[str | None, typer.Option(
            help="With --from-store: start of the window (epoch seconds or ISO 8601; default: the first "
                 "event).")] = None,
        until: Annotated[str | None, typer.Option(
            help="With --from-store: end of the window (default: the last event).")] = None,
        vary: Annotated[list[str] | None, typer.Option(
            help="PATH=V1,V2,… e.g. 'root.team-a.resources.guaranteed.nvidia.com/gpu=4,8,12'; several make "
                 "a grid.")] = None,
        workers: Annotated[int | None, typer.Option(
            min=1, help="Local processes for the variants (default: the CPUs).")] = None,
        dask: Annotated[str | None, typer.Option(
            help="Run the variants on this Dask scheduler (tcp://host:8786; the 'dask' extra).")] = None,
        out: Annotated[Path | None, typer.Option(
            help="Directory for the outputs (a run: summary.json, timeline.csv, usage.png; a plan: "
                 "report.html, results.json, results.csv, plots/).")] = None,
        partition: Annotated[str, typer.Option(help="The partition the trace drives.")] = "default",
        sample_interval: Annotated[float | None, typer.Option(
            help="Timeline step in simulated seconds.")] = None,
        cycle_interval: Annotated[float, typer.Option(
            help="Seconds between scheduling cycles for waiting asks (0: after every change).")] = 0.0,
        plot: Annotated[bool, typer.Option(help="Write the plots (needs matplotlib).")] = True,
    ) -> None:
        """Replay a trace or a recorded history through the quota engines on simulated time: what
        happened, and what would have happened under a proposed configuration (capacity planning)."""
        if (trace is None) == (from_store is None):
            _fail("simulate: give either --trace FILE or --from-store URL")
        if trace is not None and (since is not None or until is not None):
            _fail("simulate: --since and --until go with --from-store")
        if trace is not None and config is None:
            _fail("simulate: --config FILE is needed with --trace")
        if dask is not None and not vary:
            _fail("simulate: --dask runs the variants of --vary; give at least one --vary")
        if out is not None and out.exists() and not out.is_dir():
            # said before the run, not as "[Errno 17] File exists" after it
            _fail(f"simulate: --out {out} is a file, not a directory (the outputs are written into a "
                  "directory, made if missing)")
        if trace is not None and not vary:
            assert config is not None
            _single_run(config, trace, out, partition, sample_interval, cycle_interval, plot)
            return
        from quotaplane.sim.plan import PlanOptions, run_plan

        run_plan(PlanOptions(config=config, trace=trace, from_store=from_store, since=since, until=until,
                             vary=list(vary or []), workers=workers, dask=dask, out=out, partition=partition,
                             sample_interval=sample_interval, cycle_interval=cycle_interval, plot=plot),
                 fail=_fail)


def _single_run(config: Path, trace: Path, out: Path | None, partition: str, sample_interval: float | None,
                cycle_interval: float, plot: bool) -> None:
    """One trace under one configuration: the summary table and summary.json, timeline.csv, usage.png."""
    from rich.console import Console
    from rich.progress import Progress

    from quotaplane.errors import ConfigError
    from quotaplane.sim import TraceError, run_simulation
    from quotaplane.sim.report import render_summary

    on_terminal = sys.stderr.isatty()
    # a bar on a terminal (gone when the run ends); plain lines otherwise (issue 36: a redirected
    # 5-minute run printed nothing)
    with Progress(console=Console(stderr=True), transient=True, disable=not on_terminal) as bar:
        task = bar.add_task("replaying", total=None)
        progress: Callable[[int, int], None]
        if on_terminal:
            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)
        else:
            progress = ProgressLines(trace.name, sys.stderr)
        try:
            result = run_simulation(config, trace, out, partition=partition, sample_interval=sample_interval,
                                    cycle_interval=cycle_interval, plot=plot, progress=progress)
        except ConfigError as exc:
            where = f"{config}:{exc.line}" if getattr(exc, "line", None) else str(config)
            _fail(f"{where}: {exc}")
        except (TraceError, ValueError, OSError) as exc:
            _fail(str(exc))
    render_summary(result.summary)
    if out is not None:
        names = ["summary.json", "timeline.csv", *(["usage.png"] if plot else [])]
        typer.echo("wrote " + ", ".join(str(out / n) for n in names))
