"""Progress of a replay as plain lines (``quotaplane simulate``, ``--from-store``), for a stderr that is
not a terminal. Its own module so that the command and the plan it runs both use it without importing
each other (no import circle, issue 29)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["PROGRESS_SECONDS", "ProgressLines"]

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
