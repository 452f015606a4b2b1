"""What subscribers and the REST event stream are told: one *notice* per journalled event.

Every change of a partition is a journalled event with a sequence number (:mod:`quotaplane.events`);
its notice is a pure function of the event (:func:`notice_of`), so the live stream and a stream
resumed from the journal after a restart (:func:`notices_after`) say exactly the same, with the same
``seq``. A change that another event made (an application's state, an allocation a timeout released)
is journalled as a :class:`~quotaplane.events.Noted` event of its own, right after the event that made
it, so it gets its own sequence number too. Events that tell nobody anything (``timeouts``, snapshot
rebuild events) have no notice: sequence numbers of notices have gaps, never repeats.

Notice types: ``allocated``, ``released``, ``preempted`` (``allocations`` taken away, the ``reason``
``{policy, code, path, message}``, and the ``preemptor`` allocation key when there is one),
``ask_added``, ``ask_removed``, ``application`` (``state``), ``application_removed``,
``config_applied``, ``node_added``, ``node_updated``, ``node_removed`` (the allocations a node's
removal released follow as ``released`` notices), ``bound`` (an allocation's node became known),
``budget_warning`` (a budget's consumption reached a threshold; docs/budgets.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import quotaplane.events as E

__all__ = ["NOTICE_TYPES", "EventListener", "Notifier", "Observer", "Subscriber", "notice_of",
           "notices_after"]

#: every notice type, as the stream's ``types`` filter and ``quotaplane events --types`` take them
NOTICE_TYPES = ("allocated", "released", "preempted", "ask_added", "ask_removed", "application",
                "application_removed", "config_applied", "node_added", "node_updated", "node_removed",
                "bound", "budget_warning")

Subscriber = Callable[[dict[str, Any]], None]
#: a listener to the journalled events themselves: ``(events, time)``, to turn into notices later
EventListener = Callable[[Sequence[E.Event], float], None]
#: an observer of the write path: the events of one commit once durable, and the last one's sequence number
Observer = Callable[[Sequence[E.Event], int], None]
#: the queue of an application (``""`` when it is not known)
QueueOf = Callable[[str], str]


def notice_of(ev: E.Event, partition: str, seq: int, queue_of: QueueOf) -> dict[str, Any] | None:
    """The notice of ``ev`` journalled under ``seq``, or None when it tells nothing."""
    body = _body(ev, queue_of)
    if body is None:
        return None
    return {"type": body.pop("type"), "partition": partition, "seq": seq, **body}


def _body(ev: E.Event, queue_of: QueueOf) -> dict[str, Any] | None:
    told = _TOLD.get(type(ev))
    return None if told is None else told(ev, queue_of)


def _allocated(ev: E.Allocated, queue_of: QueueOf) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "allocated", "applicationID": ev.app, "allocationKey": ev.key,
                           "queueName": queue_of(ev.app), "resource": ev.resource.to_dict()}
    if ev.placeholder:
        out["placeholder"] = True
    if ev.node is not None:
        out["nodeID"] = ev.node
    return out


def _released(ev: E.Released, queue_of: QueueOf) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "released", "allocationKey": ev.key}
    if ev.app is not None:
        out["applicationID"] = ev.app
    return out


def _preempted(ev: E.Preempted, queue_of: QueueOf) -> dict[str, Any]:
    allocations = [{"allocationKey": k, "applicationID": a} for k, a in zip(ev.keys, ev.apps, strict=True)]
    out: dict[str, Any] = {"type": "preempted", "allocations": allocations, "reason": dict(ev.reason)}
    if ev.preemptor is not None:
        out["preemptor"] = ev.preemptor
    return out


def _node_added(ev: E.NodeAdded, queue_of: QueueOf) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "node_added", "nodeID": ev.node, "capacity": ev.capacity.to_dict()}
    if ev.schedulable is False:
        out["schedulable"] = False
    return out


#: the notice body of each event class that tells something (the others have no notice)
_TOLD: dict[type[E.Event], Callable[[Any, QueueOf], dict[str, Any]]] = {
    E.Allocated: _allocated,
    E.Replaced: lambda ev, q: {"type": "allocated", "allocationKey": ev.key,
                               "placeholderKey": ev.placeholder, "resource": ev.resource.to_dict()},
    E.Released: _released,
    E.Preempted: _preempted,
    E.AskAdded: lambda ev, q: {"type": "ask_added", "applicationID": ev.app, "allocationKey": ev.key,
                               "resource": ev.resource.to_dict(), "priority": ev.priority},
    E.AskRemoved: lambda ev, q: {"type": "ask_removed", "allocationKey": ev.key},
    E.AppAdded: lambda ev, q: {"type": "application", "applicationID": ev.app, "queueName": ev.queue,
                               "state": "New"},
    E.AppRemoved: lambda ev, q: {"type": "application_removed", "applicationID": ev.app},
    E.ConfigApplied: lambda ev, q: {"type": "config_applied", "configSeq": ev.seq},
    E.NodeAdded: _node_added,
    E.NodeUpdated: lambda ev, q: {"type": "node_updated", "nodeID": ev.node,
                                  "capacity": ev.capacity.to_dict(), "schedulable": ev.schedulable},
    E.NodeRemoved: lambda ev, q: {"type": "node_removed", "nodeID": ev.node},
    E.Bound: lambda ev, q: {"type": "bound", "allocationKey": ev.key, "nodeID": ev.node},
    E.Noted: lambda ev, q: dict(ev.notice),
}


def notices_after(events: Iterator[tuple[int, dict[str, Any]]], partition: str,
                  queue_of: QueueOf) -> Iterator[dict[str, Any]]:
    """The notices of journalled ``(seq, event JSON)`` pairs (a stream resumed from the journal)."""
    for seq, data in events:
        try:
            ev = E.decode(data)
        except E.EventFormatError:
            continue                      # replay refuses such a journal; the stream just skips it
        notice = notice_of(ev, partition, seq, queue_of)
        if notice is not None:
            yield notice


class Notifier:
    """The subscribers of one partition, told of every event once it is journalled."""

    __slots__ = ("clock", "listeners", "observers", "partition", "queue_of", "subscribers")

    def __init__(self, partition: str, queue_of: QueueOf, clock: Callable[[], float] | None = None) -> None:
        self.partition = partition
        self.queue_of = queue_of
        self.subscribers: list[Subscriber] = []
        #: listeners to the events as journalled (cheaper than notices: nothing is built for them)
        self.listeners: list[EventListener] = []
        #: observers of the write path (``observer(events, last_seq)``,
        #: :class:`~quotaplane.partition.txn.WriteHooks`)
        self.observers: list[Observer] = []
        self.clock = clock

    def subscribe(self, callback: Subscriber) -> None:
        """Add a subscriber."""
        self.subscribers.append(callback)

    def unsubscribe(self, callback: Subscriber) -> None:
        """Remove a subscriber (no error when it is gone already)."""
        if callback in self.subscribers:
            self.subscribers.remove(callback)

    def recorded(self, events: Sequence[E.Event], last_seq: int) -> None:
        """``events`` were journalled, the last one under ``last_seq``: tell every subscriber."""
        # each kind is told only when it has someone to tell: this runs at every commit
        if self.listeners:
            self._tell_listeners(events)
        if self.observers:
            self._tell_observers(events, last_seq)
        if self.subscribers:
            self._tell_subscribers(events, last_seq)

    def _tell_listeners(self, events: Sequence[E.Event]) -> None:
        t = self.clock() if self.clock is not None else 0.0
        frozen = tuple(events)
        for listener in list(self.listeners):
            try:
                listener(frozen, t)
            except Exception:  # a broken listener must not break the partition
                self.listeners.remove(listener)

    def _tell_observers(self, events: Sequence[E.Event], last_seq: int) -> None:
        for observer in list(self.observers):
            try:
                observer(events, last_seq)
            except Exception:  # a broken observer must not break the partition
                self.observers.remove(observer)

    def _tell_subscribers(self, events: Sequence[E.Event], last_seq: int) -> None:
        first = last_seq - len(events) + 1
        for i, ev in enumerate(events):
            notice = notice_of(ev, self.partition, first + i, self.queue_of)
            if notice is None:
                continue
            for cb in list(self.subscribers):
                try:
                    cb(dict(notice))
                except Exception:  # a broken subscriber must not break the partition
                    self.unsubscribe(cb)
