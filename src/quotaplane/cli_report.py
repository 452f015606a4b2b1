"""``quotaplane report``: usage history and the bill from a running service (docs/history.md).

::

    quotaplane report --period last-month --resource nvidia.com/gpu     # GPU-hours per queue, borrowed
    quotaplane report --group-by user --period this-week --step day
    quotaplane report --period last-month --cost                       # the bill per queue
    quotaplane report --period last-month --output csv                 # exact resource-milliseconds

Tables print resource-hours in human units (core-hours, GiB-hours, GPU-hours) and durations; CSV
and JSON are the service's own answers (integrals in resource-milliseconds, amounts to the cent).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Annotated, Any

import typer

from quotaplane.cli_remote import Output, Partition, Server, Token, _client

__all__ = ["register"]


#: the named periods (quotaplane.history.report.PERIODS; not imported: the CLI starts without the engine)
PERIODS = ("today", "yesterday", "this-week", "last-week", "this-month", "last-month", "last-24h", "last-7d",
           "last-30d")


def _hours(resource: str, ms: int) -> str:
    from quotaplane.history.report import hours, unit_of

    h = hours(resource, ms)
    _, unit = unit_of(resource)
    return f"{float(h):,.1f} {unit}-h"


def _share(part: int, whole: int) -> str:
    return f"{float(Fraction(part, whole)) * 100:.1f} %" if whole else "-"


def _duration(ms: int | None) -> str:
    if ms is None:
        return "-"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _usage_rows(data: Any, several_steps: bool) -> list[list[str]]:
    rows: list[list[str]] = []
    for s in data["series"]:
        for p in s["points"]:
            for r in sorted(p["used"] or p["waiting"]):
                used, bor = p["used"].get(r, 0), p["borrowed"].get(r, 0)
                w = p["waits"]
                row = [s["name"]]
                if several_steps:
                    row.append(p["start"][:16])
                row += [r, _hours(r, used), f"{_hours(r, bor)} ({_share(bor, used)})" if bor else "-",
                        _hours(r, p["lent"].get(r, 0)) if p["lent"].get(r) else "-",
                        _hours(r, p["waiting"].get(r, 0)) if p["waiting"].get(r) else "-",
                        f"{_duration(w['p50'])} / {_duration(w['p90'])} / {_duration(w['max'])}"
                        if w["count"] else "-"]
                rows.append(row)
    return rows


def register(app: typer.Typer) -> None:
    """Add ``report`` to ``app``."""

    @app.command()
    def report(server: Server = None, token: Token = None, partition: Partition = "default",
               group_by: Annotated[str, typer.Option(
                   "--group-by", "-g", help="queue, user, group, quota, tree or application.")] = "queue",
               period: Annotated[str | None, typer.Option(help=f"One of {', '.join(PERIODS)}.")] = None,
               start: Annotated[str | None, typer.Option(help="2026-11-01 or 2026-11-01T08:00 (the "
                                                              "history's time zone).")] = None,
               end: Annotated[str | None, typer.Option(help="As --start; default now.")] = None,
               step: Annotated[str | None, typer.Option(help="minute, hour, day, week or month; default "
                                                             "one line per scope for the range.")] = None,
               resource: Annotated[str | None, typer.Option(help="Only this resource, e.g. "
                                                                 "nvidia.com/gpu.")] = None,
               name: Annotated[list[str] | None, typer.Option(help="Only these scopes.")] = None,
               top: Annotated[int | None, typer.Option(help="The N scopes that used the most of "
                                                            "--resource.")] = None,
               cost: Annotated[bool, typer.Option("--cost", help="The bill (history.prices).")] = False,
               output: Output = "table") -> None:
        """Usage history per queue, user, group, elastic quota, tree node or application: resource-hours,
        how much was borrowed and lent, waiting demand, wait times; with --cost, the bill."""
        if output not in ("table", "json", "csv"):
            typer.echo("quotaplane: --output must be table, json or csv", err=True)
            raise typer.Exit(2)
        if period is None and start is None:
            period = "last-24h" if end is None else None
        names: Sequence[str] | None = name or None
        with _client(server, token) as c:
            if cost:
                data = c.history_cost(group_by=group_by, start=start, end=end, period=period, names=names,
                                      csv=output == "csv", partition=partition)
            else:
                # without a step, one point per scope for the whole range
                data = c.history(group_by=group_by, step=step or "total", start=start, end=end,
                                 period=period,
                                 resource=resource, names=names, top=top, csv=output == "csv",
                                 partition=partition)
        if output == "csv":
            typer.echo(data, nl=False)
            return
        if output == "json":
            import json

            typer.echo(json.dumps(data, indent=2, sort_keys=True))
            return
        from rich.console import Console
        from rich.table import Table

        from quotaplane.history.report import unit_of

        console = Console()
        if cost:
            cur = data.get("currency") or ""
            table = Table(group_by, "resource", "hours", "borrowed hours", f"within guarantee {cur}".strip(),
                          f"borrowed {cur}".strip(), f"total {cur}".strip(),
                          title=f"{data['start']} – {data['end']}")
            for ln in data["lines"]:
                _, unit = unit_of(ln["resource"])
                table.add_row(ln["name"], ln["resource"], f"{float(ln['hours']):,.1f} {unit}-h",
                              f"{float(ln['borrowedHours']):,.1f} {unit}-h", ln["guaranteedCost"],
                              ln["borrowedCost"], ln["total"])
            table.add_row("total", "", "", "", "", "", data["total"])
            console.print(table)
            return
        several = step is not None
        columns = [group_by, *(["from"] if several else []), "resource", "used", "borrowed", "lent",
                   "waiting", "wait p50 / p90 / max"]
        table = Table(*columns, title=f"{data['start']} – {data['end']} ({data['timeZone']})")
        for row in _usage_rows(data, several):
            table.add_row(*row)
        console.print(table)

