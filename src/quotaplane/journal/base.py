"""The journal protocol, its errors, canonical JSON and the store-URL parser (decision S1).

A journal is a durable, append-only log of events per *stream* (the scheduler uses the stream
``"scheduler"`` for config events and one stream per partition name). Every event gets a sequence
number ``1, 2, 3 …`` per stream, without gaps. A snapshot of the derived state can be saved at a
sequence number so that recovery reads the snapshot plus a short tail instead of the whole log.
Leases (a holder name with a time to live) let several service instances agree on one leader per
stream; a leader passes ``holder=`` to :meth:`Journal.append` so that an append after the lease was
lost fails with :class:`~quotaplane.errors.NotLeaderError` (fencing).

The journal never interprets events: they are JSON-able dicts produced and consumed by the partition.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
from json.encoder import encode_basestring as _encode_basestring
from json.encoder import encode_basestring_ascii as _encode_basestring_ascii
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qsl, unquote, urlsplit

from quotaplane.errors import (
    InputError,
    JournalCompactedError,
    JournalError,
    JournalLockedError,
    NotLeaderError,
    OutcomeUnknownError,
    StoreUnavailableError,
)

__all__ = [
    "SCHEMA_VERSION",
    "Journal",
    "JournalCompactedError",
    "JournalError",
    "JournalLockedError",
    "OutcomeUnknownError",
    "StoreURL",
    "StoreUnavailableError",
    "canonical_json",
    "check_events",
    "check_stream",
    "decode_page",
    "mask_url",
    "one_shot_encoder",
    "parse_store_url",
]

#: The version of the table layout written in the ``meta`` table of SQLite and PostgreSQL stores.
#: A store written by a newer quotaplane (a larger number) is refused rather than misread.
SCHEMA_VERSION = 1


@runtime_checkable
class Journal(Protocol):
    """A durable, append-only event journal with snapshots and leases (agreed interface).

    Implementations: :class:`~quotaplane.journal.memory.MemoryJournal`,
    :class:`~quotaplane.journal.sqlite.SQLiteJournal`,
    :class:`~quotaplane.journal.postgres.PostgresJournal`. All are safe to call from several threads.
    """

    url: str

    def append(self, stream: str, events: Sequence[Mapping[str, Any]], *, holder: str | None = None,
               after: int | None = None) -> int:
        """Append ``events`` to ``stream`` in one transaction; return the seq of the last event.

        Durable before it returns (S1). Sequence numbers are ``last_seq + 1 …`` without gaps. An empty
        ``events`` writes nothing and returns ``last_seq(stream)``. With ``holder`` the lease of ``stream``
        is checked in the same transaction and :class:`~quotaplane.errors.NotLeaderError` is raised
        (nothing written) unless ``holder`` holds a live lease. With ``after`` too, nothing is written
        unless the stream ends at ``after`` — the state the events were decided on — and
        :class:`~quotaplane.errors.NotLeaderError` is raised: a change decided by a deposed leader
        whose append arrives after another writer moved the stream is never journalled on top of it,
        even when the same holder leads again by then (issue 32 #4).
        """
        ...

    def read(self, stream: str, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """Iterate ``(seq, event)`` for the events of ``stream`` with ``seq > after``, in order.

        Raises :class:`JournalCompactedError` at once when ``after`` is below the compacted prefix.
        Each event is a fresh dict (mutating it does not change the journal).
        """
        ...

    def last_seq(self, stream: str) -> int:
        """The seq of the last event appended to ``stream`` (0 when none; unchanged by compaction)."""
        ...

    def save_snapshot(self, stream: str, seq: int, state: Mapping[str, Any]) -> None:
        """Store ``state`` (JSON-able) as the state of ``stream`` after event ``seq``; keeps the latest only.

        ``seq`` must be between the current snapshot's seq and ``last_seq(stream)`` (``ValueError``).
        """
        ...

    def load_snapshot(self, stream: str) -> tuple[int, dict[str, Any]] | None:
        """The latest snapshot ``(seq, state)`` of ``stream``, or ``None``."""
        ...

    def compact(self, stream: str) -> int:
        """Delete the events of ``stream`` covered by its snapshot; return how many were deleted.

        Optional housekeeping: ``read(stream, after)`` keeps working for ``after ≥`` the snapshot seq.
        """
        ...

    def streams(self) -> list[str]:
        """Every stream that has events or a snapshot, sorted by name."""
        ...

    def acquire_lease(self, stream: str, holder: str, ttl: float) -> bool:
        """Take or renew the lease of ``stream`` for ``ttl`` seconds.

        True when the lease was free, expired, or already held by ``holder`` (then it is renewed);
        False when another holder has a live lease.
        """
        ...

    def release_lease(self, stream: str, holder: str) -> None:
        """Give up the lease of ``stream`` if ``holder`` holds it (otherwise nothing happens)."""
        ...

    def lease_holder(self, stream: str) -> str | None:
        """The holder of the live lease of ``stream``, or ``None`` when free or expired."""
        ...

    def close(self) -> None:
        """Release the connection and locks. Idempotent; any later call raises :class:`JournalError`."""
        ...


# ---------------------------------------------------------------------------------------------------
# canonical JSON and argument checks (shared by every implementation so they behave identically)


def _default(value: Any) -> Any:
    """Encode read-only mappings (e.g. :class:`~quotaplane.resources.Resource`) as JSON objects."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def one_shot_encoder(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """``encoder.encode``, the same text for every value, without its per-call Python work.

    ``JSONEncoder.encode`` builds a ``floatstr`` closure, a markers dict and the C encoder on every
    call before it encodes anything: ~200 bytecodes, 40 % of encoding a small event (measured, issue
    38: every decision encodes its journal record and its answer). This calls the C encoder
    (``json.encoder.c_make_encoder``, what ``encode`` ends up calling) with the encoder's own
    settings; a fresh markers dict per call keeps the circular check exact when several threads
    encode (a snapshot on a worker thread). Falls back to ``encoder.encode`` where there is no C
    encoder or an indent (which ``encode`` does not give to the C encoder either)."""
    make = _c_make_encoder
    if make is None or encoder.indent is not None:
        return encoder.encode
    text = _encode_basestring_ascii if encoder.ensure_ascii else _encode_basestring
    args = (encoder.default, text, None, encoder.key_separator, encoder.item_separator, encoder.sort_keys,
            encoder.skipkeys, encoder.allow_nan)
    join = "".join
    if encoder.check_circular:
        def encode(value: Any) -> str:
            return join(make({}, *args)(value, 0))
    else:
        once = make(None, *args)

        def encode(value: Any) -> str:
            return join(once(value, 0))
    return encode


# one encoder for the process: json.dumps with options builds a new JSONEncoder on every call (hot path)
_ENCODE = one_shot_encoder(json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                            allow_nan=False, check_circular=True, default=_default))


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value``: sorted keys, compact separators, UTF-8, no NaN/Infinity.

    The same value always gives the same text, so stores written by different runs compare byte for
    byte. Any ``Mapping`` (e.g. a ``Resource``) is written as an object, tuples as arrays; non-string
    keys are converted by JSON's rules (so use string keys). Raises ``ValueError`` (naming the
    problem) when ``value`` is not JSON-able.
    """
    try:
        return _ENCODE(value)
    except (TypeError, ValueError) as exc:
        raise InputError(f"not JSON-able: {exc}") from exc
    except RecursionError as exc:
        raise InputError("not JSON-able: nested too deeply") from exc


def decode_page(texts: Sequence[str], count: int | None = None) -> list[Any]:
    """Decode many canonical JSON texts at once (one C-level parse per page instead of one per event).

    Reading is the cost of a restart (quality.md "Recovery"): decoding a page as one JSON array is
    several times faster than ``json.loads`` per event. ``count`` is the number of values expected
    (default ``len(texts)``; a caller may pass texts already joined with commas). Raises
    :class:`JournalError` if the store holds something that is not one JSON value per event.
    """
    if not texts:
        return []
    try:
        out: list[Any] = json.loads("[" + ",".join(texts) + "]")
    except ValueError:
        for i, text in enumerate(texts):  # find the culprit for the message
            try:
                json.loads(text)
            except ValueError as exc:
                raise JournalError(f"stored event #{i} of the page is not JSON: {exc}") from exc
        raise
    if len(out) != (len(texts) if count is None else count):
        raise JournalError("stored events are not one JSON value each")
    return out


def check_stream(stream: object) -> str:
    """Return ``stream`` if it is a non-empty string, else raise ``ValueError``."""
    if not isinstance(stream, str) or not stream:
        raise InputError(f"stream must be a non-empty string, got {stream!r}")
    return stream


def check_events(events: object) -> list[str]:
    """Encode a sequence of event dicts to canonical JSON texts (``ValueError`` for anything else)."""
    # a list of dicts (every commit) without the abstract classes' isinstance checks
    if type(events) is not list and (isinstance(events, (Mapping, str, bytes))
                                     or not isinstance(events, Sequence)):
        raise InputError(f"events must be a sequence of dicts, got {type(events).__name__}")
    out: list[str] = []
    for i, event in enumerate(events):
        if type(event) is not dict and not isinstance(event, Mapping):
            raise InputError(f"event {i} must be a dict, got {type(event).__name__}")
        try:
            out.append(canonical_json(event))
        except ValueError as exc:
            raise InputError(f"event {i} is {exc}") from None
    return out


#: containers longer than this are encoded element by element (:func:`canonical_json_pieces`)
_PIECE = 256


def canonical_json_pieces(value: Any) -> str:
    """:func:`canonical_json`, byte for byte, but a large list or dict is encoded one element at a
    time instead of in one call.

    One call of the C encoder holds the interpreter lock for as long as it runs — a quarter of a
    second for a snapshot of 50,000 allocations — so a snapshot written on a worker thread would
    still stop the service's event loop. Between elements the lock can change hands."""
    try:
        return "".join(_pieces(value, 0))
    except (TypeError, ValueError) as exc:
        raise InputError(f"not JSON-able: {exc}") from exc
    except RecursionError as exc:
        raise InputError("not JSON-able: nested too deeply") from exc


def _pieces(value: Any, depth: int) -> Iterator[str]:
    # the top two levels are opened whatever their size (a small dict may hold a large listing);
    # below them, only large containers — their elements are one call each
    if not isinstance(value, (Mapping, list, tuple)) or (depth >= 2 and len(value) <= _PIECE):
        yield _ENCODE(value)
    elif isinstance(value, Mapping):
        yield "{"
        # sort_keys sorts the (key, value) pairs, i.e. by the keys themselves
        for i, (k, item) in enumerate(sorted(value.items(), key=lambda kv: kv[0])):
            key = _ENCODE(_key(k))
            yield (key + ":") if i == 0 else ("," + key + ":")
            yield from _pieces(item, depth + 1)
        yield "}"
    else:
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ","
            yield from _pieces(item, depth + 1)
        yield "]"


def _key(key: object) -> str:
    # JSON's rules for dict keys (json.dumps): str as is, numbers/bools/None as their JSON text
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, (int, float)):
        return _ENCODE(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def check_state(state: object) -> str:
    """Encode a snapshot state (a dict) to canonical JSON (``ValueError`` for anything else), piece
    by piece (:func:`canonical_json_pieces`): snapshots are large."""
    if not isinstance(state, Mapping):
        raise InputError(f"snapshot state must be a dict, got {type(state).__name__}")
    try:
        return canonical_json_pieces(state)
    except ValueError as exc:
        raise InputError(f"snapshot state is {exc}") from None


def check_seq(seq: object, name: str = "seq") -> int:
    """Return ``seq`` if it is a non-negative int (not a bool), else raise ``ValueError``."""
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise InputError(f"{name} must be a non-negative integer, got {seq!r}")
    return seq


def stream_moved(stream: str, last: int, after: int, holder: str | None) -> NotLeaderError:
    """The error of a fenced append whose stream does not end where it was decided (``after``)."""
    return NotLeaderError(f"stream {stream!r} ends at {last}, not at {after} where this change was decided: "
                          "another writer appended to it meanwhile; nothing was written", leader=holder)


def check_append(stream: object, events: object, holder: object | None) -> list[str]:
    """The arguments of :meth:`Journal.append`, checked as every store checks them: the stream, the
    events (returned as canonical JSON texts) and the lease holder when one is named."""
    if type(stream) is not str or not stream:     # no call for a good stream: every commit appends
        check_stream(stream)
    texts = check_events(events)
    if holder is not None:
        check_lease_args(stream, holder)
    return texts


def check_lease_args(stream: object, holder: object, ttl: object | None = None) -> None:
    """Validate lease arguments: non-empty stream and holder, finite positive ttl (``ValueError``)."""
    check_stream(stream)
    if not isinstance(holder, str) or not holder:
        raise InputError(f"holder must be a non-empty string, got {holder!r}")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float))
                            or not math.isfinite(ttl) or ttl <= 0):
        raise InputError(f"ttl must be a positive number of seconds, got {ttl!r}")


