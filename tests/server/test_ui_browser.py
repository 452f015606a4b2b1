"""The web page in a real browser (issue 30): Playwright driving Debian's Chromium
(``/usr/bin/chromium``; Playwright never downloads a browser here). Every page renders without a
script error or a CSP violation; the login form, the session and the logout; a 401 without a session;
the partition selector; the auto-refresh picks up a change without a reload.

Without Chromium the tests are skipped, except under CI (``CI`` set), where ``.ci/run`` installs it and
a missing browser fails."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import quotaplane as qp
from quotaplane.server.auth import SESSION_COOKIE, Tokens
from tests.client.test_client import _Server
from tests.server.test_ui import VIEWS, _world

playwright_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "",
                             shutil.which("chromium-browser") or "") if p and os.path.exists(p)), None)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is not installed (Debian package 'chromium'); .ci/run installs it")
        pytest.skip("Chromium (Debian package 'chromium') is not installed; .ci/run installs it")
    with playwright_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


class _Page:
    """A page that records console errors (CSP violations and script errors land there)."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def close(self) -> None:
        self.context.close()


@pytest.fixture(scope="module")
def open_ui() -> Iterator[str]:
    s = _world()
    srv = _Server(s)
    yield srv.url
    srv.stop()
    s.close()


@pytest.mark.parametrize("view", list(VIEWS))
def test_every_page_renders_in_chromium(browser: Any, open_ui: str, view: str) -> None:
    tab = _Page(browser)
    try:
        response = tab.page.goto(f"{open_ui}/ui/{view}")
        assert response is not None and response.status == 200
        text = tab.page.content()
        for expected in VIEWS[view]:
            assert expected in text, (view, expected)
        assert tab.page.locator("h1").inner_text()
        # the stylesheet applied (the header is dark) and the script ran (it reads the refresh choice)
        assert tab.page.eval_on_selector("header", "e => getComputedStyle(e).backgroundColor") != \
            "rgba(0, 0, 0, 0)"
        assert tab.page.locator("#refresh").input_value() == "10"
        assert tab.page.screenshot(full_page=True)[:8] == b"\x89PNG\r\n\x1a\n"
        assert tab.errors == [], tab.errors
    finally:
        tab.close()


def test_the_queue_bars_are_drawn(browser: Any, open_ui: str) -> None:
    tab = _Page(browser)
    try:
        tab.page.goto(f"{open_ui}/ui/")
        used = tab.page.locator("table.queues tr:nth-child(2) rect.used").first
        box = used.bounding_box()
        assert box is not None and box["width"] > 10          # root.a uses 2.5 of 6 cores
        assert tab.page.locator("table.queues tr:nth-child(2) rect.wait").count() == 1
        assert "42%" in tab.page.locator("table.queues tr:nth-child(2)").inner_text()
    finally:
        tab.close()


def test_the_partition_selector_and_the_auto_refresh(browser: Any) -> None:
    config = """
partitions:
  - name: default
    queues: [{name: root, submitacl: "*", queues: [{name: a}]}]
  - name: second
    queues: [{name: root, submitacl: "*", queues: [{name: b}]}]
"""
    s = qp.Scheduler.from_yaml(config)
    s.partition("default").add_node("n1", {"vcore": 4000})
    s.partition("second").add_node("n2", {"vcore": 4000})
    srv = _Server(s)
    tab = _Page(browser)
    try:
        tab.page.goto(f"{srv.url}/ui/")
        assert "root.a" in tab.page.content() and "partition default" in tab.page.locator("h1").inner_text()
        with tab.page.expect_navigation():
            tab.page.select_option("#partition", "second")
        assert "partition=second" in tab.page.url
        assert "partition second" in tab.page.locator("h1").inner_text()
        assert "root.b" in tab.page.content()
        # auto-refresh every 2 s: a change made over REST shows up without a reload
        tab.page.select_option("#refresh", "2")
        marker = tab.page.evaluate("() => { window.__same = 1; return window.__same; }")
        assert marker == 1
        r = httpx.post(f"{srv.url}/ws/v1/partition/second/applications",
                       json={"applicationID": "late", "user": "u", "queue": "root.b"})
        assert r.status_code == 201, r.text
        httpx.post(f"{srv.url}/ws/v1/partition/second/allocations",
                   json={"applicationID": "late", "allocationKey": "k", "resource": {"vcore": 3000}})
        tab.page.wait_for_function(
            "() => document.querySelector('main').innerText.includes('3 cores / 4 cores')", timeout=30_000)
        assert tab.page.evaluate("() => window.__same") == 1            # the same document: no reload
        assert tab.errors == [], tab.errors
        # the choice is kept for the next page
        tab.page.goto(f"{srv.url}/ui/waiting?partition=second")
        assert tab.page.locator("#refresh").input_value() == "2"
    finally:
        tab.close()
        srv.stop()
        s.close()


def test_login_logout_and_401_without_a_session(browser: Any) -> None:
    s = _world()
    srv = _Server(s, tokens=Tokens({"read": ["r3ad-token"], "admin": ["adm1n"]}))
    tab = _Page(browser)
    try:
        first = tab.page.goto(f"{srv.url}/ui/trees")
        assert first is not None and first.status == 401
        assert tab.page.locator("#token").is_visible()
        tab.page.fill("#token", "wrong")
        tab.page.click("#login")
        assert "not valid" in tab.page.locator("#login-error").inner_text()
        assert tab.page.context.cookies() == []
        tab.page.fill("#token", "r3ad-token")
        with tab.page.expect_navigation():
            tab.page.click("#login")
        assert tab.page.url == f"{srv.url}/ui/trees"                   # back where the reader was going
        assert "r3ad-token" not in tab.page.url
        assert "Quota trees" in tab.page.locator("h1").inner_text()
        (cookie,) = tab.page.context.cookies()
        assert cookie["name"] == SESSION_COOKIE and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert cookie["expires"] > 0                                    # it expires
        assert tab.page.evaluate("() => document.cookie") == ""          # no script can read it
        for view in ("", "waiting", "users", "elastic", "standing?kind=user&name=alice"):
            resp = tab.page.goto(f"{srv.url}/ui/{view}")
            assert resp is not None and resp.status == 200, view
        with tab.page.expect_navigation():
            tab.page.click("#logout")
        assert tab.page.url == f"{srv.url}/ui/login"
        assert tab.page.context.cookies() == []
        again = tab.page.goto(f"{srv.url}/ui/")
        assert again is not None and again.status == 401
        assert tab.errors == [e for e in tab.errors if "401" in e]      # only the 401s themselves
    finally:
        tab.close()
        srv.stop()
        s.close()
