"""In-process tests of every REST endpoint and every error status (TestClient, real Scheduler)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

import quotaplane as qp
from tests.server.conftest import (
    ADMIN,
    CONFIG,
    READ,
    SUBMIT,
    add_app,
    add_node,
    allocate,
    assert_error,
)

# -- health, partitions, config ---------------------------------------------------------------------


def test_healthcheck_yunikorn_shape(client: TestClient) -> None:
    r = client.get("/ws/v1/scheduler/healthcheck")
    assert r.status_code == 200
    # YuniKorn answers every request with Access-Control-Allow-Origin: * (reference §2); quotaplane
    # names only an allowed origin (issue 32 item 7: any page could read and drive the service)
    assert "access-control-allow-origin" not in r.headers
    assert "access-control-allow-origin" not in client.get("/nope").headers
    body = r.json()
    assert body["Healthy"] is True
    assert isinstance(body["HealthChecks"], list) and body["HealthChecks"]
    assert {"Name", "Succeeded", "Description"} <= set(body["HealthChecks"][0])


def test_partitions_list_with_capacity(client: TestClient) -> None:
    add_node(client, "n1", vcore=8000, memory=1000)
    add_node(client, "n2", vcore=2000, memory=24)
    r = client.get("/ws/v1/partitions")
    assert r.status_code == 200
    parts = {p["name"]: p for p in r.json()}
    assert sorted(parts) == ["default", "gpu"]
    d = parts["default"]
    assert d["state"] == "Active"
    assert d["totalNodes"] == 2
    assert d["capacity"]["capacity"] == {"vcore": 10000, "memory": 1024}
    assert "usedCapacity" not in d["capacity"]            # Go's omitempty: an empty map is left out
    assert d["clusterId"] == "quotaplane" and d["preemptionEnabled"] is True
    assert d["nodeSortingPolicy"] == {"type": "fair", "resourceWeights": {"memory": 1.0, "vcore": 1.0}}
    assert "totalNodes" not in parts["gpu"]               # 0: left out


def test_get_config_returns_the_running_yaml(client: TestClient) -> None:
    r = client.get("/ws/v1/config")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/x-yaml")
    assert r.text == CONFIG


def test_put_config_valid_is_applied_at_once(client: TestClient) -> None:
    new = CONFIG.replace("vcore: 4", "vcore: 8")
    assert new != CONFIG
    r = client.put("/ws/v1/config", content=new, headers={"Content-Type": "application/x-yaml"})
    assert r.status_code == 200, r.text
    assert r.json()["applied"] is True
    assert client.get("/ws/v1/config").text == new
    q = client.get("/ws/v1/partition/default/queue/root.small").json()
    assert q["maxResource"] == {"vcore": 8000}


def test_put_config_invalid_is_400_and_nothing_changes(client: TestClient) -> None:
    add_node(client)
    add_app(client)
    assert allocate(client, "app-1", "k1", 1000).status_code == 201
    before_queues = client.get("/ws/v1/partition/default/queues").json()
    bad = CONFIG.replace("name: small", "name: small!!")
    body = assert_error(client.put("/ws/v1/config", content=bad), 400)
    assert "small!!" in body["message"] or "small!!" in body["description"]
    assert client.get("/ws/v1/config").text == CONFIG
    assert client.get("/ws/v1/partition/default/queues").json() == before_queues


def test_put_config_yaml_that_does_not_parse_is_400(client: TestClient) -> None:
    assert_error(client.put("/ws/v1/config", content=b"partitions: [\n  - {name: x"), 400)
    assert_error(client.put("/ws/v1/config", content=b"\xff\xfe\x00"), 400)


# -- validate-conf ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ctype", ["application/x-yaml", "text/plain", "application/json", None,
                                   # what ``curl --data-binary @queues.yaml`` sends (docs/rest.md's example
                                   # answered 415 when found trying it as a new user)
                                   "application/x-www-form-urlencoded"])
def test_validate_conf_valid_whatever_the_content_type(client: TestClient, ctype: str | None) -> None:
    headers = {"Content-Type": ctype} if ctype else {}
    r = client.post("/ws/v1/validate-conf", content=CONFIG, headers=headers)
    assert r.status_code == 200
    assert r.json() == {"allowed": True}


@pytest.mark.parametrize("text", [
    "partitions: [\n  - {name: x",          # does not parse
    "not: a config\n",                       # wrong shape
    CONFIG.replace("name: small", "name: small!!"),
])
def test_validate_conf_invalid_is_200_allowed_false_with_reason(client: TestClient, text: str) -> None:
    r = client.post("/ws/v1/validate-conf", content=text)
    assert r.status_code == 200
    body = r.json()
    assert body["allowed"] is False
    assert body["reason"]


@pytest.mark.parametrize("text", ["", "\n  \n", "# no queues.yaml in the ConfigMap\n"])
def test_validate_conf_of_an_empty_document_is_allowed_as_yunikorn(client: TestClient, text: str) -> None:
    """The k8shim's admission controller sends an empty body when its ConfigMap has no queues.yaml;
    YuniKorn's decoder reads it as a configuration with nothing to check: allowed, no reason."""
    r = client.post("/ws/v1/validate-conf", content=text)
    assert r.status_code == 200 and r.json() == {"allowed": True}


