"""The event stream at issue 38's size: 1,000,000 retained events and 1,000 concurrent subscribers.

1. **Retained events.** A SQLite store is filled through the engine with ``--events`` journalled
   events (rounds of 1,000 allocations in one batch, then their release in another), then closed.
2. **The service** (``quotaplane serve`` on that store, ``--limit max-streams`` and
   ``max-streams-per-client`` raised to the subscriber count) restores it.
3. **Subscribers.** ``--subscribers`` server-sent event streams (``GET …/events/stream``) are opened
   from this process, each resuming by id (``Last-Event-ID``, the last retained sequence number, so
   each starts at the live end); one more resumes ``--resume`` events back and must get exactly them.
4. **Delivery.** A writer then makes ``--writes`` allocations over HTTP at ``--rate`` per second; every
   subscriber must receive every one, in order, once. The lag of an event is the time from the writer
   sending the request to a subscriber reading the event; its p50/p99 over every (subscriber, event).

Reported: the retained events and the store size, the server's RSS after the restore and with every
subscriber attached (bytes per subscriber), the delivery lag, and the resumed read. The server's memory
does not hold the retained events (they are read back from the journal on resume), so it does not grow
with them.

Run: ``nice -n 10 .venv/bin/python benchmarks/events_scale.py`` (full size, several minutes);
``--events 20000 --subscribers 50`` for a quick look. Results: ``benchmarks/results/events_scale.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import write_results
from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.scheduler import Scheduler
from service import free_port, proc_cpu

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: default
"""
STREAM = "/ws/v1/partition/default/events/stream"
#: events per fill round: 1,000 allocations in one batch, then their 1,000 releases in another
ROUND = 2000


def fill(url: str, events: int) -> int:
    """Journal ``events`` events (allocations and releases in batches); the last sequence number."""
    s = Scheduler.from_yaml(CONFIG, store=url)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 10**12}))
    p.add_application("filler", UserGroup("u"), queue="root.default")
    p.add_application("writer", UserGroup("u"), queue="root.default")
    r = 0
    while p.last_seq < events:
        keys = [f"f{r}-{i}" for i in range(1000)]
        p.allocate_batch([{"applicationID": "filler", "allocationKey": k, "resource": {"vcore": 1}}
                          for k in keys])
        p.release_batch(keys)
        r += 1
    last = int(p.last_seq)
    s.close()
    return last


