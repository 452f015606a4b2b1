"""The page at /ui/ (issue 17 #5) on a real service with the README tour's data plus elastic quotas
and a quota tree: every view renders what it should, values escaped; then the same views in headless
Chromium (its own --dump-dom and --screenshot flags), which must render them without an error."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import quotaplane as qp
from tests.client.test_client import _Server
from tests.scenarios.world import ALICE, CONFIG, tags

VIEWS = {
    "": ["Overview", "n1", "waiting asks"],
    "users": ["Users and groups", "alice", "root.a", "vcore=3000"],            # alice's limit at root.a
    "elastic": ["Elastic quotas", "team-a", "runtime", "borrowed"],
    "trees": ["Quota trees", "<h2>T</h2>", "consumers"],
    "waiting": ["Waiting asks", "w1", "user.maxresources"],
    "standing?kind=user&name=alice": ["Standing of user alice", "Limits", "w1", "user.maxresources"],
    "standing?kind=queue&name=root.a": ["Standing of queue root.a", "guaranteed"],
    "standing?kind=user&name=%3Cscript%3E": ["&lt;script&gt;", "not found"],
}


@pytest.fixture(scope="module")
def ui() -> Iterator[str]:
    s = qp.Scheduler.from_yaml(CONFIG)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 8000}))
    p.add_application("a1", ALICE, queue="root.a", tags=tags("team-a", "A"))
    assert p.allocate("a1", "k1", qp.Resource({"vcore": 2500})).allocated
    p.add_ask("a1", "w1", qp.Resource({"vcore": 1000}))          # over alice's 3 at root.a: waits
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
    assert "<script" not in r.text                 # no script at all, and names are escaped


def test_the_views_render_in_headless_chromium(ui: str, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Chromium (Debian package 'chromium') is not installed; .ci/run installs it")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    for i, view in enumerate(VIEWS):
        url = f"{ui}/ui/{view}"
        dom = subprocess.run([chromium, *flags, "--dump-dom", url], capture_output=True, text=True,
                             timeout=60)
        assert dom.returncode == 0, dom.stderr[-2000:]
        for text in VIEWS[view]:
            assert text in dom.stdout, (view, text)
        shot = tmp_path / f"view{i}.png"
        subprocess.run([chromium, *flags, "--window-size=1400,900", f"--screenshot={shot}", url],
                       capture_output=True, timeout=60)
        assert shot.is_file() and shot.stat().st_size > 5000        # a page was drawn


TOUR_VIEWS = {
    "": ["node-1", "1 waiting asks"],
    "users": ["sue", "root.engineering.sandbox", "vcore=5000"],
    "waiting": ["a3", "user.maxresources"],
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