def test_validate_conf_binary_body_is_not_allowed(client: TestClient) -> None:
    r = client.post("/ws/v1/validate-conf", content=b"\xff\xfe\xfa")
    assert r.status_code == 200
    assert r.json()["allowed"] is False


# -- nodes ------------------------------------------------------------------------------------------


def test_node_put_creates_then_updates_and_delete(client: TestClient) -> None:
    url = "/ws/v1/partition/default/node/n1"
    assert client.put(url, json={"capacity": {"vcore": 1000}}).status_code == 201
    r = client.put(url, json={"capacity": {"vcore": 1000}})
    assert r.status_code == 200 and r.json()["capacity"] == {"vcore": 1000}
    r = client.put(url, json={"capacity": {"vcore": 2000}})       # PUT replaces: a new capacity
    assert r.status_code == 200 and r.json()["capacity"] == {"vcore": 2000}
    nodes = client.get("/ws/v1/partition/default/nodes").json()
    assert nodes == [{"nodeID": "n1", "capacity": {"vcore": 2000}, "available": {"vcore": 2000},
                      "schedulable": True, "isReserved": False}]
    r = client.put(url, json={"capacity": {"vcore": 2000}, "schedulable": False})
    assert r.status_code == 200 and r.json()["schedulable"] is False
    root = client.get("/ws/v1/partition/default/queue/root").json()
    assert "maxResource" not in root          # cordoned: the cluster has no capacity left
    assert client.get(url).json()["schedulable"] is False
    assert client.delete(url).status_code == 200
    assert_error(client.get(url), 404)
    assert_error(client.delete(url), 404)
    assert client.get("/ws/v1/partition/default/nodes").json() == []


def test_root_max_follows_the_nodes(client: TestClient) -> None:
    add_node(client, "n1", vcore=3000, memory=10)
    root = client.get("/ws/v1/partition/default/queue/root").json()
    assert root["maxResource"] == {"vcore": 3000, "memory": 10}


@pytest.mark.parametrize("capacity", [
    {"vcore": -1}, {"vcore": 2**63}, {"vcore": 1.5}, {"vcore": "1000"}, {"vcore": True}, {"vcore": None},
    [], "x",
])
def test_node_bad_amounts_are_400(client: TestClient, capacity: object) -> None:
    body = assert_error(client.put("/ws/v1/partition/default/node/n1", json={"capacity": capacity}), 400)
    assert "capacity" in body["description"]
    assert client.get("/ws/v1/partition/default/nodes").json() == []


def test_node_max_int64_is_accepted(client: TestClient) -> None:
    r = client.put("/ws/v1/partition/default/node/big", json={"capacity": {"x": 2**63 - 1}})
    assert r.status_code == 201


def test_node_unknown_partition_is_404(client: TestClient) -> None:
    body = assert_error(client.put("/ws/v1/partition/nope/node/n1", json={"capacity": {"vcore": 1}}), 404)
    assert body["message"] == "Partition not found"


# -- applications -----------------------------------------------------------------------------------


def test_application_submit_list_get_delete(client: TestClient) -> None:
    out = add_app(client, "app-1", "sue", ("dev",), "root.default")
    assert out["applicationID"] == "app-1"
    assert out["queueName"] == "root.default"
    assert out["state"] == "New"
    lst = client.get("/ws/v1/partition/default/applications").json()
    assert [a["applicationID"] for a in lst] == ["app-1"]
    one = client.get("/ws/v1/partition/default/application/app-1").json()
    assert one["queueName"] == "root.default" and "allocations" not in one     # none: left out
    assert (one["applicationID"], one["applicationState"], one["partition"]) == ("app-1", "New", "default")
    assert client.delete("/ws/v1/partition/default/application/app-1").status_code == 200
    assert_error(client.get("/ws/v1/partition/default/application/app-1"), 404)
    assert_error(client.delete("/ws/v1/partition/default/application/app-1"), 404)


