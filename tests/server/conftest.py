"""Fixtures for the in-process service tests (FastAPI TestClient around a real Scheduler)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.server.app import create_app
from quotaplane.server.auth import Tokens

#: The test configuration: root lets nobody submit on its own (so leaf ACLs decide); root.default is
#: open to everyone; root.restricted only to alice (and group ops), with boss as admin; root.small has a
#: queue max and a per-user limit so refusals carry reasons of two policies.
CONFIG = """\
partitions:
  - name: default
    queues:
      - name: root
        adminacl: "root-admin"
        queues:
          - name: default
            submitacl: "*"
          - name: restricted
            submitacl: "alice ops"
            adminacl: "boss"
          - name: small
            submitacl: "*"
            resources:
              max:
                vcore: 4
            limits:
              - limit: "per user"
                users:
                  - "*"
                maxresources:
                  vcore: 2
  - name: gpu
    queues:
      - name: root
        submitacl: "*"
"""

TOKENS = {"admin": ["admin-token"], "submit": ["submit-token"], "read": ["read-token"]}
ADMIN = {"Authorization": "Bearer admin-token"}
SUBMIT = {"Authorization": "Bearer submit-token"}
READ = {"Authorization": "Bearer read-token"}


@pytest.fixture
def scheduler() -> Iterator[qp.Scheduler]:
    """A fresh in-memory scheduler on :data:`CONFIG`."""
    s = qp.Scheduler.from_yaml(CONFIG)
    yield s
    s.close()


@pytest.fixture
def client(scheduler: qp.Scheduler) -> Iterator[TestClient]:
    """A client of an app without tokens (open access)."""
    with TestClient(create_app(scheduler), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def secured(scheduler: qp.Scheduler) -> Iterator[TestClient]:
    """A client of an app with tokens per role."""
    with TestClient(create_app(scheduler, tokens=Tokens(TOKENS)), raise_server_exceptions=False) as c:
        yield c


def add_node(c: TestClient, node: str = "n1", vcore: int = 16000, memory: int = 2**36,
             partition: str = "default") -> None:
    """Register a node (asserts success)."""
    r = c.put(f"/ws/v1/partition/{partition}/node/{node}",
              json={"capacity": {"vcore": vcore, "memory": memory}}, headers=ADMIN)
    assert r.status_code == 201, r.text


def add_app(c: TestClient, app: str = "app-1", user: str = "sue", groups: tuple[str, ...] = ("dev",),
            queue: str | None = "root.default", partition: str = "default") -> dict:
    """Submit an application (asserts success)."""
    body: dict = {"applicationID": app, "user": user, "groups": list(groups)}
    if queue is not None:
        body["queue"] = queue
    r = c.post(f"/ws/v1/partition/{partition}/applications", json=body, headers=SUBMIT)
    assert r.status_code == 201, r.text
    return r.json()


def allocate(c: TestClient, app: str, key: str, vcore: int, partition: str = "default"):
    """POST an allocation; returns the response."""
    return c.post(f"/ws/v1/partition/{partition}/allocations",
                  json={"applicationID": app, "allocationKey": key, "resource": {"vcore": vcore}},
                  headers=SUBMIT)


def assert_error(r, status: int) -> dict:
    """The response is ``status`` with exactly the YuniKorn error body keys (plus allowed extras)."""
    assert r.status_code == status, r.text
    body = r.json()
    assert body["status_code"] == status
    assert isinstance(body["message"], str) and body["message"]
    assert isinstance(body["description"], str) and body["description"]
    assert "detail" not in body
    return body
