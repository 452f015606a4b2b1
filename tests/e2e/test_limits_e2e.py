"""Slow and idle clients against the real ``quotaplane serve`` (issue 32 items 8 and 9).

No timing is asserted: each test waits for what must happen (a refusal, a closed stream) with a long
deadline, and the slowloris defence does not rely on timeouts at all (they are set to 10 minutes
there): it is the connection limit, which closes the connection that has waited longest, that keeps
other requests served — so the tests pass on a loaded machine, only more slowly.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import re
import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import ServerProcess

ATTACKERS = 1100
OPEN_FILES = 1024


def _open_files_1024() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


def _server(tmp_path: Path, *limits: str, preexec: Any = None) -> ServerProcess:
    args: list[str] = []
    for item in limits:
        args += ["--limit", item]
    return ServerProcess(config=None, store=f"sqlite:///{tmp_path}/state.db", cwd=tmp_path,
                         extra_args=args, preexec_fn=preexec).start(timeout=120)


def _metric(server: ServerProcess, name: str) -> float:
    text = httpx.get(server.url + "/metrics", timeout=60).text
    m = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.MULTILINE)
    assert m is not None, name
    return float(m.group(1))


def _wait(condition: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.1)


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes."""
    sock.settimeout(120)
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except ConnectionResetError:
        pass
    return out


