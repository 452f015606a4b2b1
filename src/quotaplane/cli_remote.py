"""The CLI's client commands (issue 17 #2, issue 30): ask a running service, over :mod:`quotaplane.client`.

``quotaplane queues|usage|apps|asks|standing|top|events|config`` (and ``whatif``, ``eta``:
:mod:`quotaplane.cli_eta`) talk to ``--server``
(``QUOTAPLANE_SERVER``, default ``http://127.0.0.1:9080``) with ``--token`` (``QUOTAPLANE_TOKEN``).

Output (``-o``, as kubectl users expect):

* ``table`` (default): human units (:mod:`quotaplane.units`: cores, Gi, GPUs, percentages,
  "unlimited"), fitted to the terminal's width — 80 columns when the output is not a terminal. Long
  cells wrap onto more lines; a queue name, an application, a reason code is never cut.
* ``wide``: more columns (percentages, headroom, messages …) on one line each, however wide.
* ``json`` / ``yaml``: the service's own answer, exact internal units.

Resource words (``whatif``) are read as the configuration reads them and as Kubernetes does:
``cpu=2 memory=1Gi``, ``vcore=500m``, ``nvidia.com/gpu=1``. Errors print the service's message and
exit 1; bad arguments exit 2.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from quotaplane.notices import NOTICE_TYPES
from quotaplane.units import percent, resources

__all__ = ["NOTICE_TYPES", "OUTPUTS", "Table", "register", "whatif_text"]

Server = Annotated[str | None, typer.Option("--server", envvar="QUOTAPLANE_SERVER",
                                            help="The service's URL (default http://127.0.0.1:9080).")]
Token = Annotated[str | None, typer.Option("--token", envvar="QUOTAPLANE_TOKEN", help="Bearer token.")]
Partition = Annotated[str, typer.Option("--partition", "-p", help="The partition.")]
Output = Annotated[str, typer.Option("--output", "-o", help="table (human units, fits the terminal), wide, "
                                                            "json or yaml (the service's exact answer).")]

#: the ``-o`` formats
OUTPUTS = ("table", "wide", "json", "yaml")



# -- tables ------------------------------------------------------------------------------------------
class Table:
    """A plain-text table that fits a width by wrapping cells, never by cutting them.

    ``columns``: header names; a name ending in ``~`` marks a column whose cells may wrap (at ``", "``,
    ``"; "`` and spaces). Other columns keep their cells whole, so a queue path or a reason code is
    never split; when they alone exceed the width, the table is wider than asked rather than cut.
    """

    def __init__(self, columns: Sequence[str]) -> None:
        self.headers = [c.rstrip("~").upper() for c in columns]
        self.wraps = [c.endswith("~") for c in columns]
        self.rows: list[list[str]] = []

    def add(self, *cells: object) -> None:
        """Add a row (one cell per column)."""
        row = [str(c) for c in cells]
        if len(row) != len(self.headers):
            raise ValueError(f"{len(row)} cells for {len(self.headers)} columns")
        self.rows.append(row)

    def render(self, width: int | None = None) -> str:
        """The table as text; within ``width`` columns when it can be (None: no limit)."""
        natural = [max([len(h), *(len(r[i]) for r in self.rows)]) for i, h in enumerate(self.headers)]
        widths = list(natural)
        gap = 2
        if width is not None and sum(widths) + gap * (len(widths) - 1) > width:
            widths = self._fit(natural, width - gap * (len(widths) - 1))
        lines = [_join([h.ljust(w) for h, w in zip(self.headers, widths, strict=True)], gap)]
        for row in self.rows:
            cells = [_wrap(c, w) if wrap else [c] for c, w, wrap in zip(row, widths, self.wraps, strict=True)]
            for k in range(max(len(c) for c in cells)):
                lines.append(_join([(c[k] if k < len(c) else "").ljust(w)
                                    for c, w in zip(cells, widths, strict=True)], gap))
        return "\n".join(lines)

    def _fit(self, natural: list[int], room: int) -> list[int]:
        fixed = sum(w for w, wrap in zip(natural, self.wraps, strict=True) if not wrap)
        wrapping = [i for i, wrap in enumerate(self.wraps) if wrap]
        # the narrowest a wrapping column may get: its header and its longest unbreakable word
        least = {i: max([len(self.headers[i]), *(len(t) for r in self.rows for t in _tokens(r[i]))])
                 for i in wrapping}
        widths = [natural[i] if i not in least else least[i] for i in range(len(natural))]
        spare = room - fixed - sum(least.values())
        while spare > 0:
            want = [(natural[i] - widths[i], i) for i in wrapping if widths[i] < natural[i]]
            if not want:
                break
            _, i = max(want)
            widths[i] += 1
            spare -= 1
        return widths


def _join(cells: Sequence[str], gap: int) -> str:
    return (" " * gap).join(cells).rstrip()


_UNITS = frozenset({"core", "cores", "B", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "GPU", "GPUs", "pod", "pods",
                    "applications", "unlimited"})
_NUMBER = re.compile(r"^[<#]?[0-9][0-9.,/-]*%?$")


def _tokens(text: str) -> list[str]:
    """The words a cell may be wrapped between: at spaces, but an amount stays whole (``2.5 cores,``,
    ``64 Gi``, ``cores unlimited``)."""
    out: list[str] = []
    for word in text.split(" "):
        bare = word.rstrip(",;)")
        if out and ((_NUMBER.match(out[-1]) and bare in _UNITS) or bare == "unlimited"):
            out[-1] += " " + word
        else:
            out.append(word)
    return out


def _wrap(text: str, width: int) -> list[str]:
    if len(text) <= width:
        return [text]
    lines: list[str] = []
    line = ""
    for token in _tokens(text):
        candidate = f"{line} {token}" if line else token
        if len(candidate) <= width or not line:
            line = candidate
        else:
            lines.append(line)
            line = token
    if line:
        lines.append(line)
    return lines


def _width() -> int:
    """The terminal's width; 80 when the output is not a terminal (``COLUMNS`` overrides both)."""
    return shutil.get_terminal_size((80, 24)).columns