def test_application_duplicate_is_409(client: TestClient) -> None:
    add_app(client)
    r = client.post("/ws/v1/partition/default/applications",
                    json={"applicationID": "app-1", "user": "sue", "queue": "root.default"})
    assert_error(r, 409)


def test_application_missing_fields_are_400_not_422(client: TestClient) -> None:
    r = client.post("/ws/v1/partition/default/applications", json={"user": "sue"})
    body = assert_error(r, 400)
    assert "applicationID" in body["description"]


def test_application_extra_field_is_400(client: TestClient) -> None:
    r = client.post("/ws/v1/partition/default/applications",
                    json={"applicationID": "a", "user": "sue", "queue": "root.default", "bogus": 1})
    assert_error(r, 400)


def test_submit_acl_refusal_is_403(client: TestClient) -> None:
    r = client.post("/ws/v1/partition/default/applications",
                    json={"applicationID": "a", "user": "mallory", "queue": "root.restricted"})
    body = assert_error(r, 403)
    assert "acl" in body["message"].lower()
    assert client.get("/ws/v1/partition/default/applications").json() == []


def test_submit_acl_allows_named_user_and_group(client: TestClient) -> None:
    add_app(client, "a1", "alice", (), "root.restricted")
    add_app(client, "a2", "bob", ("ops",), "root.restricted")


def test_admin_acl_on_delete_for_a_named_user(client: TestClient) -> None:
    add_app(client, "a1", "alice", (), "root.restricted")
    url = "/ws/v1/partition/default/application/a1"
    assert_error(client.delete(url, params={"user": "mallory"}), 403)
    assert client.delete(url, params={"user": "boss"}).status_code == 200
    add_app(client, "a2", "alice", (), "root.restricted")
    r = client.delete("/ws/v1/partition/default/application/a2", params={"user": "alice"})
    assert r.status_code == 200


def test_placement_to_a_parent_queue_is_400(client: TestClient) -> None:
    r = client.post("/ws/v1/partition/default/applications",
                    json={"applicationID": "a", "user": "sue", "queue": "root"})
    assert r.status_code in (400, 403), r.text
    assert_error(r, r.status_code)


# -- allocations ------------------------------------------------------------------------------------


def test_allocation_admitted_201_and_refused_409_with_every_reason(client: TestClient) -> None:
    add_node(client, vcore=16000)
    add_app(client, "a1", "sue", (), "root.small")
    r = allocate(client, "a1", "k1", 2000)
    assert r.status_code == 201, r.text
    assert r.json()["allocated"] is True
    assert r.json()["allocationKey"] == "k1"
    r = allocate(client, "a1", "k2", 3000)
    assert r.status_code == 409
    body = r.json()
    assert body["allocated"] is False
    codes = {(v["policy"], v["code"]) for v in body["reasons"]}
    assert ("queue", "queue.max") in codes
    assert ("user", "user.maxresources") in codes
    for v in body["reasons"]:
        assert set(v) == {"policy", "code", "path", "message", "resource"}
    # nothing was counted for the refused one
    q = client.get("/ws/v1/partition/default/queue/root.small").json()
    assert q["allocatedResource"] == {"vcore": 2000}


def test_allocation_unknown_application_404_duplicate_key_409(client: TestClient) -> None:
    add_node(client)
    add_app(client)
    assert_error(allocate(client, "nope", "k1", 1), 404)
    assert allocate(client, "app-1", "k1", 1000).status_code == 201
    assert_error(allocate(client, "app-1", "k1", 1000), 409)
    q = client.get("/ws/v1/partition/default/queue/root.default").json()
    assert q["allocatedResource"] == {"vcore": 1000}


@pytest.mark.parametrize("resource", [{"vcore": -5}, {"vcore": 2**63}, {"vcore": 1.5}, {"vcore": "1"},
                                      {"": 1}])
def test_allocation_bad_amounts_are_400(client: TestClient, resource: object) -> None:
    add_node(client)
    add_app(client)
    r = client.post("/ws/v1/partition/default/allocations",
                    json={"applicationID": "app-1", "allocationKey": "k", "resource": resource})
    assert_error(r, 400)
    assert client.get("/ws/v1/partition/default/allocation/k").status_code == 404


