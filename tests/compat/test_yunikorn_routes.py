"""YuniKorn compatibility (issue 15): every ``/ws/v1`` route of yunikorn-core's ``routes.go`` that
quotaplane serves answers with the ``dao`` shape, validated against schemas written from the Go structs
(``tests/compat/schemas.py``), on real state: nodes (one cordoned), applications in several states,
allocations on nodes, waiting asks with their reasons, placement rules, a history sample, events."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.server.app import create_app
from tests.compat import schemas as S

CONFIG = """
partitions:
- name: default
  placementrules:
  - name: provided
    create: false
  - name: tag
    value: namespace
    create: true
    parent:
      name: fixed
      value: root.tenants
    filter:
      type: deny
      users: [mallory]
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: tenants
      parent: true
    - name: team-a
      resources:
        guaranteed: {vcore: 2}
        max: {vcore: 4, memory: 8Gi}
      limits:
      - limit: per user
        users: ['*']
        maxapplications: 5
    - name: team-b
- name: gpu
  queues:
  - name: root
    submitacl: '*'
"""
ALICE = qp.UserGroup("alice", ("dev",))
BOB = qp.UserGroup("bob", ("ops",))


class _Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[TestClient, qp.Scheduler]]:
    s = qp.Scheduler.from_yaml(CONFIG, clock=_Clock())
    app = create_app(s, history_interval=3600)
    with TestClient(app, raise_server_exceptions=False) as c:
        p = s.partition("default")
        p.add_node("node-1", {"vcore": 8000, "memory": 32 << 30, "pods": 110})
        p.add_node("node-2", {"vcore": 8000, "memory": 32 << 30, "pods": 110})
        p.add_node("node-3", {"vcore": 4000, "memory": 16 << 30, "pods": 110}, schedulable=False)
        p.add_application("app-a", ALICE, queue="root.team-a")
        p.add_application("app-b", BOB, queue="root.team-b")
        p.add_application("done", BOB, queue="root.team-b")
        p.allocate("app-a", "a-1", {"vcore": 1000, "memory": 1 << 30, "pods": 1}, node="node-1")
        p.allocate("app-a", "a-2", {"vcore": 2000, "memory": 2 << 30, "pods": 1}, priority=5)
        p.bind("a-2", "node-2")
        p.allocate("app-b", "b-1", {"vcore": 500, "pods": 1}, node="node-3")
        p.allocate("done", "d-1", {"vcore": 100, "pods": 1})
        p.release("d-1")
        p.add_ask("app-a", "a-wait", {"vcore": 3000, "pods": 1}, priority=7)    # over team-a's max
        app.state.service.history.sample(s.partitions())
        yield c, s
    s.close()


def _check(schema: S.Schema, body: Any) -> None:
    jsonschema.validate(body, schema, cls=jsonschema.Draft202012Validator)


def _get(c: TestClient, path: str, **kw: Any) -> Any:
    r = c.get(path, **kw)
    assert r.status_code == 200, (path, r.status_code, r.text)
    # not YuniKorn's wildcard: no page of another origin may read the answers (issue 32 item 7)
    assert "access-control-allow-origin" not in r.headers
    return r.json()


def test_clusters(world: tuple[TestClient, qp.Scheduler]) -> None:
    body = _get(world[0], "/ws/v1/clusters")
    _check(S.arr(S.CLUSTER), body)
    assert [c["partition"] for c in body] == ["default", "gpu"]
    assert all(c["clusterName"] == "kubernetes" and c["startTime"] > 0 for c in body)


def test_partitions(world: tuple[TestClient, qp.Scheduler]) -> None:
    body = _get(world[0], "/ws/v1/partitions")
    _check(S.arr(S.PARTITION), body)
    d = {p["name"]: p for p in body}["default"]
    assert d["applications"] == {"total": 3, "Running": 1, "Starting": 1, "Completing": 1}
    assert d["totalNodes"] == 3 and d["totalContainers"] == 3
    assert d["capacity"]["capacity"]["vcore"] == 16000            # node-3 is cordoned
    assert d["capacity"]["usedCapacity"]["vcore"] == 3500
    assert d["capacity"]["utilization"]["vcore"] == 21            # 3500 / 16000, whole percent
    assert d["nodeSortingPolicy"]["type"] == "fair"


def test_queues_and_queue_with_pending(world: tuple[TestClient, qp.Scheduler]) -> None:
    c = world[0]
    tree = _get(c, "/ws/v1/partition/default/queues")
    _check(S.QUEUE_TREE, tree)
    one = _get(c, "/ws/v1/partition/default/queue/root.team-a")
    _check(S.QUEUE_TREE, one)
    assert one["pendingResource"] == {"pods": 1, "vcore": 3000}


def test_nodes_and_one_node(world: tuple[TestClient, qp.Scheduler]) -> None:
    c = world[0]
    nodes = _get(c, "/ws/v1/partition/default/nodes")
    _check(S.arr(S.NODE), nodes)
    by_id = {n["nodeID"]: n for n in nodes}
    assert [a["allocationKey"] for a in by_id["node-1"]["allocations"]] == ["a-1"]
    assert by_id["node-2"]["allocations"][0]["priority"] == "5"
    assert by_id["node-3"]["schedulable"] is False and by_id["node-1"]["schedulable"] is True
    one = _get(c, "/ws/v1/partition/default/node/node-2")
    _check(S.NODE, one)
    assert one["allocated"]["vcore"] == 2000 and one["available"]["vcore"] == 6000
    assert one["utilized"]["vcore"] == 25
    r = c.get("/ws/v1/partition/default/node/nope")
    assert r.status_code == 404 and r.json()["message"] == "Node not found"
    _check(S.ERROR, r.json())


def test_queue_applications_and_one_application_both_paths(world: tuple[TestClient, qp.Scheduler]) -> None:
    c = world[0]
    apps = _get(c, "/ws/v1/partition/default/queue/root.team-a/applications")
    _check(S.arr(S.APPLICATION), apps)
    (a,) = apps
    assert a["applicationID"] == "app-a" and a["applicationState"] == "Running"
    assert [x["allocationKey"] for x in a["allocations"]] == ["a-1", "a-2"]
    (ask,) = a["requests"]
    assert ask["allocationKey"] == "a-wait" and ask["priority"] == "7"
    assert ask["allocationLog"] and "queue.max at root.team-a" in ask["allocationLog"][0]["message"]
    assert a["pendingResource"] == {"pods": 1, "vcore": 3000} and a["maxRequestPriority"] == 7
    assert [s["applicationState"] for s in a["stateLog"]] == ["Starting", "Running"]
    assert a["usedResource"]["vcore"] == 3000
    one = _get(c, "/ws/v1/partition/default/application/app-a")
    same = _get(c, "/ws/v1/partition/default/queue/root.team-a/application/app-a")
    _check(S.APPLICATION, one)
    assert one == same
    r = c.get("/ws/v1/partition/default/queue/root.team-b/application/app-a")
    assert r.status_code == 404 and r.json()["message"] == "Application not found"
    r = c.get("/ws/v1/partition/default/queue/root.nope/applications")
    assert r.status_code == 404 and r.json()["message"] == "Queue not found"
    r = c.get("/ws/v1/partition/default/queue/root.b%21d/applications")
    assert r.status_code == 400
    _check(S.ERROR, r.json())


def test_applications_by_state(world: tuple[TestClient, qp.Scheduler]) -> None:
    c = world[0]
    active = _get(c, "/ws/v1/partition/default/applications/active")
    _check(S.arr(S.APPLICATION), active)
    assert sorted(a["applicationID"] for a in active) == ["app-a", "app-b", "done"]
    running = _get(c, "/ws/v1/partition/default/applications/active?status=Running")
    assert [a["applicationID"] for a in running] == ["app-a"]
    assert _get(c, "/ws/v1/partition/default/applications/completed") == []
    assert _get(c, "/ws/v1/partition/default/applications/rejected") == []
    q = _get(c, "/ws/v1/partition/default/queue/root.team-b/applications/active?status=completing")
    assert [a["applicationID"] for a in q] == ["done"]
    for bad in ("/ws/v1/partition/default/applications/weird",
                "/ws/v1/partition/default/applications/active?status=Completed",
                "/ws/v1/partition/default/queue/root.team-b/applications/completed"):
        r = c.get(bad)
        assert r.status_code == 400, bad
        _check(S.ERROR, r.json())


def test_placement_rules(world: tuple[TestClient, qp.Scheduler]) -> None:
    rules = _get(world[0], "/ws/v1/partition/default/placementrules")
    _check(S.RULES, rules)
    assert [r["name"] for r in rules] == ["provided", "tag", "recovery"]
    assert rules[1]["parameters"] == {"tagName": "namespace", "create": "true"}
    assert rules[1]["parentRule"] == {"name": "fixed", "parameters": {
        "queue": "root.tenants", "create": "false", "qualified": "true"}}
    assert rules[1]["filter"] == {"type": "deny", "userList": ["mallory"]}
    assert rules[2] == {"name": "recovery", "parameters": {"queue": "root.@recovery@"}}


def test_history(world: tuple[TestClient, qp.Scheduler]) -> None:
    c = world[0]
    apps = _get(c, "/ws/v1/history/apps")
    _check(S.arr(S.APP_HISTORY), apps)
    assert apps[-1]["totalApplications"] == "1"                   # app-a is Running
    containers = _get(c, "/ws/v1/history/containers")
    _check(S.arr(S.CONTAINER_HISTORY), containers)
    assert containers[-1]["totalContainers"] == "3"


def test_node_utilizations(world: tuple[TestClient, qp.Scheduler]) -> None:
    body = _get(world[0], "/ws/v1/scheduler/node-utilizations")
    _check(S.arr(S.PARTITION_NODES_UTIL), body)
    d = {p["partition"]: p for p in body}["default"]
    vcore = {u["type"]: u for u in d["utilizations"]}["vcore"]["utilization"]
    assert len(vcore) == 10 and vcore[0]["bucketName"] == "0-10%"
    assert vcore[1]["nodeNames"] == ["node-1", "node-3"] and vcore[1]["numOfNodes"] == 2   # 12 %, 12 %
    assert vcore[2]["nodeNames"] == ["node-2"]                                             # 25 %
    assert "nodeNames" not in vcore[0] and "numOfNodes" not in vcore[0]                    # empty


def test_usage_routes(world: tuple[TestClient, qp.Scheduler]) -> None:
    c = world[0]
    users = _get(c, "/ws/v1/partition/default/usage/users")
    for u in users:
        _check(S.USER_USAGE, u)
    _check(S.USER_USAGE, _get(c, "/ws/v1/partition/default/usage/user/alice"))
    for g in _get(c, "/ws/v1/partition/default/usage/groups"):
        _check(S.GROUP_USAGE, g)


def test_healthcheck(world: tuple[TestClient, qp.Scheduler]) -> None:
    body = _get(world[0], "/ws/v1/scheduler/healthcheck")
    _check(S.HEALTH, body)
    assert body["Healthy"] is True


def test_config_yaml_and_json(world: tuple[TestClient, qp.Scheduler]) -> None:
    c = world[0]
    r = c.get("/ws/v1/config")
    assert r.headers["content-type"].startswith("application/x-yaml") and "placementrules" in r.text
    body = _get(c, "/ws/v1/config", headers={"Accept": "application/json"})
    _check(S.CONFIG, body)
    (default, gpu) = body["Partitions"]
    assert default["Name"] == "default" and gpu["Name"] == "gpu"
    team_a = default["Queues"][0]["Queues"][1]
    assert team_a["Name"] == "team-a"
    assert team_a["Resources"] == {"Guaranteed": {"vcore": "2"}, "Max": {"vcore": "4", "memory": "8Gi"}}
    assert team_a["Limits"] == [{"Limit": "per user", "Users": ["*"], "MaxApplications": 5}]
    assert default["PlacementRules"][1]["Parent"] == {"Name": "fixed", "Filter": {"Type": ""},
                                                      "Value": "root.tenants"}
    assert default["PlacementRules"][1]["Filter"] == {"Type": "deny", "Users": ["mallory"]}


def test_validate_conf(world: tuple[TestClient, qp.Scheduler]) -> None:
    c = world[0]
    for body, allowed in ((CONFIG, True), ("", True), ("partitions: [\n", False)):
        r = c.post("/ws/v1/validate-conf", content=body)
        assert r.status_code == 200
        _check(S.VALIDATE, r.json())
        assert r.json()["allowed"] is allowed


def test_metrics_where_yunikorn_serves_them(world: tuple[TestClient, qp.Scheduler]) -> None:
    r = world[0].get("/ws/v1/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert "quotaplane_" in r.text


def test_events_batch(world: tuple[TestClient, qp.Scheduler]) -> None:
    c = world[0]
    body = _get(c, "/ws/v1/events/batch")
    _check(S.EVENT_BATCH, body)
    records = body["EventRecords"]
    assert body["LowestID"] == 0 and body["HighestID"] == len(records) - 1
    allocs = [r for r in records if r.get("eventChangeDetail") == 200]
    assert {r["referenceID"] for r in allocs} == {"a-1", "a-2", "b-1", "d-1"}
    assert all(r["type"] == 2 and r["eventChangeType"] == 2 for r in allocs)
    a1 = next(r for r in allocs if r["referenceID"] == "a-1")
    assert a1["objectID"] == "app-a" and a1["resource"]["resources"]["vcore"] == {"value": 1000}
    part = _get(c, "/ws/v1/events/batch?start=2&count=3")
    assert part["EventRecords"] == records[2:5]
    assert _get(c, f"/ws/v1/events/batch?start={len(records) + 5}")["EventRecords"] is None
    for bad in ("count=0", "count=x", "start=-1"):
        r = c.get(f"/ws/v1/events/batch?{bad}")
        assert r.status_code == 400, bad
        _check(S.ERROR, r.json())


def _stream_lines(c: TestClient, query: str, wanted: int, lines: list[Any]) -> threading.Thread:
    """Read ``wanted`` JSON lines of ``/ws/v1/events/stream?query`` on a thread, then hang up."""
    def read() -> None:
        with c.stream("GET", f"/ws/v1/events/stream?{query}") as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line:
                    lines.append(json.loads(line))
                if len(lines) >= wanted:
                    return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def _wait_streams(c: TestClient, n: int) -> None:
    service = c.app.state.service  # type: ignore[attr-defined]
    deadline = time.monotonic() + 30
    while service.events.stream_count < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_events_stream(world: tuple[TestClient, qp.Scheduler]) -> None:
    """The stream's first line is the instance id, then each new record, as JSON lines."""
    c, s = world
    lines: list[Any] = []
    t = _stream_lines(c, "", 3, lines)
    _wait_streams(c, 1)
    p = s.partition("default")
    p.add_application("late", ALICE, queue="root.team-b")
    p.allocate("late", "late-1", {"vcore": 1, "pods": 1})
    t.join(30)
    assert not t.is_alive()
    _check(S.STREAM_HELLO, lines[0])
    assert lines[0]["InstanceUUID"] == _get(c, "/ws/v1/events/batch")["InstanceUUID"]
    for rec in lines[1:]:
        _check(S.EVENT_RECORD, rec)
    assert [(r["objectID"], r.get("eventChangeDetail")) for r in lines[1:]] == [("late", 203), ("late", 200)]


