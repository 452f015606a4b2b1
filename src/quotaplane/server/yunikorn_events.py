"""YuniKorn's event system as its REST API shows it: ``/ws/v1/events/batch`` and ``/events/stream``.

Every partition's notices (:mod:`quotaplane.notices`) become ``si.EventRecord`` objects — encoded as
YuniKorn's webservice encodes them (Go's ``encoding/json`` of the protobuf struct: enums as numbers,
empty fields omitted, ``resource`` as ``{"resources": {name: {"value": n}}}``) — numbered from 0 in one
sequence for the whole service, and kept in a ring buffer of ``capacity`` records (YuniKorn's default
100,000). A batch answers the records from an id on (``GetEventsFromID``); a stream first sends the
``{"InstanceUUID"}`` line, then the last ``count`` records kept (YuniKorn's ``GetRecentEvents``; none
by default), then each new record as a JSON line. A stream is a position in the ring, so it holds no
records of its own; one that falls ``stream-buffer`` records behind is dropped, its last line
YuniKorn's "Event stream was closed by the producer" error body naming the id to resume from with a
batch (issue 32 item 9).

Which record a notice becomes (type, change type, change detail are YuniKorn's enum numbers):

=====================  ==========  ======  =======================================
notice                 type        change  detail
=====================  ==========  ======  =======================================
ask_added              APP (2)     ADD     APP_REQUEST (201), referenceID = ask key
ask_removed            APP         REMOVE  REQUEST_CANCEL (100)
allocated              APP         ADD     APP_ALLOC (200), referenceID = allocation
released               APP         REMOVE  ALLOC_CANCEL (500)
preempted              APP         REMOVE  ALLOC_PREEMPT (501), one per allocation
application            APP         SET     APP_<STATE> (202–212)
application_removed    APP         REMOVE  DETAILS_NONE
node_added             NODE (3)    ADD     DETAILS_NONE, resource = capacity
node_updated           NODE        SET     NODE_SCHEDULABLE (302) / NODE_CAPACITY (304)
node_removed           NODE        REMOVE  NODE_DECOMISSION (300)
bound                  NODE        ADD     NODE_ALLOC (303), referenceID = allocation
config_applied         QUEUE (4)   SET     QUEUE_CONFIG (400), objectID ``root``
=====================  ==========  ======  =======================================
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from quotaplane.events import Event
from quotaplane.notices import EventListener, notice_of

__all__ = ["DEFAULT_CAPACITY", "DEFAULT_STREAM_BUFFER", "EventRecords", "RecordStream", "record_of"]

#: YuniKorn's ``DefaultEventRingBufferCapacity``
DEFAULT_CAPACITY = 100_000

#: how far (records) a stream may fall behind before it is dropped (``stream-buffer``)
DEFAULT_STREAM_BUFFER = 10_000

_REQUEST, _APP, _NODE, _QUEUE = 1, 2, 3, 4
_SET, _ADD, _REMOVE = 1, 2, 3
_APP_STATE_DETAIL = {"Rejected": 202, "New": 203, "Accepted": 204, "Running": 206, "Completing": 207,
                     "Completed": 208, "Failing": 209, "Failed": 210, "Resuming": 211, "Expired": 212}


def _resource(res: Mapping[str, int] | None) -> dict[str, Any] | None:
    if not res:
        return None
    return {"resources": {k: ({"value": v} if v else {}) for k, v in sorted(res.items())}}


def _record(kind: int, object_id: str, change: int, detail: int, t: float, *, reference: str = "",
            message: str = "", resource: Mapping[str, int] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "objectID": object_id, "message": message,
                           "timestampNano": round(t * 1e9), "eventChangeType": change,
                           "eventChangeDetail": detail, "referenceID": reference,
                           "resource": _resource(resource)}
    return {k: v for k, v in out.items() if v not in (0, "", None)}


def record_of(notice: Mapping[str, Any], t: float) -> list[dict[str, Any]]:
    """The event records of one partition notice at time ``t`` (see the module's table)."""
    kind = notice.get("type")
    app = str(notice.get("applicationID", ""))
    key = str(notice.get("allocationKey", ""))
    if kind == "ask_added":
        return [_record(_APP, app, _ADD, 201, t, reference=key, message="request added",
                        resource=notice.get("resource"))]
    if kind == "ask_removed":
        return [_record(_APP, app, _REMOVE, 100, t, reference=key, message="request cancelled")]
    if kind == "allocated":
        return [_record(_APP, app, _ADD, 200, t, reference=key, message="allocation added",
                        resource=notice.get("resource"))]
    if kind == "released":
        return [_record(_APP, app, _REMOVE, 500, t, reference=key, message="allocation released")]
    if kind == "preempted":
        reason = notice.get("reason") or {}
        text = f"preempted: {reason.get('code', '')}: {reason.get('message', '')}"
        return [_record(_APP, str(a.get("applicationID", "")), _REMOVE, 501, t,
                        reference=str(a.get("allocationKey", "")), message=text)
                for a in notice.get("allocations") or ()]
    if kind == "application":
        state = str(notice.get("state", ""))
        return [_record(_APP, app, _SET, _APP_STATE_DETAIL.get(state, 0), t, message=state)]
    if kind == "application_removed":
        return [_record(_APP, app, _REMOVE, 0, t, message="application removed")]
    node = str(notice.get("nodeID", ""))
    if kind == "node_added":
        return [_record(_NODE, node, _ADD, 0, t, message="node added", resource=notice.get("capacity"))]
    if kind == "node_updated":
        detail = 302 if notice.get("schedulable") is False else 304
        return [_record(_NODE, node, _SET, detail, t, message="node updated",
                        resource=notice.get("capacity"))]
    if kind == "node_removed":
        return [_record(_NODE, node, _REMOVE, 300, t, message="node removed")]
    if kind == "bound":
        return [_record(_NODE, node, _ADD, 303, t, reference=key, message="allocation placed on node")]
    if kind == "config_applied":
        return [_record(_QUEUE, "root", _SET, 400, t, message="configuration applied")]
    return []


def _no_queue(_application: str) -> str:
    return ""                   # event records do not carry a queue


class RecordStream:
    """One reader of the records (``/ws/v1/events/stream``): a position in the shared ring, not a
    copy of the records, so an open stream holds no memory of its own however slowly it reads.

    ``next_id`` is the id of the next record to send. A stream that falls more than ``buffer``
    records behind the newest one (a reader slower than the writers, or not reading) is *dropped*:
    :meth:`take` then answers None and :attr:`next_id` is where to resume from with
    ``/ws/v1/events/batch?start=ID`` (issue 32 item 9)."""

    __slots__ = ("_event", "_loop", "_records", "buffer", "dropped", "next_id")

    def __init__(self, records: EventRecords, next_id: int, buffer: int) -> None:
        self._records = records
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        self.next_id = next_id
        self.buffer = buffer
        self.dropped = False

    async def take(self, most: int, timeout: float) -> list[dict[str, Any]] | None:
        """The next records (at most ``most``; ``[]`` when none came within ``timeout`` seconds),
        or None once the stream is dropped."""
        out = self._records.read_from(self, most)
        if out is None or out:
            return out
        self._event.clear()
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            return []
        return self._records.read_from(self, most)

    def wake(self) -> None:
        """New records (on the stream's loop)."""
        self._event.set()


class EventRecords:
    """The ring buffer of event records and the open streams (thread-safe: partitions notify from
    whichever thread changed them)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, clock: Callable[[], float] = time.time) -> None:
        self.capacity = capacity
        self.clock = clock
        #: YuniKorn's ``InstanceUUID``: a new one each time the service starts
        self.instance_uuid = str(uuid.uuid4())
        self._records: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._next_id = 0
        #: journalled events not yet turned into records: the conversion waits for a reader (it costs
        #: more than the decision that made the event), bounded by the ring's capacity
        self._raw: list[tuple[str, Sequence[Event], float]] = []
        self._lock = threading.Lock()
        self._streams: list[RecordStream] = []
        #: the loops with a wake-up scheduled (one per loop turn, however many records came)
        self._waking: set[asyncio.AbstractEventLoop] = set()

    def listener(self, partition: str) -> EventListener:
        """The listener to give partition ``partition`` (``Partition.listen``)."""
        def listen(events: Sequence[Event], t: float) -> None:
            self.recorded(partition, events, t)
        return listen

    def recorded(self, partition: str, events: Sequence[Event], t: float) -> None:
        """``events`` of ``partition`` were journalled at ``t``: keep them (the streams are woken;
        they turn them into records when they read)."""
        with self._lock:
            self._raw.append((partition, events, t))
            if len(self._raw) >= self.capacity:
                self._expand()
            if not self._streams:
                return
            loops = {s._loop for s in self._streams} - self._waking
            self._waking |= loops
        self._schedule_wake(loops)

    def notice(self, notice: Mapping[str, Any]) -> None:
        """Record one notice (a ``Partition.subscribe`` callback), at its arrival time."""
        records = record_of(notice, self.clock())
        with self._lock:
            self._expand()
            self._records.extend(records)
            self._next_id += len(records)
            loops = {s._loop for s in self._streams} - self._waking
            self._waking |= loops
        self._schedule_wake(loops)

    def _schedule_wake(self, loops: set[asyncio.AbstractEventLoop]) -> None:
        for loop in loops:
            try:
                loop.call_soon_threadsafe(self._wake, loop)
            except RuntimeError:        # the loop is closed: its streams are gone
                with self._lock:
                    self._waking.discard(loop)
                    self._streams = [s for s in self._streams if s._loop is not loop]

    def _wake(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            self._waking.discard(loop)
            streams = [s for s in self._streams if s._loop is loop]
        for s in streams:
            s.wake()

    def _expand(self) -> list[dict[str, Any]]:
        """Turn the waiting notices into numbered records (lock held); the new records."""
        out: list[dict[str, Any]] = []
        for partition, events, t in self._raw:
            for ev in events:
                notice = notice_of(ev, partition, 0, _no_queue)
                if notice is not None:
                    out.extend(record_of(notice, t))
        self._raw = []
        self._records.extend(out)
        self._next_id += len(out)
        return out

    @property
    def lowest_id(self) -> int:
        """The id of the oldest record kept."""
        return self._next_id - len(self._records)

    @property
    def highest_id(self) -> int:
        """The id of the newest record (0 before the first, as YuniKorn's ``getLastEventID``)."""
        return max(self._next_id - 1, 0)

    def batch(self, start: int, count: int) -> tuple[list[dict[str, Any]] | None, int, int]:
        """Records with id ``start`` on, at most ``count``; None when ``start`` is not kept."""
        with self._lock:
            self._expand()
            lowest, highest = self.lowest_id, self.highest_id
            if start < lowest or start >= self._next_id:
                return None, lowest, highest
            first = start - lowest
            count = min(count, self.capacity)
            out = list(itertools.islice(self._records, first, min(first + count, len(self._records))))
            return out, lowest, highest

    def open_stream(self, replay: int = 0, buffer: int = DEFAULT_STREAM_BUFFER) -> RecordStream:
        """A stream of every record from now on, after the last ``replay`` records kept (YuniKorn's
        ``count``: ``GetRecentEvents``). Call it on the stream's event loop."""
        with self._lock:
            self._expand()
            start = max(self.lowest_id, self._next_id - replay)
            # the replayed records do not count against the buffer
            stream = RecordStream(self, start, buffer + (self._next_id - start))
            self._streams.append(stream)
        return stream

    def read_from(self, stream: RecordStream, most: int) -> list[dict[str, Any]] | None:
        """The next records of ``stream`` (at most ``most``; advancing it), or None when it is
        dropped: it fell more than its buffer behind, or out of the ring."""
        with self._lock:
            if stream.dropped:
                return None
            self._expand()
            behind = self._next_id - stream.next_id
            if behind > stream.buffer or stream.next_id < self.lowest_id:
                stream.dropped = True
                self._streams = [s for s in self._streams if s is not stream]
                return None
            # the newest ``behind`` records, read from the right end (a stream reads near the head)
            out = list(itertools.islice(reversed(self._records), behind))
            out.reverse()
            del out[most:]
            stream.next_id += len(out)
            return out

    def close_stream(self, stream: RecordStream) -> None:
        """Stop waking ``stream``."""
        with self._lock:
            self._streams = [s for s in self._streams if s is not stream]

    @property
    def stream_count(self) -> int:
        """How many streams are open."""
        return len(self._streams)
