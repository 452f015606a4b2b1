"""Browser safety (issue 32 item 7): without tokens, any web page could drive the service.

Each test sends what a browser sends for a hostile page — a cross-site form or ``fetch``, a
``text/plain`` POST, a DNS-rebinding request with the attacker's ``Host`` — and checks that it is
refused with the error body and changes nothing, while the service's own page (same origin, the
login form) and allowed origins keep working.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.server.app import create_app
from quotaplane.server.browser import LOOPBACK_HOSTS, BrowserPolicy, default_allowed_hosts, host_name
from tests.server.conftest import CONFIG, assert_error

APP = {"applicationID": "csrf-app", "queue": "root.default", "user": "eve"}


@pytest.fixture
def loopback() -> Iterator[TestClient]:
    """The app as ``serve`` builds it without tokens: loopback Host names only."""
    s = qp.Scheduler.from_yaml(CONFIG)
    app = create_app(s, allowed_hosts=default_allowed_hosts(False))
    with TestClient(app, base_url="http://127.0.0.1:9080", raise_server_exceptions=False) as c:
        yield c
    s.close()


def _apps(c: TestClient) -> list[str]:
    return [a["applicationID"] for a in c.get("/ws/v1/partition/default/applications").json()]


def test_no_wildcard_cors(loopback: TestClient) -> None:
    """Every answer used to carry ``Access-Control-Allow-Origin: *``, so any page could read it."""
    for origin in (None, "https://evil.example"):
        headers = {"Origin": origin} if origin else {}
        r = loopback.get("/ws/v1/partitions", headers=headers)
        assert r.status_code == 200
        assert "access-control-allow-origin" not in r.headers


def test_a_cross_site_post_is_refused_and_changes_nothing(loopback: TestClient) -> None:
    """A page of another site posting JSON (with ``fetch``, ``no-cors``) or a form: 403, nothing made."""
    r = loopback.post("/ws/v1/partition/default/applications", json=APP,
                      headers={"Origin": "https://evil.example"})
    assert_error(r, 403)
    assert "evil.example" in r.json()["message"]
    r = loopback.put("/ws/v1/config", content=CONFIG, headers={"Origin": "null",
                                                                "Content-Type": "application/x-yaml"})
    assert_error(r, 403)
    assert "csrf-app" not in _apps(loopback)


def test_a_text_plain_post_is_refused_with_415(loopback: TestClient) -> None:
    """``text/plain`` (and forms) are the bodies a page may send without a preflight."""
    for kind in ("text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                 "multipart/form-data; boundary=x"):
        r = loopback.post("/ws/v1/partition/default/applications", content=b'{"applicationID": "x"}',
                          headers={"Content-Type": kind})
        assert_error(r, 415)
    r = loopback.put("/ws/v1/config", content=CONFIG, headers={"Content-Type": "text/plain"})
    assert_error(r, 415)
    assert "csrf-app" not in _apps(loopback)


def test_json_and_yaml_changes_are_served(loopback: TestClient) -> None:
    for kind in ("application/json", "application/json; charset=utf-8", "application/merge-patch+json"):
        app = {**APP, "applicationID": f"ok-{len(kind)}"}
        r = loopback.post("/ws/v1/partition/default/applications", json=app, headers={"Content-Type": kind})
        assert r.status_code == 201, (kind, r.text)
    for kind in ("application/x-yaml", "application/yaml", "text/yaml", "application/json"):
        r = loopback.put("/ws/v1/config", content=CONFIG, headers={"Content-Type": kind})
        assert r.status_code == 200, (kind, r.text)
    # no type at all (a non-browser client): read as before
    r = loopback.post("/ws/v1/partition/default/applications", content=b'{"applicationID": "untyped", '
                      b'"queue": "root.default", "user": "eve"}')
    assert r.status_code == 201, r.text
    # validate-conf changes nothing: any type, as YuniKorn (its admission controller says JSON)
    r = loopback.post("/ws/v1/validate-conf", content=CONFIG, headers={"Content-Type": "text/plain"})
    assert r.json() == {"allowed": True}


def test_the_services_own_page_may_post(loopback: TestClient) -> None:
    """Same origin (the ``Origin`` authority is the ``Host``): the web page, YuniKorn's UI."""
    r = loopback.post("/ws/v1/partition/default/applications", json=APP,
                      headers={"Origin": "http://127.0.0.1:9080"})
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("host", ["evil.example", "evil.example:9080", "192.168.1.7:9080", "[fe80::1]:80",
                                  "127.0.0.1.evil.example", "localhost.evil.example"])
