"""The in-memory journal (``memory://`` or no store): the same semantics as the durable stores.

Events are kept as canonical JSON texts, so what comes back from :meth:`MemoryJournal.read` is a fresh
dict exactly as a durable store would return it (a caller can never mutate the journal through an
event it appended or read, and non-JSON-able events are refused the same way everywhere).

The texts are kept compressed in blocks of :data:`BLOCK` events (zlib, fast level; the newest events,
fewer than a block, as they are): a journal in memory holds every event of the process's life, and
as plain strings an ask's ``ask_added`` text took ~190 bytes — a fifth of what a pending ask costs in
all (issue 38, "≤ 1 kB per pending ask"); a block of similar events compresses ~10×. Reading a block
decompresses it (~0.5 µs per event, less than decoding the event).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from quotaplane.errors import InputError, NotLeaderError
from quotaplane.journal.base import (
    JournalCompactedError,
    JournalError,
    check_append,
    check_lease_args,
    check_seq,
    check_state,
    check_stream,
    decode_page,
    stream_moved,
)

__all__ = ["LocalLeaseCalls", "LocalLeases", "MemoryJournal"]

_PAGE = 4096  # events copied per lock hold while reading, so a long read never blocks appends for long
#: events per compressed block (a block is the texts joined by newlines — canonical JSON has none)
BLOCK = 64


class LocalLeases:
    """Leases kept in this process, with an injectable monotonic clock (seconds).

    Used by the memory and SQLite journals: both are single-process stores (SQLite holds an exclusive
    file lock), so a lease only needs to be consistent inside the process. Not thread safe on its own:
    the owning journal calls it under its lock.
    """

    __slots__ = ("_clock", "_leases")

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._leases: dict[str, tuple[str, float]] = {}  # stream -> (holder, expires at)

    def acquire(self, stream: str, holder: str, ttl: float) -> bool:
        """Take or renew the lease (see :meth:`Journal.acquire_lease`)."""
        now = self._clock()
        current = self._leases.get(stream)
        if current is not None and current[0] != holder and current[1] > now:
            return False
        self._leases[stream] = (holder, now + ttl)
        return True

    def release(self, stream: str, holder: str) -> None:
        """Drop the lease if ``holder`` holds it."""
        current = self._leases.get(stream)
        if current is not None and current[0] == holder:
            del self._leases[stream]

    def holder(self, stream: str) -> str | None:
        """The live holder, or ``None``."""
        current = self._leases.get(stream)
        if current is None or current[1] <= self._clock():
            return None
        return current[0]

    def check(self, stream: str, holder: str) -> None:
        """Raise :class:`NotLeaderError` unless ``holder`` holds a live lease of ``stream`` (fencing)."""
        live = self.holder(stream)
        if live != holder:
            raise NotLeaderError(
                f"{holder!r} does not hold the lease of stream {stream!r}"
                + (f" (held by {live!r})" if live else " (no live lease)"),
                leader=live,
            )


class LocalLeaseCalls:
    """The journal's lease calls over a :class:`LocalLeases` held in this process.

    Shared by the memory and SQLite stores (one writer process each, so in-process leases are
    exact). The store provides ``_lock``, ``_leases`` and ``_ensure_open``.
    """

    __slots__ = ()

    _lock: threading.Lock
    _leases: LocalLeases

    if TYPE_CHECKING:  # pragma: no cover - provided by the store
        def _ensure_open(self) -> None: ...

    def acquire_lease(self, stream: str, holder: str, ttl: float) -> bool:
        """Take or renew the lease (in-process)."""
        check_lease_args(stream, holder, ttl)
        with self._lock:
            self._ensure_open()
            return self._leases.acquire(stream, holder, float(ttl))

    def release_lease(self, stream: str, holder: str) -> None:
        """Give up the lease if held by ``holder``."""
        check_lease_args(stream, holder)
        with self._lock:
            self._ensure_open()
            self._leases.release(stream, holder)

    def lease_holder(self, stream: str) -> str | None:
        """The live lease holder or ``None``."""
        check_stream(stream)
        with self._lock:
            self._ensure_open()
            return self._leases.holder(stream)


class _Stream:
    """One stream's events: ``blocks`` of :data:`BLOCK` compressed texts, then the ``tail`` (fewer than
    a block, plain); the first held event has seq ``first + 1``. Events up to ``compacted`` were
    deleted (a block partly covered by the snapshot is kept whole until it is covered)."""

    __slots__ = ("blocks", "compacted", "first", "snapshot", "tail")

    def __init__(self) -> None:
        self.blocks: list[bytes] = []
        self.tail: list[str] = []
        self.first = 0
        self.compacted = 0               # events with seq <= compacted were deleted
        self.snapshot: tuple[int, str] | None = None

    @property
    def last(self) -> int:
        return self.first + BLOCK * len(self.blocks) + len(self.tail)

    def extend(self, texts: list[str]) -> None:
        tail = self.tail
        tail.extend(texts)
        while len(tail) >= BLOCK:
            self.blocks.append(zlib.compress("\n".join(tail[:BLOCK]).encode(), 1))
            del tail[:BLOCK]

    def page(self, after: int) -> list[str]:
        """The texts of the events after seq ``after`` (one block's worth or the tail; [] at the end)."""
        at = after - self.first
        held = BLOCK * len(self.blocks)
        if at < held:
            block, offset = divmod(at, BLOCK)
            texts: list[str] = []
            for b in self.blocks[block:block + _PAGE // BLOCK]:
                texts += zlib.decompress(b).decode().split("\n")
            return texts[offset:]
        return self.tail[at - held:at - held + _PAGE]

    def compact(self, upto: int) -> int:
        """Delete the events up to seq ``upto`` (whole blocks; the tail when no block is left)."""
        n = upto - self.compacted
        while self.blocks and self.first + BLOCK <= upto:
            del self.blocks[0]
            self.first += BLOCK
        if not self.blocks and upto > self.first:
            del self.tail[:upto - self.first]
            self.first = upto
        self.compacted = upto
        return n

    def text_bytes(self) -> int:
        return (sys.getsizeof(self.blocks) + sum(sys.getsizeof(b) for b in self.blocks)
                + sys.getsizeof(self.tail) + sum(sys.getsizeof(t) for t in self.tail))


class MemoryJournal(LocalLeaseCalls):
    """A journal kept in memory: nothing survives the process. Thread safe.

    ``clock`` (monotonic seconds, default :func:`time.monotonic`) drives lease expiry, so tests can
    expire a lease without sleeping. ``compact_on_snapshot`` deletes covered events on each snapshot.
    """

    __slots__ = ("_closed", "_compact_on_snapshot", "_leases", "_lock", "_streams", "url")

    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 compact_on_snapshot: bool = False) -> None:
        self.url = "memory://"
        self._lock = threading.Lock()
        self._streams: dict[str, _Stream] = {}
        self._leases = LocalLeases(clock)
        self._compact_on_snapshot = compact_on_snapshot
        self._closed = False

    def __repr__(self) -> str:
        return "MemoryJournal('memory://')"

    def __enter__(self) -> MemoryJournal:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise JournalError("journal is closed")

    _ensure_open = _check_open

    def append(self, stream: str, events: Sequence[Mapping[str, Any]], *, holder: str | None = None,
               after: int | None = None) -> int:
        """Append events in one step; see :meth:`Journal.append`."""
        texts = check_append(stream, events, holder)
        with self._lock:
            self._check_open()
            if holder is not None:
                self._leases.check(stream, holder)
            st = self._streams.get(stream)
            if after is not None and holder is not None:
                last = 0 if st is None else st.last
                if last != after:
                    raise stream_moved(stream, last, after, self._leases.holder(stream))
            if st is None:
                if not texts:
                    return 0
                st = self._streams[stream] = _Stream()
            st.extend(texts)
            return st.last

    def read(self, stream: str, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """Iterate ``(seq, event)`` with ``seq > after``; see :meth:`Journal.read`."""
        check_stream(stream)
        check_seq(after, "after")
        with self._lock:
            self._check_open()
            st = self._streams.get(stream)
            if st is not None and after < st.compacted:
                raise JournalCompactedError(
                    f"events 1..{st.compacted} of stream {stream!r} were compacted; "
                    f"cannot read after {after} (load the snapshot first)", st.compacted)
        return self._iter(stream, after)

    def _iter(self, stream: str, after: int) -> Iterator[tuple[int, dict[str, Any]]]:
        seq = after
        while True:
            with self._lock:
                self._check_open()
                st = self._streams.get(stream)
                if st is None:
                    return
                if seq < st.compacted:  # compacted while we were iterating
                    raise JournalCompactedError(
                        f"stream {stream!r} was compacted past {seq} during the read", st.compacted)
                page = st.page(seq)
            if not page:
                return
            for event in decode_page(page):
                seq += 1
                yield seq, event

    def last_seq(self, stream: str) -> int:
        """The last seq of ``stream`` (0 if none)."""
        check_stream(stream)
        with self._lock:
            self._check_open()
            st = self._streams.get(stream)
            return 0 if st is None else st.last

    def save_snapshot(self, stream: str, seq: int, state: Mapping[str, Any]) -> None:
        """Keep ``state`` as the snapshot of ``stream`` at ``seq``; see :meth:`Journal.save_snapshot`."""
        check_stream(stream)
        check_seq(seq)
        text = check_state(state)
        with self._lock:
            self._check_open()
            st = self._streams.get(stream)
            last = 0 if st is None else st.last
            if seq > last:
                raise InputError(f"snapshot seq {seq} is beyond the last event {last} of stream {stream!r}")
            if st is not None and st.snapshot is not None and seq < st.snapshot[0]:
                raise InputError(f"snapshot seq {seq} is older than the saved snapshot at "
                                 f"{st.snapshot[0]} of stream {stream!r}")
            if st is None:
                st = self._streams[stream] = _Stream()
            st.snapshot = (seq, text)
            if self._compact_on_snapshot:
                self._compact_locked(st)

    def load_snapshot(self, stream: str) -> tuple[int, dict[str, Any]] | None:
        """The latest snapshot of ``stream`` or ``None``."""
        check_stream(stream)
        with self._lock:
            self._check_open()
            st = self._streams.get(stream)
            snap = None if st is None else st.snapshot
        return None if snap is None else (snap[0], json.loads(snap[1]))

    def compact(self, stream: str) -> int:
        """Delete the events covered by the snapshot; return how many were deleted."""
        check_stream(stream)
        with self._lock:
            self._check_open()
            st = self._streams.get(stream)
            return 0 if st is None else self._compact_locked(st)

    @staticmethod
    def _compact_locked(st: _Stream) -> int:
        if st.snapshot is None or st.snapshot[0] <= st.compacted:
            return 0
        return st.compact(st.snapshot[0])

    def streams(self) -> list[str]:
        """Every stream with events or a snapshot, sorted."""
        with self._lock:
            self._check_open()
            return sorted(name for name, st in self._streams.items()
                          if st.last or st.snapshot is not None)

    def text_bytes(self) -> int:
        """Bytes the events' texts take in memory (their blocks, the newest plain, the lists)."""
        with self._lock:
            return sum(st.text_bytes() for st in self._streams.values())

    def close(self) -> None:
        """Mark the journal closed (the data is dropped)."""
        with self._lock:
            self._closed = True
            self._streams.clear()
