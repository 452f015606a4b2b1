"""The ``/ui/budgets`` page: every budget and every time window of a partition (issue 34).

* **Budgets**: per budgeted scope (a queue, a user or group in a queue, an elastic quota) and per
  budgeted resource, what was consumed of the budget this period (a meter that turns amber at 50 % and
  red at 80 %: the warnings' thresholds), what running work committed, what is left, the burn rate and
  the date the budget runs out at that rate, when it resets, and what happens when it is exhausted.
* **Time windows**: each window with its scope, schedule, overrides, and whether it is open now.

The same figures as ``GET /ws/v1/partition/{p}/budgets`` and ``…/windows``
(:meth:`~quotaplane.policies.budgets.BudgetPolicy.statuses`, :func:`quotaplane.windows.window_states`),
read at the service's clock. Plain HTML (a ``<meter>`` needs no style, so the page's CSP holds).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from quotaplane.units import configured, local_minute
from quotaplane.windows import window_states

__all__ = ["budget_table", "budgets_page"]

_NONE = '<span class="muted">-</span>'


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _n(value: float) -> str:
    """A figure in resource-hours as people read it: ``2,000``, ``12.5``."""
    return f"{value:,.1f}".removesuffix(".0")


def _table(columns: Sequence[str], rows: Iterable[Sequence[str]], empty: str, cls: str) -> str:
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        body = f'<tr><td colspan="{len(columns)}" class="muted">{_e(empty)}</td></tr>'
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _when(value: str | None) -> str:
    """An ISO time as ``2026-12-01 00:00 +00:00`` (the zone of the budget), or a dash."""
    if not value:
        return _NONE
    day, _, rest = value.partition("T")
    return f'<time datetime="{_e(value)}">{_e(day)} {_e(rest[:5])} {_e(rest[-6:])}</time>'


def _meter(st: Mapping[str, Any], r: str, v: Mapping[str, Any]) -> str:
    """Consumed and committed of the budget as a meter (amber from 50 %, red from 80 %) and its
    caption; the title says it in words."""
    pct = float(v["usedPercent"])
    title = (f"{st['scope']}: {_n(v['consumed'])} of {_n(v['limit'])} {v['unit']} consumed, "
             f"{_n(v['committed'])} committed, {_n(v['left'])} left")
    return (f'<div class="budget" data-scope="{_e(st["scope"])}" data-resource="{_e(r)}" title="{_e(title)}">'
            f'<meter min="0" max="100" low="50" high="80" optimum="0" value="{min(pct, 100.0):g}">'
            f"{pct:g} %</meter>"
            f'<span class="cap">{_e(_n(v["consumed"]))} of {_e(_n(v["limit"]))} {_e(v["unit"])} '
            f"({pct:g} %)</span></div>")


def _exhausted(st: Mapping[str, Any]) -> str:
    mode = _e(st["onExhausted"])
    since = st.get("exhaustedSince")
    return mode + (f'<div class="bad">exhausted since {_when(since)}</div>' if since else "")


def _budget_rows(statuses: Sequence[Mapping[str, Any]]) -> list[Sequence[str]]:
    rows: list[Sequence[str]] = []
    for st in statuses:
        for r, v in st["resources"].items():
            rate = f'{_n(v["burnRate"])} {_e(v["unit"].removesuffix("-hours"))}s' if v["burnRate"] else _NONE
            rows.append((f'<b>{_e(st["scope"])}</b><div class="muted">{_e(st["kind"])}</div>', _e(r),
                         _meter(st, r, v), _e(_n(v["committed"])), _e(_n(v["left"])), rate,
                         _when(v["runsOutAt"]), _e(st["period"]), _when(st["resetsAt"]), _exhausted(st),
                         _e(", ".join(f"{w} %" for w in st["warnings"])) or _NONE))
    return rows


def _schedule(w: Mapping[str, Any]) -> str:
    s = w["schedule"]
    if "cron" in s:
        return f'<code>{_e(s["cron"])}</code> for {_e(_n(s["duration"] / 3600))} h ({_e(w["timezone"])})'
    zone = w["timezone"]            # the edges as the window's file wrote them, in its zone
    return f"{_e(local_minute(s['from'], zone))} to {_e(local_minute(s['to'], zone))} ({_e(zone)})"


def _override(w: Mapping[str, Any], field: str, value: Any) -> str:
    """An override in human units: cores, Gi, GPUs; a budget's in resource-hours."""
    return configured(value, kubernetes=w["kind"] == "elasticquota", hours=field == "resourcehours")


def _window_rows(windows: Sequence[Mapping[str, Any]]) -> list[Sequence[str]]:
    out: list[Sequence[str]] = []
    for w in windows:
        overrides = "<br>".join(f"{_e(k)}: {_e(_override(w, k, v))}"
                                for k, v in sorted(w["overrides"].items()))
        state = '<span class="on">open</span>' if w["active"] else '<span class="muted">closed</span>'
        if w["due"] != w["active"]:
            state += ' <span class="bad">(due to ' + ("open" if w["due"] else "close") + ")</span>"
        out.append((f'<b>{_e(w["name"])}</b>', _e(w["scope"]), _schedule(w), overrides, state))
    return out


def budget_table(statuses: Sequence[Mapping[str, Any]]) -> str:
    """The budgets table of ``statuses`` (the REST shape of each scope): also the standing page's."""
    return _table(("scope", "resource", "consumed of budget", "committed", "left", "burn rate", "runs out",
                   "period", "resets", "when exhausted", "warnings reached"),
                  _budget_rows(statuses), "no budgeted scope has been charged yet", "budgets")


def budgets_page(p: Any, policy: Any) -> str:
    """The body of ``/ui/budgets`` for partition ``p`` (``policy``: its budget policy, None: none)."""
    now = p.clock()
    with p.lock:
        statuses = policy.statuses(now) if policy is not None else []
        raw = p.config.extensions.get("windows")
        windows = window_states(raw, now) if raw else []
    note = ('<p class="muted">consumed and committed of each budget this period (amber from 50 %, red '
            "from 80 %); the burn rate is what the scope holds now, and it runs out at that rate on the "
            "date shown</p>")
    body = "<h2>Budgets</h2>"
    if policy is None:
        body += '<p class="muted">no budget in this partition (docs/budgets.md)</p>'
    else:
        body += note + budget_table(statuses)
    body += "<h2>Time windows</h2>" + _table(("window", "scope", "schedule", "overrides", "now"),
                                             _window_rows(windows), "no time window in this partition",
                                             "windows")
    return body
