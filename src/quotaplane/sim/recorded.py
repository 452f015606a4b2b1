"""The recorded workload: what a partition's journal says happened, as a workload to replay.

A store (``sqlite:///…`` or ``postgresql://…``) written by ``quotaplane serve`` holds every change of
every partition with its time (rule S1): applications placed, asks queued, allocations admitted,
released and preempted, nodes, and which configuration was in force. :func:`load_recorded` reads it
through the journal's reading API and gives

- the **workload** of a window ``[since, until]``: applications at their times, allocation requests
  and asks at their times, releases at their real durations after the start (so a proposed
  configuration that makes work wait also makes it end later), asks withdrawn at their times, and
  applications finishing once their work is done;
- the **configuration in force** at ``since`` (replaying under it must reproduce what happened);
- the **recorded decisions** and the **recorded measures** (the same :class:`~.metrics.Recorder` the
  replay uses, fed from the journal), to compare a replay with;
- **caveats**: what cannot be reproduced, and why.

The state at ``since`` (nodes, applications, running allocations, waiting asks) is offered to the
replay at ``since``, in the order it was recorded. What the journal cannot say:

- refused requests leave no event (nothing changed), so they are not part of the workload: a
  generous proposal cannot admit what was refused, and recorded refusals read as unknown;
- work still running at ``until`` (or at the end of the journal) has no known duration: the replay
  keeps it running, so what waits behind it after ``until`` is not measured;
- a request that waited past ``until`` never ran when recorded: if a proposal admits it, how long
  it would have run is unknown (it runs on);
- when early events were compacted into a snapshot, the history starts at the snapshot: its state is
  known (applications, running allocations with their start times, waiting asks), what happened
  before it is not, and a ``since`` before it starts at the snapshot instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from quotaplane import errors
from quotaplane.resources import Resource
from quotaplane.sim.metrics import AppCells, Recorder
from quotaplane.sim.trace import TraceEvent

__all__ = ["Recorded", "RecordedError", "load_recorded", "parse_when", "read_history"]

SCHEDULER_STREAM = "scheduler"
#: An outcome of a scheduling cycle (an ask allocated, a preemption for one) this soon after the last
#: change is taken at that change's time: the service runs the cycle right after the change and reads
#: its clock once per allocation, so the allocations of one cycle carry times microseconds to
#: milliseconds apart, where the replay's cycle runs at one instant. Just under the service's
#: scheduling timer (0.5 s): an outcome later than that was the timer's own cycle (a preemption delay
#: that ran out, a retry), kept at its own time — the recorded waits stay what they were.
CYCLE_SNAP = 0.45
#: A direct allocation that preempted others is journalled right after the preemption, each with its
#: own clock reading; the preemption is taken at the allocation's time when they are this close.
PREEMPTION_SNAP = 0.25


class RecordedError(errors.InputError):
    """The store cannot give a workload (unreachable, empty, no such partition, a window with nothing)."""


def parse_when(text: str, what: str) -> float:
    """A time given on the command line: seconds since the epoch, or ISO 8601 (UTC when no zone).

    Raises :class:`RecordedError` naming ``what`` (e.g. ``--since``) when it is neither.
    """
    s = text.strip()
    try:
        value = float(s)
    except ValueError:
        try:
            when = datetime.fromisoformat(s.replace("Z", "+00:00"))
        except ValueError:
            raise RecordedError(f"{what}: {text!r} is neither seconds since the epoch nor an ISO 8601 "
                                "time (e.g. 2026-11-01T00:00:00Z)") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    if not math.isfinite(value):
        raise RecordedError(f"{what}: {text!r} is not a finite number of seconds")
    return value


#: events that record a change a caller made (the others are what a cycle or a rule made of it)
_INPUTS = frozenset({"config", "node_added", "node_updated", "node_removed", "app_added", "app_removed",
                     "ask_added", "ask_removed", "allocated", "released", "replaced", "timeouts"})


@dataclass(slots=True)
class _App:
    app: str
    user: str
    groups: tuple[str, ...]
    queue: str
    tags: dict[str, str]
    added: float
    added_seq: int
    removed: float | None = None
    removed_seq: int = 0


@dataclass(slots=True)
class _Request:
    uid: str                    # the key, made unique when the journal reuses one
    key: str
    app: str
    resource: Resource
    priority: int = 0
    preemptible: bool = True
    placeholder: bool = False
    asked: float | None = None  # an ask: when it was queued
    asked_seq: int = 0
    start: float | None = None  # when it was allocated
    start_seq: int = 0
    end: float | None = None    # when it ended (released, preempted, withdrawn, its app removed)
    end_seq: int = 0
    how: str = ""               # released | preempted | withdrawn
    reason: str = ""            # the preemption's code
    preemptor: str = ""         # the key it was preempted for


@dataclass(slots=True)
class _Node:
    t: float
    seq: int
    op: str                     # node | remove_node
    node: str
    capacity: Resource | None = None


@dataclass
class History:
    """Everything read from one partition's stream (:func:`read_history`)."""

    partition: str
    configs: dict[int, str]                       # scheduler seq -> config text
    config_marks: list[tuple[float, int, int]]    # (t, journal seq, scheduler seq) in stream order
    apps: dict[str, _App] = field(default_factory=dict)
    requests: list[_Request] = field(default_factory=list)
    nodes: list[_Node] = field(default_factory=list)
    first: float = 0.0
    last: float = 0.0
    snapshot_seq: int = 0                         # > 0: events up to it were compacted
    snapshot_t: float | None = None
    events: int = 0
    timeouts: list[float] = field(default_factory=list)
    placeholders: int = 0
    reused_keys: int = 0
    clamped: int = 0                              # events whose time went back (kept in order)


