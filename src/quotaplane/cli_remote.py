"""The CLI's client commands (issue 17 #2): ask a running service, over :mod:`quotaplane.client`.

``quotaplane queues|usage|apps|asks|whatif|events|config`` talk to ``--server`` (``QUOTAPLANE_SERVER``,
default ``http://127.0.0.1:9080``) with ``--token`` (``QUOTAPLANE_TOKEN``). Tables by default,
``--output json`` for the service's own JSON. Errors print the service's message and exit 1.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["register"]

Server = Annotated[str | None, typer.Option("--server", envvar="QUOTAPLANE_SERVER",
                                            help="The service's URL (default http://127.0.0.1:9080).")]
Token = Annotated[str | None, typer.Option("--token", envvar="QUOTAPLANE_TOKEN", help="Bearer token.")]
Partition = Annotated[str, typer.Option("--partition", "-p", help="The partition.")]
Output = Annotated[str, typer.Option("--output", "-o", help="table or json.")]


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


def _res(r: Mapping[str, int] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted((r or {}).items())) or "-"


def _show(output: str, data: Any, columns: Sequence[str], rows: Callable[[Any], list[Sequence[str]]]) -> None:
    if output == "json":
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    if output != "table":
        typer.echo("quotaplane: --output must be table or json", err=True)
        raise typer.Exit(2)
    from rich.console import Console
    from rich.table import Table

    table = Table(*columns)
    for row in rows(data):
        table.add_row(*[str(x) for x in row])
    Console().print(table)


def _queue_rows(node: Mapping[str, Any]) -> list[Sequence[str]]:
    rows: list[Sequence[str]] = [(node["queuename"], _res(node.get("allocatedResource")),
                                  _res(node.get("pendingResource")), _res(node.get("guaranteedResource")),
                                  _res(node.get("maxResource")), str(node.get("runningApps", 0)))]
    for child in node.get("children") or ():
        rows.extend(_queue_rows(child))
    return rows


def register(app: typer.Typer) -> None:
    """Add the client commands to ``app``."""

    @app.command()
    def queues(server: Server = None, token: Token = None, partition: Partition = "default",
               output: Output = "table") -> None:
        """The queue tree: allocated, pending (waiting asks), guaranteed, max, running applications."""
        with _client(server, token) as c:
            tree = c.queues(partition)
        _show(output, tree, ("queue", "allocated", "pending", "guaranteed", "max", "running"), _queue_rows)

    @app.command()
    def usage(kind: Annotated[str, typer.Argument(help="users or groups")],
              name: Annotated[str | None, typer.Argument(help="one user or group")] = None,
              server: Server = None, token: Token = None, partition: Partition = "default",
              output: Output = "table") -> None:
        """Usage per user or group (every queue of its path)."""
        if kind not in ("users", "groups"):
            typer.echo("quotaplane: usage users|groups [NAME]", err=True)
            raise typer.Exit(2)
        with _client(server, token) as c:
            if name is None:
                data = c.users_usage(partition) if kind == "users" else c.groups_usage(partition)
            else:       # one name: the service's own answer, 404 when it tracks no such user or group
                data = [c.user_usage(name, partition) if kind == "users" else c.group_usage(name, partition)]
        key = "userName" if kind == "users" else "groupName"

        def rows(items: list[dict[str, Any]]) -> list[Sequence[str]]:
            out: list[Sequence[str]] = []
            for d in items:
                stack = [d.get("queues") or {}]
                while stack:
                    q = stack.pop()
                    if q:
                        out.append((d[key], q["queuePath"], _res(q.get("resourceUsage")),
                                    ", ".join(q.get("runningApplications") or ()) or "-",
                                    _res(q.get("maxResources"))))
                        stack.extend(reversed(q.get("children") or ()))
            return out
        _show(output, data, (kind[:-1], "queue", "used", "running", "max"), rows)

    @app.command()
    def standing(queue: Annotated[str | None, typer.Option(help="A queue's full path.")] = None,
                 user: Annotated[str | None, typer.Option(help="A user.")] = None,
                 group: Annotated[str | None, typer.Option(help="A group.")] = None,
                 quota: Annotated[str | None, typer.Option(help="An elastic quota.")] = None,
                 server: Server = None, token: Token = None, partition: Partition = "default",
                 output: Output = "table") -> None:
        """Where a queue, user, group or elastic quota stands, and why its waiting work waits."""
        if sum(x is not None for x in (queue, user, group, quota)) != 1:
            typer.echo("quotaplane: name exactly one of --queue, --user, --group or --quota", err=True)
            raise typer.Exit(2)
        with _client(server, token) as c:
            data = c.standing(queue=queue, user=user, group=group, quota=quota, partition=partition)

        def rows(d: dict[str, Any]) -> list[Sequence[str]]:
            out: list[Sequence[str]] = []
            for q in d.get("queues") or ([d["queue"]] if "queue" in d else []):
                out.append(("queue " + q["queue"], "guaranteed " + _res(q["guaranteed"]),
                            "used " + _res(q["used"]), "borrowed " + _res(q["borrowed"]),
                            "lent " + _res(q["lent"]),
                            f"running {q['runningApplications']}/{q['maxApplications'] or '-'}"))
            for lim in d.get("limits") or ():
                out.append(("limit " + lim["queue"], "max " + _res(lim["max"]),
                            "used " + _res(lim["used"]), "", "",
                            f"running {len(lim['runningApplications'])}/{lim['maxApplications'] or '-'}"))
            e = d.get("elastic")
            if e:
                out.append(("quota " + e["quota"], "min " + _res(e["min"]), "used " + _res(e["used"]),
                            "borrowed " + _res(e["borrowed"]), "lent " + _res(e["lent"]),
                            "runtime " + _res(e["runtime"])))
            for w in d.get("waiting") or ():
                why = "; ".join(f"{r['code']} at {r['path']}" for r in w["reasons"]) or "next cycle"
                out.append((f"waiting {w['allocationKey']}", f"#{w['position']} in order",
                            _res(w["resource"]), w["applicationID"], why, ""))
            return out
        _show(output, data, (f"{data['kind']} {data['name']}", "", "", "", "", ""), rows)

    @app.command()
    def top(server: Server = None, token: Token = None, partition: Partition = "default",
            interval: Annotated[float, typer.Option(help="Seconds between refreshes.")] = 2.0,
            once: Annotated[bool, typer.Option("--once", help="Print one frame and exit.")] = False) -> None:
        """A live view of the queues and the waiting work (Ctrl-C to leave)."""
        import time

        from rich.console import Console, Group
        from rich.live import Live
        from rich.table import Table

        def frame(c: Any) -> Group:
            queues = Table("queue", "allocated", "pending", "guaranteed", "max", "running",
                           title=f"{c.server} — partition {partition} — {time.strftime('%H:%M:%S')}")
            for row in _queue_rows(c.queues(partition)):
                queues.add_row(*row)
            waiting = Table("ask", "application", "resource", "waits for", title="waiting asks")
            for a in c.pending(None, partition)[:20]:
                why = "; ".join(f"{r['code']} at {r['path']}" for r in a.get("reasons") or ()) or "-"
                waiting.add_row(a["allocationKey"], a["applicationID"], _res(a.get("resource")), why)
            return Group(queues, waiting)

        with _client(server, token) as c:
            if once:
                Console().print(frame(c))
                return
            with Live(frame(c), refresh_per_second=4, screen=False) as live:
                try:
                    while True:
                        time.sleep(interval)
                        live.update(frame(c))
                except KeyboardInterrupt:
                    return

    @app.command()
    def apps(server: Server = None, token: Token = None, partition: Partition = "default",
             output: Output = "table") -> None:
        """The applications: queue, state, user."""
        with _client(server, token) as c:
            data = c.applications(partition)
        _show(output, data, ("application", "queue", "state", "user"),
              lambda items: [(a["applicationID"], a["queueName"], a["state"], a.get("user", ""))
                             for a in items])

    @app.command()
    def asks(application: Annotated[str | None, typer.Argument(help="one application")] = None,
             server: Server = None, token: Token = None, partition: Partition = "default",
             output: Output = "table") -> None:
        """The waiting asks in arrival order, with why each waits (``standing``: their position)."""
        with _client(server, token) as c:
            data = c.pending(application, partition)

        def rows(items: list[dict[str, Any]]) -> list[Sequence[str]]:
            return [(a["allocationKey"], a["applicationID"], _res(a.get("resource")),
                     str(a.get("priority", 0)),
                     "; ".join(f"{r['code']} at {r['path']}" for r in a.get("reasons") or ()) or "-")
                    for a in items]
        _show(output, data, ("ask", "application", "resource", "priority", "waits for"), rows)

    @app.command()
    def whatif(application: Annotated[str, typer.Argument(help="the application")],
               resource: Annotated[list[str], typer.Argument(help="NAME=AMOUNT in internal units")],
               server: Server = None, token: Token = None, partition: Partition = "default",
               output: Output = "table") -> None:
        """Would this request be admitted now? Every reason when not. Changes nothing."""
        amounts: dict[str, int] = {}
        for item in resource:
            name, _, amount = item.partition("=")
            if not name or not amount.isdigit():
                typer.echo(f"quotaplane: {item!r}: expected NAME=AMOUNT", err=True)
                raise typer.Exit(2)
            amounts[name] = int(amount)
        with _client(server, token) as c:
            d = c.what_if(application, amounts, partition=partition)
        data = {"allocated": d.allocated, "reasons": [v.to_dict() for v in d.reasons]}
        _show(output, data, ("admitted", "policy", "code", "path", "short of"),
              lambda x: [(str(x["allocated"]), "", "", "", "")] + [
                  ("", v["policy"], v["code"], v["path"], _res(v.get("resource"))) for v in x["reasons"]])

    @app.command()
    def events(server: Server = None, token: Token = None, partition: Partition = "default",
               types: Annotated[str | None, typer.Option(help="Only these types, comma separated.")] = None,
               after: Annotated[int | None, typer.Option(help="Resume after this sequence number.")] = None
               ) -> None:
        """Follow the event stream (one JSON line per notice), resuming after a dropped connection."""
        with _client(server, token) as c:
            wanted = tuple(types.split(",")) if types else ()
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
        text = _read(file)
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
