"""``quotaplane budgets``: every budget of a partition, or one scope's, from a running service
(docs/budgets.md).

::

    quotaplane budgets                                   # every budgeted scope
    quotaplane budgets --queue root.teams.a              # one queue's budget
    quotaplane budgets --queue root.teams --user alice   # a user's budget in a queue
    quotaplane budgets -o json                           # the service's answer
    quotaplane budgets --elastic-quota team-a            # an elastic quota's budget
    quotaplane windows                                   # every time window: schedule, overrides, open?
    quotaplane windows --add audit.yaml                  # a one-off window (a temporary override)
    quotaplane windows --remove audit                    # remove one (an open one closes first)

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
from quotaplane.units import configured, local_minute

__all__ = ["budget_rows", "register", "window_rows"]

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
                         _minute(v["runsOutAt"], "-"), _minute(st["resetsAt"], "decays")])
    return rows


def _minute(when: str | None, none: str) -> str:
    """An ISO time to the minute with its offset (``2026-11-30T00:00+01:00``: a budget resets in its
    own zone, and rows of budgets in different zones sit side by side); ``none`` for no time."""
    if not when:
        return none
    return when[:16] + (when[19:].lstrip(".0123456789") or "")


WINDOW_COLUMNS = ("window", "scope", "schedule", "overrides", "now")



def _override(w: dict[str, Any], field: str, value: Any) -> str:
    return configured(value, kubernetes=w["kind"] == "elasticquota", hours=field == "resourcehours")


def window_rows(windows: list[dict[str, Any]]) -> list[list[str]]:
    """One row per window: its name, scope, schedule, overrides and whether it is open (and due)."""
    rows: list[list[str]] = []
    for w in windows:
        sched, zone = w["schedule"], w["timezone"]
        when = (f"cron {sched['cron']} for {sched['duration'] / 3600:g}h" if "cron" in sched
                else f"{local_minute(sched['from'], zone)}..{local_minute(sched['to'], zone)}") + f" {zone}"
        now = "open" if w["active"] else "closed"
        if w["due"] != w["active"]:
            now += f" (due to {'open' if w['due'] else 'close'})"
        rows.append([w["name"], w["scope"], when,
                     "; ".join(f"{k}: {_override(w, k, v)}"
                               for k, v in sorted(w["overrides"].items())), now])
    return rows


def _window_file(path: str) -> dict[str, Any]:
    from pathlib import Path

    from quotaplane.config.bodies import load_yaml_documents

    try:
        docs = load_yaml_documents(Path(path).read_text(encoding="utf-8"), path)
    except OSError as exc:
        typer.echo(f"quotaplane: cannot read {path}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
    if len(docs) != 1 or not isinstance(docs[0], dict):
        typer.echo(f"quotaplane: {path}: expected one YAML or JSON document, a window", err=True)
        raise typer.Exit(2)
    return dict(docs[0])


def register(app: typer.Typer) -> None:
    """Add ``budgets`` and ``windows`` to ``app``."""

    @app.command()
    def windows(server: Server = None, token: Token = None, partition: Partition = "default",
                add: Annotated[str | None, typer.Option(
                    "--add", help="Add the one-off window in this YAML or JSON file.")] = None,
                remove: Annotated[str | None, typer.Option("--remove", help="Remove this window.")] = None,
                output: Output = "table") -> None:
        """Time windows: schedule, overrides, open or closed; add a one-off window or remove one."""
        _check_output(output)
        body = _window_file(add) if add is not None else None
        with _client(server, token) as c:
            if body is not None:
                found = c.add_window(body, partition=partition)
            elif remove is not None:
                found = c.remove_window(remove, partition=partition)
            else:
                found = c.windows(partition=partition)

        def table(wide: bool) -> str:
            t = Table(WINDOW_COLUMNS)
            for row in window_rows(found):
                t.add(*row)
            return _render(t, wide)

        _emit(output, {"partition": partition, "windows": found}, table)

    @app.command()
    def budgets(server: Server = None, token: Token = None, partition: Partition = "default",
                queue: Annotated[str | None, typer.Option(help="One queue's budget (full path).")] = None,
                user: Annotated[str | None, typer.Option(help="With --queue: a user's budget there.")] = None,
                group: Annotated[str | None, typer.Option(help="With --queue: a group's budget there.")
                                 ] = None,
                elastic_quota: Annotated[str | None, typer.Option(
                    "--elastic-quota", help="An elastic quota's budget.")] = None,
                output: Output = "table") -> None:
        """Budgets: resource-hours per period, consumed, committed, left, burn rate, reset."""
        _check_output(output)
        if (user is not None or group is not None) and queue is None:
            typer.echo("quotaplane: --user and --group need --queue", err=True)
            raise typer.Exit(2)
        with _client(server, token) as c:
            data = c.budgets(queue, user=user, group=group, elastic_quota=elastic_quota, partition=partition)

        def table(wide: bool) -> str:
            t = Table(COLUMNS)
            for row in budget_rows(data["budgets"] if queue is None and elastic_quota is None else [data]):
                t.add(*row)
            return _render(t, wide)

        _emit(output, data, table)
