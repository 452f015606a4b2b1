"""The web page at /ui/ over HTTP (issue 17 #5, issue 30): every view renders its data in human units,
values escaped, under a strict Content-Security-Policy; the login form, the session cookie (HttpOnly,
SameSite=Strict, expiry, logout) and anonymous read. The same pages in a real browser:
``tests/server/test_ui_browser.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import quotaplane as qp
from quotaplane.server.auth import SESSION_COOKIE, Tokens
from tests.client.test_client import _Server
from tests.scenarios.world import ALICE, CONFIG, tags

VIEWS = {
    "": ["Queues", "n1", "1 waiting asks", "2.5 cores / 6 cores", "42%", "+1 core waiting"],
    "waiting": ["Waiting asks", "w1", "alice", "root.a", "user.maxresources", "short of 0.5 cores"],
    "users": ["Users and groups", "alice", "root.a", "3 cores"],            # alice's limit at root.a
    "elastic": ["Elastic quotas", "team-a", "runtime", "borrowed", "cores unlimited"],
    "trees": ["Quota trees", "<h2>T</h2>", '<ul class="tree">', "consumers: k1"],
    "standing?kind=user&name=alice": ["Standing of user alice", "Limits", "w1", "user.maxresources"],
    "standing?kind=queue&name=root.a": ["Standing of queue root.a", "guaranteed"],
    "standing?kind=user&name=%3Cscript%3E": ["&lt;script&gt;", "not found"],
    "history": ["Usage history", "Queues over time", 'data-queue="root.a"'],
}


def _world() -> qp.Scheduler:
    s = qp.Scheduler.from_yaml(CONFIG)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 8000}))
    p.add_application("a1", ALICE, queue="root.a", tags=tags("team-a", "A"))
    assert p.allocate("a1", "k1", qp.Resource({"vcore": 2500})).allocated
    p.add_ask("a1", "w1", qp.Resource({"vcore": 1000}))          # over alice's 3 at root.a: waits
    return s


@pytest.fixture(scope="module")
def ui() -> Iterator[str]:
    s = _world()
    srv = _Server(s)
    yield srv.url
    srv.stop()
    s.close()


@pytest.mark.parametrize("view", list(VIEWS))
def test_every_view_renders_its_data(ui: str, view: str) -> None:
    r = httpx.get(f"{ui}/ui/{view}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    for text in VIEWS[view]:
        assert text in r.text, (view, text)
    assert "<script>" not in r.text and " style=" not in r.text         # only the page's own assets
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert "1844674407370955161" not in r.text and "9223372036854775807" not in r.text   # "unlimited"


def test_the_root_leads_to_the_page_and_the_assets_are_served(ui: str) -> None:
    r = httpx.get(f"{ui}/")
    assert r.status_code == 302 and r.headers["location"] == "/ui/"
    for name, kind in (("ui.css", "text/css"), ("ui.js", "text/javascript")):
        a = httpx.get(f"{ui}/ui/static/{name}")
        assert a.status_code == 200 and a.headers["content-type"].startswith(kind) and len(a.content) > 500
    assert httpx.get(f"{ui}/ui/static/nope.js").status_code == 404


def test_an_unknown_partition_is_a_404_page_naming_the_partitions(ui: str) -> None:
    r = httpx.get(f"{ui}/ui/?partition=nope")
    assert r.status_code == 404 and "no partition nope" in r.text and "default" in r.text


TOUR_VIEWS = {
    "": ["node-1", "1 waiting asks", "sandbox", "2 cores / 20 cores", "10%", "+4 cores waiting", "1 / 20",
         "1,600 Gi"],
    "users": ["sue", "root.engineering.sandbox", "5 cores", "cpu 40%"],
    "waiting": ["a3", "sue", "root.engineering.sandbox", "user.maxresources", "4 cores"],
    "standing?kind=user&name=sue": ["Standing of user sue", "a3", "user.maxresources",
                                    "root.engineering.sandbox"],
}


def test_the_views_show_the_readme_tours_data() -> None:
    """The README tour (examples/queues.yaml, sue's app-1 with a1 on node-1 and the waiting a3)."""
    root = Path(__file__).resolve().parents[2]
    s = qp.Scheduler.from_yaml((root / "examples" / "queues.yaml").read_text())
    p = s.partition("default")
    p.add_node("node-1", {"vcore": 16000, "memory": 68719476736, "pods": 110})
    p.add_application("app-1", qp.UserGroup("sue", ("engineering", "development")),
                      queue="root.engineering.sandbox")
    p.allocate("app-1", "a1", {"vcore": 2000, "memory": 1073741824}, node="node-1")
    p.add_ask("app-1", "a3", {"vcore": 4000})
    srv = _Server(s)
    try:
        for view, texts in TOUR_VIEWS.items():
            page = httpx.get(f"{srv.url}/ui/{view}").text
            for text in texts:
                assert text in page, (view, text)
    finally:
        srv.stop()
        s.close()


# -- login, sessions, anonymous read ------------------------------------------------------------------
class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def secured() -> Iterator[tuple[str, _Clock]]:
    s = _world()
    clock = _Clock()
    srv = _Server(s, tokens=Tokens({"read": ["r3ad"], "admin": ["adm1n"]}, session_ttl=600, clock=clock))
    yield srv.url, clock
    srv.stop()
    s.close()


def _login(url: str, token: str, **kw: str) -> httpx.Response:
    return httpx.post(f"{url}/ui/login", data={"token": token, **kw}, follow_redirects=False)


def test_without_a_session_every_view_is_401_with_the_login_form(secured: tuple[str, _Clock]) -> None:
    url, _ = secured
    for view in ("", "waiting", "users", "elastic", "trees", "standing"):
        r = httpx.get(f"{url}/ui/{view}")
        assert r.status_code == 401 and 'name="token"' in r.text and "n1" not in r.text, view
    assert httpx.get(f"{url}/ui/login").status_code == 200
    # the REST routes keep their JSON 401
    assert httpx.get(f"{url}/ws/v1/partition/default/queues").status_code == 401


def test_login_sets_a_strict_httponly_session_and_logout_ends_it(secured: tuple[str, _Clock]) -> None:
    url, _ = secured
    r = _login(url, "r3ad", next="/ui/waiting")
    assert r.status_code == 303 and r.headers["location"] == "/ui/waiting"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=") and "r3ad" not in cookie
    flags = {f.strip().lower() for f in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/", "max-age=600"} <= flags
    value = r.cookies[SESSION_COOKIE]
    page = httpx.get(f"{url}/ui/", cookies={SESSION_COOKIE: value})
    assert page.status_code == 200 and "n1" in page.text and 'id="logout"' in page.text
    # a session reads, and only reads: a write needs its bearer token
    jar = {SESSION_COOKIE: value}
    assert httpx.get(f"{url}/ws/v1/partition/default/queues", cookies=jar).status_code == 200
    w = httpx.put(f"{url}/ws/v1/partition/default/node/n9", json={"capacity": {"vcore": 1}},
                  cookies={SESSION_COOKIE: value})
    assert w.status_code == 401
    out = httpx.post(f"{url}/ui/logout", cookies={SESSION_COOKIE: value}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    dropped = out.headers["set-cookie"]
    assert f'{SESSION_COOKIE}=""' in dropped or "max-age=0" in dropped.lower()
    assert httpx.get(f"{url}/ui/", cookies=jar).status_code == 401     # refused from now on


def test_a_session_expires(secured: tuple[str, _Clock]) -> None:
    url, clock = secured
    value = _login(url, "adm1n").cookies[SESSION_COOKIE]
    assert httpx.get(f"{url}/ui/", cookies={SESSION_COOKIE: value}).status_code == 200
    clock.now += 601
    assert httpx.get(f"{url}/ui/", cookies={SESSION_COOKIE: value}).status_code == 401


@pytest.mark.parametrize("cookie", ["", "garbage", "eyJ4Ijox.bad", "a" * 600])
def test_a_forged_or_broken_cookie_is_no_session(secured: tuple[str, _Clock], cookie: str) -> None:
    url, _ = secured
    assert httpx.get(f"{url}/ui/", cookies={SESSION_COOKIE: cookie}).status_code == 401


def test_a_bad_token_and_a_foreign_origin_are_refused(secured: tuple[str, _Clock]) -> None:
    url, _ = secured
    bad = _login(url, "nope")
    assert bad.status_code == 401 and "not valid" in bad.text and "set-cookie" not in bad.headers
    assert _login(url, "").status_code == 401
    foreign = httpx.post(f"{url}/ui/login", data={"token": "r3ad"}, headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403 and "set-cookie" not in foreign.headers
    # nowhere but this page after a login (no open redirect)
    assert _login(url, "r3ad", next="https://evil.example/").headers["location"] == "/ui/"
    assert _login(url, "r3ad", next="//evil.example/ui/").headers["location"] == "/ui/"


def test_a_bearer_header_opens_the_page_too(secured: tuple[str, _Clock]) -> None:
    url, _ = secured
    assert httpx.get(f"{url}/ui/", headers={"Authorization": "Bearer r3ad"}).status_code == 200
    assert httpx.get(f"{url}/ui/", headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_anonymous_read_opens_reads_and_never_writes() -> None:
    """Issue 30: YuniKorn's web UI, Prometheus and the admission controller's validate-conf against a
    secured instance, without a token."""
    s = _world()
    srv = _Server(s, tokens=Tokens({"admin": ["adm1n"]}, anonymous_read=True))
    try:
        for path in ("/ws/v1/partition/default/queues", "/ws/v1/partitions", "/ws/v1/metrics", "/metrics",
                     "/ui/", "/ws/v1/partition/default/usage/users"):
            assert httpx.get(f"{srv.url}{path}").status_code == 200, path
        conf = (Path(__file__).resolve().parents[2] / "examples" / "queues.yaml").read_text()
        v = httpx.post(f"{srv.url}/ws/v1/validate-conf", content=conf)
        assert v.status_code == 200 and v.json()["allowed"] is True
        for method, path, body in (("PUT", "/ws/v1/partition/default/node/n9", {"capacity": {"vcore": 1}}),
                                   ("POST", "/ws/v1/partition/default/allocations",
                                    {"applicationID": "a1", "allocationKey": "x", "resource": {"vcore": 1}}),
                                   ("DELETE", "/ws/v1/partition/default/allocation/k1", None)):
            assert httpx.request(method, f"{srv.url}{path}", json=body).status_code == 401, path
        assert httpx.put(f"{srv.url}/ws/v1/partition/default/node/n9", json={"capacity": {"vcore": 1}},
                         headers={"Authorization": "Bearer adm1n"}).status_code in (200, 201)
    finally:
        srv.stop()
        s.close()
