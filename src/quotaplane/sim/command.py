"""``quotaplane simulate``: the command's options and body (registered by :mod:`quotaplane.cli`).

Kept here, beside the simulator, so the CLI module only registers it. Heavy imports (the engines,
rich, matplotlib) happen inside the command, so ``quotaplane --help`` stays fast.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TextIO

import typer

__all__ = ["ProgressLines", "register"]

#: a progress line at least every this many seconds of wall time (when not on a terminal)
PROGRESS_SECONDS = 10.0


class ProgressLines:
    """Progress as plain lines, for a stderr that is not a terminal (a log file, CI, a pipe).

    A line each time the replay passes another 10 % of the trace, and at least every
    :data:`PROGRESS_SECONDS` of wall time in between (a long run never looks hung); the 100 % line is
    always printed. ``clock`` is wall time in seconds (only for pacing lines: the replay itself runs
    on simulated time).
    """

    def __init__(self, label: str, out: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.out = out
        self.clock = clock
        self._next_pct = 10
        self._last_line = clock()
        self._done_last = -1

    def __call__(self, done: int, total: int) -> None:
        """Told ``done`` of ``total`` trace events are replayed."""
        if done == self._done_last:
            return
        pct = 100 if total <= 0 else min(100, done * 100 // total)
        now = self.clock()
        if pct >= self._next_pct or pct == 100 or now - self._last_line >= PROGRESS_SECONDS:
            self.out.write(f"replaying {self.label}: {pct}% ({done}/{total} trace events)\n")
            self.out.flush()
            self._last_line = now
            self._done_last = done
            while self._next_pct <= pct:
                self._next_pct += 10


def register(app: typer.Typer) -> None:
    """Add ``simulate`` to the command line ``app``."""

    @app.command()
    def simulate(
        config: Annotated[Path, typer.Option(help="Queue configuration YAML file.")],
        trace: Annotated[Path, typer.Option(help="Trace file: JSON lines, or CSV when it ends in .csv.")],
        out: Annotated[Path | None, typer.Option(
            help="Directory for summary.json, timeline.csv, usage.png.")] = None,
        partition: Annotated[str, typer.Option(help="The partition the trace drives.")] = "default",
        sample_interval: Annotated[float | None, typer.Option(
            help="Timeline step in simulated seconds.")] = None,
        cycle_interval: Annotated[float, typer.Option(
            help="Seconds between scheduling cycles for waiting asks (0: after every change).")] = 0.0,
        plot: Annotated[bool, typer.Option(help="Write usage.png (needs matplotlib).")] = True,
    ) -> None:
        """Replay a trace through the quota engines on simulated time (capacity planning)."""
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
                result = run_simulation(config, trace, out, partition=partition,
                                        sample_interval=sample_interval, cycle_interval=cycle_interval,
                                        plot=plot, progress=progress)
            except ConfigError as exc:
                where = f"{config}:{exc.line}" if getattr(exc, "line", None) else str(config)
                typer.echo(f"{where}: {exc}", err=True)
                raise typer.Exit(1) from None
            except (TraceError, ValueError, OSError) as exc:
                typer.echo(str(exc), err=True)
                raise typer.Exit(1) from None
        render_summary(result.summary)
        if out is not None:
            names = ["summary.json", "timeline.csv", *(["usage.png"] if plot else [])]
            typer.echo("wrote " + ", ".join(str(out / n) for n in names))
