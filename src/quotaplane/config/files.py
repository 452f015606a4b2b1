"""Validate configuration files for ``quotaplane validate FILE...``.

Each problem becomes one ``FILE:LINE: reason`` line (``FILE: reason`` when the problem is the whole
file's, like a file that cannot be read), and each valid file one ``FILE: ok`` line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from quotaplane.config.loader import load_config
from quotaplane.errors import ConfigError

__all__ = ["later_problems", "provide_check", "validate_conf", "validate_file", "validate_files"]

#: checks that a configuration the loader accepts must still pass, made by a layer above this one —
#: the time windows' "each window opens to a valid configuration" (docs/windows.md). The package root
#: gives them (quotaplane/__init__.py), as it gives config/extensions.py its loaders, so that
#: ``quotaplane validate``, ``validate-conf``, ``config apply`` and ``serve`` refuse the same files
#: while this layer names nothing above it (tests/test_architecture.py)
_LATER_CHECKS: list[Callable[[str], list[str]]] = []


def provide_check(check: Callable[[str], list[str]]) -> None:
    """Add ``check`` (a valid configuration's text → its problems, ``[]``: none) to what
    :func:`later_problems` runs; adding the same check again changes nothing."""
    if check not in _LATER_CHECKS:
        _LATER_CHECKS.append(check)


def later_problems(text: str) -> list[str]:
    """The problems of a configuration ``text`` that :func:`load_config` accepts, found by the checks
    of the layers above (:func:`provide_check`), each one sentence naming what and where."""
    return [problem for check in _LATER_CHECKS for problem in check(text)]


def validate_conf(text: str | bytes) -> dict[str, object]:
    """V-21: the body of ``POST /ws/v1/validate-conf`` — ``{"allowed": bool, "reason": "…"}``.

    ``reason`` (the first problem, ``"line N: …"``) is omitted when the config is allowed, as in
    YuniKorn. YAML that does not even parse is an ordinary ``allowed: false``.
    """
    try:
        load_config(text)
    except ConfigError as err:
        return {"allowed": False, "reason": str(err)}
    later = later_problems(text.decode("utf-8", "replace") if isinstance(text, bytes) else text)
    if later:
        return {"allowed": False, "reason": later[0]}
    return {"allowed": True}


def validate_file(path: str | os.PathLike[str]) -> list[tuple[int, str]]:
    """Every problem of one file as ``(line, reason)``; ``[]`` when the file is a valid config."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        return [(0, f"cannot read file: {exc.strerror or exc}")]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [(0, f"file is not UTF-8 text: {exc.reason} at byte {exc.start}")]
    try:
        load_config(text)
    except ConfigError as err:
        return [(line or 0, reason) for line, reason in err.problems]
    return [(0, problem) for problem in later_problems(text)]


def validate_files(paths: Iterable[str | os.PathLike[str]]) -> tuple[bool, list[str]]:
    """Validate every file; return whether all are valid and the lines to print, in file order."""
    ok = True
    lines: list[str] = []
    for path in paths:
        name = os.fspath(path)
        problems = validate_file(path)
        if problems:
            ok = False
            lines.extend(f"{name}:{line}: {reason}" if line else f"{name}: {reason}"
                         for line, reason in problems)
        else:
            lines.append(f"{name}: ok")
    return ok, lines
