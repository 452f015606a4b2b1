"""YAML text to plain data whose mappings and lists know their lines; every failure a ConfigError.

Composes with ``ruamel.yaml`` (its C parser from ``ruamel.yaml.clib`` when installed, about ten times
faster than the pure-Python one) and builds the values itself, so every key and list item keeps its
1-based line (:class:`LineMap`, :class:`LineSeq`). Bounded: the nesting depth is checked before the
C parser (which recurses without a limit) sees the text, aliases are built once and shared.
"""

from __future__ import annotations

import re
from typing import Any

from quotaplane.config.validate import Problem
from quotaplane.errors import ConfigError

__all__ = ["MAX_NESTING", "LineMap", "LineSeq", "nesting_depth", "parse_yaml", "raise_problems"]


def _yaml_problem(exc: BaseException) -> Problem:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = getattr(mark, "line", None)
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    if problem:
        text = f"{context}: {problem}" if context else str(problem)
    else:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, RecursionError):
        text = "the YAML is nested too deeply"
    return (line + 1 if isinstance(line, int) else None, f"invalid YAML: {text}")


def _sort_key(problem: Problem) -> tuple[int, int]:
    line = problem[0]
    return (1, 0) if line is None else (0, line)


def raise_problems(problems: list[Problem]) -> None:
    """Raise a :class:`ConfigError` for ``problems``: the first by line is its message."""
    ordered = sorted(problems, key=_sort_key)  # stable: same line keeps check order
    line, reason = ordered[0]
    message = f"line {line}: {reason}" if line is not None else reason
    raise ConfigError(message, line=line, problems=ordered)


class LineMap(dict[Any, Any]):
    """A YAML mapping as a dict, with the 1-based line of the mapping and of each key."""

    __slots__ = ("key_lines", "line")

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[Any, int] = {}


class LineSeq(list[Any]):
    """A YAML sequence as a list, with the 1-based line of the sequence and of each item."""

    __slots__ = ("item_lines", "line")

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.item_lines: list[int] = []


_TAG = "tag:yaml.org,2002:"
_STR, _NULL, _BOOL, _MERGE = _TAG + "str", _TAG + "null", _TAG + "bool", _TAG + "merge"
_MAP_TAGS = (_TAG + "map", "!")  # "!" is a non-specific tag: a plain mapping or sequence
_SEQ_TAGS = (_TAG + "seq", "!")


