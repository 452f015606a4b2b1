"""Turning history into what people read: human units, ranges by name, the bill.

* Units. Resources are integers in quotaplane's units (``vcore`` milli-cores, ``memory`` and
  ``ephemeral-storage`` bytes, anything else whole units); integrals are resource-milliseconds. A
  report prints **resource-hours** in human units: core-hours, GiB-hours, GPU-hours.
* Named periods (``last-month``, ``this-week``, …) are whole days, weeks or months in the
  history's time zone.
* The bill (chargeback): per scope and resource, ``hours × price`` with prices per resource-hour
  in human units (``history.prices``); when ``history.borrowedprices`` names a resource, the part
  above the guarantee (``borrowed``) is priced with it and the rest (within the guarantee) with
  ``prices``. Amounts are exact fractions until printed, rounded half-even to cents.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

from quotaplane.errors import InputError
from quotaplane.history.calendar import Calendar
from quotaplane.history.query import Series

__all__ = ["PERIODS", "Bill", "BillLine", "bill", "hours", "iso", "money", "named_period", "parse_time",
           "unit_of"]

_HOUR_MS = 3_600_000
_GIB = 1 << 30
#: the period names a range may be given by
PERIODS = ("today", "yesterday", "this-week", "last-week", "this-month", "last-month", "last-24h", "last-7d",
           "last-30d")


def unit_of(resource: str) -> tuple[int, str]:
    """How many of quotaplane's units make one human unit of ``resource``, and its name."""
    if resource == "vcore":
        return 1000, "core"
    if resource in ("memory", "ephemeral-storage") or resource.endswith("memory"):
        return _GIB, "GiB"
    if "gpu" in resource:
        return 1, "GPU"
    return 1, resource


def hours(resource: str, ms: int) -> Fraction:
    """``ms`` resource-milliseconds of ``resource`` in human resource-hours (exact)."""
    per, _ = unit_of(resource)
    return Fraction(ms, _HOUR_MS * per)


#: the first instant a history time may not reach (9999-01-01T00:00Z, in ms)
_LAST_MS = 253_370_764_800_000


def parse_time(text: str, calendar: Calendar) -> int:
    """``2026-11-01``, ``2026-11-01T08:00`` (the history's time zone), ``…Z`` / ``…+01:00`` or seconds
    since the epoch → milliseconds. ``ValueError`` naming the text otherwise."""
    raw = text.strip()
    try:
        if raw.replace(".", "", 1).isdigit():
            ms = round(float(raw) * 1000)
        else:
            if len(raw) == 10:
                d = date.fromisoformat(raw)
                dt = datetime(d.year, d.month, d.day, tzinfo=calendar.tz)
            else:
                dt = datetime.fromisoformat(raw.replace("Z", "+00:00"))
                if dt.tzinfo is None:
                    dt = dt.replace(tzinfo=calendar.tz)
            ms = round(dt.timestamp() * 1000)
    except OverflowError:
        ms = _LAST_MS                   # said as out of range below
    except ValueError:
        raise InputError(f"{text!r} is not a time: use 2026-11-01, 2026-11-01T08:00, an offset such as "
                         "2026-11-01T08:00+01:00, or seconds since 1970") from None
    if not 0 <= ms < _LAST_MS:
        # beyond these the clock conversions of the answer fail (year 0, year 318857, an OSError)
        shown = text if len(text) <= 40 else f"{text[:37]}..."
        raise InputError(f"{shown!r} is out of range: a time between 1970-01-01 and 9999-01-01 (UTC)")
    return ms


def named_period(name: str, now: int, calendar: Calendar) -> tuple[int, int]:
    """The range ``[start, end)`` of a named period ending no later than ``now`` (ms)."""
    if name == "last-24h":
        return now - 24 * _HOUR_MS, now
    if name == "last-7d":
        return now - 7 * 24 * _HOUR_MS, now
    if name == "last-30d":
        return now - 30 * 24 * _HOUR_MS, now
    unit = {"today": "day", "yesterday": "day", "this-week": "week", "last-week": "week",
            "this-month": "month", "last-month": "month"}.get(name)
    if unit is None:
        raise InputError(f"unknown period {name!r}; one of {', '.join(PERIODS)}")
    start = calendar.floor(unit, now)
    if name.startswith("this") or name == "today":
        return start, now
    return calendar.floor(unit, start - 1), start


