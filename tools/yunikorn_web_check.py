"""YuniKorn's own web UI against quotaplane, in a real browser (issue 15, docs/rest.md "YuniKorn's web UI").

What it does:

1. starts ``quotaplane serve`` (a real process, SQLite state in a temporary folder) with
   ``examples/queues.yaml`` and plays the README's tour against it — a node, sue's application, an
   allocation on the node, a refused one, and a waiting ask — so every page has real data, a pending
   ask included;
2. serves a production build of yunikorn-web (``--dist``, the folder its build writes:
   ``dist/yunikorn-web``) on one port and forwards ``/ws/`` to quotaplane, as YuniKorn's own image
   does (a production build calls the address it was loaded from);
3. drives headless Chromium (Playwright for Python with the system's Chromium) through Dashboard,
   Queues, Applications (a queue picked, an application opened), Nodes and Status, and writes a
   screenshot of each to ``--out``.

By default quotaplane runs **secured**, as it would off loopback: tokens are configured
(``QUOTAPLANE_TOKENS``) and ``--anonymous-read`` is on, so the tour writes with the admin token while the
UI — which sends no token — reads anonymously (``--open`` runs it without tokens instead). The check
also confirms that, on the secured instance, a write without a token is refused (401).

It fails when a page reaches the UI's error route, when the browser logs a console error, or when a
``/ws/`` call answers 4xx/5xx. This project does not build yunikorn-web: build it from its repository
with that repository's own instructions and pass the folder. Needs ``pip install playwright`` (its
browser download is not needed: ``--chromium`` points at the system's, default ``/usr/bin/chromium``).
It is not run by ``make test`` (CI has no yunikorn-web build and the run takes about a minute).

    .venv/bin/python tools/yunikorn_web_check.py --dist ../yunikorn-web/dist/yunikorn-web --out /tmp/ui
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: the admin token of the secured instance (a throwaway: the instance lives for one check)
ADMIN_TOKEN = "yunikorn-web-check-admin"


def _call(base: str, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def readme_tour(base: str, token: str | None = None) -> None:
    """The README's "Talk to the service" steps, stopping while ask a3 waits (so it shows as pending)."""
    steps: list[tuple[str, str, Any, int]] = [
        ("PUT", "/ws/v1/partition/default/node/node-1",
         {"capacity": {"vcore": 16000, "memory": 68719476736, "pods": 110}}, 201),
        ("POST", "/ws/v1/partition/default/applications",
         {"applicationID": "app-1", "user": "sue", "groups": ["engineering", "development"],
          "queue": "root.engineering.sandbox"}, 201),
        ("POST", "/ws/v1/partition/default/allocations",
         {"applicationID": "app-1", "allocationKey": "a1", "resource": {"vcore": 2000, "memory": 1073741824},
          "nodeID": "node-1"}, 201),
        ("POST", "/ws/v1/partition/default/allocations",
         {"applicationID": "app-1", "allocationKey": "a2", "resource": {"vcore": 9000}}, 409),
        ("POST", "/ws/v1/partition/default/application/app-1/asks",
         {"allocationKey": "a3", "resource": {"vcore": 4000}}, 201),
    ]
    for method, path, body, want in steps:
        status, answer = _call(base, method, path, body, token)
        if status != want:
            raise SystemExit(f"tour step {method} {path}: {status} {answer}")


