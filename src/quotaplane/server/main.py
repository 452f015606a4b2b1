"""``quotaplane serve``: start the REST service on a store.

* ``--store``: ``sqlite:///quotaplane.db`` (a file under the working directory) by default;
  ``postgresql://…`` for production and for several instances (fail-over, :mod:`quotaplane.server.ha`).
* On start with a non-empty store the journalled state is restored first; the store is the source
  of truth: a ``--config`` is applied (as a normal config update) only when the file changed since
  it was last given at a start, so changes made over the API survive restarts with the same file
  (issue 14 #5; docs/operations.md "Restarting with --config"). An invalid
  ``--config`` refuses to start (exit 1) and says why (``FILE:LINE: reason``).
* Tokens (decision S2) come from ``QUOTAPLANE_TOKENS`` / ``QUOTAPLANE_TOKENS_FILE``
  (:mod:`quotaplane.server.auth`). Without tokens the service only binds to a loopback address.
* ``QUOTAPLANE_SNAPSHOT_EVERY``: events between partition snapshots (the scheduler's default when unset).
* ``QUOTAPLANE_ADVERTISE_URL`` (PostgreSQL): the URL other instances send clients to; default
  ``http://HOST:PORT``. ``QUOTAPLANE_LEASE_TTL`` (seconds, default 5).
"""

from __future__ import annotations

import errno
import gc
import ipaddress
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from quotaplane.errors import ConfigError, InputError, JournalError, QuotaplaneError

if TYPE_CHECKING:  # pragma: no cover
    from fastapi import FastAPI

    from quotaplane.cluster import Scheduler
    from quotaplane.server.auth import Tokens
    from quotaplane.server.ha import Leadership
    from quotaplane.server.limits import Limits

__all__ = ["DEFAULT_CONFIG", "DEFAULT_STORE", "build_scheduler", "serve"]

#: The store used when ``--store`` is not given: a SQLite file in the working directory.
DEFAULT_STORE = "sqlite:///quotaplane.db"

#: The configuration used when neither ``--config`` nor a journalled config exists: one partition
#: ``default`` with ``root`` (everyone may submit) and a leaf ``root.default``.
DEFAULT_CONFIG = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: default
"""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _scheduler_class() -> Any:
    from quotaplane.cluster import Scheduler

    return Scheduler


def journalled_config(journal: Any) -> str | None:
    """The text of the last configuration journalled in ``journal`` (stream ``scheduler``), or None."""
    text: str | None = None
    for _seq, event in journal.read("scheduler"):
        if event.get("type") == "config" and isinstance(event.get("text"), str):
            text = event["text"]
    return text


def build_scheduler(config_text: str | None, store: str | None, *, holder: str | None = None,
                    leads: Callable[[str], bool] | None = None) -> Any:
    """Open the scheduler on ``store``: restore the journal, then apply ``config_text`` if it differs.

    Without ``config_text`` the journalled configuration is kept (or :data:`DEFAULT_CONFIG` is used
    for an empty store). ``leads``: the partitions this instance writes (default: every one).
    """
    from quotaplane.journal import open_journal
    from quotaplane.partition import gcfreeze

    scheduler_cls = _scheduler_class()
    journal = open_journal(store)
    try:
        text = config_text
        if text is None:
            text = journalled_config(journal) or DEFAULT_CONFIG
        kwargs: dict[str, Any] = {"store": journal}
        if holder is not None:
            kwargs["holder"] = holder
        if leads is not None:
            kwargs["leads"] = leads
        every = os.environ.get("QUOTAPLANE_SNAPSHOT_EVERY", "").strip()
        if every:
            # Events between partition snapshots: larger = fewer snapshot captures and writes on the
            # write path, longer restarts.
            kwargs["snapshot_every"] = int(every)
        scheduler = scheduler_cls.from_yaml(text, **kwargs)
    except BaseException:
        journal.close()
        raise
    # a serving process: the restored state is long-lived (a takeover drops a follower's state, which
    # its caller still holds now: the next timer tick settles)
    gcfreeze.settle_later(replaced=True)
    return scheduler


def _read_config(config: Path) -> str:
    from quotaplane.config import load_config

    try:
        text = config.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {config}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{config} is not UTF-8 text: {exc}") from None
    load_config(text)  # raises ConfigError with the line
    from quotaplane.config.files import later_problems

    problems = later_problems(text)   # a window that would open to an invalid configuration
    if problems:
        raise ConfigError(problems[0], problems=[(0, p) for p in problems])
    return text


class _Refused(Exception):
    """The service refuses to start; ``code`` is the exit code (the reason was printed)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _tokens_for(host: str, anonymous_read: bool = False) -> Tokens:
    from quotaplane.server.auth import load_tokens

    try:
        tokens = load_tokens(anonymous_read=anonymous_read or None)
    except (OSError, ValueError) as exc:
        _err(f"quotaplane: cannot load tokens: {exc}")
        raise _Refused(2) from None
    if not tokens and not _is_loopback(host):
        _err(f"quotaplane: refusing to bind {host}: no tokens are configured (set QUOTAPLANE_TOKENS or "
             "QUOTAPLANE_TOKENS_FILE), so the service only listens on a loopback address")
        raise _Refused(2)
    if tokens.anonymous_read and not tokens:
        _err("quotaplane: --anonymous-read changes nothing without tokens: every loopback client may read "
             "and write")
    return tokens