class _Reader:
    """Folds a partition stream (and a snapshot's rebuild list) into requests with start and end."""

    def __init__(self, h: History) -> None:
        self.h = h
        self.clock: float | None = None
        self.open: dict[str, _Request] = {}        # key -> the request it names now
        self.used: dict[str, int] = {}
        self.pending_nodes: list[_Node] = []       # node events before the first timed event
        self.last_input: float | None = None       # the time of the last change a caller made

    def time(self, t: Any) -> float:
        if isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t):
            tf = float(t)
            if self.clock is not None and tf < self.clock:
                self.h.clamped += 1
                tf = self.clock          # wall clocks step back; the stream's order is the truth
            if self.clock is None:
                for n in self.pending_nodes:
                    n.t = tf
                self.pending_nodes.clear()
                self.h.first = tf
            self.clock = tf
            self.h.last = tf
        return self.clock if self.clock is not None else 0.0

    def request(self, key: str, app: str, res: Any, ev: Mapping[str, Any]) -> _Request:
        n = self.used.get(key, 0)
        self.used[key] = n + 1
        if n:
            self.h.reused_keys += 1
        req = _Request(uid=key if not n else f"{key}#{n + 1}", key=key, app=app,
                       resource=Resource.of(dict(res)), priority=int(ev.get("priority", 0) or 0),
                       preemptible=bool(ev.get("preemptible", True)), placeholder=bool(ev.get("placeholder")))
        self.h.requests.append(req)
        self.open[key] = req
        return req

    def end(self, key: str, t: float, seq: int, how: str, reason: str = "", preemptor: str = "") -> None:
        req = self.open.pop(key, None)
        if req is None:
            return
        req.end, req.end_seq, req.how, req.reason, req.preemptor = t, seq, how, reason, preemptor

    def cycle_time(self, t: float) -> float:
        """The time of an outcome of a scheduling cycle: the last change's, when within
        :data:`CYCLE_SNAP` of it (nothing else changed the partition in between: every change is
        journalled)."""
        last = self.last_input
        return last if last is not None and 0 <= t - last <= CYCLE_SNAP else t

    def read(self, seq: int, ev: Any) -> None:
        """Fold one journalled event; :class:`RecordedError` naming it when it is not one."""
        try:
            if not isinstance(ev, Mapping):
                raise TypeError(f"expected an object, got {type(ev).__name__}")
            self.apply(seq, ev)
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordedError(f"partition {self.h.partition!r}, event #{seq}: cannot read it "
                                f"({type(exc).__name__}: {exc})") from None

    def apply(self, seq: int, ev: Mapping[str, Any]) -> None:
        """Fold one journalled event (a mapping with the fields its type needs)."""
        h = self.h
        h.events += 1
        kind = ev.get("type")
        t = self.time(ev.get("t"))
        pending = self.open.get(ev["key"]) if kind == "allocated" and isinstance(ev.get("key"), str) else None
        made_by_cycle = (kind == "allocated" and pending is not None and pending.start is None) or (
            kind == "preempted" and isinstance(ev.get("preemptor"), str)
            and (p := self.open.get(ev["preemptor"])) is not None and p.start is None)
        if made_by_cycle:
            t = self.cycle_time(t)
        elif kind in _INPUTS and ev.get("t") is not None:
            self.last_input = t
        if kind == "config":
            h.config_marks.append((t, seq, int(ev["seq"])))
        elif kind in ("node_added", "node_updated", "node_removed"):
            schedulable = ev.get("schedulable")
            op = "remove_node" if kind == "node_removed" or schedulable is False else "node"
            cap = Resource.of(dict(ev["capacity"])) if op == "node" else None
            node = _Node(t, seq, op, str(ev["node"]), cap)
            h.nodes.append(node)
            if self.clock is None:
                self.pending_nodes.append(node)
        elif kind == "app_added":
            h.apps[ev["app"]] = _App(ev["app"], ev["user"], tuple(ev.get("groups") or ()), ev["queue"],
                                     dict(ev.get("tags") or {}), t, seq)
        elif kind == "app_removed":
            app = h.apps.get(ev["app"])
            if app is not None:
                app.removed, app.removed_seq = t, seq
            for key in [k for k, r in self.open.items() if r.app == ev["app"]]:
                r = self.open[key]
                self.end(key, t, seq, "released" if r.start is not None else "withdrawn")
        elif kind == "ask_added":
            req = self.request(ev["key"], ev["app"], ev["resource"], ev)
            req.asked, req.asked_seq = t, seq
        elif kind == "allocated":
            found = self.open.get(ev["key"])
            req = found if found is not None and found.start is None else \
                self.request(ev["key"], ev["app"], ev["resource"], ev)
            req.start, req.start_seq = t, seq
            h.placeholders += req.placeholder
        elif kind == "replaced":
            holder = self.open.get(ev["placeholder"])
            self.end(ev["placeholder"], t, seq, "released")
            req = self.request(ev["key"], holder.app if holder is not None else "", ev["resource"], ev)
            req.start, req.start_seq = t, seq
        elif kind == "released":
            self.end(ev["key"], t, seq, "released")
        elif kind == "ask_removed":
            self.end(ev["key"], t, seq, "withdrawn")
        elif kind == "preempted":
            code = str((ev.get("reason") or {}).get("code", "preempted"))
            for key in ev.get("keys") or ():
                self.end(key, t, seq, "preempted", code, str(ev.get("preemptor") or ""))
        elif kind == "noted":
            notice = ev.get("notice") or {}
            if notice.get("type") == "released" and isinstance(notice.get("allocationKey"), str):
                self.end(notice["allocationKey"], t, seq, "released")
        elif kind == "timeouts":
            h.timeouts.append(t)


