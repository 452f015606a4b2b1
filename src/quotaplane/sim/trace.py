"""Trace files for the simulator: parsing and whole-trace validation.

A trace is a list of timed events (docs/simulator.md). The JSON-lines form has one object per line::

    {"t": 0, "op": "node", "node": "n1", "capacity": {"vcore": 64, "memory": "256Gi"}}
    {"t": 5, "op": "submit", "app": "a1", "user": "alice", "groups": ["eng"], "queue": "root.eng"}
    {"t": 6, "op": "allocate", "app": "a1", "key": "a1-1", "resource": {"vcore": 4}, "duration": 60}

The CSV form has one row per event under a header naming the same fields (resources and tags as
``name=value;name=value``, groups as ``a;b``). Amounts use the units of the queue configuration
(:meth:`Resource.from_config`: ``vcore`` in cores or ``"500m"``, memory in bytes with ``Gi``/``G``…).

Validation looks at the whole trace before anything runs, so a broken trace changes nothing: every
problem names the line and the field. Besides types, it checks what can be known without running the
quota engines: times never go back, a node is not added twice or removed when absent, an application is
submitted once and used only between its ``submit`` and ``finish``, allocation keys are unique, and a
``release`` names a key an earlier ``allocate``/``ask`` defined.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from quotaplane import errors
from quotaplane.resources import Resource

__all__ = ["OPS", "InputError", "TraceError", "TraceEvent", "load_trace", "parse_csv", "parse_events",
           "parse_jsonl", "read_input"]

#: Every operation a trace event may name.
OPS: tuple[str, ...] = ("node", "remove_node", "submit", "allocate", "ask", "release", "finish")

_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # op: (required fields, optional fields) besides "t" and "op"
    "node": (frozenset({"node", "capacity"}), frozenset()),
    "remove_node": (frozenset({"node"}), frozenset()),
    "submit": (frozenset({"app", "user"}), frozenset({"groups", "queue", "tags"})),
    "allocate": (frozenset({"app", "resource"}), frozenset({"key", "priority", "preemptible", "duration"})),
    "ask": (frozenset({"app", "resource"}), frozenset({"key", "priority", "preemptible", "duration"})),
    "release": (frozenset({"key"}), frozenset()),
    "finish": (frozenset({"app"}), frozenset()),
}
_CSV_FIELDS = ("t", "op", "node", "capacity", "app", "user", "groups", "queue", "tags", "key", "resource",
               "priority", "preemptible", "duration")
_MAX_PROBLEMS = 50


class TraceError(errors.InputError):
    """A trace that cannot be replayed. ``problems`` lists ``"line N: field 'f': reason"`` strings;
    ``line`` is the line of the first problem (1-based; the header of a CSV file is line 1)."""

    def __init__(self, problems: list[str], line: int | None = None, source: str = "") -> None:
        self.problems = problems
        self.line = line
        self.source = source
        prefix = f"{source}: " if source else ""
        more = "" if len(problems) < _MAX_PROBLEMS else f"\n(stopped after {_MAX_PROBLEMS} problems)"
        super().__init__("\n".join(prefix + p for p in problems) + more)


class TraceEvent:
    """One validated trace event. Fields an operation does not use are ``None``.

    ``resource``/``capacity`` are in internal units; ``key`` is always set for ``allocate``/``ask``
    (``"<app>@<line>"`` when the trace gives none).
    """

    __slots__ = ("app", "asked", "capacity", "duration", "end", "groups", "key", "line", "node", "op",
                 "preemptible", "priority", "queue", "resource", "started", "t", "tags", "user", "when_done")

    def __init__(self, t: float, op: str, line: int) -> None:
        self.t = t
        self.op = op
        self.line = line
        self.node: str | None = None
        self.capacity: Resource | None = None
        self.app: str | None = None
        self.user: str | None = None
        self.groups: tuple[str, ...] = ()
        self.queue: str | None = None
        self.tags: dict[str, str] | None = None
        self.key: str | None = None
        self.resource: Resource | None = None
        self.priority: int = 0
        self.preemptible: bool = True
        self.duration: float | None = None
        # set only for workloads taken from a journal (quotaplane.sim.recorded), never by a trace file:
        #: the recorded start and end of the allocation: when it starts exactly at ``started``, its
        #: timer fires at ``end`` (not ``started + duration``, which floating point may move)
        self.started: float | None = None
        self.end: float | None = None
        #: when a waiting ask was first made, if before ``t`` (it was already waiting at the window's start)
        self.asked: float | None = None
        #: a ``finish`` that waits for the application's running work to end (the work did not end early)
        self.when_done = False

    def __repr__(self) -> str:
        return f"TraceEvent(t={self.t}, op={self.op!r}, line={self.line})"


class _Problems:
    __slots__ = ("first", "items")

    def __init__(self) -> None:
        self.items: list[str] = []
        self.first: int | None = None

    def add(self, line: int, field: str, reason: str) -> None:
        if self.first is None:
            self.first = line
        if len(self.items) < _MAX_PROBLEMS:
            self.items.append(f"line {line}: field {field!r}: {reason}")

    @property
    def full(self) -> bool:
        return len(self.items) >= _MAX_PROBLEMS


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


_RESOURCES: dict[tuple[tuple[str, type, Any], ...], Resource] = {}


def _resource(value: Any) -> Resource:
    """``Resource.from_config``, shared between equal mappings (traces repeat a few request shapes;
    a Resource is immutable, so sharing is safe)."""
    if not isinstance(value, Mapping):
        return Resource.from_config(value)
    try:
        # the type is part of the key: 1, 1.0 and True are equal but parse differently
        key = tuple((k, type(v), v) for k, v in value.items())
        found = _RESOURCES.get(key)
    except TypeError:                  # an unhashable value: not cached (and an error below)
        return Resource.from_config(value)
    if found is None:
        found = Resource.from_config(value)
        if len(_RESOURCES) < 10_000:
            _RESOURCES[key] = found
    return found


def _check_name(v: Any) -> str:
    value = _name(v)
    if value is None:
        raise ValueError(f"must be a non-empty string, got {v!r}")
    return value


def _check_groups(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(_name(g) for g in v):
        raise ValueError(f"must be a list of non-empty strings, got {v!r}")
    return tuple(v)


def _check_tags(v: Any) -> dict[str, str]:
    if not isinstance(v, Mapping) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise ValueError(f"must be a mapping of strings to strings, got {v!r}")
    return {k: v[k] for k in sorted(v)}


def _check_priority(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not -2**31 <= v < 2**31:
        raise ValueError(f"must be a 32-bit integer, got {v!r}")
    return v


def _check_flag(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"must be true or false, got {v!r}")
    return v


def _check_duration(v: Any) -> float:
    d = _number(v)
    if d is None or d <= 0:
        raise ValueError(f"must be a positive number of seconds, got {v!r}")
    return d


#: the check (and conversion) of every optional or op-specific field; a ValueError names the problem
_FIELD_CHECKS: dict[str, Callable[[Any], Any]] = {
    "node": _check_name, "app": _check_name, "user": _check_name, "key": _check_name, "queue": _check_name,
    "capacity": _resource, "resource": _resource, "groups": _check_groups, "tags": _check_tags,
    "priority": _check_priority, "preemptible": _check_flag, "duration": _check_duration,
}


def _time_of(raw: Mapping[str, Any], line: int, probs: _Problems) -> float | None:
    if "t" not in raw:
        probs.add(line, "t", "missing (seconds of simulated time)")
        return None
    t = _number(raw.get("t"))
    if t is None or t < 0:
        probs.add(line, "t", f"must be a non-negative number of seconds, got {raw.get('t')!r}")
        return None
    return t


def _fields_known(raw: Mapping[str, Any], op: str, line: int, probs: _Problems) -> bool:
    required, optional = _FIELDS[op]
    ok = True
    for name in sorted(raw):
        if name not in ("t", "op") and name not in required and name not in optional:
            probs.add(line, name, f"unknown field for op {op!r}")
            ok = False
    for name in sorted(required):
        if name not in raw:
            probs.add(line, name, f"missing (required for op {op!r})")
            ok = False
    return ok


def _event(raw: Mapping[str, Any], line: int, probs: _Problems) -> TraceEvent | None:
    """Type-check one raw event; None (with problems recorded) when it is unusable."""
    t = _time_of(raw, line, probs)
    op = raw.get("op")
    if op not in _FIELDS:
        probs.add(line, "op", f"must be one of {', '.join(OPS)}, got {op!r}")
        return None
    if not _fields_known(raw, op, line, probs) or t is None:
        return None
    ev = TraceEvent(t, op, line)
    ok = True
    for name, check in _FIELD_CHECKS.items():
        if name in raw:
            try:
                setattr(ev, name, check(raw[name]))
            except ValueError as exc:
                probs.add(line, name, str(exc))
                ok = False
    return ev if ok else None


class _Consistency:
    """What a trace has defined so far (nodes, applications, keys): the cross-event checks."""

    __slots__ = ("finished", "keys", "nodes", "released", "submitted")

    def __init__(self) -> None:
        self.nodes: set[str] = set()
        self.submitted: dict[str, int] = {}            # app -> line of its submit
        self.finished: dict[str, int] = {}             # app -> line of its finish
        self.keys: dict[str, tuple[int, str]] = {}     # key -> (line, app)
        self.released: dict[str, int] = {}

    def check(self, ev: TraceEvent) -> tuple[str, str] | None:
        """``(field, problem)`` when ``ev`` contradicts the trace so far; otherwise record it."""
        return self._CHECKS[ev.op](self, ev)

    def _node(self, ev: TraceEvent) -> tuple[str, str] | None:
        assert ev.node is not None
        if ev.node in self.nodes:
            return "node", f"node {ev.node!r} is already registered"
        self.nodes.add(ev.node)
        return None

    def _remove_node(self, ev: TraceEvent) -> tuple[str, str] | None:
        assert ev.node is not None
        if ev.node not in self.nodes:
            return "node", f"node {ev.node!r} is not registered"
        self.nodes.discard(ev.node)
        return None

    def _submit(self, ev: TraceEvent) -> tuple[str, str] | None:
        assert ev.app is not None
        if ev.app in self.submitted:
            return "app", f"application {ev.app!r} was already submitted at line {self.submitted[ev.app]}"
        self.submitted[ev.app] = ev.line
        return None

    def _live_app(self, ev: TraceEvent) -> tuple[str, str] | None:
        assert ev.app is not None
        if ev.app not in self.submitted:
            return "app", f"application {ev.app!r} has not been submitted"
        if ev.app in self.finished:
            return "app", f"application {ev.app!r} finished at line {self.finished[ev.app]}"
        return None

    def _finish(self, ev: TraceEvent) -> tuple[str, str] | None:
        problem = self._live_app(ev)
        if problem is None:
            assert ev.app is not None
            self.finished[ev.app] = ev.line
        return problem

    def _request(self, ev: TraceEvent) -> tuple[str, str] | None:
        problem = self._live_app(ev)
        if problem is not None:
            return problem
        assert ev.app is not None
        if ev.key is None:
            ev.key = f"{ev.app}@{ev.line}"
        if ev.key in self.keys:
            return "key", f"allocation key {ev.key!r} was already used at line {self.keys[ev.key][0]}"
        self.keys[ev.key] = (ev.line, ev.app)
        return None

    def _release(self, ev: TraceEvent) -> tuple[str, str] | None:
        key = ev.key
        assert key is not None
        if key not in self.keys:
            return "key", f"allocation key {key!r} is not defined by an earlier allocate or ask"
        if key in self.released:
            return "key", f"allocation key {key!r} was already released at line {self.released[key]}"
        app = self.keys[key][1]
        if app in self.finished:
            return "key", (f"allocation key {key!r} belongs to application {app!r}, which finished at line "
                           f"{self.finished[app]}")
        self.released[key] = ev.line
        return None

    _CHECKS: ClassVar[dict[str, Callable[[_Consistency, TraceEvent], tuple[str, str] | None]]] = {
        "node": _node, "remove_node": _remove_node, "submit": _submit, "finish": _finish,
        "allocate": _request, "ask": _request, "release": _release,
    }


def parse_events(raws: Iterable[tuple[int, Any]], source: str = "") -> list[TraceEvent]:
    """Validate raw events (``(line, object)`` pairs) as a whole trace; raise :class:`TraceError`.

    Beyond the types, checks what is known without running the engines (module docstring).
    """
    probs = _Problems()
    events: list[TraceEvent] = []
    last_t = 0.0
    seen = _Consistency()
    for line, raw in raws:
        if probs.full:
            break
        if not isinstance(raw, Mapping):
            probs.add(line, "(event)", f"must be a JSON object, got {type(raw).__name__}")
            continue
        ev = _event(raw, line, probs)
        if ev is None:
            continue
        if ev.t < last_t:
            probs.add(line, "t", f"time goes back: {ev.t:g} after {last_t:g} (events must be in time order)")
            continue
        last_t = ev.t
        problem = seen.check(ev)
        if problem is not None:
            probs.add(line, *problem)
            continue
        events.append(ev)
    if probs.items:
        raise TraceError(probs.items, probs.first, source)
    return events


def _jsonl_raws(text: str, probs: _Problems) -> list[tuple[int, Any]]:
    raws: list[tuple[int, Any]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue                      # blank lines and comments are allowed
        try:
            raws.append((n, json.loads(stripped)))
        except json.JSONDecodeError as exc:
            probs.add(n, "(json)", f"not valid JSON: {exc.msg} at column {exc.colno}")
    return raws


def parse_jsonl(text: str, source: str = "") -> list[TraceEvent]:
    """Parse and validate a JSON-lines trace (blank lines and ``#`` comment lines are skipped)."""
    probs = _Problems()
    raws = _jsonl_raws(text, probs)
    if probs.items:
        raise TraceError(probs.items, probs.first, source)
    return parse_events(raws, source)


def _split_pairs(text: str, line: int, field: str, probs: _Problems) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            probs.add(line, field, f"expected name=value pairs separated by ';', got {text!r}")
            return None
        out[name.strip()] = value.strip()
    return out


def _csv_number(text: str, line: int, field: str, probs: _Problems, *, integer: bool) -> Any:
    try:
        return int(text) if integer else float(text)
    except ValueError:
        probs.add(line, field, f"must be {'an integer' if integer else 'a number'}, got {text!r}")
        return None


def _csv_flag(cell: str, line: int, field: str, probs: _Problems) -> bool | None:
    low = cell.lower()
    if low not in ("true", "false"):
        probs.add(line, field, f"must be true or false, got {cell!r}")
        return None
    return low == "true"


def _csv_value(name: str, cell: str, line: int, probs: _Problems) -> Any:
    """The JSON-trace value of one CSV cell (None, with a problem recorded, when it is wrong)."""
    if name in ("t", "duration"):
        return _csv_number(cell, line, name, probs, integer=False)
    if name == "priority":
        return _csv_number(cell, line, name, probs, integer=True)
    if name == "preemptible":
        return _csv_flag(cell, line, name, probs)
    if name in ("capacity", "resource", "tags"):
        return _split_pairs(cell, line, name, probs)
    if name == "groups":
        return [g.strip() for g in cell.split(";") if g.strip()]
    return cell


def _csv_header(row: list[str], line: int, probs: _Problems) -> list[str]:
    header = [h.strip() for h in row]
    for h in header:
        if h not in _CSV_FIELDS:
            probs.add(line, h, f"unknown column (columns: {', '.join(_CSV_FIELDS)})")
    if "t" not in header or "op" not in header:
        probs.add(line, "(header)", "the header must name the columns 't' and 'op'")
    return header


def _csv_row(header: list[str], row: list[str], line: int, probs: _Problems) -> dict[str, Any] | None:
    if len(row) > len(header):
        probs.add(line, "(row)", f"{len(row)} cells but the header names {len(header)} columns")
        return None
    raw: dict[str, Any] = {}
    for name, cell in zip(header, row, strict=False):
        cell = cell.strip()
        if cell:
            value = _csv_value(name, cell, line, probs)
            if value is None:
                return None
            raw[name] = value
    return raw or None


def parse_csv(text: str, source: str = "") -> list[TraceEvent]:
    """Parse and validate a CSV trace: a header row naming the fields, then one event per row.

    Empty cells are absent fields. ``capacity``/``resource``/``tags`` are ``name=value;…``,
    ``groups`` is ``a;b``, ``preemptible`` is ``true``/``false``.
    """
    probs = _Problems()
    header, raws = _csv_raws(text, probs)
    if header is None and not probs.items:
        probs.add(1, "(header)", "the CSV trace has no header row")
    if probs.items:
        raise TraceError(probs.items, probs.first, source)
    return parse_events(raws, source)


def _csv_raws(text: str, probs: _Problems) -> tuple[list[str] | None, list[tuple[int, Any]]]:
    """The header row and every later non-blank, non-comment row as ``(line, raw event)``; stops at a
    bad header (its problems are in ``probs``)."""
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    raws: list[tuple[int, Any]] = []
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row) or row[0].lstrip().startswith("#"):
            continue
        if header is None:
            header = _csv_header(row, line, probs)
            if probs.items:
                break
            continue
        raw = _csv_row(header, row, line, probs)
        if raw is not None:
            raws.append((line, raw))
    return header, raws


class InputError(errors.InputError):
    """An input file that cannot be read; the message is one line naming the file and why."""


def read_input(path: str | Path, what: str) -> str:
    """The text of the input file ``path`` (``what`` it is, e.g. ``"trace file"``), or :class:`InputError`
    with one line naming it: missing, a directory, unreadable, or not UTF-8."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{p}: no such {what}") from None
    except IsADirectoryError:
        raise InputError(f"{p}: the {what} is a directory") from None
    except UnicodeDecodeError:
        raise InputError(f"{p}: the {what} is not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read the {what}: {exc.strerror or exc}") from None


def load_trace(path: str | Path) -> list[TraceEvent]:
    """Read a trace file: CSV when its name ends in ``.csv``, JSON lines otherwise.

    :class:`InputError` when the file cannot be read, :class:`TraceError` when it is not a valid trace.
    """
    p = Path(path)
    text = read_input(p, "trace file")
    if p.suffix.lower() == ".csv":
        return parse_csv(text, str(p))
    return parse_jsonl(text, str(p))
