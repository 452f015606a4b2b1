"""The Python client (issue 17 #3) against a real service (uvicorn on loopback): the library's names
and types, typed errors from the error body, 503 retried with the leader followed, and the event
stream resuming after a dropped connection without losing or repeating a notice."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import quotaplane as qp
from quotaplane.client import (
    AccessDeniedError,
    AsyncClient,
    BadRequestError,
    Client,
    UnavailableError,
    UnreachableError,
)
from quotaplane.server.app import create_app
from quotaplane.server.auth import Tokens
from tests.live_server import LiveServer

CONFIG = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      resources: {max: {vcore: 4}}
"""
SUE = qp.UserGroup("sue", ("dev",))


class _Server(LiveServer):
    """The service over ``scheduler`` (``create_app`` keywords in ``kw``) on a real port."""

    def __init__(self, scheduler: qp.Scheduler, port: int | None = None, **kw: Any) -> None:
        super().__init__(create_app(scheduler, **kw), port)


@pytest.fixture
def service() -> Iterator[tuple[_Server, qp.Scheduler]]:
    s = qp.Scheduler.from_yaml(CONFIG)
    srv = _Server(s)
    yield srv, s
    srv.stop()
    s.close()


def test_the_library_names_and_types(service: tuple[_Server, qp.Scheduler]) -> None:
    srv, s = service
    with Client(srv.url) as c:
        c.add_node("n1", {"vcore": 8000, "pods": 10})
        assert c.add_application("app", SUE, queue="root.a") == "root.a"
        d = c.allocate("app", "k1", {"vcore": 3000, "pods": 1}, node="n1")
        assert isinstance(d, qp.Decision) and d.allocated and d.queue == "root.a"
        refused = c.allocate("app", "k2", qp.Resource({"vcore": 2000, "pods": 1}))
        assert not refused.allocated
        assert [(v.policy, v.code, v.path) for v in refused.reasons] == [("queue", "queue.max", "root.a")]
        assert refused.reasons[0].resource == qp.Resource({"vcore": 1000})
        assert not c.what_if("app", {"vcore": 2000}).allocated
        waiting = c.add_ask("app", "w1", {"vcore": 2000, "pods": 1})
        assert waiting["allocated"] is False
        assert [a["allocationKey"] for a in c.pending("app")] == ["w1"]
        app = c.application("app")
        assert app["requests"][0]["allocationKey"] == "w1" and app["allocations"][0]["nodeId"] == "n1"
        c.release("k1")                                  # w1 now fits
        assert c.pending("app") == []
        assert s.partition("default").allocation("w1") is not None
        assert c.validate_config(CONFIG) == (True, "")
        assert c.validate_config("partitions: [")[0] is False
        assert "root" in c.config()
        assert c.nodes()[0]["nodeID"] == "n1" and c.queues()["queuename"] == "root"


def test_errors_are_typed(service: tuple[_Server, qp.Scheduler]) -> None:
    srv, _ = service
    with Client(srv.url) as c:
        with pytest.raises(qp.NotFoundError, match="Partition not found") as nf:
            c.queues("nope")
        assert nf.value.status == 404               # type: ignore[attr-defined]
        c.add_node("n1", {"vcore": 8000})
        c.add_application("app", SUE, queue="root.a")
        c.allocate("app", "k1", {"vcore": 1})
        with pytest.raises(qp.ConflictError):
            c.allocate("app", "k1", {"vcore": 1})   # the same key twice
        with pytest.raises(BadRequestError) as bad:
            c.allocate("app", "k3", {"vcore": -1})
        assert isinstance(bad.value, ValueError) and "vcore" in bad.value.description


def test_a_token_is_sent_and_a_missing_one_is_refused() -> None:
    s = qp.Scheduler.from_yaml(CONFIG)
    srv = _Server(s, tokens=Tokens({"admin": "secret"}))
    try:
        with Client(srv.url, token="secret") as c:
            c.add_node("n1", {"vcore": 1})
        with Client(srv.url, token="") as c, pytest.raises(AccessDeniedError):
            c.add_node("n2", {"vcore": 1})
    finally:
        srv.stop()
        s.close()


def test_503_is_retried_and_the_named_leader_followed() -> None:
    """A follower answers 503 with ``leader``: the client goes there; a store outage answers 503 with
    Retry-After: the client waits and tries again, then gives up with UnavailableError."""
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url))
        if request.url.host == "follower":
            return httpx.Response(503, json={"status_code": 503, "message": "not the leader",
                                             "description": "", "leader": "http://leader"})
        if len([c for c in calls if "leader/" in c]) < 2:
            return httpx.Response(503, headers={"Retry-After": "0"},
                                  json={"status_code": 503, "message": "store unavailable"})
        return httpx.Response(200, json=[{"name": "default"}])

    with Client("http://follower", transport=httpx.MockTransport(handler)) as c:
        assert c.partitions() == [{"name": "default"}]
        assert c.server == "http://leader"
    assert calls == ["http://follower/ws/v1/partitions", "http://leader/ws/v1/partitions",
                     "http://leader/ws/v1/partitions"]

    def down(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, headers={"Retry-After": "0"}, json={"status_code": 503, "message": "down"})

    with Client("http://x", retries=2, transport=httpx.MockTransport(down)) as c, \
            pytest.raises(UnavailableError, match="down"):
        c.partitions()


