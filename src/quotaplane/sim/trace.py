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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from quotaplane.resources import Resource

__all__ = ["OPS", "TraceError", "TraceEvent", "load_trace", "parse_csv", "parse_events", "parse_jsonl"]

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


class TraceError(ValueError):
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

    __slots__ = ("app", "capacity", "duration", "groups", "key", "line", "node", "op", "preemptible",
                 "priority", "queue", "resource", "t", "tags", "user")

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


def _event(raw: Mapping[str, Any], line: int, probs: _Problems) -> TraceEvent | None:
    """Type-check one raw event; None (with problems recorded) when it is unusable."""
    ok = True
    t = _number(raw.get("t"))
    if "t" not in raw:
        probs.add(line, "t", "missing (seconds of simulated time)")
        ok = False
    elif t is None or t < 0:
        probs.add(line, "t", f"must be a non-negative number of seconds, got {raw.get('t')!r}")
        ok = False
    op = raw.get("op")
    if op not in _FIELDS:
        probs.add(line, "op", f"must be one of {', '.join(OPS)}, got {op!r}")
        return None
    required, optional = _FIELDS[op]
    for name in sorted(raw):
        if name not in ("t", "op") and name not in required and name not in optional:
            probs.add(line, name, f"unknown field for op {op!r}")
            ok = False
    for name in sorted(required):
        if name not in raw:
            probs.add(line, name, f"missing (required for op {op!r})")
            ok = False
    if not ok:
        return None
    assert t is not None
    ev = TraceEvent(t, op, line)
    for name in ("node", "app", "user", "key", "queue"):
        if name in raw:
            value = _name(raw[name])
            if value is None:
                probs.add(line, name, f"must be a non-empty string, got {raw[name]!r}")
                ok = False
            setattr(ev, name, value)
    for name in ("capacity", "resource"):
        if name in raw:
            try:
                setattr(ev, name, _resource(raw[name]))
            except ValueError as exc:
                probs.add(line, name, str(exc))
                ok = False
    if "groups" in raw:
        groups = raw["groups"]
        if not isinstance(groups, list) or not all(_name(g) for g in groups):
            probs.add(line, "groups", f"must be a list of non-empty strings, got {groups!r}")
            ok = False
        else:
            ev.groups = tuple(groups)
    if "tags" in raw:
        tags = raw["tags"]
        if not isinstance(tags, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in tags.items()):
            probs.add(line, "tags", f"must be a mapping of strings to strings, got {tags!r}")
            ok = False
        else:
            ev.tags = {k: tags[k] for k in sorted(tags)}
    if "priority" in raw:
        pr = raw["priority"]
        if isinstance(pr, bool) or not isinstance(pr, int) or not -2**31 <= pr < 2**31:
            probs.add(line, "priority", f"must be a 32-bit integer, got {pr!r}")
            ok = False
        else:
            ev.priority = pr
    if "preemptible" in raw:
        if not isinstance(raw["preemptible"], bool):
            probs.add(line, "preemptible", f"must be true or false, got {raw['preemptible']!r}")
            ok = False
        else:
            ev.preemptible = raw["preemptible"]
    if "duration" in raw:
        d = _number(raw["duration"])
        if d is None or d <= 0:
            probs.add(line, "duration", f"must be a positive number of seconds, got {raw['duration']!r}")
            ok = False
        else:
            ev.duration = d
    return ev if ok else None