def test_events_stream_count_replays_the_last_records_then_streams(
        world: tuple[TestClient, qp.Scheduler]) -> None:
    """YuniKorn's ``count`` (``CreateEventStream(name, count)``: "the number of maximum historical
    events from the ring buffer"): the stream first sends the last ``count`` records kept, then every
    new one; it does not stop after ``count`` records (it did, test first)."""
    c, s = world
    history = _get(c, "/ws/v1/events/batch")["EventRecords"]
    lines: list[Any] = []
    t = _stream_lines(c, "count=2", 5, lines)
    _wait_streams(c, 1)
    p = s.partition("default")
    p.add_application("later", ALICE, queue="root.team-b")
    p.allocate("later", "later-1", {"vcore": 1, "pods": 1})
    t.join(30)
    assert not t.is_alive()
    assert lines[1:3] == history[-2:]
    new = [(r["objectID"], r.get("eventChangeDetail")) for r in lines[3:]]
    assert new == [("later", 203), ("later", 200)]
    # more than is kept: everything kept, then the new records
    kept = _get(c, "/ws/v1/events/batch")["EventRecords"]
    more: list[Any] = []
    t = _stream_lines(c, f"count={10**6}", 1 + len(kept), more)
    t.join(30)
    assert not t.is_alive()
    assert more[1:] == kept