def _res(r: Mapping[str, int] | None) -> str:
    return resources(r)


def _shares(used: Mapping[str, int] | None, limit: Mapping[str, int] | None) -> str:
    """``cpu 40%, memory 4%``: how much of each limited resource is used."""
    used = used or {}
    order = {"vcore": 0, "memory": 1}
    ranked = sorted((limit or {}).items(), key=lambda kv: (order.get(kv[0], 2), kv[0]))
    parts = [f"{_short(k)} {pc}" for k, v in ranked if (pc := percent(used.get(k, 0), v))]
    return ", ".join(parts) or "-"


def _short(name: str) -> str:
    return {"vcore": "cpu", "nvidia.com/gpu": "gpu"}.get(name, name)


def _reason(r: Mapping[str, Any]) -> str:
    short = r.get("resource")
    return f"{r['code']} at {r['path']}" + (f" (short of {_res(short)})" if short else "")


def _emit(output: str, data: Any, table: Callable[[bool], str]) -> None:
    """Print ``data`` as ``output`` asks; ``table(wide)`` renders the human forms."""
    if output == "json":
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
    elif output == "yaml":
        from ruamel.yaml import YAML

        yaml = YAML(typ="safe", pure=True)
        yaml.default_flow_style = False
        yaml.dump(data, sys.stdout)
    else:
        typer.echo(table(output == "wide"))


def _check_output(output: str) -> None:
    if output not in OUTPUTS:
        typer.echo(f"quotaplane: --output must be one of {', '.join(OUTPUTS)}, not {output!r}", err=True)
        raise typer.Exit(2)


def _render(t: Table, wide: bool) -> str:
    return t.render(None if wide else _width())