def _config_text(config: Path | None) -> str | None:
    if config is None:
        return None
    try:
        return _read_config(config)
    except ConfigError as exc:
        for line, reason in exc.problems:
            _err(f"{config}:{line}: {reason}" if line else f"{config}: {reason}")
        _err(f"quotaplane: refusing to start: {config} is not a valid configuration")
        raise _Refused(1) from None


def _is_postgres(store_url: str) -> bool:
    return store_url.startswith(("postgresql:", "postgres:"))


def _check_partitions(store_url: str, partitions: list[str] | None) -> None:
    """``--partitions`` shares partitions between instances through PostgreSQL's leases: with any
    other store it is a usage error (exit 2), said before the port or the store is touched."""
    if partitions is not None and not _is_postgres(store_url):
        _err(f"quotaplane: --partitions (QUOTAPLANE_PARTITIONS) needs a PostgreSQL store, whose leases "
             f"share the partitions between instances, and the store is {store_url}: leave --partitions "
             "out (one instance then leads every partition), or give --store postgresql://user@host/db")
        raise _Refused(2)


def _scheduler_for(text: str | None, store_url: str, host: str, port: int,
                   partitions: list[str] | None = None) -> tuple[Any, Scheduler]:
    try:
        if _is_postgres(store_url):
            if partitions is not None:
                return _start_partitions_ha(text, store_url, host, port, partitions)
            return _start_ha(text, store_url, host, port)
        return None, build_scheduler(text, store_url)
    except ConfigError as exc:
        _err(f"quotaplane: refusing to start: {exc}" + (f" (line {exc.line})" if exc.line else ""))
        raise _Refused(1) from None
    except (InputError, JournalError) as exc:   # a bad store URL, a store that cannot be opened or read
        _err(f"quotaplane: refusing to start: --store: {exc}")
        raise _Refused(1) from None
    except QuotaplaneError as exc:              # said in its own words, not behind its class name
        _err(f"quotaplane: refusing to start: {exc}")
        raise _Refused(1) from None
    except Exception as exc:  # store unreachable, locked by another process, unreadable journal …
        _err(f"quotaplane: refusing to start: {type(exc).__name__}: {exc}")
        raise _Refused(1) from None


def _bind(host: str, port: int) -> socket.socket:
    """Bind ``host:port`` before anything else (the store is not touched when the port is taken); listen
    only when serving starts. Bound but not listening, the address still reads as free to the fail-over
    check of an earlier process of this instance (:func:`_address_free`, Linux SO_REUSEADDR)."""
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                                 flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        _err(f"quotaplane: cannot listen on {host}:{port}: {exc.strerror or exc}")
        raise _Refused(1) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        _refuse_address(host, port, exc)
    return sock


