"""``quotaplane budgets``: every budget of a partition, or one scope's, from a running service
(docs/budgets.md).

::

    quotaplane budgets                                   # every budgeted scope
    quotaplane budgets --queue root.teams.a              # one queue's budget
    quotaplane budgets --queue root.teams --user alice   # a user's budget in a queue
    quotaplane budgets -o json                           # the service's answer

The table shows per scope and resource the budget, what was consumed and committed, what is left,
the share used, the burn rate (what is held now), when the budget runs out at that rate and when it
resets.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from quotaplane.cli_remote import (
    Output,
    Partition,
    Server,
    Table,
    Token,
    _check_output,
    _client,
    _emit,
    _render,
)

__all__ = ["budget_rows", "register"]

COLUMNS = ("scope", "resource", "budget", "consumed", "committed", "left", "used", "rate", "runs out",
           "resets")


def _h(value: float) -> str:
    return f"{value:,.1f}"


def budget_rows(statuses: list[dict[str, Any]]) -> list[list[str]]:
    """One table row per scope and resource (human resource-hours)."""
    rows: list[list[str]] = []
    for st in statuses:
        for r, v in sorted(st["resources"].items()):
            unit = v["unit"].removesuffix("-hours")
            rows.append([st["scope"], r, f"{_h(v['limit'])} {unit}-h", _h(v["consumed"]), _h(v["committed"]),
                         _h(v["left"]), f"{v['usedPercent']:.0f} %", f"{v['burnRate']:g} {unit}",
                         (v["runsOutAt"] or "-")[:16], (st["resetsAt"] or "decays")[:16]])
    return rows


def register(app: typer.Typer) -> None:
    """Add ``budgets`` to ``app``."""

    @app.command()
    def budgets(server: Server = None, token: Token = None, partition: Partition = "default",
                queue: Annotated[str | None, typer.Option(help="One queue's budget (full path).")] = None,
                user: Annotated[str | None, typer.Option(help="With --queue: a user's budget there.")] = None,
                group: Annotated[str | None, typer.Option(help="With --queue: a group's budget there.")
                                 ] = None,
                output: Output = "table") -> None:
        """Budgets: resource-hours per period, consumed, committed, left, burn rate, reset."""
        _check_output(output)
        if (user is not None or group is not None) and queue is None:
            typer.echo("quotaplane: --user and --group need --queue", err=True)
            raise typer.Exit(2)
        with _client(server, token) as c:
            data = c.budgets(queue, user=user, group=group, partition=partition)

        def table(wide: bool) -> str:
            t = Table(COLUMNS)
            for row in budget_rows(data["budgets"] if queue is None else [data]):
                t.add(*row)
            return _render(t, wide)

        _emit(output, data, table)
