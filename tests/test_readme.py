"""The README's tour stays true: its Python example runs and prints what the comments say."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_python_tour_runs_and_matches_its_comments() -> None:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python example"
    code = blocks[0]
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    printed = out.getvalue().splitlines()
    assert printed[0] == "True []"
    assert printed[1] == "user.maxresources root.engineering.sandbox map[vcore:5000]"
    assert printed[2] == "['user.maxresources']"
    assert printed[3] == "True"


def test_readme_shows_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert "make run" in text and "make test" in text


def test_the_readme_event_stream_step_shows_the_allocation_it_promises() -> None:
    """Issue 30 #5: the step printed the ``released`` event of a1, not the allocation of a3."""
    import json
    import threading

    import httpx

    import quotaplane as qp
    from tests.client.test_client import _Server

    text = (ROOT / "README.md").read_text()
    m = re.search(r'curl -s -N "\$B(/ws/v1/partition/default/events/stream\?[^"]*)" &', text)
    assert m, "README has no event-stream step"
    s = qp.Scheduler.from_yaml((ROOT / "examples" / "queues.yaml").read_text())
    p = s.partition("default")
    p.add_node("node-1", {"vcore": 16000, "memory": 68719476736, "pods": 110})
    p.add_application("app-1", qp.UserGroup("sue", ("engineering", "development")),
                      queue="root.engineering.sandbox")
    assert p.allocate("app-1", "a1", {"vcore": 2000, "memory": 1073741824}, node="node-1").allocated
    p.add_ask("app-1", "a3", {"vcore": 4000})
    srv = _Server(s)
    got: list[dict[str, object]] = []
    opened = threading.Event()

    def listen() -> None:
        with httpx.stream("GET", srv.url + m.group(1), timeout=30) as r:
            opened.set()
            got.extend(json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:"))

    try:
        t = threading.Thread(target=listen)
        t.start()
        assert opened.wait(30)              # the route subscribes before it answers: nothing is missed
        assert httpx.delete(srv.url + "/ws/v1/partition/default/allocation/a1").status_code == 200
        t.join(30)
        assert [(e["type"], e["allocationKey"]) for e in got] == [("allocated", "a3")]
    finally:
        srv.stop()
        s.close()
