"""Store benchmark (issue 18): group commit and partitions in parallel, against real ``quotaplane serve``.

Every figure is 64 concurrent clients (raw keep-alive HTTP/1.1, one allocation per request, each client
waiting for its answer before the next) against a real server process:

* **one at a time** — ``serve --no-group-commit``: each change is committed in its own transaction
  before the next is decided (the behaviour before group commit), PostgreSQL and SQLite;
* **group commit** — ``serve`` as shipped: the changes decided in one turn of the event loop share a
  transaction; every answer still waits for its commit;
* SQLite again with ``?synchronous=full`` (every commit fsynced: acknowledged changes survive a
  power loss, not only a crash of the process), where a commit costs an fsync as on PostgreSQL;
* the baseline the issue quotes, measured in this run: allocate/release pairs through the partition
  with PostgreSQL, one caller, one commit per change (``benchmarks/partition.py``'s figure), in
  decisions/s;
* **two partitions**: 64 clients split over two partitions, served by one process, then by two
  processes (``--partitions default`` and ``--partitions second`` on one PostgreSQL store), with the
  CPU the servers used (``server_cores``) and decisions per server core: on a 2-core machine that
  also runs PostgreSQL and the load generator, two processes cannot have two whole cores, and the
  per-core figure shows whether a process loses anything by sharing the store with another; and
  two processes with every client sent to the first one (``one_entry``: it relays the second
  partition's writes to their leader, as behind a load balancer that does not route by partition);
  and the same two with 64 clients per partition (``two_partitions_64_clients_each``);
* the PostgreSQL figures again with PostgreSQL "on another host": a 1 ms round trip added by a
  delaying TCP proxy (``_latency_proxy.py``; ``QP_BENCH_PG_RTT_MS``, 0 to skip). A local PostgreSQL
  commits in ~0.4 ms here, so one-at-a-time is bound by CPU as much as by the store; production
  stores are a network hop away, where each commit waits a round trip.

Ratios compare figures of this run. PostgreSQL figures need ``QUOTAPLANE_PG_URL`` (a database this
benchmark may create schemas in); without it only SQLite is measured. The load comes from ``wrk``
(C, a fraction of a core; Debian package ``wrk``) when it is installed — on a 2-core machine the load
generator shares the cores with the servers, so a cheap one matters for the two-process figure — and
from the raw-HTTP asyncio client of ``benchmarks/service.py`` otherwise; ``load_generator`` says which.
Run: ``.venv/bin/python benchmarks/store.py`` (about two minutes).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import write_results
from service import free_port, percentile

ROOT = Path(__file__).resolve().parents[1]
PG_URL = os.environ.get("QUOTAPLANE_PG_URL")

CONFIG = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: default
  - name: second
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: default
"""

CLIENTS = 64
SECONDS = float(os.environ.get("QP_BENCH_STORE_SECONDS", "6"))