class _Proxy(http.server.ThreadingHTTPServer):
    dist: Path
    backend: str


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Proxy

    def log_message(self, fmt: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/ws/"):
            self._forward()
            return
        rel = self.path.split("?", 1)[0].lstrip("/") or "index.html"
        target = (self.server.dist / rel).resolve()
        if not target.is_file() or self.server.dist.resolve() not in target.parents:
            target = self.server.dist / "index.html"           # the UI's own routes
        body = target.read_bytes()
        kind = {".js": "text/javascript", ".css": "text/css", ".html": "text/html",
                ".json": "application/json", ".svg": "image/svg+xml", ".ico": "image/x-icon",
                ".woff2": "font/woff2", ".png": "image/png"}.get(target.suffix, "application/octet-stream")
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _forward(self) -> None:
        req = urllib.request.Request(self.server.backend + self.path,
                                     headers={k: v for k, v in self.headers.items()
                                              if k.lower() in ("accept", "content-type")})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, headers, body = r.status, r.headers, r.read()
        except urllib.error.HTTPError as exc:
            status, headers, body = exc.code, exc.headers, exc.read()
        self.send_response(status)
        self.send_header("Content-Type", headers.get("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextlib.contextmanager
def serve_ui(dist: Path, backend: str) -> Iterator[str]:
    """yunikorn-web's files and ``/ws/`` forwarded to ``backend``, on one loopback port."""
    server = _Proxy(("127.0.0.1", _free_port()), _Handler)
    server.dist, server.backend = dist, backend
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@contextlib.contextmanager
def quotaplane_serve(tmp: Path, secured: bool = False) -> Iterator[str]:
    """``quotaplane serve`` on a free port; ``secured``: with an admin token and ``--anonymous-read``."""
    port = _free_port()
    exe = shutil.which("quotaplane", path=str(Path(sys.executable).parent)) or "quotaplane"
    env = dict(os.environ)
    extra: list[str] = []
    if secured:
        env["QUOTAPLANE_TOKENS"] = f"admin={ADMIN_TOKEN}"
        extra = ["--anonymous-read"]
    proc = subprocess.Popen([exe, "serve", "--config", str(ROOT / "examples" / "queues.yaml"),
                             "--store", f"sqlite:///{tmp / 'state.db'}", "--host", "127.0.0.1",
                             "--port", str(port), *extra], cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            with contextlib.suppress(OSError):
                if _call(base, "GET", "/ws/v1/scheduler/healthcheck")[0] == 200:
                    break
            time.sleep(0.05)
        else:
            raise SystemExit("quotaplane serve did not start")
        yield base
    finally:
        proc.terminate()
        proc.wait(20)


def drive(ui: str, out: Path, chromium: str) -> list[str]:
    """Visit every page, take screenshots; the problems found."""
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.on("console",
                lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("response", lambda r: problems.append(f"{r.status} {r.url}")
                if "/ws/" in r.url and r.status >= 400 else None)

        def visit(name: str, path: str, ready: str) -> None:
            page.goto(ui + path)
            try:
                page.wait_for_selector(ready, timeout=15_000)
            except Exception:
                problems.append(f"{name}: {ready!r} never appeared")
            page.wait_for_timeout(1500)                 # charts animate in
            if "/error" in page.url:
                problems.append(f"{name}: the UI went to its error page ({page.url})")
            page.screenshot(path=str(out / f"{name}.png"), full_page=True)

        visit("dashboard", "/#/dashboard", "app-dashboard")
        visit("queues", "/#/queues", "app-queues-view")
        # open root → engineering, select sandbox: its detail shows the waiting ask as Pending
        with contextlib.suppress(Exception):
            for name in ("root", "engineering"):
                page.locator(".queue-name", has_text=name).first.locator("a").click()
                page.wait_for_timeout(500)
            page.locator(".queue-name", has_text="sandbox").first.click()
            page.wait_for_timeout(1000)
            page.screenshot(path=str(out / "queues-sandbox.png"), full_page=True)
        if not (out / "queues-sandbox.png").exists():
            problems.append("queues: could not open root.engineering.sandbox")
        visit("applications", "/#/applications", "app-applications-view")
        # pick the tour's queue, then open its application (twice at most: the select's panel may
        # re-render under the click on a loaded machine; a second try starts from a fresh page)
        def pick_and_open() -> bool:
            step = "open the queue select"
            try:
                # wait for each element rather than a fixed time: the select's panel animates in
                page.locator("mat-select").nth(1).click()
                step = "pick root.engineering.sandbox"
                option = page.get_by_role("option", name="root.engineering.sandbox")
                option.wait_for(state="visible", timeout=15_000)
                page.wait_for_timeout(500)
                try:
                    option.click(timeout=5_000)
                except Exception:          # the panel still moving: the option's own click
                    option.dispatch_event("click")
                step = "see app-1 listed"
                row = page.get_by_role("cell", name="app-1").first
                row.wait_for(state="visible", timeout=15_000)
                page.screenshot(path=str(out / "applications-queue.png"), full_page=True)
                step = "open app-1"
                row.click()
                allocation = page.get_by_role("cell", name="a1", exact=True).first
                allocation.wait_for(state="visible", timeout=15_000)
                page.screenshot(path=str(out / "applications-app.png"), full_page=True)
            except Exception as exc:              # say why (the check below names the page)
                print(f"applications: could not {step}: {str(exc).splitlines()[0]}")
                return False
            return True

        if not pick_and_open():
            visit("applications", "/#/applications", "app-applications-view")
            pick_and_open()
        if not (out / "applications-app.png").exists():
            problems.append("applications: could not pick root.engineering.sandbox and open app-1")
        visit("nodes", "/#/nodes", "app-nodes-view")
        visit("status", "/#/status", "app-status-view")
        browser.close()
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dist", type=Path, required=True, help="yunikorn-web's production build folder")
    ap.add_argument("--out", type=Path, default=Path("yunikorn-web-screenshots"), help="screenshots go here")
    ap.add_argument("--chromium", default=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
    ap.add_argument("--open", action="store_true",
                    help="run quotaplane without tokens (default: an admin token and --anonymous-read)")
    args = ap.parse_args()
    if not (args.dist / "index.html").is_file():
        raise SystemExit(f"{args.dist}: no index.html (pass the folder of a yunikorn-web production build)")
    args.out.mkdir(parents=True, exist_ok=True)
    secured = not args.open
    with tempfile.TemporaryDirectory() as tmp, quotaplane_serve(Path(tmp), secured) as backend:
        readme_tour(backend, ADMIN_TOKEN if secured else None)
        problems: list[str] = []
        if secured:           # the anonymous reader may read, never write
            status, _ = _call(backend, "PUT", "/ws/v1/partition/default/node/node-2",
                              {"capacity": {"vcore": 1000}})
            if status != 401:
                problems.append(f"a write without a token answered {status}, not 401")
        with serve_ui(args.dist, backend) as ui:
            problems += drive(ui, args.out, args.chromium)
    for p in problems:
        print("PROBLEM", p)
    mode = "token-protected instance, anonymous read" if secured else "instance without tokens"
    verdict = "FAILED" if problems else "passed"
    print(f"{mode}; screenshots in {args.out}; {verdict}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
