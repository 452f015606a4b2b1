"""Limits on what a client can make the service hold (issue 32 items 9 and 10), in process.

The connection limits (slowloris, timeouts, open connections) need a real server: tests/e2e/
test_limits_e2e.py. Here: body size, batch size, event streams (how many, and that a stream that is
not read holds a bounded amount and is dropped with the id to resume from), and the settings.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.server.app import create_app
from quotaplane.server.limits import Limits, StreamSlots, default_max_connections, parse_limit
from quotaplane.server.streams import Feed
from quotaplane.server.yunikorn_events import EventRecords
from tests.server.conftest import CONFIG, add_app, add_node, assert_error

BASE = "/ws/v1/partition/default"


@pytest.fixture
def small() -> Iterator[TestClient]:
    """An app with small limits."""
    s = qp.Scheduler.from_yaml(CONFIG)
    limits = Limits(max_body_bytes=4096, max_batch=3, max_streams=2, max_streams_per_client=1,
                    stream_buffer=50)
    with TestClient(create_app(s, limits=limits), raise_server_exceptions=False) as c:
        yield c
    s.close()


def _batch(n: int, prefix: str = "b") -> dict[str, Any]:
    return {"allocations": [{"applicationID": "a1", "allocationKey": f"{prefix}{i}", "resource": {"vcore": 1}}
                            for i in range(n)]}


# -- request size ----------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_413_before_it_is_read(small: TestClient) -> None:
    """A 100 MB YAML body added ~200 MB of RSS: a declared length over the limit is refused at once."""
    before = small.get("/ws/v1/config").text
    body = ("# padding\n" * 500) + CONFIG
    r = small.put("/ws/v1/config", content=body, headers={"Content-Type": "application/x-yaml"})
    body_json = assert_error(r, 413)
    assert "4096" in body_json["message"] and "max-body-bytes" in body_json["message"]
    assert small.get("/ws/v1/config").text == before
    # the hot path too
    add_node(small)
    add_app(small, "a1")
    r = small.post(f"{BASE}/allocations", content=json.dumps(
        {"applicationID": "a1", "allocationKey": "k", "resource": {"vcore": 1}, "pad": "x" * 5000}),
        headers={"Content-Type": "application/json"})
    assert_error(r, 413)
    assert small.get(f"{BASE}/allocation/k").status_code == 404


def test_a_chunked_body_over_the_limit_is_413(small: TestClient) -> None:
    """Without ``Content-Length`` (chunked), counted as it arrives."""
    def chunks() -> Iterator[bytes]:
        for _ in range(100):
            yield b"# " + b"x" * 98 + b"\n"

    r = small.put("/ws/v1/config", content=chunks(), headers={"Content-Type": "application/x-yaml"})
    assert_error(r, 413)
    r = small.put("/ws/v1/config", content=iter([CONFIG.encode()]),
                  headers={"Content-Type": "application/x-yaml"})
    assert r.status_code == 200, r.text


def test_a_batch_over_max_batch_is_413_and_changes_nothing(small: TestClient) -> None:
    """A batch of 100,000 allocations stalled other requests for 3.5 s: at most ``max-batch``."""
    add_node(small)
    add_app(small, "a1")
    r = small.post(f"{BASE}/allocations/batch", json=_batch(4))
    body = assert_error(r, 413)
    assert "at most 3" in body["message"] and "max-batch" in body["message"]
    assert small.get(f"{BASE}/allocation/b0").status_code == 404
    r = small.post(f"{BASE}/allocations/batch", json=_batch(3))
    assert r.status_code == 200 and r.json()["allocated"] == 3
    # the document says so
    schema = small.get("/openapi.json").json()["components"]["schemas"]["BatchBody"]
    assert schema["properties"]["allocations"]["maxItems"] == 3


def test_the_default_batch_limit_is_a_thousand() -> None:
    s = qp.Scheduler.from_yaml(CONFIG)
    with TestClient(create_app(s), raise_server_exceptions=False) as c:
        add_node(c)
        add_app(c, "a1")
        assert_error(c.post(f"{BASE}/allocations/batch", json=_batch(1001)), 413)
        assert c.post(f"{BASE}/allocations/batch", json=_batch(1000)).json()["allocated"] == 1000
    s.close()


# -- event streams ---------------------------------------------------------------------------------


def _open(c: TestClient, path: str, opened: threading.Event, result: list[int]) -> threading.Thread:
    def run() -> None:
        with c.stream("GET", path) as r:
            result.append(r.status_code)
            opened.set()
            for _ in r.iter_bytes():
                pass
        opened.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_streams_per_client_and_in_total_are_limited(small: TestClient) -> None:
    """YuniKorn's limiter: ``max-streams-per-client`` from one address, ``max-streams`` in all; both
    kinds of stream count; beyond either, 503 "Too many streaming connections"."""
    opened = threading.Event()
    result: list[int] = []
    # (a stream that ends by itself: the test client cannot hang up one that does not)
    t = _open(small, f"{BASE}/events/stream?timeout=2", opened, result)
    assert opened.wait(30) and result == [200]
    service = small.app.state.service  # type: ignore[attr-defined]
    assert service.stream_slots.open == 1
    for path in ("/ws/v1/events/stream", f"{BASE}/events/stream?timeout=5"):
        body = assert_error(small.get(path), 503)          # the same client (testclient) again
        assert body["message"] == "Too many streaming connections"
        assert "max-streams-per-client 1" in body["description"]
    t.join(30)
    deadline = time.monotonic() + 30
    while service.stream_slots.open and time.monotonic() < deadline:
        time.sleep(0.01)
    assert service.stream_slots.open == 0
    r = small.get(f"{BASE}/events/stream?timeout=0.1")
    assert r.status_code == 200


def test_stream_slots() -> None:
    slots = StreamSlots(total=3, per_client=2)
    assert slots.acquire("a") is None and slots.acquire("a") is None
    assert slots.acquire("a") == "client"
    assert slots.acquire("b") is None
    assert slots.acquire("c") == "total"
    slots.release("a")
    assert slots.acquire("c") is None and slots.open == 3
    slots.release("nobody")                     # not held: ignored
    assert slots.open == 3


def test_a_record_stream_that_is_not_read_holds_nothing_and_is_dropped_with_its_resume_id() -> None:
    """20 idle streams took RSS from 89 to 177 MB: each kept up to 10,000 records of its own. A stream
    is now a position in the shared ring; falling ``buffer`` behind drops it, naming where to resume."""
    async def run() -> None:
        records = EventRecords(capacity=1000, clock=lambda: 1.0)
        streams = [records.open_stream(0, buffer=100) for _ in range(20)]
        reader = records.open_stream(0, buffer=100)
        got = []
        for i in range(150):
            records.notice({"type": "node_added", "nodeID": f"n{i}", "capacity": {"vcore": 1}})
            if i % 10 == 9:
                got.extend(await reader.take(500, 1.0) or [])
        assert [r["objectID"] for r in got] == [f"n{i}" for i in range(150)]
        for s in streams:
            assert not hasattr(s, "__dict__") and s.next_id == 0      # a position, no records
            assert await s.take(500, 0.01) is None and s.dropped and s.next_id == 0
        assert records.stream_count == 1
        batch, _, _ = records.batch(streams[0].next_id, 10_000)
        assert batch is not None and len(batch) == 150                  # resumable from the batch
        # a stream whose position leaves the ring is dropped too (no gap is ever sent)
        late = records.open_stream(0, buffer=10**6)
        for i in range(1200):
            records.notice({"type": "node_removed", "nodeID": f"x{i}"})
        assert await late.take(500, 0.01) is None

    asyncio.run(run())


def test_count_replays_the_last_records() -> None:
    async def run() -> None:
        records = EventRecords(capacity=10, clock=lambda: 1.0)
        for i in range(15):
            records.notice({"type": "node_added", "nodeID": f"n{i}"})
        last = await records.open_stream(3).take(100, 0.01) or []
        assert [r["objectID"] for r in last] == ["n12", "n13", "n14"]
        assert len(await records.open_stream(100).take(100, 0.01) or []) == 10        # what is kept
        assert await records.open_stream(0).take(100, 0.01) == []
        replayed = records.open_stream(10, buffer=2)           # a replay larger than the buffer is fine
        assert len(await replayed.take(100, 0.01) or []) == 10

    asyncio.run(run())


def test_a_feed_is_bounded_and_says_it_overflowed() -> None:
    async def run() -> None:
        feed: Feed[int] = Feed(100)
        producer = threading.Thread(target=lambda: [feed.offer(i) for i in range(100_000)])
        producer.start()
        producer.join()
        assert len(feed) == 100 and feed.overflowed
        assert await feed.take(1.0) == list(range(100))
        ok: Feed[int] = Feed(10)
        for i in range(5):
            ok.offer(i)
        assert await ok.take(1.0) == [0, 1, 2, 3, 4] and not ok.overflowed
        assert await ok.take(0.01) == []
        ok.close()
        ok.offer(1)
        assert len(ok) == 0

    asyncio.run(run())


# -- settings --------------------------------------------------------------------------------------


def test_limits_from_the_environment_and_options() -> None:
    env = {"QUOTAPLANE_MAX_BODY_BYTES": "16MiB", "QUOTAPLANE_HEADER_TIMEOUT": "500ms",
           "QUOTAPLANE_MAX_BATCH": "200"}
    limits = Limits.from_settings(env, ["max-batch=300", "send-timeout=2m", "MAX_STREAMS=7"], open_files=4096)
    assert limits.max_body_bytes == 16 * 1024 * 1024 and limits.header_timeout == 0.5
    assert limits.max_batch == 300 and limits.send_timeout == 120.0 and limits.max_streams == 7
    assert limits.max_connections == 4096 - 256
    assert Limits.from_settings({}, open_files=1024).max_connections == 768
    assert Limits.from_settings({}, open_files=1 << 20).max_connections == 4096
    assert default_max_connections(100) == 16
    assert parse_limit("max_body_bytes", "64k") == 64000 and parse_limit("max_body_bytes", "2Gi") == 2 << 30
    assert Limits().describe()["max-body-bytes"] == 8 * 1024 * 1024


@pytest.mark.parametrize(("env", "options", "match"), [
    ({"QUOTAPLANE_MAX_BODY_BYTES": "lots"}, [], "QUOTAPLANE_MAX_BODY_BYTES: 'lots' is not a size"),
    ({}, ["max-batch=1.5"], "--limit max-batch: '1.5' is not a whole number"),
    ({}, ["max-batch=10Mi"], "not a whole number"),
    ({}, ["header-timeout=0"], "more than 0 seconds"),
    ({}, ["max-streams=0"], "more than 0"),
    ({}, ["max-batch=200000"], "at most 100,000"),
    ({}, ["nonsense=1"], "expected NAME=VALUE with NAME one of max-body-bytes"),
    ({}, ["max-batch"], "expected NAME=VALUE"),
])
def test_a_wrong_limit_is_named(env: dict[str, str], options: list[str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Limits.from_settings(env, options, open_files=4096)