# ---------------------------------------------------------------------------------------------------
# store URLs (contract "CLI": sqlite:///relative/path.db, sqlite:////absolute/path.db, postgresql://…)

_SQLITE_SYNC = ("OFF", "NORMAL", "FULL", "EXTRA")
_SCHEMA_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass(frozen=True)
class StoreURL:
    """A parsed store URL.

    ``kind`` is ``"memory"``, ``"sqlite"`` or ``"postgresql"``; ``path`` is the SQLite file path as
    written (relative paths are relative to the working directory); ``dsn`` is the libpq connection URL
    with quotaplane's own query options removed; ``options`` holds those options (``synchronous``,
    ``compact`` for SQLite; ``schema`` for PostgreSQL).
    """

    kind: str
    url: str
    path: str = ""
    dsn: str = ""
    options: dict[str, str] = field(default_factory=dict)


def parse_store_url(url: str | None) -> StoreURL:
    """Parse a store URL; raise ``ValueError`` naming the URL and what is wrong with it.

    * ``None``, ``""`` or ``"memory://"`` — in memory.
    * ``sqlite:///relative/path.db`` — relative to the working directory;
      ``sqlite:////absolute/path.db`` — absolute. Options: ``?synchronous=normal|full|extra|off``
      (default ``normal``), ``&compact=true`` (delete events covered by a snapshot when it is saved),
      ``&accept_loss=true`` (start even though events acknowledged earlier are missing, see
      :mod:`quotaplane.journal.sqlite`).
    * ``postgresql://user:password@host:port/db`` (also ``postgres://``) — PostgreSQL via psycopg 3.
      Option ``?schema=name`` (default ``quotaplane``) selects the schema holding the tables; every other
      query parameter is passed on to libpq (``sslmode``, ``connect_timeout`` …).
    """
    if url is None or url == "":
        return StoreURL(kind="memory", url="memory://")
    if not isinstance(url, str):
        raise InputError(f"store URL must be a string, got {type(url).__name__}")
    scheme, sep, _rest = url.partition("://")
    if not sep:
        raise InputError(f"bad store URL {url!r}: expected memory://, sqlite:///path.db or postgresql://…")
    scheme = scheme.lower()
    if scheme == "memory":
        if url[len("memory://"):]:
            raise InputError(f"bad store URL {url!r}: memory:// takes no path")
        return StoreURL(kind="memory", url="memory://")
    if scheme == "sqlite":
        return _parse_sqlite(url)
    if scheme in ("postgresql", "postgres"):
        return _parse_postgres(url)
    raise InputError(f"unknown store URL scheme {scheme!r} in {mask_url(url)!r}: "
                     "expected memory://, sqlite:///path.db or postgresql://…")


