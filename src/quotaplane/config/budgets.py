"""The partition's ``budgets`` (quotaplane extension, issue 34): resource-hours per period on a queue
at any level, on a user or a group inside a queue, with what happens when one is exhausted.

::

    partitions:
      - name: default
        budgets:
          - queue: root.teams.a            # the queue (any level); counts its whole subtree
            elasticquota: team-a           # … or, instead of queue, an elastic quota (and its children)
            user: alice                    # optional: one user (or "*": each user) inside that queue
            group: ml                      # optional, instead of user: one group (or "*": each group)
            resourcehours:                 # required: per resource, in resource-hours per period
              nvidia.com/gpu: 2000         # GPU-hours; vcore in core-hours, memory in GiB-hours
            period: month                  # day | week | month | a duration (30d: fixed 30-day periods)
            timezone: Europe/Zurich        # where days, weeks and months start (default UTC)
            resetday: 1                    # month: 1..28 (default 1); week: monday..sunday
            start: "2026-01-01"            # a duration period: its first start (default: epoch)
            halflife: 7d                   # instead of period: decayed consumption, never reset
            exhausted: hold                # hold (default) | preempt | besteffort
            grace: 10m                     # preempt: how long the scope stays exhausted first (default 0)
            warnings: [50, 80, 100]        # percentages at which the budget warns (default 50, 80, 100)

Every problem is one sentence naming the budget (``budgets[0] (root.teams.a): period: …``); the
loader adds the line. Amounts are converted to quotaplane's own units times milliseconds, exactly
(resource-hours may be fractional; the amount is floored to a whole unit-millisecond).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from fractions import Fraction
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from quotaplane.config.history import parse_duration
from quotaplane.errors import InputError

__all__ = ["BESTEFFORT", "CALENDAR", "HOLD", "MODES", "PREEMPT", "BudgetSpec", "BudgetSpecError",
           "check_budgets", "parse_budgets", "unit_of"]

#: calendar periods (the others are durations)
CALENDAR = ("day", "week", "month")
HOLD, PREEMPT, BESTEFFORT = "hold", "preempt", "besteffort"
#: what happens when a budget is exhausted (docs/budgets.md)
MODES = (HOLD, PREEMPT, BESTEFFORT)
_KEYS = ("queue", "elasticquota", "user", "group", "resourcehours", "period", "timezone", "resetday", "start",
         "halflife",
         "exhausted", "grace", "warnings")
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_HOUR_MS = 3_600_000
_GIB = 1 << 30
_QUEUE = re.compile(r"^root(\.[^.\s]+)*$")


class BudgetSpecError(InputError):
    """A ``budgets`` entry that is wrong; the message names the entry and the key."""


def unit_of(resource: str) -> tuple[int, str]:
    """How many of quotaplane's units make one human unit of ``resource``, and the unit's name (the
    same units as the usage history's reports: cores, GiB, GPUs, else the resource itself)."""
    if resource == "vcore":
        return 1000, "core"
    if resource in ("memory", "ephemeral-storage") or resource.endswith("memory"):
        return _GIB, "GiB"
    if "gpu" in resource:
        return 1, "GPU"
    return 1, resource


@dataclass(frozen=True, slots=True)
class BudgetSpec:
    """One budget (see the module docstring). ``limits``: per resource, in unit-milliseconds;
    ``period``: ``day``/``week``/``month`` or ``""`` with ``period_ms`` (a duration) or with
    ``half_life_ms`` (decayed). ``index`` is its place in the list (for messages)."""

    index: int
    queue: str
    user: str | None
    group: str | None
    limits: Mapping[str, int]
    period: str
    period_ms: int
    timezone: str
    reset_day: int
    start_ms: int
    half_life_ms: int
    mode: str
    grace_ms: int
    warnings: tuple[int, ...]
    #: the elastic quota the budget is on (``queue`` is then ``""``)
    elastic: str | None = None

    @property
    def kind(self) -> str:
        """``queue``, ``user``, ``group`` or ``elasticquota``."""
        if self.elastic is not None:
            return "elasticquota"
        return "user" if self.user is not None else "group" if self.group is not None else "queue"

    @property
    def path(self) -> str:
        """Where the budget is set: its queue's path, or its elastic quota's name (a violation's path)."""
        return self.elastic if self.elastic is not None else self.queue

    @property
    def name(self) -> str:
        """How messages name the budget's scope: ``root.a``, ``user alice in root.a``,
        ``elastic quota team-a``."""
        if self.elastic is not None:
            return f"elastic quota {self.elastic}"
        if self.user is not None:
            return f"user {self.user} in {self.queue}"
        if self.group is not None:
            return f"group {self.group} in {self.queue}"
        return self.queue

    @property
    def decayed(self) -> bool:
        """The consumption decays with a half-life instead of resetting."""
        return self.half_life_ms > 0

    def period_text(self) -> str:
        """``month (from day 1, UTC)``, ``30d``, ``half-life 7d``."""
        if self.decayed:
            return f"half-life {_duration_text(self.half_life_ms)}"
        if self.period == "month":
            return f"month (from day {self.reset_day}, {self.timezone})"
        if self.period == "week":
            return f"week (from {_DAYS[self.reset_day - 1]}, {self.timezone})"
        if self.period == "day":
            return f"day ({self.timezone})"
        return _duration_text(self.period_ms)


def _duration_text(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", _HOUR_MS), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or not value.isprintable() or value != value.strip():
        raise BudgetSpecError(f"{where}: expected a name, got {value!r}")
    return value


def _limits(value: Any, where: str) -> dict[str, int]:
    if not isinstance(value, Mapping) or not value:
        raise BudgetSpecError(f"{where}: expected a mapping of resource name to resource-hours, "
                              f"got {value!r}")
    out: dict[str, int] = {}
    for res, raw in value.items():
        if not isinstance(res, str) or not res:
            raise BudgetSpecError(f"{where}: a resource name must be a non-empty string, got {res!r}")
        try:
            if isinstance(raw, bool) or not isinstance(raw, int | float | str):
                raise ValueError
            hours = Fraction(str(raw))
        except (ValueError, ZeroDivisionError):
            raise BudgetSpecError(f"{where}.{res}: expected resource-hours (a number ≥ 0), "
                                  f"got {raw!r}") from None
        if hours < 0:
            raise BudgetSpecError(f"{where}.{res}: expected resource-hours (a number ≥ 0), got {raw!r}")
        per, _ = unit_of(res)
        out[res] = int(hours * per * _HOUR_MS)
    return out


def _zone(value: Any, where: str) -> str:
    try:
        if not isinstance(value, str) or not value:
            raise ValueError
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise BudgetSpecError(f"{where}: unknown time zone {value!r} (an IANA name such as 'Europe/Zurich' "
                              "or 'UTC')") from None
    return value


def _start(value: Any, tz: str, where: str) -> int:
    if isinstance(value, datetime | date):
        text = value.isoformat()
    elif isinstance(value, str):
        text = value
    else:
        raise BudgetSpecError(f"{where}: expected a date or time such as '2026-01-01', got {value!r}")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise BudgetSpecError(f"{where}: expected a date or time such as '2026-01-01', "
                              f"got {value!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=ZoneInfo(tz))
    return round(when.astimezone(UTC).timestamp() * 1000)


def _reset_day(value: Any, period: str, where: str) -> int:
    if period == "month":
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 28:
            raise BudgetSpecError(f"{where}: expected a day of the month 1..28, got {value!r}")
        return value
    if period != "week":
        raise BudgetSpecError(f"{where}: only a week or month period has a reset day")
    return _weekday(value, where)


def _weekday(value: Any, where: str) -> int:
    if isinstance(value, str) and value.lower() in _DAYS:
        return _DAYS.index(value.lower()) + 1
    if not isinstance(value, bool) and isinstance(value, int) and 1 <= value <= 7:
        return value
    raise BudgetSpecError(f"{where}: expected a day of the week (monday..sunday or 1..7), got {value!r}")


def _warnings(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= 100
                                          for v in value):
        raise BudgetSpecError(f"{where}: expected a list of percentages 1..100, got {value!r}")
    return tuple(sorted(set(value)))


def _elastic_head(i: int, raw: Mapping[str, Any]) -> tuple[str, str]:
    where = f"budgets[{i}]"
    if "queue" in raw:
        raise BudgetSpecError(f"{where}: a budget is on a queue or on an elastic quota, not both")
    name = _name(raw["elasticquota"], f"{where}.elasticquota")
    where = f"budgets[{i}] (elastic quota {name})"
    if "user" in raw or "group" in raw:
        raise BudgetSpecError(f"{where}: user or group budgets are set in a queue, not on an elastic quota")
    return name, where


def _head(i: int, raw: Any) -> tuple[str, str]:
    """The entry's queue (or elastic quota) and how messages name the entry; its keys checked."""
    where = f"budgets[{i}]"
    if not isinstance(raw, Mapping):
        raise BudgetSpecError(f"{where}: expected a mapping with queue and resourcehours, got {raw!r}")
    if "elasticquota" in raw:
        name, where = _elastic_head(i, raw)
    elif "queue" not in raw:
        raise BudgetSpecError(f"{where}: missing key 'queue' (the queue the budget is set on) or "
                              "'elasticquota'")
    else:
        name = _name(raw["queue"], f"{where}.queue")
        if not _QUEUE.match(name):
            raise BudgetSpecError(f"{where}.queue: expected a full queue path such as root.teams.a, "
                                  f"got {name!r}")
        where = f"budgets[{i}] ({name})"
    for key in raw:
        if key not in _KEYS:
            raise BudgetSpecError(f"{where}: unknown key {key!r}; allowed keys: {', '.join(_KEYS)}")
    if "user" in raw and "group" in raw:
        raise BudgetSpecError(f"{where}: a budget is on a user or on a group, not both")
    if "resourcehours" not in raw:
        raise BudgetSpecError(f"{where}: missing key 'resourcehours' (resource-hours per period, "
                              "e.g. {nvidia.com/gpu: 2000})")
    return name, where


def _period(raw: Mapping[str, Any], where: str) -> tuple[str, int, int]:
    """``(calendar period, duration period ms, half-life ms)``: exactly one of them is set."""
    if "halflife" in raw:
        if "period" in raw:
            raise BudgetSpecError(f"{where}: period and halflife exclude each other (a budget resets at "
                                  "each period or decays, not both)")
        half_life = parse_duration(raw["halflife"], f"{where}.halflife")
        if half_life <= 0:
            raise BudgetSpecError(f"{where}.halflife: expected a positive duration such as 7d, got "
                                  f"{raw['halflife']!r}")
        return "", 0, half_life
    value = raw.get("period", "month")
    if isinstance(value, str) and value in CALENDAR:
        return value, 0, 0
    try:
        period_ms = parse_duration(value, f"{where}.period")
    except InputError:
        raise BudgetSpecError(f"{where}.period: expected day, week, month or a duration such as 30d, "
                              f"got {value!r}") from None
    if period_ms < 60_000:
        raise BudgetSpecError(f"{where}.period: a period lasts at least a minute, got {value!r}")
    return "", period_ms, 0


def _mode(raw: Mapping[str, Any], where: str) -> tuple[str, int, tuple[int, ...]]:
    """``(exhausted mode, grace ms, warning percentages)``."""
    mode = raw.get("exhausted", HOLD)
    if mode not in MODES:
        raise BudgetSpecError(f"{where}.exhausted: expected one of {', '.join(MODES)}, got {mode!r}")
    grace = parse_duration(raw["grace"], f"{where}.grace") if "grace" in raw else 0
    if grace and mode != PREEMPT:
        raise BudgetSpecError(f"{where}.grace: only a budget with exhausted: preempt has a grace delay")
    warnings = _warnings(raw["warnings"], f"{where}.warnings") if "warnings" in raw else (50, 80, 100)
    return mode, grace, warnings


def _one(i: int, raw: Any) -> BudgetSpec:
    target, where = _head(i, raw)
    elastic = target if "elasticquota" in raw else None
    queue = "" if elastic is not None else target
    user = _name(raw["user"], f"{where}.user") if "user" in raw else None
    group = _name(raw["group"], f"{where}.group") if "group" in raw else None
    limits = _limits(raw["resourcehours"], f"{where}.resourcehours")
    tz = _zone(raw.get("timezone", "UTC"), f"{where}.timezone")
    period, period_ms, half_life = _period(raw, where)
    reset_day = _reset_day(raw["resetday"], period, f"{where}.resetday") if "resetday" in raw else 1
    start_ms = 0
    if "start" in raw:
        if not period_ms:
            raise BudgetSpecError(f"{where}.start: only a duration period (such as 30d) has a start")
        start_ms = _start(raw["start"], tz, f"{where}.start")
    mode, grace, warnings = _mode(raw, where)
    return BudgetSpec(i, queue, user, group, limits, period, period_ms, tz, reset_day, start_ms, half_life,
                      mode, grace, warnings, elastic)


def parse_budgets(raw: Any) -> tuple[BudgetSpec, ...]:
    """The budgets of a partition's ``budgets`` extension (None: none); :class:`BudgetSpecError` naming
    the first wrong entry and key. Two budgets on the same scope are an error naming both."""
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise BudgetSpecError(f"budgets: expected a list of budgets, got {type(raw).__name__}")
    specs = tuple(_one(i, item) for i, item in enumerate(raw))
    seen: dict[tuple[str, str | None, str | None, str | None], BudgetSpec] = {}
    for spec in specs:
        key = (spec.queue, spec.user, spec.group, spec.elastic)
        if key in seen:
            raise BudgetSpecError(f"budgets[{spec.index}] ({spec.name}): the same scope as "
                                  f"budgets[{seen[key].index}]; one budget per scope")
        seen[key] = spec
    return specs


def check_budgets(raw: Any) -> list[str]:
    """The problems of a ``budgets`` value (``[]``: valid): the loader's check of the extension key."""
    try:
        parse_budgets(raw)
    except InputError as exc:
        return [str(exc)]
    return []