def _refuse_address(host: str, port: int, exc: OSError) -> NoReturn:
    if exc.errno == errno.EADDRINUSE:
        _err(f"quotaplane: cannot listen on {host}:{port}: the address is in use (another quotaplane or "
             "another program listens there); stop it, or choose another --port (make run PORT=…)")
    else:
        _err(f"quotaplane: cannot listen on {host}:{port}: {exc.strerror or exc}")
    raise _Refused(1) from None


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _run(app: FastAPI, sock: socket.socket, started: Callable[[int], None], limits: Limits) -> int:
    import uvicorn

    from quotaplane.server.guard import BACKLOG, guarded_protocol

    # the connection limits (issue 32 item 8): uvicorn's httptools protocol within the guard
    protocol, guard = guarded_protocol(limits)
    app.state.service.connection_guard = guard
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning",
                                           access_log=False, lifespan="on", timeout_graceful_shutdown=5,
                                           http=protocol, backlog=BACKLOG))
    rc = 0
    # uvicorn re-raises the stop signal after its graceful shutdown; with these no-op handlers in
    # place underneath, the process closes the store and exits 0 instead of dying by the signal.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    try:
        try:
            sock.listen(BACKLOG)
        except OSError as exc:        # another process took the address since it was bound
            name = sock.getsockname()
            sock.close()
            _refuse_address(str(name[0]), int(name[1]), exc)
        started(int(sock.getsockname()[1]))
        server.run(sockets=[sock])
        if not server.started:
            rc = 1
    except _Refused as refused:
        rc = refused.code
    except SystemExit as exc:  # uvicorn exits when it cannot bind
        rc = int(exc.code) if isinstance(exc.code, int) else 1
    finally:
        try:
            app.state.service.scheduler.close()
        except Exception as exc:
            _err(f"quotaplane: error while closing the store: {exc}")
    return rc


def serve(config: Path | None = None, store: str | None = None, host: str = "127.0.0.1",
          port: int = 9080, *, log_level: str = "warning", log_format: str = "text",
          access_log: bool = False, group_commit: bool = True, partitions: list[str] | None = None,
          anonymous_read: bool = False, limits: Sequence[str] = (),
          allowed_hosts: Sequence[str] | None = None, allowed_origins: Sequence[str] | None = None) -> int:
    """Run the service until interrupted; return the process exit code (non-zero: refused to start).

    ``log_level``/``log_format`` (``text`` or ``json`` lines) set the process's logging; ``access_log``
    writes one line per request (:mod:`quotaplane.server.logs`); ``group_commit`` False journals each
    change in a transaction of its own (:mod:`quotaplane.journal.group_commit`); ``partitions`` (PostgreSQL)
    makes this instance lead only those partitions (empty list: every free one) and follow the rest
    (:mod:`quotaplane.server.ha_partitions`). ``anonymous_read``: requests without a token get the
    ``read`` role (:mod:`quotaplane.server.auth`; writes still need a token). The port is bound first:
    a taken one refuses to start (exit 1) before the store is touched; the start line comes once it
    is bound, with the URL of the web page.
    ``limits``: ``NAME=VALUE`` items (``--limit``) over the ``QUOTAPLANE_<NAME>`` variables
    (:mod:`quotaplane.server.limits`); ``allowed_hosts`` (else ``QUOTAPLANE_ALLOWED_HOSTS``; else
    loopback names without tokens, any host with them) and ``allowed_origins`` (else
    ``QUOTAPLANE_ALLOWED_ORIGINS``): :mod:`quotaplane.server.browser`.
    """
    import uvicorn  # noqa: F401  (first: a missing server extra fails before the store is touched)

    from quotaplane.partition import gcfreeze
    from quotaplane.server.app import create_app
    from quotaplane.server.logs import configure_logging

    try:
        configure_logging(log_level, log_format, access_log)
    except ValueError as exc:
        _err(f"quotaplane: {exc}")
        return 2

    store_url = store or DEFAULT_STORE
    try:
        _check_partitions(store_url, partitions)
        tokens = _tokens_for(host, anonymous_read)
        service_limits = _limits(limits)
        hosts, origins = _browser(allowed_hosts, allowed_origins, bool(tokens))
        text = _config_text(config)
        sock = _bind(host, port)
    except _Refused as refused:
        return refused.code
    gcfreeze.enable()       # this process serves: its long-lived state is frozen (see below)
    try:
        leadership, scheduler = _scheduler_for(text, store_url, host, port, partitions)
    except _Refused as refused:
        sock.close()
        return refused.code
    app = create_app(scheduler, tokens=tokens, leadership=leadership, loopback_only=not tokens,
                     group_commit=group_commit, limits=service_limits, allowed_hosts=hosts,
                     allowed_origins=origins)
    # Tail latency: the restored state and the imported modules are long-lived; move them out of the
    # collector's sight (gc.freeze, again after every rebuild, takeover or configuration applied:
    # quotaplane.partition.gcfreeze) and collect the young generation less often, so a full collection
    # (~50 ms at 30,000 allocations) does not land in the middle of requests as often.
    if not gcfreeze.settle_pending():
        scheduler.settle()      # the same call as after a build: accounting applied, survivors frozen
    gc.set_threshold(10_000, 20, 20)
    access = ("tokens, anonymous read" if tokens.anonymous_read else "tokens") if tokens \
        else "no tokens: loopback only"

    def started(bound: int) -> None:
        _err(f"quotaplane: serving on {_url(host, bound)} (store {_mask(store_url)}, {access}); "
             f"web page {_url(host, bound)}/ui/")

    return _run(app, sock, started, service_limits)


