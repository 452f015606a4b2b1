"""A partition's subscriptions (:mod:`quotaplane.notices`): subscribers told of every change once it is
journalled, typed-event listeners, and the notices after a sequence number read back from the journal
(resuming a stream, also after a restart)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quotaplane.errors import InputError
from quotaplane.journal.base import JournalCompactedError
from quotaplane.notices import EventListener, Subscriber, notices_after
from quotaplane.partition.txn import Core

__all__ = ["listen", "queue_of", "resume_after", "subscribe"]


def queue_of(core: Core, application_id: str) -> str:
    """The queue of an application (``""`` when it is not known)."""
    app = core.state.apps.get(application_id)
    return app.queue_path if app is not None else ""


def subscribe(core: Core, callback: Subscriber) -> Callable[[], None]:
    """Add a subscriber; return the function that removes it."""
    with core.lock:
        core.notifier.subscribe(callback)

    def unsubscribe() -> None:
        with core.lock:
            core.notifier.unsubscribe(callback)
    return unsubscribe


def listen(core: Core, listener: EventListener) -> Callable[[], None]:
    """Add a listener to the journalled events; return the function that removes it."""
    with core.lock:
        core.notifier.listeners.append(listener)

    def stop() -> None:
        with core.lock:
            if listener in core.notifier.listeners:
                core.notifier.listeners.remove(listener)
    return stop


def resume_after(core: Core, after: int) -> list[dict[str, Any]]:
    """The notices of the changes journalled after sequence number ``after``, read back from the
    journal. ``ValueError`` when the journal no longer holds events from ``after`` on (compacted) or
    when the partition has no journal."""
    with core.lock:
        journal = core.log.journal
        if journal is None:
            raise InputError(f"partition {core.name!r} keeps no journal: there is nothing to resume from")
        try:
            return list(notices_after(journal.read(core.log.stream, after=after), core.name,
                                      lambda app: queue_of(core, app)))
        except JournalCompactedError as exc:
            raise InputError(f"the journal of partition {core.name!r} holds events only after "
                             f"seq {exc.compacted_seq}; cannot resume after {after}") from None
