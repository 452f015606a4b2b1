"""Issue 14 #3: a server fault is a 5xx with a generic message; the detail goes to the log only.

Before, an unexpected exception was answered 400 with ``Original Cause : RecursionError…`` and a store
failure 503 with the journal's text (file paths): clients did not retry, 4xx alerting stayed quiet,
internals leaked.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.journal import JournalError
from quotaplane.server.app import create_app
from tests.server.conftest import CONFIG, add_node

SECRET = "/var/lib/quotaplane/secret-path.db"


@pytest.fixture
def served() -> Iterator[tuple[qp.Scheduler, TestClient]]:
    s = qp.Scheduler.from_yaml(CONFIG)
    with TestClient(create_app(s), raise_server_exceptions=False) as c:
        yield s, c
    s.close()


def _add_app(c: TestClient) -> None:
    r = c.post("/ws/v1/partition/default/applications",
               json={"applicationID": "a1", "user": "alice", "queue": "root.default"})
    assert r.status_code in (200, 201), r.text


@pytest.mark.parametrize("fault", [RuntimeError(SECRET), RecursionError("maximum recursion depth"),
                                   AssertionError(SECRET), AttributeError(SECRET),
                                   # a TypeError in the service is a fault: request bodies are typed at
                                   # the edge, so none comes from bad input
                                   TypeError("argument of type 'method' is not iterable")])
def test_an_unexpected_exception_is_a_500_without_its_text(
        served: tuple[qp.Scheduler, TestClient], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, fault: BaseException) -> None:
    s, c = served
    _add_app(c)

    def broken(*_a: object, **_k: object) -> None:
        raise fault

    monkeypatch.setattr(s.partition("default"), "what_if", broken)
    with caplog.at_level(logging.ERROR, logger="quotaplane.server"):
        r = c.post("/ws/v1/partition/default/whatif",
                   json={"applicationID": "a1", "resource": {"vcore": 1}})
    assert r.status_code == 500, r.text
    body = r.json()
    assert body["status_code"] == 500
    assert body["message"] == "internal server error"
    assert SECRET not in r.text and type(fault).__name__ not in r.text
    assert any(type(fault).__name__ in (rec.exc_text or "") or rec.exc_info for rec in caplog.records)


def test_a_store_failure_is_a_503_without_the_store_detail(
        served: tuple[qp.Scheduler, TestClient], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    s, c = served
    add_node(c)
    _add_app(c)

    def failing(*_a: object, **_k: object) -> int:
        raise JournalError(f"database or disk is full: {SECRET}")

    journal = s.partition("default").journal
    inner = getattr(journal, "inner", journal)        # the service wraps it to time writes
    monkeypatch.setattr(type(inner), "append", failing)
    with caplog.at_level(logging.ERROR, logger="quotaplane.server"):
        r = c.post("/ws/v1/partition/default/allocations",
                   json={"applicationID": "a1", "allocationKey": "k1", "resource": {"vcore": 1}})
    assert r.status_code == 503, r.text
    assert r.json()["message"] == "store unavailable: nothing was changed; retry later"
    assert r.headers["Retry-After"] == "1"
    assert SECRET not in r.text
    assert any(SECRET in rec.getMessage() or SECRET in (rec.exc_text or "") for rec in caplog.records)


def test_bad_input_is_still_a_400_with_its_reason(served: tuple[qp.Scheduler, TestClient]) -> None:
    _s, c = served
    r = c.post("/ws/v1/partition/default/allocations",
               json={"applicationID": "ghost", "allocationKey": "k1", "resource": {"vcore": 1}})
    assert r.status_code == 404 and "ghost" in r.json()["message"]
    r = c.post("/ws/v1/partition/default/allocations", content=b"{",
               headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "JSON" in r.json()["message"]
