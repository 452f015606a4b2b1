"""The hot paths served by the outer ASGI layer (allocate, release, ask) answer exactly like their
documented FastAPI routes (issue 38 item 3): same status, same body, same state after, for good and
bad input, with and without tokens. Each request goes to two services side by side — one with the
fast paths, one without — whose states stay equal as long as every answer does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import quotaplane as qp
from quotaplane.server.app import create_app
from quotaplane.server.auth import Tokens
from quotaplane.server.outer import fast_route
from tests.server.conftest import CONFIG

SUBMIT = {"Authorization": "Bearer s"}
READ = {"Authorization": "Bearer r"}
ALLOCATIONS = "/ws/v1/partition/default/allocations"
ASKS = "/ws/v1/partition/default/application/a1/asks"


class Twins:
    """A service with the fast paths and one without, fed the same requests."""

    def __init__(self, tokens: dict[str, list[str]] | None) -> None:
        self.schedulers: list[qp.Scheduler] = []
        self.clients: list[TestClient] = []
        for fast in (True, False):
            s = qp.Scheduler.from_yaml(CONFIG, clock=lambda: 1_000_000.0)   # equal times in both
            p = s.partition("default")
            p.add_node("n1", qp.Resource({"vcore": 16000}))
            p.add_application("a1", qp.UserGroup("sue"), queue="root.small")
            p.add_application("a2", qp.UserGroup("bob"), queue="root.default")
            app = create_app(s, tokens=Tokens(tokens) if tokens else None, fast_path=fast)
            client = TestClient(app, raise_server_exceptions=False)
            client.__enter__()
            self.schedulers.append(s)
            self.clients.append(client)

    def close(self) -> None:
        for c in self.clients:
            c.__exit__(None, None, None)
        for s in self.schedulers:
            s.close()

    def same(self, method: str, url: str, **kw: Any) -> tuple[int, Any]:
        """Send the request to both; assert the answers are equal; answer (status, JSON body)."""
        answers = []
        for c in self.clients:
            r = c.request(method, url, **kw)
            answers.append((r.status_code, r.json(), r.headers.get("www-authenticate")))
        assert answers[0] == answers[1], (method, url, kw)
        return answers[0][0], answers[0][1]

    def state(self) -> list[Any]:
        """Both services' allocations and pending asks (to compare)."""
        out = []
        for s in self.schedulers:
            p = s.partition("default")
            with p.lock:
                out.append((sorted(a.allocation_key for a in p.allocations()),
                            sorted(a.allocation_key for a in p.pending())))
        return out


@pytest.fixture(params=[None, {"submit": ["s"], "read": ["r"]}], ids=["open", "tokens"])
def twins(request: pytest.FixtureRequest) -> Iterator[Twins]:
    t = Twins(request.param)
    yield t
    t.close()


def test_fast_routes_are_the_documented_paths() -> None:
    """Only the three hot operations are taken off the normal stack; a release with a query string
    (``?user=``, validated by FastAPI) and look-alike paths are not."""
    def route(method: str, path: str, query: bytes = b"") -> str | None:
        hit = fast_route({"method": method, "path": path, "query_string": query})
        return None if hit is None else hit[0].path

    assert route("POST", ALLOCATIONS) == "/ws/v1/partition/{partition}/allocations"
    assert route("POST", ASKS) == "/ws/v1/partition/{partition}/application/{application_id}/asks"
    assert route("DELETE", "/ws/v1/partition/default/allocation/k1") == \
        "/ws/v1/partition/{partition}/allocation/{allocation_key}"
    assert route("DELETE", "/ws/v1/partition/default/allocation/k1", b"user=sue") is None
    assert route("GET", "/ws/v1/partition/default/allocation/k1") is None
    assert route("POST", ALLOCATIONS + "/batch") is None
    assert route("POST", ALLOCATIONS + "/") is None
    assert route("DELETE", "/ws/v1/partition/default/allocation/k1/node") is None
    assert route("DELETE", "/ws/v1/partition/default/application/a1/ask/k1") is None


def test_release_answers_exactly_like_the_route(twins: Twins) -> None:
    body = {"applicationID": "a1", "allocationKey": "k1", "resource": {"vcore": 1000}}
    assert twins.same("POST", ALLOCATIONS, json=body, headers=SUBMIT)[0] == 201
    release = "/ws/v1/partition/default/allocation/k1"
    codes = [twins.same("DELETE", release, **kw)[0] for kw in (
        {},                                      # no token (401 with tokens; without, released)
        {"headers": READ},                       # weak role (403 with tokens)
        {"headers": SUBMIT},                     # released (with tokens)
        {"headers": SUBMIT},                     # again: not found
    )]
    assert codes.count(200) == 1 and codes[-1] == 404
    assert twins.same("DELETE", "/ws/v1/partition/nope/allocation/k1", headers=SUBMIT)[0] == 404
    assert twins.same("DELETE", "/ws/v1/partition/default/allocation/a%20b", headers=SUBMIT)[0] == 404
    # ?user= takes the documented route in both; the owner may release, another user may not
    assert twins.same("POST", ALLOCATIONS, json={**body, "allocationKey": "k2"}, headers=SUBMIT)[0] == 201
    assert twins.same("DELETE", "/ws/v1/partition/default/allocation/k2?user=bob", headers=SUBMIT)[0] == 403
    assert twins.same("DELETE", "/ws/v1/partition/default/allocation/k2?user=sue", headers=SUBMIT)[0] == 200
    assert twins.state()[0] == twins.state()[1]


