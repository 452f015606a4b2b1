"""In-process tests of the queueing endpoints (pending asks, schedule, the allocation event stream)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.server.app import create_app
from tests.server.conftest import READ, SUBMIT, add_app, add_node, allocate, assert_error

BASE = "/ws/v1/partition/default"


def post_ask(c: TestClient, app: str, key: str, vcore: int, headers: dict[str, str] | None = None,
             **extra: Any) -> Any:
    """POST one ask; returns the response."""
    return c.post(f"{BASE}/application/{app}/asks",
                  json={"allocationKey": key, "resource": {"vcore": vcore}, **extra},
                  headers=headers if headers is not None else SUBMIT)


def test_ask_that_fits_is_allocated_at_once(client: TestClient) -> None:
    add_node(client)
    add_app(client, "a1")
    r = post_ask(client, "a1", "k1", 1000)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["allocated"] is True and body["allocationKey"] == "k1"
    assert client.get(f"{BASE}/allocation/k1").status_code == 200
    assert client.get(f"{BASE}/application/a1/asks").json() == []


def test_ask_that_does_not_fit_waits_with_reasons_equal_to_whatif(client: TestClient) -> None:
    """Seed 004: queued, not rejected; the reasons are the what_if reasons for the same request."""
    add_node(client)
    add_app(client, "a1", "sue", (), "root.small")
    assert allocate(client, "a1", "k0", 2000).status_code == 201
    r = post_ask(client, "a1", "k1", 3000, priority=3)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["allocated"] is False
    codes = {(v["policy"], v["code"]) for v in body["reasons"]}
    assert codes == {("queue", "queue.max"), ("user", "user.maxresources")}
    whatif = client.post(f"{BASE}/whatif", json={"applicationID": "a1", "allocationKey": "w",
                                                  "resource": {"vcore": 3000}})
    assert whatif.json()["reasons"] == body["reasons"]
    listed = client.get(f"{BASE}/application/a1/asks").json()
    assert [a["allocationKey"] for a in listed] == ["k1"]
    assert listed[0]["priority"] == 3 and listed[0]["resource"] == {"vcore": 3000}
    assert listed[0]["reasons"] == body["reasons"]
    assert client.get(f"{BASE}/allocation/k1").status_code == 404       # counts towards nothing


def test_release_allocates_the_waiting_ask(client: TestClient) -> None:
    add_node(client)
    add_app(client, "a1", "sue", (), "root.small")
    assert allocate(client, "a1", "k0", 2000).status_code == 201
    assert post_ask(client, "a1", "k1", 2000).json()["allocated"] is False
    assert client.delete(f"{BASE}/allocation/k0", headers=SUBMIT).status_code == 200
    assert client.get(f"{BASE}/allocation/k1").status_code == 200
    assert client.get(f"{BASE}/asks").json() == []


def test_partition_asks_list_in_arrival_order_and_schedule(scheduler: qp.Scheduler) -> None:
    # the timer's cycle is pushed far out: it ran between add_node and POST /schedule on a loaded
    # machine and allocated both asks first (/schedule then made nothing)
    with TestClient(create_app(scheduler, schedule_interval=3600), raise_server_exceptions=False) as client:
        _asks_list_in_arrival_order_and_schedule(client, scheduler)


def _asks_list_in_arrival_order_and_schedule(client: TestClient, scheduler: qp.Scheduler) -> None:
    add_app(client, "a1")
    add_app(client, "a2")
    assert post_ask(client, "a2", "x", 1000).json()["allocated"] is False      # no node yet
    assert post_ask(client, "a1", "y", 1000, priority=5).json()["allocated"] is False
    listed = client.get(f"{BASE}/asks").json()
    assert [(a["allocationKey"], a["applicationID"]) for a in listed] == [("x", "a2"), ("y", "a1")]
    assert listed[0]["reasons"][0]["code"] == "root.capacity"
    p = scheduler.partition("default")
    p.auto_schedule = False
    add_node(client)
    r = client.post(f"{BASE}/schedule", headers=SUBMIT)
    assert r.status_code == 200
    made = r.json()["allocations"]
    assert sorted(a["allocationKey"] for a in made) == ["x", "y"]
    assert made[0] == {"allocationKey": made[0]["allocationKey"], "applicationID": made[0]["applicationID"],
                       "resource": {"vcore": 1000}}
    assert client.post(f"{BASE}/schedule", headers=SUBMIT).json() == {"allocations": []}


def test_delete_ask(client: TestClient) -> None:
    add_app(client, "a1")
    add_app(client, "a2")
    post_ask(client, "a1", "k1", 1000)
    assert_error(client.delete(f"{BASE}/application/a2/ask/k1", headers=SUBMIT), 404)  # not a2's
    r = client.delete(f"{BASE}/application/a1/ask/k1", headers=SUBMIT)
    assert r.status_code == 200 and r.json()["allocationKey"] == "k1"
    assert client.get(f"{BASE}/application/a1/asks").json() == []
    assert_error(client.delete(f"{BASE}/application/a1/ask/k1", headers=SUBMIT), 404)


def test_placeholder_ask_fields(client: TestClient) -> None:
    add_app(client, "g")
    r = post_ask(client, "g", "ph", 1000, placeholder=True, taskGroupName="tg")
    assert r.status_code == 201
    assert r.json()["placeholder"] is True and r.json()["taskGroupName"] == "tg"
    assert_error(post_ask(client, "g", "ph2", 1000, placeholder=True), 400)     # needs a task group


def test_unknown_partition_application_and_ask_are_404(client: TestClient) -> None:
    add_app(client, "a1")
    assert_error(post_ask(client, "nope", "k1", 1000), 404)
    assert_error(client.post("/ws/v1/partition/nope/application/a1/asks",
                             json={"allocationKey": "k", "resource": {"vcore": 1}}), 404)
    assert_error(client.get(f"{BASE}/application/nope/asks"), 404)
    assert_error(client.get("/ws/v1/partition/nope/application/a1/asks"), 404)
    assert_error(client.get("/ws/v1/partition/nope/asks"), 404)
    assert_error(client.delete(f"{BASE}/application/a1/ask/nope", headers=SUBMIT), 404)
    assert_error(client.delete("/ws/v1/partition/nope/application/a1/ask/k", headers=SUBMIT), 404)
    assert_error(client.post("/ws/v1/partition/nope/schedule", headers=SUBMIT), 404)
    assert_error(client.get("/ws/v1/partition/nope/events/stream?timeout=1"), 404)


def test_duplicate_key_is_409(client: TestClient) -> None:
    add_node(client)
    add_app(client, "a1")
    assert post_ask(client, "a1", "pending", 10**9).status_code == 201          # waits
    assert_error(post_ask(client, "a1", "pending", 1000), 409)
    assert post_ask(client, "a1", "done", 1000).json()["allocated"] is True
    assert_error(post_ask(client, "a1", "done", 1000), 409)                      # allocated already
    assert len(client.get(f"{BASE}/asks").json()) == 1


@pytest.mark.parametrize("resource", [{"vcore": -5}, {"vcore": 2**63}, {"vcore": 1.5}, {"vcore": "1"},
                                      {"": 1}])
def test_bad_amounts_are_400(client: TestClient, resource: object) -> None:
    add_app(client, "a1")
    r = client.post(f"{BASE}/application/a1/asks", json={"allocationKey": "k", "resource": resource})
    assert_error(r, 400)
    assert client.get(f"{BASE}/asks").json() == []


@pytest.mark.parametrize("body", [{"resource": {"vcore": 1}}, {"allocationKey": "", "resource": {}},
                                  {"allocationKey": "k", "resource": {"vcore": 1}, "priority": "high"},
                                  {"allocationKey": "k", "resource": {"vcore": 1}, "preemptible": "no"}])
def test_bad_bodies_are_400(client: TestClient, body: dict[str, Any]) -> None:
    add_app(client, "a1")
    assert_error(client.post(f"{BASE}/application/a1/asks", json=body), 400)


def test_tokens_are_required(secured: TestClient) -> None:
    """S2: submit role to post/delete/schedule, read role to list and stream."""
    add_app(secured, "a1")
    assert post_ask(secured, "a1", "k1", 1000, headers={}).status_code == 401
    assert post_ask(secured, "a1", "k1", 1000, headers=READ).status_code == 403
    assert post_ask(secured, "a1", "k1", 1000).status_code == 201
    assert secured.get(f"{BASE}/asks").status_code == 401
    assert secured.get(f"{BASE}/asks", headers=READ).status_code == 200
    assert secured.delete(f"{BASE}/application/a1/ask/k1", headers=READ).status_code == 403
    assert secured.post(f"{BASE}/schedule", headers=READ).status_code == 403
    assert secured.get(f"{BASE}/events/stream?timeout=1").status_code == 401


def _sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Parse server-sent events (comments skipped)."""
    out = []
    for block in text.split("\n\n"):
        lines = [ln for ln in block.splitlines() if ln and not ln.startswith(":")]
        if not lines:
            continue
        fields = dict(ln.split(": ", 1) for ln in lines)
        out.append((fields["event"], json.loads(fields["data"])))
    return out


