"""The cluster: its :class:`Scheduler`, one per process, owns the partitions, the configuration and
the journal (YuniKorn's cluster context). The waiting asks' scheduling is :mod:`quotaplane.scheduling`.

``Scheduler.from_yaml(text, store=url)`` builds the partitions from a YuniKorn queue configuration.
On a store that already holds events it first restores the journalled state (each partition from
its snapshot plus the tail of its stream, or from the whole stream). After the first start the store
is the source of truth (issue 14 #5): ``text`` is applied, as a normal config update, only when it
changed since the last time a text was given at a start — so an unchanged ``--config`` keeps every
change made over the API since (elastic quotas, quota trees, configs PUT over REST), and a changed one
replaces them, with a warning in the log that says so.

Journal layout (:mod:`quotaplane.journal`): the stream ``"scheduler"`` holds one event per accepted
configuration, ``{"type": "config", "text": …}``, with ``"start": <sha256 of the text>`` when the text
was given at a start rather than over the API; each partition has its own stream (its name) whose
events are applied by :meth:`Partition.apply_event`. A partition stream records *when* a config took
effect with ``{"type": "config", "seq": <scheduler seq>}``, so a replay applies every config at the
exact point between allocations where it was applied live.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
import time as _time
from collections.abc import Callable, Collection, Iterator
from contextlib import ExitStack
from typing import Any

from quotaplane.config.model import PartitionConfig, SchedulerConfig
from quotaplane.errors import ConfigError, JournalReplayError, NotFoundError
from quotaplane.journal.base import Journal, JournalError, StoreUnavailableError
from quotaplane.journal.group_commit import Background, Offload
from quotaplane.partition import Partition, PartitionOptions, gcfreeze

DEFAULT_SNAPSHOT_EVERY = PartitionOptions().snapshot_every

__all__ = ["SCHEDULER_STREAM", "Scheduler"]

#: The journal stream of configuration events.
SCHEDULER_STREAM = "scheduler"

_log = logging.getLogger(__name__)


def _configs_of(journal: Journal) -> tuple[dict[int, str], str | None]:
    """The configurations of the scheduler stream by sequence number, and the digest of the one the
    service last started with (None when it never started with one)."""
    texts: dict[int, str] = {}
    started_with: str | None = None
    for seq, ev in journal.read(SCHEDULER_STREAM):
        if ev.get("type") == "config":
            texts[seq] = ev["text"]
            if isinstance(ev.get("start"), str):
                started_with = ev["start"]
    if not texts:
        raise JournalReplayError("the journal holds no configuration")
    return texts, started_with


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stream_of(partition: str) -> str:
    return "partition:scheduler" if partition == SCHEDULER_STREAM else partition


def _partition_of(stream: str) -> str:
    return SCHEDULER_STREAM if stream == "partition:scheduler" else stream


@functools.lru_cache(maxsize=16)
def _load(text: str) -> SchedulerConfig:
    # The parsed config is immutable, so the same text can share one parse (restores parse every
    # journalled config text; YAML parsing costs tens of milliseconds).
    from quotaplane.config import load_config

    return load_config(text)


def _open(store: str | Journal | None) -> Journal:
    if store is None or isinstance(store, str):
        from quotaplane.journal import open_journal

        opened: Journal = open_journal(store)
        return opened
    return store          # an already open Journal object (tests, embedding)


class Scheduler:
    """The partitions of one configuration, with a journal (contract "Scheduler and partitions").

    ``clock`` (seconds, float) is handed to every partition (placeholder and state timeouts).
    ``partition_options`` are extra keyword arguments for every :class:`Partition` (timeouts).
    """

    def __init__(self, config: SchedulerConfig, *, text: str | None = None, journal: Journal | None = None,
                 clock: Callable[[], float] | None = None, snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
                 partition_options: dict[str, Any] | None = None, holder: str | None = None,
                 leads: Callable[[str], bool] | None = None) -> None:
        self.config: SchedulerConfig = config
        self.config_text: str = text if text is not None else config.source
        self.journal: Journal = journal if journal is not None else _open(None)
        self.clock: Callable[[], float] = clock if clock is not None else _time.time
        self.snapshot_every = snapshot_every
        self.holder = holder
        #: the partitions this instance writes (issue 18: partitions led by several instances); the
        #: others are brought up to date when read or taken over (:meth:`refresh`, :meth:`adopt`).
        #: Default: every one.
        self.leads: Callable[[str], bool] = leads if leads is not None else _every
        self._options = dict(partition_options or {})
        self._lock = threading.RLock()
        self._partitions: dict[str, Partition] = {}
        #: one catch-up at a time per partition (:meth:`_bring_up_to_date`)
        self._gates: dict[str, threading.Lock] = {}
        self._configs: dict[int, SchedulerConfig] = {}
        self._texts: dict[int, str] = {}
        self.config_seq = 0
        #: How each partition was restored at start: "snapshot" (snapshot + tail) or "replay" (full).
        self.restored_from: dict[str, str] = {}
        #: the sha256 of the last configuration text given at a start (None: none journalled)
        self._started_with: str | None = None
        #: how a partition led here starts its group commit (issue 18; None: group commit is off)
        self._group_commit: Callable[[Partition], object] | None = None

    # ------------------------------------------------------------------------------------------------
    # construction

    @classmethod
    def from_yaml(cls, text: str, *, store: str | Journal | None = None,
                  clock: Callable[[], float] | None = None, snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
                  partition_options: dict[str, Any] | None = None, holder: str | None = None,
                  leads: Callable[[str], bool] | None = None) -> Scheduler:
        """Build a scheduler from YuniKorn queue YAML; restore the journalled state of ``store`` first.

        ``store``: ``None`` (memory), ``"sqlite:///path"``, ``"postgresql://…"`` or an open journal.
        ``leads``: the partitions this instance writes (default every one; see :meth:`follow`).
        Raises :class:`~quotaplane.errors.ConfigError` when ``text`` is invalid (nothing is written).
        """
        # what a start builds (the configuration, a restored state) survives: no collection walks it
        # meanwhile — at 100,000 waiting asks, collections were half of a restore's CPU (issue 38)
        with gcfreeze.paused(long_lived=True):
            sched = cls._start(text, store=store, clock=clock, snapshot_every=snapshot_every,
                               partition_options=partition_options, holder=holder, leads=leads)
        sched.settle()
        return sched

    def settle(self) -> None:
        """The state held now is long-lived (a restore or a bulk build just ended): apply every
        partition's deferred usage accounting, and in a serving process (:func:`gcfreeze.enable`)
        collect once and freeze the survivors, so that no later request pays a catch-up or a full
        garbage collection of the whole state (issue 39). A library embedding quotaplane keeps its
        collector as it was: only the accounting is settled then."""
        for p in self.partitions():
            with p.lock:
                p.history.settle()
        gcfreeze.settle()

    @classmethod
    def _start(cls, text: str, *, store: str | Journal | None, clock: Callable[[], float] | None,
               snapshot_every: int, partition_options: dict[str, Any] | None, holder: str | None,
               leads: Callable[[str], bool] | None) -> Scheduler:
        """:meth:`from_yaml`'s work."""
        config = _load(text)
        journal = _open(store)
        try:
            if journal.last_seq(SCHEDULER_STREAM) > 0:
                sched = cls._restore(journal, clock=clock, snapshot_every=snapshot_every,
                                     partition_options=partition_options, holder=holder, leads=leads)
                if text != sched.config_text and sched._started_with != _digest(text):
                    if sched._started_with is not None:
                        _log.warning("the configuration given at start changed since the last start: it "
                                     "replaces the journalled configuration (config #%d), including every "
                                     "change made over the API since then", sched.config_seq)
                    sched._apply(config, text, start=True)
                elif text != sched.config_text:
                    _log.info("the configuration given at start is unchanged since the last start: the "
                              "journalled configuration (config #%d, changed over the API since) stays "
                              "in force", sched.config_seq)
                return sched
            sched = cls(config, text=text, journal=journal, clock=clock, snapshot_every=snapshot_every,
                        partition_options=partition_options, holder=holder, leads=leads)
            sched._apply(config, text, start=True)
            return sched
        except BaseException:
            if journal is not store:
                journal.close()
            raise

    def _new_partition(self, pc: PartitionConfig, seq: int) -> Partition:
        name = pc.name

        def _source(s: int) -> PartitionConfig:
            return self._config_at(s).partition(name)

        options = PartitionOptions(snapshot_every=self.snapshot_every, **self._options)
        p = Partition(pc, journal=self.journal, stream=_stream_of(name), clock=self.clock,
                      config_seq=seq, config_source=_source, options=options, holder=self.holder)
        p.restorer = lambda: self._rebuilt(name)
        return p

    def _rebuilt(self, name: str) -> Partition | None:
        """A new partition ``name`` rebuilt from the journal alone, on the config in force (a
        partition's recovery after a store failure, issue 14 #2); changes nothing of this scheduler
        but its records of how partitions were restored."""
        fresh = self._restore_partition(_stream_of(name))
        pc = next((c for c in self.config.partitions if c.name == name), None)
        if fresh is None:
            if pc is None:
                return None
            # a partition whose first config marker could not be journalled: it starts now
            fresh = self._new_partition(pc, self.config_seq)
            fresh.record_config(self.config_seq, follower_ok=True)
            return fresh
        if pc is not None and fresh.config_seq != self.config_seq:
            # the scheduler's config event was journalled, the partition's marker was not
            fresh.apply_config(pc, self.config_seq)
            fresh.record_config(self.config_seq, follower_ok=True)
        return fresh

    def _config_at(self, seq: int) -> SchedulerConfig:
        cfg = self._configs.get(seq)
        if cfg is None:
            text = self._texts.get(seq)
            if text is None:
                raise JournalReplayError(f"config #{seq} is not in the journal")
            cfg = _load(text)
            self._configs[seq] = cfg
        return cfg

    @classmethod
    def _restore(cls, journal: Journal, *, clock: Callable[[], float] | None, snapshot_every: int,
                 partition_options: dict[str, Any] | None, holder: str | None,
                 leads: Callable[[str], bool] | None = None) -> Scheduler:
        texts, started_with = _configs_of(journal)
        last = max(texts)
        config = _load(texts[last])
        sched = cls(config, text=texts[last], journal=journal, clock=clock, snapshot_every=snapshot_every,
                    partition_options=partition_options, holder=holder, leads=leads)
        sched._texts = texts
        sched._started_with = started_with
        sched._configs[last] = config
        sched.config_seq = last
        for stream in journal.streams():
            if stream == SCHEDULER_STREAM:
                continue
            p = sched._restore_partition(stream)
            if p is not None:
                sched._partitions[p.name] = p
        # A crash between the scheduler's config event and a partition's marker: catch up now.
        for pc in config.partitions:
            if sched.leads(pc.name):      # else its leader does (this instance replays what it writes)
                sched._catch_up_config(pc, last)
        return sched

    def _catch_up_config(self, pc: PartitionConfig, last: int) -> None:
        """Partition ``pc.name`` at config ``last`` after a restore: created when the journal has no
        stream for it yet, the config applied when its stream stops before the config's marker."""
        p = self._partitions.get(pc.name)
        if p is None:
            p = self._new_partition(pc, last)
            self._partitions[pc.name] = p
            p.record_config(last, follower_ok=True)
        elif p.config_seq != last:
            p.apply_config(pc, last)
            p.record_config(last, follower_ok=True)

    def _restore_partition(self, stream: str) -> Partition | None:
        name = _partition_of(stream)
        snap = self.journal.load_snapshot(stream)
        if snap is not None:
            seq, state = snap
            p = self._rebuild(name, state)
            if p is not None:
                p.restored_at(seq)
                p.replay(self.journal.read(stream, after=seq))
                self.restored_from[name] = "snapshot"
                return p
        events = self.journal.read(stream)
        first = next(events, None)
        if first is None:
            return None
        seq0, pc = self._first_config(stream, name, first)
        p = self._new_partition(pc, seq0)
        p.replay(_chain(first, events))
        p.mark_snapshot(snap[0] if snap is not None else 0)
        self.restored_from[name] = "replay"
        return p

    def _first_config(self, stream: str, name: str, first: tuple[int, Any]) -> tuple[int, PartitionConfig]:
        """The config event a partition's stream starts with: its seq and the partition's config then
        (:class:`JournalReplayError` naming the stream and event when it is missing or damaged)."""
        seq1, ev0 = first
        if not isinstance(ev0, dict) or ev0.get("type") != "config":
            raise JournalReplayError(f"stream {stream!r}, event #{seq1}: the stream does not start with a "
                                     "config event")
        try:
            seq0 = ev0["seq"]
            if isinstance(seq0, bool) or not isinstance(seq0, int):
                raise TypeError(f"seq {seq0!r} is not an integer")
            return seq0, self._config_at(seq0).partition(name)
        except (KeyError, TypeError, ValueError, JournalReplayError) as exc:
            raise JournalReplayError(f"stream {stream!r}, event #{seq1}: its config event is damaged "
                                     f"({str(exc) or type(exc).__name__})") from exc

    def _rebuild(self, name: str, state: dict[str, Any]) -> Partition | None:
        """Rebuild a partition from a snapshot's event list; None if it does not match the snapshot."""
        events = state.get("rebuild") or []
        if not events or events[0].get("type") != "config":
            return None
        try:
            seq0 = int(events[0]["seq"])
            p = self._new_partition(self._config_at(seq0).partition(name), seq0)
            # a snapshot with the usage accounting's state: it is restored whole below, so the rebuild
            # skips observing (a fifth of the rebuild's CPU at 500,000 asks, issue 38)
            # its waiting asks and its allocations are put back in bulk, not one by one through the
            # live handlers (the same state, pinned by tests/partition/test_restore_bulk.py; issue 38)
            p.replay(((0, ev) for ev in events), account=state.get("history") is None, bulk=True)
        except Exception:        # an optimisation only: any failure means "replay the stream instead"
            return None
        if not p.matches_snapshot(state):
            return None
        p.history.restore(state.get("history"))      # the usage accounting as it was (issue 33)
        return p

    # ------------------------------------------------------------------------------------------------
    # configuration

    def update_config(self, text: str) -> None:
        """Validate ``text`` fully, then apply it in one step to every partition, journalled.

        Raises :class:`~quotaplane.errors.ConfigError` and changes nothing when the text is invalid.
        Partition objects obtained earlier follow the new config; new partitions are created; a
        partition missing from the new config keeps its last config and its state.
        """
        config = _load(text)
        self._apply(config, text, validate=True)
        gcfreeze.settle()       # a serving process: what waits now is long-lived (issue 39)

    def _apply(self, config: SchedulerConfig, text: str, *, validate: bool = False,
               start: bool = False) -> None:
        with self._lock, ExitStack() as stack:
            existing = [self._partitions[n] for n in sorted(self._partitions)]
            for p in existing:        # one step: no request sees half of the new config
                stack.enter_context(p.lock)
            if validate:
                self._validate_update(config)
            seq = self._journal_config(config, text, start=start)
            for pc in config.partitions:
                # a partition led by another instance: that one applies the config, this one replays it
                if self.leads(pc.name):
                    self._apply_to_partition(pc, seq)

    def _validate_update(self, config: SchedulerConfig) -> None:
        """Before journalling: a policy may refuse a reload its live state cannot take (e.g. the forest
        policy: a quota tree still in use dropped), changing nothing."""
        for pc in config.partitions:
            found = self._partitions.get(pc.name)
            if found is None:
                continue
            try:
                found.validate_update(pc)
            except ConfigError:
                raise
            except ValueError as exc:
                # contract: update_config raises qp.ConfigError (and changes nothing)
                raise ConfigError(f"partition {pc.name!r}: {exc}") from exc

    def _journal_config(self, config: SchedulerConfig, text: str, *, start: bool) -> int:
        """Journal the config event — the commit point: a restart applies it, so it is in force from
        now — and take it as the config in force; its sequence number."""
        event: list[dict[str, Any]] = [{"type": "config", "text": text}]
        if start:
            event[0]["start"] = _digest(text)
        # fenced like every partition write: a leader that lost its lease must not change config
        seq = (self.journal.append(SCHEDULER_STREAM, event, holder=self.holder) if self.holder is not None
               else self.journal.append(SCHEDULER_STREAM, event))
        self._texts[seq] = text
        self._configs[seq] = config
        self.config = config
        self.config_text = text
        self.config_seq = seq
        if start:
            self._started_with = event[0]["start"]
        return seq

    def _apply_to_partition(self, pc: PartitionConfig, seq: int) -> None:
        """Config ``seq`` in partition ``pc.name``, led here: a new partition, or the new config applied
        and recorded in the partition's stream."""
        found = self._partitions.get(pc.name)
        if found is None:
            found = self._new_partition(pc, seq)
            self._partitions[pc.name] = found
            if self._group_commit is not None:
                self._group_commit(found)
        else:
            found.apply_config(pc, seq)
        try:
            found.record_config(seq)
        except JournalError as exc:
            # issue 14 #2: the partition is rebuilt from its journal once the store can be
            # read, and then applies this config (Scheduler._rebuilt)
            _log.warning("partition %s could not journal config #%d (%s); it applies it when "
                         "it recovers from the store failure", pc.name, seq, exc)

    def catch_up(self, *, skip: Collection[str] = ()) -> int:
        """Apply what other instances appended to the journal since this one last read (a follower;
        ``skip``: partitions this instance leads, whose streams only it writes).

        New configurations are read first, then every partition stream is replayed from the
        partition's last sequence number through the same code as a restore; a partition that
        appeared is restored. Returns how many partition events were applied. A follower that fell
        behind a compaction, or further behind than a snapshot interval, restores that partition from
        its snapshot (a new Partition object).
        """
        with self._lock:
            self._read_configs()
            names = [_partition_of(s) for s in self.journal.streams() if s != SCHEDULER_STREAM]
        return sum(self._bring_up_to_date(name) for name in names if name not in skip)

    def refresh(self, name: str) -> int:
        """Bring partition ``name``, led by another instance, up to what its stream holds now (its
        new configurations included); restore it if this instance never loaded it. Returns how many
        events were applied. A read served here after this sees every change acknowledged before it
        anywhere (issue 18: reads of a partition led elsewhere catch up first)."""
        with self._lock:
            self._read_configs()
        return self._bring_up_to_date(name.lower())

    def _read_configs(self) -> None:
        """Read configurations written since the last read; the newest is the one in force. Call under
        the lock."""
        for seq, ev in self.journal.read(SCHEDULER_STREAM, after=max(self._texts, default=0)):
            if ev.get("type") == "config":
                self._texts[seq] = ev["text"]
        if self._texts and max(self._texts) != self.config_seq:
            last = max(self._texts)
            self.config = self._config_at(last)
            self.config_text = self._texts[last]
            self.config_seq = last

    def _bring_up_to_date(self, name: str) -> int:
        """Replay partition ``name``'s stream from its last seq, or restore it from its snapshot when it
        is unknown here, behind a compaction, or more than a snapshot interval behind (the snapshot is
        then newer than what this copy holds, and replaying from it is shorter).

        One catch-up per partition at a time (its gate), and not under the scheduler lock, which is
        taken only to put a restored copy in place: a long replay on a worker thread must not hold up
        the event loop's calls that list the partitions."""
        from quotaplane.journal import JournalCompactedError

        with self._lock:
            gate = self._gates.setdefault(name, threading.Lock())
        with gate:
            stream = _stream_of(name)
            p = self._partitions.get(name)
            if p is not None and p.recovering:
                # memory may hold changes the journal refused (a failed commit): rebuild it from
                # the journal, never replay onto it (issue 32 #2); not readable yet: unavailable
                before = p.last_seq
                if not p.recover():
                    raise StoreUnavailableError(f"partition {name!r} is recovering from a store failure "
                                                "and its journal cannot be read yet")
                return max(0, p.last_seq - before)
            if p is not None:
                head = self.journal.last_seq(stream)
                if head <= p.last_seq:
                    return 0
                if head - p.last_seq <= self.snapshot_every:
                    try:
                        return p.replay(self.journal.read(stream, after=p.last_seq))
                    except JournalCompactedError:
                        pass
            restored = self._restore_partition(stream)
            if restored is None:
                return 0
            with self._lock:
                self._partitions[name] = restored
            return max(0, restored.last_seq - (p.last_seq if p is not None else 0))

    def follow(self, led: Collection[str]) -> None:
        """One round of an instance that leads only the partitions ``led`` (issue 18): read new
        configurations, then bring every led partition to the configuration in force — create it if
        its stream is new, apply a newer config and journal its marker — which is how a config change
        made on another instance reaches the partitions led here.

        The partitions led elsewhere are not replayed here: each instance would otherwise redo every
        other instance's work, and N instances would cost N² (a read of such a partition catches it
        up first, :meth:`refresh`; taking it over catches it up, :meth:`adopt`)."""
        with self._lock:
            self._read_configs()
            for pc in self.config.partitions:
                if pc.name not in led:
                    continue
                p = self._partitions.get(pc.name)
                if p is None:
                    p = self._new_partition(pc, self.config_seq)
                    self._partitions[pc.name] = p
                    if self._group_commit is not None:
                        self._group_commit(p)
                    p.record_config(self.config_seq)
                elif p.config_seq != self.config_seq:
                    p.apply_config(pc, self.config_seq)
                    p.record_config(self.config_seq)

    def adopt(self, name: str) -> None:
        """This instance now leads partition ``name`` (it holds its lease): bring it to the end of its
        stream first, so the first change decided here follows the last one its previous leader made."""
        self._bring_up_to_date(name)

    # ------------------------------------------------------------------------------------------------
    # access

    def partition(self, name: str) -> Partition:
        """The partition called ``name`` (case-insensitive); NotFoundError if unknown."""
        p = self._partitions.get(name.lower() if isinstance(name, str) else name)
        if p is None:
            raise NotFoundError(f"partition {name!r} not found")
        return p

    def partitions(self) -> list[Partition]:
        """Every partition, in name order."""
        with self._lock:
            return [self._partitions[n] for n in sorted(self._partitions)]

    def dump_state(self) -> dict[str, Any]:
        """Every partition's :meth:`Partition.dump_state` plus the config sequence number."""
        with self._lock:
            return {"config_seq": self.config_seq,
                    "partitions": {n: self._partitions[n].dump_state() for n in sorted(self._partitions)}}

    def snapshot(self) -> None:
        """Save a snapshot of every partition now (also done automatically every N events)."""
        for p in self.partitions():
            p.take_snapshot()

    def start_group_commit(self, *, schedule: Callable[[Callable[[], None]], object] | None = None,
                           owner: int | None = None, offload: Offload | None = None,
                           background: Background | None = None) -> None:
        """Journal every partition this instance leads (:attr:`leads`) by group commit
        (:mod:`quotaplane.journal.group_commit`), also those a later config adds: see
        :meth:`Partition.start_group_commit`."""
        self._group_commit = functools.partial(_start_group_commit, schedule=schedule, owner=owner,
                                               offload=offload, background=background)
        for p in self.partitions():
            if self.leads(p.name):
                self._group_commit(p)

    def stop_group_commit(self) -> None:
        """Commit what is queued; every change is journalled before its call returns again."""
        self._group_commit = None
        for p in self.partitions():
            p.stop_group_commit()

    def close(self, *, snapshot: bool = True) -> None:
        """Commit what group commit holds, snapshot every partition that journalled events since its
        last snapshot (so the next start reads no tail; a follower, which only replays, writes
        nothing), then close the journal. The scheduler must not be used afterwards."""
        self.stop_group_commit()
        if snapshot:
            for p in self.partitions():
                if p.needs_snapshot:
                    try:
                        p.take_snapshot()
                    except Exception as exc:      # optional: the events are durable anyway
                        p.snapshot_error = exc
        self.journal.close()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _every(_name: str) -> bool:
    return True


def _chain(first: tuple[int, dict[str, Any]], rest: Iterator[tuple[int, dict[str, Any]]]
           ) -> Iterator[tuple[int, dict[str, Any]]]:
    yield first
    yield from rest


def _start_group_commit(p: Partition, *, schedule: Callable[[Callable[[], None]], object] | None,
                        owner: int | None, offload: Offload | None, background: Background | None) -> None:
    p.start_group_commit(schedule=schedule, owner=owner, offload=offload, background=background)