def test_allocation_malformed_json_is_400(client: TestClient) -> None:
    r = client.post("/ws/v1/partition/default/allocations", content=b"{not json",
                    headers={"Content-Type": "application/json"})
    body = assert_error(r, 400)
    assert "JSON" in body["message"]


def test_allocation_get_and_release(client: TestClient) -> None:
    add_node(client)
    add_app(client)
    assert allocate(client, "app-1", "k1", 1000).status_code == 201
    a = client.get("/ws/v1/partition/default/allocation/k1").json()
    assert a["resource"] == {"vcore": 1000} and a["applicationID"] == "app-1"
    assert client.delete("/ws/v1/partition/default/allocation/k1").status_code == 200
    assert_error(client.delete("/ws/v1/partition/default/allocation/k1"), 404)
    assert_error(client.get("/ws/v1/partition/default/allocation/k1"), 404)
    q = client.get("/ws/v1/partition/default/queue/root.default").json()
    assert "allocatedResource" not in q or not q["allocatedResource"].get("vcore")


def test_release_by_named_user_needs_owner_or_admin(client: TestClient) -> None:
    add_node(client)
    add_app(client, "a1", "alice", (), "root.restricted")
    assert allocate(client, "a1", "k1", 10).status_code == 201
    url = "/ws/v1/partition/default/allocation/k1"
    assert_error(client.delete(url, params={"user": "mallory"}), 403)
    assert client.delete(url, params={"user": "alice"}).status_code == 200


def test_batch_decision_per_entry_in_order(client: TestClient) -> None:
    add_node(client, vcore=16000)
    add_app(client, "a1", "sue", (), "root.small")
    entries = [{"applicationID": "a1", "allocationKey": f"k{i}", "resource": {"vcore": 1000}}
               for i in range(4)]
    r = client.post("/ws/v1/partition/default/allocations/batch", json={"allocations": entries})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [d["allocated"] for d in body["decisions"]] == [True, True, False, False]
    assert [d["allocationKey"] for d in body["decisions"]] == ["k0", "k1", "k2", "k3"]
    assert body["allocated"] == 2 and body["refused"] == 2
    assert body["decisions"][2]["reasons"][0]["code"] == "user.maxresources"


def test_batch_with_unknown_application_changes_nothing(client: TestClient) -> None:
    add_node(client)
    add_app(client)
    entries = [{"applicationID": "app-1", "allocationKey": "k1", "resource": {"vcore": 1}},
               {"applicationID": "ghost", "allocationKey": "k2", "resource": {"vcore": 1}}]
    r = client.post("/ws/v1/partition/default/allocations/batch", json={"allocations": entries})
    assert_error(r, 404)
    assert_error(client.get("/ws/v1/partition/default/allocation/k1"), 404)


def test_batch_duplicate_keys_is_409(client: TestClient) -> None:
    add_node(client)
    add_app(client)
    e = {"applicationID": "app-1", "allocationKey": "k1", "resource": {"vcore": 1}}
    assert_error(client.post("/ws/v1/partition/default/allocations/batch", json={"allocations": [e, e]}), 409)


def test_whatif_changes_nothing(client: TestClient) -> None:
    add_node(client, vcore=16000)
    add_app(client, "a1", "sue", (), "root.small")
    r = client.post("/ws/v1/partition/default/whatif",
                    json={"applicationID": "a1", "resource": {"vcore": 3000}})
    assert r.status_code == 200
    assert r.json()["allocated"] is False
    assert {v["code"] for v in r.json()["reasons"]} >= {"user.maxresources"}
    r = client.post("/ws/v1/partition/default/whatif",
                    json={"applicationID": "a1", "allocationKey": "probe", "resource": {"vcore": 1000}})
    assert r.status_code == 200 and r.json()["allocated"] is True
    assert client.get("/ws/v1/partition/default/allocation/probe").status_code == 404
    assert client.get("/ws/v1/partition/default/usage/users").json() == []
    assert_error(client.post("/ws/v1/partition/default/whatif",
                             json={"applicationID": "ghost", "resource": {"vcore": 1}}), 404)


# -- YuniKorn queues and usage ----------------------------------------------------------------------


