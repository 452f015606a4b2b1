"""YuniKorn's event system as its REST API shows it: ``/ws/v1/events/batch`` and ``/events/stream``.

Every partition's notices (:mod:`quotaplane.notices`) become ``si.EventRecord`` objects — encoded as
YuniKorn's webservice encodes them (Go's ``encoding/json`` of the protobuf struct: enums as numbers,
empty fields omitted, ``resource`` as ``{"resources": {name: {"value": n}}}``) — numbered from 0 in one
sequence for the whole service, and kept in a ring buffer of ``capacity`` records (YuniKorn's default
100,000). A batch answers the records from an id on (``GetEventsFromID``); a stream first sends the
``{"InstanceUUID"}`` line, then each new record as a JSON line.

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
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from quotaplane.events import Event
from quotaplane.notices import EventListener, notice_of

__all__ = ["DEFAULT_CAPACITY", "EventRecords", "record_of"]

#: YuniKorn's ``DefaultEventRingBufferCapacity``
DEFAULT_CAPACITY = 100_000

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


def _offer(queue: asyncio.Queue[dict[str, Any]], record: dict[str, Any]) -> None:
    # a reader that falls 10,000 records behind loses the newest ones (it can fetch them in a batch)
    if not queue.full():
        queue.put_nowait(record)


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
        self._streams: list[tuple[asyncio.AbstractEventLoop, asyncio.Queue[dict[str, Any]]]] = []

    def listener(self, partition: str) -> EventListener:
        """The listener to give partition ``partition`` (``Partition.listen``)."""
        def listen(events: Sequence[Event], t: float) -> None:
            self.recorded(partition, events, t)
        return listen

    def recorded(self, partition: str, events: Sequence[Event], t: float) -> None:
        """``events`` of ``partition`` were journalled at ``t``: keep them (records at once when a
        stream listens)."""
        with self._lock:
            self._raw.append((partition, events, t))
            if not self._streams and len(self._raw) < self.capacity:
                return
            records = self._expand()
            streams = list(self._streams)
        self._push(records, streams)

    def notice(self, notice: Mapping[str, Any]) -> None:
        """Record one notice (a ``Partition.subscribe`` callback), at its arrival time."""
        records = record_of(notice, self.clock())
        with self._lock:
            self._expand()
            self._records.extend(records)
            self._next_id += len(records)
            streams = list(self._streams)
        self._push(records, streams)

    def _push(self, records: list[dict[str, Any]],
              streams: list[tuple[asyncio.AbstractEventLoop, asyncio.Queue[dict[str, Any]]]]) -> None:
        for loop, queue in streams:
            for r in records:
                try:
                    loop.call_soon_threadsafe(_offer, queue, r)
                except RuntimeError:        # the stream's loop is closed: it is gone
                    self.close_stream(queue)

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
            out = [self._records[i] for i in range(first, min(first + count, len(self._records)))]
            return out, lowest, highest

    def open_stream(self) -> asyncio.Queue[dict[str, Any]]:
        """A queue that receives every record from now on (call from the stream's event loop)."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=10_000)
        with self._lock:
            self._expand()                  # what came before belongs to the batch, not the stream
            self._streams.append((asyncio.get_running_loop(), queue))
        return queue

    def close_stream(self, queue: asyncio.Queue[dict[str, Any]]) -> None:
        """Stop feeding ``queue``."""
        with self._lock:
            self._streams = [(lp, q) for lp, q in self._streams if q is not queue]

    @property
    def stream_count(self) -> int:
        """How many streams are open."""
        return len(self._streams)
