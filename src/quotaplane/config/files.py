"""Validate configuration files for ``quotaplane validate FILE...``.

Each problem becomes one ``FILE:LINE: reason`` line (``FILE: reason`` when the problem is the whole
file's, like a file that cannot be read), and each valid file one ``FILE: ok`` line.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from quotaplane.config.loader import load_config
from quotaplane.errors import ConfigError

__all__ = ["validate_conf", "validate_file", "validate_files"]


def validate_conf(text: str | bytes) -> dict[str, object]:
    """V-21: the body of ``POST /ws/v1/validate-conf`` — ``{"allowed": bool, "reason": "…"}``.

    ``reason`` (the first problem, ``"line N: …"``) is omitted when the config is allowed, as in
    YuniKorn. YAML that does not even parse is an ordinary ``allowed: false``.
    """
    try:
        load_config(text)
    except ConfigError as err:
        return {"allowed": False, "reason": str(err)}
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
    return []


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
