"""The operator's web page at ``/ui/`` (``GET /`` leads there).

* **Queues** (the start page): the queue tree, and per resource a bar of used, waiting demand,
  guaranteed and max, with the running applications; the nodes below.
* **Waiting**: every waiting ask with its user, queue, how long it has waited and why.
* **Users and groups**, **Elastic quotas**, **Quota trees** (drawn as trees) and **Standing** (where
  one queue, user, group or quota stands and why its work waits).
* **History** (:mod:`.ui_history`): per queue, usage over time against its guaranteed and max, with
  waiting demand; the top consumers of a period — charts from the exact history.
* **Budgets** (:mod:`.ui_budgets`): every budget — consumed, committed, left, burn rate, when it runs
  out and resets — and every time window, open or closed.

Every amount is in human units (:mod:`quotaplane.units`): cores, Gi, GPUs, percentages, and
"unlimited" rather than a sentinel number. A partition selector and an auto-refresh (a small script,
``ui.js``: it fetches the page again and swaps its content; without script the page is whole, only
static) sit in the header.

Server-rendered HTML; every value is escaped, and a Content-Security-Policy allows only the page's own
stylesheet and script (no inline script or style), so an escaping slip could not run anything. The
assets ship inside the package (``ui_static/``), nothing is fetched from elsewhere.

Access: without tokens (loopback only) the page is open. With tokens, a browser logs in at
``/ui/login`` with a token and gets a session cookie (HttpOnly, SameSite=Strict; :mod:`.auth`); a
bearer header and anonymous read (``--anonymous-read``) work as on every read. A page asked for
without any of them is answered 401 with the login form. Nothing sensitive goes in a URL: the token
is posted in the form body.
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from importlib import resources as _resources
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from quotaplane.errors import NotFoundError
from quotaplane.eta import AskEta, tracker
from quotaplane.partition import Partition
from quotaplane.server.auth import SESSION_COOKIE
from quotaplane.server.errors import ApiError
from quotaplane.server.extensions import policy_of
from quotaplane.server.ui_budgets import budget_table, budgets_page
from quotaplane.server.ui_history import history_page
from quotaplane.units import amount, is_unlimited, percent, resources

__all__ = ["router"]

#: the views, in the navigation's order: (path below /ui/, title)
_PAGES = (("", "Queues"), ("waiting", "Waiting"), ("users", "Users and groups"),
          ("elastic", "Elastic quotas"), ("trees", "Quota trees"), ("standing", "Standing"),
          ("history", "History"), ("budgets", "Budgets"))

_NONE = '<span class="muted">-</span>'

#: the page's own assets only; no inline script or style (every value is escaped as well).
#: ``Referrer-Policy: same-origin``, not ``no-referrer``: under ``no-referrer`` a browser sends
#: ``Origin: null`` with a form post (Fetch, "serializing a request origin"), which the service's
#: Origin check (:mod:`.browser`) rightly refuses, so the login form could never log in; other sites
#: still get no referrer.
_CSP = ("default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
_HEADERS = {"Content-Security-Policy": _CSP, "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin", "Cache-Control": "no-store", "X-Frame-Options": "DENY"}

_ASSETS = {"ui.css": "text/css; charset=utf-8", "ui.js": "text/javascript; charset=utf-8"}

#: the body the login and logout forms post: documented, so the service's Content-Type check (a change
#: must be JSON or YAML unless its operation documents another type) lets a browser's form through
_FORM_BODY: dict[str, Any] = {"requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {
    "type": "object", "properties": {"token": {"type": "string"}, "next": {"type": "string"}}}}}}}

#: the largest login form body read (a token is far shorter)
_MAX_FORM = 8192


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _res(r: Mapping[str, int] | None) -> str:
    return _e(resources(r)) if r else _NONE


def _table(columns: Sequence[str], rows: Iterable[Sequence[str]], empty: str = "none",
           cls: str = "") -> str:
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        body = f'<tr><td colspan="{len(columns)}" class="muted">{_e(empty)}</td></tr>'
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _waited(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600:02d}h"


def _starts(eta: AskEta | None, as_of: float) -> str:
    """When the ask is forecast to start (docs/eta.md): "in 5m" with the p10-p90 range and the basis
    as its title; "unknown" when nothing known lets it start."""
    if eta is None or eta.p50 is None:
        basis = "; ".join(eta.basis) if eta is not None else ""
        return f'<span class="muted" title="{_e(basis)}">unknown</span>'
    def rel(t: float | None) -> str:
        return "-" if t is None else _waited(max(0.0, t - as_of))
    title = f"p10 {rel(eta.p10)}, p90 {rel(eta.p90)}; " + "; ".join(eta.basis)
    return f'<span title="{_e(title)}">in {_e(rel(eta.p50))}</span>'


def _reasons(reasons: Iterable[Mapping[str, Any]]) -> str:
    return "".join(f'<div class="reason"><span class="code">{_e(r["code"])}</span> at {_e(r["path"])}'
                   + (f' · short of {_res(r.get("resource"))}' if r.get("resource") else "")
                   + f'<div class="msg">{_e(r["message"])}</div></div>' for r in reasons) \
        or '<span class="muted">next cycle</span>'


# -- bars --------------------------------------------------------------------------------------------
def _finite(value: int | None) -> int | None:
    return None if value is None or is_unlimited(value) else value


def _bar(name: str, used: int, waiting: int, guaranteed: int | None, limit: int | None) -> str:
    """One resource of one queue: an SVG bar (widths are attributes, so the page's CSP needs no
    inline style) of used and waiting demand against max, a mark at guaranteed, and its caption."""
    mx = _finite(limit)
    scale = mx if mx else max(used + waiting, guaranteed or 0, 1)

    def x(v: int) -> float:
        return round(min(100.0, 100.0 * v / scale), 2)

    u, w = x(used), x(used + waiting)
    parts = [f'<rect class="track{" nomax" if not mx else ""}" x="0" y="0" width="100" height="10"/>',
             f'<rect class="used{" over" if mx and used > mx else ""}" x="0" y="0" width="{u}" height="10"/>']
    if waiting:
        parts.append(f'<rect class="wait" x="{u}" y="0" width="{round(w - u, 2)}" height="10"/>')
    if guaranteed:
        g = x(guaranteed)
        parts.append(f'<rect class="guar" x="{max(0.0, g - 0.6)}" y="0" width="1.2" height="10"/>')
    title = (f"used {amount(name, used)}" + (f", waiting {amount(name, waiting)}" if waiting else "")
             + (f", guaranteed {amount(name, guaranteed)}" if guaranteed else "")
             + (f", max {amount(name, limit)}" if limit is not None else ", no max"))
    caption = (f"{_e(amount(name, used))}" + (f" / {_e(amount(name, mx, named=False))}" if mx else "")
               + (f' <b>{_e(percent(used, mx))}</b>' if mx else "")
               + (f' <span class="w">+{_e(amount(name, waiting, named=False))} waiting</span>'
                  if waiting else "")
               + (f' <span class="g">g {_e(amount(name, guaranteed, named=False))}</span>' if guaranteed
                  else ""))
    return (f'<div class="bar"><svg viewBox="0 0 100 10" preserveAspectRatio="none" role="img" '
            f'aria-label="{_e(title)}"><title>{_e(title)}</title>{"".join(parts)}</svg>'
            f'<div class="cap">{caption}</div></div>')


def _legend() -> str:
    return ('<p class="legend"><span class="k used"></span> used <span class="k wait"></span> waiting demand '
            '<span class="k guar"></span> guaranteed <span class="k track"></span> max '
            '<span class="k nomax"></span> no max (scaled to what is there)</p>')


def _resource_order(names: Iterable[str]) -> list[str]:
    rank = {"vcore": 0, "memory": 1}
    return sorted(set(names), key=lambda n: (rank.get(n, 2 if "gpu" in n else (4 if n == "pods" else 3)), n))


def _queue_rows(dao: Mapping[str, Any], names: Sequence[str]) -> list[Sequence[str]]:
    rows: list[Sequence[str]] = []

    def walk(q: Mapping[str, Any], depth: int, last: bool) -> None:
        used = q.get("allocatedResource") or {}
        waiting = q.get("pendingResource") or {}
        guaranteed = q.get("guaranteedResource") or {}
        limit = q.get("maxResource")
        name = str(q["queuename"]).rsplit(".", 1)[-1]
        branch = "" if depth == 0 else ("└ " if last else "├ ")
        label = (f'<span class="q d{min(depth, 9)}" title="{_e(q["queuename"])}">{_e(branch)}'
                 f'<b>{_e(name)}</b></span>'
                 + ("" if q.get("isLeaf") else ' <span class="muted">parent</span>'))
        apps = f'{_e(q.get("runningApps", 0))} / {_e(q.get("maxRunningApps") or "-")}'
        cells = [label, apps]
        for n in names:
            if n in used or n in waiting or n in guaranteed or (limit and n in limit):
                cells.append(_bar(n, used.get(n, 0), waiting.get(n, 0), guaranteed.get(n),
                                  None if limit is None else limit.get(n)))
            else:
                cells.append(_NONE)
        rows.append(cells)
        children = list(q.get("children") or ())
        for i, c in enumerate(children):
            walk(c, depth + 1, i == len(children) - 1)

    walk(dao, 0, True)
    return rows


def _all_names(dao: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    stack = [dao]
    while stack:
        q = stack.pop()
        for key in ("allocatedResource", "pendingResource", "guaranteedResource", "maxResource"):
            names.update(q.get(key) or {})
        stack.extend(q.get("children") or ())
    return names


# -- trees -------------------------------------------------------------------------------------------
def _tree_html(roots: Sequence[str], children: Mapping[str, Sequence[str]],
               label: Callable[[str], str]) -> str:
    def node(n: str) -> str:
        kids = children.get(n) or ()
        inner = "".join(node(c) for c in kids)
        return f'<li><div class="node">{label(n)}</div>' + (f"<ul>{inner}</ul>" if inner else "") + "</li>"
    return '<ul class="tree">' + "".join(node(r) for r in roots) + "</ul>"


def _mini_bars(quota: Mapping[str, int], used: Mapping[str, int]) -> str:
    return "".join(_bar(n, used.get(n, 0), 0, None, quota.get(n)) for n in _resource_order([*quota, *used]))


# -- page frame --------------------------------------------------------------------------------------
def _frame(title: str, active: str | None, body: str, *, partition: str = "default",
           partitions: Sequence[str] = (), session: bool = False, status: int = 200) -> HTMLResponse:
    query = "?" + urlencode({"partition": partition}) if partition != "default" else ""
    nav = "".join(f'<a href="/ui/{path}{_e(query)}"{" class=on" if path == active else ""}>{_e(name)}</a>'
                  for path, name in _PAGES) if active is not None else ""
    tools = ""
    if active is not None:
        options = "".join(f'<option{" selected" if p == partition else ""}>{_e(p)}</option>'
                          for p in (partitions or [partition]))
        tools = (f'<form class="partition" method="get" action="/ui/{_e(active)}"><label>partition '
                 f'<select name="partition" id="partition">{options}</select></label>'
                 '<noscript><button>show</button></noscript></form>'
                 '<label class="refresh">refresh <select id="refresh">'
                 '<option value="0">off</option><option value="2">2 s</option><option value="5">5 s</option>'
                 '<option value="10" selected>10 s</option><option value="30">30 s</option>'
                 '<option value="60">1 min</option></select></label>')
    if session:
        tools += ('<form class="logout" method="post" action="/ui/logout">'
                  '<button type="submit" id="logout">log out</button></form>')
    stamp = time.strftime("%H:%M:%S")
    page = ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>quotaplane — {_e(title)}</title>"
            '<link rel="icon" href="data:,"><link rel="stylesheet" href="/ui/static/ui.css">'
            '<script src="/ui/static/ui.js" defer></script>'
            f'</head><body><header><a class="brand" href="/ui/">quotaplane</a><nav>{nav}</nav>'
            f'<div class="tools">{tools}</div></header>'
            f'<main><h1>{_e(title)}'
            + (f' <span class="muted">· partition {_e(partition)}</span>' if active is not None else "")
            + f'</h1>{body}</main><footer>updated <span id="updated">{_e(stamp)}</span>'
            ' <span id="status"></span></footer></body></html>')
    return HTMLResponse(page, status_code=status, headers=_HEADERS)


def _login_page(message: str = "", status: int = 401, nxt: str = "/ui/") -> HTMLResponse:
    note = f'<p class="bad" id="login-error">{_e(message)}</p>' if message else ""
    body = (f'{note}<form class="login" method="post" action="/ui/login">'
            f'<input type="hidden" name="next" value="{_e(nxt)}">'
            '<label>token <input type="password" name="token" id="token" autocomplete="current-password" '
            'required autofocus></label> <button type="submit" id="login">log in</button></form>'
            '<p class="muted">Any token of the service (read, submit or admin) opens the page; the page only '
            "reads. The session ends when you log out or after its lifetime.</p>")
    resp = _frame("Log in", None, body, status=status)
    if status == 401:
        resp.headers["WWW-Authenticate"] = "Bearer"
    return resp


def _safe_next(value: str | None) -> str:
    """Only a path of this page: never another site (an open redirect), never a scheme."""
    if value and value.startswith("/ui/") and "//" not in value and "\\" not in value:
        return value
    return "/ui/"


def router(service: Any) -> APIRouter:
    """The page's routes bound to ``service``."""
    r = APIRouter(tags=["ui"], include_in_schema=False)
    tokens = service.tokens

    def allowed(request: Request) -> tuple[bool, bool]:
        """(may read, has a session) for this request: bearer header, session cookie or anonymous read."""
        if not tokens:
            return True, False
        header = request.headers.get("authorization", "")
        if header[:7].lower() == "bearer ":
            try:
                tokens.check(header[7:].strip(), "read")
            except ApiError:
                return False, False
            return True, False
        if tokens.session_role(request.cookies.get(SESSION_COOKIE)) is not None:
            return True, True
        return bool(tokens.anonymous_read), False

    def view(path: str, render: Callable[[Request, Partition], Awaitable[tuple[str, str]]]) -> None:
        async def handler(request: Request) -> Response:
            ok, session = allowed(request)
            if not ok:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return _login_page("", 401, _safe_next(target))
            names = [p.name for p in service.scheduler.partitions()]
            partition = request.query_params.get("partition", "default")
            try:
                p = service.partition(partition)
            except NotFoundError:
                body = (f'<p class="bad">no partition {_e(partition)}; this service has '
                        f'{_e(", ".join(names) or "none")}.</p>')
                return _frame("No such partition", path, body, partition=partition, partitions=names,
                              session=session, status=404)
            title, body = await render(request, p)
            return _frame(title, path, body, partition=p.name, partitions=names, session=session)

        r.add_api_route(f"/ui/{path}", handler, methods=["GET"], response_model=None)

    @r.get("/")
    async def home() -> RedirectResponse:
        """The service's root leads to the web page (open: it is only a pointer)."""
        return RedirectResponse("/ui/", status_code=302)

    @r.get("/ui")
    async def ui_root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=302)

    @r.get("/ui/static/{name}")
    async def asset(name: str) -> Response:
        """The page's stylesheet and script (open: they are the same for everyone)."""
        media = _ASSETS.get(name)
        if media is None:
            raise NotFoundError(f"no asset {name!r}")
        data = (_resources.files("quotaplane.server") / "ui_static" / name).read_bytes()
        return Response(data, media_type=media, headers={"Cache-Control": "public, max-age=300",
                                                          "X-Content-Type-Options": "nosniff"})

    # -- login -------------------------------------------------------------------------------------
    @r.get("/ui/login")
    async def login_form(request: Request) -> Response:
        if not tokens:
            return RedirectResponse("/ui/", status_code=303)
        return _login_page("", 200, _safe_next(request.query_params.get("next")))

    @r.post("/ui/login", openapi_extra=_FORM_BODY)
    async def login(request: Request) -> Response:
        """The login form: ``token`` (form-encoded, never in the URL) → a session cookie."""
        if not tokens:
            return RedirectResponse("/ui/", status_code=303)
        origin = request.headers.get("origin")
        host = request.headers.get("host")
        if origin is not None and origin != "null" and origin.split("://", 1)[-1] != host:
            # a login posted from another site's page (login CSRF): refuse it
            return _login_page("the login form must be sent from this page", 403)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > _MAX_FORM:
                return _login_page("the form is too large", 400)
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        token = (form.get("token") or [""])[0].strip()
        nxt = _safe_next((form.get("next") or [""])[0])
        if not token:
            return _login_page("enter a token", 401, nxt)
        try:
            cookie = tokens.open_session(token)
        except ApiError:
            return _login_page("that token is not valid here", 401, nxt)
        resp = RedirectResponse(nxt, status_code=303)
        resp.set_cookie(SESSION_COOKIE, cookie, max_age=int(tokens.session_ttl), path="/", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
        return resp

    @r.post("/ui/logout", openapi_extra=_FORM_BODY)
    async def logout(request: Request) -> Response:
        """End the session (the cookie is dropped and refused from now on)."""
        if tokens:
            tokens.close_session(request.cookies.get(SESSION_COOKIE))
        resp = RedirectResponse("/ui/login" if tokens else "/ui/", status_code=303)
        resp.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict",
                           secure=request.url.scheme == "https")
        return resp

    # -- views -------------------------------------------------------------------------------------
    async def queues(_request: Request, p: Partition) -> tuple[str, str]:
        with p.lock:
            dao = p.queues.dao(None, subtree=True, partition=p.name)
            capacity, used = p.total_capacity(), p.used_capacity()
            apps, waiting = len(p.applications()), len(p.pending())
            nodes = []
            for n, c in p.nodes().items():
                on = p.node_allocations(n)
                node_used: dict[str, int] = {}
                for a in on:
                    for k, v in a.resource.items():
                        node_used[k] = node_used.get(k, 0) + v
                nodes.append((n, c, node_used, p.node_schedulable(n), len(on)))
        names = _resource_order(_all_names(dao))
        summary = (f'<p class="summary">capacity {_res(capacity)} · used {_res(used)} · '
                   f'{apps} applications · <a href="/ui/waiting">{waiting} waiting asks</a></p>')
        tree = _table(["queue", "running apps", *[_unit_title(n) for n in names]], _queue_rows(dao, names),
                      cls="queues")
        node_rows = [(_e(n), _mini_bars(c, u), "yes" if s else '<span class="bad">cordoned</span>', _e(k))
                     for n, c, u, s, k in nodes]
        body = (summary + _legend() + tree + "<h2>Nodes</h2>"
                + _table(("node", "used of capacity", "schedulable", "allocations"), node_rows,
                         "no node registered", cls="nodes"))
        return "Queues", body

    async def waiting_view(_request: Request, p: Partition) -> tuple[str, str]:
        forecast = await asyncio.to_thread(tracker(p).forecast)     # cached until the partition changes
        now = time.time()
        rows = []
        with p.lock:
            for a in p.pending():
                app = p.application(a.application_id)
                reasons = [v.to_dict() for v in p.pending_reasons(a.allocation_key) or ()]
                since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(a.created))
                waited = (f'<span title="since {_e(since)}">{_e(_waited(now - a.created))}</span>'
                          if a.created else _NONE)
                rows.append((_e(a.allocation_key), _e(a.application_id), _e(app.user.user if app else "-"),
                             _e(app.queue_path if app else "-"), _res(a.resource), _e(a.priority), waited,
                             _starts(forecast.asks.get(a.allocation_key), forecast.as_of), _reasons(reasons)))
        table = _table(("ask", "application", "user", "queue", "resource", "priority", "waited", "starts",
                        "waits for"), rows, "nothing waits", cls="waiting")
        return "Waiting asks", table

    async def users(_request: Request, p: Partition) -> tuple[str, str]:
        with p.lock:
            urows = [x for u in p.ugm.users_usage() for x in _usage_rows(u.get("queues"), u["userName"])]
            grows = [x for g in p.ugm.groups_usage() for x in _usage_rows(g.get("queues"), g["groupName"])]
        cols = ("{}", "queue", "used", "limit (maxresources)", "of limit", "running", "max running")
        body = ("<h2>Users</h2>" + _table([c.format("user") for c in cols], urows, "no tracked user")
                + "<h2>Groups</h2>" + _table([c.format("group") for c in cols], grows, "no tracked group"))
        return "Users and groups", body

    async def elastic(_request: Request, p: Partition) -> tuple[str, str]:
        pol = policy_of(p, "elastic")
        if pol is None:
            return "Elastic quotas", '<p class="muted">no elastic quota in this partition</p>'
        with p.lock:
            names = sorted(pol.engine().quota_names())
            parents = {n: pol.engine().spec(n).parent for n in names}
        views = {n: p.standing("quota", n)["elastic"] for n in names}
        children: dict[str, list[str]] = {}
        roots = []
        for n in names:
            parent = parents[n]
            if parent in views and parent != n:
                children.setdefault(parent, []).append(n)
            else:
                roots.append(n)

        def label(n: str) -> str:
            e = views[n]
            return (f'<div class="name"><b>{_e(n)}</b></div><dl>'
                    f"<dt>min</dt><dd>{_res(e['min'])}</dd><dt>max</dt><dd>{_res(e['max'])}</dd>"
                    f"<dt>runtime</dt><dd>{_res(e['runtime'])}</dd><dt>used</dt><dd>{_res(e['used'])}</dd>"
                    f"<dt>waiting</dt><dd>{_res(e['waiting'])}</dd><dt>borrowed</dt><dd>{_res(e['borrowed'])}</dd>"
                    f"<dt>lent</dt><dd>{_res(e['lent'])}</dd></dl>"
                    + _mini_bars({k: v for k, v in (e["runtime"] or {}).items()}, e["used"] or {}))
        note = ('<p class="muted">bars: used of the runtime quota (what the quota may use now: its min '
                "plus what it borrows)</p>")
        return "Elastic quotas", note + _tree_html(roots, children, label)

    async def trees(_request: Request, p: Partition) -> tuple[str, str]:
        pol = policy_of(p, "forest")
        if pol is None:
            return "Quota trees", '<p class="muted">no quota tree in this partition</p>'
        qm = pol.engine()
        body = ""
        with p.lock:
            for tree in sorted(qm.tree_names()):
                ids = list(qm.node_ids(tree))
                cache = qm.get_tree_cache(tree)
                known = set(cache.node_names())
                info = {n: (qm.node_quota(tree, n), qm.node_allocated(tree, n), qm.node_consumers(tree, n),
                            cache.node_spec(n) if n in known else {}) for n in ids}
                forest = qm.tree_forest(tree)
                children: dict[str, list[str]] = {}
                roots = []
                for n in ids:
                    parent = info[n][3].get("parent", "nil")
                    if parent in info and parent != n:
                        children.setdefault(parent, []).append(n)
                    else:
                        roots.append(n)

                def label(n: str, info: Mapping[str, Any] = info) -> str:
                    quota, allocated, consumers, spec = info[n]
                    hard = ' <span class="tag">hard</span>' if spec.get("hard") == "true" else ""
                    who = (f'<div class="consumers">consumers: {_e(", ".join(consumers))}</div>' if consumers
                           else "")
                    return f'<div class="name"><b>{_e(n)}</b>{hard}</div>{_mini_bars(quota, allocated)}{who}'
                in_forest = f' <span class="muted">forest {_e(forest)}</span>' if forest else ""
                body += f"<h2>{_e(tree)}{in_forest}</h2>" + _tree_html(roots, children, label)
        return "Quota trees", (body or '<p class="muted">no quota tree in this partition</p>')

    async def standing(request: Request, p: Partition) -> tuple[str, str]:
        kind = request.query_params.get("kind", "user")
        name = request.query_params.get("name", "")
        options = "".join(f'<option{" selected" if k == kind else ""}>{k}</option>'
                          for k in ("user", "group", "queue", "quota"))
        form = (f'<form class="standing" method="get"><input type=hidden name=partition '
                f'value="{_e(p.name)}"><select name=kind>{options}</select> '
                f'<input name=name value="{_e(name)}" placeholder="name"> <button>show</button></form>')
        if not name:
            return "Standing", form
        try:
            st = p.standing(kind, name.lower() if kind == "queue" else name)
        except (NotFoundError, ValueError) as exc:
            return "Standing", form + f'<p class="bad">{_e(exc)}</p>'
        body = form
        queues = st.get("queues") or ([st["queue"]] if "queue" in st else [])
        if queues:
            body += "<h2>Queues</h2>" + _table(
                ("queue", "guaranteed", "max", "used", "waiting", "borrowed", "lenders", "lent", "running"),
                [(_e(q["queue"]), _res(q["guaranteed"]), _res(q["max"]), _res(q["used"]), _res(q["waiting"]),
                  _res(q["borrowed"]),
                  "<br>".join(f"{_e(x['queue'])}: {_res(x['unused'])}" for x in q["lenders"]) or _NONE,
                  _res(q["lent"]),
                  f"{_e(q['runningApplications'])} / {_e(q['maxApplications'] or '-')}")
                 for q in queues])
        if st.get("limits"):
            body += "<h2>Limits</h2>" + _table(
                ("queue", "limit", "used", "running", "max running"),
                [(_e(x["queue"]), _res(x["max"]), _res(x["used"]), _e(len(x["runningApplications"])),
                  _e(x["maxApplications"] or "-")) for x in st["limits"]])
        if st.get("elastic"):
            e = st["elastic"]
            body += "<h2>Elastic quota</h2>" + _table(
                ("min", "max", "runtime", "used", "borrowed", "lent"),
                [(_res(e["min"]), _res(e["max"]), _res(e["runtime"]), _res(e["used"]), _res(e["borrowed"]),
                  _res(e["lent"]))])
        if st.get("budgets"):
            body += "<h2>Budgets</h2>" + budget_table(st["budgets"])
        body += "<h2>Waiting asks</h2>" + _table(
            ("position", "ask", "application", "queue", "resource", "waits for"),
            [(_e(w["position"]), _e(w["allocationKey"]), _e(w["applicationID"]), _e(w["queue"]),
              _res(w["resource"]), _reasons(w["reasons"])) for w in st["waiting"]], "nothing waits")
        return f"Standing of {kind} {name}", body

    async def history(request: Request, p: Partition) -> tuple[str, str]:
        # the query reads the store: off the event loop
        body = await asyncio.to_thread(history_page, service, p.name, dict(request.query_params))
        return "Usage history", body

    async def budgets(_request: Request, p: Partition) -> tuple[str, str]:
        return "Budgets and time windows", budgets_page(p, policy_of(p, "budget"))

    for path, render in (("", queues), ("waiting", waiting_view), ("users", users), ("elastic", elastic),
                         ("trees", trees), ("standing", standing), ("history", history),
                         ("budgets", budgets)):
        view(path, render)
    return r


def _unit_title(name: str) -> str:
    return {"vcore": "cpu", "nvidia.com/gpu": "GPUs"}.get(name, name)


def _usage_rows(dao: Mapping[str, Any] | None, who: str) -> list[Sequence[str]]:
    rows: list[Sequence[str]] = []
    stack = [dao] if dao else []
    while stack:
        q = stack.pop()
        used = q.get("resourceUsage") or {}
        limit = q.get("maxResources") or {}
        share = ", ".join(f"{_unit_title(k)} {pc}" for k in _resource_order(limit)
                          if (pc := percent(used.get(k, 0), limit.get(k))))
        rows.append((_e(who), _e(q["queuePath"]), _res(used), _res(limit), _e(share) or _NONE,
                     _e(len(q.get("runningApplications") or ())), _e(q.get("maxApplications") or "-")))
        stack.extend(reversed(q.get("children") or ()))
    return rows