def _raw(server: ServerProcess, data: bytes, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(120)
    sock.connect(("127.0.0.1", server.port))
    if data:
        sock.sendall(data)
    return sock


def _setup(server: ServerProcess) -> None:
    with server.client() as c:
        c.timeout = 60
        r = c.put("/ws/v1/partition/default/node/n1", json={"capacity": {"vcore": 10**9}})
        assert r.status_code == 201, r.text
        r = c.post("/ws/v1/partition/default/applications",
                   json={"applicationID": "app", "queue": "root.default", "user": "sue"})
        assert r.status_code == 201, r.text


def _allocate(server: ServerProcess, n: int, prefix: str) -> None:
    with server.client() as c:
        c.timeout = 120
        for start in range(0, n, 1000):
            batch = [{"applicationID": "app", "allocationKey": f"{prefix}{i}", "resource": {"vcore": 1}}
                     for i in range(start, min(n, start + 1000))]
            r = c.post("/ws/v1/partition/default/allocations/batch", json={"allocations": batch})
            assert r.status_code == 200, r.text


@pytest.fixture
def many_files() -> Iterator[None]:
    """This process holds 1,100 sockets: raise its own soft open-files limit (the server's is 1,024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = ATTACKERS + 400
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"the open-files hard limit ({hard}) is below {want}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_slowloris_1100_connections_under_1024_open_files_do_not_fail_other_requests(
        tmp_path: Path, many_files: None) -> None:
    """The issue's reproduction: 1,100 connections that never finish their headers, with the server's
    open-files limit at 1,024, made 400 of 400 other requests fail (uvicorn ran out of descriptors:
    libuv then accepts and drops waiting connections). Timeouts are 10 minutes here, so only the
    connection limit (close the one that has waited longest) can keep the others served."""
    server = _server(tmp_path, "header-timeout=600", "body-timeout=600", preexec=_open_files_1024)
    attackers: list[socket.socket] = []
    try:
        for _ in range(ATTACKERS):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(120)
            sock.connect(("127.0.0.1", server.port))
            with contextlib.suppress(OSError):     # already closed to make room: fine
                sock.sendall(b"GET /ws/v1/partitions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            attackers.append(sock)

        def one(_: int) -> int:
            with httpx.Client(base_url=server.url, timeout=120) as c:
                return c.get("/ws/v1/partitions").status_code

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(one, range(400)))
        assert statuses == [200] * 400
        assert server.proc is not None and server.proc.poll() is None
        assert _metric(server, 'quotaplane_connections_closed_total{reason="evicted"}') >= 1
        assert _metric(server, "quotaplane_connections") <= OPEN_FILES - 256
    finally:
        for sock in attackers:
            sock.close()
        server.stop()


def test_header_and_body_timeouts_and_header_size(tmp_path: Path) -> None:
    """A request whose headers (or body) do not arrive in time gets a 408, one with headers larger
    than max-header-bytes a 431, each with the error body; other clients are served meanwhile."""
    server = _server(tmp_path, "header-timeout=1", "body-timeout=1", "max-header-bytes=4096")
    try:
        slow_headers = _raw(server, b"GET /ws/v1/partitions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        slow_body = _raw(server, b"POST /ws/v1/partition/default/applications HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                 b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"app")
        big = _raw(server, b"GET /ws/v1/partitions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"x" * 8000
                   + b"\r\n\r\n")
        with server.client() as c:
            assert c.get("/ws/v1/partitions").status_code == 200
        for sock, status, words in ((slow_headers, 408, "header-timeout"), (slow_body, 408, "body-timeout"),
                                    (big, 431, "max-header-bytes")):
            head, _, body = _answer(sock).partition(b"\r\n\r\n")
            assert head.startswith(f"HTTP/1.1 {status} ".encode()), head
            error = json.loads(body)
            assert error["status_code"] == status and words in error["message"]
            sock.close()
        assert _metric(server, 'quotaplane_connections_closed_total{reason="timeout"}') >= 2
    finally:
        server.stop()


def _stream_open(server: ServerProcess, path: str = "/ws/v1/events/stream", rcvbuf: int | None = None
                 ) -> socket.socket:
    sock = _raw(server, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode(), rcvbuf=rcvbuf)
    first = b""
    while b"\r\n\r\n" not in first:
        first += sock.recv(1)
    assert first.startswith(b"HTTP/1.1 200"), first
    return sock


def test_open_connections_are_limited(tmp_path: Path) -> None:
    """At max-connections, an idle connection makes room for a new one; when every connection is
    busy (here: event streams), a new one gets a 503 with the error body."""
    server = _server(tmp_path, "max-connections=20", "max-streams=100", "max-streams-per-client=100")
    idle: list[socket.socket] = []
    streams: list[socket.socket] = []
    try:
        idle = [_raw(server, b"") for _ in range(25)]
        with server.client() as c:
            assert c.get("/ws/v1/partitions").status_code == 200
        streams = [_stream_open(server) for _ in range(20)]
        refused = _raw(server, b"GET /ws/v1/partitions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head, _, body = _answer(refused).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503"), head
        assert "max-connections" in json.loads(body)["message"]
        refused.close()
        streams.pop().close()

        def served() -> bool:
            try:
                return httpx.get(server.url + "/ws/v1/partitions", timeout=60).status_code == 200
            except httpx.HTTPError:
                return False

        _wait(served, "a request served once a stream closed")
    finally:
        for sock in idle + streams:
            sock.close()
        server.stop()


def test_idle_streams_hold_bounded_memory_and_are_closed(tmp_path: Path) -> None:
    """20 event streams that are not read took RSS from 89 to 177 MB in 30 s and it kept rising. Now
    a stream that is not read holds its position and what waits in its socket, and the send timeout
    closes it; a reader that keeps up meanwhile gets every record."""
    server = _server(tmp_path, "send-timeout=2", "max-streams=60", "max-streams-per-client=60")
    idle: list[socket.socket] = []
    try:
        _setup(server)
        got: list[dict[str, Any]] = []
        reading = threading.Event()

        def read() -> None:
            with httpx.stream("GET", server.url + "/ws/v1/events/stream", timeout=120) as r:
                reading.set()
                for line in r.iter_lines():
                    if line:
                        got.append(json.loads(line))
                        if got[-1].get("referenceID") == "k2999":
                            return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert reading.wait(120)
        idle = [_stream_open(server, rcvbuf=4096) for _ in range(20)]
        idle += [_stream_open(server, "/ws/v1/partition/default/events/stream", rcvbuf=4096)
                 for _ in range(20)]
        assert _metric(server, "quotaplane_event_streams") == 41
        rss_before = _rss(server)
        _allocate(server, 3000, "k")
        reader.join(120)
        assert not reader.is_alive()
        _wait(lambda: _metric(server, "quotaplane_event_streams") == 0, "the idle streams to be closed")
        keys = [r["referenceID"] for r in got if r.get("eventChangeDetail") == 200]
        assert keys == [f"k{i}" for i in range(3000)]
        grown = _rss(server) - rss_before
        assert grown < 64 * 2**20, f"RSS grew by {grown / 2**20:.0f} MB"
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def _rss(server: ServerProcess) -> int:
    assert server.proc is not None
    text = Path(f"/proc/{server.proc.pid}/status").read_text()
    m = re.search(r"^VmRSS:\s+(\d+) kB", text, re.MULTILINE)
    assert m is not None
    return int(m.group(1)) * 1024


def _chunks(sock: socket.socket) -> bytes:
    """A chunked body (its headers read already) read to its end (the server ends the stream)."""
    rest = _answer(sock)
    out = b""
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2:]
    return out


def test_a_slow_stream_is_dropped_with_the_id_to_resume_from(tmp_path: Path) -> None:
    """A reader that falls stream-buffer events behind is not buffered for ever: it gets what was
    held, then a last line naming where to resume — and resuming there loses nothing."""
    server = _server(tmp_path, "stream-buffer=50")
    try:
        _setup(server)
        sse = _stream_open(server, "/ws/v1/partition/default/events/stream", rcvbuf=4096)
        yk = _stream_open(server, "/ws/v1/events/stream", rcvbuf=4096)
        _allocate(server, 2000, "s")
        # partition stream: frames, then `event: dropped` with `after`
        frames = [f for f in _chunks(sse).decode().split("\n\n") if f.startswith(("id:", "event: dropped"))]
        assert frames[-1].startswith("event: dropped")
        after = json.loads(frames[-1].split("data: ", 1)[1])["after"]
        seen = [json.loads(f.split("data: ", 1)[1]) for f in frames[:-1]]
        assert seen and seen[-1]["seq"] == after
        with httpx.stream("GET", server.url + "/ws/v1/partition/default/events/stream",
                          params={"after": after, "timeout": 5}, timeout=120) as r:
            rest = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
        allocated = [e["allocationKey"] for e in seen + rest if e["type"] == "allocated"]
        assert allocated == [f"s{i}" for i in range(2000)]
        # YuniKorn's stream: records, then "Event stream was closed by the producer" with resumeID
        lines = [json.loads(x) for x in _chunks(yk).decode().splitlines() if x]
        last = lines[-1]
        assert last["status_code"] == 200 and last["message"] == "Event stream was closed by the producer"
        batch = httpx.get(server.url + "/ws/v1/events/batch", params={"start": last["resumeID"]},
                          timeout=60).json()["EventRecords"]
        records = lines[1:-1] + batch
        keys = [r["referenceID"] for r in records if r.get("eventChangeDetail") == 200]
        assert keys == [f"s{i}" for i in range(2000)]
    finally:
        server.stop()