def iso(ms: int, calendar: Calendar) -> str:
    """``ms`` as an ISO 8601 time in the history's time zone."""
    dt = datetime.fromtimestamp(ms / 1000, UTC).astimezone(calendar.tz)
    return dt.isoformat(timespec="seconds") if not dt.microsecond else dt.isoformat(timespec="milliseconds")


@dataclass(frozen=True, slots=True)
class BillLine:
    """What one scope owes for one resource over the range."""

    name: str
    resource: str
    hours: Fraction
    borrowed_hours: Fraction
    guaranteed_cost: Fraction
    borrowed_cost: Fraction

    @property
    def total(self) -> Fraction:
        """The line's amount."""
        return self.guaranteed_cost + self.borrowed_cost


@dataclass(frozen=True, slots=True)
class Bill:
    """The bill of a range: a line per scope and priced resource. ``counted``: the scopes whose lines
    make the total (not those that hold another scope of the bill: a parent queue's use is its
    children's)."""

    currency: str
    lines: list[BillLine]
    counted: frozenset[str] = frozenset()

    def by_scope(self) -> dict[str, Fraction]:
        """Each scope's total."""
        out: dict[str, Fraction] = {}
        for line in self.lines:
            out[line.name] = out.get(line.name, Fraction(0)) + line.total
        return out

    @property
    def total(self) -> Fraction:
        """Everything, each use counted once."""
        return sum((line.total for line in self.lines if line.name in self.counted), Fraction(0))


def money(amount: Fraction) -> Decimal:
    """An exact amount rounded half-even to cents (when printed)."""
    return (Decimal(amount.numerator) / Decimal(amount.denominator)).quantize(Decimal("0.01"),
                                                                               rounding=ROUND_HALF_EVEN)


def _sums(s: Series, metric: str) -> dict[str, int]:
    """``metric``'s integral per resource over all of ``s``'s points."""
    out: dict[str, int] = {}
    for p in s.points:
        for r, v in p.integrals.get(metric, {}).items():
            out[r] = out.get(r, 0) + v
    return out


def _lines(s: Series, prices: Mapping[str, Decimal], borrowed_prices: Mapping[str, Decimal]
           ) -> Iterator[BillLine]:
    """``s``'s bill lines, one per priced resource it used."""
    used, borrowed = _sums(s, "used"), _sums(s, "borrowed")
    for r in sorted(used):
        price, bprice = prices.get(r), borrowed_prices.get(r)
        if price is None and bprice is None:
            continue
        h, bh = hours(r, used[r]), hours(r, borrowed.get(r, 0))
        p_in = Fraction(price) if price is not None else Fraction(0)
        if bprice is None:
            yield BillLine(s.name, r, h, bh, h * p_in, Fraction(0))
        else:
            yield BillLine(s.name, r, h, bh, (h - bh) * p_in, bh * Fraction(bprice))


def _holders(names: set[str], parent_of: Callable[[str], str | None]) -> set[str]:
    """The scopes among ``names``' ancestors (their use is their children's: counted once)."""
    holders: set[str] = set()
    for name in names:
        up, seen = parent_of(name), {name}
        while up is not None and up not in seen:
            seen.add(up)
            holders.add(up)
            up = parent_of(up)
    return holders


def bill(series: Iterable[Series], prices: Mapping[str, Decimal], borrowed_prices: Mapping[str, Decimal],
         currency: str = "", parent_of: Callable[[str], str | None] | None = None) -> Bill:
    """The bill of ``series`` (the whole range of each scope: the sum of its points); ``parent_of``
    names a scope's parent (queues, quotas, tree nodes) so that the total counts each use once."""
    lines = [ln for s in series for ln in _lines(s, prices, borrowed_prices)]
    names = {ln.name for ln in lines}
    holders = _holders(names, parent_of) if parent_of is not None else set()
    return Bill(currency, lines, frozenset(names - holders))
