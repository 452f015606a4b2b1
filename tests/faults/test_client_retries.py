"""Issue 32 #3, the client's half: a retry is the same request. :class:`~quotaplane.client.Client`
sends again, on its own, only what the service certainly did not apply (503) — and, after an
unknown outcome (a 502 "may or may not have been applied", or no answer once the request was sent),
only the calls whose retry cannot apply them twice: an allocation (its key names it) and a release.
The answer to such a retry that says "already there" / "already gone" is read as the success of
the first attempt, once the allocation read back is the one asked for."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from quotaplane.client import AsyncClient, Client, UnknownOutcomeError
from quotaplane.config.identity import UserGroup
from quotaplane.errors import ConflictError

UNKNOWN = {"status_code": 502, "message": "the change may or may not have been applied",
           "description": "…", "outcome": "unknown"}
EXISTS = {"status_code": 409, "message": "allocation 'k1' already exists in partition 'default'",
          "description": "…"}


def _script(*answers: Any) -> tuple[list[str], Callable[[httpx.Request], httpx.Response]]:
    """A service answering each request with the next of ``answers``: ``(status, body)`` or an
    exception to raise (the connection dropped after the request was sent)."""
    seen: list[str] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, body = answer
        return httpx.Response(status, json=body)

    return seen, handler


def _client(handler: Callable[[httpx.Request], httpx.Response]) -> Client:
    return Client("http://qp", transport=httpx.MockTransport(handler))


ALLOCATION = {"allocationKey": "k1", "applicationID": "app1", "resource": {"vcore": 2}, "priority": 0}


def test_an_allocation_whose_outcome_was_unknown_is_sent_again_and_already_there_is_its_success() -> None:
    seen, handler = _script((502, UNKNOWN), (409, EXISTS), (200, ALLOCATION))
    with _client(handler) as c:
        d = c.allocate("app1", "k1", {"vcore": 2})
    assert d.allocated and d.allocation_key == "k1"
    assert seen == ["POST /ws/v1/partition/default/allocations", "POST /ws/v1/partition/default/allocations",
                    "GET /ws/v1/partition/default/allocation/k1"]


def test_a_key_held_by_another_request_is_still_a_conflict() -> None:
    other = {**ALLOCATION, "resource": {"vcore": 64}}
    _seen, handler = _script((502, UNKNOWN), (409, EXISTS), (200, other))
    with _client(handler) as c, pytest.raises(ConflictError):
        c.allocate("app1", "k1", {"vcore": 2})


def test_a_dropped_answer_is_an_unknown_outcome_too() -> None:
    sent = httpx.ReadError("connection reset by peer")
    seen, handler = _script(sent, (201, {"allocated": True, "allocationKey": "k1", "queueName": "root.a"}))
    with _client(handler) as c:
        assert c.allocate("app1", "k1", {"vcore": 2}).allocated
    assert len(seen) == 2


def test_a_release_whose_outcome_was_unknown_is_sent_again_and_already_gone_is_its_success() -> None:
    seen, handler = _script((502, UNKNOWN), (404, {"status_code": 404, "message": "allocation 'k1' not found",
                                                    "description": "…"}))
    with _client(handler) as c:
        assert c.release("k1") is None
    assert len(seen) == 2


def test_a_first_answer_already_there_is_not_taken_for_a_retry() -> None:
    _seen, handler = _script((409, EXISTS))
    with _client(handler) as c, pytest.raises(ConflictError):
        c.allocate("app1", "k1", {"vcore": 2})


def test_a_call_that_a_retry_could_apply_twice_is_not_retried_after_an_unknown_outcome() -> None:
    seen, handler = _script((502, UNKNOWN))
    with _client(handler) as c, pytest.raises(UnknownOutcomeError) as err:
        c.add_application("app1", UserGroup("sue", []))
    assert err.value.status == 502 and "may or may not" in str(err.value)
    assert len(seen) == 1


def test_the_async_client_retries_the_same_way() -> None:
    seen, handler = _script((502, UNKNOWN), (409, EXISTS), (200, ALLOCATION))

    async def main() -> bool:
        async with AsyncClient("http://qp", transport=httpx.MockTransport(handler)) as c:
            return (await c.allocate("app1", "k1", {"vcore": 2})).allocated

    assert asyncio.run(main())
    assert len(seen) == 3 and json.dumps(seen)
