"""Leadership and fail-over for several instances on one PostgreSQL store.

One instance leads: it holds the lease of the ``scheduler`` stream and of every partition stream
(journal leases, ``acquire_lease(stream, holder, ttl)``), renews them every ``interval`` seconds and
passes its holder name to every append, so an append after the lease was lost fails (fencing) instead
of forking the journal. The other instances follow: they serve reads from a copy of the state that
they bring up to date from the journal, and refuse writes with 503 and the leader's URL in the body
(``{"status_code": 503, …, "leader": "http://host:port"}``).

When the leader dies its leases expire after ``ttl`` seconds; a follower polls every ``interval``
seconds, takes the leases, rebuilds the state from the store (every acknowledged change is there,
decision S1) and starts accepting writes: with the defaults (ttl 5 s, interval 1 s) within about
6–7 seconds, inside the 10 s of quality.md.

The holder name is ``"<advertised URL>#<random>"``: the URL tells clients where to go, the random
part keeps two processes apart. A restarted instance (kill -9, then started again) finds the lease of
its earlier process still live for up to ``ttl`` seconds; it takes it over at once when the lease's
URL is its own and nobody listens at its address any more — two live processes cannot serve one
address, so the holder is dead (issue 14 #7). Otherwise the lease is respected.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from quotaplane.errors import ConfigError
from quotaplane.journal.base import Journal

if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.cluster import Scheduler

__all__ = ["LEASE_STREAM", "Leadership", "LeaseRounds", "Service", "default_margin"]


class Service(Protocol):
    """What the leadership rounds touch of the service that runs them
    (:class:`quotaplane.server.app.Service` is it). Declared here, where it is used, so that this module
    imports nothing of the app above it (no import circle, issue 29)."""

    scheduler: Scheduler

    def sync_group_commit(self) -> None:
        """Group commit on exactly the partitions this instance leads."""

_log = logging.getLogger("quotaplane.server.ha")

#: The stream whose lease decides leadership (the scheduler's config stream).
LEASE_STREAM = "scheduler"


#: the shortest time between two rounds, even when writes keep asking for one
MIN_ROUND_SPACING = 0.05


def default_margin(ttl: float, interval: float) -> float:
    """Seconds before a lease's ttl runs out at which its holder stops trusting it (issue 32 #4): a
    fifth of the ttl, at most one renewal interval — room for a slow clock, never more than the
    renewals need. ``QUOTAPLANE_LEASE_MARGIN`` (seconds) overrides it."""
    configured = os.environ.get("QUOTAPLANE_LEASE_MARGIN")
    if configured:
        try:
            return float(configured)
        except ValueError:
            raise ConfigError(f"QUOTAPLANE_LEASE_MARGIN must be a number of seconds, got {configured!r}"
                             ) from None
    return min(ttl / 5, interval)


class LeaseRounds(abc.ABC):
    """The background task of a leadership: a round every ``interval`` seconds from the app's start
    to its stop, which releases the leases. Subclasses give the round and what a failed one means.

    A round can be asked for early (:meth:`hurry`): a write that finds no leader for its partition
    waits for the next rounds (:meth:`next_round`) rather than being refused during a hand-over."""

    interval: float
    _task: asyncio.Task[None] | None
    _service: Service | None
    _wake: asyncio.Event | None = None
    _round_done: asyncio.Event | None = None
    _rounds_started = 0
    _rounds_ended = 0

    @abc.abstractmethod
    async def _round(self, service: Service) -> None:
        """One round: renew or take leases and bring the served scheduler up to date."""

    @abc.abstractmethod
    def _round_failed(self) -> None:
        """A round raised: stop writing until a round succeeds."""

    @abc.abstractmethod
    def release(self) -> None:
        """Give up every lease."""

    def _next_delay(self) -> float:
        """Seconds from the end of a round to the start of the next one (unless hurried)."""
        return self.interval

    async def start(self, service: Service) -> None:
        """Start the background task (called by the app's lifespan)."""
        self._service = service
        self._wake = asyncio.Event()
        self._round_done = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name=f"quotaplane-{type(self).__name__}")

    async def stop(self) -> None:
        """Stop the background task and release the leases."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await asyncio.to_thread(self.release)

    def hurry(self) -> None:
        """Start the next round now (or ``MIN_ROUND_SPACING`` seconds after the last one ended, or
        when the one under way ends). On the loop."""
        if self._wake is not None:
            self._wake.set()

    async def next_round(self, timeout: float) -> bool:
        """Wait until a round that starts after this call has ended (it has read the store since);
        False when ``timeout`` seconds passed first or the rounds are not running. On the loop."""
        if self._task is None or self._round_done is None:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        wanted = self._rounds_started + 1
        self.hurry()
        while self._rounds_ended < wanted:
            remaining = deadline - loop.time()
            if remaining <= 0 or self._round_done is None:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._round_done.wait()), remaining)
        return True

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            service = self._service
            if self._wake is not None:
                self._wake.clear()          # a hurry from now on asks for the round after this one
            self._rounds_started += 1
            try:
                if service is None:
                    raise RuntimeError("leadership loop started without a service")
                await self._round(service)
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("leadership round failed")
                self._round_failed()
            self._rounds_ended = self._rounds_started
            done, self._round_done = self._round_done, asyncio.Event()
            if done is not None:
                done.set()
            await asyncio.sleep(MIN_ROUND_SPACING)
            wake, remaining = self._wake, self._next_delay() - (loop.time() - start)
            if wake is not None and not wake.is_set() and remaining > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), remaining)


class Leadership(LeaseRounds):
    """Lease-based leadership of one instance (see the module docstring).

    ``lease_journal`` is a journal used only for leases (its own connection). ``build_leader()`` makes
    a scheduler from the store for a new leader (everything journalled restored, appends fenced with
    :attr:`holder`); ``build_follower()`` makes a read-only copy; ``refresh(scheduler)`` brings a
    follower copy up to date from the journal and returns the scheduler to serve (the same object or a
    new one).
    """

    def __init__(self, lease_journal: Journal, *, advertise: str,
                 build_leader: Callable[[str], Scheduler], build_follower: Callable[[], Scheduler],
                 refresh: Callable[[Scheduler], Scheduler] | None = None,
                 streams_hint: Callable[[], list[str]] | None = None,
                 ttl: float = 5.0, interval: float = 1.0,
                 address_free: Callable[[], bool] | None = None, margin: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if ttl <= interval:
            raise ConfigError("the lease ttl must be longer than the renewal interval")
        self.margin = default_margin(ttl, interval) if margin is None else margin
        if not 0 <= self.margin < ttl - interval:
            raise ConfigError("the lease margin must be at least 0 and leave more than one renewal "
                             "interval of the ttl")
        self.clock = clock
        #: until when (by :attr:`clock`) the leases are trusted: writes stop then (issue 32 #4)
        self._valid_until = 0.0
        self.journal = lease_journal
        self.advertise = advertise
        self.holder = f"{advertise}#{uuid.uuid4().hex[:12]}"
        self.ttl = ttl
        self.interval = interval
        self._build_leader = build_leader
        self._build_follower = build_follower
        self._refresh = refresh
        self._streams_hint = streams_hint
        #: True when nobody listens at this instance's address (None: never assume so)
        self._address_free = address_free
        self._leader = False
        #: the leader's URL as read at the last round (the loop never asks the store itself)
        self._leader_seen: str | None = None
        self._streams: list[str] = [LEASE_STREAM]
        self._task: asyncio.Task[None] | None = None
        self._service: Service | None = None
        self._lock = threading.Lock()
        #: one round at a time, and none once released (see :meth:`step`)
        self._stepping = threading.Lock()
        self._released = False
        self.took_over_at: float | None = None

    # -- state ------------------------------------------------------------------------------------
    def is_leader(self, partition: str | None = None) -> bool:
        """True while this instance holds the leases (of every partition: ``partition`` is ignored)
        and they cannot have expired yet by its own clock, with the margin."""
        return self._leader and self.clock() < self._valid_until

    def renewing(self) -> bool:
        """True while this instance led at its last round but no longer trusts its leases by its own
        clock: the renewal round is late (a paused process, a loaded machine)."""
        return self._leader and self.clock() >= self._valid_until

    async def renewal(self, timeout: float | None = None) -> None:
        """While :meth:`renewing`, wait for the hurried rounds, at most ``timeout`` seconds (a ttl by
        default): a request then waits for the renewal instead of being refused 503 by the instance
        that still holds the lease — as a write waits during a hand-over (issue 18 #2). Nothing is
        served meanwhile, so no stale read (issue 32 #4)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.ttl if timeout is None else timeout)
        while self.renewing():
            remaining = deadline - loop.time()
            if remaining <= 0 or not await self.next_round(remaining):
                return

    def leader_url(self, partition: str | None = None) -> str | None:
        """The advertised URL of the current leader (this one when leading), as read at the last
        round, or None when unknown (one leader for every partition: ``partition`` is ignored).
        Refused writes name it; this runs on the event loop, so it never asks the store itself."""
        if self.is_leader():
            return self.advertise
        return self._leader_seen

    def _read_leader(self) -> None:
        try:
            holder = self.journal.lease_holder(LEASE_STREAM)
        except Exception:
            holder = None
        self._leader_seen = str(holder).split("#", 1)[0] if holder else None

    # -- lease handling (blocking; run in a thread from the loop) -----------------------------------
    def _partition_streams(self, scheduler: Scheduler) -> list[str]:
        names: list[str] = []
        with contextlib.suppress(Exception):
            for p in scheduler.partitions():
                names.append(str(getattr(p, "stream", p.name)))
        return names

    def try_acquire(self) -> bool:
        """Take or renew every lease; True when this instance leads afterwards (the leases are then
        trusted until ``ttl - margin`` after this call started)."""
        start = self.clock()
        if not self.journal.acquire_lease(LEASE_STREAM, self.holder, self.ttl):
            return False
        ok = True
        for stream in self._streams[1:]:
            if not self.journal.acquire_lease(stream, self.holder, self.ttl):
                ok = False
        if ok:
            self._valid_until = start + self.ttl - self.margin
        return ok

    def _earlier_self(self) -> str | None:
        """The holder of the leader lease when it is a dead earlier process of this instance."""
        try:
            holder = self.journal.lease_holder(LEASE_STREAM)
        except Exception:
            return None
        if not holder or holder == self.holder or str(holder).split("#", 1)[0] != self.advertise:
            return None
        if self._address_free is None or not self._address_free():
            return None          # the address is served: that process may be alive
        return str(holder)

    def initial(self) -> Scheduler:
        """Decide the role at start-up; return the scheduler to serve."""
        earlier = self._earlier_self()
        if earlier is not None:
            streams = [LEASE_STREAM, *(self._streams_hint() if self._streams_hint is not None else [])]
            for stream in reversed(streams):
                with contextlib.suppress(Exception):
                    self.journal.release_lease(stream, earlier)
            _log.warning("quotaplane: the lease of %s belongs to an earlier process of this instance "
                         "(nobody serves %s any more): taking it over", earlier, self.advertise)
        if self.journal.acquire_lease(LEASE_STREAM, self.holder, self.ttl):
            return self._become_leader(None)
        self._leader = False
        self._read_leader()
        return self._build_follower()

    def _take_all(self) -> None:
        # A dead leader's partition leases live until they expire: wait up to one ttl for them.
        deadline = time.monotonic() + self.ttl + 2 * self.interval
        while not self.try_acquire():
            if time.monotonic() > deadline:
                raise RuntimeError("could not take the partition leases")
            time.sleep(self.interval / 2)

    def _become_leader(self, old: Scheduler | None) -> Scheduler:
        # Partition leases first (the restore may append, fenced by them), then rebuild from the
        # store so every acknowledged change is there, then lease any partition the config added.
        hint = self._streams_hint() if self._streams_hint is not None else []
        self._streams = [LEASE_STREAM, *[s for s in hint if s != LEASE_STREAM]]
        self._take_all()
        scheduler = self._build_leader(self.holder)
        try:
            self._streams = [LEASE_STREAM, *self._partition_streams(scheduler)]
            self._take_all()
        except Exception:
            with contextlib.suppress(Exception):
                scheduler.close()
            raise
        if old is not None:
            with contextlib.suppress(Exception):
                old.close()
        self._leader = True
        self.took_over_at = time.time()
        _log.warning("quotaplane: this instance (%s) is now the leader", self.advertise)
        return scheduler

    def step(self, current: Scheduler) -> Scheduler:
        """One round of the loop: renew, take over, or follow. Returns the scheduler to serve.
        Nothing once :meth:`release` ran (a round still running when the instance stops finishes
        before the leases are released and takes none after)."""
        with self._stepping:
            if self._released:
                return current
            return self._step(current)

    def _step(self, current: Scheduler) -> Scheduler:
        if self._leader:
            self._streams = [LEASE_STREAM, *self._partition_streams(current)]
            lapsed = self.clock() >= self._valid_until
            if self.try_acquire():
                if lapsed:
                    # the leases may have expired meanwhile and another instance led: rebuild from
                    # the store, as at any take-over (issue 32 #4)
                    _log.warning("quotaplane: the leader lease may have expired before it was renewed; "
                                 "rebuilding from the store")
                    return self._become_leader(current)
                return current
            # Lost the lease (paused too long, database trouble): stop accepting writes at once.
            self._leader = False
            self._read_leader()
            _log.warning("quotaplane: lost the leader lease; following")
            return current
        if self.journal.acquire_lease(LEASE_STREAM, self.holder, self.ttl):
            try:
                return self._become_leader(current)
            except Exception:
                _log.exception("take-over failed; releasing the lease")
                self._give_up()
                return current
        self._read_leader()
        if self._refresh is not None:
            return self._refresh(current)
        return current

    def release(self) -> None:
        """Give up every lease (clean shutdown lets a follower take over at once): after the round
        under way, if any, and for good."""
        with self._stepping:
            self._released = True
            self._give_up()

    def _give_up(self) -> None:
        self._leader = False
        for stream in reversed(self._streams):
            with contextlib.suppress(Exception):
                self.journal.release_lease(stream, self.holder)

    # -- the background rounds (LeaseRounds) ---------------------------------------------------------
    async def _round(self, service: Service) -> None:
        current = service.scheduler
        new = await asyncio.to_thread(self.step, current)
        if new is not current:
            service.scheduler = new

    def _round_failed(self) -> None:
        self._leader = False
