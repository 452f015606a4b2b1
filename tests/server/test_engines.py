"""Elastic quota and quota tree/forest endpoints (config edits, journalled; reads from the engines)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.server.app import create_app
from tests.server.conftest import CONFIG, add_node, assert_error

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TEAM = """\
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: team-x
  namespace: team-x
spec:
  max: {cpu: 10}
  min: {cpu: 2}
"""


def test_elastic_endpoints_404_without_the_extension(client: TestClient) -> None:
    assert_error(client.get("/ws/v1/partition/default/elasticquotas"), 404)
    assert_error(client.get("/ws/v1/partition/nope/elasticquotas"), 404)


def test_elastic_put_list_get_check_upsert_delete(client: TestClient) -> None:
    add_node(client, vcore=100_000, memory=2**40)
    example = (EXAMPLES / "elastic-quotas.yaml").read_text()
    r = client.put("/ws/v1/partition/default/elasticquotas", content=example)
    assert r.status_code == 200, r.text
    names = [q["name"] for q in r.json()]
    assert "research" in names and "team-a" in names
    # the quotas are part of the journalled configuration now
    assert "elasticquotas" in client.get("/ws/v1/config").text
    team_a = client.get("/ws/v1/partition/default/elasticquota/team-a").json()
    assert team_a["max"]["vcore"] == 100_000 and team_a["parent"] == "research"
    assert_error(client.get("/ws/v1/partition/default/elasticquota/ghost"), 404)
    ok = client.post("/ws/v1/partition/default/elasticquota/team-a/check",
                     json={"resource": {"vcore": 1000}})
    assert ok.status_code == 200 and ok.json() == {"allowed": True, "reasons": []}
    too_much = client.post("/ws/v1/partition/default/elasticquota/team-a/check",
                           json={"resource": {"vcore": 10**9}})
    assert too_much.json()["allowed"] is False and too_much.json()["reasons"]
    # upsert adds a quota and keeps the others
    r = client.post("/ws/v1/partition/default/elasticquotas", content=TEAM)
    assert r.status_code == 200, r.text
    assert {"team-x", "team-a", "research"} <= {q["name"] for q in r.json()}
    # a parent with children cannot go
    assert_error(client.delete("/ws/v1/partition/default/elasticquota/research"), 409)
    assert client.delete("/ws/v1/partition/default/elasticquota/team-x").status_code == 200
    assert_error(client.get("/ws/v1/partition/default/elasticquota/team-x"), 404)


def test_elastic_invalid_quota_is_400_and_changes_nothing(client: TestClient) -> None:
    add_node(client, vcore=100_000)
    assert client.put("/ws/v1/partition/default/elasticquotas", content=TEAM).status_code == 200
    before = client.get("/ws/v1/config").text
    bad = TEAM.replace("min: {cpu: 2}", "min: {cpu: 20}")       # min > max
    assert_error(client.put("/ws/v1/partition/default/elasticquotas", content=bad), 400)
    assert_error(client.put("/ws/v1/partition/default/elasticquotas", content="a: [b"), 400)
    assert_error(client.post("/ws/v1/partition/default/elasticquotas", content="kind: ElasticQuota\n"), 400)
    assert client.get("/ws/v1/config").text == before
    assert client.get("/ws/v1/partition/default/elasticquota/team-x").json()["min"] == {"vcore": 2000}


def test_elastic_admission_through_allocations_and_delete_with_pods_is_409(client: TestClient) -> None:
    add_node(client, vcore=100_000)
    assert client.put("/ws/v1/partition/default/elasticquotas", content=TEAM).status_code == 200
    r = client.post("/ws/v1/partition/default/applications",
                    json={"applicationID": "a1", "user": "sue", "queue": "root.default",
                          "tags": {"namespace": "team-x"}})
    assert r.status_code == 201, r.text
    ok = client.post("/ws/v1/partition/default/allocations",
                     json={"applicationID": "a1", "allocationKey": "k1", "resource": {"vcore": 4000}})
    assert ok.status_code == 201, ok.text
    refused = client.post("/ws/v1/partition/default/allocations",
                          json={"applicationID": "a1", "allocationKey": "k2", "resource": {"vcore": 7000}})
    assert refused.status_code == 409
    assert {v["code"] for v in refused.json()["reasons"]} == {"elastic.runtime"}
    assert client.get("/ws/v1/partition/default/elasticquota/team-x").json()["used"] == {"vcore": 4000}
    assert_error(client.delete("/ws/v1/partition/default/elasticquota/team-x"), 409)


def test_put_config_with_an_invalid_extension_is_400(client: TestClient) -> None:
    bad = CONFIG.replace("  - name: gpu\n", "  - name: gpu\n    elasticquotas: [{kind: ElasticQuota}]\n")
    assert bad != CONFIG
    assert_error(client.put("/ws/v1/config", content=bad), 400)
    assert client.get("/ws/v1/config").text == CONFIG
    # validate-conf runs the same checks
    r = client.post("/ws/v1/validate-conf", content=bad)
    assert r.status_code == 200 and r.json()["allowed"] is False and "elasticquotas" in r.json()["reason"]


# -- quota trees and forests ------------------------------------------------------------------------


def test_quota_tree_and_forest_endpoints(client: TestClient) -> None:
    assert_error(client.get("/ws/v1/quotatrees"), 404)
    tree = (EXAMPLES / "quota-tree.json").read_text()
    assert_error(client.put("/ws/v1/quotatrees/Other", content=tree), 400)      # name mismatch
    assert_error(client.put("/ws/v1/quotatrees/TestTree", content="{nope"), 400)
    r = client.put("/ws/v1/quotatrees/TestTree", content=tree)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["name"] == "TestTree" and body["root"] == "A"
    assert sorted(n["id"] for n in body["nodes"]) == ["A", "B", "C"]
    listing = client.get("/ws/v1/quotatrees").json()
    assert [t["name"] for t in listing["trees"]] == ["TestTree"]
    assert_error(client.get("/ws/v1/quotatrees/Ghost"), 404)
    r = client.put("/ws/v1/forests/F1", json={"trees": ["TestTree"]})
    assert r.status_code == 200, r.text
    assert client.get("/ws/v1/forests").json() == {"F1": ["TestTree"]}
    assert_error(client.put("/ws/v1/forests/F2", json={"trees": []}), 400)
    # a consumer placed through an allocation of a tagged application
    r = client.put("/ws/v1/partition/default/node/n1", json={"capacity": {"cpu": 100, "memory": 2**40}})
    assert r.status_code == 201
    r = client.post("/ws/v1/partition/default/applications",
                    json={"applicationID": "a1", "user": "sue", "queue": "root.default",
                          "tags": {"quotaplane.io/tree.TestTree": "B"}})
    assert r.status_code == 201, r.text
    r = client.post("/ws/v1/partition/default/allocations",
                    json={"applicationID": "a1", "allocationKey": "c1",
                          "resource": {"cpu": 1, "memory": 8}})
    assert r.status_code == 201, r.text
    c = client.get("/ws/v1/quotatrees/TestTree/consumer/c1").json()
    assert c == {"consumerID": "c1", "tree": "TestTree", "allocated": True, "node": "B"}
    assert_error(client.get("/ws/v1/quotatrees/TestTree/consumer/ghost"), 404)
    node_b = next(n for n in client.get("/ws/v1/quotatrees/TestTree").json()["nodes"] if n["id"] == "B")
    assert node_b["consumers"] == ["c1"] and node_b["allocated"] == {"cpu": 1, "memory": 8}


def test_engine_config_survives_a_restart(tmp_path: Path) -> None:
    """Writes on elastic quotas are config events: journalled, restored from the store."""
    store = f"sqlite:///{tmp_path}/s.db"
    s = qp.Scheduler.from_yaml(CONFIG, store=store)
    with TestClient(create_app(s), raise_server_exceptions=False) as c:
        add_node(c, vcore=100_000)
        assert c.put("/ws/v1/partition/default/elasticquotas", content=TEAM).status_code == 200
        text = c.get("/ws/v1/config").text
    s.close()
    from quotaplane.server.main import build_scheduler

    s2 = build_scheduler(None, store)
    try:
        assert s2.config_text == text
        with TestClient(create_app(s2), raise_server_exceptions=False) as c:
            assert c.get("/ws/v1/partition/default/elasticquota/team-x").status_code == 200
    finally:
        s2.close()


# -- timeouts (seed 001 lifecycle) --------------------------------------------------------------------


def test_timeouts_endpoint_and_background_loop_drive_the_lifecycle() -> None:
    """Completing → Completed after the completing timeout: by POST …/timeouts and by the loop."""
    import time as _time

    now = [1000.0]
    s = qp.Scheduler.from_yaml(CONFIG, clock=lambda: now[0])
    # the endpoint first, with a loop too slow to race it; then the loop alone (another app, same
    # scheduler)
    with TestClient(create_app(s, timeouts_interval=3600), raise_server_exceptions=False) as c:
        add_node(c, vcore=16000)
        for app in ("a1", "a2"):
            r = c.post("/ws/v1/partition/default/applications",
                       json={"applicationID": app, "user": "sue", "queue": "root.default"})
            assert r.status_code == 201
            assert c.post("/ws/v1/partition/default/allocations",
                          json={"applicationID": app, "allocationKey": f"{app}-k",
                                "resource": {"vcore": 1}}).status_code == 201
        # an admin-only write: the endpoint runs the due timeouts now
        assert c.delete("/ws/v1/partition/default/allocation/a1-k").status_code == 200
        assert c.get("/ws/v1/partition/default/application/a1").json()["applicationState"] == "Completing"
        assert c.post("/ws/v1/partition/default/timeouts").json() == {"events": []}
        now[0] += 31
        events = c.post("/ws/v1/partition/default/timeouts").json()["events"]
        assert any("a1" in e for e in events)
        assert c.get("/ws/v1/partition/default/application/a1").json()["applicationState"] == "Completed"
    with TestClient(create_app(s, timeouts_interval=0.05), raise_server_exceptions=False) as c:
        # the background loop does the same without being asked
        assert c.delete("/ws/v1/partition/default/allocation/a2-k").status_code == 200
        now[0] += 31
        deadline = _time.monotonic() + 5
        while c.get("/ws/v1/partition/default/application/a2").json()["applicationState"] != "Completed":
            assert _time.monotonic() < deadline, "the timeouts loop did not run"
            _time.sleep(0.05)
        assert_error(c.post("/ws/v1/partition/nope/timeouts"), 404)
    s.close()
