"""The one bounded parser for every YAML and JSON text that comes from outside (issue 14 #1).

Request bodies, annotation values and extension documents all pass through here. The depth of
nesting is measured before a parser sees the text: the C YAML parser recurses without a limit (a body
of 100,000 ``[`` ended the process with SIGSEGV) and the JSON decoder raises RecursionError. No real
configuration or object comes near :data:`MAX_NESTING`. Every failure is a
:class:`~quotaplane.errors.ConfigError` (a ``ValueError``) that names what was parsed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from quotaplane.config.yaml_tree import MAX_NESTING, nesting_depth
from quotaplane.errors import ConfigError

__all__ = ["MAX_NESTING", "json_depth", "load_json", "load_yaml", "load_yaml_documents"]

#: A JSON string literal (escapes included): brackets inside it do not nest anything.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_BRACKETS = re.compile(r"[\[\]{}]")


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (0 for a scalar)."""
    depth = worst = 0
    for match in _JSON_BRACKETS.finditer(_JSON_STRING.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            worst = max(worst, depth)
        elif depth:
            depth -= 1
    return worst


def _text(raw: str | bytes, what: str) -> str:
    if isinstance(raw, bytes):
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{what} is not UTF-8 text (byte {exc.start})") from None
    return raw


def load_json(raw: str | bytes, what: str = "body") -> Any:
    """Parse JSON ``raw``; ConfigError naming ``what`` when it is not JSON or nested too deeply."""
    text = _text(raw, what)
    if json_depth(text) > MAX_NESTING:
        raise ConfigError(f"{what} is nested too deeply (more than {MAX_NESTING} levels)")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{what} is not valid JSON: {exc}") from None


def _bounded_yaml(text: str, what: str) -> None:
    depth, line = nesting_depth(text)
    if depth > MAX_NESTING:
        reason = f"invalid YAML: {what} is nested too deeply (more than {MAX_NESTING} levels)"
        raise ConfigError(f"line {line}: {reason}", line=line, problems=[(line, reason)])


def _yaml_error(exc: Exception, what: str) -> ConfigError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = getattr(mark, "line", None)
    problem = getattr(exc, "problem", None) or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(line, int):
        reason = f"invalid YAML in {what}: {problem}"
        return ConfigError(f"line {line + 1}: {reason}", line=line + 1, problems=[(line + 1, reason)])
    return ConfigError(f"invalid YAML in {what}: {problem}")


def load_yaml_documents(raw: str | bytes, what: str = "body", *, pure: bool = False) -> list[Any]:
    """Every non-empty YAML document of ``raw`` as plain data, bounded; ConfigError when it does not parse.

    ``pure``: the pure-Python parser, which reads ``{cpu:4}`` in a flow mapping as seed 002 writes it
    (the C parser refuses it).
    """
    text = _text(raw, what)
    _bounded_yaml(text, what)
    from ruamel.yaml import YAML

    try:
        return [d for d in YAML(typ="safe", pure=pure).load_all(text) if d is not None]
    except Exception as exc:  # ruamel raises many error classes; every one means "not valid YAML"
        raise _yaml_error(exc, what) from None


def load_yaml(raw: str | bytes, what: str = "body", *, pure: bool = False) -> Any:
    """One YAML document (or JSON) as plain data, bounded; ConfigError when it does not parse
    (``pure``: as in :func:`load_yaml_documents`)."""
    text = _text(raw, what)
    _bounded_yaml(text, what)
    from ruamel.yaml import YAML

    try:
        return YAML(typ="safe", pure=pure).load(text)
    except Exception as exc:  # ruamel raises many error classes; every one means "not valid YAML"
        raise _yaml_error(exc, what) from None
