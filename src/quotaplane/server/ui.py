"""The page at ``/ui/`` (issue 17 #5): what YuniKorn's web UI does not show.

Users and groups with their limits, elastic quotas (min, max, runtime, used, borrowed, lent), quota
trees (quota and allocated per node), the waiting asks with their reasons, and the standing of one
tenant. Server-rendered HTML with no script and no build step (nothing is fetched at run time); every
value is escaped. It needs the ``read`` role like every read (without tokens: loopback clients).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from quotaplane.errors import NotFoundError
from quotaplane.partition import Partition
from quotaplane.server.extensions import policy_of

__all__ = ["router"]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#1d2330;background:#f4f5f7}
header{background:#243447;color:#fff;padding:10px 24px;display:flex;gap:24px;align-items:center}
header a{color:#dce6f2;text-decoration:none}header a.on{color:#fff;font-weight:600}
main{padding:16px 24px}h1{font-size:20px}h2{font-size:16px;margin-top:24px}
table{border-collapse:collapse;background:#fff;margin:8px 0;min-width:50%}
th,td{border:1px solid #d7dbe2;padding:4px 10px;text-align:left;font-size:14px;vertical-align:top}
th{background:#e9edf2}.muted{color:#6b7480}.bad{color:#a4262c}form{margin:8px 0}
"""

_PAGES = (("", "Overview"), ("users", "Users and groups"), ("elastic", "Elastic quotas"),
          ("trees", "Quota trees"), ("waiting", "Waiting asks"), ("standing", "Standing"))


_NONE = '<span class="muted">-</span>'


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _res(r: Mapping[str, int] | None) -> str:
    return ", ".join(f"{_e(k)}={_e(v)}" for k, v in sorted((r or {}).items())) or _NONE


def _table(columns: Sequence[str], rows: Iterable[Sequence[str]], empty: str = "none") -> str:
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        body = f'<tr><td colspan="{len(columns)}" class="muted">{_e(empty)}</td></tr>'
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _page(title: str, active: str, partition: str, body: str) -> HTMLResponse:
    nav = "".join(f'<a href="/ui/{path}?partition={_e(partition)}" class="{"on" if path == active else ""}">'
                  f"{_e(name)}</a>" for path, name in _PAGES)
    return HTMLResponse(f"<!doctype html><html lang=en><head><meta charset=utf-8>"
                        f"<title>quotaplane — {_e(title)}</title><style>{_STYLE}</style></head>"
                        f"<body><header><b>quotaplane</b>{nav}</header>"
                        f"<main><h1>{_e(title)} <span class=muted>· partition {_e(partition)}</span></h1>"
                        f"{body}</main></body></html>")


def _reasons(reasons: Iterable[Mapping[str, Any]]) -> str:
    return "<br>".join(f'<span class="bad">{_e(r["code"])}</span> at {_e(r["path"])}'
                       f' (short of {_res(r.get("resource"))}): {_e(r["message"])}' for r in reasons) or "-"


def _usage_rows(dao: Mapping[str, Any] | None, who: str) -> list[Sequence[str]]:
    rows: list[Sequence[str]] = []
    stack = [dao] if dao else []
    while stack:
        q = stack.pop()
        rows.append((_e(who), _e(q["queuePath"]), _res(q.get("resourceUsage")), _res(q.get("maxResources")),
                     _e(len(q.get("runningApplications") or ())), _e(q.get("maxApplications") or "-")))
        stack.extend(reversed(q.get("children") or ()))
    return rows


