"""The ``/ui/history`` page (issue 33, "a picture"): per queue usage over time against guaranteed and
max with waiting demand, and the top consumers of a period — as charts, from the exact history.

Served over HTTP (the fake-clock November of :mod:`tests.history.test_rest`), and in a real browser
(Playwright driving Debian's Chromium): the charts render with no script error and no CSP violation,
their hover titles carry the hand-computed GPU-hours, and the form changes the range."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from quotaplane.server.app import create_app
from tests.client.test_client import _Server
from tests.history.test_rest import november

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "",
                             shutil.which("chromium-browser") or "") if p and os.path.exists(p)), None)
NOVEMBER = "start=2026-11-01&end=2026-12-01"


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    s, _ = november(monkeypatch)
    with TestClient(create_app(s)) as client:
        yield client
    s.close()


def test_the_month_is_drawn_per_queue_with_its_guarantee_and_the_top_users(page: TestClient) -> None:
    r = page.get(f"/ui/history?{NOVEMBER}&step=day&rank=user")
    assert r.status_code == 200, r.text
    text = r.text
    assert "<script>" not in text and " style=" not in text          # the CSP allows neither
    # one chart per queue; the hover title gives the month's exact GPU-hours and the borrowed part
    assert 'data-queue="root.teams.speech"' in text and 'data-queue="root.teams.vision"' in text
    assert "root.teams.speech: 2,880.0 GPU-hours used, 960.0 borrowed" in text
    assert "root.teams.vision: 2,880.0 GPU-hours used, peak step average 4 GPUs, guaranteed 4 GPUs" in text
    assert text.count('<polyline class="guar"') >= 2                  # the guarantees are drawn
    # the ranking: vera and sam 2,880 GPU-hours each (users have no guarantee: nothing borrowed)
    assert '<li data-name="sam">' in text and '<li data-name="vera">' in text
    assert text.count('<span class="n">2,880.0 GPU-hours</span>') == 2
    # by queue: root.teams first (5,760), speech's 960 borrowed marked inside its bar
    by_queue = page.get(f"/ui/history?{NOVEMBER}&step=day&rank=queue").text
    top = by_queue.split('<ol class="top">')[1].split("</ol>")[0]
    assert top.index('data-name="root.teams"') < top.index('data-name="root.teams.speech"')
    assert "2,880.0 GPU-hours, 960.0 borrowed" in top and '<rect class="borrowed"' in top
    # 30 daily steps: the area has two corners per step plus its two feet
    speech = text.split('data-queue="root.teams.speech"')[1].split("</figure>")[0]
    polygon = speech.split('<polygon class="used" points="')[1].split('"')[0]
    assert len(polygon.split()) == 2 * 30 + 2


def test_a_bad_choice_is_said_on_the_page_never_a_500(page: TestClient) -> None:
    for query, says in (("start=yesterday-ish", "start"), ("step=fortnight", "step"), ("rank=planet", "rank"),
                        ("period=someday", "period")):
        r = page.get(f"/ui/history?{query}")
        assert r.status_code == 200 and 'class="bad"' in r.text and says in r.text, (query, r.text[-400:])
    r = page.get("/ui/history?start=%7Bresource%7D")                  # braces are data, not a template
    assert r.status_code == 200 and "{resource}" in r.text


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    s, _ = november(monkeypatch)
    srv = _Server(s)
    yield srv.url
    srv.stop()
    s.close()


def test_the_history_page_in_chromium(served: str) -> None:
    playwright_api = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is not installed (Debian package 'chromium'); .ci/run installs it")
        pytest.skip("Chromium (Debian package 'chromium') is not installed; .ci/run installs it")
    errors: list[str] = []
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page: Any = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            response = page.goto(f"{served}/ui/history?{NOVEMBER}&step=day")
            assert response is not None and response.status == 200
            assert page.locator("nav a.on").inner_text() == "History"
            chart = page.locator('figure[data-queue="root.teams.speech"] svg')
            box = chart.bounding_box()
            assert box is not None and box["width"] > 300 and box["height"] > 80     # styled, drawn
            # the area is filled by the stylesheet (not black, not transparent): the CSS applied
            fill = page.eval_on_selector('figure[data-queue="root.teams.speech"] polygon.used',
                                         "e => getComputedStyle(e).fill")
            assert fill not in ("", "none", "rgb(0, 0, 0)"), fill
            assert "960.0 borrowed" in (chart.locator("title").text_content() or "")
            assert page.locator("ol.top li").count() == 2
            # the form: a week by day shows 7 steps
            page.fill('input[name="start"]', "2026-11-08")
            page.fill('input[name="end"]', "2026-11-15")
            page.click('form.hform button[type="submit"]')
            page.wait_for_url("**start=2026-11-08**")
            points = page.get_attribute('figure[data-queue="root.teams.speech"] polygon.used', "points")
            assert points is not None and len(points.split()) == 2 * 7 + 2
            assert page.screenshot(full_page=True)[:8] == b"\x89PNG\r\n\x1a\n"
        finally:
            browser.close()
    assert errors == [], errors
