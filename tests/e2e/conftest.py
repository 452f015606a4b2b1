"""End-to-end helpers: run the real ``quotaplane serve`` as a subprocess on a free loopback port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """\
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: default
            submitacl: "*"
          - name: restricted
            submitacl: "alice"
            adminacl: "boss"
          - name: small
            submitacl: "*"
            resources:
              max:
                vcore: 4
"""

PG_ENV = "QUOTAPLANE_PG_URL"


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """A ``quotaplane serve`` subprocess."""

    def __init__(self, *, config: Path | None, store: str, cwd: Path, env: dict[str, str] | None = None,
                 port: int | None = None, host: str = "127.0.0.1", extra_args: Sequence[str] = (),
                 preexec_fn: Callable[[], None] | None = None) -> None:
        self.port = port or free_port()
        self.host = host
        self.url = f"http://{host}:{self.port}"
        self.config = config
        self.store = store
        self.cwd = cwd
        self.env = dict(os.environ)
        self.env.pop("QUOTAPLANE_TOKENS", None)
        self.env.pop("QUOTAPLANE_TOKENS_FILE", None)
        # Let the subprocesses cache bytecode: without it every start recompiles FastAPI (~5 s here).
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.env.update(env or {})
        self.env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + self.env.get("PYTHONPATH", "")
        self.extra_args = list(extra_args)
        self.preexec_fn = preexec_fn
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = cwd / f"server-{self.port}-{uuid.uuid4().hex[:6]}.log"

    def args(self) -> list[str]:
        """The command line."""
        cmd = [sys.executable, "-m", "quotaplane.cli", "serve", "--store", self.store,
               "--host", self.host, "--port", str(self.port)]
        if self.config is not None:
            cmd += ["--config", str(self.config)]
        return cmd + self.extra_args

    def start(self, wait: bool = True, timeout: float = 30.0) -> ServerProcess:
        """Start the process (and wait until the healthcheck answers)."""
        self._log_handle = self.log.open("ab")
        self.proc = subprocess.Popen(self.args(), cwd=self.cwd, env=self.env, stdout=self._log_handle,
                                     stderr=subprocess.STDOUT, preexec_fn=self.preexec_fn)
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Poll the healthcheck until it answers; fail with the log if the process died."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode}:\n{self.output()}")
            try:
                r = httpx.get(self.url + "/ws/v1/scheduler/healthcheck", timeout=1.0)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"server did not come up in {timeout}s:\n{self.output()}")

    def output(self) -> str:
        """Everything the process printed so far."""
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def kill9(self) -> None:
        """SIGKILL and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> int:
        """SIGTERM, wait, return the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log_handle.close()
        return int(self.proc.returncode)

    def client(self, token: str | None = None) -> httpx.Client:
        """An HTTP client for this server."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=10.0)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """The e2e configuration written to a file."""
    p = tmp_path / "queues.yaml"
    p.write_text(CONFIG)
    return p


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    """Collects started servers and kills whatever is left at the end."""
    started: list[ServerProcess] = []
    yield started
    for s in started:
        if s.proc is not None and s.proc.poll() is None:
            s.kill9()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL store URL with a schema of its own (dropped afterwards); skips without a server."""
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"PostgreSQL fail-over test: set {PG_ENV} (e.g. "
                    "postgresql://postgres:postgres@127.0.0.1:5432/quotaplane_test) to run it")
    import psycopg

    try:
        conn = psycopg.connect(base, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL at {PG_ENV} is not reachable: {exc}")
    schema = f"qp_e2e_{uuid.uuid4().hex[:10]}"
    sep = "&" if "?" in base else "?"
    try:
        yield f"{base}{sep}schema={schema}"
    finally:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.close()