class _NodeError(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


class _TreeBuilder:
    """Turns the composed YAML node graph into :class:`LineMap` / :class:`LineSeq` / scalars.

    We compose (rather than load) so that the C parser of ``ruamel.yaml.clib`` can be used while every
    key and item keeps its line. Scalars are constructed by ruamel's safe constructor (YAML 1.2 core
    schema); duplicate keys are errors and ``<<`` merge keys work as in YAML 1.1 (explicit keys win).
    Aliased nodes are built once and shared, so an alias-heavy text cannot expand exponentially here.
    """

    def __init__(self, constructor: Any) -> None:
        self.constructor = constructor
        self.built: dict[int, object] = {}

    def build(self, node: Any) -> object:
        """The value of ``node`` (built once per node: aliases share it)."""
        from ruamel.yaml.nodes import MappingNode, ScalarNode

        key = id(node)
        if key in self.built:
            return self.built[key]
        ctag = node.ctag
        # ``node.tag`` formats the tag on every access; resolved tags have no handle (a fast path).
        tag = ctag.suffix if ctag.handle is None else node.tag
        if isinstance(node, ScalarNode):
            value = self._scalar(node, tag)
            self.built[key] = value
            return value
        if isinstance(node, MappingNode):
            return self._mapping(node, tag)
        return self._sequence(node, tag)

    def _scalar(self, node: Any, tag: str) -> object:
        if tag == _STR:
            return node.value
        if tag == _NULL:
            return None
        if tag == _BOOL:
            return node.value.lower() == "true"
        value = self.constructor.construct_object(node, deep=True)
        if isinstance(value, bytes | set):
            raise _NodeError(node.start_mark.line + 1,
                             f"unsupported YAML value of type {type(value).__name__}")
        return value

    def _mapping(self, node: Any, tag: str) -> LineMap:
        line = node.start_mark.line + 1
        if tag not in _MAP_TAGS:
            raise _NodeError(line, f"unsupported YAML tag {tag!r}")
        mapping = LineMap(line)
        self.built[id(node)] = mapping
        merges: list[Any] = []
        for key_node, value_node in node.value:
            if key_node.ctag.suffix == _MERGE or key_node.tag == _MERGE:
                merges.append(value_node)
                continue
            k = self.build(key_node)
            if isinstance(k, dict | list):
                raise _NodeError(key_node.start_mark.line + 1, "a mapping key must be a scalar")
            if k in mapping:
                raise _NodeError(key_node.start_mark.line + 1,
                                 f"duplicate key {k!r} (first at line {mapping.key_lines[k]})")
            mapping[k] = self.build(value_node)
            mapping.key_lines[k] = key_node.start_mark.line + 1
        for merge in merges:
            self._merge(mapping, merge)
        return mapping

    def _merge(self, mapping: LineMap, merge: Any) -> None:
        """``<<``: keys of the merged mappings that ``mapping`` lacks (explicit keys win, then earlier
        merges)."""
        from ruamel.yaml.nodes import MappingNode

        bad_merge = _NodeError(merge.start_mark.line + 1, "a merge key needs mappings")
        sources = merge.value if not isinstance(merge, MappingNode) else [merge]
        if not isinstance(sources, list):
            raise bad_merge
        for source_node in sources:
            source = self.build(source_node)
            if not isinstance(source, LineMap):
                raise bad_merge
            for k, v in source.items():
                if k not in mapping:
                    mapping[k] = v
                    mapping.key_lines[k] = source.key_lines.get(k, source.line)

    def _sequence(self, node: Any, tag: str) -> LineSeq:
        line = node.start_mark.line + 1
        if tag not in _SEQ_TAGS:
            raise _NodeError(line, f"unsupported YAML tag {tag!r}")
        seq = LineSeq(line)
        self.built[id(node)] = seq
        for item in node.value:
            seq.append(self.build(item))
            seq.item_lines.append(item.start_mark.line + 1)
        return seq


_BRACKETS = re.compile(r"[\[\]{}]")
#: Composing recurses once per nesting level (in C with ruamel.yaml.clib, unchecked): absurd nesting
#: is refused up front. No real configuration comes near this bound.
MAX_NESTING = 250


def nesting_depth(text: str) -> tuple[int, int]:
    """An upper bound of the YAML nesting depth (indentation plus open brackets) and its line."""
    depth = 0
    worst, worst_line = 0, 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip(" ")
        level = len(line) - len(stripped) + depth
        for match in _BRACKETS.finditer(stripped):
            if match.group() in "[{":
                depth += 1
                level = max(level, len(line) - len(stripped) + depth)
            elif depth:
                depth -= 1
        if level > worst:
            worst, worst_line = level, number
    return worst, worst_line


def parse_yaml(text: str) -> object:
    """Parse ``text`` into plain data whose mappings and lists know their lines; errors are ConfigError.

    Uses ruamel.yaml's composer (the C parser of ``ruamel.yaml.clib`` when installed, about ten times
    faster than the pure-Python one) and builds the values itself to keep each key's line.
    """
    from ruamel.yaml import YAML

    depth, line = nesting_depth(text)
    if depth > MAX_NESTING:
        raise_problems([(line, f"invalid YAML: nested too deeply (more than {MAX_NESTING} levels)")])
    yaml = YAML(typ="safe")
    try:
        node = yaml.compose(text)
        if node is None:
            return None
        return _TreeBuilder(yaml.constructor).build(node)
    except _NodeError as exc:
        raise_problems([(exc.line, f"invalid YAML: {exc.message}")])
    except Exception as exc:  # any parser failure (scanner, composer, constructor, recursion …) is bad input
        raise_problems([_yaml_problem(exc)])
    raise AssertionError("unreachable")  # pragma: no cover - _raise always raises