def test_a_service_that_cannot_be_reached_is_a_typed_error_naming_it() -> None:
    """No answer at all (nothing listening, the connection dropped, a timeout) raises the library's
    UnreachableError — a ConnectionError naming the service — not httpx's internals; a request that
    may have reached the service says its change may or may not have been applied."""
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with Client("http://nowhere:9", transport=httpx.MockTransport(refused)) as c, \
            pytest.raises(UnreachableError, match=r"cannot reach the service at http://nowhere:9") as info:
        c.partitions()
    assert isinstance(info.value, ConnectionError) and "Connection refused" in str(info.value)
    assert not info.value.sent and "may or may not" not in str(info.value)   # nothing changed

    def silent(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with Client("http://slow:9", transport=httpx.MockTransport(silent)) as c, \
            pytest.raises(UnreachableError, match="may or may not have been applied") as info:
        c.allocate("app-1", "k1", {"vcore": 1})
    assert info.value.sent and info.value.server == "http://slow:9"

    async def run() -> None:
        async def refused_async(request: httpx.Request) -> httpx.Response:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

        async with AsyncClient("http://nowhere:9", transport=httpx.MockTransport(refused_async)) as ac:
            with pytest.raises(UnreachableError, match="cannot reach the service at http://nowhere:9"):
                await ac.queues()

    asyncio.run(run())


def test_the_event_stream_resumes_after_a_dropped_connection(tmp_path: Any) -> None:
    """The service restarts in the middle (the connection drops): the iterator reconnects with the
    last sequence number and yields every allocation once, in order."""
    store = f"sqlite:///{tmp_path}/s.db"
    s = qp.Scheduler.from_yaml(CONFIG, store=store)
    srv = _Server(s)
    port = srv.port
    got: list[str] = []
    done = threading.Event()

    def follow() -> None:
        with Client(srv.url) as c:
            for notice in c.events(types=["allocated"]):
                got.append(notice["allocationKey"])
                if len(got) == 4:
                    done.set()
                    return

    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 8000}))
    p.add_application("app", SUE, queue="root.a")
    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    # the stream is open once it has subscribed (a fixed 0.5 s sleep was too short on a loaded machine:
    # k1 and k2 went out before anyone listened and the reader had no seq to resume from)
    deadline = time.monotonic() + 30
    while p.subscriber_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert p.subscriber_count() == 1
    p.allocate("app", "k1", qp.Resource({"vcore": 1}))
    p.allocate("app", "k2", qp.Resource({"vcore": 1}))
    deadline = time.monotonic() + 10
    while len(got) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    srv.stop()
    s.close()
    s2 = qp.Scheduler.from_yaml(CONFIG, store=store)
    p2 = s2.partition("default")
    p2.allocate("app", "k3", qp.Resource({"vcore": 1}))     # while nobody listens
    srv2 = _Server(s2, port=port)
    try:
        time.sleep(1.0)
        p2.allocate("app", "k4", qp.Resource({"vcore": 1}))
        assert done.wait(15), got
        assert got == ["k1", "k2", "k3", "k4"]
    finally:
        srv2.stop()
        s2.close()


def test_the_async_client(service: tuple[_Server, qp.Scheduler]) -> None:
    srv, _ = service

    async def main() -> None:
        async with AsyncClient(srv.url) as c:
            await c.add_node("n1", {"vcore": 8000})
            assert await c.add_application("app", SUE, queue="root.a") == "root.a"
            d = await c.allocate("app", "k1", {"vcore": 1000})
            assert d.allocated
            stream = c.events(after=0, types=["allocated"])
            first = await stream.__anext__()
            assert first["allocationKey"] == "k1"
            await stream.aclose()
            await c.release("k1")
            assert "allocations" not in await c.application("app")
            with pytest.raises(qp.NotFoundError):
                await c.queues("nope")
    asyncio.run(main())