def _open(url: str) -> Any:
    from quotaplane.journal import JournalError, open_journal, parse_store_url

    try:
        parsed = parse_store_url(url)
    except ValueError as exc:
        raise RecordedError(str(exc)) from None
    if parsed.kind == "memory":
        raise RecordedError(f"--from-store {url!r}: a memory store keeps no history; give sqlite:///… "
                            "or postgresql://…")
    if parsed.kind == "sqlite":
        path = Path(parsed.path)
        if not path.exists():
            raise RecordedError(f"--from-store {url!r}: no such SQLite store ({path})")
    try:
        return open_journal(url)
    except JournalError as exc:
        raise RecordedError(f"--from-store: {exc}") from None


def read_history(journal: Any, partition: str = "default") -> History:
    """Read the configurations and one partition's stream from an open journal."""
    from quotaplane.journal import JournalCompactedError

    configs: dict[int, str] = {}
    for seq, ev in journal.read(SCHEDULER_STREAM):
        if ev.get("type") == "config" and isinstance(ev.get("text"), str):
            configs[seq] = ev["text"]
    stream = "partition:scheduler" if partition == SCHEDULER_STREAM else partition
    streams = [s for s in journal.streams() if s != SCHEDULER_STREAM]
    if stream not in streams:
        found = ", ".join(repr(s) for s in streams) or "none"
        raise RecordedError(f"the store holds no history of partition {partition!r} (partitions: {found})")
    h = History(partition, configs, [])
    reader = _Reader(h)
    events: Iterator[tuple[int, dict[str, Any]]]
    try:
        events = iter(journal.read(stream))
        first = next(events, None)
        if first is not None:
            reader.read(*first)
    except JournalCompactedError:
        snap = journal.load_snapshot(stream)
        if snap is None:
            raise RecordedError(f"partition {partition!r}: early events were compacted and no snapshot "
                                "holds the state they led to") from None
        seq, state = snap
        h.snapshot_seq = seq
        rebuild = list(state.get("rebuild") or [])
        # the snapshot's instant is not stored: the last time its state names bounds it from below
        h.snapshot_t = max(_times(rebuild), default=None)
        # rebuild lists are grouped by kind (applications, then allocations): apply them in time order
        order = sorted(range(len(rebuild)), key=lambda i: (float(rebuild[i].get("t", -math.inf))
                                                          if isinstance(rebuild[i].get("t"), int | float)
                                                          else -math.inf, i))
        for i in order:
            reader.read(seq, rebuild[i])
        events = iter(journal.read(stream, after=seq))
    for seq, ev in events:
        reader.read(seq, ev)
    _preemptions_at_their_allocation(h)
    if h.events == 0:
        raise RecordedError(f"partition {partition!r}: the store holds no events")
    return h


