"""The partition's ``windows``: quota overrides on a schedule (quotaplane extension, issue 34;
docs/windows.md).

::

    partitions:
      - name: default
        windows:
          - name: finance-evening            # required, unique in the partition
            queue: root.finance              # the queue whose settings it overrides
            cron: "0 18 * * 1-5"             # a schedule: minute hour day-of-month month day-of-week …
            duration: 5h                     # … each occurrence lasting this long
            timezone: Europe/Zurich          # where the cron's hours are read (default UTC)
            max: {nvidia.com/gpu: 64}        # overrides: the queue's max, guaranteed, …
            guaranteed: {nvidia.com/gpu: 64}
            resourcehours: {nvidia.com/gpu: 500}   # … and its budget (docs/budgets.md)
          - name: christmas
            queue: root.research
            from: "2026-12-24T00:00"         # or an absolute window: from … to (in its time zone)
            to: "2026-12-27T00:00"
            max: {vcore: 2000}

At each edge quotaplane applies or reverts the override as a configuration change — journalled,
validated and all-or-nothing like any other — by writing it into the configuration: the window gets
``active: true`` and ``saved:`` (the values it replaced), which it puts back when it ends. Do not edit
those two keys by hand.

Every problem is one sentence naming the window; two windows that change the same setting of the same
queue at overlapping times are an error naming both.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from quotaplane.config.bodies import load_yaml_documents
from quotaplane.config.history import parse_duration
from quotaplane.errors import InputError

__all__ = ["FIELDS", "SCOPE_FIELDS", "Cron", "WindowSpec", "WindowSpecError",
           "check_windows", "elastic_quota_objects", "parse_cron", "parse_windows"]

#: what a window may override, per kind of scope: a queue's resources and its budget's resource-hours,
#: an elastic quota's min and max, a user or group limit's maxresources and maxapplications
SCOPE_FIELDS: Mapping[str, tuple[str, ...]] = {
    "queue": ("max", "guaranteed", "resourcehours"),
    "elasticquota": ("min", "max", "resourcehours"),
    "limit": ("maxresources", "maxapplications"),
}
#: every setting a window may override
FIELDS = ("max", "guaranteed", "resourcehours", "min", "maxresources", "maxapplications")
#: the keys a person (or a POST) writes; ``active`` and ``saved`` are also read back, written by quotaplane
_INPUT_KEYS = ("name", "queue", "elasticquota", "user", "group", "cron", "duration", "from", "to", "timezone",
               *FIELDS)
_KEYS = (*_INPUT_KEYS, "active", "saved")
#: GET …/windows answers a window's settings under ``overrides``; written back, say where they go
_OUTPUT_HINT = {
    "overrides": " (the overridden settings — max, guaranteed, … — are keys of the window itself)",
    "schedule": " (write from and to, or cron and duration)",
}
_SCOPE_TEXT = {"queue": "a queue", "elasticquota": "an elastic quota", "limit": "a limit"}
_QUEUE = re.compile(r"^root(\.[^.\s]+)*$")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DOW = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
#: cron field: (name, lowest, highest, names)
_CRON_FIELDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    ("minute", 0, 59, ()), ("hour", 0, 23, ()), ("day of month", 1, 31, ()), ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DOW))
#: overlaps of two schedules are looked for over this year (a schedule repeats within it)
_CHECK_FROM, _CHECK_TO = datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 8, tzinfo=UTC)


class WindowSpecError(InputError):
    """A ``windows`` entry that is wrong; the message names the window and the key."""


@dataclass(frozen=True, slots=True)
class Cron:
    """A five-field cron schedule (minute hour day-of-month month day-of-week), Vixie cron's meaning:
    when both days are restricted, a day matching either runs it."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]          # 0 = Sunday … 6
    any_day: bool
    any_weekday: bool

    def _day_matches(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        dom, dow = d.day in self.days, d.isoweekday() % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow

    def starts(self, lo: datetime, hi: datetime, tz: ZoneInfo) -> Iterator[datetime]:
        """The occurrences at or after ``lo`` and before ``hi`` (aware times, in order), read in ``tz``;
        a local time a daylight-saving change skips does not occur."""
        day = lo.astimezone(tz).date() - timedelta(days=1)
        last = hi.astimezone(tz).date()
        while day <= last:
            if self._day_matches(day):
                yield from (t for t in self._times(day, tz) if lo <= t < hi)
            day += timedelta(days=1)

    def _times(self, day: date, tz: ZoneInfo) -> Iterator[datetime]:
        for h in self.hours:
            for m in self.minutes:
                local = datetime(day.year, day.month, day.day, h, m, tzinfo=tz)
                if _exists(local, tz):
                    yield local


def _exists(local: datetime, tz: ZoneInfo) -> bool:
    """False for a local time a daylight-saving change skips (it does not occur)."""
    return local.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == local.replace(tzinfo=None)


def _step(text: str, part: str, what: str) -> int:
    if not text:
        return 0
    if not text.isdigit() or int(text) <= 0:
        raise InputError(f"{what}: bad step {part!r}")
    return int(text)


def _cron_part(part: str, lo: int, hi: int, names: tuple[str, ...], what: str) -> range:
    body, _, step_text = part.partition("/")
    step = _step(step_text, part, what)
    if body == "*":
        return range(lo, hi + 1, step or 1)
    first, _, second = body.partition("-")
    a = _cron_value(first, lo, hi, names, what)
    b = _cron_value(second, lo, hi, names, what) if second else (hi if step else a)
    if b < a:
        raise InputError(f"{what}: range {body!r} goes backwards")
    return range(a, b + 1, step or 1)


def _cron_field(text: str, lo: int, hi: int, names: tuple[str, ...], what: str) -> tuple[set[int], bool]:
    out: set[int] = set()
    for part in text.split(","):
        out.update(_cron_part(part, lo, hi, names, what))
    return out, text == "*"


def _cron_value(text: str, lo: int, hi: int, names: tuple[str, ...], what: str) -> int:
    low = text.lower()
    if low in names:
        return names.index(low) + (1 if lo == 1 else 0)
    if not text.isdigit() or not lo <= int(text) <= hi:
        raise InputError(f"{what}: {text!r} is not in {lo}..{hi}")
    return int(text)


def parse_cron(text: Any) -> Cron:
    """A :class:`Cron` from five fields; an ``InputError`` naming the field that is wrong."""
    if not isinstance(text, str) or len(text.split()) != 5:
        raise InputError(f"expected five fields (minute hour day-of-month month day-of-week), got {text!r}")
    sets = [_cron_field(f, lo, hi, names, name)
            for f, (name, lo, hi, names) in zip(text.split(), _CRON_FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in sets[4][0])
    return Cron(tuple(sorted(sets[0][0])), tuple(sorted(sets[1][0])), frozenset(sets[2][0]),
                frozenset(sets[3][0]), weekdays, sets[2][1], sets[4][1])


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """One window (see the module docstring): its schedule (``cron`` + ``duration_ms``, or ``start_ms``
    and ``end_ms``), its zone, its overrides (field → value as configured), and whether quotaplane
    marked it active (with the values it replaced)."""

    index: int
    name: str
    queue: str                  # the queue (of a queue or a limit window; "" for an elastic quota)
    cron_text: str
    cron: Cron | None
    duration_ms: int
    start_ms: int
    end_ms: int
    timezone: str
    overrides: Mapping[str, Any]
    active: bool
    saved: Mapping[str, Any]
    #: ``queue``, ``elasticquota``, ``user`` or ``group`` (a limit of ``queue`` listing ``target``)
    kind: str = "queue"
    #: the elastic quota's name, the user's or the group's ("" for a queue)
    target: str = ""

    @property
    def scope(self) -> str:
        """How messages name what the window changes: ``root.a``, ``elastic quota team-a``,
        ``user alice in root.a``."""
        if self.kind == "elasticquota":
            return f"elastic quota {self.target}"
        if self.kind in ("user", "group"):
            return f"{self.kind} {self.target} in {self.queue}"
        return self.queue

    def active_at(self, ms: int) -> bool:
        """True when an occurrence of the window holds instant ``ms``."""
        if self.cron is None:
            return self.start_ms <= ms < self.end_ms
        at = datetime.fromtimestamp(ms / 1000, UTC)
        return any(start <= ms < end for start, end in self.spans(at, at + timedelta(milliseconds=1)))

    def spans(self, lo: datetime, hi: datetime) -> Iterator[tuple[int, int]]:
        """Its occurrences ``(start, end)`` in ms that overlap ``[lo, hi)``, in order."""
        if self.cron is None:
            if self.start_ms < _ms(hi) and self.end_ms > _ms(lo):
                yield self.start_ms, self.end_ms
            return
        tz = ZoneInfo(self.timezone)
        for start in self.cron.starts(lo - timedelta(milliseconds=self.duration_ms), hi, tz):
            yield _ms(start), _ms(start) + self.duration_ms


def _ms(when: datetime) -> int:
    return round(when.timestamp() * 1000)


def _time(value: Any, tz: str, where: str) -> int:
    text = value.isoformat() if isinstance(value, datetime | date) else value
    try:
        if not isinstance(text, str):
            raise ValueError
        when = datetime.fromisoformat(text)
    except ValueError:
        raise WindowSpecError(f"{where}: expected a date or time such as '2026-12-24T18:00', "
                              f"got {value!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=ZoneInfo(tz))
    return _ms(when)


def _resources(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not value:
        raise WindowSpecError(f"{where}: expected a mapping of resource name to amount, got {value!r}")
    for name in value:
        if not isinstance(name, str) or not name:
            raise WindowSpecError(f"{where}: a resource name must be a non-empty string, got {name!r}")
    return dict(value)


def _target_name(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = raw[key]
    if not isinstance(value, str) or not value or not value.isprintable() or value != value.strip():
        raise WindowSpecError(f"{where}.{key}: expected a name, got {value!r}")
    return value


def _head(i: int, raw: Any) -> tuple[str, str, str, str, str]:
    """``(name, queue, kind, target, where)`` of one entry, its keys checked."""
    where = f"windows[{i}]"
    if not isinstance(raw, Mapping):
        raise WindowSpecError(f"{where}: expected a mapping with name, queue and a schedule, got {raw!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not name or not name.isprintable():
        raise WindowSpecError(f"{where}: missing or bad key 'name' (the window's name), got {name!r}")
    where = f"windows[{i}] ({name})"
    for key in raw:
        if key not in _KEYS:
            raise WindowSpecError(f"{where}: unknown key {key!r}{_OUTPUT_HINT.get(str(key), '')}; "
                                  f"allowed keys: {', '.join(_INPUT_KEYS)}")
    return (name, *_target(raw, where), where)


def _target(raw: Mapping[str, Any], where: str) -> tuple[str, str, str]:
    """``(queue, kind, target)`` of one entry: a queue, an elastic quota, or a queue's user or group
    limit."""
    named = sum(k in raw for k in ("elasticquota", "user", "group"))
    if named + ("elasticquota" in raw and "queue" in raw) > 1:
        raise WindowSpecError(f"{where}: a window is on a queue, an elastic quota or a limit (queue "
                              "with user or group), one of them")
    if "elasticquota" in raw:
        return "", "elasticquota", _target_name(raw, "elasticquota", where)
    queue = raw.get("queue")
    if not isinstance(queue, str) or not _QUEUE.match(queue):
        raise WindowSpecError(f"{where}.queue: expected a full queue path such as root.teams.a, "
                              f"got {queue!r}")
    for kind in ("user", "group"):
        if kind in raw:
            return queue, kind, _target_name(raw, kind, where)
    return queue, "queue", ""


def _override(field: str, value: Any, where: str) -> Any:
    if field == "maxapplications":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise WindowSpecError(f"{where}: expected a count (an integer ≥ 0), got {value!r}")
        return value
    return _resources(value, where)


def _zone(raw: Mapping[str, Any], where: str) -> str:
    tz = raw.get("timezone", "UTC")
    try:
        if not isinstance(tz, str) or not tz:
            raise ValueError
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise WindowSpecError(f"{where}.timezone: unknown time zone {tz!r} (an IANA name such as "
                              "'Europe/Zurich' or 'UTC')") from None
    return tz


def _cron_schedule(raw: Mapping[str, Any], where: str) -> tuple[Cron, int]:
    if "from" in raw or "to" in raw:
        raise WindowSpecError(f"{where}: a window has a cron schedule or from/to, not both")
    try:
        cron = parse_cron(raw["cron"])
    except ValueError as exc:
        raise WindowSpecError(f"{where}.cron: {exc}") from None
    if "duration" not in raw:
        raise WindowSpecError(f"{where}: a cron window needs a duration (such as 5h)")
    duration = parse_duration(raw["duration"], f"{where}.duration")
    if duration <= 0:
        raise WindowSpecError(f"{where}.duration: expected a positive duration, got {raw['duration']!r}")
    return cron, duration


def _schedule(raw: Mapping[str, Any], tz: str, where: str) -> tuple[Cron | None, int, int, int]:
    if "cron" in raw:
        return (*_cron_schedule(raw, where), 0, 0)
    if "from" not in raw or "to" not in raw:
        raise WindowSpecError(f"{where}: missing a schedule: cron with duration, or from and to")
    if "duration" in raw:
        raise WindowSpecError(f"{where}.duration: only a cron window has a duration")
    start, end = _time(raw["from"], tz, f"{where}.from"), _time(raw["to"], tz, f"{where}.to")
    if end <= start:
        raise WindowSpecError(f"{where}: to must be after from")
    return None, 0, start, end


def _one(i: int, raw: Any) -> WindowSpec:
    name, queue, kind, target, where = _head(i, raw)
    tz = _zone(raw, where)
    cron, duration, start, end = _schedule(raw, tz, where)
    group = "limit" if kind in ("user", "group") else kind
    allowed = SCOPE_FIELDS[group]
    overrides: dict[str, Any] = {}
    for f in FIELDS:
        if f in raw:
            if f not in allowed:
                raise WindowSpecError(f"{where}.{f}: a window on {_SCOPE_TEXT[group]} overrides "
                                      f"{', '.join(allowed[:-1])} or {allowed[-1]}")
            overrides[f] = _override(f, raw[f], f"{where}.{f}")
    if not overrides:
        raise WindowSpecError(f"{where}: a window overrides at least one of {', '.join(allowed)}")
    active = raw.get("active", False)
    if not isinstance(active, bool):
        raise WindowSpecError(f"{where}.active: expected true or false (set by quotaplane), got {active!r}")
    saved = raw.get("saved") or {}
    if not isinstance(saved, Mapping):
        raise WindowSpecError(f"{where}.saved: expected a mapping (set by quotaplane), got {saved!r}")
    return WindowSpec(i, name, queue, str(raw.get("cron", "")), cron, duration, start, end, tz, overrides,
                      active, dict(saved), kind, target)


def _horizon(a: WindowSpec, b: WindowSpec) -> tuple[datetime, datetime]:
    """Where two windows (one of them with a schedule) are compared: an absolute one's own range, else
    a year."""
    fixed = a if a.cron is None else b if b.cron is None else None
    if fixed is None:
        return _CHECK_FROM, _CHECK_TO
    return (datetime.fromtimestamp(fixed.start_ms / 1000, UTC),
            datetime.fromtimestamp(fixed.end_ms / 1000, UTC))


def _overlap(a: WindowSpec, b: WindowSpec) -> bool:
    """Do two windows' occurrences overlap (a window with itself: do its own occurrences)?"""
    if a.cron is None and b.cron is None:
        return a is not b and a.start_ms < b.end_ms and b.start_ms < a.end_ms
    lo, hi = _horizon(a, b)
    if a is b:
        return any(nxt[0] < cur[1] for cur, nxt in itertools.pairwise(a.spans(lo, hi)))
    return _crossing(list(a.spans(lo, hi)), list(b.spans(lo, hi)))


def _crossing(ours: list[tuple[int, int]], theirs: list[tuple[int, int]]) -> bool:
    """Does a span of ``ours`` overlap one of ``theirs`` (both in order; one sweep)?"""
    j = 0
    for s, e in ours:
        while j < len(theirs) and theirs[j][1] <= s:
            j += 1
        if j < len(theirs) and theirs[j][0] < e:
            return True
    return False


def _check_overlaps(specs: Sequence[WindowSpec]) -> None:
    names: dict[str, int] = {}
    for w in specs:
        if w.name in names:
            raise WindowSpecError(f"windows[{w.index}] ({w.name}): the same name as windows[{names[w.name]}]")
        names[w.name] = w.index
    for i, a in enumerate(specs):
        for b in specs[i:]:
            shared = sorted(set(a.overrides) & set(b.overrides))
            if a.scope == b.scope and shared and _overlap(a, b):
                what = "its occurrences overlap each other" if a is b else \
                    f"overlaps windows[{b.index}] ({b.name})"
                raise WindowSpecError(f"windows[{a.index}] ({a.name}): {what} on {shared[0]} of {a.scope}")


def parse_windows(raw: Any) -> tuple[WindowSpec, ...]:
    """The windows of a partition's ``windows`` key (None: none); :class:`WindowSpecError` naming the
    first wrong one, or both windows that change one setting of one scope at overlapping times."""
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise WindowSpecError(f"windows: expected a list of windows, got {type(raw).__name__}")
    specs = tuple(_one(i, item) for i, item in enumerate(raw))
    _check_overlaps(specs)
    return specs


def _budgeted(budgets: Any) -> set[str]:
    """The queues with a budget of their own in a ``budgets`` value, and the elastic quotas with one
    (as ``elastic:<name>``)."""
    if not isinstance(budgets, Sequence):
        return set()
    return {f"elastic:{b['elasticquota']}" if "elasticquota" in b else str(b.get("queue")) for b in budgets
            if isinstance(b, Mapping) and "user" not in b and "group" not in b}


def elastic_quota_objects(value: Any) -> list[Any]:
    """The ElasticQuota objects of an ``elasticquotas`` value as written (a text of YAML documents, a
    list, one object, or a mapping with ``quotas``); not a full check (the elastic plug-in's)."""
    if value is None:
        return []
    if isinstance(value, str):
        try:
            return load_yaml_documents(value, "elasticquotas", pure=True)
        except InputError:
            return []
    if isinstance(value, Mapping):
        return elastic_quota_objects(value.get("quotas")) if value.get("kind") is None else [value]
    if isinstance(value, Sequence):
        return list(value)
    return []


def _elastic_names(value: Any) -> set[str]:
    out: set[str] = set()
    for obj in elastic_quota_objects(value):
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
            out.add(meta["name"])
    return out


#: per queue path, each of its limits' users and groups
Limits = Mapping[str, Sequence[tuple[Sequence[str], Sequence[str]]]]


def check_windows(raw: Any, queues: set[str], budgets: Any = None, *, elastic: Any = None,
                  limits: Limits | None = None) -> list[str]:
    """The problems of a ``windows`` value (``[]``: valid): its entries, and that what it overrides
    exists — the queues (full paths), the queue budgets (the partition's ``budgets`` value), the elastic
    quotas (its ``elasticquotas`` value) and the limits (per queue path, each limit's users and
    groups)."""
    try:
        specs = parse_windows(raw)
    except InputError as exc:
        return [str(exc)]
    budgeted = _budgeted(budgets)
    quotas = _elastic_names(elastic) if any(w.kind == "elasticquota" for w in specs) else set()
    out: list[str] = []
    for w in specs:
        problem = _missing(w, queues, budgeted, quotas, limits or {})
        if problem:
            out.append(f"windows[{w.index}] ({w.name}){problem}")
    return out


def _missing_elastic(w: WindowSpec, budgeted: set[str], quotas: set[str]) -> str:
    if w.target not in quotas:
        return f".elasticquota: no elastic quota {w.target} in the configuration"
    if "resourcehours" in w.overrides and f"elastic:{w.target}" not in budgeted:
        return (f".resourcehours: elastic quota {w.target} has no budget to override (budgets: "
                "docs/budgets.md)")
    return ""


def _missing(w: WindowSpec, queues: set[str], budgeted: set[str], quotas: set[str], limits: Limits) -> str:
    """What window ``w`` overrides that is not configured (``""``: all of it is), after its name."""
    if w.kind == "elasticquota":
        return _missing_elastic(w, budgeted, quotas)
    if w.queue not in queues:
        return f".queue: no queue {w.queue} in the configuration"
    if w.kind in ("user", "group"):
        at = 0 if w.kind == "user" else 1
        if not any(w.target in entry[at] for entry in limits.get(w.queue, ())):
            return (f".{w.kind}: queue {w.queue} has no limit listing {w.kind} {w.target} "
                    "(its limits: docs/config.md)")
    elif "resourcehours" in w.overrides and w.queue not in budgeted:
        return (f".resourcehours: queue {w.queue} has no budget of its own to override (budgets: "
                "docs/budgets.md)")
    return ""
