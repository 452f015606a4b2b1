"""Every error quotaplane raises on purpose, in one hierarchy (issue 29).

::

    QuotaplaneError
    ├── InputError (also ValueError) — bad input, refused before anything changed; the message names
    │   │                              what is wrong and where
    │   ├── ConfigError              a configuration (``err.line``, ``err.problems``)
    │   ├── ConflictError            conflicts with what exists (a duplicate id, …)
    │   ├── RejectedError            a submission refused (placement, ACL)
    │   │   └── PlacementError       a placement rule failed
    │   ├── QuotaValidationError     an ElasticQuota rule (``err.quota``, ``err.rule``)
    │   ├── QuotaError               an invalid call to the quota forest engine
    │   ├── ReleaseError             a release that names the wrong queue (rule U16)
    │   └── EventFormatError         a journalled event that cannot be decoded
    ├── NotFoundError (also KeyError) — a named object does not exist
    ├── NotLeaderError                 a write reached an instance without the partition's lease
    ├── JournalReplayError             replay did not reproduce a recorded outcome
    └── JournalError                   the journal store failed or refused
        ├── StoreUnavailableError      memory is ahead of the store and cannot be rebuilt yet
        ├── JournalLockedError         the SQLite file is open for writing elsewhere
        ├── JournalCompactedError      (also LookupError) events asked for were compacted away
        └── CommitFailedError          the group commit that held a change failed

Errors that describe bad input are :class:`InputError`\\ s and so also :class:`ValueError`\\ s: callers
that only know the standard library still catch them. A bare ``ValueError`` from quotaplane marks a
programming error. The engines re-export their own (``quotaplane.elastic.QuotaValidationError``,
``quotaplane.forest.QuotaError``), as do the journal (``quotaplane.journal.JournalError`` …).
"""

from __future__ import annotations

__all__ = [
    "CommitFailedError",
    "CommitOutcomeUnknownError",
    "ConfigError",
    "ConflictError",
    "EventFormatError",
    "InputError",
    "JournalCompactedError",
    "JournalError",
    "JournalLockedError",
    "JournalReplayError",
    "NotFoundError",
    "NotLeaderError",
    "OutcomeUnknownError",
    "PlacementError",
    "QuotaError",
    "QuotaValidationError",
    "QuotaplaneError",
    "RejectedError",
    "ReleaseError",
    "StoreUnavailableError",
]


class QuotaplaneError(Exception):
    """Base class of every error quotaplane raises on purpose."""


class InputError(QuotaplaneError, ValueError):
    """Bad input: an argument, a document or a request quotaplane refuses, naming what is wrong and
    where. Nothing was changed."""


class ConfigError(InputError):
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


class ConflictError(InputError):
    """The call conflicts with existing state (a duplicate id, a queue that is not a leaf …)."""


class RejectedError(InputError):
    """An application or request was rejected (placement found no queue, ACL refused, …)."""


class PlacementError(RejectedError):
    """A rule failed (an invalid queue name, a parent rule that returned a leaf): placement fails."""


class QuotaValidationError(InputError):
    """An ElasticQuota definition, deletion or pod binding breaks a rule of reference §3.

    ``quota`` names the quota, ``rule`` is a stable token of the rule (for example ``min-sum`` or
    ``parent-not-parent``), ``str(err)`` is a sentence stating both. Nothing was changed.
    """

    def __init__(self, quota: str, rule: str, message: str) -> None:
        super().__init__(f"quota {quota!r}: {message} (rule {rule})")
        self.quota = quota
        self.rule = rule
        self.message = message


class QuotaError(InputError):
    """An invalid call to the quota forest engine (unknown name, duplicate, bad JSON …).

    Raised before anything changes: the manager state is exactly what it was (contract "Quota trees
    and forests"). A request the quota cannot take is *not* an error (see
    :class:`~quotaplane.forest.AllocationResponse`).
    """


class ReleaseError(InputError):
    """A release of tracked usage that names a queue the application does not run on (rule U16)."""


class EventFormatError(InputError):
    """A journalled event that cannot be decoded: unknown type, missing field, or a wrong value."""


class NotLeaderError(QuotaplaneError):
    """A write reached an instance that does not hold the partition's lease (PostgreSQL fail-over)."""

    def __init__(self, message: str, leader: str | None = None) -> None:
        super().__init__(message)
        self.leader = leader


class JournalReplayError(QuotaplaneError):
    """Replaying a journalled event did not reproduce its recorded outcome, or the event is malformed."""


class JournalError(QuotaplaneError):
    """The journal store failed or refused an operation (I/O, database, schema version …)."""


class StoreUnavailableError(JournalError):
    """A partition stopped after a journal failure left its memory ahead of the store, and could not
    be rebuilt from the store yet (it is retried on the next call; issue 14 #2)."""


class OutcomeUnknownError(JournalError):
    """An append whose outcome cannot be known: the connection to the store broke after the append
    was sent, so its transaction may have committed or not (issue 32 #3). Never answered "nothing
    was changed": read back where its events would be (the journal makes sure, before its next
    call, that the session which ran the append is gone, so what it reads then is final), or say
    that the outcome is unknown (answered 502)."""


class JournalLockedError(JournalError):
    """The SQLite store is already open for writing by another process (or another journal object).

    SQLite allows one writer process; quotaplane takes an exclusive advisory lock on a side file
    ``<db>.lock`` for the life of the journal, so a second service started on the same file fails at once
    with this error instead of interleaving writes with the first one.
    """


class JournalCompactedError(JournalError, LookupError):
    """``read(stream, after)`` asked for events that were compacted away after a snapshot.

    ``err.compacted_seq`` is the last compacted sequence number: reads must start at or after it,
    normally from the snapshot returned by ``load_snapshot``.
    """

    def __init__(self, message: str, compacted_seq: int) -> None:
        super().__init__(message)
        self.compacted_seq = compacted_seq


class CommitFailedError(JournalError):
    """The group commit that held a change failed: the change was undone (answered 503)."""


class CommitOutcomeUnknownError(OutcomeUnknownError):
    """The group commit that held a change may or may not have been written, and the store could
    not be read to tell (answered 502); the partition is rebuilt from whatever the journal holds."""
