"""A partition's history: the accounting engine wired to the partition's write path.

The partition calls :meth:`PartitionHistory.observe` once per journalled batch (after the journal
took it, with the ``noted`` events of the changes it made) and once per replayed event; nothing
else. Observing never raises into the write path — the events are durable already: a failure is
kept in :attr:`PartitionHistory.error` (the history API reports it) and accounting stops until the
partition is rebuilt from its journal.

**What survives what.** The engine's state is part of every partition snapshot
(:meth:`snapshot`, restored by :meth:`restore`), with the rows of the periods that ended and are not
yet known to be in the store. After a restart (a kill -9 included) the partition is the snapshot plus
the journal's tail, and so is its history: the tail's events close the same periods again and
give the same rows, which the store writes again (rows are keyed by partition, resolution, period
and scope, so writing one twice changes nothing). A compaction removes only events a snapshot
covers, and the snapshot holds everything the history needs from them.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from quotaplane.events import ConfigApplied, Event
from quotaplane.history.calendar import Calendar
from quotaplane.history.engine import Accounting, Row
from quotaplane.history.fairshare import FairRank, standing_of
from quotaplane.history.snapshot import restart_at_now, restore_into, snapshot_of
from quotaplane.history.view import PartitionState, StateView, settings_of

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.policies.protocol import Decision

__all__ = ["PartitionHistory"]

_log = logging.getLogger("quotaplane.history")


class PartitionHistory:
    """The accounting of one partition state (``engine`` None: history is switched off or stopped).

    ``pending``: rows taken from the engine for the store and not yet confirmed written, oldest first.
    """

    __slots__ = ("_batch", "_held", "_lock", "_observed", "_state", "engine", "error", "partition",
                 "pending", "settings")

    def __init__(self, state: PartitionState) -> None:
        self.partition = state.name
        self._state = state
        self.error: BaseException | None = None
        self.settings = settings_of(state.config.extensions)
        self.engine: Accounting | None = self._new_engine() if self.settings.enabled else None
        self.pending: list[Row] = []
        #: on an instance that does not lead the partition: (when, how many rows were pending then)
        self._held: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()
        #: the batch being journalled now (see :meth:`journalling`), and one already accounted for
        self._batch: Sequence[Event] | None = None
        self._observed: Sequence[Event] | None = None

    def _new_engine(self) -> Accounting:
        return Accounting(StateView(self._state), Calendar(self.settings.timezone))

    def observe(self, events: Iterable[Event]) -> None:
        """Account for journalled ``events`` (never raises)."""
        if self._observed is not None and events is self._observed:
            self._observed = None       # a snapshot taken while it was journalled accounted for it
            return
        engine = self.engine
        if engine is not None:
            try:
                engine.observe(events)
            except Exception as exc:
                self._stop(exc)
        if type(events) is list or type(events) is tuple:
            # a plain loop, not any() over a generator: this runs at every commit
            for ev in events:
                if type(ev) is ConfigApplied:
                    self._configured()
                    break

    def _configured(self) -> None:
        """A config took effect: history may have been switched on or off (on: it starts now)."""
        fresh = settings_of(self._state.config.extensions)
        self.settings = fresh
        if fresh.enabled and self.engine is None and self.error is None:
            self.engine = self._new_engine()
            self.engine.observe([ConfigApplied(seq=self._state.config_seq)])
        elif not fresh.enabled and self.engine is not None:
            self.engine = None

    def journalling(self, batch: Sequence[Event]) -> None:
        """The partition journals ``batch`` from now until :meth:`journalled`: it is accounted for when
        the journal took it — or earlier, when a snapshot is taken meanwhile (the snapshot is at the
        batch's end, and so must be the history in it). Two plain calls, not a context manager: every
        commit makes them (benchmarks/calls.py)."""
        self._batch = batch

    def journalled(self, batch: Sequence[Event], *, written: bool, configured: bool = True) -> None:
        """The journal took ``batch`` (``written``) or refused it: a refused batch is not accounted for.
        ``configured=False``: the partition knows ``batch`` holds no configuration marker, so it is
        not looked for (:meth:`observe` written out: every commit with accounting on comes here)."""
        self._batch = None
        if not written:
            return
        if self._observed is not None and batch is self._observed:
            self._observed = None       # a snapshot taken while it was journalled accounted for it
            return
        engine = self.engine
        if engine is not None:
            try:
                engine.observe(batch)
            except Exception as exc:
                self._stop(exc)
        if configured:
            for ev in batch:
                if type(ev) is ConfigApplied:
                    self._configured()
                    break

    def _catch_up(self) -> None:
        """A snapshot is being taken while a batch is journalled: account for it now."""
        batch = self._batch
        if batch is not None:
            self._batch = None
            self._observed = batch
            engine = self.engine
            if engine is not None:
                try:
                    engine.observe(batch)
                except Exception as exc:
                    self._stop(exc)

    def settle(self) -> None:
        """Apply now every change of use deferred so far (a build or a restore just ended): the
        first read or period end after it then pays for what changed since, not for the whole
        build (0.1 s per 20,000 applications touched, issue 39). Call it holding the partition's
        lock."""
        engine = self.engine
        if engine is None:
            return
        try:
            engine.propagate()
        except Exception as exc:
            self._stop(exc)

    def rank(self) -> FairRank | None:
        """The fair-share-with-memory key of this scheduling cycle, or None when it is off."""
        engine = self.engine
        if engine is None or not engine.half_life or not self.settings.fairshare.enabled:
            return None
        return FairRank(engine, dict(self._state.total.items()), self.settings.fairshare.weights)

    def fair_share_of(self, kind: str, name: str) -> dict[str, object] | None:
        """What ``standing`` shows of fair share with memory for queue or user ``name`` (None: off)."""
        rank = self.rank()
        if rank is None or kind not in ("queue", "user"):
            return None
        if kind == "queue":
            q = self._state.queues.queue(name)
            parent = q.parent if q is not None else None
            siblings = [c.path for c in parent.children.values()] if parent is not None else [name]
        else:
            siblings = sorted(n for k, n in rank._engine.scopes if k == "user")
        return standing_of(rank, kind, name, siblings)

    def decided(self, app: str, decision: Decision) -> None:
        """A direct admission was decided: a refusal counts once per reason code in ``app``'s
        scopes (a decision that changes nothing is not journalled: see docs/history.md)."""
        engine = self.engine
        if engine is None or decision.allocated:
            return
        try:
            engine.refused(app, [v.code for v in decision.reasons])
        except Exception as exc:
            self._stop(exc)

    def _stop(self, exc: BaseException) -> None:
        self.error = exc
        self.engine = None
        _log.error("history of partition %r stopped: %r", self.partition, exc, exc_info=True)

    # -- rows for the store --------------------------------------------------------------------------
    def take_rows(self) -> list[Row]:
        """The rows of the periods that ended and are not confirmed written (call under the
        partition's lock); they stay pending until :meth:`written`."""
        engine = self.engine
        with self._lock:
            self._held.clear()        # the leader writes them all: nothing is held by age any more
            if engine is not None and engine.outbox:
                self.pending.extend(engine.take_rows())
            return list(self.pending)

    def hold(self, now: float, keep: float) -> None:
        """On an instance that does not lead the partition (call under the partition's lock): keep
        the rows of the periods that ended, pending, for ``keep`` seconds (``now``: monotonic
        seconds), then forget them. Its leader writes the same rows; if it dies before it has, this
        instance writes them when it takes the partition over, and answers with them meanwhile."""
        engine = self.engine
        with self._lock:
            if engine is not None and engine.outbox:
                self.pending.extend(engine.take_rows())
            held = self._held
            held.append((now, len(self.pending)))
            cut = 0
            while held and held[0][0] <= now - keep:
                cut = held.popleft()[1]
            if cut:
                del self.pending[:cut]
                self._held = deque((t, n - cut) for t, n in held)

    def written(self, rows: Iterable[Row]) -> None:
        """``rows`` are in the store."""
        done = {id(r) for r in rows}
        with self._lock:
            self.pending = [r for r in self.pending if id(r) not in done]

    # -- snapshots -----------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any] | None:
        """The engine's state as plain data for the partition's snapshot (None: no history)."""
        self._catch_up()
        engine = self.engine
        if engine is None:
            return None
        data = snapshot_of(engine)
        with self._lock:
            if self.pending:
                waiting = [[r.resolution, r.t, r.kind, r.name, r.data] for r in self.pending]
                data["outbox"] = waiting + data["outbox"]
        return data

    def restore(self, data: Mapping[str, Any] | None) -> None:
        """Take the history a snapshot held (after the partition was rebuilt from it); a snapshot
        without one (written before history existed) starts history at the snapshot."""
        engine = self.engine
        if engine is None:
            return
        state = self._state
        try:
            if data is None:
                restart_at_now(engine)
                return
            fresh = self._new_engine()
            restore_into(fresh, data,
                         ((k, a.application_id, a.resource) for k, a in state.allocs.items()),
                         ((a.allocation_key, a.application_id, a.resource) for a in state.waiting.asks.all()))
        except Exception as exc:
            self._stop(exc)
            return
        self.engine = fresh
        with self._lock:
            self.pending = []
