"""``tools/yunikorn_web_check.py`` without the browser: its README tour runs against a real
``quotaplane serve`` (leaving a waiting ask and an allocation on a node, what the UI pages show) and its
server hands out the UI's files and forwards ``/ws/`` to quotaplane. The browser run itself needs a
yunikorn-web build and Chromium; it is run by hand (docs/rest.md "YuniKorn's web UI")."""

from __future__ import annotations

import importlib.util
import json
import urllib.request
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    path = ROOT / "tools" / "yunikorn_web_check.py"
    spec = importlib.util.spec_from_file_location("yunikorn_web_check", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _get(url: str) -> tuple[str, bytes]:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.headers["Content-Type"], r.read()


def test_the_tour_and_the_forwarding_server(tmp_path: Path) -> None:
    tool = _tool()
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<app-root></app-root>")
    (dist / "main.js").write_text("console.log(1)")
    with tool.quotaplane_serve(tmp_path) as backend:
        tool.readme_tour(backend)
        with tool.serve_ui(dist, backend) as ui:
            assert _get(ui + "/")[1] == b"<app-root></app-root>"
            assert _get(ui + "/queues")[1] == b"<app-root></app-root>"        # the UI's own routes
            kind, body = _get(ui + "/main.js")
            assert kind == "text/javascript" and body == b"console.log(1)"
            kind, body = _get(ui + "/ws/v1/partition/default/application/app-1")
            app = json.loads(body)
            assert kind.startswith("application/json")
            assert [r["allocationKey"] for r in app["requests"]] == ["a3"]      # shown as pending
            assert app["allocations"][0]["nodeId"] == "node-1"
            assert _get(ui + "/../../etc/passwd")[1] == b"<app-root></app-root>"


def test_the_secured_instance_reads_anonymously_and_writes_with_the_token(tmp_path: Path) -> None:
    """Issue 30: the UI's reads go through without a token (anonymous read); the tour's writes need it."""
    tool = _tool()
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.html").write_text("<app-root></app-root>")
    with tool.quotaplane_serve(tmp_path, secured=True) as backend:
        refused = tool._call(backend, "PUT", "/ws/v1/partition/default/node/n9", {"capacity": {"vcore": 1}})
        assert refused[0] == 401
        tool.readme_tour(backend, tool.ADMIN_TOKEN)
        with tool.serve_ui(dist, backend) as ui:
            app = json.loads(_get(ui + "/ws/v1/partition/default/application/app-1")[1])
            assert [r["allocationKey"] for r in app["requests"]] == ["a3"]
            assert json.loads(_get(ui + "/ws/v1/partition/default/queues")[1])["queuename"] == "root"
