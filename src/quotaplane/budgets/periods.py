"""Where a budget's period starts and ends (docs/budgets.md "Periods").

Times are whole milliseconds since the Unix epoch (UTC), taken from the events (never a clock). A
calendar period starts at the midnight of its zone: a day at every midnight, a week at the midnight
that starts its reset weekday, a month at the midnight that starts its reset day (so a month or a day
across a daylight-saving change is an hour shorter or longer, as Slurm's calendar resets are, TM-U9).
A duration period (``30d``) is a fixed length from its start (default the epoch): periods follow each
other without gaps and never depend on a zone.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from quotaplane.config.budgets import BudgetSpec

__all__ = ["iso", "period_of"]


@functools.lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def _ms(local: datetime) -> int:
    return round(local.astimezone(UTC).timestamp() * 1000)


def _month_start(year: int, month: int, day: int, tz: ZoneInfo) -> datetime:
    while month > 12:
        year, month = year + 1, month - 12
    while month < 1:
        year, month = year - 1, month + 12
    return datetime(year, month, day, tzinfo=tz)


def period_of(spec: BudgetSpec, ms: int) -> tuple[int, int]:
    """The period of ``spec`` that holds instant ``ms``: ``(start, end)``, start included, end not."""
    if spec.period_ms:
        size = spec.period_ms
        start = spec.start_ms + (ms - spec.start_ms) // size * size
        return start, start + size
    tz = _zone(spec.timezone)
    local = datetime.fromtimestamp(ms / 1000, tz)
    midnight = datetime(local.year, local.month, local.day, tzinfo=tz)
    if spec.period == "day":
        return _ms(midnight), _ms(midnight + timedelta(days=1))
    if spec.period == "week":
        back = (local.isoweekday() - spec.reset_day) % 7
        first = datetime.combine(midnight.date() - timedelta(days=back), datetime.min.time(), tz)
        return _ms(first), _ms(datetime.combine(first.date() + timedelta(days=7), datetime.min.time(), tz))
    day = spec.reset_day
    first = _month_start(local.year, local.month, day, tz)
    if _ms(first) > ms:
        first = _month_start(local.year, local.month - 1, day, tz)
    nxt = _month_start(first.year, first.month + 1, day, tz)
    return _ms(first), _ms(nxt)


def iso(ms: int, timezone: str = "UTC") -> str:
    """``ms`` as an ISO 8601 time in ``timezone`` (to the second), for messages and REST."""
    return datetime.fromtimestamp(ms / 1000, _zone(timezone)).isoformat(timespec="seconds")
