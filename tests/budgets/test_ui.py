"""Budgets on the ``/ui/`` page (issue 34): the Budgets page shows each budget — consumed of the
budget as a meter, committed, left, the burn rate and the date it runs out at that rate, the reset —
and each time window, open or closed; the standing page shows a queue's budgets. Served over HTTP and
in a real browser (Playwright driving Debian's Chromium): no script error, no CSP violation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from quotaplane.config.identity import UserGroup
from quotaplane.scheduler import Scheduler
from quotaplane.server.app import create_app
from tests.budgets.test_admission import NOV1, H, config
from tests.client.test_client import _Server
from tests.history.test_ui import CHROMIUM
from tests.partition.helpers import Clock

WINDOW = """  windows:
  - name: crunch
    queue: root.teams.b
    from: "2026-11-01T06:00"
    to: "2026-11-05T00:00"
    max: {nvidia.com/gpu: 8}
"""


def _scheduler() -> Scheduler:
    clock = Clock(NOV1 + 8 * H)
    s = Scheduler.from_yaml(config(extra=WINDOW), clock=clock)
    p = s.partition("default")
    p.add_node("n1", {"nvidia.com/gpu": 8})
    p.add_application("train", UserGroup("alice", ()), queue="root.teams.a")
    assert p.allocate("train", "k1", {"nvidia.com/gpu": 4}).allocated
    clock.advance(20 * H)                            # 80 of 100 GPU-hours
    return s


@pytest.fixture
def page() -> Iterator[TestClient]:
    s = _scheduler()
    with TestClient(create_app(s)) as client:
        yield client
    s.close()


def test_the_budgets_page_shows_each_budget_and_window(page: TestClient) -> None:
    r = page.get("/ui/budgets")
    assert r.status_code == 200, r.text
    text = r.text
    assert "<script>" not in text and " style=" not in text          # the CSP allows neither
    assert '<a href="/ui/budgets" class=on>Budgets</a>' in text
    row = text.split('data-scope="root.teams.a"')[1].split("</tr>")[0]
    assert 'data-resource="nvidia.com/gpu"' in text and '<meter min="0" max="100"' in row
    assert 'value="80"' in row and "80 of 100 GPU-hours (80 %)" in row
    assert "4 GPUs" in row                                            # the burn rate
    assert '<time datetime="2026-11-02T09:00:00+00:00">' in row       # runs out at that rate
    assert '<time datetime="2026-12-01T00:00:00+00:00">' in row       # the reset
    assert "50 %, 80 %" in row and ">hold<" in row
    windows = text.split('<table class="windows">')[1]
    assert "<b>crunch</b>" in windows and "root.teams.b" in windows and "max: 8 GPUs" in windows
    assert "(due to open)" in windows                                # the timer has not run yet
    # as its file wrote it, in its zone (found as a new user: the seconds since the epoch)
    assert "2026-11-01T06:00 to 2026-11-05T00:00 (UTC)" in windows and "epoch" not in windows
    standing = page.get("/ui/standing?kind=queue&name=root.teams.a").text
    assert "<h2>Budgets</h2>" in standing and 'data-scope="root.teams.a"' in standing


def test_a_partition_without_budgets_says_so() -> None:
    s = Scheduler.from_yaml(config().split("  budgets:")[0])
    with TestClient(create_app(s)) as client:
        text = client.get("/ui/budgets").text
    s.close()
    assert "no budget in this partition" in text and "no time window in this partition" in text


@pytest.fixture
def served() -> Iterator[str]:
    s = _scheduler()
    srv = _Server(s)
    yield srv.url
    srv.stop()
    s.close()


def test_the_budgets_page_in_chromium(served: str) -> None:
    playwright_api = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("Chromium (Debian package 'chromium') is not installed; .ci/run installs it")
    errors: list[str] = []
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page: Any = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            response = page.goto(f"{served}/ui/budgets")
            assert response is not None and response.status == 200
            assert page.locator("nav a.on").inner_text() == "Budgets"
            meter = page.locator('div.budget[data-scope="root.teams.a"] meter')
            box = meter.bounding_box()
            assert box is not None and box["width"] >= 120                  # styled by the stylesheet
            assert meter.evaluate("m => m.value") == 80
            title = page.get_attribute('div.budget[data-scope="root.teams.a"]', "title") or ""
            assert "80 of 100 GPU-hours consumed, 0 committed, 20 left" in title
            assert page.locator("table.windows tbody tr").count() == 1
            assert page.screenshot(full_page=True)[:8] == b"\x89PNG\r\n\x1a\n"
        finally:
            browser.close()
    assert errors == [], errors
