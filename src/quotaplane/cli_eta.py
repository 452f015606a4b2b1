"""``quotaplane eta`` and ``quotaplane whatif [--explain]`` (docs/eta.md, docs/cli.md): when will the
waiting work start, and what would have to change for a request to be admitted now. They ask a running
service (``--server``, ``--token``) like the other client commands (:mod:`quotaplane.cli_remote`),
with the same ``-o table|wide|json|yaml``."""

from __future__ import annotations

from collections.abc import Mapping
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
    _res,
    whatif_text,
)

__all__ = ["eta_table", "explain_text", "register"]


def _in(seconds: float | None) -> str:
    """``in 5m 20s`` — how long from now; ``unknown`` when None."""
    if seconds is None:
        return "unknown"
    if seconds < 1:
        return "now"
    s = round(seconds)
    parts = [(s // 86400, "d"), (s % 86400 // 3600, "h"), (s % 3600 // 60, "m"), (s % 60, "s")]
    shown = [f"{n}{u}" for n, u in parts if n][:2]
    return "in " + " ".join(shown)


def _runtime(text: str) -> float:
    """``--max-runtime``: ``2h``, ``90m``, ``1d`` (the tag ``quotaplane.io/max-runtime``'s form) or a
    number of seconds, above 0 as the service requires; anything else ends the command with exit 2."""
    from quotaplane.config.history import SettingsError, parse_duration

    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parse_duration(text, "--max-runtime") / 1000
        except SettingsError:
            seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        typer.echo(f"quotaplane: --max-runtime: expected a duration above 0 such as 2h, 90m, 1d or a "
                   f"number of seconds, got {text!r}", err=True)
        raise typer.Exit(2)
    return seconds


def eta_table(data: Mapping[str, Any], wide: bool) -> Table:
    """The forecast of every waiting ask: its p50 start from now, the range p10 to p90 and the basis."""
    t = Table(["ask", "application", "queue", "starts", "range~"] + (["basis~"] if wide else []))
    for a in data.get("asks", []):
        secs = a["inSeconds"]
        interval = "-" if secs["p10"] is None or secs["p90"] is None else \
            f"{_in(secs['p10'])[3:] or 'now'} .. {_in(secs['p90'])[3:] or 'now'}"
        never = secs["p50"] is None and any(b.startswith("never fits") for b in a.get("basis", []))
        row = [a["allocationKey"], a["applicationID"], a["queue"], "never" if never else _in(secs["p50"]),
               interval]
        if wide:
            row.append("; ".join(a.get("basis", [])))
        t.add(*row)
    return t


def explain_text(data: Mapping[str, Any], wide: bool) -> str:
    """What would have to change, after the verdict of ``whatif``."""
    if data["admitted"]:
        return "admitted"
    verdict = whatif_text({"allocated": False, "reasons": data["reasons"]}, wide)
    out = [verdict, "", "what would have to change:", *_changes(data, wide)]
    if data.get("largest"):
        out.append(f"- or asking less: {_res(data['largest'])} would be admitted now")
    out += [f"- or waiting: {x['message']}" for x in (data.get("resets") or []) + (data.get("windows") or [])]
    out += [f"note: {n}" for n in data.get("notes", [])]
    if len(out) == 3:
        out.append("- nothing verified would admit it")
    elif out[3].startswith("- or "):
        out[3] = "- " + out[3][len("- or "):]       # the first change offered is no alternative
    return "\n".join(out)


def _changes(data: Mapping[str, Any], wide: bool) -> list[str]:
    """The releases and the limits rising, as tables."""
    out: list[str] = []
    if data.get("releases"):
        t = Table(["end allocation", "application", "queue", "user", "priority", "holds~"])
        for r in data["releases"]:
            t.add(r["allocationKey"], r["applicationID"], r["queue"], r["user"], r["priority"],
                  _res(r["resource"]))
        out += [f"- {len(data['releases'])} running allocation(s) ending:", _render(t, wide)]
    if data.get("limits"):
        t = Table(["raise", "at", "by~"])
        for x in data["limits"]:
            t.add(x["code"], x["path"], _res(x["by"]))
        out += ["- or these limits rising:", _render(t, wide)]
    return out


def register(app: typer.Typer) -> None:
    """Add ``eta`` and ``whatif`` to ``app``."""

    @app.command()
    def eta(ask: Annotated[str | None, typer.Argument(help="one waiting ask (its allocation key)")] = None,
            queue: Annotated[str | None, typer.Option(help="Only this queue and those below it.")] = None,
            application: Annotated[str | None, typer.Option(help="Only this application.")] = None,
            server: Server = None, token: Token = None, partition: Partition = "default",
            output: Output = "table") -> None:
        """When will the waiting asks start: p50 from now, the p10-p90 interval and its basis ("unknown"
        when nothing known lets it start). With ASK: that ask, and what would have to change."""
        _check_output(output)
        with _client(server, token) as c:
            if ask is not None:
                one = c.eta_of(ask, partition=partition)
                _emit(output, one, lambda wide: _render(eta_table({"asks": [one["eta"]]}, True), wide)
                      + "\n\n" + explain_text(one["explain"], wide))
                return
            data = c.eta(queue=queue, application_id=application, partition=partition)
        _emit(output, data, lambda wide: _render(eta_table(data, wide), wide))

    @app.command()
    def whatif(application: Annotated[str, typer.Argument(help="the application")],
               resource: Annotated[list[str], typer.Argument(
                   help="NAME=QUANTITY, as in the configuration or Kubernetes: cpu=2 memory=4Gi, vcore=500m, "
                        "nvidia.com/gpu=1")],
               explain: Annotated[bool, typer.Option(
                   "--explain", help="Also what would have to change for it to be admitted now.")] = False,
               max_runtime: Annotated[str | None, typer.Option(
                   "--max-runtime", help="Its declared runtime, which a budget counts: 2h, 90m, 1d or "
                                         "seconds.")] = None,
               server: Server = None, token: Token = None, partition: Partition = "default",
               output: Output = "table") -> None:
        """Would this request be admitted now? Every reason when not (with --explain, what would have to
        change: allocations ending, limits rising, a smaller request, a budget's reset or a window's
        opening that admits it). Changes nothing."""
        from quotaplane.units import parse_resources

        _check_output(output)
        try:
            amounts = parse_resources(resource)
        except ValueError as exc:
            typer.echo(f"quotaplane: {exc}", err=True)
            raise typer.Exit(2) from None
        runtime = None if max_runtime is None else _runtime(max_runtime)
        with _client(server, token) as c:
            if explain:
                found = c.explain(application, amounts, partition=partition, max_runtime=runtime)
                _emit(output, found, lambda wide: explain_text(found, wide))
                return
            d = c.what_if(application, amounts, partition=partition, max_runtime=runtime)
        data = {"allocated": d.allocated, "reasons": [v.to_dict() for v in d.reasons]}
        _emit(output, data, lambda wide: whatif_text(data, wide))