def test_errors_and_unknown_routes(world: tuple[TestClient, qp.Scheduler]) -> None:
    c = world[0]
    for path, message in (("/ws/v1/partition/nope/nodes", "Partition not found"),
                          ("/ws/v1/partition/default/application/nope", "Application not found"),
                          ("/ws/v1/partition/nope/applications/active", "Partition not found")):
        r = c.get(path)
        assert r.status_code == 404 and r.json()["message"] == message, path
        _check(S.ERROR, r.json())
    r = c.get("/ws/v1/no-such-route")
    assert (r.status_code, r.text) == (404, "404 page not found\n")


def test_debug_routes_moved_as_yunikorn(world: tuple[TestClient, qp.Scheduler]) -> None:
    """YuniKorn's ``redirectDebug``: /ws/v1/stack and /ws/v1/fullstatedump are 301 to /debug/…;
    there, every thread's stack and the full state (quotaplane's dump)."""
    c, s = world
    for name in ("stack", "fullstatedump"):
        r = c.get(f"/ws/v1/{name}", follow_redirects=False)
        assert (r.status_code, r.headers["location"]) == (301, f"/debug/{name}")
    r = c.get("/ws/v1/stack")
    assert r.status_code == 200 and "thread MainThread" in r.text
    dump = _get(c, "/ws/v1/fullstatedump")
    assert dump["timestamp"] > 0
    assert dump["partitions"]["default"]["allocations"].keys() == s.partition("default").dump_state()[
        "allocations"].keys()