def test_queues_full_tree_and_single_queue_subtree(client: TestClient) -> None:
    top = client.get("/ws/v1/partition/default/queues").json()
    assert top["queuename"] == "root"
    assert top["partition"] == "default"
    children = sorted(c["queuename"] for c in top["children"])
    assert children == ["root.default", "root.restricted", "root.small"]
    one = client.get("/ws/v1/partition/default/queue/root").json()
    assert "children" not in one
    sub = client.get("/ws/v1/partition/default/queue/root?subtree").json()
    assert len(sub["children"]) == 3
    small = client.get("/ws/v1/partition/default/queue/ROOT.SMALL").json()
    assert small["queuename"] == "root.small" and small["maxResource"] == {"vcore": 4000}


def test_queue_errors(client: TestClient) -> None:
    body = assert_error(client.get("/ws/v1/partition/default/queue/root.nope"), 404)
    assert body["message"] == "Queue not found"
    assert_error(client.get("/ws/v1/partition/default/queue/root.b%20ad"), 400)
    assert assert_error(client.get("/ws/v1/partition/nope/queues"), 404)["message"] == "Partition not found"
    assert_error(client.get("/ws/v1/partition/nope/queue/root"), 404)


def test_usage_users_and_groups_yunikorn_shape(client: TestClient) -> None:
    add_node(client)
    assert client.get("/ws/v1/partition/default/usage/users").json() == []
    assert client.get("/ws/v1/partition/default/usage/groups").json() == []
    add_app(client, "app-1", "testuser", ("testgroup",), "root.default")
    assert allocate(client, "app-1", "k1", 1).status_code == 201
    users = client.get("/ws/v1/partition/default/usage/users").json()
    assert [u["userName"] for u in users] == ["testuser"]
    u = client.get("/ws/v1/partition/default/usage/user/testuser").json()
    assert u["userName"] == "testuser"
    assert u["queues"]["queuePath"] == "root"
    assert u["queues"]["resourceUsage"] == {"vcore": 1}
    assert u["queues"]["runningApplications"] == ["app-1"]
    child = u["queues"]["children"][0]
    assert child["queuePath"] == "root.default" and child["resourceUsage"] == {"vcore": 1}


def test_usage_errors(client: TestClient) -> None:
    body = assert_error(client.get("/ws/v1/partition/default/usage/user/ghost"), 404)
    assert body["message"] == "User not found"
    assert assert_error(client.get("/ws/v1/partition/default/usage/user/1bad"), 400)["message"] == \
        "Invalid user name"
    assert assert_error(client.get("/ws/v1/partition/default/usage/group/ghost"), 404)["message"] == \
        "Group not found"
    # reference §2.1: "*" fails the group regexp
    assert assert_error(client.get("/ws/v1/partition/default/usage/group/%2A"), 400)["message"] == \
        "Invalid group name"
    for path in ("usage/users", "usage/groups", "usage/user/x", "usage/group/x"):
        assert_error(client.get(f"/ws/v1/partition/nope/{path}"), 404)


def test_usage_partition_is_honoured(client: TestClient) -> None:
    """Decision U3: one manager per partition; the REST partition parameter is honoured."""
    add_node(client)
    add_app(client, "app-1", "sue", (), "root.default")
    assert allocate(client, "app-1", "k1", 5).status_code == 201
    assert client.get("/ws/v1/partition/gpu/usage/users").json() == []
    assert client.get("/ws/v1/partition/default/usage/users").json() != []


# -- generic errors ---------------------------------------------------------------------------------


def test_unknown_route_and_method_answer_as_yunikorns_router(client: TestClient) -> None:
    """httprouter with Go's defaults: an unknown path is ``http.NotFound`` (plain text), a known path
    with another method is 405 with ``Allow``; errors of known routes keep the JSON error body."""
    r = client.get("/ws/v1/nothing-here")
    assert (r.status_code, r.text, r.headers["content-type"]) == (404, "404 page not found\n",
                                                                  "text/plain; charset=utf-8")
    r = client.delete("/ws/v1/partitions")
    assert (r.status_code, r.text, r.headers["allow"]) == (405, "Method Not Allowed\n", "GET")
    assert_error(client.get("/ws/v1/partition/nope/queues"), 404)