def _raise_open_files_limit() -> None:
    """Raise the soft open-files limit to the hard one (as Go programs do, YuniKorn included): the
    connection limit is derived from it."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard and soft != resource.RLIM_INFINITY:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):  # not POSIX, or not allowed: keep the soft limit
        pass


def _limits(options: Sequence[str]) -> Limits:
    """The service's limits from the environment and ``--limit`` (exit 2 naming a wrong one)."""
    from quotaplane.server.limits import FD_RESERVE, Limits, open_files_limit

    _raise_open_files_limit()
    try:
        limits = Limits.from_settings(os.environ, options)
    except ValueError as exc:
        _err(f"quotaplane: {exc}")
        raise _Refused(2) from None
    open_files = open_files_limit()
    if open_files > 0 and limits.max_connections > open_files - FD_RESERVE:
        # the process would run out of descriptors before the limit: the slowloris case (issue 32 #8)
        _err(f"quotaplane: max-connections {limits.max_connections} needs an open-files limit of at least "
             f"{limits.max_connections + FD_RESERVE} (it is {open_files}): raise it (ulimit -n) or lower "
             "max-connections")
        raise _Refused(2)
    return limits


def _browser(hosts: Sequence[str] | None, origins: Sequence[str] | None, tokens: bool
             ) -> tuple[list[str] | None, list[str]]:
    """The Host allow-list and the allowed origins: the options, else ``QUOTAPLANE_ALLOWED_HOSTS`` /
    ``QUOTAPLANE_ALLOWED_ORIGINS`` (comma-separated), else the defaults (exit 2 naming a wrong one)."""
    from quotaplane.server.browser import BrowserPolicy, default_allowed_hosts

    if hosts is None and os.environ.get("QUOTAPLANE_ALLOWED_HOSTS", "").strip():
        hosts = os.environ["QUOTAPLANE_ALLOWED_HOSTS"].split(",")
    if origins is None:
        origins = os.environ.get("QUOTAPLANE_ALLOWED_ORIGINS", "").split(",")
    host_list = [h.strip() for h in hosts if h.strip()] if hosts is not None else None
    if not host_list:
        host_list = default_allowed_hosts(tokens)
    origin_list = [o.strip() for o in origins if o.strip()]
    try:
        BrowserPolicy(host_list, origin_list)
    except ValueError as exc:
        _err(f"quotaplane: {exc}")
        raise _Refused(2) from None
    return host_list, origin_list


def _mask(url: str) -> str:
    try:
        from quotaplane.journal.base import mask_url

        return mask_url(url)
    except Exception:
        return url.split("@")[-1]