def test_dns_rebinding_host_is_refused(loopback: TestClient, host: str) -> None:
    """``PUT /ws/v1/config`` with ``Host: evil.example`` answered 200 (the issue's reproduction)."""
    before = loopback.get("/ws/v1/config").text
    r = loopback.put("/ws/v1/config", content=CONFIG.replace("name: small", "name: smaller"),
                     headers={"Host": host, "Content-Type": "application/x-yaml"})
    assert_error(r, 403)
    assert "not allowed" in r.json()["message"]
    assert loopback.get("/ws/v1/partitions", headers={"Host": host}).status_code == 403
    assert loopback.get("/ws/v1/config").text == before
    for probe in ("/healthz", "/readyz", "/ws/v1/scheduler/healthcheck"):    # kubelet: the pod's address
        assert loopback.get(probe, headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("host", ["localhost", "localhost:9080", "127.0.0.1", "127.0.0.1:1", "127.1.2.3:80",
                                  "[::1]:9080", "[::1]", "ui.localhost:4200", "LOCALHOST"])
def test_loopback_hosts_are_served(loopback: TestClient, host: str) -> None:
    assert loopback.get("/ws/v1/partitions", headers={"Host": host}).status_code == 200


def test_allowed_origins_get_cors_and_preflight() -> None:
    """A configured origin (YuniKorn's UI served elsewhere, e.g. ``ng serve``) gets its own name
    back, a preflight answer and may send changes; no other origin does."""
    s = qp.Scheduler.from_yaml(CONFIG)
    app = create_app(s, allowed_origins=["http://localhost:4200"])
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/ws/v1/partitions", headers={"Origin": "http://localhost:4200"})
        assert r.headers["access-control-allow-origin"] == "http://localhost:4200"
        assert r.headers["vary"] == "Origin"
        r = c.options("/ws/v1/partition/default/applications",
                      headers={"Origin": "http://localhost:4200", "Access-Control-Request-Method": "POST",
                               "Access-Control-Request-Headers": "content-type"})
        assert r.status_code == 204
        assert r.headers["access-control-allow-origin"] == "http://localhost:4200"
        assert "POST" in r.headers["access-control-allow-methods"]
        r = c.post("/ws/v1/partition/default/applications", json=APP, headers={"Origin": "http://localhost:4200"})
        assert r.status_code == 201 and r.headers["access-control-allow-origin"] == "http://localhost:4200"
        r = c.options("/ws/v1/partition/default/applications",
                      headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
        assert "access-control-allow-origin" not in r.headers
    s.close()


def test_wildcard_origin_is_yunikorns_behaviour_when_asked_for() -> None:
    s = qp.Scheduler.from_yaml(CONFIG)
    with TestClient(create_app(s, allowed_origins=["*"]), raise_server_exceptions=False) as c:
        r = c.post("/ws/v1/partition/default/applications", json=APP, headers={"Origin": "https://a.example"})
        assert r.status_code == 201 and r.headers["access-control-allow-origin"] == "*"
    s.close()


def test_a_documented_form_operation_accepts_its_form() -> None:
    """The web page's login (issue 30) posts a form on the same origin: an operation that documents a
    form body (``openapi_extra``, or FastAPI ``Form`` parameters) accepts that type; the same type
    elsewhere is still refused."""
    from urllib.parse import parse_qs

    from quotaplane.server.app import _form_routes

    s = qp.Scheduler.from_yaml(CONFIG)
    app = create_app(s, allowed_hosts=default_allowed_hosts(False))
    form = {"requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {"type": "object"}}}}}

    @app.post("/login-probe", openapi_extra=form)
    async def login_probe(request: Request) -> JSONResponse:
        return JSONResponse(parse_qs((await request.body()).decode()))

    app.state.service.form_routes = _form_routes(app)
    with TestClient(app, base_url="http://localhost:9080", raise_server_exceptions=False) as c:
        r = c.post("/login-probe", data={"user": "sue"}, headers={"Origin": "http://localhost:9080"})
        assert r.status_code == 200 and r.json() == {"user": ["sue"]}
        r = c.post("/login-probe", data={"user": "sue"}, headers={"Origin": "https://evil.example"})
        assert_error(r, 403)
        r = c.post("/ws/v1/partition/default/applications", data={"applicationID": "x"})
        assert_error(r, 415)
    s.close()


def test_policy_parsing() -> None:
    assert host_name("[::1]:80") == "::1" and host_name("Example.COM:8080") == "example.com"
    assert host_name("localhost") == "localhost"
    policy = BrowserPolicy(["*.corp.example", "10.0.0.0/8", "quota.example"])
    assert policy.host_allowed(b"a.corp.example:443") and policy.host_allowed(b"10.1.2.3")
    assert policy.host_allowed(b"quota.example") and not policy.host_allowed(b"corp.example")
    assert not policy.host_allowed(None)
    assert BrowserPolicy(None).host_allowed(b"anything") and BrowserPolicy(["*"]).host_allowed(None)
    assert set(LOOPBACK_HOSTS) == set(default_allowed_hosts(False) or ())
    assert default_allowed_hosts(True) is None
    for bad in ("http://x", "a b", "x:80"):
        with pytest.raises(ValueError, match="allowed host"):
            BrowserPolicy([bad])
    with pytest.raises(ValueError, match="allowed origin"):
        BrowserPolicy(None, ["localhost:4200"])
