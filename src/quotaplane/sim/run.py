"""Running a simulation from texts, event dicts or files (re-exported by :mod:`quotaplane.sim`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from quotaplane.sim.engine import SimulationResult, Simulator
from quotaplane.sim.trace import TraceEvent, load_trace, parse_events, read_input

__all__ = ["run_simulation", "simulate"]


def simulate(config_text: str, events: list[TraceEvent] | list[dict[str, Any]], *,
             partition: str = "default", sample_interval: float | None = None,
             cycle_interval: float = 0.0) -> SimulationResult:
    """Replay ``events`` (validated :class:`TraceEvent` objects, or raw event dicts that are validated
    here as a whole first) through ``partition`` of the YAML ``config_text``; return the result."""
    evs: list[TraceEvent]
    if events and not isinstance(events[0], TraceEvent):
        evs = parse_events(enumerate(events, start=1))
    else:
        evs = events  # type: ignore[assignment]
    return Simulator(config_text, partition=partition, sample_interval=sample_interval,
                     cycle_interval=cycle_interval).run(evs)


def run_simulation(config: str | Path, trace: str | Path, out: str | Path | None = None, *,
                   partition: str = "default", sample_interval: float | None = None,
                   cycle_interval: float = 0.0, plot: bool = True,
                   progress: Callable[[int, int], None] | None = None) -> SimulationResult:
    """Read a queue configuration file and a trace file, replay, and write the outputs to ``out``.

    The whole trace is validated before anything runs (:class:`TraceError` names every problem's line
    and field); an invalid configuration raises :class:`~quotaplane.errors.ConfigError`. With ``out``,
    writes ``summary.json``, ``timeline.csv`` and (with ``plot``) ``usage.png``. ``progress(done, total)``
    is called every 1 % of the trace (at most every 10,000 events) while the replay runs. A file that
    cannot be read raises :class:`InputError` (one line naming it).
    """
    from quotaplane.sim.report import write_outputs

    config_text = read_input(config, "configuration file")
    events = load_trace(trace)
    result = Simulator(config_text, partition=partition, sample_interval=sample_interval,
                       cycle_interval=cycle_interval).run(events, progress)
    if out is not None:
        write_outputs(result, Path(out), plot=plot)
    return result
