"""Replaying a recorded window and comparing the replay with what actually happened.

:func:`replay` runs a :class:`~.recorded.Recorded` workload under a configuration (by default the
one in force when it was recorded) with the same measures and sample grid as the recording.
:func:`reproduction` checks a replay under the configuration in force against the recorded
decisions — every application placed, ask queued, allocation admitted, released, preempted or
withdrawn, at its time — and either says it reproduced them exactly or lists the first differences
with the reasons the history cannot be replayed exactly (:attr:`Recorded.caveats`). The table of
measures, recorded against each replayed variant, is :func:`quotaplane.sim.results.table`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from quotaplane.sim.engine import DEFAULT_SAMPLES, SimulationResult, Simulator
from quotaplane.sim.recorded import Recorded

__all__ = ["Reproduction", "replay", "reproduction", "sample_interval_of"]

_MAX_DIFFERENCES = 20


def sample_interval_of(recorded: Recorded, sample_interval: float | None = None) -> float:
    """The timeline step shared by the recording and its replays (default: the window over 200)."""
    if sample_interval is not None:
        return sample_interval
    span = recorded.until - recorded.since
    return span / DEFAULT_SAMPLES if span > 0 else 1.0


def replay(recorded: Recorded, config_text: str | None = None, *, cycle_interval: float = 0.0,
           sample_interval: float | None = None,
           progress: Callable[[int, int], None] | None = None) -> SimulationResult:
    """Replay the recorded workload under ``config_text`` (default: the configuration in force).

    The measures cover the recorded window; the replay runs on past ``until`` while work of known
    duration still runs, so waits that a proposal makes longer are measured to the end.
    """
    sim = Simulator(config_text if config_text is not None else recorded.config_text,
                    partition=recorded.partition,
                    sample_interval=sample_interval_of(recorded, sample_interval),
                    cycle_interval=cycle_interval, window=recorded.window(), record_decisions=True)
    return sim.run(recorded.events, progress)


@dataclass
class Reproduction:
    """Whether a replay made the recorded decisions: ``exact``, how many ``matched``, the first
    ``differences`` (one line each) and the ``reasons`` an exact replay may be impossible."""

    exact: bool
    matched: int
    recorded: int
    replayed: int
    differences: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """As plain data (the report's ``reproduction`` section)."""
        return {"exact": self.exact, "matched": self.matched, "recorded": self.recorded,
                "replayed": self.replayed, "differences": self.differences, "reasons": self.reasons}


def _fmt(d: tuple[float, str, str, str]) -> str:
    t, what, key, detail = d
    return f"t={t:.6f} {what} {key}" + (f" ({detail})" if detail else "")


def reproduction(recorded: Recorded, result: SimulationResult) -> Reproduction:
    """Compare the replay's decisions in the window with the recorded ones, in time order."""
    assert result.decisions is not None, "replay with record_decisions=True"
    until = recorded.until
    # times to the microsecond: the journal's resolution (both sides read the same floats)
    rounded = sorted((round(t, 6), w, k, x) for t, w, k, x in result.decisions if t <= until)
    want_r = sorted((round(t, 6), w, k, x) for t, w, k, x in recorded.decisions)
    a, b = set(want_r), set(rounded)
    matched = len(a & b)
    diffs: list[str] = []
    for d in sorted(a - b):
        if len(diffs) >= _MAX_DIFFERENCES:
            break
        diffs.append(f"recorded, not replayed: {_fmt(d)}")
    for d in sorted(b - a):
        if len(diffs) >= 2 * _MAX_DIFFERENCES:
            break
        diffs.append(f"replayed, not recorded: {_fmt(d)}")
    exact = a == b
    reasons = [] if exact else list(recorded.caveats)
    return Reproduction(exact, matched, len(want_r), len(rounded), diffs, reasons)
