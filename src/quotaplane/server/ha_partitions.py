"""Partitions led by several instances on one PostgreSQL store (issue 18 #2).

Partitions are independent by design (seed 001: one user group manager per partition), so one
deployment can spread them over several processes or machines: each partition is led — written — by
exactly one instance, the holder of its stream's journal lease. Reads are served everywhere: a read
of a partition led elsewhere first replays what its stream gained since this instance last read it
(:meth:`quotaplane.server.app.Service.refresh_for_read`), so it sees every change acknowledged before
it. Nothing replays the others' partitions in the background: with N instances that would cost each
one the work of all the others (N² in total), and throughput would stop growing with instances.
Writes for a partition led elsewhere are relayed to its leader, and wait for the new one while a
partition changes hands (:mod:`quotaplane.server.write_routing`); when no leader can be reached in
time they are answered 503 with ``leader``, its URL (:class:`quotaplane.client.Client` follows it).

Which instance leads what (``serve --partitions a,b`` / ``QUOTAPLANE_PARTITIONS``):

* an instance leads the partitions it is given, and keeps a *claim* on them (a lease on the stream
  ``want:<partition>``) while it lives, from its first round on — once it serves: a claim makes the
  leader hand the partition back;
* a partition without a live leader and without a live claim — not given to anyone, or its instance
  died — is taken by any instance at its next round (every ``interval`` seconds, after the dead
  leader's lease expired: ``ttl``); an instance given no partitions takes every free one;
* an instance leading a partition another live instance claims hands it back: it sends new writes
  to the claimant, lets the writes it admitted finish, commits what it queued and releases the
  lease; the claimant takes it at its next round (its rounds come faster while it waits).

Taking a partition over replays its stream to the end before the first write (every acknowledged
change is there, decision S1), exactly as a whole-instance take-over rebuilds from the store; appends
stay fenced by the partition's lease, so a paused ex-leader can never fork a stream.

A leader stops serving a partition — writes, what-ifs and reads — as soon as its lease *may* have
expired by its own clock, with a margin: a lease renewed by a call that started at ``t`` is trusted
until ``t + ttl - margin`` (monotonic clock). The database times the lease from when the call ran
there, later than ``t``, and another instance takes it only once it expired there; so the two never
serve the partition at once, and a leader paused or cut off from the store (a frozen connection
that hangs its renewals) stops serving without waiting to learn that it lost the lease (issue 32
#4). A read of such a partition is answered 503 (nothing was changed) until a round settles it: its
lease renewed — the partition is then caught up on its stream first, as after any take-over, since
another instance may have led it meanwhile — or lost, and it is followed. Appends carry the sequence
number their change was decided on, so a late append of a deposed leader is refused by the store
(:meth:`quotaplane.journal.base.Journal.append`).

``QUOTAPLANE_LEADERSHIP_LOG=path``: every change of what this instance serves is appended there as a
JSON line — ``{"instance", "partition", "serve"|"stop": t, "until": t}``, times on the machine's
monotonic clock, ``until`` the end of the lease as trusted at that moment (each renewal adds a line)
— so an audit (the fault suite's checker) can prove that no two instances served a partition at once.

Configuration changes are written by the instance holding the ``scheduler`` lease (any instance may
take it; ``PUT /ws/v1/config`` sent elsewhere is relayed to it). Each instance applies a new
configuration to the partitions it leads at its next round and journals their markers
(:meth:`quotaplane.cluster.Scheduler.follow`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from quotaplane.errors import ConfigError, NotLeaderError
from quotaplane.journal.base import Journal
from quotaplane.server.ha import LEASE_STREAM, LeaseRounds, Service, default_margin

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.cluster import Scheduler

__all__ = ["CLAIM_PREFIX", "PartitionLeadership"]

_log = logging.getLogger("quotaplane.server.ha")

#: the lease stream ``want:<partition stream>`` an instance holds for each partition it is given
CLAIM_PREFIX = "want:"


def _stream(name: str) -> str:
    return "partition:scheduler" if name == "scheduler" else name



def _leaders_text(others: list[tuple[str, str | None]]) -> str:
    """``partition: URL`` of each partition another instance leads (or ``no leader``)."""
    return "; ".join(f"{name}: {url or 'no leader'}" for name, url in others)

class PartitionLeadership(LeaseRounds):
    """Per-partition leadership of one instance (see the module docstring).

    ``partitions``: the partitions this instance is given (empty: it takes every free one).
    ``build(holder, leads, config_leader)`` opens the scheduler on the store; the scheduler writes
    only the partitions ``leads`` names, with appends fenced by ``holder``. ``margin``: seconds
    before a lease's ttl runs out (by ``clock``, monotonic) at which this instance stops trusting it
    (default :func:`~quotaplane.server.ha.default_margin`).
    """

    def __init__(self, lease_journal: Journal, *, advertise: str, partitions: Collection[str],
                 build: Callable[[str, Callable[[str], bool], bool], Scheduler],
                 ttl: float = 5.0, interval: float = 1.0, hold: float | None = None,
                 margin: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if ttl <= interval:
            raise ConfigError("the lease ttl must be longer than the renewal interval")
        self.margin = default_margin(ttl, interval) if margin is None else margin
        if not 0 <= self.margin < ttl - interval:
            raise ConfigError("the lease margin must be at least 0 and leave more than one renewal "
                             "interval of the ttl")
        self.clock = clock
        #: until when (by :attr:`clock`) each led partition's lease is trusted, and the configuration's
        self._valid_until: dict[str, float] = {}
        self._config_valid_until = 0.0
        self.journal = lease_journal
        self.advertise = advertise
        self.holder = f"{advertise}#{uuid.uuid4().hex[:12]}"
        self.ttl = ttl
        self.interval = interval
        self.preferred = frozenset(p.lower() for p in partitions)
        #: how long a write waits for its partition to have a leader (a hand-over under way)
        self.hold = 2 * interval if hold is None else hold
        #: the partitions whose claim this instance holds but which another instance still leads:
        #: handed back at that one's next round, so the rounds here come faster until they are taken
        self._pending: frozenset[str] = frozenset()
        #: partitions being handed back: still led (the writes already admitted finish here), but
        #: new writes go to the claimant
        self._draining: frozenset[str] = frozenset()
        #: writes admitted here and not answered yet, per partition (counted on the loop); the lock
        #: makes an admission and the start of a hand-back exclude each other
        self._inflight: dict[str, int] = {}
        self._admission = threading.Lock()
        self._build = build
        #: one round at a time, and none once released (see :meth:`step`)
        self._stepping = threading.Lock()
        self._released = False
        self._serving: frozenset[str] = frozenset()
        trace = os.environ.get("QUOTAPLANE_LEADERSHIP_LOG")
        #: the leadership log (see the module docstring), or None
        self._trace = open(trace, "a", buffering=1, encoding="utf-8") if trace else None  # noqa: SIM115
        self._config_leader = False
        #: the leaders of the partitions led elsewhere (and of the configuration: None), per round
        self._leaders: dict[str | None, str | None] = {}
        self._task: asyncio.Task[None] | None = None
        self._service: Service | None = None
        self.took_over_at: float | None = None

    # -- state ------------------------------------------------------------------------------------
    @property
    def _led(self) -> frozenset[str]:
        return self._serving

    @_led.setter
    def _led(self, led: frozenset[str]) -> None:
        before, self._serving = self._serving, led
        if self._trace is not None and led != before:
            now = self.clock()
            for name in sorted(led - before):
                self._note(name, serve=now, until=self._valid_until.get(name, 0.0))
            for name in sorted(before - led):
                self._note(name, stop=now)

    def _note(self, partition: str, **times: float) -> None:
        trace = self._trace
        if trace is not None:
            with contextlib.suppress(OSError, ValueError):
                trace.write(json.dumps({"instance": self.holder, "partition": partition, **times}) + "\n")

    def is_leader(self, partition: str | None = None) -> bool:
        """True when this instance writes ``partition`` (None: the configuration): it holds the
        lease and the lease cannot have expired yet by this instance's clock (with the margin)."""
        now = self.clock()
        if partition is None:
            return self._config_leader and now < self._config_valid_until
        key = partition.lower()
        return key in self._led and now < self._valid_until.get(key, 0.0)

    def lapsed(self) -> frozenset[str]:
        """The partitions led here whose lease may have expired by now (by this instance's clock):
        served no more until a round renews or loses their lease."""
        now = self.clock()
        return frozenset(n for n in self._led if now >= self._valid_until.get(n, 0.0))

    def check_read(self, partition: str | None) -> None:
        """Raise :class:`NotLeaderError` (503, nothing changed) when a read of ``partition`` (None:
        of every partition) would show a partition led here whose lease may have expired: another
        instance may lead and have changed it (issue 32 #4)."""
        lapsed = self.lapsed()
        if not lapsed or (partition is not None and partition.lower() not in lapsed):
            return
        names = ", ".join(sorted(lapsed if partition is None else {partition.lower()}))
        raise NotLeaderError(f"this instance may no longer lead partition {names}: its lease could not be "
                             "renewed in time; retry (it is renewed, or another instance leads it)")

    def led(self) -> frozenset[str]:
        """The partitions this instance leads now."""
        return self._led

    def describe(self) -> str:
        """Who leads what, as this instance saw it at its last round (the healthcheck shows it)."""
        led = ", ".join(sorted(self._led)) or "no partition"
        parts = [f"leads {led}" + (" and the configuration" if self._config_leader else "")]
        others = sorted((name, url) for name, url in self._leaders.items()
                        if name is not None and name not in self._led)
        if others:
            parts.append(_leaders_text(others))
        if not self._config_leader:
            parts.append(f"the configuration: {self._leaders.get(None) or 'no leader'}")
        return "; ".join(parts)

    def leader_url(self, partition: str | None = None) -> str | None:
        """The advertised URL of the instance leading ``partition`` (None: the configuration), as
        read at the last round (None: no leader then — a hand-over was under way); while this
        instance hands a partition back, its claimant. Writes are relayed there; this runs on the
        event loop, so it never asks the store itself."""
        key = None if partition is None else partition.lower()
        if self.is_leader(partition) and key not in self._draining:
            return self.advertise
        return self._leaders.get(key)

    def enter(self, partition: str | None) -> bool:
        """Admit a write for ``partition`` (None: the configuration) here: True when this instance
        leads it and is not handing it back. An admitted write of a partition is counted until
        :meth:`leave`, and a hand-back waits for it to be answered. On the loop."""
        if partition is None:
            return self._config_leader
        key = partition.lower()
        with self._admission:
            if not self.is_leader(key) or key in self._draining:
                return False
            self._inflight[key] = self._inflight.get(key, 0) + 1
        return True

    def leave(self, partition: str) -> None:
        """The write admitted by :meth:`enter` was answered. On the loop."""
        key = partition.lower()
        with self._admission:
            left = self._inflight.get(key, 0) - 1
            if left > 0:
                self._inflight[key] = left
            else:
                self._inflight.pop(key, None)

    def successor(self, partition: str | None) -> bool:
        """True when this instance holds the claim on ``partition`` but another one still leads it:
        it takes the partition at its next round after that one hands it back."""
        return partition is not None and partition.lower() in self._pending

    def settled(self, partition: str | None) -> bool:
        """True when a write for ``partition`` (None: the configuration) can be served here or
        relayed now: this instance leads it (and is not handing it back), or the instance to relay
        to is known."""
        leader = self.leader_url(partition)
        return leader is not None and (leader != self.advertise or self.is_leader(partition))

    async def settle(self, partition: str | None, *, here: bool = False) -> None:
        """Wait, up to :attr:`hold` seconds, until ``partition`` is :meth:`settled` (``here``: until
        this instance leads it). During a hand-over — the old leader released it, the new one takes
        it at its next round — a write waits for the rounds, hurried, instead of being refused.

        A write waiting *here* for a partition this instance has claimed waits longer: the old
        leader hands it back only at its own next round (up to :attr:`interval` away), after
        draining the writes it admitted (up to :attr:`hold`), and this instance then replays the
        stream — together more than :attr:`hold` whenever that round comes late or the machine is
        busy. The bound is then the lease's ttl plus a round: by then a live leader has handed it
        back, and a dead one's lease has lapsed and been taken."""
        loop = asyncio.get_running_loop()
        wait = self.hold
        if here and self.successor(partition):
            wait = max(wait, self.ttl + self.interval)
        deadline = loop.time() + wait
        while not (self.is_leader(partition) if here else self.settled(partition)):
            remaining = deadline - loop.time()
            if remaining <= 0 or not await self.next_round(remaining):
                return

    def _read_leader(self, partition: str | None, claimant: bool = False) -> str | None:
        stream = LEASE_STREAM if partition is None else _stream(partition)
        try:
            holder = self.journal.lease_holder(CLAIM_PREFIX + stream if claimant else stream)
        except Exception:
            return None
        return str(holder).split("#", 1)[0] if holder else None

    # -- rounds (blocking; run in a thread from the loop) --------------------------------------------
    def _wanted(self, names: Collection[str], *, claim: bool = True) -> tuple[set[str], set[str]]:
        """The partitions to hold after this round (claims renewed, hand-backs released), and those
        whose claim this instance holds (``claim=False``: none is taken yet)."""
        journal, holder = self.journal, self.holder
        want: set[str] = set()
        claimed: set[str] = set()
        for name in sorted(set(names) | self.preferred):
            stream = _stream(name)
            if name in self.preferred:
                if claim and journal.acquire_lease(CLAIM_PREFIX + stream, holder, self.ttl):
                    claimed.add(name)
                want.add(name)
                continue
            claimant = journal.lease_holder(CLAIM_PREFIX + stream)
            if claimant is not None and claimant != holder:
                continue                   # given to a live instance: hand it back / leave it
            if name in self._led or journal.lease_holder(stream) in (None, holder):
                want.add(name)             # keep it (or renew it after it lapsed), or take a free one
        return want, claimed

    def step(self, scheduler: Scheduler) -> None:
        """One round: renew or take leases, hand back claimed partitions, adopt new ones (replayed to
        the end of their streams first), and bring the led partitions to the configuration in force.
        Nothing once :meth:`release` ran: a round still running when the instance stops (its task is
        cancelled, its thread goes on) finishes before the leases are released and takes none after."""
        with self._stepping:
            if not self._released:
                self._step(scheduler)

    def _step(self, scheduler: Scheduler) -> None:
        for name in sorted(self.lapsed()):
            self._settle_lapsed(scheduler, name)
        self._config_leader = self._acquire(LEASE_STREAM, None)
        names = {pc.name for pc in scheduler.config.partitions} | {p.name for p in scheduler.partitions()}
        want, claimed = self._wanted(names)
        for name in sorted(self._led - want):
            self._hand_back(scheduler, name)
        got: set[str] = set()
        for name in sorted(want):
            if self._acquire(_stream(name), name):
                got.add(name)
        for name in sorted(got - self._led):
            if not self._adopt(scheduler, name):
                got.discard(name)
        for name in sorted(self._led - got):
            _log.warning("quotaplane: lost the lease of partition %s; following it", name)
        self._led = frozenset(got)
        self._pending = frozenset(claimed - got)
        scheduler.follow(self._led)
        self._leaders = self._others(names - self._led)

    def _others(self, names: set[str]) -> dict[str | None, str | None]:
        """The leaders of the configuration (key None) and of the partitions this instance does not
        lead, as the store says now."""
        leaders: dict[str | None, str | None] = {None: self._read_leader(None)}
        for name in sorted(names):
            # between a hand-back and the claimant's next round nobody leads: the claimant is the
            # one to relay to (it waits for the partition: quotaplane.server.write_routing)
            leaders[name] = self._read_leader(name) or self._read_leader(name, claimant=True)
        return leaders

    def _adopt(self, scheduler: Scheduler, name: str) -> bool:
        """Take partition ``name`` whose lease was just won: replayed to the end of its stream before
        the first write here; False (its lease released) when it cannot be."""
        try:
            scheduler.adopt(name)
        except Exception:
            # it cannot be brought to the end of its stream now: holding its lease anyway would
            # leave it without a leader until the lease expires, round after round (issue 32 #2)
            _log.exception("quotaplane: could not take partition %s; releasing its lease", name)
            with contextlib.suppress(Exception):
                self.journal.release_lease(_stream(name), self.holder)
            return False
        _log.warning("quotaplane: this instance (%s) now leads partition %s", self.advertise, name)
        self.took_over_at = time.time()
        return True

    def _acquire(self, stream: str, name: str | None) -> bool:
        """Take or renew the lease of ``stream`` (of partition ``name``; None: the configuration's)
        and trust it until ``ttl - margin`` after this call started."""
        start = self.clock()
        if not self.journal.acquire_lease(stream, self.holder, self.ttl):
            return False
        until = start + self.ttl - self.margin
        if name is None:
            self._config_valid_until = until
        else:
            self._valid_until[name] = until
            if name in self._serving:
                self._note(name, until=until)
        return True

    def _settle_lapsed(self, scheduler: Scheduler, name: str) -> None:
        # its lease may have expired (a pause, a frozen store): it is served no more. What it
        # queued is committed now or refused by the store (fenced); if its lease is taken again it
        # is caught up on its stream first, as any partition taken over — another instance may have
        # led it meanwhile — and rebuilt from the journal if a commit failed
        _log.warning("quotaplane: the lease of partition %s may have expired before it was renewed; "
                     "serving it no more until it is renewed and caught up, or lost", name)
        self._led = self._led - {name}
        with contextlib.suppress(Exception):
            scheduler.partition(name).stop_group_commit()

    def _hand_back(self, scheduler: Scheduler, name: str) -> None:
        # new writes go to the claimant (which waits until it has the partition); the writes
        # admitted here are answered first — else they would fail after their admission — then
        # writing stops, what was queued is committed, and the claimant may take it
        claimant = self._read_leader(name, claimant=True)
        self._leaders = {**self._leaders, name: claimant}
        with self._admission:               # no write is admitted after this without being counted
            self._draining = self._draining | {name}
        deadline = time.monotonic() + self.hold
        while self._inflight.get(name) and time.monotonic() < deadline:
            time.sleep(0.002)
        self._led = self._led - {name}
        self._draining = self._draining - {name}
        with contextlib.suppress(Exception):
            scheduler.partition(name).flush()
        with contextlib.suppress(Exception):
            self.journal.release_lease(_stream(name), self.holder)
        _log.warning("quotaplane: partition %s is claimed by another instance: handed back", name)

    def initial(self) -> Scheduler:
        """Take what can be taken now and open the scheduler (the config leader applies --config).

        The claims on the given partitions that another instance leads are made at the first round,
        once the service runs: a claim makes the leader hand the partition back, and a claimant that
        cannot serve yet (still starting) would leave it without a leader meanwhile."""
        journal, holder = self.journal, self.holder
        self._config_leader = self._acquire(LEASE_STREAM, None)
        names = set(self.preferred)
        for stream in journal.streams():
            if stream != LEASE_STREAM:
                names.add("scheduler" if stream == "partition:scheduler" else stream)
        want, _unclaimed = self._wanted(names, claim=False)
        got = {n for n in want if self._acquire(_stream(n), n)}
        self._led = frozenset(got)
        scheduler = self._build(holder, self.is_leader, self._config_leader)
        scheduler.follow(self._led)
        if got:
            self.took_over_at = time.time()
        _log.warning("quotaplane: this instance (%s) leads partitions %s%s", self.advertise,
                     ", ".join(sorted(got)) or "(none yet)",
                     " and the configuration" if self._config_leader else "")
        return scheduler

    def release(self) -> None:
        """Give up every lease and claim (clean shutdown: the others take over at once); after the
        round under way, if any, and for good (a later round takes nothing)."""
        with self._stepping:
            self._released = True
            streams = [_stream(n) for n in self._led] + [CLAIM_PREFIX + _stream(n) for n in self.preferred]
            self._led = frozenset()
            self._config_leader = False
            for stream in [*streams, LEASE_STREAM]:
                with contextlib.suppress(Exception):
                    self.journal.release_lease(stream, self.holder)

    # -- the background rounds (LeaseRounds) ---------------------------------------------------------
    async def _round(self, service: Service) -> None:
        await asyncio.to_thread(self.step, service.scheduler)
        service.sync_group_commit()

    def _next_delay(self) -> float:
        # a claimed partition is handed back at its leader's next round: take it soon after
        return self.interval / 10 if self._pending else self.interval

    def _round_failed(self) -> None:
        # leases could not be renewed (database trouble): stop writing at once, as a whole-instance
        # leader does; the next good round takes them again and replays to the end first
        self._led = frozenset()
        self._config_leader = False