def test_metrics_exposes_decisions_usage_and_latency(client: TestClient) -> None:
    add_node(client, vcore=16000)
    add_app(client, "a1", "sue", (), "root.small")
    assert allocate(client, "a1", "k1", 2000).status_code == 201
    assert allocate(client, "a1", "k2", 3000).status_code == 409
    r = client.get("/metrics")
    assert r.status_code == 200
    text = r.text
    assert 'quotaplane_admission_decisions_total{reason="none",result="allocated"} 1.0' in text
    # one refusal counts once, with its first reason code (however many policies refused it)
    refused = [ln for ln in text.splitlines() if ln.startswith("quotaplane_admission_decisions_total{")
               and 'result="refused"' in ln]
    assert refused == ['quotaplane_admission_decisions_total{reason="queue.max",result="refused"} 1.0']
    assert 'quotaplane_admission_duration_seconds_count 2.0' in text
    assert ('quotaplane_queue_resource{partition="default",queue="root.small",resource="vcore",'
            'state="allocated"} 2000.0' in text)
    assert 'quotaplane_build_info{python="' in text and "process_cpu_seconds_total" in text
    assert "python_info{" in text
    assert 'quotaplane_user_usage{partition="default",resource="vcore",user="sue"} 2000.0' in text
    assert "quotaplane_http_request_duration_seconds_bucket" in text
    assert 'route="/ws/v1/partition/{partition}/allocations"' in text
    # node, application and the admitted allocation were journalled (the refusal was not)
    count = next(line for line in text.splitlines()
                 if line.startswith("quotaplane_journal_write_seconds_count"))
    assert float(count.split()[-1]) == 3.0
    # a waiting ask is pending demand of its queue and every ancestor (YuniKorn pendingResource)
    r = client.post("/ws/v1/partition/default/application/a1/asks",
                    json={"allocationKey": "w1", "resource": {"vcore": 3000}}, headers=SUBMIT)
    assert r.status_code == 201 and r.json()["allocated"] is False
    text = client.get("/metrics").text
    for queue in ("root", "root.small"):
        assert (f'quotaplane_queue_resource{{partition="default",queue="{queue}",resource="vcore",'
                f'state="pending"}} 3000.0' in text)
    assert 'quotaplane_queue_pending_asks{partition="default",queue="root.small"} 1.0' in text


def test_library_state_matches_rest(client: TestClient, scheduler: qp.Scheduler) -> None:
    add_node(client)
    add_app(client)
    assert allocate(client, "app-1", "k1", 700).status_code == 201
    p = scheduler.partition("default")
    assert p.allocation("k1") is not None
    assert p.used_capacity() == {"vcore": 700}


