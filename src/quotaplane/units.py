"""Human units: resource amounts as a person reads them, and quantities as a person types them.

Internal units stay what the engine and the REST API use (``vcore`` in milli-cores, ``memory`` in
bytes, every other name a count): exact integers. This module only speaks to people:

* :func:`amount` / :func:`resources` print ``2.5 cores``, ``800 Gi``, ``4 GPUs``, ``110 pods`` — and
  ``unlimited`` for a limit that is not one (``INT64_MAX`` and the ``MaxInt64/5`` default max of
  Koordinator's system and default quotas, reference §1.4), never the sentinel number;
* :func:`percent` prints a share of a limit;
* :func:`parse_resources` reads ``NAME=QUANTITY`` words as the configuration does (``vcore=2``,
  ``vcore=500m``, ``memory=1Gi``) and as Kubernetes does (``cpu=0.5``, ``memory=1.5Gi``).

The CLI (tables) and the web page (``/ui/``) both use it, so they print the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction

from quotaplane.errors import InputError
from quotaplane.resources import INT64_MAX, Resource, parse_k8s_quantity

__all__ = ["UNLIMITED_FROM", "amount", "configured", "internal_unit", "is_unlimited", "local_minute",
           "parse_resources", "percent", "resources"]

#: Amounts from here up are "no limit": INT64_MAX // 5 is Koordinator's default max (reference §1.4);
#: no real cluster comes near 1.8e18 bytes or milli-cores.
UNLIMITED_FROM = INT64_MAX // 5

_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def is_unlimited(value: int) -> bool:
    """True when ``value`` is a "no limit" sentinel rather than an amount."""
    return value >= UNLIMITED_FROM


def _number(value: Fraction | float, digits: int) -> str:
    """``value`` with at most ``digits`` decimals, trailing zeros dropped (``2.5``, ``200``, ``0.001``)."""
    text = f"{float(value):,.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _is_bytes(name: str) -> bool:
    return name in ("memory", "ephemeral-storage", "storage") or name.startswith("hugepages-") \
        or name.endswith(("/memory", "-memory", "storage"))


def internal_unit(name: str) -> str:
    """The unit of ``name``'s amounts in the engine and the REST API: ``milli-cores`` (``vcore``),
    ``bytes`` (memory and storage) or ``count`` (every other name); a flavored name as its resource."""
    base = _flavored(name)
    name = base[0] if base is not None else name
    if name == "vcore":
        return "milli-cores"
    return "bytes" if _is_bytes(name) else "count"


def _is_gpu(name: str) -> bool:
    last = name.rsplit("/", 1)[-1]
    return last == "gpu" or last.startswith("gpu")


def _bytes(value: int) -> str:
    sign = "-" if value < 0 else ""
    v = abs(value)
    for suffix, size in _BINARY:         # a whole number of a unit reads best: 1,600 Gi, not 1.56 Ti
        if v >= size and v % size == 0 and v // size < 10_000:
            return f"{sign}{v // size:,} {suffix}"
    for suffix, size in _BINARY:
        if v >= size:
            # 3 significant figures at most below 100 units, whole units above
            digits = 0 if v >= 100 * size else (1 if v >= 10 * size else 2)
            return f"{sign}{_number(Fraction(v, size), digits)} {suffix}"
    return f"{sign}{v} B"


_LABEL = {"vcore": "cores", "memory": "memory", "pods": "pods"}


def amount(name: str, value: int, *, named: bool = True) -> str:
    """One amount in human units: ``vcore`` 2500 → ``2.5 cores``, ``memory`` 2**33 → ``8 Gi``,
    ``nvidia.com/gpu`` 4 → ``4 GPUs``, ``pods`` 110 → ``110 pods``; any other name → ``name 7``
    (``named=False``: ``7``). A "no limit" sentinel is ``unlimited``."""
    flavored = _flavored(name)
    if flavored is not None:        # a flavored name (docs/flavors.md): the resource's units, its flavor
        text = amount(flavored[0], value, named=named)
        return f"{text} ({flavored[1]})" if named else text
    if is_unlimited(value):
        return _unlimited(name) if named else "unlimited"
    if name in _KNOWN:
        return _KNOWN[name](value)
    if _is_gpu(name):
        return _gpus(name, value, named=named)
    text = _bytes(value) if _is_bytes(name) else f"{value:,}"
    return f"{name} {text}" if named else text


def _flavored(name: str) -> tuple[str, str] | None:
    """``(resource, flavor)`` of a flavored name ``resource@flavor``; None for a plain name."""
    base, at, flavor = name.rpartition("@")
    return (base, flavor) if at and base and flavor else None


def _cores(value: int) -> str:
    cores = Fraction(value, 1000)
    return f"{_number(cores, 3)} {_plural('core', cores)}"


def _pods(value: int) -> str:
    return f"{value:,} {_plural('pod', value)}"


#: the resources with their own units: milli-cores as cores, memory in binary units, pods counted
_KNOWN: dict[str, Callable[[int], str]] = {"vcore": _cores, "memory": _bytes, "pods": _pods}


def _plural(word: str, n: int | Fraction) -> str:
    return word if n == 1 else word + "s"


def _unlimited(name: str) -> str:
    return f"{_LABEL.get(name, 'GPUs' if _is_gpu(name) else name)} unlimited"


def _gpus(name: str, value: int, *, named: bool) -> str:
    """``4 GPUs``; a GPU resource other than the plain ``…/gpu`` is named after it when ``named``."""
    plain = name.endswith("/gpu") or name == "gpu"
    return f"{value:,} {'GPU' if value == 1 else 'GPUs'}" + ("" if plain or not named else f" ({name})")


_ORDER = {"vcore": 0, "memory": 1}


def _ordered(r: Mapping[str, int]) -> list[tuple[str, int]]:
    """cores first, memory second, GPUs next, then the rest by name."""
    def key(kv: tuple[str, int]) -> tuple[int, str]:
        base = kv[0].rpartition("@")[0] or kv[0]         # a flavored name sorts with its resource
        return _ORDER.get(base, 2 if _is_gpu(base) else 3), kv[0]
    return sorted(r.items(), key=key)


def resources(r: Mapping[str, int] | None, *, empty: str = "-", sep: str = ", ") -> str:
    """A resource vector in human units: ``200 cores, 800 Gi, 8 GPUs, 110 pods``; ``empty`` for none."""
    if not r:
        return empty
    return sep.join(amount(k, v) for k, v in _ordered(r)) or empty


def configured(value: object, *, kubernetes: bool = False, hours: bool = False) -> str:
    """A setting as a configuration writes it, in human units: a resource mapping read in the
    configuration's units (``{vcore: 4000, memory: 480Gi}`` is ``4,000 cores, 480 Gi``), or with
    ``kubernetes`` as Kubernetes quantities (an elastic quota's ``{cpu: 8}``), or with ``hours`` as a
    budget's resource-hours (``{vcore: 100}`` is ``100 core-hours``); a count as itself. What does not
    read as amounts is shown as written (the service validated it; this only prints)."""
    if not isinstance(value, Mapping):
        return str(value)
    if hours:
        from quotaplane.config.budgets import unit_of

        return ", ".join(f"{v:,} {unit_of(str(k))[1]}-hours" if isinstance(v, int | float) else f"{k} {v}"
                         for k, v in value.items())
    try:
        parsed = Resource.from_k8s(value) if kubernetes else Resource.from_config(value)
    except (ValueError, TypeError):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return resources(parsed)


def local_minute(seconds: float, zone: str) -> str:
    """An instant as a configuration writes it: local time in ``zone`` to the minute
    (``2026-12-24T00:00``), as a one-off window's ``from`` and ``to`` are written; the seconds when
    the zone is unknown here (the service validated it; an older host may lack it)."""
    from datetime import datetime
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        tz = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return f"{seconds:.0f}"
    return datetime.fromtimestamp(seconds, tz).strftime("%Y-%m-%dT%H:%M")


def percent(used: int, limit: int | None) -> str:
    """``used`` as a share of ``limit``: ``50%``, ``<1%``, ``120%``; empty without a finite limit."""
    if limit is None or limit <= 0 or is_unlimited(limit):
        return ""
    share = Fraction(used * 100, limit)
    if 0 < share < 1:
        return "<1%"
    return f"{round(share)}%"


def _vcore(text: str) -> int:
    """``vcore`` as the configuration reads it (cores, or ``500m``), and decimals as Kubernetes does."""
    try:
        return Resource.from_config({"vcore": text})["vcore"]
    except ValueError:
        value = parse_k8s_quantity(text)
        if value < 0:
            raise InputError(f"negative quantity {text!r}") from None
        return math.ceil(value * 1000)


class _WholeUnits(InputError):
    """A fraction of a resource counted in whole units (said as it is, not as "not a quantity")."""


def _quantity(name: str, text: str) -> tuple[str, int]:
    """``name=text`` in internal units (``cpu`` is ``vcore``); ValueError when ``text`` is no quantity."""
    if name == "vcore":
        return "vcore", _vcore(text)
    if name == "cpu":
        return "vcore", Resource.from_k8s({"cpu": text})["vcore"]
    try:
        return name, Resource.from_config({name: text})[name]
    except ValueError:
        if _is_bytes(name):
            return name, Resource.from_k8s({name: text})[name]
    # a count (GPUs, pods, extended resources): Kubernetes allows whole units only, and rounding a
    # fraction up would ask for more than was typed
    value = parse_k8s_quantity(text)
    if value.denominator != 1:
        raise _WholeUnits(f"{name} is counted in whole units")
    return name, Resource.from_k8s({name: text})[name]


def parse_resources(words: Iterable[str]) -> dict[str, int]:
    """``NAME=QUANTITY`` words in internal units, the configuration's way and Kubernetes' way:
    ``cpu=2`` and ``vcore=2`` are 2000 milli-cores, ``vcore=500m`` 500, ``memory=1Gi`` and
    ``memory=1.5Gi`` bytes, ``nvidia.com/gpu=1`` a count. Raises :class:`ValueError` naming the word."""
    out: dict[str, int] = {}
    for word in words:
        name, sep, text = word.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name or not text:
            raise InputError(f"{word!r}: expected NAME=QUANTITY (for example cpu=2 or memory=4Gi)")
        try:
            key, value = _quantity(name, text)
        except _WholeUnits as exc:
            raise InputError(f"{word!r}: {exc}") from None
        except ValueError as exc:
            hint = " (bytes: for example 8G = 8,000,000,000 or 8Gi = 8 x 2^30)" if _is_bytes(name) else ""
            raise InputError(f"{word!r}: not a quantity{hint or f' ({exc})'}") from None
        if value > INT64_MAX:
            raise InputError(f"{word!r}: too large")
        if key in out:
            also = " (cpu is vcore)" if key == "vcore" else ""
            raise InputError(f"{word!r}: {key} is given twice{also}")
        out[key] = value
    return out