def rss(pid: int) -> int:
    """Resident bytes of process ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def start_server(workdir: Path, store: str, port: int, streams: int) -> subprocess.Popen[bytes]:
    """``quotaplane serve`` on ``store``; waits for the healthcheck."""
    (workdir / "queues.yaml").write_text(CONFIG)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src")
    env.pop("QUOTAPLANE_TOKENS", None)
    proc = subprocess.Popen([sys.executable, "-m", "quotaplane.cli", "serve", "--config", "queues.yaml",
                             "--store", store, "--port", str(port),
                             "--limit", f"max-streams={streams}",
                             "--limit", f"max-streams-per-client={streams}"],
                            cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/ws/v1/scheduler/healthcheck")
            if conn.getresponse().status == 200:
                conn.close()
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start: " + (proc.stderr.read().decode() if proc.stderr else ""))


class Subscriber:
    """One server-sent event stream: the allocation keys it read, with the time each arrived."""

    def __init__(self) -> None:
        self.got: list[tuple[str, float]] = []
        self.ready = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def run(self, port: int, last_id: int, want: int, types: str = "allocated") -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**20)
        writer.write(f"GET {STREAM}?types={types} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     f"Last-Event-ID: {last_id}\r\nAccept: text/event-stream\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head.decode(errors="replace"))
        self.ready.set()
        buffer = b""
        while len(self.got) < want:
            size_line = await reader.readline()           # chunked transfer encoding
            size = int(size_line.strip() or b"0", 16)
            chunk = await reader.readexactly(size + 2)
            buffer += chunk[:-2]
            now = time.perf_counter()
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                for line in frame.split(b"\n"):
                    if line.startswith(b"data: ") and len(self.got) < want:
                        # a chunk may carry events past the ones asked for (the stream goes on live)
                        self.got.append((json.loads(line[6:])["allocationKey"], now))
        writer.close()


async def deliver(port: int, last: int, subscribers: int, writes: int, rate: float,
                  resume: int, pid: int) -> dict[str, Any]:
    """Attach the subscribers, write, collect the lags."""
    subs = [Subscriber() for _ in range(subscribers)]
    for sub in subs:
        sub.task = asyncio.create_task(sub.run(port, last, writes))
    await asyncio.gather(*(sub.ready.wait() for sub in subs))
    await asyncio.sleep(1.0)
    attached_rss = rss(pid)
    # the resumed reader: the last ``resume`` retained events (allocations and releases alike)
    resumed = Subscriber()
    t0 = time.perf_counter()
    resumed_task = asyncio.create_task(resumed.run(port, last - resume, resume // 2))
    sent: dict[str, float] = {}
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    cpu0 = proc_cpu(pid)
    for i in range(writes):
        key = f"live-{i}"
        body = json.dumps({"applicationID": "writer", "allocationKey": key,
                           "resource": {"vcore": 1}}).encode()
        sent[key] = time.perf_counter()
        writer.write(b"POST /ws/v1/partition/default/allocations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode()
                     + b"\r\n\r\n" + body)
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        await asyncio.sleep(max(0.0, sent[key] + 1 / rate - time.perf_counter()))
    writer.close()
    await asyncio.wait_for(asyncio.gather(*(s.task for s in subs if s.task)), timeout=600)
    await asyncio.wait_for(resumed_task, timeout=600)
    resumed_s = time.perf_counter() - t0
    cpu = proc_cpu(pid) - cpu0
    lags: list[float] = []
    for sub in subs:
        keys = [k for k, _ in sub.got]
        assert keys == [f"live-{i}" for i in range(writes)], "a subscriber missed or reordered events"
        lags.extend(t - sent[k] for k, t in sub.got)
    lags.sort()
    return {"subscribers": subscribers, "writes": writes, "write_rate_per_s": rate,
            "deliveries": len(lags),
            "lag_p50_ms": round(1000 * lags[len(lags) // 2], 1),
            "lag_p99_ms": round(1000 * lags[min(len(lags) - 1, int(len(lags) * 0.99))], 1),
            "lag_max_ms": round(1000 * lags[-1], 1),
            "server_cpu_us_per_delivery": round(1e6 * cpu / len(lags), 1),
            "rss_with_subscribers_mib": round(attached_rss / 2**20, 1),
            "resumed_events": resume, "resumed_allocations_read": len(resumed.got),
            "resumed_read_s": round(resumed_s, 2)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Fill, serve, subscribe, deliver; write ``benchmarks/results/events_scale.json``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--subscribers", type=int, default=1000)
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--rate", type=float, default=20.0, help="writes per second")
    ap.add_argument("--resume", type=int, default=10_000, help="events a resuming reader asks back")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/events.db"
        t = time.perf_counter()
        last = fill(store, args.events)
        fill_s = time.perf_counter() - t
        size = os.path.getsize(f"{tmp}/events.db")
        port = free_port()
        t = time.perf_counter()
        proc = start_server(Path(tmp), store, port, args.subscribers + 10)
        restore_s = time.perf_counter() - t
        try:
            restored_rss = rss(proc.pid)
            # whole fill rounds (1,000 allocations, then their 1,000 releases): half are allocations
            resume = max(ROUND, min(args.resume, last) // ROUND * ROUND)
            out = asyncio.run(deliver(port, last, args.subscribers, args.writes, args.rate, resume, proc.pid))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    results = {"retained_events": last, "fill_s": round(fill_s, 1), "store_mib": round(size / 2**20, 1),
               "start_s": round(restore_s, 1), "rss_restored_mib": round(restored_rss / 2**20, 1), **out}
    results["rss_per_subscriber_kib"] = round(
        (out["rss_with_subscribers_mib"] - results["rss_restored_mib"]) * 1024 / args.subscribers, 1)
    write_results("events_scale", results)
    return results


if __name__ == "__main__":
    main()
