"""``quotaplane serve`` as people run it (issue 17 #2): options from environment variables, JSON
logs with an access log line per request, /healthz and /readyz for probes, ``--version``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).with_name("quotaplane"))


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_version() -> None:
    out = subprocess.run([EXE, "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "quotaplane 0.1.0"


def test_serve_takes_its_options_from_the_environment_and_logs_json(tmp_path: Path) -> None:
    port = _port()
    env = {**os.environ, "QUOTAPLANE_CONFIG": str(ROOT / "examples" / "queues.yaml"),
           "QUOTAPLANE_STORE": f"sqlite:///{tmp_path}/state.db", "QUOTAPLANE_PORT": str(port),
           "QUOTAPLANE_LOG_FORMAT": "json", "QUOTAPLANE_LOG_LEVEL": "info", "QUOTAPLANE_ACCESS_LOG": "1"}
    proc = subprocess.Popen([EXE, "serve"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                r = httpx.get(base + "/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.1)
        assert (r.status_code, r.text) == (200, "ok\n")
        assert httpx.get(base + "/readyz").text == "ok\n"
        assert httpx.get(base + "/ws/v1/partition/default/queue/root.default").status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    access = [json.loads(line) for line in err.splitlines() if line.startswith("{")
              and json.loads(line)["logger"] == "quotaplane.access"]
    got = {(a["method"], a["path"], a["status"]) for a in access}
    assert ("GET", "/ws/v1/partition/default/queue/root.default", 200) in got
    assert all(isinstance(a["duration_ms"], float) and a["level"] == "info" and a["time"].endswith("Z")
               for a in access)


def test_a_bad_log_format_is_refused(tmp_path: Path) -> None:
    out = subprocess.run([EXE, "serve", "--log-format", "xml", "--store", f"sqlite:///{tmp_path}/s.db"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "log format must be one of text, json" in out.stderr


def test_a_port_out_of_range_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """``--port 99999`` (or ``QUOTAPLANE_PORT``): exit 2 naming the range. It used to start and hang
    with nothing listening (uvicorn does not survive the OverflowError of such a bind)."""
    for args, env_port in ((["--port", "99999"], None), ([], "70000"), (["--port", "-1"], None)):
        env = {**os.environ, **({"QUOTAPLANE_PORT": env_port} if env_port else {})}
        out = subprocess.run([EXE, "serve", "--store", f"sqlite:///{tmp_path}/s.db", *args], env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, (args, env_port, out.stderr)
        assert "Invalid value for '--port'" in out.stderr, out.stderr
        assert ("65535" if env_port or args[1] != "-1" else "greater than or equal to 0") in out.stderr
    out = subprocess.run([EXE, "kube", "--port", "65536"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Invalid value for '--port'" in out.stderr, out.stderr
