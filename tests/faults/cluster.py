"""The fault suite's cluster: several ``quotaplane serve`` instances on one PostgreSQL store, the
partitions spread over them, each instance reaching the database through a :class:`FaultProxy` of
its own (so a connection fault can hit one instance or all).

The database is either the shared server of the test run (a fresh schema; a "restart" is then what
the instances see of one — every connection cut, none taken for a moment — made by the proxies, so
other tests on that server are not disturbed) or a server of its own (:class:`OwnServer`: initdb in
a temporary directory, its own port), which is really restarted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from tests.faults.proxy import FaultProxy

ROOT = Path(__file__).resolve().parents[2]

#: the slots (a countable resource) a partition's queue may hold: two admissions must never exceed it
LIMIT = 12


def config(partitions: list[str]) -> str:
    """The configuration: per partition one queue ``root.q`` with a maximum of :data:`LIMIT` vcores."""
    lines = ["partitions:"]
    for name in partitions:
        lines += [f"- name: {name}", "  queues:", "  - name: root", "    submitacl: '*'", "    queues:",
                  "    - name: q", f"      resources: {{max: {{slots: {LIMIT}}}}}"]
    return "\n".join(lines) + "\n"


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _replace_hostport(url: str, host: str, port: int) -> str:
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{host}:{port}" if userinfo else f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def with_query(url: str, **params: str) -> str:
    """``url`` with ``params`` added to its query string."""
    extra = "&".join(f"{k}={v}" for k, v in params.items())
    return url + ("&" if "?" in url else "?") + extra


class OwnServer:
    """A PostgreSQL server of the suite's own (long form): a fresh cluster in a temporary directory
    on a free port, run as the ``postgres`` user when started as root. :meth:`restart` really
    restarts it (``immediate``: as after a crash, ``fast``: a clean restart)."""

    def __init__(self, bindir: str | None = None) -> None:
        self.bindir = Path(bindir or self._find_bindir())
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="qp-faults-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self._as_root = os.geteuid() == 0
        if self._as_root:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        conf = self.data / "postgresql.conf"
        with conf.open("a") as f:
            f.write(f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = "
                    f"'{self.dir}'\nfsync = on\nmax_connections = 100\n")
        self.start()

    @staticmethod
    def _find_bindir() -> str:
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
        if not found:
            raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
        return str(found[-1].parent)

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bindir / tool), *args]
        if self._as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @property
    def url(self) -> str:
        """Its URL (database ``postgres``)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        """Start it and wait until it takes connections."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def restart(self, mode: str = "immediate") -> None:
        """Stop it (``immediate``: no checkpoint, as a crash; ``fast``: clean) and start it again."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")
        self.start()

    def stop(self) -> None:
        """Stop it and remove its directory."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Instance:
    """One ``quotaplane serve`` process and the proxy it reaches the database through."""

    name: str
    port: int
    partitions: list[str]
    proxy: FaultProxy
    store: str
    workdir: Path
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    logs: list[Path] = field(default_factory=list)

    @property
    def url(self) -> str:
        """Where it serves."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, config_file: Path) -> None:
        """Start the process (not waiting for it to answer)."""
        self.starts += 1
        log = self.workdir / f"{self.name}-{self.starts}.log"
        self.logs.append(log)
        cmd = [sys.executable, "-m", "quotaplane.cli", "serve", "--store", self.store, "--config",
               str(config_file), "--host", "127.0.0.1", "--port", str(self.port),
               "--partitions", ",".join(self.partitions)]
        with log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, cwd=self.workdir, env=self.env, stdout=out,
                                         stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the process."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self) -> None:
        """kill -9, and reap it."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)
                self.proc.kill()
            self.proc.wait(30)

    def stop(self) -> None:
        """A clean stop (SIGTERM), then kill -9 if it does not end."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()