def parse_events(raws: Iterable[tuple[int, Any]], source: str = "") -> list[TraceEvent]:
    """Validate raw events (``(line, object)`` pairs) as a whole trace; raise :class:`TraceError`.

    Beyond the types, checks what is known without running the engines (module docstring).
    """
    probs = _Problems()
    events: list[TraceEvent] = []
    last_t = 0.0
    nodes: set[str] = set()
    submitted: dict[str, int] = {}            # app -> line of its submit
    finished: dict[str, int] = {}             # app -> line of its finish
    keys: dict[str, tuple[int, str]] = {}     # key -> (line, app)
    released: dict[str, int] = {}
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
        op = ev.op
        if op == "node":
            assert ev.node is not None
            if ev.node in nodes:
                probs.add(line, "node", f"node {ev.node!r} is already registered")
                continue
            nodes.add(ev.node)
        elif op == "remove_node":
            assert ev.node is not None
            if ev.node not in nodes:
                probs.add(line, "node", f"node {ev.node!r} is not registered")
                continue
            nodes.discard(ev.node)
        elif op == "submit":
            assert ev.app is not None
            if ev.app in submitted:
                probs.add(line, "app", f"application {ev.app!r} was already submitted at line "
                                       f"{submitted[ev.app]}")
                continue
            submitted[ev.app] = line
        elif op in ("allocate", "ask", "finish"):
            assert ev.app is not None
            if ev.app not in submitted:
                probs.add(line, "app", f"application {ev.app!r} has not been submitted")
                continue
            if ev.app in finished:
                probs.add(line, "app", f"application {ev.app!r} finished at line {finished[ev.app]}")
                continue
            if op == "finish":
                finished[ev.app] = line
            else:
                if ev.key is None:
                    ev.key = f"{ev.app}@{line}"
                if ev.key in keys:
                    probs.add(line, "key", f"allocation key {ev.key!r} was already used at line "
                                           f"{keys[ev.key][0]}")
                    continue
                keys[ev.key] = (line, ev.app)
        elif op == "release":
            assert ev.key is not None
            if ev.key not in keys:
                probs.add(line, "key", f"allocation key {ev.key!r} is not defined by an earlier "
                                       "allocate or ask")
                continue
            if ev.key in released:
                probs.add(line, "key", f"allocation key {ev.key!r} was already released at line "
                                       f"{released[ev.key]}")
                continue
            app = keys[ev.key][1]
            if app in finished:
                probs.add(line, "key", f"allocation key {ev.key!r} belongs to application {app!r}, "
                                       f"which finished at line {finished[app]}")
                continue
            released[ev.key] = line
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


def parse_csv(text: str, source: str = "") -> list[TraceEvent]:
    """Parse and validate a CSV trace: a header row naming the fields, then one event per row.

    Empty cells are absent fields. ``capacity``/``resource``/``tags`` are ``name=value;…``,
    ``groups`` is ``a;b``, ``preemptible`` is ``true``/``false``.
    """
    probs = _Problems()
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    raws: list[tuple[int, Any]] = []
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row) or row[0].lstrip().startswith("#"):
            continue
        if header is None:
            header = [h.strip() for h in row]
            for h in header:
                if h not in _CSV_FIELDS:
                    probs.add(line, h, f"unknown column (columns: {', '.join(_CSV_FIELDS)})")
            if "t" not in header or "op" not in header:
                probs.add(line, "(header)", "the header must name the columns 't' and 'op'")
            if probs.items:
                break
            continue
        if len(row) > len(header):
            probs.add(line, "(row)", f"{len(row)} cells but the header names {len(header)} columns")
            continue
        raw: dict[str, Any] = {}
        for name, cell in zip(header, row, strict=False):
            cell = cell.strip()
            if not cell:
                continue
            value: Any = cell
            if name in ("t", "duration"):
                value = _csv_number(cell, line, name, probs, integer=False)
            elif name == "priority":
                value = _csv_number(cell, line, name, probs, integer=True)
            elif name == "preemptible":
                low = cell.lower()
                if low not in ("true", "false"):
                    probs.add(line, name, f"must be true or false, got {cell!r}")
                    value = None
                else:
                    value = low == "true"
            elif name in ("capacity", "resource", "tags"):
                value = _split_pairs(cell, line, name, probs)
            elif name == "groups":
                value = [g.strip() for g in cell.split(";") if g.strip()]
            if value is None:
                raw = {}
                break
            raw[name] = value
        if raw:
            raws.append((line, raw))
    if header is None and not probs.items:
        probs.add(1, "(header)", "the CSV trace has no header row")
    if probs.items:
        raise TraceError(probs.items, probs.first, source)
    return parse_events(raws, source)


def load_trace(path: str | Path) -> list[TraceEvent]:
    """Read a trace file: CSV when its name ends in ``.csv``, JSON lines otherwise."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() == ".csv":
        return parse_csv(text, str(p))
    return parse_jsonl(text, str(p))
