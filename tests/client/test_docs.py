"""docs/client.md's first example runs against a real service and prints what the page says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import quotaplane as qp
from tests.client.test_client import _Server

ROOT = Path(__file__).resolve().parents[2]


def test_the_client_page_example_prints_what_it_says(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "docs" / "client.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, flags=re.S)[0]
    expected = re.findall(r"```text\n(.*?)```", text, flags=re.S)[0]
    s = qp.Scheduler.from_yaml((ROOT / "examples" / "queues.yaml").read_text())
    srv = _Server(s)
    monkeypatch.setenv("QUOTAPLANE_SERVER", srv.url)
    monkeypatch.delenv("QUOTAPLANE_TOKEN", raising=False)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "docs/client.md", "exec"), {})
    finally:
        srv.stop()
        s.close()
    assert out.getvalue() == expected