def test_ask_answers_exactly_like_the_route(twins: Twins) -> None:
    ask = {"allocationKey": "q1", "resource": {"vcore": 1000}}
    codes = [twins.same("POST", url, **kw)[0] for url, kw in (
        (ASKS, {"json": ask, "headers": SUBMIT}),                                  # allocated at once
        (ASKS, {"json": ask, "headers": SUBMIT}),                                  # duplicate key
        (ASKS, {"json": {**ask, "allocationKey": "q2", "resource": {"vcore": 3000}},
                "headers": SUBMIT}),                                               # waits, with reasons
        ("/ws/v1/partition/default/application/ghost/asks", {"json": ask, "headers": SUBMIT}),
        ("/ws/v1/partition/nope/application/a1/asks", {"json": ask, "headers": SUBMIT}),
        (ASKS, {"json": {**ask, "resource": {"vcore": -1}}, "headers": SUBMIT}),
        (ASKS, {"json": {**ask, "placeholder": True}, "headers": SUBMIT}),         # no task group
        (ASKS, {"json": {**ask, "extra": 1}, "headers": SUBMIT}),
        (ASKS, {"content": b"{bad", "headers": SUBMIT}),
        (ASKS, {"content": b"", "headers": SUBMIT}),
        (ASKS, {"json": ask}),                                                     # no token
        (ASKS, {"json": ask, "headers": READ}),                                    # weak role
    )]
    assert codes[:2] == [201, 409] and codes[3:6] == [404, 404, 400]
    assert twins.state()[0] == twins.state()[1]


_names = st.sampled_from(["a1", "a2", "ghost", "", "k1", "k2", "x" * 1100, "tab\there", "é"])
_amounts = st.one_of(st.integers(-5, 20000), st.sampled_from([2**63, 1.5, 2.0, "5", True, None]))
_resource = st.one_of(st.dictionaries(st.sampled_from(["vcore", "memory", ""]), _amounts, max_size=2),
                      st.sampled_from([None, [], "vcore"]))
_entry = st.fixed_dictionaries({}, optional={
    "applicationID": _names, "allocationKey": _names, "resource": _resource,
    "priority": st.sampled_from([0, 5, -1, 2**40, "1", 1.0]),
    "preemptible": st.sampled_from([True, False, 1, "no"]),
    "placeholder": st.sampled_from([True, False]), "taskGroupName": _names,
    "nodeID": st.sampled_from(["n1", "n9", 3]),
    "maxRuntime": st.sampled_from([60, 0, -1, 1e12, "60"]),
    "allocationTags": st.sampled_from([{"a": "b"}, {"a": 1}, []]),
    "nodeSelector": st.sampled_from([{"zone": "a"}, {"zone": 1}]),
    "unknown": st.just(1)})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["allocate", "ask", "release"]), _entry,
                              st.sampled_from(["a1", "a2", "ghost"]), st.sampled_from(["", "nope"])),
                    min_size=1, max_size=6))
def test_any_request_answers_exactly_like_the_route(twins: Twins,
                                                    ops: list[tuple[str, dict[str, Any], str, str]]) -> None:
    """Property: for any sequence of allocations, asks and releases, good or bad, the fast paths and
    the routes answer the same and leave the same state."""
    for kind, entry, app, partition in ops:
        part = partition or "default"
        if kind == "allocate":
            twins.same("POST", f"/ws/v1/partition/{part}/allocations", content=json.dumps(entry),
                       headers=SUBMIT)
        elif kind == "ask":
            twins.same("POST", f"/ws/v1/partition/{part}/application/{app}/asks",
                       content=json.dumps(entry), headers=SUBMIT)
        else:
            key = entry.get("allocationKey")
            key = key if isinstance(key, str) and key and "/" not in key else "k1"
            twins.same("DELETE", f"/ws/v1/partition/{part}/allocation/{quote(key, safe='')}",
                       headers=SUBMIT)
    assert twins.state()[0] == twins.state()[1]


def test_metrics_label_the_fast_paths_by_their_documented_route() -> None:
    t = Twins({"submit": ["s"], "read": ["r"]})
    try:
        t.same("POST", ASKS, json={"allocationKey": "q1", "resource": {"vcore": 1}}, headers=SUBMIT)
        t.same("DELETE", "/ws/v1/partition/default/allocation/q1", headers=SUBMIT)
        texts = [c.get("/metrics", headers=READ).text for c in t.clients]
        for route in ("/ws/v1/partition/{partition}/application/{application_id}/asks",
                      "/ws/v1/partition/{partition}/allocation/{allocation_key}"):
            assert all(f'route="{route}"' in text for text in texts)
    finally:
        t.close()