class Cluster:
    """``instances`` serve processes on one store (see the module docstring); partition ``p<i>`` is
    given to instance ``i % instances``. Use as a context manager: everything is stopped on exit."""

    def __init__(self, base_url: str, *, instances: int = 3, partitions: int = 3, ttl: float = 2.0,
                 op_timeout: float = 2.0, workdir: Path | None = None) -> None:
        self.base_url = base_url
        self.schema = f"qp_faults_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.store = with_query(base_url, schema=self.schema)
        self.ttl = ttl
        self.partitions = [f"p{i}" for i in range(partitions)]
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="qp-faults-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_file = self.workdir / "config.yaml"
        self.config_file.write_text(config(self.partitions))
        self.leadership_log = self.workdir / "leadership.jsonl"
        db = urlsplit(base_url)
        self.instances: list[Instance] = []
        for i in range(instances):
            proxy = FaultProxy(db.hostname or "127.0.0.1", db.port or 5432)
            port = free_port()
            env = dict(os.environ)
            for key in ("QUOTAPLANE_TOKENS", "QUOTAPLANE_TOKENS_FILE", "PYTHONDONTWRITEBYTECODE",
                        "QUOTAPLANE_PARTITIONS"):
                env.pop(key, None)
            env.update({"QUOTAPLANE_LEASE_TTL": str(ttl), "QUOTAPLANE_ADVERTISE_URL": f"http://127.0.0.1:{port}",
                        "QUOTAPLANE_LEADERSHIP_LOG": str(self.leadership_log),
                        "PYTHONPATH": str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")})
            store = with_query(_replace_hostport(self.store, proxy.host, proxy.port),
                               op_timeout=str(op_timeout))
            mine = [p for j, p in enumerate(self.partitions) if j % instances == i]
            self.instances.append(Instance(f"i{i}", port, mine, proxy, store, self.workdir, env))

    # -- life ---------------------------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> None:
        """Start every instance (the first alone: it writes the configuration) and wait until every
        partition has a leader."""
        first, *rest = self.instances
        first.start(self.config_file)
        self.wait_answering(first, timeout)
        for inst in rest:
            inst.start(self.config_file)
        for inst in rest:
            self.wait_answering(inst, timeout)
        self.wait_led(timeout)

    def wait_answering(self, inst: Instance, timeout: float) -> None:
        """Wait until ``inst`` answers its healthcheck."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not inst.alive():
                raise RuntimeError(f"{inst.name} exited: {inst.logs[-1].read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(inst.url + "/healthz", timeout=2).status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"{inst.name} did not answer within {timeout} s")

    def leaders(self) -> dict[str, str | None]:
        """Who leads each partition, as each instance's healthcheck says it leads it."""
        led: dict[str, str | None] = dict.fromkeys(self.partitions)
        for inst in self.instances:
            if not inst.alive():
                continue
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                body = httpx.get(inst.url + "/ws/v1/scheduler/healthcheck", timeout=2).json()
                for check in body["HealthChecks"]:
                    if check["Name"] == "Leadership":
                        text = str(check["DiagnosisMessage"])
                        head = text.split(";", 1)[0]
                        if head.startswith("leads "):
                            names = head[len("leads "):].replace(" and the configuration", "")
                            for name in names.split(", "):
                                if name in led:
                                    led[name] = inst.name
        return led

    def wait_led(self, timeout: float) -> None:
        """Wait until every partition has a leader."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self.leaders().values()):
                return
            time.sleep(0.2)
        raise RuntimeError(f"not every partition has a leader: {self.leaders()}")

    def heal(self) -> None:
        """End every fault: proxies relay and accept, paused processes go on, dead ones start again."""
        for inst in self.instances:
            inst.proxy.thaw()
            inst.proxy.accept()
            inst.signal(signal.SIGCONT)
        for inst in self.instances:
            if not inst.alive():
                inst.start(self.config_file)

    def stop(self) -> None:
        """Stop every instance and proxy."""
        for inst in self.instances:
            inst.stop()
        for inst in self.instances:
            inst.proxy.stop()

    def drop(self) -> None:
        """Drop the suite's schema."""
        import psycopg

        with contextlib.suppress(psycopg.Error), psycopg.connect(self.base_url, autocommit=True,
                                                                 connect_timeout=10) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