def router(service: Any) -> APIRouter:
    """The page's routes bound to ``service``."""
    r = APIRouter(tags=["ui"], include_in_schema=False)
    read = service.tokens.dependencies("read")

    @r.get("/")
    async def home() -> RedirectResponse:
        """The service's root leads to the web page (open: it is only a pointer)."""
        return RedirectResponse("/ui/", status_code=302)

    def part(request: Request) -> Partition:
        p: Partition = service.partition(request.query_params.get("partition", "default"))
        return p

    @r.get("/ui/", dependencies=read)
    async def overview(request: Request) -> HTMLResponse:
        p = part(request)
        with p.lock:
            rows = [(_e(n), _res(c), "yes" if p.node_schedulable(n) else "cordoned",
                     _e(len(p.node_allocations(n)))) for n, c in p.nodes().items()]
            body = (f"<p>capacity {_res(p.total_capacity())} · used {_res(p.used_capacity())} · "
                    f"{len(p.applications())} applications · {len(p.pending())} waiting asks</p>"
                    "<h2>Nodes</h2>" + _table(("node", "capacity", "schedulable", "allocations"), rows))
        return _page("Overview", "", p.name, body)

    @r.get("/ui/users", dependencies=read)
    async def users(request: Request) -> HTMLResponse:
        p = part(request)
        with p.lock:
            urows = [x for u in p.ugm.users_usage() for x in _usage_rows(u.get("queues"), u["userName"])]
            grows = [x for g in p.ugm.groups_usage() for x in _usage_rows(g.get("queues"), g["groupName"])]
        cols = ("{}", "queue", "used", "limit (maxresources)", "running", "max running")
        body = ("<h2>Users</h2>" + _table([c.format("user") for c in cols], urows, "no tracked user")
                + "<h2>Groups</h2>" + _table([c.format("group") for c in cols], grows, "no tracked group"))
        return _page("Users and groups", "users", p.name, body)

    @r.get("/ui/elastic", dependencies=read)
    async def elastic(request: Request) -> HTMLResponse:
        p = part(request)
        pol = policy_of(p, "elastic")
        rows = []
        if pol is not None:
            with p.lock:
                names = sorted(pol.manager.quota_names())
            for name in names:
                e = p.standing("quota", name)["elastic"]
                rows.append((_e(name), _res(e["min"]), _res(e["max"]), _res(e["runtime"]), _res(e["used"]),
                             _res(e["borrowed"]), _res(e["lent"]), _res(e["waiting"])))
        body = _table(("quota", "min", "max", "runtime", "used", "borrowed", "lent", "waiting"), rows,
                      "no elastic quota in this partition")
        return _page("Elastic quotas", "elastic", p.name, body)

    @r.get("/ui/trees", dependencies=read)
    async def trees(request: Request) -> HTMLResponse:
        p = part(request)
        pol = policy_of(p, "forest")
        body = ""
        if pol is not None:
            qm = pol.manager
            with p.lock:
                for tree in sorted(qm.tree_names()):
                    rows = [(_e(n), _res(qm.node_quota(tree, n)), _res(qm.node_allocated(tree, n)),
                             _e(", ".join(qm.node_consumers(tree, n)) or "-")) for n in qm.node_ids(tree)]
                    body += f"<h2>{_e(tree)}</h2>" + _table(("node", "quota", "allocated", "consumers"), rows)
        body = body or '<p class="muted">no quota tree in this partition</p>'
        return _page("Quota trees", "trees", p.name, body)

    @r.get("/ui/waiting", dependencies=read)
    async def waiting(request: Request) -> HTMLResponse:
        p = part(request)
        with p.lock:
            asks = p.pending()
            rows = [(_e(a.allocation_key), _e(a.application_id), _res(a.resource), _e(a.priority),
                     _reasons(v.to_dict() for v in p.pending_reasons(a.allocation_key) or ())) for a in asks]
        table = _table(("ask", "application", "resource", "priority", "waits for"), rows, "nothing waits")
        return _page("Waiting asks", "waiting", p.name, table)

    @r.get("/ui/standing", dependencies=read)
    async def standing(request: Request) -> HTMLResponse:
        p = part(request)
        kind = request.query_params.get("kind", "user")
        name = request.query_params.get("name", "")
        options = "".join(f'<option{" selected" if k == kind else ""}>{k}</option>'
                          for k in ("user", "group", "queue", "quota"))
        form = (f'<form><input type=hidden name=partition value="{_e(p.name)}"><select name=kind>{options}'
                f'</select> <input name=name value="{_e(name)}" placeholder="name"> '
                f"<button>show</button></form>")
        if not name:
            return _page("Standing", "standing", p.name, form)
        try:
            st = p.standing(kind, name.lower() if kind == "queue" else name)
        except (NotFoundError, ValueError) as exc:
            return _page("Standing", "standing", p.name, form + f'<p class="bad">{_e(exc)}</p>')
        body = form
        queues = st.get("queues") or ([st["queue"]] if "queue" in st else [])
        if queues:
            body += "<h2>Queues</h2>" + _table(
                ("queue", "guaranteed", "max", "used", "waiting", "borrowed", "lenders", "lent", "running"),
                [(_e(q["queue"]), _res(q["guaranteed"]), _res(q["max"]), _res(q["used"]), _res(q["waiting"]),
                  _res(q["borrowed"]),
                  "<br>".join(f"{_e(x['queue'])}: {_res(x['unused'])}" for x in q["lenders"]) or "-",
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
        body += "<h2>Waiting asks</h2>" + _table(
            ("position", "ask", "application", "queue", "resource", "waits for"),
            [(_e(w["position"]), _e(w["allocationKey"]), _e(w["applicationID"]), _e(w["queue"]),
              _res(w["resource"]), _reasons(w["reasons"])) for w in st["waiting"]], "nothing waits")
        return _page(f"Standing of {kind} {name}", "standing", p.name, body)

    return r