def _preemptions_at_their_allocation(h: History) -> None:
    """A direct allocation that preempted others is journalled after the preemption, each with its own
    clock reading: the preemption happened for that allocation, at its time (the replay decides
    both at one instant)."""
    starts: dict[str, list[_Request]] = {}
    for r in h.requests:
        if r.start is not None:
            starts.setdefault(r.key, []).append(r)
    for r in h.requests:
        if r.how != "preempted" or not r.preemptor or r.end is None:
            continue
        start = _preemptor_start(r, starts.get(r.preemptor, ()))
        if start is not None:
            r.end = start


def _preemptor_start(r: _Request, candidates: Iterable[_Request]) -> float | None:
    """When the direct allocation that preempted ``r`` started, if it was journalled just after ``r``'s
    end (within :data:`PREEMPTION_SNAP`)."""
    assert r.end is not None
    for p in candidates:
        if p.asked is None and p.start is not None and p.start_seq >= r.end_seq and \
                0 <= p.start - r.end <= PREEMPTION_SNAP:
            return p.start
    return None


def _times(rebuild: Iterable[Mapping[str, Any]]) -> Iterator[float]:
    """Every time a snapshot's rebuild list names (event times, application state changes)."""
    for e in rebuild:
        for k in ("t", "state_since", "started", "placeholder_since"):
            v = e.get(k)
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                yield float(v)
        yield from _state_log_times(e.get("state_log") or ())


def _state_log_times(log: Iterable[Any]) -> Iterator[float]:
    """The times of an application's state log entries (``[t, state]`` pairs)."""
    for entry in log:
        if isinstance(entry, list | tuple) and entry and isinstance(entry[0], int | float):
            yield float(entry[0])


@dataclass
class Recorded:
    """A window of a recorded history, ready to replay and to compare with (:func:`load_recorded`)."""

    url: str
    partition: str
    since: float
    until: float
    config_text: str
    events: list[TraceEvent]
    decisions: list[tuple[float, str, str, str]]
    metrics: dict[str, Any]
    samples: list[dict[str, Any]]
    caveats: list[str]
    counts: dict[str, int]

    def window(self) -> tuple[float, float]:
        """``(since, until)``."""
        return self.since, self.until


def _config_at(h: History, since: float) -> tuple[str, list[float]]:
    """The config text in force at ``since`` and the times of later changes up to the end."""
    if not h.configs:
        raise RecordedError("the store holds no configuration")
    in_force: int | None = None
    changes: list[float] = []
    for t, _, sched_seq in h.config_marks:
        if t <= since or in_force is None:
            in_force = sched_seq
        else:
            changes.append(t)
    if in_force is None or in_force not in h.configs:
        in_force = max(h.configs)
    return h.configs[in_force], changes