def test_openapi_has_no_422_and_documents_errors(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    for path, item in doc["paths"].items():
        for method, op in item.items():
            assert "422" not in op["responses"], (path, method)
            assert "400" in op["responses"], (path, method)


# -- tokens -----------------------------------------------------------------------------------------


def test_tokens_missing_wrong_and_weak_roles(secured: TestClient) -> None:
    url = "/ws/v1/partition/default/node/n1"
    body = {"capacity": {"vcore": 1}}
    r = secured.put(url, json=body)
    assert_error(r, 401)
    assert r.headers["www-authenticate"] == "Bearer"
    assert_error(secured.put(url, json=body, headers={"Authorization": "Bearer nope"}), 401)
    assert_error(secured.put(url, json=body, headers=SUBMIT), 403)
    assert_error(secured.put(url, json=body, headers=READ), 403)
    assert secured.put(url, json=body, headers=ADMIN).status_code == 201
    # reads need at least the read role; health stays open for probes
    assert_error(secured.get("/ws/v1/partitions"), 401)
    assert secured.get("/ws/v1/partitions", headers=READ).status_code == 200
    assert secured.get("/ws/v1/scheduler/healthcheck").status_code == 200
    # submit may submit; read may not
    app = {"applicationID": "a", "user": "sue", "queue": "root.default"}
    assert_error(secured.post("/ws/v1/partition/default/applications", json=app, headers=READ), 403)
    assert secured.post("/ws/v1/partition/default/applications", json=app, headers=SUBMIT).status_code == 201
    # config is admin only
    assert_error(secured.put("/ws/v1/config", content=CONFIG, headers=SUBMIT), 403)
    assert secured.put("/ws/v1/config", content=CONFIG, headers=ADMIN).status_code == 200


def test_integral_float_amount_is_an_integer(client: TestClient) -> None:
    """JSON Schema's integer includes 2.0; it counts as 2 (a fraction, a string or a bool is 400)."""
    r = client.put("/ws/v1/partition/default/node/n1", json={"capacity": {"vcore": 2000.0}})
    assert r.status_code == 201
    assert client.get("/ws/v1/partition/default/nodes").json()[0]["capacity"] == {"vcore": 2000}


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(("resource", "value", "expected"), [
    ("memory", "4Gi", '"4Gi" is not an integer: memory is a JSON integer of bytes ("4Gi" is 4294967296)'),
    ("vcore", "500m", '"500m" is not an integer: vcore is a JSON integer of milli-cores ("500m" is 500)'),
    ("vcore", 1.5, "1.5 is not an integer: vcore is a JSON integer of milli-cores (1.5 cores is 1500)"),
    ("nvidia.com/gpu", "2", '"2" is not an integer: nvidia.com/gpu is a JSON integer count ("2" is 2)'),
    ("memory", "lots", '"lots" is not an integer: memory is a JSON integer of bytes'),
    ("pods", True, "true is not an integer: pods is a JSON integer count"),
])
def test_amount_given_as_a_string_names_the_value_and_the_unit(
        resource: str, value: object, expected: str, fast: bool) -> None:
    """A user writing ``"4Gi"`` where the API wants an integer is told the value, the unit and the
    integer to send, on the allocation fast path and the routes alike (found trying the product)."""
    from quotaplane.server.app import create_app

    s = qp.Scheduler.from_yaml(CONFIG)
    with TestClient(create_app(s, fast_path=fast), raise_server_exceptions=False) as c:
        r = c.put("/ws/v1/partition/default/node/n1", json={"capacity": {resource: value}})
        assert_error(r, 400)
        assert r.json()["message"] == f"capacity.{resource}: {expected}"
        add_node(c)
        assert c.post("/ws/v1/partition/default/applications",
                      json={"applicationID": "a", "user": "sue", "queue": "root.default"}).status_code == 201
        r = c.post("/ws/v1/partition/default/allocations",
                   json={"applicationID": "a", "allocationKey": "k", "resource": {resource: value}})
        assert_error(r, 400)
        assert r.json()["message"] == f"resource.{resource}: {expected}"
        assert c.get("/ws/v1/partition/default/application/a").json().get("allocations") in ([], None)
    s.close()


@pytest.mark.parametrize("tokens", [None, {"submit": ["s"], "read": ["r"]}])
def test_allocation_fast_path_answers_exactly_like_the_route(tokens: dict | None) -> None:
    """The middleware fast path for POST …/allocations and the FastAPI route give the same answers."""
    from quotaplane.server.app import create_app
    from quotaplane.server.auth import Tokens

    def run(fast: bool) -> list[tuple[int, object]]:
        s = qp.Scheduler.from_yaml(CONFIG)
        p = s.partition("default")
        p.add_node("n1", qp.Resource({"vcore": 16000}))
        p.add_application("a1", qp.UserGroup("sue"), queue="root.small")
        app = create_app(s, tokens=Tokens(tokens) if tokens else None, fast_path=fast)
        out = []
        with TestClient(app, raise_server_exceptions=False) as c:
            hdr = {"Authorization": "Bearer s"}
            url = "/ws/v1/partition/default/allocations"
            body = {"applicationID": "a1", "allocationKey": "k1", "resource": {"vcore": 1000}}
            for req in [
                dict(json=body, headers=hdr),
                dict(json=body, headers=hdr),                                          # duplicate
                dict(json={**body, "allocationKey": "k2", "resource": {"vcore": 9000}}, headers=hdr),
                dict(json={**body, "applicationID": "ghost", "allocationKey": "k3"}, headers=hdr),
                dict(json={**body, "resource": {"vcore": -1}}, headers=hdr),
                dict(content=b"{bad", headers=hdr),
                dict(json=body),                                                        # no token
                dict(json=body, headers={"Authorization": "Bearer r"}),                 # weak role
            ]:
                r = c.post(url, **req)
                out.append((r.status_code, r.json()))
            r = c.post("/ws/v1/partition/nope/allocations", json=body, headers=hdr)
            out.append((r.status_code, r.json()))
            metrics = c.get("/metrics", headers={"Authorization": "Bearer r"}).text
            out.append((0, 'route="/ws/v1/partition/{partition}/allocations"' in metrics))
        s.close()
        return out

    fast, slow = run(True), run(False)
    assert fast == slow
    assert [code for code, _ in fast][:4] == [201, 409, 409, 404]


def test_last_resort_handler_answers_the_error_body(client: TestClient, scheduler: qp.Scheduler,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """An unexpected exception inside a route is a 500 with the error body, never a bare 500 and
    never the exception's text (issue 14 #3: a server fault is not the caller's)."""
    def boom() -> None:
        raise RuntimeError("unexpected")

    monkeypatch.setattr(scheduler.partition("default"), "nodes", boom)
    r = client.get("/ws/v1/partition/default/nodes")
    body = assert_error(r, 500)
    assert body["message"] == "internal server error"
    assert "RuntimeError" not in r.text and "unexpected" not in r.text


def test_rejection_status_403_only_for_acl() -> None:
    """S2: an ACL refusal is 403; any other rejection (placement) is 400, whatever the queue's name."""
    from quotaplane.errors import RejectedError
    from quotaplane.server.errors import status_for

    assert status_for(RejectedError("user 'm' may not submit to queue 'root.x' (submit ACL)")) == 403
    assert status_for(RejectedError("no placement rule matched for queue root.accessories")) == 400


def test_allocations_name_their_node_and_nodes_list_them(client: TestClient) -> None:
    """Issue 15 #2 over REST: an allocation given with ``nodeID`` or bound later appears on the node
    (YuniKorn's NodeDAOInfo: allocated, available, utilized, allocations); deleting the node releases it."""
    add_node(client, "n1", vcore=4000)
    add_node(client, "n2", vcore=4000)
    r = client.post("/ws/v1/partition/default/applications",
                    json={"applicationID": "app", "user": "alice", "queue": "root.default"})
    assert r.status_code == 201
    r = client.post("/ws/v1/partition/default/allocations",
                    json={"applicationID": "app", "allocationKey": "k1", "resource": {"vcore": 1000},
                          "nodeID": "n1"})
    assert r.status_code == 201, r.text
    r = client.post("/ws/v1/partition/default/allocations",
                    json={"applicationID": "app", "allocationKey": "k2", "resource": {"vcore": 3000}})
    assert r.status_code == 201, r.text
    assert_error(client.post("/ws/v1/partition/default/allocations",
                             json={"applicationID": "app", "allocationKey": "k3", "resource": {"vcore": 1},
                                   "nodeID": "nope"}), 404)
    r = client.put("/ws/v1/partition/default/allocation/k2/node", json={"nodeID": "n1"})
    assert r.status_code == 200 and r.json()["nodeID"] == "n1"
    assert_error(client.put("/ws/v1/partition/default/allocation/k2/node", json={"nodeID": "nope"}), 404)
    assert_error(client.put("/ws/v1/partition/default/allocation/kx/node", json={"nodeID": "n1"}), 404)
    node = client.get("/ws/v1/partition/default/node/n1").json()
    assert node["allocated"] == {"vcore": 4000}
    assert "vcore" not in node["available"]          # all used: pruned, as refreshAvailableResource does
    assert node["utilized"] == {"vcore": 100}
    got = [(a["allocationKey"], a["nodeId"], a["applicationId"], a["priority"]) for a in node["allocations"]]
    assert got == [("k1", "n1", "app", "0"), ("k2", "n1", "app", "0")]
    assert "allocations" not in client.get("/ws/v1/partition/default/node/n2").json()
    assert client.delete("/ws/v1/partition/default/node/n1").status_code == 200
    assert_error(client.get("/ws/v1/partition/default/allocation/k1"), 404)
    assert client.get("/ws/v1/partition/default/application/app").json()["applicationState"] == "Completing"


def test_a_503_never_shows_lease_holder_ids() -> None:
    """The journal's fencing refusal names both holders, ``<URL>#<instance id>``: the answer gives
    the leader's URL and no instance id (issue 32 item 12)."""
    import json as _json

    from quotaplane.errors import NotLeaderError
    from quotaplane.server.errors import exception_response

    err = NotLeaderError("'http://127.0.0.1:9081#0a1b2c3d4e5f' does not hold the lease of stream 'default' "
                         "(held by 'http://127.0.0.1:9082#abcdef012345')", leader="http://127.0.0.1:9082#abcdef012345")
    resp = exception_response(err)
    body = _json.loads(bytes(resp.body))
    assert resp.status_code == 503 and body["leader"] == "http://127.0.0.1:9082"
    text = _json.dumps(body)
    assert "0a1b2c3d4e5f" not in text and "abcdef012345" not in text and "#" not in text