def _start_ha(text: str | None, store_url: str, host: str, port: int) -> tuple[Leadership, Scheduler]:
    from quotaplane.journal import open_journal
    from quotaplane.server.ha import Leadership

    advertise = os.environ.get("QUOTAPLANE_ADVERTISE_URL") or f"http://{host}:{port}"
    ttl = float(os.environ.get("QUOTAPLANE_LEASE_TTL", "5"))
    lease_journal = open_journal(store_url)
    holder_box: list[str] = []

    def build_leader(holder: str) -> Any:
        # The new leader restores everything journalled, then applies its --config if it differs.
        return build_scheduler(text, store_url, holder=holder)

    def build_follower() -> Any:
        # A follower keeps the journalled config as it is (applying its own would be a write); its
        # appends are fenced with its holder name, so it can never fork the journal. Before the leader
        # has written anything, it serves an in-memory copy of the config until the store fills.
        if journalled_config(lease_journal) is None:
            placeholder = _scheduler_class().from_yaml(text or DEFAULT_CONFIG)
            placeholder.config_seq = -1
            return placeholder
        return build_scheduler(None, store_url, holder=holder_box[0] if holder_box else None)

    def streams_hint() -> list[str]:
        # Streams the restore and the --config may write to: every journalled stream and every
        # partition of the configuration (the scheduler names a partition's stream after it).
        from quotaplane.config import load_config

        names = set(lease_journal.streams())
        for source in (text, journalled_config(lease_journal)):
            if source:
                for pc in load_config(source).partitions:
                    names.add("partition:scheduler" if pc.name == "scheduler" else pc.name)
        names.discard("scheduler")
        return sorted(names)

    leadership = Leadership(lease_journal, advertise=advertise, build_leader=build_leader,
                            build_follower=build_follower, streams_hint=streams_hint,
                            refresh=lambda cur: catch_up(cur, build_follower, lease_journal),
                            ttl=ttl, interval=max(0.2, min(1.0, ttl / 5)),
                            address_free=lambda: _address_free(host, port))
    holder_box.append(leadership.holder)
    scheduler = leadership.initial()
    return leadership, scheduler


def _start_partitions_ha(text: str | None, store_url: str, host: str, port: int, partitions: list[str]
                         ) -> tuple[Any, Scheduler]:
    """Partition mode (issue 18): this instance leads the partitions it is given (or every free one)
    and follows the others; see :mod:`quotaplane.server.ha_partitions`."""
    from quotaplane.journal import open_journal
    from quotaplane.server.ha_partitions import PartitionLeadership

    advertise = os.environ.get("QUOTAPLANE_ADVERTISE_URL") or f"http://{host}:{port}"
    ttl = float(os.environ.get("QUOTAPLANE_LEASE_TTL", "5"))
    lease_journal = open_journal(store_url)

    def build(holder: str, leads: Callable[[str], bool], config_leader: bool) -> Any:
        if not config_leader:
            # the config leader writes the first configuration: wait for it (an empty store)
            deadline = time.monotonic() + max(30.0, 3 * ttl)
            while journalled_config(lease_journal) is None:
                if time.monotonic() > deadline:
                    raise RuntimeError("the store holds no configuration and another instance holds the "
                                       "configuration lease: start that one first")
                time.sleep(0.2)
        return build_scheduler(text if config_leader else None, store_url, holder=holder, leads=leads)

    leadership = PartitionLeadership(lease_journal, advertise=advertise, partitions=partitions, build=build,
                                     ttl=ttl, interval=max(0.2, min(1.0, ttl / 5)))
    return leadership, leadership.initial()


def _address_free(host: str, port: int) -> bool:
    """True when nothing listens at ``host:port`` (binding it succeeds): no live process serves the
    address this instance advertises (issue 14 #7)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for family, kind, proto, _name, address in infos:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(address)
            except OSError:
                return False
    return True


def catch_up(current: Any, rebuild: Any, journal: Any) -> Any:
    """Bring a follower's copy up to date from the journal (poll ``read(after)``).

    New partition events are replayed into the live partitions; a new configuration event (or any
    surprise: compaction, a new partition) rebuilds the copy from the store instead.
    """
    try:
        if journal.last_seq("scheduler") == getattr(current, "config_seq", -1):
            known = {p.stream for p in current.partitions()}
            if all(s in known for s in journal.streams() if s != "scheduler"):
                for p in current.partitions():
                    if journal.last_seq(p.stream) > p.last_seq:
                        p.replay(journal.read(p.stream, after=p.last_seq))
                return current
    except Exception as exc:  # anything unexpected: fall back to a full rebuild
        _err(f"quotaplane: follower catch-up failed ({exc}); rebuilding from the store")
    fresh = rebuild()
    try:
        current.close()
    except Exception as exc:
        _err(f"quotaplane: closing the old follower copy failed: {exc}")
    return fresh