def load_recorded(url: str, *, partition: str = "default", since: float | None = None,
                  until: float | None = None, sample_interval: float | None = None) -> Recorded:
    """Read the store at ``url`` and build the workload, decisions and measures of ``[since, until]``.

    ``since``/``until`` default to the first and last recorded times. Raises :class:`RecordedError`
    with one line saying what is wrong (no such store, partition, or an empty window).
    """
    journal = _open(url)
    try:
        h = read_history(journal, partition)
    finally:
        journal.close()
    return window_of(h, url, since=since, until=until, sample_interval=sample_interval)


def window_of(h: History, url: str, *, since: float | None, until: float | None,
              sample_interval: float | None = None) -> Recorded:
    """The :class:`Recorded` of ``[since, until]`` of a history (see :func:`load_recorded`)."""
    caveats: list[str] = []
    start = h.first if h.snapshot_t is None else h.snapshot_t
    if since is None:
        since = start
    elif since < start:
        if h.snapshot_seq:
            caveats.append(f"events up to seq {h.snapshot_seq} were compacted into a snapshot: the history "
                           f"starts at its state (t={start:.3f}), not at --since (t={since:.3f}); what "
                           "happened before it cannot be replayed")
        since = start
    if until is None:
        until = h.last
    if until < since:
        raise RecordedError(f"the window is empty: --until (t={until:.3f}) is before the start "
                            f"(t={since:.3f})")
    text, changes = _config_at(h, since)
    changes = [t for t in changes if t <= until]
    if changes:
        caveats.append(f"the configuration changed {len(changes)} time(s) in the window (first at "
                       f"t={changes[0]:.3f}); the replay uses the one in force at the start throughout")
    events, decisions, counts = _workload(h, since, until)
    if counts["unknown_duration"]:
        caveats.append(f"{counts['unknown_duration']} allocation(s) still ran at the end of the window: "
                       "their duration is unknown, so the replay keeps them running (waits behind them after "
                       "--until are not measured)")
    if counts["never_ran"]:
        caveats.append(f"{counts['never_ran']} ask(s) still waited at the end of the window: they never "
                       "ran, so if a proposal admits them their duration is unknown (they run on)")
    if counts["preempted"]:
        caveats.append(f"{counts['preempted']} allocation(s) were preempted: each is replayed with the time "
                       "it ran; how long it would have needed had it not been preempted is unknown")
    timeouts = [t for t in h.timeouts if since <= t <= until]
    if timeouts:
        caveats.append(f"{len(timeouts)} timeout event(s) (placeholders, application states, elastic "
                       "reclaim) in the window: the simulator does not model them")
    if h.placeholders:
        caveats.append(f"{h.placeholders} gang placeholder(s): replayed as plain allocations")
    if h.reused_keys:
        caveats.append(f"{h.reused_keys} allocation key(s) were used again after they ended: later uses are "
                       "replayed as '<key>#N'")
    if h.clamped:
        caveats.append(f"{h.clamped} event time(s) went back (the service's wall clock stepped): kept in "
                       "journal order at the previous time")
    caveats.append("refused requests leave no journal event: recorded refusals are unknown, and a proposal "
                   "cannot admit what was refused")
    metrics, samples = _measure(h, text, since, until, sample_interval)
    counts["journal_events"] = h.events
    return Recorded(url, h.partition, since, until, text, events, decisions, metrics, samples, caveats,
                    counts)


def _trace_event(t: float, op: str, seq: int) -> TraceEvent:
    return TraceEvent(t, op, seq)


