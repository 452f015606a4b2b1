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
from typing import TYPE_CHECKING, Annotated, Any

import typer

from quotaplane.cli_remote import Output, Partition, Server, Token, _client

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["cost_table", "print_table", "register", "usage_table"]


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


def _table(title: str, names: Sequence[str], figures: Sequence[str]) -> Table:
    """A table whose ``names`` columns (scope, step, resource) are never cut nor folded — the width a
    name needs is reserved — and whose ``figures`` columns may wrap at spaces in a narrow terminal."""
    from rich.table import Table

    table = Table(title=title)
    for n in names:
        table.add_column(n, no_wrap=True)
    for f in figures:
        table.add_column(f)
    return table


def _texts(column: Any) -> list[str]:
    return [str(column.header), *(str(c) for c in column.cells)]


def _bounds(column: Any) -> tuple[int, int]:
    """The column's narrowest and widest width: a name's column is as wide as its longest name (never
    wrapped), a figure's at least as wide as its longest word."""
    texts = _texts(column)
    widest = max(map(len, texts))
    if column.no_wrap:
        return widest, widest
    return max(len(word) for t in texts for word in t.split() or [""]), widest


def _fit(widest: list[int], narrowest: list[int], room: int) -> list[int]:
    """Column widths within ``room``: each at least ``narrowest``, the room left given a character at
    a time to the column that is furthest from its ``widest`` (the figure that would wrap most)."""
    widths = list(narrowest)
    for _ in range(max(0, min(room, sum(widest)) - sum(widths))):
        i = max(range(len(widths)), key=lambda k: widest[k] - widths[k])
        widths[i] += 1
    return widths


def print_table(console: Console, table: Table) -> None:
    """Print ``table`` whole. A name (scope, step, resource) is never cut or folded. In a terminal the
    figures wrap at spaces to fit its width, and the table is wider than the terminal when even that
    cannot keep every name and word whole; into a pipe or a file every row is one line however long
    (grep and awk read it), whatever ``COLUMNS`` says."""
    cols = table.columns
    narrowest, widest = (list(b) for b in zip(*map(_bounds, cols), strict=True))
    frame = 3 * len(cols) + 1                        # a space either side of each cell, n + 1 rules
    room = console.width - frame if console.is_terminal else sum(widest)
    # rich shares a shortage among all columns and cuts with "…": the widths are set here instead
    for column, width in zip(cols, _fit(widest, narrowest, room), strict=True):
        column.width = width
    console.width = max(console.width, frame + sum(c.width or 0 for c in cols))
    console.print(table)


def usage_table(data: Any, group_by: str, several_steps: bool) -> Table:
    """The usage answer ``data`` (``GET …/history/usage``) as a table, one row per scope, step and
    resource."""
    table = _table(f"{data['start']} – {data['end']} ({data['timeZone']})",
                   [group_by, *(["from"] if several_steps else []), "resource"],
                   ["used", "borrowed", "lent", "waiting", "wait p50 / p90 / max"])
    for row in _usage_rows(data, several_steps):
        table.add_row(*row)
    return table


def cost_table(data: Any, group_by: str) -> Table:
    """The bill ``data`` (``GET …/history/cost``) as a table, one row per scope and resource."""
    from quotaplane.history.report import unit_of

    cur = data.get("currency") or ""
    table = _table(f"{data['start']} – {data['end']}", [group_by, "resource"],
                   ["hours", "borrowed hours", f"within guarantee {cur}".strip(), f"borrowed {cur}".strip(),
                    f"total {cur}".strip()])
    for ln in data["lines"]:
        _, unit = unit_of(ln["resource"])
        table.add_row(ln["name"], ln["resource"], f"{float(ln['hours']):,.1f} {unit}-h",
                      f"{float(ln['borrowedHours']):,.1f} {unit}-h", ln["guaranteedCost"],
                      ln["borrowedCost"], ln["total"])
    table.add_row("total", "", "", "", "", "", data["total"])
    return table


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
        ignored = [o for o, v in (("--step", step), ("--resource", resource), ("--top", top))
                   if v is not None]
        if cost and ignored:
            # the bill is one line per scope and resource over the whole range: these would be ignored
            typer.echo(f"quotaplane: --cost bills every resource over the whole range; {', '.join(ignored)} "
                       "does not apply to it (use --group-by, --period or --start/--end, --name)", err=True)
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

        table = cost_table(data, group_by) if cost else usage_table(data, group_by, step is not None)
        print_table(Console(), table)
        points = [pt for s in data.get("series", []) for pt in s.get("points", [])]
        if resource is not None and not cost and not any(pt.get("used", {}).get(resource) for pt in points):
            typer.echo(f"quotaplane: no usage of {resource} in this range ({data.get('start')} to "
                       f"{data.get('end')})", err=True)
        if cost and not data.get("prices") and not data.get("borrowedPrices"):
            typer.echo("quotaplane: no prices are configured, so nothing is billed: set history.prices "
                       "in the partition's configuration (docs/history.md \"Chargeback\")", err=True)
