"""``quotaplane serve`` at first contact (issue 30): the start line comes once the port is bound and
names the web page; a taken port is one clear line and exit 1, not uvicorn's raw ``[Errno 98]``;
``--anonymous-read`` opens reads (never writes) to clients without a token."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).with_name("quotaplane"))

#: a configured token (serve requires 16 characters at least, issue 32 item 12)
_TOKEN = "s3cret-0123456789abc"


def _start(args: list[str], tmp_path: Path,
           env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """Start serve; return it and its base URL, read off its start line (so --port 0 works)."""
    proc = subprocess.Popen([EXE, "serve", "--store", f"sqlite:///{tmp_path}/s.db", *args],
                            env={**os.environ, **(env or {})}, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    m = re.search(r"serving on (http://\S+)", line)
    assert m, (line, proc.poll())
    return proc, m.group(1)


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    return err


def test_the_start_line_comes_after_the_bind_and_names_the_web_page(tmp_path: Path) -> None:
    proc, base = _start(["--port", "0"], tmp_path)          # port 0: the line names the real port
    try:
        assert not base.endswith(":0")
        # printed once bound: the very first connection is served (nothing to retry)
        assert httpx.get(base + "/healthz", timeout=30).text == "ok\n"
        r = httpx.get(base + "/", follow_redirects=True, timeout=30)
        assert r.status_code == 200 and r.url.path == "/ui/"
    finally:
        err = _stop(proc)
    assert proc.returncode == 0, err


def test_a_taken_port_is_one_clear_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([EXE, "serve", "--store", f"sqlite:///{tmp_path}/s.db", "--port", str(port)],
                             capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "in use" in out.stderr
    assert "serving on" not in out.stderr and "Errno" not in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "s.db").exists()                # refused before the store was touched


def test_anonymous_read_serves_reads_without_a_token_and_never_writes(tmp_path: Path) -> None:
    proc, base = _start(["--port", "0", "--anonymous-read"], tmp_path,
                        {"QUOTAPLANE_TOKENS": f"admin={_TOKEN}"})
    try:
        assert httpx.get(base + "/ws/v1/partitions", timeout=30).status_code == 200
        assert httpx.get(base + "/ws/v1/metrics", timeout=30).status_code == 200
        put = httpx.put(base + "/ws/v1/partition/default/node/n1", json={"capacity": {"vcore": 1000}})
        assert put.status_code == 401
        ok = httpx.put(base + "/ws/v1/partition/default/node/n1", json={"capacity": {"vcore": 1000}},
                       headers={"Authorization": f"Bearer {_TOKEN}"})
        assert ok.status_code in (200, 201), ok.text
    finally:
        err = _stop(proc)
    assert proc.returncode == 0, err


def test_without_the_option_a_secured_instance_refuses_anonymous_reads(tmp_path: Path) -> None:
    proc, base = _start(["--port", "0"], tmp_path, {"QUOTAPLANE_TOKENS": f"admin={_TOKEN}"})
    try:
        assert httpx.get(base + "/ws/v1/partitions", timeout=30).status_code == 401
    finally:
        _stop(proc)