def _workload(h: History, since: float, until: float
              ) -> tuple[list[TraceEvent], list[tuple[float, str, str, str]], dict[str, int]]:
    """The trace events of the window, in (time, journal order), and the recorded decisions."""
    timed: list[tuple[float, int, int, TraceEvent]] = []    # (t, seq, tie-break, event)
    decisions: list[tuple[float, str, str, str]] = []
    counts = {"unknown_duration": 0, "never_ran": 0, "preempted": 0, "requests": 0, "applications": 0}
    order = 0

    def put(t: float, seq: int, ev: TraceEvent) -> None:
        nonlocal order
        order += 1
        timed.append((t, seq, order, ev))

    # nodes: the state at since first, then the changes in the window
    state: dict[str, Resource] = {}
    for n in h.nodes:
        if n.t < since:
            if n.op == "node" and n.capacity is not None:
                state[n.node] = n.capacity
            else:
                state.pop(n.node, None)
    for name in state:
        ev = _trace_event(since, "node", -4)
        ev.node, ev.capacity = name, state[name]
        put(since, -4, ev)
    present = set(state)
    for n in h.nodes:
        if since <= n.t <= until:
            if n.op == "node":
                if n.node in present:     # a capacity change: the node goes and comes back at once
                    gone = _trace_event(n.t, "remove_node", n.seq)
                    gone.node = n.node
                    put(n.t, n.seq, gone)
                ev = _trace_event(n.t, "node", n.seq)
                ev.node, ev.capacity = n.node, n.capacity
                present.add(n.node)
                put(n.t, n.seq, ev)
            elif n.node in present:
                ev = _trace_event(n.t, "remove_node", n.seq)
                ev.node = n.node
                present.discard(n.node)
                put(n.t, n.seq, ev)
    # applications alive in the window
    live_apps: set[str] = set()
    for a in sorted(h.apps.values(), key=lambda a: a.added_seq):
        if a.added > until or (a.removed is not None and a.removed < since):
            continue
        at = max(a.added, since)
        ev = _trace_event(at, "submit", a.added_seq)
        ev.app, ev.user, ev.groups, ev.queue, ev.tags = a.app, a.user, a.groups, a.queue, a.tags or None
        put(at, a.added_seq if a.added >= since else -3, ev)
        decisions.append((at, "placed", a.app, a.queue))
        live_apps.add(a.app)
        counts["applications"] += 1
        if a.removed is not None and a.removed <= until:
            fin = _trace_event(a.removed, "finish", a.removed_seq)
            fin.app, fin.when_done = a.app, True
            put(a.removed, a.removed_seq, fin)
    # requests: allocations and asks
    for r in h.requests:
        if r.app not in live_apps:
            continue
        first = r.asked if r.asked is not None else r.start
        if first is None or first > until or (r.end is not None and r.end < since):
            continue
        if r.end is not None and r.end == since and r.start is not None and r.start < since:
            continue
        counts["requests"] += 1
        # running at since: started before it, or at it when the snapshot the history starts from holds it
        prior = r.start is not None and (r.start < since
                                         or (r.start == since and r.start_seq <= h.snapshot_seq))
        is_ask = r.asked is not None and not prior
        at = max(first, since)
        ev = _trace_event(at, "ask" if is_ask else "allocate", r.asked_seq if is_ask else r.start_seq)
        ev.app, ev.key, ev.resource = r.app, r.uid, r.resource
        ev.priority, ev.preemptible = r.priority, r.preemptible
        if is_ask and r.asked is not None and r.asked < since:
            ev.asked = r.asked
        ran = r.start is not None
        if r.start is not None and r.end is not None and r.end <= until:
            started = max(r.start, since)
            if r.end > started:
                ev.started, ev.end, ev.duration = started, r.end, r.end - started
            else:                         # it ended at the instant it began: no timer, a release
                rel = _trace_event(r.end, "release", r.end_seq)
                rel.key = r.uid
                put(r.end, r.end_seq, rel)
        elif ran and r.how != "withdrawn":
            counts["unknown_duration"] += 1
        elif not ran and r.end is None:
            counts["never_ran"] += 1
        # the state at since, in this order: nodes, applications, running allocations, waiting asks
        seq = (r.asked_seq if is_ask else r.start_seq) if first >= since and not prior else \
            (-1 if is_ask else -2)
        put(at, seq, ev)
        if is_ask:
            decisions.append((at, "asked", r.uid, ""))
        if ran and r.start is not None and r.start <= until:
            decisions.append((max(r.start, since), "allocated", r.uid, ""))
        if r.end is not None and r.end <= until:
            if r.how == "withdrawn":
                if ran:
                    decisions.append((r.end, "released", r.uid, ""))
                else:
                    rel = _trace_event(r.end, "release", r.end_seq)
                    rel.key = r.uid
                    put(r.end, r.end_seq, rel)
                    decisions.append((r.end, "withdrawn", r.uid, ""))
            elif r.how == "preempted":
                counts["preempted"] += 1
                decisions.append((r.end, "preempted", r.uid, r.reason))
            else:
                decisions.append((r.end, "released", r.uid, ""))
    timed.sort(key=lambda x: (x[0], x[1], x[2]))
    events = [ev for _, _, _, ev in timed]
    for i, ev in enumerate(events, start=1):
        ev.line = i
    decisions.sort()
    return events, decisions, counts


