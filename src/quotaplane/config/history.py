"""The partition's ``history`` settings (quotaplane extension, issue 33): time zone, retention, prices,
fair share with memory. Read by :mod:`quotaplane.history`; validated when the configuration loads.

::

    partitions:
      - name: default
        history:                         # optional; every key optional
          enabled: true                  # false: no accounting (the admission path does less)
          timezone: Europe/Zurich        # IANA name; days, weeks and months of reports and rollups
          retention:                     # how long each resolution's rows are kept; 0 = for ever
            minute: 2d                   # defaults: minute 2d, hour 90d, day 0, week 0, month 0
            hour: 90d
          currency: CHF                  # printed with prices (default: none)
          prices:                        # per resource-hour: vcore per core, memory per GiB, others per unit
            nvidia.com/gpu: 2.50
            vcore: 0.04
          borrowedprices:                # optional: the part above the guarantee priced apart
            nvidia.com/gpu: 4.00
          fairshare:                     # ordering of waiting work by decayed usage (docs/history.md)
            enabled: false
            halflife: 7d                 # Slurm's PriorityDecayHalfLife default
            weights: {root.teams.a: 2}   # a queue's share weight (default 1)

Every problem is a :class:`SettingsError` naming the key (``history.retention.minute: …``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from quotaplane.errors import InputError

__all__ = ["DEFAULT_RETENTION", "FairShareSettings", "HistorySettings", "SettingsError", "parse_duration",
           "parse_settings"]

_DAY = 86_400_000
#: how long rows are kept per resolution by default (ms; 0: for ever)
DEFAULT_RETENTION: Mapping[str, int] = MappingProxyType(
    {"minute": 2 * _DAY, "hour": 90 * _DAY, "day": 0, "week": 0, "month": 0})
#: the rollup resolutions (quotaplane.history.calendar.RESOLUTIONS)
RESOLUTIONS = ("minute", "hour", "day", "week", "month")
_KEYS = ("enabled", "timezone", "retention", "currency", "prices", "borrowedprices", "fairshare")
_FAIR_KEYS = ("enabled", "halflife", "weights")
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": _DAY, "w": 7 * _DAY, "y": 365 * _DAY}
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d|w|y)\s*$")


class SettingsError(InputError):
    """A ``history`` setting that is wrong; the message names the key and what is expected."""


def parse_duration(value: Any, where: str) -> int:
    """``"90d"``, ``"12h"``, ``"30m"``, ``"45s"``, ``"2w"``, ``"1y"`` or ``0`` → milliseconds."""
    if value == 0 and not isinstance(value, bool):
        return 0
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return int(m.group(1)) * _UNITS[m.group(2)]
    raise SettingsError(f"{where}: expected a duration such as 90d, 12h, 30m or 0, got {value!r}")


def _mapping(value: Any, where: str, keys: tuple[str, ...] | None = None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SettingsError(f"{where}: expected a mapping, got {type(value).__name__}")
    if keys is not None:
        for k in value:
            if k not in keys:
                raise SettingsError(f"{where}: unknown key {k!r}; allowed keys: {', '.join(keys)}")
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise SettingsError(f"{where}: expected true or false, got {value!r}")
    return value


def _prices(value: Any, where: str) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for name, raw in _mapping(value, where).items():
        if not isinstance(name, str) or not name:
            raise SettingsError(f"{where}: a resource name must be a non-empty string, got {name!r}")
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            raise SettingsError(f"{where}.{name}: expected a price (a number ≥ 0), got {raw!r}")
        try:
            price = Decimal(str(raw))
        except InvalidOperation:
            raise SettingsError(f"{where}.{name}: expected a price (a number ≥ 0), got {raw!r}") from None
        if not price.is_finite() or price < 0:
            raise SettingsError(f"{where}.{name}: expected a price (a number ≥ 0), got {raw!r}")
        out[name] = price
    return out


@dataclass(frozen=True, slots=True)
class FairShareSettings:
    """Ordering of waiting work by decayed usage (off unless ``enabled``)."""

    enabled: bool = False
    half_life_ms: int = 7 * _DAY
    weights: Mapping[str, Decimal] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class HistorySettings:
    """A partition's history settings (see the module docstring)."""

    enabled: bool = True
    timezone: str = "UTC"
    retention: Mapping[str, int] = field(default_factory=lambda: DEFAULT_RETENTION)
    currency: str = ""
    prices: Mapping[str, Decimal] = field(default_factory=lambda: MappingProxyType({}))
    borrowed_prices: Mapping[str, Decimal] = field(default_factory=lambda: MappingProxyType({}))
    fairshare: FairShareSettings = field(default_factory=FairShareSettings)


def _timezone(tz: Any) -> str:
    try:
        ZoneInfo(tz) if isinstance(tz, str) and tz else ZoneInfo("")
    except (ZoneInfoNotFoundError, ValueError):
        raise SettingsError(f"history.timezone: unknown time zone {tz!r} (an IANA name such as "
                            "'Europe/Zurich' or 'UTC')") from None
    return str(tz)


def _retention(data: Mapping[str, Any]) -> dict[str, int]:
    retention = dict(DEFAULT_RETENTION)
    if "retention" in data:
        for res, value in _mapping(data["retention"], "history.retention", RESOLUTIONS).items():
            retention[res] = parse_duration(value, f"history.retention.{res}")
    return retention


def _weight(queue: Any, w: Any) -> Decimal:
    try:
        weight = Decimal(str(w)) if not isinstance(w, bool) else Decimal(-1)
    except InvalidOperation:
        weight = Decimal(-1)
    if not isinstance(queue, str) or not weight.is_finite() or weight <= 0:
        raise SettingsError(f"history.fairshare.weights.{queue}: expected a weight > 0, got {w!r}")
    return weight


def _fairshare(raw: Any) -> FairShareSettings:
    f = _mapping(raw, "history.fairshare", _FAIR_KEYS)
    on = _bool(f["enabled"], "history.fairshare.enabled") if "enabled" in f else True
    half = (parse_duration(f["halflife"], "history.fairshare.halflife") if "halflife" in f
            else FairShareSettings().half_life_ms)
    if half <= 0:
        raise SettingsError("history.fairshare.halflife: must be longer than 0 (decay needs a half-life)")
    weights = {str(q).lower(): _weight(q, w)
               for q, w in _mapping(f.get("weights", {}), "history.fairshare.weights").items()}
    return FairShareSettings(on, half, MappingProxyType(weights))


def parse_settings(raw: Any) -> HistorySettings:
    """The settings of a partition's ``history`` extension (None: the defaults)."""
    if raw is None:
        return HistorySettings()
    data = _mapping(raw, "history", _KEYS)
    enabled = _bool(data["enabled"], "history.enabled") if "enabled" in data else True
    tz = _timezone(data.get("timezone", "UTC"))
    currency = data.get("currency", "")
    if not isinstance(currency, str):
        raise SettingsError(f"history.currency: expected a text such as CHF or USD, got {currency!r}")
    prices = _prices(data["prices"], "history.prices") if "prices" in data else {}
    borrowed = _prices(data["borrowedprices"], "history.borrowedprices") if "borrowedprices" in data else {}
    fair = _fairshare(data["fairshare"]) if "fairshare" in data else FairShareSettings()
    return HistorySettings(enabled, tz, MappingProxyType(_retention(data)), currency,
                           MappingProxyType(prices), MappingProxyType(borrowed), fair)
