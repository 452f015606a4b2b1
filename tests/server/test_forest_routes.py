"""Issue 7: every quota forest operation over REST (mode, deletes, forest membership, node reads and
tree definition edits), with the error statuses of each route."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.server.app import create_app
from quotaplane.server.auth import Tokens
from tests.forest.helpers import tree_doc
from tests.server.conftest import ADMIN, CONFIG, READ, SUBMIT, TOKENS, add_node, assert_error

T1 = json.loads(tree_doc("T1", {"root": ("", True, {"vcore": 8000}), "a": ("root", True, {"vcore": 4000}),
                                "b": ("root", True, {"vcore": 4000})}, ("vcore",)))
T2 = json.loads(tree_doc("T2", {"top": ("", True, {"vcore": 8000}), "c": ("top", True, {"vcore": 8000})},
                         ("vcore",)))


@pytest.fixture
def fc() -> Iterator[TestClient]:
    """A secured client whose default partition holds trees T1, T2 and forest F = [T1, T2]."""
    s = qp.Scheduler.from_yaml(CONFIG)
    with TestClient(create_app(s, tokens=Tokens(TOKENS)), raise_server_exceptions=False) as c:
        for doc in (T1, T2):
            r = c.put(f"/ws/v1/quotatrees/{doc['metadata']['name']}", json=doc, headers=ADMIN)
            assert r.status_code == 200, r.text
        assert c.put("/ws/v1/forests/F", json={"trees": ["T1", "T2"]}, headers=ADMIN).status_code == 200
        add_node(c, vcore=64000)
        yield c
    s.close()


def alloc(c: TestClient, app: str, key: str, vcore: int, **tags: str) -> None:
    r = c.post("/ws/v1/partition/default/applications",
               json={"applicationID": app, "user": "sue", "queue": "root.default", "tags": tags},
               headers=SUBMIT)
    assert r.status_code == 201, r.text
    r = c.post("/ws/v1/partition/default/allocations",
               json={"applicationID": app, "allocationKey": key, "resource": {"vcore": vcore}},
               headers=SUBMIT)
    assert r.status_code == 201, r.text


def release(c: TestClient, key: str) -> None:
    r = c.delete(f"/ws/v1/partition/default/allocation/{key}", headers=SUBMIT)
    assert r.status_code in (200, 204), r.text


# -- mode ----------------------------------------------------------------------------------------------


def test_mode_get_and_set(fc: TestClient) -> None:
    assert fc.get("/ws/v1/quotamode", headers=READ).json() == {"mode": "normal"}
    r = fc.put("/ws/v1/quotamode", json={"mode": "maintenance"}, headers=ADMIN)
    assert r.status_code == 200 and r.json() == {"mode": "maintenance"}
    assert fc.get("/ws/v1/quotatrees", headers=READ).json()["mode"] == "maintenance"
    assert "mode: maintenance" in fc.get("/ws/v1/config", headers=READ).text
    assert_error(fc.put("/ws/v1/quotamode", json={"mode": "sleepy"}, headers=ADMIN), 400)
    assert_error(fc.put("/ws/v1/quotamode", content="{nope", headers=ADMIN), 400)
    assert_error(fc.put("/ws/v1/quotamode", json={"mode": "normal"}, headers=READ), 403)
    assert_error(fc.put("/ws/v1/quotamode", json={"mode": "normal"}), 401)
    assert_error(fc.get("/ws/v1/quotamode?partition=gpu", headers=READ), 404)
    assert_error(fc.put("/ws/v1/quotamode?partition=nope", json={"mode": "normal"}, headers=ADMIN), 404)


# -- trees ---------------------------------------------------------------------------------------------


def test_delete_tree(fc: TestClient) -> None:
    alloc(fc, "app-1", "k1", 1000, **{"quotaplane.io/tree.T1": "a"})
    body = assert_error(fc.delete("/ws/v1/quotatrees/T1", headers=ADMIN), 409)
    assert "T1" in body["message"]
    assert [t["name"] for t in fc.get("/ws/v1/quotatrees", headers=READ).json()["trees"]] == ["T1", "T2"]
    assert_error(fc.delete("/ws/v1/quotatrees/Ghost", headers=ADMIN), 404)
    assert_error(fc.delete("/ws/v1/quotatrees/T2", headers=READ), 403)
    r = fc.delete("/ws/v1/quotatrees/T2", headers=ADMIN)
    assert r.status_code == 200, r.text
    assert [t["name"] for t in r.json()["trees"]] == ["T1"]
    assert fc.get("/ws/v1/forests", headers=READ).json() == {"F": ["T1"]}
    release(fc, "k1")
    assert fc.delete("/ws/v1/quotatrees/T1", headers=ADMIN).status_code == 200
    assert fc.get("/ws/v1/quotatrees", headers=READ).json()["trees"] == []
    assert "T1" not in fc.get("/ws/v1/config", headers=READ).text


def test_node_read(fc: TestClient) -> None:
    alloc(fc, "app-1", "k1", 1500, **{"quotaplane.io/tree.T1": "a"})
    r = fc.get("/ws/v1/quotatrees/T1/node/a", headers=READ)
    assert r.status_code == 200
    assert r.json() == {"id": "a", "quota": {"vcore": 4000}, "allocated": {"vcore": 1500},
                        "consumers": ["k1"]}
    root = fc.get("/ws/v1/quotatrees/T1/node/root", headers=READ).json()
    assert root["allocated"] == {"vcore": 1500} and root["consumers"] == []
    assert_error(fc.get("/ws/v1/quotatrees/T1/node/zz", headers=READ), 404)
    assert_error(fc.get("/ws/v1/quotatrees/Ghost/node/a", headers=READ), 404)


def test_put_and_delete_node_report_unallocated(fc: TestClient) -> None:
    alloc(fc, "app-1", "k1", 1000, **{"quotaplane.io/tree.T2": "c"})
    r = fc.put("/ws/v1/quotatrees/T1/node/d",
               json={"parent": "a", "hard": "false", "quota": {"vcore": "500"}}, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["unallocated"] == []
    node_d = next(n for n in r.json()["tree"]["nodes"] if n["id"] == "d")
    assert node_d["quota"] == {"vcore": 500}
    assert fc.get("/ws/v1/quotatrees/T1/node/d", headers=READ).status_code == 200
    assert fc.delete("/ws/v1/quotatrees/T1/node/d", headers=ADMIN).json()["unallocated"] == []
    assert_error(fc.get("/ws/v1/quotatrees/T1/node/d", headers=READ), 404)
    # deleting T2's root leaves no root: the consumer has nowhere to go, it is released (§7)
    assert fc.delete("/ws/v1/quotatrees/T2/node/c", headers=ADMIN).status_code == 200
    r = fc.delete("/ws/v1/quotatrees/T2/node/top", headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["unallocated"] == ["k1"]
    assert_error(fc.get("/ws/v1/partition/default/allocation/k1", headers=READ), 404)
    # errors
    assert_error(fc.delete("/ws/v1/quotatrees/T1/node/zz", headers=ADMIN), 404)
    assert_error(fc.put("/ws/v1/quotatrees/Ghost/node/x", json={"quota": {"vcore": 1}}, headers=ADMIN), 404)
    assert_error(fc.put("/ws/v1/quotatrees/T1/node/x", content="{nope", headers=ADMIN), 400)
    assert_error(fc.put("/ws/v1/quotatrees/T1/node/x", json=[1], headers=ADMIN), 400)
    before = fc.get("/ws/v1/config", headers=READ).text
    assert_error(fc.put("/ws/v1/quotatrees/T1/node/x", json={"parent": "a"}, headers=ADMIN), 400)  # no quota
    assert fc.get("/ws/v1/config", headers=READ).text == before
    assert_error(fc.put("/ws/v1/quotatrees/T1/node/x", json={"quota": {"vcore": 1}}, headers=READ), 403)


def test_rename_node(fc: TestClient) -> None:
    r = fc.post("/ws/v1/quotatrees/T1/node/a/rename", json={"name": "alpha"}, headers=ADMIN)
    assert r.status_code == 200, r.text
    ids = sorted(n["id"] for n in r.json()["tree"]["nodes"])
    assert ids == ["alpha", "b", "root"]
    assert_error(fc.post("/ws/v1/quotatrees/T1/node/root/rename", json={"name": "b"}, headers=ADMIN), 409)
    # children follow the renamed node
    assert fc.post("/ws/v1/quotatrees/T1/node/root/rename", json={"name": "top"},
                   headers=ADMIN).status_code == 200
    assert fc.get("/ws/v1/quotatrees/T1", headers=READ).json()["root"] == "top"
    assert fc.get("/ws/v1/quotatrees/T1/node/alpha", headers=READ).json()["quota"] == {"vcore": 4000}
    assert_error(fc.post("/ws/v1/quotatrees/T1/node/zz/rename", json={"name": "y"}, headers=ADMIN), 404)
    assert_error(fc.post("/ws/v1/quotatrees/T1/node/b/rename", json={"name": ""}, headers=ADMIN), 400)
    assert_error(fc.post("/ws/v1/quotatrees/T1/node/b/rename", content="{", headers=ADMIN), 400)


def test_resource_names(fc: TestClient) -> None:
    r = fc.put("/ws/v1/quotatrees/T1/resource/memory", headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["tree"]["resource_names"] == ["memory", "vcore"]
    assert fc.put("/ws/v1/quotatrees/T1/resource/memory", headers=ADMIN).status_code == 200   # idempotent
    r = fc.delete("/ws/v1/quotatrees/T1/resource/memory", headers=ADMIN)
    assert r.status_code == 200 and r.json()["tree"]["resource_names"] == ["vcore"]
    assert_error(fc.delete("/ws/v1/quotatrees/T1/resource/memory", headers=ADMIN), 404)
    assert_error(fc.put("/ws/v1/quotatrees/Ghost/resource/memory", headers=ADMIN), 404)


# -- forests -------------------------------------------------------------------------------------------


def test_get_and_delete_forest(fc: TestClient) -> None:
    assert fc.get("/ws/v1/forests/F", headers=READ).json() == {"forest": "F", "trees": ["T1", "T2"]}
    assert_error(fc.get("/ws/v1/forests/G", headers=READ), 404)
    alloc(fc, "app-1", "k1", 1000, **{"quotaplane.io/tree.T1": "a", "quotaplane.io/tree.T2": "c",
                                      "quotaplane.io/forest": "F"})
    c = fc.get("/ws/v1/forests/F/consumer/k1", headers=READ).json()
    assert c == {"consumerID": "k1", "forest": "F", "allocated": True, "nodes": {"T1": "a", "T2": "c"}}
    assert_error(fc.get("/ws/v1/forests/F/consumer/ghost", headers=READ), 404)
    assert_error(fc.get("/ws/v1/forests/G/consumer/k1", headers=READ), 404)
    assert_error(fc.delete("/ws/v1/forests/F", headers=ADMIN), 409)
    assert_error(fc.delete("/ws/v1/forests/F/tree/T2", headers=ADMIN), 409)
    assert fc.get("/ws/v1/forests", headers=READ).json() == {"F": ["T1", "T2"]}
    assert_error(fc.delete("/ws/v1/forests/G", headers=ADMIN), 404)
    assert_error(fc.delete("/ws/v1/forests/F", headers=READ), 403)
    release(fc, "k1")
    r = fc.delete("/ws/v1/forests/F/tree/T2", headers=ADMIN)
    assert r.status_code == 200 and r.json() == {"F": ["T1"]}
    assert_error(fc.delete("/ws/v1/forests/F/tree/T2", headers=ADMIN), 404)
    assert_error(fc.delete("/ws/v1/forests/G/tree/T1", headers=ADMIN), 404)
    r = fc.delete("/ws/v1/forests/F", headers=ADMIN)
    assert r.status_code == 200 and r.json() == {}
    trees = fc.get("/ws/v1/quotatrees", headers=READ).json()["trees"]
    assert [(t["name"], t["forest"]) for t in trees] == [("T1", None), ("T2", None)]


def test_partition_without_quota_trees_is_404(fc: TestClient) -> None:
    for method, path in [("get", "/ws/v1/quotatrees/T1/node/a"), ("delete", "/ws/v1/quotatrees/T1"),
                         ("delete", "/ws/v1/forests/F"), ("delete", "/ws/v1/forests/F/tree/T1"),
                         ("get", "/ws/v1/forests/F")]:
        assert_error(fc.request(method, path + "?partition=gpu", headers=ADMIN), 404)


def test_config_reload_dropping_a_tree_in_use_is_a_400_and_changes_nothing(fc: TestClient) -> None:
    """The scheduler asks the forest policy (``validate_update``) before journalling the new config."""
    alloc(fc, "app-1", "k1", 1000, **{"quotaplane.io/tree.T2": "c"})
    before = fc.get("/ws/v1/config", headers=READ).text
    r = fc.put("/ws/v1/config", content=CONFIG, headers=ADMIN)    # CONFIG has no quotatrees at all
    body = assert_error(r, 400)
    assert "T2" in body["message"] and "allocated consumers" in body["message"]
    assert fc.get("/ws/v1/config", headers=READ).text == before
    assert [t["name"] for t in fc.get("/ws/v1/quotatrees", headers=READ).json()["trees"]] == ["T1", "T2"]
    assert fc.get("/ws/v1/partition/default/allocation/k1", headers=READ).status_code == 200
