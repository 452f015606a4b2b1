"""Resource flavors over REST (docs/flavors.md, docs/rest.md): node labels, a request's node selector
and tolerations, the flavors of a decision, an allocation and a waiting ask; bad input is a 400 that
names what is wrong and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.server.app import create_app
from tests.flavors.test_partition import CONFIG

BASE = "/ws/v1/partition/default"
GPU = "nvidia.com/gpu"


@pytest.fixture
def client() -> Iterator[TestClient]:
    s = qp.Scheduler.from_yaml(CONFIG)
    with TestClient(create_app(s), raise_server_exceptions=False) as c:
        yield c
    s.close()


def _setup(c: TestClient) -> None:
    for node, kind in (("n1", "a100"), ("n2", "h100")):
        r = c.put(f"{BASE}/node/{node}", json={"capacity": {GPU: 8}, "labels": {"gpu": kind}})
        assert r.status_code == 201, r.text
        assert r.json()["attributes"] == {"gpu": kind} and r.json()["flavors"] == [kind]
        assert r.json()["capacity"] == {GPU: 8, f"{GPU}@{kind}": 8}
    r = c.post(f"{BASE}/applications", json={"applicationID": "app", "user": "alice", "queue": "root.a"})
    assert r.status_code == 201, r.text


def test_a_decision_an_allocation_and_a_node_show_the_flavor(client: TestClient) -> None:
    _setup(client)
    r = client.post(f"{BASE}/allocations", json={"applicationID": "app", "allocationKey": "k1",
                                                 "resource": {GPU: 2}, "nodeSelector": {"gpu": "h100"}})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["flavors"] == {GPU: "h100"}
    assert [a["mode"] for a in body["flavorAttempts"]] == ["NoFit", "Fit"]
    alloc = client.get(f"{BASE}/allocation/k1").json()
    assert alloc["flavors"] == {GPU: "h100"} and alloc["resource"] == {GPU: 2, f"{GPU}@h100": 2}
    r = client.post(f"{BASE}/whatif", json={"applicationID": "app", "resource": {GPU: 2}})
    assert r.status_code == 200 and r.json()["flavors"] == {GPU: "a100"}
    nodes = {n["nodeID"]: n for n in client.get(f"{BASE}/nodes").json()}
    assert nodes["n2"]["flavors"] == ["h100"]


def test_a_waiting_ask_with_tolerations(client: TestClient) -> None:
    _setup(client)
    r = client.post(f"{BASE}/application/app/asks", json={
        "allocationKey": "w", "resource": {GPU: 7}, "nodeSelector": {"gpu": "a100"},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}]})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["allocated"] is False
    assert {x["code"] for x in body["reasons"]} == {"queue.max", "flavor.nomatch"}


@pytest.mark.parametrize(("extra", "words"), [
    ({"nodeSelector": {"gpu": 1}}, "nodeSelector"),
    ({"tolerations": [{"operator": "Sometimes"}]}, "operator"),
    ({"nodeAffinity": [{"matchExpressions": [{"key": "gpu", "operator": "Near"}]}]}, "operator"),
    ({"resource": {f"{GPU}@b200": 1}}, "not a declared resource flavor"),
])
def test_bad_placement_is_a_400_naming_it(client: TestClient, extra: dict[str, object], words: str) -> None:
    _setup(client)
    before = client.get(f"{BASE}/nodes").json()
    r = client.post(f"{BASE}/allocations", json={"applicationID": "app", "allocationKey": "k",
                                                 "resource": {GPU: 1}, **extra})
    assert r.status_code == 400, r.text
    assert words in r.json()["message"] or words in r.json()["description"]
    assert client.get(f"{BASE}/allocation/k").status_code == 404
    assert client.get(f"{BASE}/nodes").json() == before


def test_bad_node_labels_are_a_400(client: TestClient) -> None:
    r = client.put(f"{BASE}/node/n9", json={"capacity": {GPU: 1}, "labels": {"gpu": 5}})
    assert r.status_code == 400, r.text
    assert client.get(f"{BASE}/node/n9").status_code == 404
