"""A bounded buffer between a partition's notices and one event stream (issue 32 item 9).

A partition tells its subscribers of each journalled change on whichever thread made it; a stream
sends them on the event loop. :class:`Feed` sits between the two: it keeps at most ``limit`` items
(``stream-buffer``), wakes its reader once per loop turn however many items came (not once per item:
with many streams, one wake-up per item per stream was what cut a writer from 719 to 19 changes/s),
and, when its reader falls ``limit`` items behind, stops taking more and marks itself *overflowed*:
the stream then sends what it holds and closes with the id to resume from, instead of buffering for
ever.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

__all__ = ["Feed", "bound_send_buffer"]

T = TypeVar("T")


class Feed(Generic[T]):
    """At most ``limit`` items from any thread to one coroutine on ``loop`` (see the module)."""

    __slots__ = ("_event", "_items", "_lock", "_loop", "_waking", "closed", "limit", "overflowed")

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.limit = limit
        self._loop = loop or asyncio.get_running_loop()
        self._items: deque[T] = deque()
        self._event = asyncio.Event()
        self._lock = threading.Lock()
        self._waking = False
        #: more items came than the buffer holds: the reader must resume from the last item it sent
        self.overflowed = False
        self.closed = False

    def offer(self, item: T) -> None:
        """Add ``item`` (any thread); dropped once the feed is full or closed."""
        with self._lock:
            if self.closed or self.overflowed:
                return
            if len(self._items) >= self.limit:
                self.overflowed = True
            else:
                self._items.append(item)
            if self._waking:
                return
            self._waking = True
        try:
            self._loop.call_soon_threadsafe(self._wake)
        except RuntimeError:                      # the loop is closed: nobody reads any more
            self.closed = True

    def _wake(self) -> None:
        with self._lock:
            self._waking = False
        self._event.set()

    async def take(self, timeout: float) -> list[T]:
        """Everything buffered (waiting up to ``timeout`` seconds for something; ``[]`` then)."""
        if not self._items and not self.overflowed:
            self._event.clear()
            try:
                await asyncio.wait_for(self._event.wait(), timeout)
            except TimeoutError:
                return []
        with self._lock:
            out = list(self._items)
            self._items.clear()
        return out

    def close(self) -> None:
        """Take nothing more."""
        with self._lock:
            self.closed = True
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


def bound_send_buffer(scope: Mapping[str, Any]) -> None:
    """Under ``serve``: keep the kernel send buffer of this request's connection small (an event
    stream, :meth:`quotaplane.server.guard.GuardedHttp.bound_send_buffer`); no-op elsewhere."""
    from quotaplane.server.guard import CONNECTION_EXTENSION

    conn = (scope.get("extensions") or {}).get(CONNECTION_EXTENSION)
    if conn is not None:
        conn.bound_send_buffer()