def _stream_in_thread(c: TestClient, query: str, p: Any, headers: dict[str, str] | None = None
                      ) -> tuple[threading.Thread, dict[str, Any]]:
    """GET the stream from a thread (TestClient answers when the stream ends); wait until it listens."""
    result: dict[str, Any] = {}
    before = p.subscriber_count()

    def run() -> None:
        r = c.get(f"{BASE}/events/stream?{query}", headers=headers or {})
        result["status"], result["type"], result["text"] = (r.status_code, r.headers.get("content-type"),
                                                            r.text)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while p.subscriber_count() <= before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert p.subscriber_count() > before, "the stream never subscribed"
    return t, result


def test_event_stream_delivers_allocations_of_waiting_asks(client: TestClient,
                                                           scheduler: qp.Scheduler) -> None:
    p = scheduler.partition("default")
    idle = p.subscriber_count()              # the service's own subscriber (YuniKorn's event records)
    add_app(client, "a1", "sue", (), "root.small")
    add_app(client, "other")
    add_node(client)
    assert allocate(client, "a1", "k0", 2000).status_code == 201
    assert post_ask(client, "a1", "k1", 2000).json()["allocated"] is False
    t, result = _stream_in_thread(client, "applicationID=a1&types=allocated&max_events=1&timeout=20", p)
    assert post_ask(client, "other", "o1", 1000).json()["allocated"] is True     # filtered out
    assert client.delete(f"{BASE}/allocation/k0", headers=SUBMIT).status_code == 200
    t.join(20)
    assert not t.is_alive()
    assert result["status"] == 200 and result["type"].startswith("text/event-stream")
    ((name, body),) = _sse(result["text"])
    assert (name, body) == ("allocated", {"type": "allocated", "partition": "default", "seq": body["seq"],
                                                   "applicationID": "a1", "allocationKey": "k1",
                                                   "queueName": "root.small",
                                                   "resource": {"vcore": 2000}})
    assert p.subscriber_count() == idle                    # unsubscribed when the stream ended


