"""A partition's journal read back: replay (a restore, a follower catching up) and the one event applied
by it. The rebuild after a failure left memory ahead of the journal is
:meth:`~quotaplane.partition.txn.Core.recover`; appends and snapshots are the journal stream's
(:class:`~quotaplane.journal.log.PartitionLog`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import quotaplane.events as E
from quotaplane.errors import JournalReplayError, NotFoundError
from quotaplane.partition.txn import Core
from quotaplane.state.handlers import PartitionState

__all__ = ["apply_event", "replay"]


def _replay_problem(exc: Exception) -> str:
    """What is wrong with a journalled event, for the message that names it."""
    if isinstance(exc, KeyError) and not isinstance(exc, NotFoundError):
        return (f"it names {exc.args[0] if exc.args else '?'!r}, which does not exist at that point "
                "(the journal is damaged or was edited)")
    return str(exc) or type(exc).__name__


def apply_event(state: PartitionState, event: Mapping[str, Any], *, account: bool = True) -> None:
    """Apply one journalled event: the recorded outcome, through the live handlers (and the usage
    accounting, issue 33, unless ``account`` is false)."""
    try:
        typed = E.decode(event)
    except E.EventFormatError as exc:
        raise JournalReplayError(str(exc)) from None
    state.apply(typed)
    if account:
        state.history.observe((typed,))


def _restored(state: PartitionState, kind: str, run: list[tuple[int, Mapping[str, Any]]], *, account: bool,
              stream: str) -> None:
    """A run of ``ask_added`` or ``allocated`` events of a snapshot's rebuild, put back in one pass
    (:meth:`PartitionState.asks_restored`, :meth:`PartitionState.allocations_restored`; issue 38)."""
    decode = E.AskAdded.from_json if kind == "ask_added" else E.Allocated.from_json
    typed: list[Any] = []
    for seq, ev in run:
        try:
            typed.append(decode(ev))
        except E.EventFormatError as exc:
            raise JournalReplayError(f"stream {stream!r}, event #{seq}: {exc}") from None
    try:
        if kind == "ask_added":
            state.asks_restored(typed)
        else:
            state.allocations_restored(typed)
    except Exception as exc:   # issue 14 #6: name the events, never a bare KeyError
        raise JournalReplayError(f"stream {stream!r}, events #{run[0][0]}-#{run[-1][0]}: "
                                 f"{_replay_problem(exc)}") from exc
    if account:
        state.history.observe(typed)
    state.notes_recorded(state.take_notes())   # as after each event: the states noted are reported


#: the events a snapshot's rebuild puts back a run at a time (``replay(..., bulk=True)``)
_BULK = frozenset({"ask_added", "allocated"})


def replay(core: Core, events: Iterable[tuple[int, Mapping[str, Any]]], *, account: bool = True,
           bulk: bool = False) -> int:
    """Apply ``(seq, event)`` pairs in order without journalling them; return how many. ``account``
    false leaves the usage accounting out: a snapshot's rebuild whose accounting the snapshot holds
    (it is restored whole afterwards, so observing the rebuild would be thrown away). ``bulk``: a
    snapshot's rebuild, whose runs of waiting asks and of allocations are put back each in one pass
    (the same state as one by one; issue 38)."""
    n = 0
    log = core.log
    with core.lock:
        log.replaying = True
        state = core.state
        run: list[tuple[int, Mapping[str, Any]]] = []
        kind = ""
        try:
            for seq, ev in events:
                if bulk:
                    typ = ev.get("type") if isinstance(ev, dict) else None
                    if run and typ != kind:
                        _restored(state, kind, run, account=account, stream=log.stream)
                        log.last_seq = run[-1][0]
                        n += len(run)
                        run = []
                    if typ in _BULK:
                        kind = typ
                        run.append((seq, ev))
                        continue
                try:
                    apply_event(state, ev, account=account)
                except Exception as exc:   # issue 14 #6: name the event, never a bare KeyError
                    raise JournalReplayError(f"stream {log.stream!r}, event #{seq}: "
                                             f"{_replay_problem(exc)}") from exc
                log.last_seq = seq
                state.notes_recorded(state.take_notes())   # the journal holds them already
                n += 1
            if run:
                _restored(state, kind, run, account=account, stream=log.stream)
                log.last_seq = run[-1][0]
                n += len(run)
        finally:
            log.replaying = False
    return n
