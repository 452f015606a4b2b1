"""Where each part of a configuration came from: the ``(line, reason)`` problems validation reports and
the :class:`LineIndex` the loader fills (its own module so the rule checkers of :mod:`validate` and
:mod:`validate_flavors` share it without importing each other)."""

from __future__ import annotations

__all__ = ["LineIndex", "Problem"]

#: one problem found: its 1-based line (None when unknown) and what is wrong
Problem = tuple[int | None, str]


class LineIndex:
    """Where each model object and field came from, and which fields failed to parse.

    Keys are ``(id(obj), field)``; the objects are the frozen model objects the loader built, which
    stay alive while the index is used. ``field`` is a key name (``"max"``) or an item
    (``"users[2]"``). A *broken* field failed a structural check (type, quantity) and was replaced
    by its default; rules that read it are skipped so that one mistake is reported once.
    """

    __slots__ = ("_broken", "_lines")

    def __init__(self) -> None:
        self._lines: dict[tuple[int, str], int] = {}
        self._broken: set[tuple[int, str]] = set()

    def set(self, obj: object, field: str, line: int | None) -> None:
        """Record the 1-based ``line`` of ``field`` of ``obj`` (ignored when None)."""
        if line is not None:
            self._lines[(id(obj), field)] = line

    def line(self, obj: object, field: str | None = None) -> int | None:
        """The line of ``field`` of ``obj`` if recorded, else the line where ``obj`` starts."""
        if field is not None:
            found = self._lines.get((id(obj), field))
            if found is not None:
                return found
        own: int | None = getattr(obj, "line", None)
        return own

    def mark_broken(self, obj: object, field: str) -> None:
        """Remember that ``field`` of ``obj`` failed to parse (already reported)."""
        self._broken.add((id(obj), field))

    def ok(self, obj: object, *fields: str) -> bool:
        """True when none of ``fields`` of ``obj`` failed to parse."""
        key = id(obj)
        return not any((key, f) in self._broken for f in fields)

    def move(self, old: object, new: object) -> None:
        """Re-key every entry of ``old`` onto ``new`` (an object rebuilt with one field changed).

        The entries of ``old`` are removed: once ``old`` is gone its id may be reused by another object.
        """
        old_id, new_id = id(old), id(new)
        for (oid, f) in [k for k in self._lines if k[0] == old_id]:
            self._lines[(new_id, f)] = self._lines.pop((oid, f))
        for (oid, f) in [k for k in self._broken if k[0] == old_id]:
            self._broken.discard((oid, f))
            self._broken.add((new_id, f))