def test_event_stream_ends_at_its_timeout(client: TestClient, scheduler: qp.Scheduler) -> None:
    p = scheduler.partition("default")
    idle = p.subscriber_count()
    add_app(client, "a1")
    start = time.monotonic()
    t, result = _stream_in_thread(client, "timeout=0.3", p)
    t.join(10)
    assert not t.is_alive() and time.monotonic() - start < 10
    assert result["status"] == 200 and _sse(result["text"]) == []
    assert p.subscriber_count() == idle


def test_event_stream_bad_query_is_400(client: TestClient) -> None:
    assert_error(client.get(f"{BASE}/events/stream?timeout=-1"), 400)
    assert_error(client.get(f"{BASE}/events/stream?max_events=x"), 400)


def test_event_stream_with_an_unknown_type_is_400_naming_it(client: TestClient,
                                                            scheduler: qp.Scheduler) -> None:
    """Found as a new user: ``?types=bogus`` answered 200 and a stream that never sent anything."""
    p = scheduler.partition("default")
    idle = p.subscriber_count()
    r = client.get(f"{BASE}/events/stream?types=allocated,bogus&timeout=1")
    assert_error(r, 400)
    assert "'bogus'" in r.json()["message"] and "budget_warning" in r.json()["message"]
    assert_error(client.get(f"{BASE}/events/stream?types=,&timeout=1"), 400)
    assert p.subscriber_count() == idle


