"""Where the rollup periods start and end: minutes, hours, days, weeks and months in a time zone.

Times are whole milliseconds since the Unix epoch (UTC). A minute starts on a UTC minute (every
time zone in use is a whole number of minutes off UTC). An hour starts where the zone's clock shows
``:00``: with a whole-hour offset that is a UTC hour, with India's +05:30 half past a UTC hour. A
day starts at the zone's midnight (so a day is 23, 24 or 25 hours long across a daylight-saving
change), a week at Monday's midnight (ISO 8601), a month at the midnight that starts its first day.
The zone is an IANA name (``Europe/Zurich``); the default is ``UTC``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from quotaplane.errors import InputError

__all__ = ["HOUR", "MINUTE", "RESOLUTIONS", "STEPS", "Calendar", "zone"]

MINUTE = 60_000
HOUR = 3_600_000

#: the rollup resolutions, finest first (their index is the resolution's number in the store)
RESOLUTIONS = ("minute", "hour", "day", "week", "month")
#: the steps a query may ask for
STEPS = ("minute", "hour", "day", "week", "month")


def zone(name: str) -> ZoneInfo:
    """The time zone ``name``; ``ValueError`` naming it when it is unknown."""
    if not isinstance(name, str) or not name:
        raise InputError(f"a time zone must be an IANA name such as 'Europe/Zurich', got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(f"unknown time zone {name!r} (an IANA name such as 'Europe/Zurich' or 'UTC')") \
            from None


class Calendar:
    """The period boundaries of one time zone."""

    __slots__ = ("name", "tz")

    def __init__(self, name: str = "UTC") -> None:
        self.name = name
        self.tz = zone(name)

    def _local(self, ms: int) -> datetime:
        return datetime.fromtimestamp(ms // 1000, UTC).astimezone(self.tz)

    def _ms(self, local: datetime) -> int:
        # a wall time in a daylight-saving gap does not exist; fold=0 maps it after the gap
        return int(local.replace(tzinfo=self.tz).timestamp()) * 1000

    def next(self, resolution: str, ms: int) -> int:
        """The first boundary of ``resolution`` strictly after ``ms``."""
        if resolution == "minute":
            return (ms // MINUTE + 1) * MINUTE
        if resolution == "hour":
            off = self._local(ms).utcoffset()
            shift = (int(off.total_seconds()) * 1000 if off is not None else 0) % HOUR
            return ((ms - shift) // HOUR + 1) * HOUR + shift
        local = self._local(ms).replace(tzinfo=None)
        midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
        if resolution == "day":
            cand = midnight + timedelta(days=1)
        elif resolution == "week":
            cand = midnight + timedelta(days=7 - midnight.weekday())
        elif resolution == "month":
            cand = (midnight.replace(day=1) + timedelta(days=32)).replace(day=1)
        else:
            raise InputError(f"unknown resolution {resolution!r}; one of {', '.join(RESOLUTIONS)}")
        out = self._ms(cand)
        while out <= ms:        # a repeated wall hour: take the next period
            cand = cand + timedelta(days=1)
            out = self._ms(cand)
        return out

    def floor(self, resolution: str, ms: int) -> int:
        """The last boundary of ``resolution`` at or before ``ms``."""
        nxt = self.next(resolution, ms)
        if resolution == "minute":
            return nxt - MINUTE
        if resolution == "hour":
            return nxt - HOUR if nxt - HOUR <= ms else nxt - 2 * HOUR
        # step back a period: the boundary after (ms - a period's longest length) ≤ ms
        longest = {"day": 26 * HOUR, "week": 7 * 24 * HOUR + 2 * HOUR, "month": 32 * 24 * HOUR}[resolution]
        b = self.next(resolution, ms - longest)
        while True:
            n = self.next(resolution, b)
            if n > ms:
                return b
            b = n

    def is_boundary(self, resolution: str, ms: int) -> bool:
        """True when ``ms`` starts a period of ``resolution``."""
        return self.floor(resolution, ms) == ms

    def boundaries(self, resolution: str, start: int, end: int) -> list[int]:
        """Every boundary of ``resolution`` in ``[start, end]``."""
        out = []
        b = start if self.is_boundary(resolution, start) else self.next(resolution, start)
        while b <= end:
            out.append(b)
            b = self.next(resolution, b)
        return out
