"""The ETA in a waiting pod's ``QuotaAdmitted`` condition (issue 35, docs/eta.md "Kubernetes").

Every ``eta_every`` seconds the front takes the partition's forecast (:mod:`quotaplane.eta`) on a worker
thread and, for the first :data:`EXPLAINED` waiting asks in arrival order, what would have to change.
Each waiting pod's condition message then ends with ``; starts about 2026-11-28T10:45Z (p50, from
…)`` — or ``; start unknown`` — and the top change (``; starts now if … ended``). The p50 start is an
absolute time rounded to the minute, not "in 5 minutes": the message, and so the condition, changes only
when the forecast moves, not as time passes, so the API server is not rewritten at every refresh.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from quotaplane.eta import explain_ask, tracker
from quotaplane.partition import Partition

__all__ = ["EXPLAINED", "EtaNotes"]

#: the waiting asks per refresh that get "what would have to change" (each costs working copies)
EXPLAINED = 10


def _minute(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(round(t / 60) * 60))


class EtaNotes:
    """The ETA sentence of each waiting ask, as of the last :meth:`refresh` (empty before)."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        self._notes: dict[str, str] = {}
        # the hold times are observed from the tracker's start on: start it with the front
        tracker(partition)

    def note(self, key: str) -> str:
        """What the condition message of the waiting pod ``key`` ends with ("" when not known yet)."""
        return self._notes.get(key, "")

    def refresh(self) -> Mapping[str, str]:
        """Take the forecast now; the notes that changed (key → new note)."""
        partition = self.partition
        forecast = tracker(partition).forecast()
        notes: dict[str, str] = {}
        for i, (key, eta) in enumerate(forecast.asks.items()):
            if eta.p50 is None:
                text = "; start unknown (no known end of running work lets it start)"
            else:
                basis = eta.basis[0] if eta.basis else ""
                text = f"; starts about {_minute(eta.p50)} (p50, {basis})"
            if i < EXPLAINED:
                found = explain_ask(partition, key)
                top = found.top() if found is not None else None
                if top:
                    text += f"; {top}"
            notes[key] = text
        changed = {k: v for k, v in notes.items() if self._notes.get(k) != v}
        self._notes = notes
        return changed