def test_the_timer_runs_cycles_when_automatic_cycles_are_off(client: TestClient,
                                                              scheduler: qp.Scheduler) -> None:
    """The service's scheduling loop (every 0.5 s) runs a cycle when something changed."""
    p = scheduler.partition("default")
    p.auto_schedule = False
    add_app(client, "a1")
    assert post_ask(client, "a1", "k1", 1000).json()["allocated"] is False
    add_node(client)                                   # frees capacity; no cycle runs inline
    assert client.get(f"{BASE}/allocation/k1").status_code == 404
    deadline = time.monotonic() + 10
    while client.get(f"{BASE}/allocation/k1").status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.get(f"{BASE}/allocation/k1").status_code == 200
    assert not p.schedule_needed



def test_a_form_typed_ask_is_refused_with_415(client: TestClient) -> None:
    """curl -d sends application/x-www-form-urlencoded, which a page of any site may also send
    without a preflight: a change in that type is refused, naming what to send (issue 32 item 7)."""
    add_node(client)
    add_app(client, "a1")
    r = client.post(f"{BASE}/application/a1/asks",
                    content=b'{"allocationKey": "form-1", "resource": {"vcore": 1000}}',
                    headers={**SUBMIT, "Content-Type": "application/x-www-form-urlencoded"})
    assert_error(r, 415)
    assert "application/json" in r.json()["message"]
    assert client.get(f"{BASE}/application/a1/asks").json() == []
    r = client.post(f"{BASE}/application/a1/asks",
                    content=b'{"allocationKey": "form-1", "resource": {"vcore": 1000}}',
                    headers={**SUBMIT, "Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 201, r.text


def test_allocation_tags_go_through_rest_into_yunikorns_daos(client: TestClient) -> None:
    """Issue 30 (YuniKorn's clients, bullet 3): allocationTags on an ask and on an allocation are kept
    and shown where YuniKorn's web UI reads them (AllocationDAOInfo, AllocationAskDAOInfo), so it shows
    the pod's name."""
    add_node(client, vcore=2000)
    add_app(client, "a1")
    pod = {"kubernetes.io/meta/namespace": "team-a", "kubernetes.io/meta/podName": "train-0"}
    r = client.post(f"{BASE}/allocations", headers=SUBMIT, json={
        "applicationID": "a1", "allocationKey": "k0", "resource": {"vcore": 1000}, "allocationTags": pod})
    assert r.status_code == 201, r.text
    assert client.get(f"{BASE}/allocation/k0").json()["allocationTags"] == pod
    waiting = {"kubernetes.io/meta/podName": "train-1"}
    r = post_ask(client, "a1", "k1", 5000, allocationTags=waiting)
    assert r.status_code == 201 and r.json()["allocationTags"] == waiting
    app = client.get(f"{BASE}/application/a1", headers=READ).json()
    assert app["allocations"][0]["allocationTags"] == pod
    assert app["requests"][0]["allocationTags"] == waiting
    bad = client.post(f"{BASE}/allocations", headers=SUBMIT, json={
        "applicationID": "a1", "allocationKey": "k2", "resource": {"vcore": 1}, "allocationTags": {"x": 1}})
    assert bad.status_code in (400, 422) and "allocationTags" in bad.text


def test_an_allocation_has_one_wire_form(client: TestClient, scheduler: qp.Scheduler) -> None:
    """Issue 29: GET …/allocation/{key} and the bind answer are the allocation's own record
    (Allocation.to_dict, as the partition's dump and the event stream have it), not a second encoding
    that could drift from it — it lacked the allocation's time."""
    add_node(client)
    add_app(client, "app-1")
    r = client.post("/ws/v1/partition/default/allocations", headers=SUBMIT,
                    json={"applicationID": "app-1", "allocationKey": "k1", "resource": {"vcore": 1000},
                          "allocationTags": {"team": "a"}, "maxRuntime": 60})
    assert r.status_code in (200, 201), r.text
    record = scheduler.partition("default").allocation("k1")
    assert record is not None
    got = client.get("/ws/v1/partition/default/allocation/k1", headers=READ)
    assert got.status_code == 200 and got.json() == record.to_dict()
    assert {"time", "maxRuntime", "allocationTags"} <= set(got.json())
    bound = client.put("/ws/v1/partition/default/allocation/k1/node", headers=SUBMIT, json={"nodeID": "n1"})
    assert bound.status_code == 200 and bound.json() == record.to_dict() and bound.json()["nodeID"] == "n1"
