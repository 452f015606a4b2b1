"""Arithmetic on plain ``{name: int}`` dicts, the elastic engine's working form of resource vectors.

One place for what the manager, the validation and the victim selection all do: mask to a quota's
``max`` names (decision E7), add and subtract in place, compare every dimension of a limit (E5), and
format for messages.
"""

from __future__ import annotations

from collections.abc import Mapping

from quotaplane.errors import InputError
from quotaplane.resources import Resource

__all__ = ["Dims", "add_into", "diff", "fits", "fmt", "le_completely", "mask", "nonneg", "sorted_dims",
           "sum_of"]

Dims = dict[str, int]


def mask(values: Mapping[str, int], keys: Mapping[str, int]) -> Dims:
    """The entries of ``values`` whose names are in ``keys``."""
    # E7: only the names the quota's max defines are limited (and counted).
    return {k: v for k, v in values.items() if k in keys}


def add_into(target: Dims, delta: Mapping[str, int], sign: int = 1) -> None:
    """``target += sign × delta``, per name, in place."""
    for k, v in delta.items():
        target[k] = target.get(k, 0) + sign * v


def diff(new: Mapping[str, int], old: Mapping[str, int]) -> Dims:
    """``new − old`` per name, without the zero entries."""
    out = {k: v - old.get(k, 0) for k, v in new.items()}
    for k, v in old.items():
        if k not in new:
            out[k] = -v
    return {k: v for k, v in out.items() if v}


def fits(used: Mapping[str, int], limit: Mapping[str, int]) -> bool:
    """``used <= limit`` in every dimension of ``limit`` (a name missing from ``used`` is 0)."""
    # Every dimension of the limit is compared (E5 fixes upstream's key-dropping quirk).
    return all(used.get(k, 0) <= v for k, v in limit.items())


def le_completely(left: Mapping[str, int], right: Mapping[str, int]) -> list[str]:
    """LessThanOrEqualCompletely of reference §3.3 rule 6: keys of ``left`` where it exceeds ``right``."""
    return sorted(k for k, v in left.items() if v > right.get(k, 0))


def fmt(values: Mapping[str, int]) -> str:
    """The message form of a vector (``map[name:amount …]``)."""
    return str(Resource.of(dict(values)))


def nonneg(values: Mapping[str, int] | None) -> Resource:
    """``values`` as a Resource; ``ValueError`` when an amount is negative."""
    r = values if isinstance(values, Resource) else Resource(values)
    if any(v < 0 for v in r._values.values()):
        raise InputError(f"resource amounts must not be negative: {r}")
    return r


def sum_of(a: Mapping[str, int], b: Mapping[str, int]) -> Dims:
    """``a + b`` per name, as a new dict."""
    out = dict(a)
    add_into(out, b)
    return out


def sorted_dims(values: Mapping[str, int], prune: bool = False) -> dict[str, int]:
    """``values`` with its names sorted (``prune``: without the zero entries)."""
    return {k: values[k] for k in sorted(values) if not prune or values[k]}
