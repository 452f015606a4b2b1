"""Reading typed fields out of line-aware YAML data, recording every problem with its line.

:class:`FieldReader` is the base of the config loader's builder: each reader method returns the value
(or a default) and, when the value is wrong, records a ``(line, reason)`` problem naming the key, the
place and what was found — so one pass reports every problem of a config (all-or-nothing, U13).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from quotaplane.config.validate import LineIndex, Problem
from quotaplane.config.yaml_tree import LineMap, LineSeq
from quotaplane.resources import INT64_MAX, Resource

__all__ = ["FieldReader", "describe", "is_bool", "is_int"]


def is_bool(value: object) -> bool:
    """True for YAML booleans."""
    return isinstance(value, bool)


def is_int(value: object) -> bool:
    """True for YAML integers (booleans are not integers here)."""
    return isinstance(value, int) and not is_bool(value)


def describe(value: object) -> str:
    """How a wrong value is named in a problem (``the string 'x'``, ``a mapping`` …)."""
    if value is None:
        return "null"
    if is_bool(value):
        return "a boolean"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, int | float):
        return f"the number {value}"
    return f"a value of type {type(value).__name__}"


class FieldReader:
    """Typed field readers that record problems instead of raising (the loader's base class)."""

    broken: list[tuple[object, str]]

    def __init__(self) -> None:
        self.broken = []
        self.unknown_keys = False
        self.problems: list[Problem] = []
        self.index = LineIndex()
        self.queue_count = 0

    # -- problems and lines -----------------------------------------------------------------------
    def add(self, line: int | None, message: str) -> None:
        self.problems.append((line, message))

    @staticmethod
    def node_line(node: object) -> int | None:
        return node.line if isinstance(node, LineMap | LineSeq) else None

    @staticmethod
    def key_line(mapping: object, key: object) -> int | None:
        if isinstance(mapping, LineMap):
            return mapping.key_lines.get(key, mapping.line)
        return None

    @staticmethod
    def item_line(seq: object, index: int) -> int | None:
        if isinstance(seq, LineSeq):
            return seq.item_lines[index] if 0 <= index < len(seq.item_lines) else seq.line
        return None

    # -- typed accessors --------------------------------------------------------------------------
    def mapping(self, node: object, what: str, allowed: tuple[str, ...],
                line: int | None) -> dict[Any, Any] | None:
        """``node`` as a mapping whose keys are all in ``allowed``; None (and a problem) otherwise."""
        self.unknown_keys = False
        if not isinstance(node, dict):
            self.add(line, f"{what} must be a mapping, got {describe(node)}")
            return None
        for key in node:
            if not isinstance(key, str):
                self.add(self.key_line(node, key), f"invalid key {key!r} in {what}: keys must be strings")
            elif key not in allowed:
                self.unknown_keys = True
                hint = ""
                if key.lower() in allowed:
                    hint = f" (did you mean '{key.lower()}'?)"
                self.add(self.key_line(node, key),
                         f"unknown key '{key}' in {what}{hint}; allowed keys: {', '.join(allowed)}")
        return node

    def string(self, m: dict[Any, Any], key: str, what: str, default: str = "") -> str:
        value = m.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            self.add(self.key_line(m, key), f"'{key}' of {what} must be a string, got {describe(value)}"
                                             " (quote it)")
            return default
        return str(value)

    def optional_string(self, m: dict[Any, Any], key: str, what: str) -> str | None:
        if m.get(key) is None:
            return None
        return self.string(m, key, what)

    def boolean(self, m: dict[Any, Any], key: str, what: str) -> bool:
        value = m.get(key)
        if value is None:
            return False
        if not is_bool(value):
            self.add(self.key_line(m, key),
                     f"'{key}' of {what} must be a boolean (true or false), got {describe(value)}")
            return False
        return bool(value)

    def count(self, m: dict[Any, Any], key: str, what: str) -> tuple[int, bool]:
        """A non-negative integer within int64 (YuniKorn's uint64, kept JSON-safe), and if it parsed."""
        value = m.get(key)
        if value is None:
            return 0, True
        if not is_int(value) or value < 0 or value > INT64_MAX:
            self.add(self.key_line(m, key),
                     f"'{key}' of {what} must be a non-negative integer, got {describe(value)}")
            return 0, False
        return int(value), True

    def names(self, m: dict[Any, Any], key: str, what: str) -> tuple[tuple[str, ...], list[int | None], bool]:
        """A list of strings (users, groups): the names, each item's line, and whether it parsed."""
        value = m.get(key)
        if value is None:
            return (), [], True
        if not isinstance(value, list):
            self.add(self.key_line(m, key), f"'{key}' of {what} must be a list of names, got "
                                             f"{describe(value)}")
            return (), [], False
        out: list[str] = []
        lines: list[int | None] = []
        ok = True
        for i, item in enumerate(value):
            if not isinstance(item, str):
                self.add(self.item_line(value, i),
                         f"entry {i + 1} of '{key}' of {what} must be a string, got {describe(item)}")
                ok = False
                continue
            out.append(str(item))
            lines.append(self.item_line(value, i))
        return tuple(out), lines, ok

    def resource(self, m: dict[Any, Any], key: str, what: str) -> tuple[Resource | None, bool]:
        """V-6 / V-20: a map of quantities (Q-1 … Q-6). Empty or absent is None."""
        value = m.get(key)
        if value is None:
            return None, True
        if not isinstance(value, dict):
            self.add(self.key_line(m, key), f"'{key}' of {what} must be a mapping of resource name to "
                                             f"quantity, got {describe(value)}")
            return None, False
        data: dict[str, int] = {}
        ok = True
        for name, raw in value.items():
            try:
                parsed = Resource.from_config({name: raw})
            except ValueError as exc:
                self.add(self.key_line(value, name), f"{key} of {what}: {exc}")
                ok = False
                continue
            data.update(parsed)
        if not ok:
            return None, False
        return (Resource(data) if data else None), True

    def properties(self, m: dict[Any, Any], key: str, what: str) -> MappingProxyType[str, str]:
        value = m.get(key)
        if value is None:
            return MappingProxyType({})
        if not isinstance(value, dict):
            self.add(self.key_line(m, key), f"'{key}' of {what} must be a mapping of strings, got "
                                             f"{describe(value)}")
            return MappingProxyType({})
        out: dict[str, str] = {}
        for name, raw in value.items():
            line = self.key_line(value, name)
            if not isinstance(name, str):
                self.add(line, f"property name {name!r} of {what} must be a string")
                continue
            # YuniKorn decodes properties into map[string]string: scalars become their text.
            if raw is None:
                out[name] = ""
            elif isinstance(raw, str):
                out[name] = str(raw)
            elif is_bool(raw):
                out[name] = "true" if raw else "false"
            elif isinstance(raw, int | float):
                out[name] = str(int(raw)) if is_int(raw) else str(float(raw))
            else:
                self.add(line, f"property '{name}' of {what} must be a string, got {describe(raw)}")
        return MappingProxyType(out)