@contextmanager
def _client(server: str | None, token: str | None) -> Iterator[Any]:
    from quotaplane.client import Client, ServiceError, UnreachableError

    try:
        with Client(server, token=token) as c:
            yield c
    except ServiceError as exc:
        typer.echo(f"quotaplane: {exc.status} {exc.message}", err=True)
        raise typer.Exit(1) from None
    except UnreachableError as exc:
        typer.echo(f"quotaplane: {exc}", err=True)
        raise typer.Exit(1) from None
    except OSError as exc:
        typer.echo(f"quotaplane: cannot reach the service: {exc}", err=True)
        raise typer.Exit(1) from None


def _read(file: Path) -> str:
    """The text of a configuration file, or one line naming it and exit 1."""
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        typer.echo(f"quotaplane: cannot read {file}: not UTF-8 text", err=True)
        raise typer.Exit(1) from None
    except OSError as exc:
        typer.echo(f"quotaplane: cannot read {file}: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None


# -- what each command shows -------------------------------------------------------------------------
def queues_table(tree: Mapping[str, Any], wide: bool) -> Table:
    """The queue tree: one row per queue, parents before their children."""
    cols = ["queue", "apps", "used~", "waiting~", "guaranteed~", "max~"]
    if wide:
        cols += ["of max~", "headroom~"]
    t = Table(cols)
    stack = [tree]
    while stack:
        q = stack.pop()
        used, limit = q.get("allocatedResource"), q.get("maxResource")
        apps = f"{q.get('runningApps', 0)}/{q.get('maxRunningApps') or '-'}"
        row = [q["queuename"], apps, _res(used), _res(q.get("pendingResource")),
               _res(q.get("guaranteedResource")), _res(limit)]
        if wide:
            row += [_shares(used, limit), _res(q.get("headroom"))]
        t.add(*row)
        stack.extend(reversed(q.get("children") or ()))
    return t


def asks_table(items: Sequence[Mapping[str, Any]], wide: bool) -> Table:
    """The waiting asks and why each waits."""
    t = Table(["ask", "application", "resource~", "priority", "waits for~"] + (["message~"] if wide else []))
    for a in items:
        reasons = a.get("reasons") or ()
        why = "; ".join(_reason(r) for r in reasons) or "next cycle"
        row = [a["allocationKey"], a["applicationID"], _res(a.get("resource")), a.get("priority", 0), why]
        if wide:
            row.append(" / ".join(str(r.get("message", "")) for r in reasons) or "-")
        t.add(*row)
    return t


def usage_table(items: Sequence[Mapping[str, Any]], kind: str, wide: bool) -> Table:
    """Usage per user or group, one row per queue of its path."""
    key = "userName" if kind == "users" else "groupName"
    cols = [kind[:-1], "queue", "used~", "limit~", "running~"] + (["of limit~", "max apps"] if wide else [])
    t = Table(cols)
    for d in items:
        stack = [d.get("queues") or {}]
        while stack:
            q = stack.pop()
            if not q:
                continue
            t.add(*_usage_row(d[key], q, wide))
            stack.extend(reversed(q.get("children") or ()))
    return t


def _usage_row(name: str, q: Mapping[str, Any], wide: bool) -> list[Any]:
    """One user's or group's usage in one queue of its path."""
    used, limit = q.get("resourceUsage"), q.get("maxResources")
    row = [name, q["queuePath"], _res(used), _res(limit),
           ", ".join(q.get("runningApplications") or ()) or "-"]
    if wide:
        row += [_shares(used, limit), q.get("maxApplications") or "-"]
    return row


def apps_table(items: Sequence[Mapping[str, Any]], wide: bool) -> Table:
    """The applications."""
    t = Table(["application", "queue", "state", "user"] + (["groups~"] if wide else []))
    for a in items:
        row = [a["applicationID"], a["queueName"], a["state"], a.get("user", "")]
        if wide:
            row.append(", ".join(a.get("groups") or ()) or "-")
        t.add(*row)
    return t


def _queue_fields(q: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A queue's lines in ``quotaplane standing``."""
    lenders = "; ".join(f"{x['queue']} {_res(x['unused'])}" for x in q.get("lenders") or ())
    return [("guaranteed", _res(q["guaranteed"])), ("max", _res(q["max"])),
            ("used", _res(q["used"]) + _pct(q["used"], q["max"])), ("waiting", _res(q["waiting"])),
            ("borrowed", _res(q["borrowed"]) + (f" from {lenders}" if lenders else "")),
            ("lent", _res(q["lent"])),
            ("running", f"{q['runningApplications']}/{q['maxApplications'] or '-'} applications")]


def _limit_fields(lim: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A user or group limit's lines in ``quotaplane standing``."""
    return [("max", _res(lim["max"])), ("used", _res(lim["used"]) + _pct(lim["used"], lim["max"])),
            ("running", f"{len(lim['runningApplications'])}/{lim['maxApplications'] or '-'} applications")]


def _elastic_fields(e: Mapping[str, Any]) -> list[tuple[str, str]]:
    """An elastic quota's lines in ``quotaplane standing``."""
    return [("min", _res(e["min"])), ("max", _res(e["max"])), ("runtime", _res(e["runtime"])),
            ("used", _res(e["used"]) + _pct(e["used"], e["runtime"])), ("waiting", _res(e.get("waiting"))),
            ("borrowed", _res(e["borrowed"])), ("lent", _res(e["lent"]))]


def _waiting_field(w: Mapping[str, Any]) -> tuple[str, str]:
    """A waiting ask's line in ``quotaplane standing``: its position, key, resource and reasons."""
    return (f"#{w['position']} {w['allocationKey']}",
            f"{_res(w['resource'])} for {w['applicationID']} in {w['queue']}: "
            + ("; ".join(_reason(r) for r in w["reasons"]) or "next cycle"))


def standing_text(d: Mapping[str, Any], width: int | None) -> str:
    """Where a tenant stands, as labelled lines per queue, limit, quota and waiting ask."""
    out = [f"{d['kind']} {d['name']} · partition {d.get('partition', 'default')}"]

    def block(title: str, fields: Sequence[tuple[str, str]]) -> None:
        out.append("")
        out.append(title)
        t = Table(["", "~"])
        for label, value in fields:
            t.add(label, value)
        out.extend("  " + line for line in t.render(None if width is None else width - 2).splitlines()[1:])

    for q in d.get("queues") or ([d["queue"]] if "queue" in d else []):
        block(f"queue {q['queue']}", _queue_fields(q))
    for lim in d.get("limits") or ():
        block(f"limit at {lim['queue']}", _limit_fields(lim))
    e = d.get("elastic")
    if e:
        block(f"elastic quota {e['quota']}", _elastic_fields(e))
    waiting = d.get("waiting") or ()
    if waiting:
        block("waiting", [_waiting_field(w) for w in waiting])
    else:
        out += ["", "nothing waits"]
    return "\n".join(out)


def _pct(used: Mapping[str, int] | None, limit: Mapping[str, int] | None) -> str:
    s = _shares(used, limit)
    return "" if s == "-" else f" ({s})"


def whatif_text(data: Mapping[str, Any], wide: bool) -> str:
    """The answer of ``whatif``: admitted, or every reason why not."""
    reasons = data["reasons"]
    if data["allocated"]:
        return "admitted"
    t = Table(["policy", "code", "path", "short of~"] + (["message~"] if wide else []))
    for r in reasons:
        row = [r["policy"], r["code"], r["path"], _res(r.get("resource"))]
        if wide:
            row.append(r.get("message", ""))
        t.add(*row)
    return f"not admitted: {len(reasons)} {'reason' if len(reasons) == 1 else 'reasons'}\n" + _render(t, wide)


def register(app: typer.Typer) -> None:
    """Add the client commands to ``app``."""

    @app.command()
    def queues(server: Server = None, token: Token = None, partition: Partition = "default",
               output: Output = "table") -> None:
        """The queue tree: running applications, used, waiting demand, guaranteed and max."""
        _check_output(output)
        with _client(server, token) as c:
            tree = c.queues(partition)
        _emit(output, tree, lambda wide: _render(queues_table(tree, wide), wide))

    @app.command()
    def usage(kind: Annotated[str, typer.Argument(help="users or groups")],
              name: Annotated[str | None, typer.Argument(help="one user or group")] = None,
              server: Server = None, token: Token = None, partition: Partition = "default",
              output: Output = "table") -> None:
        """Usage per user or group (every queue of its path)."""
        _check_output(output)
        if kind not in ("users", "groups"):
            typer.echo("quotaplane: usage users|groups [NAME]", err=True)
            raise typer.Exit(2)
        with _client(server, token) as c:
            if name is None:
                data = c.users_usage(partition) if kind == "users" else c.groups_usage(partition)
            else:       # one name: the service's own answer, 404 when it tracks no such user or group
                data = [c.user_usage(name, partition) if kind == "users" else c.group_usage(name, partition)]
        _emit(output, data, lambda wide: _render(usage_table(data, kind, wide), wide))

    @app.command()
    def standing(queue: Annotated[str | None, typer.Option(help="A queue's full path.")] = None,
                 user: Annotated[str | None, typer.Option(help="A user.")] = None,
                 group: Annotated[str | None, typer.Option(help="A group.")] = None,
                 quota: Annotated[str | None, typer.Option(help="An elastic quota.")] = None,
                 server: Server = None, token: Token = None, partition: Partition = "default",
                 output: Output = "table") -> None:
        """Where a queue, user, group or elastic quota stands, and why its waiting work waits."""
        _check_output(output)
        if sum(x is not None for x in (queue, user, group, quota)) != 1:
            typer.echo("quotaplane: name exactly one of --queue, --user, --group or --quota", err=True)
            raise typer.Exit(2)
        with _client(server, token) as c:
            data = c.standing(queue=queue, user=user, group=group, quota=quota, partition=partition)
        _emit(output, data, lambda wide: standing_text(data, None if wide else _width()))

    @app.command()
    def top(server: Server = None, token: Token = None, partition: Partition = "default",
            interval: Annotated[float, typer.Option(
                help="Seconds between refreshes (at least 0.5).", min=0.5)] = 2.0,
            once: Annotated[bool, typer.Option("--once", help="Print one frame and exit.")] = False) -> None:
        """A live view of the queues and the waiting work (Ctrl-C to leave)."""
        import time

        def frame(c: Any) -> str:
            width = _width()
            asks = c.pending(None, partition)
            more = f" (the first 20 of {len(asks)})" if len(asks) > 20 else ""
            return (f"{c.server} · partition {partition} · {time.strftime('%H:%M:%S')}\n\n"
                    + queues_table(c.queues(partition), False).render(width)
                    + f"\n\nwaiting asks{more}\n" + asks_table(asks[:20], False).render(width))

        with _client(server, token) as c:
            if once:
                typer.echo(frame(c))
                return
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            with Live(Text(frame(c)), console=Console(), auto_refresh=False, screen=False) as live:
                try:
                    while True:
                        time.sleep(interval)
                        live.update(Text(frame(c)), refresh=True)
                except KeyboardInterrupt:
                    return

    @app.command()
    def apps(server: Server = None, token: Token = None, partition: Partition = "default",
             output: Output = "table") -> None:
        """The applications: queue, state, user."""
        _check_output(output)
        with _client(server, token) as c:
            data = c.applications(partition)
        _emit(output, data, lambda wide: _render(apps_table(data, wide), wide))

    @app.command()
    def asks(application: Annotated[str | None, typer.Argument(help="one application")] = None,
             server: Server = None, token: Token = None, partition: Partition = "default",
             output: Output = "table") -> None:
        """The waiting asks in arrival order, with why each waits (``standing``: their position)."""
        _check_output(output)
        with _client(server, token) as c:
            data = c.pending(application, partition)
        _emit(output, data, lambda wide: _render(asks_table(data, wide), wide))

    @app.command()
    def events(server: Server = None, token: Token = None, partition: Partition = "default",
               types: Annotated[str | None, typer.Option(
                   help="Only these types, comma separated: " + ", ".join(NOTICE_TYPES) + ".")] = None,
               after: Annotated[int | None, typer.Option(help="Resume after this sequence number.")] = None
               ) -> None:
        """Follow the event stream (one JSON line per notice), resuming after a dropped connection."""
        wanted = tuple(t.strip() for t in types.split(",") if t.strip()) if types else ()
        unknown = [t for t in wanted if t not in NOTICE_TYPES]
        if unknown or (types is not None and not wanted):
            typer.echo(f"quotaplane: unknown event type {', '.join(map(repr, unknown)) or repr(types)}; "
                       f"the types are {', '.join(NOTICE_TYPES)}", err=True)
            raise typer.Exit(2)
        with _client(server, token) as c:
            for notice in c.events(partition, after=after, types=wanted):
                typer.echo(json.dumps(notice, sort_keys=True))
                sys.stdout.flush()

    config_app = typer.Typer(help="The running configuration: show, diff against a file, apply a file.",
                             no_args_is_help=True)
    app.add_typer(config_app, name="config")

    @config_app.command("show")
    def config_show(server: Server = None, token: Token = None) -> None:
        """Print the running configuration (YAML)."""
        with _client(server, token) as c:
            typer.echo(c.config(), nl=False)

    @config_app.command("diff")
    def config_diff(file: Annotated[Path, typer.Argument(help="A queue configuration file.")],
                    server: Server = None, token: Token = None) -> None:
        """The unified diff from the running configuration to FILE (exit 0 even when they differ)."""
        text = _read(file)
        with _client(server, token) as c:
            running = c.config()
        typer.echo("".join(difflib.unified_diff(running.splitlines(True), text.splitlines(True),
                                                "running", str(file))), nl=False)

    @config_app.command("apply")
    def config_apply(file: Annotated[Path, typer.Argument(help="A queue configuration file.")],
                     yes: Annotated[bool, typer.Option("--yes", "-y", help="Apply without asking.")] = False,
                     server: Server = None, token: Token = None) -> None:
        """Show the diff and the validation result, then apply FILE (all or nothing)."""
        from quotaplane.config import load_config
        from quotaplane.config.files import later_problems
        from quotaplane.errors import ConfigError

        text = _read(file)
        try:            # every problem, as `validate` lists them (the service names only the first)
            load_config(text)
            problems: list[tuple[int | None, str]] = [(0, p) for p in later_problems(text)]  # windows
        except ConfigError as exc:
            problems = list(exc.problems)
        if problems:
            for line, reason in problems:
                typer.echo(f"{file}:{line}: {reason}" if line else f"{file}: {reason}", err=True)
            typer.echo(f"quotaplane: {file}: not valid ({len(problems)} "
                       f"{'problem' if len(problems) == 1 else 'problems'}); nothing applied", err=True)
            raise typer.Exit(1) from None
        with _client(server, token) as c:
            running = c.config()
            typer.echo("".join(difflib.unified_diff(running.splitlines(True), text.splitlines(True),
                                                    "running", str(file))), nl=False)
            allowed, reason = c.validate_config(text)
            if not allowed:
                typer.echo(f"quotaplane: {file}: not valid: {reason}", err=True)
                raise typer.Exit(1)
            typer.echo(f"{file}: valid")
            if text == running:
                typer.echo("nothing to apply")
                return
            if not yes and not typer.confirm("apply?"):
                raise typer.Exit(1)
            c.update_config(text)
            typer.echo("applied")

