"""Take the web page's screenshots for the docs (``docs/img/ui-*.png``) with the same Playwright set-up
as the tests: Debian's Chromium (``/usr/bin/chromium``), never a downloaded browser.

The state shown: ``examples/queues.yaml`` as partition ``default`` with the README tour's sue and a few
more teams at work (some of it waiting), and a partition ``research`` holding the elastic quotas of
``examples/elastic-quotas.yaml`` and the quota tree of ``examples/quota-tree.json``::

    .venv/bin/python tools/ui_screenshots.py [--out docs/img] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import quotaplane as qp  # noqa: E402

GI = 2**30


def _config() -> str:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    doc = yaml.load((ROOT / "examples" / "queues.yaml").read_text())
    quotas = list(yaml.load_all((ROOT / "examples" / "elastic-quotas.yaml").read_text()))
    tree = json.loads((ROOT / "examples" / "quota-tree.json").read_text())
    doc["partitions"].append({
        "name": "research",
        "queues": [{"name": "root", "submitacl": "*", "queues": [{"name": "default"}]}],
        "elasticquotas": {"quotas": quotas},
        "quotatrees": {"trees": [json.dumps(tree)]},
    })
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


def _state(s: qp.Scheduler) -> None:
    p = s.partition("default")
    for i in range(1, 5):
        p.add_node(f"node-{i}", {"vcore": 64000, "memory": 256 * GI, "pods": 110, "nvidia.com/gpu": 4})
    sue = qp.UserGroup("sue", ("engineering", "development"))
    p.add_application("app-1", sue, queue="root.engineering.sandbox")
    p.allocate("app-1", "a1", {"vcore": 2000, "memory": GI}, node="node-1")
    p.add_ask("app-1", "a3", {"vcore": 4000})
    ml = qp.UserGroup("mo", ("engineering",))
    p.add_application("train-7", ml, queue="root.engineering.ml")
    for k in range(6):
        p.allocate("train-7", f"t{k}", {"vcore": 8000, "memory": 32 * GI, "nvidia.com/gpu": 2},
                   node=f"node-{k % 4 + 1}")
    p.add_ask("train-7", "t6", {"vcore": 8000, "memory": 32 * GI, "nvidia.com/gpu": 8})
    web = qp.UserGroup("pia", ("engineering",))
    p.add_application("web-api", web, queue="root.engineering.platform")
    p.allocate("web-api", "w0", {"vcore": 24000, "memory": 96 * GI}, node="node-2")
    r = s.partition("research")
    r.add_node("r-1", {"vcore": 100000, "memory": 400 * GI})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()

    import uvicorn
    from playwright.sync_api import sync_playwright

    from quotaplane.server.app import create_app

    s = qp.Scheduler.from_yaml(_config())
    _state(s)
    server = uvicorn.Server(uvicorn.Config(create_app(s), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    args.out.mkdir(parents=True, exist_ok=True)
    shots = {"ui-queues": "/ui/", "ui-waiting": "/ui/waiting", "ui-users": "/ui/users",
             "ui-elastic": "/ui/elastic?partition=research", "ui-trees": "/ui/trees?partition=research",
             "ui-standing": "/ui/standing?kind=user&name=sue"}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium,
                                         args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 760})
            for name, path in shots.items():
                page.goto(base + path)
                page.screenshot(path=str(args.out / f"{name}.png"), full_page=name != "ui-queues")
                print(f"wrote {args.out / name}.png")
            browser.close()
    finally:
        server.should_exit = True
        thread.join(10)
        s.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
