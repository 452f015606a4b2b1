"""What a change that may be taken back overwrites, read before the change (:mod:`quotaplane.state.undo`):
an application's lifecycle, and what reverses an admitted allocation."""

from __future__ import annotations

from typing import NamedTuple

from quotaplane.application import Application, LogMark
from quotaplane.policies.protocol import AdmissionRequest
from quotaplane.scheduling.asks import Ask

__all__ = ["AllocationUndo", "AppMark"]


class AppMark(NamedTuple):
    """An application's lifecycle before a change that may be taken back."""

    state: str
    state_since: float
    counted: bool
    anchor_seq: int
    placeholder_since: float | None
    log: LogMark
    max_used: dict[str, int]

    @classmethod
    def of(cls, app: Application) -> AppMark:
        """The lifecycle of ``app`` now."""
        return cls(app.state, app.state_since, app.counted, app.anchor_seq, app.placeholder_since,
                   app.log_mark(), app.max_used)

    def restore(self, app: Application) -> None:
        """Put ``app``'s lifecycle back as it was when this mark was taken."""
        app.state, app.state_since, app.counted = self.state, self.state_since, self.counted
        app.anchor_seq, app.placeholder_since = self.anchor_seq, self.placeholder_since
        app.log_undo(self.log)
        app.max_used = self.max_used


class AllocationUndo(NamedTuple):
    """What reverses an admitted allocation: its request, its application's lifecycle before, and the
    pending ask it was made for (which waits again)."""

    request: AdmissionRequest
    app: AppMark
    ask: Ask | None = None