def _start(workdir: Path, store: str, *extra: str, env_extra: dict[str, str] | None = None
           ) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), QUOTAPLANE_LEASE_TTL="3", **(env_extra or {}))
    env.pop("QUOTAPLANE_TOKENS", None)
    proc = subprocess.Popen([sys.executable, "-m", "quotaplane.cli", "serve", "--config", "queues.yaml",
                             "--store", store, "--port", str(port), *extra],
                            cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                conn.close()
                return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"server did not start: {proc.stderr.read().decode() if proc.stderr else ''}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()


def _call(port: int, method: str, path: str, body: Any) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    conn.request(method, path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    out = r.status, r.read()
    conn.close()
    return out


def _await_leader(port: int, partition: str) -> None:
    """Wait until the server on ``port`` leads ``partition`` (its ``quotaplane_leader`` gauge is 1):
    a second process takes its partition back from the first at start-up, and the load should
    measure the steady state, not that hand-over."""
    want = f'quotaplane_leader{{partition="{partition}"}} 1.0'
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        if want in text.splitlines():
            return
        time.sleep(0.1)
    raise RuntimeError(f"the server on port {port} did not take partition {partition!r}")


def _setup(port: int, partition: str, apps: range) -> None:
    """A big node and one application per client in ``partition`` (retried while leadership settles)."""
    deadline = time.monotonic() + 30
    while True:
        status, text = _call(port, "PUT", f"/ws/v1/partition/{partition}/node/n1",
                             {"capacity": {"vcore": 10**15, "memory": 10**18}})
        if status in (200, 201):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"node: {status} {text!r}")
        time.sleep(0.2)
    for i in apps:
        status, text = _call(port, "POST", f"/ws/v1/partition/{partition}/applications",
                             {"applicationID": f"app-{i}", "user": f"user{i % 8}", "groups": ["g"],
                              "queue": "root.default"})
        assert status == 201, text


async def _client(port: int, partition: str, idx: int, end: float, latencies: list[float]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    path = f"/ws/v1/partition/{partition}/allocations".encode()
    j = 0
    while time.perf_counter() < end:
        body = (b'{"applicationID":"app-%d","allocationKey":"c-%d-%d","resource":{"vcore":1}}'
                % (idx, idx, j))
        req = (b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        t0 = time.perf_counter()
        writer.write(req)
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
        payload = await reader.readexactly(length)
        latencies.append(time.perf_counter() - t0)
        if not head.startswith(b"HTTP/1.1 201"):
            raise RuntimeError(head.decode() + payload.decode())
        j += 1
    writer.close()


WRK = shutil.which("wrk")

#: wrk script: each connection posts allocations with keys of its own (a counter per wrk process, one
#: thread each), spread over the applications of its target (``QP_APPS`` = "first,count"). The request
#: text is put together from prefixes built once: the load generator shares this machine's cores with
#: the servers, so each microsecond it spends per request is taken from them.
_WRK_LUA = """
local counter = 0
local count = 1
local bodies = {}
local head = ""
function init(args)
  local first = tonumber(args[1])
  count = tonumber(args[2])
  for i = 0, count - 1 do
    bodies[i] = '{"applicationID":"app-' .. (first + i) .. '","allocationKey":"w-'
  end
  head = "POST " .. wrk.path .. " HTTP/1.1\\r\\nHost: " .. wrk.host .. ":" .. wrk.port
         .. "\\r\\nContent-Type: application/json\\r\\nContent-Length: "
end
function request()
  counter = counter + 1
  local body = bodies[counter % count] .. counter .. '","resource":{"vcore":1}}'
  return head .. #body .. "\\r\\n\\r\\n" .. body
end
"""


def _wrk(targets: list[tuple[int, str, range]]) -> tuple[float, float]:
    assert WRK is not None
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(_WRK_LUA)
        script = f.name
    try:
        seconds = f"-d{max(1, round(SECONDS))}s"
        procs = [subprocess.Popen([WRK, "-t1", f"-c{len(idxs)}", seconds, "--latency", "-s", script,
                                   f"http://127.0.0.1:{port}/ws/v1/partition/{part}/allocations", "--",
                                   str(idxs.start), str(len(idxs))], stdout=subprocess.PIPE, text=True)
                 for port, part, idxs in targets]
        outs = [p.communicate()[0] for p in procs]
    finally:
        os.unlink(script)
    rate, p99 = 0.0, 0.0
    for out in outs:
        if "Non-2xx" in out:
            raise RuntimeError(f"wrk saw errors:\n{out}")
        rate += float(out.split("Requests/sec:", 1)[1].split()[0])
        line = next(x for x in out.splitlines() if x.strip().startswith("99%"))
        value = line.split()[1]
        factor = {"us": 0.001, "ms": 1.0, "s": 1000.0}
        unit = next(u for u in ("us", "ms", "s") if value.endswith(u))
        p99 = max(p99, float(value[: -len(unit)]) * factor[unit])
    return rate, p99


def _load(targets: list[tuple[int, str, range]]) -> tuple[float, float]:
    """64 clients over ``targets`` (port, partition, client indexes) for SECONDS: (decisions/s, p99 ms)."""
    if WRK is not None:
        return _wrk(targets)
    latencies: list[float] = []

    async def run() -> float:
        start = time.perf_counter()
        end = start + SECONDS
        await asyncio.gather(*(_client(port, part, i, end, latencies)
                               for port, part, idxs in targets for i in idxs))
        return time.perf_counter() - start

    elapsed = asyncio.run(run())
    return len(latencies) / elapsed, percentile(latencies, 0.99) * 1000


def _one_server(store: str, group_commit: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "queues.yaml").write_text(CONFIG)
        extra = () if group_commit else ("--no-group-commit",)
        proc, port = _start(Path(tmp), store, *extra)
        try:
            _setup(port, "default", range(CLIENTS))
            return _load([(port, "default", range(CLIENTS))])
        finally:
            _stop(proc)


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes ``pids`` used so far (Linux ``/proc``; 0 elsewhere)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _two_partitions(store: str, processes: int, one_entry: bool = False, clients: int = CLIENTS
                    ) -> tuple[float, float, float]:
    """``clients`` (64) over two partitions served by ``processes`` servers: (decisions/s, p99 ms, the
    cores the servers used — the rest of the machine went to PostgreSQL, the load generator and the
    kernel). ``one_entry``: every client talks to the first process, which relays the second
    partition's writes to its leader (a load balancer that does not route by partition)."""
    half = clients // 2
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "queues.yaml").write_text(CONFIG)
        if processes == 1:
            proc, port = _start(Path(tmp), store)
            procs, ports = [proc], [port, port]
        else:
            first, port1 = _start(Path(tmp), store, "--partitions", "default")
            second, port2 = _start(Path(tmp), store, "--partitions", "second")
            procs, ports = [first, second], [port1, port2]
        try:
            _await_leader(ports[0], "default")
            _await_leader(ports[1], "second")
            _setup(ports[0], "default", range(half))
            _setup(ports[1], "second", range(half, clients))
            pids = [proc.pid for proc in procs]
            cpu0, t0 = _cpu_seconds(pids), time.perf_counter()
            entry = ports[0] if one_entry else ports[1]
            targets = [(ports[0], "default", range(half)), (entry, "second", range(half, clients))]
            rate, p99 = _load(targets)
            cores = (_cpu_seconds(pids) - cpu0) / (time.perf_counter() - t0)
            return rate, p99, cores
        finally:
            for proc in procs:
                _stop(proc)


def _scaling(clients: int) -> dict[str, Any]:
    """Two partitions, ``clients`` in all, served by one process and then by two: the figures."""
    out: dict[str, Any] = {}
    for processes in (1, 2):
        url, schema = _pg_store()
        try:
            rate, p99, cores = _two_partitions(url, processes, clients=clients)
        finally:
            _drop(schema)
        out[f"{processes}_process_per_s"], out[f"{processes}_process_p99_ms"] = round(rate), round(p99, 1)
        out[f"{processes}_process_server_cores"] = round(cores, 2)
        if cores > 0:
            out[f"{processes}_process_per_server_core_s"] = round(rate / cores)
    out["ratio_2_vs_1_process"] = round(out["2_process_per_s"] / out["1_process_per_s"], 2)
    return out


def _pg_store() -> tuple[str, str]:
    assert PG_URL is not None
    schema = f"qp_store_{uuid.uuid4().hex[:8]}"
    return PG_URL + ("&" if "?" in PG_URL else "?") + f"schema={schema}", schema


def _drop(schema: str) -> None:
    import psycopg

    assert PG_URL is not None
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _partition_one_at_a_time(store: str) -> float:
    """The issue's baseline: allocate/release pairs through the partition, one caller, decisions/s."""
    sys.path.insert(0, str(ROOT / "src"))
    import quotaplane as qp

    s = qp.Scheduler.from_yaml(CONFIG, store=store)
    p = s.partition("default")
    p.add_node("n1", {"vcore": 10**9})
    p.add_application("app", qp.UserGroup("u", []), queue="root.default")
    n = 600
    start = time.perf_counter()
    for i in range(n):
        p.allocate("app", f"k{i}", {"vcore": 1})
        p.release(f"k{i}")
    rate = 2 * n / (time.perf_counter() - start)
    s.close()
    return rate


def _pg_figures(route: Callable[[str], str]) -> dict[str, Any]:
    """The PostgreSQL figures — the issue's baseline (one caller through the partition), one at a
    time and group commit over HTTP, their ratios — each on a fresh schema, reached through
    ``route(url)`` (the URL itself, or through the latency proxy)."""
    figures: dict[str, Any] = {}
    url, schema = _pg_store()
    try:
        figures["partition_one_caller_per_s"] = round(_partition_one_at_a_time(route(url)))
    finally:
        _drop(schema)
    for key, gc in (("one_at_a_time", False), ("group_commit", True)):
        url, schema = _pg_store()
        try:
            rate, p99 = _one_server(route(url), group_commit=gc)
        finally:
            _drop(schema)
        figures[f"{key}_per_s"], figures[f"{key}_p99_ms"] = round(rate), round(p99, 1)
    figures["ratio_group_vs_one_at_a_time"] = round(figures["group_commit_per_s"]
                                                    / figures["one_at_a_time_per_s"], 2)
    figures["ratio_group_vs_partition_one_caller"] = round(figures["group_commit_per_s"]
                                                           / figures["partition_one_caller_per_s"], 2)
    return figures


def _remote_pg(rtt_ms: float) -> dict[str, Any]:
    """The PostgreSQL figures through a proxy adding ``rtt_ms`` per round trip."""
    from urllib.parse import urlsplit, urlunsplit

    assert PG_URL is not None
    parts = urlsplit(PG_URL)
    port = free_port()
    proxy = subprocess.Popen([sys.executable, str(Path(__file__).with_name("_latency_proxy.py")), str(port),
                              parts.hostname or "127.0.0.1", str(parts.port or 5432), str(rtt_ms / 2)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert proxy.stdout is not None and proxy.stdout.readline().strip() == "ready"
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        remote = urlunsplit((parts.scheme, f"{auth}127.0.0.1:{port}", parts.path, parts.query, ""))
        return _pg_figures(lambda url: url.replace(PG_URL or "", remote, 1))
    finally:
        proxy.kill()
        proxy.wait()


def _criteria(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's figures against this run: each ratio, the bar, and whether it is met."""
    bars = [("postgresql", "ratio_group_vs_one_at_a_time", 10.0),
            ("postgresql_rtt_1ms", "ratio_group_vs_one_at_a_time", 10.0),
            ("sqlite", "ratio_group_vs_one_at_a_time", 2.0),
            ("sqlite_synchronous_full", "ratio_group_vs_one_at_a_time", 2.0),
            ("two_partitions", "ratio_2_vs_1_process", 1.6)]
    out: dict[str, Any] = {}
    for section, key, bar in bars:
        value = results.get(section, {}).get(key)
        if value is not None:
            out[f"{section}.{key}"] = {"measured": value, "at_least": bar, "met": value >= bar}
    return out


def main() -> None:
    """Run every measurement and write benchmarks/results/store.json."""
    results: dict[str, Any] = {"clients": CLIENTS, "seconds_per_run": SECONDS}
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        one, one_p99 = _one_server(f"sqlite:///{tmp}/one.db", group_commit=False)
        group, group_p99 = _one_server(f"sqlite:///{tmp}/group.db", group_commit=True)
    results["sqlite"] = {"one_at_a_time_per_s": round(one), "one_at_a_time_p99_ms": round(one_p99, 1),
                         "group_commit_per_s": round(group), "group_commit_p99_ms": round(group_p99, 1),
                         "ratio_group_vs_one_at_a_time": round(group / one, 2)}
    # synchronous=full: every commit is fsynced, so acknowledged changes also survive a power loss
    with tempfile.TemporaryDirectory() as tmp:
        one, one_p99 = _one_server(f"sqlite:///{tmp}/one.db?synchronous=full", group_commit=False)
        group, group_p99 = _one_server(f"sqlite:///{tmp}/group.db?synchronous=full", group_commit=True)
    results["sqlite_synchronous_full"] = {
        "one_at_a_time_per_s": round(one), "one_at_a_time_p99_ms": round(one_p99, 1),
        "group_commit_per_s": round(group), "group_commit_p99_ms": round(group_p99, 1),
        "ratio_group_vs_one_at_a_time": round(group / one, 2)}
    if PG_URL:
        results["postgresql"] = _pg_figures(lambda url: url)
        two = _scaling(CLIENTS)
        url, schema = _pg_store()
        try:
            rate, p99, cores = _two_partitions(url, 2, one_entry=True)
        finally:
            _drop(schema)
        two["2_process_one_entry_per_s"], two["2_process_one_entry_p99_ms"] = round(rate), round(p99, 1)
        two["2_process_one_entry_server_cores"] = round(cores, 2)
        results["two_partitions"] = two
        # the same with 64 clients per partition: enough concurrency for each process to fill a core
        results["two_partitions_64_clients_each"] = _scaling(2 * CLIENTS)
        rtt = float(os.environ.get("QP_BENCH_PG_RTT_MS", "1"))
        if rtt > 0:
            results[f"postgresql_rtt_{rtt:g}ms"] = _remote_pg(rtt)
    else:
        notes.append("PostgreSQL not measured: QUOTAPLANE_PG_URL is not set")
    results["issue_criteria"] = _criteria(results)
    results["cpus"] = os.cpu_count()
    results["load_generator"] = "wrk" if WRK is not None else "asyncio raw HTTP (benchmarks/service.py)"
    if notes:
        results["notes"] = notes
    write_results("store", results)


if __name__ == "__main__":
    main()
