"""Issue 14 #4: no sum that is stored or served goes beyond int64.

Three node capacities of 2^62, 2^62 and 2^63-1 were each accepted, and the root's ``maxResource`` was
served as 27670116110664328424, which Go clients cannot decode. Waiting asks, which count towards no
limit, could push ``pendingResource`` past int64 the same way.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

import quotaplane as qp
from quotaplane.resources import INT64_MAX
from quotaplane.server.app import create_app
from tests.server.conftest import CONFIG

ALICE = qp.UserGroup("alice", ["dev"])


def test_a_node_that_would_push_the_cluster_total_past_int64_is_refused_over_rest() -> None:
    s = qp.Scheduler.from_yaml(CONFIG)
    with TestClient(create_app(s), raise_server_exceptions=False) as c:
        r = c.put("/ws/v1/partition/default/node/n1", json={"capacity": {"vcore": 2**62}})
        assert r.status_code == 201, r.text
        for node, amount in (("n2", 2**62), ("n3", INT64_MAX)):
            r = c.put(f"/ws/v1/partition/default/node/{node}", json={"capacity": {"vcore": amount}})
            assert r.status_code == 400, r.text
            message = r.json()["message"]
            assert node in message and "vcore" in message and "int64" in message
        root = c.get("/ws/v1/partition/default/queue/root").json()
        assert root["maxResource"]["vcore"] == 2**62
        assert [n["nodeID"] for n in c.get("/ws/v1/partition/default/nodes").json()] == ["n1"]
    s.close()


def test_two_nodes_summing_to_exactly_int64_max_are_fine() -> None:
    s = qp.Scheduler.from_yaml(CONFIG)
    p = s.partition("default")
    p.add_node("n1", {"vcore": 2**62})
    p.add_node("n2", {"vcore": INT64_MAX - 2**62})
    assert p.total_capacity()["vcore"] == INT64_MAX
    with pytest.raises(ValueError, match="int64"):
        p.add_node("n3", {"vcore": 1})
    assert "n3" not in p.nodes()
    s.close()


def test_waiting_asks_cannot_push_pending_past_int64() -> None:
    s = qp.Scheduler.from_yaml(CONFIG)
    p = s.partition("default")
    p.add_application("app", ALICE, queue="root.default")
    p.add_ask("app", "a1", {"vcore": INT64_MAX})
    before = p.dump_state()
    with pytest.raises(ValueError, match="int64"):
        p.add_ask("app", "a2", {"vcore": 1})
    assert p.dump_state() == before
    s.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=INT64_MAX), min_size=1, max_size=6))
def test_the_cluster_total_stays_within_int64_whatever_nodes_come(amounts: list[int]) -> None:
    s = qp.Scheduler.from_yaml(CONFIG)
    p = s.partition("default")
    accepted = 0
    for i, amount in enumerate(amounts):
        try:
            p.add_node(f"n{i}", {"vcore": amount})
            accepted += amount
        except ValueError:
            assert accepted + amount > INT64_MAX
    assert p.total_capacity().get("vcore", 0) == accepted <= INT64_MAX
    s.close()
