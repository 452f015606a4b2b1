"""The trace simulator for capacity planning (product.md mission item 8; docs/simulator.md).

Replays a trace of timed events (nodes, submissions, allocations, asks, releases) through a real
partition of a queue configuration on simulated time, and reports what was admitted and refused and
why, how long asks waited, usage per queue and per user, and cluster utilisation over time.

``quotaplane simulate --config FILE --trace FILE [--out DIR]`` calls :func:`run_simulation`.

The names below are imported on first use, so the command line can register ``simulate``
(:mod:`quotaplane.sim.command`) without loading the engines.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.sim.engine import SimulationResult, Simulator
    from quotaplane.sim.generate import generate_trace, leaf_queues, trace_to_jsonl
    from quotaplane.sim.run import run_simulation, simulate
    from quotaplane.sim.trace import (
        InputError,
        TraceError,
        TraceEvent,
        load_trace,
        parse_csv,
        parse_events,
        parse_jsonl,
        read_input,
    )

#: where each public name lives
_WHERE = {
    "SimulationResult": "engine", "Simulator": "engine",
    "generate_trace": "generate", "leaf_queues": "generate", "trace_to_jsonl": "generate",
    "run_simulation": "run", "simulate": "run",
    "InputError": "trace", "TraceError": "trace", "TraceEvent": "trace", "load_trace": "trace",
    "parse_csv": "trace", "parse_events": "trace", "parse_jsonl": "trace", "read_input": "trace",
}

__all__ = [
    "InputError",
    "SimulationResult",
    "Simulator",
    "TraceError",
    "TraceEvent",
    "generate_trace",
    "leaf_queues",
    "load_trace",
    "parse_csv",
    "parse_events",
    "parse_jsonl",
    "read_input",
    "run_simulation",
    "simulate",
    "trace_to_jsonl",
]


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"quotaplane.sim.{where}"), name)
    globals()[name] = value
    return value
