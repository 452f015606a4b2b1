"""The small exception hierarchy of quotaplane.

Every error raised on purpose by quotaplane derives from :class:`QuotaplaneError`. Errors that
describe bad input also derive from :class:`ValueError`, so callers that only know the standard
library can still catch them.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ConflictError",
    "JournalReplayError",
    "NotFoundError",
    "NotLeaderError",
    "QuotaplaneError",
    "RejectedError",
]


class QuotaplaneError(Exception):
    """Base class of every error quotaplane raises on purpose."""


class ConfigError(QuotaplaneError, ValueError):
    """A configuration (YAML text or a model built from it) is invalid.

    ``str(err)`` states the first reason; ``err.line`` is the 1-based line of that reason when
    known; ``err.problems`` lists every ``(line, reason)`` found, first one first.
    """

    def __init__(self, message: str, line: int | None = None,
                 problems: list[tuple[int | None, str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.problems: list[tuple[int | None, str]] = problems if problems else [(line, message)]

    def __str__(self) -> str:
        return self.message


class NotFoundError(QuotaplaneError, KeyError):
    """An object named in a call (partition, queue, application, allocation, node …) does not exist."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want the plain sentence
        return str(self.args[0]) if self.args else "not found"


class ConflictError(QuotaplaneError, ValueError):
    """The call conflicts with existing state (a duplicate id, a queue that is not a leaf …)."""


class RejectedError(QuotaplaneError, ValueError):
    """An application or request was rejected (placement found no queue, ACL refused, …)."""


class NotLeaderError(QuotaplaneError):
    """A write reached an instance that does not hold the partition's lease (PostgreSQL fail-over)."""

    def __init__(self, message: str, leader: str | None = None) -> None:
        super().__init__(message)
        self.leader = leader


class JournalReplayError(QuotaplaneError):
    """Replaying a journalled event did not reproduce its recorded outcome, or the event is malformed."""