def _parse_sqlite(url: str) -> StoreURL:
    rest = url[len("sqlite://"):]
    if not rest.startswith("/"):
        raise InputError(f"bad SQLite URL {url!r}: expected sqlite:///relative/path.db or "
                         "sqlite:////absolute/path.db (three slashes before a relative path)")
    path_part, _, query = rest[1:].partition("?")
    path = unquote(path_part)
    if not path or path.endswith("/"):
        raise InputError(f"bad SQLite URL {url!r}: no database file name")
    if path == ":memory:":
        raise InputError(f"bad SQLite URL {url!r}: use memory:// for an in-memory journal")
    options: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key == "synchronous":
            if value.upper() not in _SQLITE_SYNC:
                raise InputError(f"bad SQLite URL {url!r}: synchronous must be one of "
                                 f"{', '.join(s.lower() for s in _SQLITE_SYNC)}, got {value!r}")
            options[key] = value.upper()
        elif key in ("compact", "accept_loss"):
            options[key] = str(_parse_bool(url, key, value)).lower()
        else:
            raise InputError(f"bad SQLite URL {url!r}: unknown option {key!r} "
                             "(known: synchronous, compact, accept_loss)")
    return StoreURL(kind="sqlite", url=url, path=path, options=options)


def _parse_postgres(url: str) -> StoreURL:
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a non-numeric or out-of-range port
    except ValueError as exc:
        raise InputError(f"bad PostgreSQL URL {mask_url(url)!r}: {exc}") from None
    if parts.fragment:
        raise InputError(f"bad PostgreSQL URL {mask_url(url)!r}: unexpected fragment")
    options: dict[str, str] = {}
    passthrough: list[str] = []
    # libpq's parameters pass on exactly as written: they are percent-encoded ('=', '&', spaces in
    # ``options=-c%20search_path%3Dx``) and libpq decodes them itself ('+' stays '+' there)
    for item in parts.query.split("&"):
        if not item:
            continue
        raw_key, _, raw_value = item.partition("=")
        if unquote(raw_key) == "schema":
            value = unquote(raw_value)
            if not _SCHEMA_RE.match(value):
                raise InputError(f"bad PostgreSQL URL {mask_url(url)!r}: schema must be an identifier "
                                 f"(letters, digits, _), got {value!r}")
            options["schema"] = value
        elif unquote(raw_key) == "op_timeout":
            value = unquote(raw_value)
            try:
                seconds = float(value)
            except ValueError:
                seconds = 0.0
            if not 0 < seconds < float("inf"):
                raise InputError(f"bad PostgreSQL URL {mask_url(url)!r}: op_timeout must be a positive "
                                 f"number of seconds, got {value!r}")
            options["op_timeout"] = value
        else:
            passthrough.append(item)
    # rebuild the DSN without our own options; libpq rejects parameters it does not know
    query = "&".join(passthrough)
    dsn = f"{parts.scheme}://{parts.netloc}{parts.path}" + (f"?{query}" if query else "")
    return StoreURL(kind="postgresql", url=url, dsn=dsn, options=options)


def _parse_bool(url: str, key: str, value: str) -> bool:
    low = value.lower()
    if low in ("1", "true", "yes", "on", ""):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise InputError(f"bad store URL {url!r}: {key} must be true or false, got {value!r}")


def mask_url(url: str) -> str:
    """``url`` with the password (if any) replaced by ``***`` — safe for logs and error messages."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        if ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:***@{host}"
    return f"{scheme}{sep}{netloc}{slash}{tail}"
