"""What a client may make the service hold, and for how long (issue 32 items 8–10).

Every resource a client can tie up has a limit, answered with a clear status in YuniKorn's error body
(``{"status_code", "message", "description"}``):

===========================  ====================  ===========================================  ======
limit                        default               what happens beyond it                       answer
===========================  ====================  ===========================================  ======
``max-body-bytes``           8 MiB                 the request body is refused before it is     413
                                                   read (``Content-Length``) or as soon as it
                                                   passes the limit (chunked)
``max-batch``                1,000                 a batch of more allocations is refused       413
``max-header-bytes``         64 KiB                request line and headers larger than this    431
``header-timeout``           10 s                  headers not complete this long after the     408
                                                   connection opened (or the previous answer)
``body-timeout``             30 s                  a body not complete this long after its      408
                                                   headers
``send-timeout``             30 s                  a client that accepts no answer data for     closed
                                                   this long is disconnected
``max-connections``          4,096, at most the    at the limit, the connection that has waited  503
                             open-files limit      longest for its headers is closed to make
                             less 256              room; when none waits, the new one gets 503
``max-streams``              100 (YuniKorn's)      event streams open at once, every client     503
``max-streams-per-client``   15 (YuniKorn's)       event streams open at once from one client   503
                                                   address
``stream-buffer``            10,000 events         an event stream that falls this far behind   dropped
                                                   is closed with the id to resume from
===========================  ====================  ===========================================  ======

Each can be set with ``QUOTAPLANE_<NAME>`` (``QUOTAPLANE_MAX_BODY_BYTES=16MiB``) or ``serve --limit
NAME=VALUE`` (the option wins). Sizes take ``Ki``/``Mi``/``Gi`` (and ``KiB`` …) or ``K``/``M``/``G``
suffixes, timeouts seconds (``s``, ``ms`` and ``m`` suffixes accepted). docs/operations.md "Limits".
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from quotaplane.errors import InputError

__all__ = ["LIMIT_NAMES", "Limits", "LimitsCollector", "StreamSlots", "default_max_connections",
           "open_files_limit", "parse_limit"]

#: file descriptors kept for what is not a counted client connection: one accept backlog's worth
#: (:data:`quotaplane.server.guard.BACKLOG`: an event loop accepts that many before any can be
#: closed), the store, log files, the listening socket, the event loop's own descriptors and the
#: connections relayed to other instances
FD_RESERVE = 256

#: the default ceiling of ``max-connections`` when the open-files limit allows more
MAX_CONNECTIONS_CEILING = 4096


def default_max_connections(open_files: int | None = None) -> int:
    """The default connection limit: 4,096, or fewer when the open-files limit (``RLIMIT_NOFILE``,
    its soft value) leaves less room: the limit less :data:`FD_RESERVE`, never below 16."""
    if open_files is None:
        open_files = open_files_limit()
    if open_files <= 0:
        return MAX_CONNECTIONS_CEILING
    return max(16, min(MAX_CONNECTIONS_CEILING, open_files - FD_RESERVE))


def open_files_limit() -> int:
    try:
        import resource
    except ImportError:  # pragma: no cover (not POSIX)
        return -1
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return -1 if soft == resource.RLIM_INFINITY else int(soft)


@dataclass(frozen=True, slots=True)
class Limits:
    """The service's limits (see the module's table); every field is positive."""

    max_body_bytes: int = 8 * 1024 * 1024
    max_batch: int = 1000
    max_header_bytes: int = 64 * 1024
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    send_timeout: float = 30.0
    max_connections: int = MAX_CONNECTIONS_CEILING
    max_streams: int = 100
    max_streams_per_client: int = 15
    stream_buffer: int = 10_000

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise InputError(f"limit {_option(f.name)} must be a positive number, got {value!r}")
        if self.max_batch > BATCH_CEILING:
            raise InputError(f"limit max-batch must be at most {BATCH_CEILING:,}, got {self.max_batch}")

    @classmethod
    def from_settings(cls, environ: Mapping[str, str] | None = None, options: Iterable[str] = (),
                      *, open_files: int | None = None) -> Limits:
        """The limits from ``QUOTAPLANE_<NAME>`` variables of ``environ`` and ``NAME=VALUE`` items
        of ``options`` (``serve --limit``, which win). ``max-connections`` defaults to
        :func:`default_max_connections`. Raises ValueError naming the setting that is wrong."""
        values: dict[str, Any] = {"max_connections": default_max_connections(open_files)}
        for name in LIMIT_NAMES:
            key = "QUOTAPLANE_" + name.upper()
            raw = (environ or {}).get(key, "").strip()
            if raw:
                values[name] = parse_limit(name, raw, where=key)
        for item in options:
            option, sep, raw = item.partition("=")
            name = option.strip().lower().replace("-", "_")
            if not sep or name not in LIMIT_NAMES:
                raise InputError(f"--limit {item!r}: expected NAME=VALUE with NAME one of "
                                 + ", ".join(_option(n) for n in LIMIT_NAMES))
            values[name] = parse_limit(name, raw.strip(), where=f"--limit {option.strip()}")
        return cls(**values)

    def describe(self) -> dict[str, Any]:
        """``{option name: value}`` (for the start-up log and the documentation)."""
        return {_option(f.name): getattr(self, f.name) for f in dataclasses.fields(self)}


#: the most allocations one batch may ever hold (the body model's own bound)
BATCH_CEILING = 100_000

#: every limit's field name, in the order of :class:`Limits`
LIMIT_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Limits))

_SECONDS = frozenset({"header_timeout", "body_timeout", "send_timeout"})
_BYTES = frozenset({"max_body_bytes", "max_header_bytes"})
_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$", re.IGNORECASE)
_UNITS = {"k": 1000, "m": 1000**2, "g": 1000**3, "ki": 1024, "mi": 1024**2, "gi": 1024**3}


def _option(name: str) -> str:
    return name.replace("_", "-")


def _seconds(raw: str, where: str) -> float:
    """A positive duration written ``10``, ``2.5s``, ``500ms`` or ``1m``, in seconds."""
    m = _DURATION.match(raw)
    if m is None:
        raise InputError(f"{where}: {raw!r} is not a duration in seconds (e.g. 10, 2.5s, 500ms, 1m)")
    value = float(m.group(1)) * {"ms": 0.001, "m": 60.0}.get((m.group(2) or "s").lower(), 1.0)
    if value <= 0:
        raise InputError(f"{where}: must be more than 0 seconds, got {raw!r}")
    return value


def parse_limit(name: str, raw: str, *, where: str | None = None) -> int | float:
    """The value of limit ``name`` written ``raw`` (``16MiB``, ``10s``, ``1000``). ValueError names
    ``where`` it came from."""
    where = where or _option(name)
    if name in _SECONDS:
        return _seconds(raw, where)
    m = _SIZE.match(raw)
    if m is None or (m.group(2) and name not in _BYTES):
        kind = "a size in bytes (e.g. 1048576, 64KiB, 8MiB)" if name in _BYTES else "a whole number"
        raise InputError(f"{where}: {raw!r} is not {kind}")
    unit = (m.group(2) or "").lower().rstrip("b")
    count = int(m.group(1)) * _UNITS.get(unit, 1)
    if count <= 0:
        raise InputError(f"{where}: must be more than 0, got {raw!r}")
    return count


class StreamSlots:
    """Event streams open at once: at most ``total``, at most ``per_client`` from one client
    address (YuniKorn's ``StreamingLimiter``: 100 and 15 by default). Thread-safe."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total = total
        self.per_client = per_client
        self._by_client: dict[str, int] = {}
        self._open = 0
        self._lock = threading.Lock()

    def acquire(self, client: str) -> str | None:
        """Take a slot for ``client``: None when taken, else why not (``"total"``: every slot is
        taken; ``"client"``: this client holds its share). Both are YuniKorn's 503 "Too many
        streaming connections"."""
        with self._lock:
            if self._open >= self.total:
                return "total"
            held = self._by_client.get(client, 0)
            if held >= self.per_client:
                return "client"
            self._open += 1
            self._by_client[client] = held + 1
            return None

    def release(self, client: str) -> None:
        """Give back a slot taken by :meth:`acquire`."""
        with self._lock:
            held = self._by_client.get(client, 0)
            if held <= 0:
                return
            self._open -= 1
            if held == 1:
                del self._by_client[client]
            else:
                self._by_client[client] = held - 1

    @property
    def open(self) -> int:
        """How many streams hold a slot."""
        return self._open


class LimitsCollector:
    """Prometheus collector of what the limits hold back (docs/metrics.md): open event streams and,
    under ``serve``, open connections and those closed or refused by a limit."""

    def __init__(self, service: Any) -> None:
        self._service = service

    def describe(self) -> list[Any]:
        """No fixed description (collected each scrape)."""
        return []

    def collect(self) -> Iterator[Any]:
        """The gauges and counters, read now."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        yield GaugeMetricFamily("quotaplane_event_streams", "Event streams open (both kinds)",
                                value=self._service.stream_slots.open)
        guard = getattr(self._service, "connection_guard", None)
        if guard is None:
            return
        yield GaugeMetricFamily("quotaplane_connections", "Client connections open", value=guard.open)
        closed = CounterMetricFamily("quotaplane_connections_closed", "Connections closed or refused by a "
                                     "limit: evicted (max-connections, to make room), refused "
                                     "(max-connections, all busy), timeout (header-, body-, send-timeout)",
                                     labels=["reason"])
        closed.add_metric(["evicted"], guard.evicted)
        closed.add_metric(["refused"], guard.refused)
        closed.add_metric(["timeout"], guard.timed_out)
        yield closed