def test_every_remaining_call(service: tuple[_Server, qp.Scheduler]) -> None:
    """The calls the other tests do not make: one queue, usage, removals, a configuration update."""
    srv, s = service
    with Client(srv.url) as c:
        c.add_node("n1", {"vcore": 8000, "pods": 10})
        c.add_node("n2", {"vcore": 1000, "pods": 10}, schedulable=False)
        assert [n["schedulable"] for n in c.nodes()] == [True, False]
        c.add_application("app", SUE, queue="root.a", tags={"namespace": "team"})
        c.allocate("app", "k1", {"vcore": 1000, "pods": 1})
        assert c.queue("root.a")["allocatedResource"]["vcore"] == 1000
        assert [u["userName"] for u in c.users_usage()] == ["sue"]
        assert c.groups_usage() == []        # no group limit applies: no group is tracked (seed 001)
        assert [a["applicationID"] for a in c.applications()] == ["app"]
        assert c.standing(user="sue")["waiting"] == []
        c.add_ask("app", "w1", {"vcore": 9000, "pods": 1})
        c.remove_ask("app", "w1")
        assert c.pending() == []
        c.remove_node("n2")
        assert [n["nodeID"] for n in c.nodes()] == ["n1"]
        c.remove_application("app")
        assert c.applications() == []
        assert c.update_config(CONFIG.replace("vcore: 4", "vcore: 5"))["applied"] is True
        assert "vcore: 5" in c.config() and len(c.partitions()) == 1
    assert s.partition("default").queues.queue("root.a") is not None


def test_the_async_client_has_every_call_of_the_sync_one(service: tuple[_Server, qp.Scheduler]) -> None:
    """``AsyncClient`` is the twin of ``Client``: the same public calls (it lacked 18 of them), each
    answering what the sync one answers, against a real service."""
    def public(cls: type) -> set[str]:
        return {n for n in dir(cls) if not n.startswith("_")} - {"close", "aclose"}

    assert public(Client) == public(AsyncClient)
    srv, _ = service

    async def main() -> None:
        async with AsyncClient(srv.url) as c:
            await c.add_node("n1", {"vcore": 8000, "pods": 10})
            await c.add_node("n2", {"vcore": 1000, "pods": 10}, schedulable=False)
            assert [n["schedulable"] for n in await c.nodes()] == [True, False]
            assert await c.add_application("app", SUE, queue="root.a", tags={"namespace": "team"}) == "root.a"
            assert (await c.allocate("app", "k1", {"vcore": 1000, "pods": 1})).allocated
            assert (await c.queue("root.a"))["allocatedResource"]["vcore"] == 1000
            assert [u["userName"] for u in await c.users_usage()] == ["sue"]
            assert (await c.user_usage("sue"))["userName"] == "sue"
            assert await c.groups_usage() == []
            with pytest.raises(qp.NotFoundError):
                await c.group_usage("engineering")
            assert [a["applicationID"] for a in await c.applications()] == ["app"]
            assert (await c.standing(user="sue"))["waiting"] == []
            refused = await c.what_if("app", {"vcore": 9000})
            assert not refused.allocated and refused.reasons
            await c.add_ask("app", "w1", {"vcore": 9000, "pods": 1})
            assert [a["allocationKey"] for a in await c.pending("app")] == ["w1"]
            await c.remove_ask("app", "w1")
            assert await c.pending() == []
            await c.remove_node("n2")
            assert [n["nodeID"] for n in await c.nodes()] == ["n1"]
            await c.remove_application("app")
            assert await c.applications() == []
            invalid = await c.validate_config("partitions: [{name: x}]")
            assert invalid == (False, "line 1: queue config is not set")
            assert (await c.update_config(CONFIG.replace("vcore: 4", "vcore: 5")))["applied"] is True
            assert "vcore: 5" in await c.config() and len(await c.partitions()) == 1
    asyncio.run(main())


def test_errors_are_named_by_their_public_names(service: tuple[_Server, qp.Scheduler]) -> None:
    """Issue 30 #7: a traceback showed ``quotaplane._client_api._Conflict``."""
    import traceback

    from quotaplane.client import ServiceConflictError, ServiceNotFoundError

    srv, _ = service
    with Client(srv.url) as c:
        with pytest.raises(ServiceNotFoundError) as missing:
            c.application("nope")
        c.add_node("dup-node", {"vcore": 1000})
        c.add_application("dup", SUE, queue="root.a")
        with pytest.raises(ServiceConflictError) as conflict:
            c.add_application("dup", SUE, queue="root.a")
    for exc in (missing.value, conflict.value):
        shown = "".join(traceback.format_exception_only(type(exc), exc))
        assert "_client_api" not in shown and "._" not in shown.split(":")[0], shown
        assert shown.startswith("quotaplane.client."), shown
    assert isinstance(missing.value, qp.NotFoundError) and isinstance(conflict.value, qp.ConflictError)


@pytest.mark.parametrize("suffix", ["/ws/v1", "/ws/v1/", "/"])
def test_a_server_url_naming_the_api_path_works_too(service: tuple[_Server, qp.Scheduler],
                                                    suffix: str) -> None:
    """Issue 30 #7: ``--server …/ws/v1`` printed ``404 404 page not found``."""
    srv, _ = service
    with Client(srv.url + suffix) as c:
        assert c.queues()["queuename"] == "root"
        assert c.server == srv.url