def _limits_of(config_text: str, partition: str) -> tuple[list[str], Any]:
    """The queue paths of a configuration and a ``limits(path)`` reading its guaranteed and max."""
    from quotaplane.config import load_config
    from quotaplane.partition import Partition

    p = Partition(load_config(config_text).partition(partition), journal=None)

    def walk(q: Any) -> Iterable[Any]:
        yield q
        for c in q.sorted_children():
            yield from walk(c)

    def limits(path: str) -> tuple[dict[str, int] | None, dict[str, int] | None]:
        q = p.queues.queue(path)
        if q is None:
            return None, None
        return (dict(q.guaranteed.items()) if q.guaranteed is not None else None,
                dict(q.max.items()) if q.max is not None and not q.is_root else None)

    return [q.path for q in walk(p.queues.root)], limits


def _measure(h: History, config_text: str, since: float, until: float, sample_interval: float | None
             ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The recorded measures of the window: the journal's changes fed to a :class:`Recorder`."""
    from quotaplane.sim.engine import DEFAULT_SAMPLES

    paths, limits = _limits_of(config_text, h.partition)
    rec = Recorder(paths, limits, since, until)
    changes: list[tuple[float, int, int, str, Any]] = []     # (t, seq, order, what, payload)
    n = 0

    def put(t: float, seq: int, what: str, payload: Any) -> None:
        nonlocal n
        n += 1
        changes.append((t, seq, n, what, payload))

    for node in h.nodes:
        put(node.t, node.seq, "node", node)
    cells: dict[str, AppCells] = {}
    for a in h.apps.values():
        put(a.added, a.added_seq, "app", a)
    for r in h.requests:
        if r.asked is not None:
            put(r.asked, r.asked_seq, "ask", r)
        if r.start is not None:
            put(r.start, r.start_seq, "start", r)
        if r.end is not None:
            put(r.end, r.end_seq, "end", r)
    changes.sort(key=lambda c: (c[0], c[1], c[2]))
    interval = sample_interval or ((until - since) / DEFAULT_SAMPLES if until > since else 1.0)
    samples: list[dict[str, Any]] = []
    next_sample = since
    k = 0
    nodes: dict[str, Resource] = {}
    for t, _, _, what, x in changes:
        if t > until:
            break
        while next_sample < t and next_sample <= until:
            if next_sample >= since:
                samples.append(rec.sample(next_sample))
            k += 1
            next_sample = since + k * interval
        if what == "node":
            if x.op == "node":
                nodes[x.node] = x.capacity
            else:
                nodes.pop(x.node, None)
            total: dict[str, int] = {}
            for cap in nodes.values():
                for name, v in cap.items():
                    total[name] = total.get(name, 0) + v
            rec.capacity(t, total)
        elif what == "app":
            cells[x.app] = rec.app(x.queue, x.user)
        elif x.app not in cells:
            continue
        elif what == "ask":
            rec.ask(t, x.uid, cells[x.app], tuple(x.resource.items()), x.asked if x.asked < since else None)
        elif what == "start":
            if rec.ask_allocated(t, x.uid) is None:
                rec.admit(t, x.uid, cells[x.app], tuple(x.resource.items()))
        elif x.how == "preempted":
            rec.preempt(t, [x.uid], x.reason)
        elif x.how == "withdrawn" and x.start is None:
            rec.withdraw(t, x.uid)
        else:
            rec.release(t, x.uid)
    rec.close(until)
    while next_sample <= until:
        samples.append(rec.sample(next_sample))
        k += 1
        next_sample = since + k * interval
    if not samples or samples[-1]["t"] < round(until, 6):
        samples.append(rec.sample(until))
    return rec.summary(), samples
