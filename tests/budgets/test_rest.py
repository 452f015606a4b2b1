"""Budgets over REST (issue 34 item 5, docs/budgets.md): a scope's budget and every budget, read at
the service's clock; the budgets replaced as a configuration change, a wrong one a 400 naming it with
nothing changed; a refused allocation's reason names the budget and its reset."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.server.app import create_app
from tests.budgets.test_admission import NOV1, H, config
from tests.partition.helpers import Clock

GPU = "nvidia.com/gpu"


@pytest.fixture
def served() -> Iterator[tuple[TestClient, Clock, qp.Scheduler]]:
    clock = Clock(NOV1)
    s = qp.Scheduler.from_yaml(config(extra="  - {queue: root.teams, user: '*', resourcehours: "
                                            "{nvidia.com/gpu: 50}, period: week}"), clock=clock)
    p = s.partition("default")
    p.add_node("n", {GPU: 8})
    p.add_application("t", qp.UserGroup("alice", ["ml"]), queue="root.teams.a")
    p.allocate("t", "k1", {GPU: 2})
    clock.advance(10 * H)
    with TestClient(create_app(s)) as client:
        yield client, clock, s
    s.close()


def _get(client: TestClient, path: str, status: int = 200, **params: Any) -> Any:
    r = client.get(f"/ws/v1/partition/default/{path}", params=params)
    assert r.status_code == status, r.text
    return r.json()


def test_a_scope_and_every_scope_read_at_the_service_clock(served: tuple[TestClient, Clock, Any]) -> None:
    client, clock, _ = served
    team = _get(client, "budget", queue="root.teams.a")
    gpu = team["resources"][GPU]
    assert (gpu["limit"], gpu["consumed"], gpu["left"], gpu["burnRate"]) == (100, 20, 80, 2)
    assert gpu["runsOutAt"] == "2026-11-03T02:00:00+00:00"          # 80 GPU-hours at 2 GPUs
    assert team["resetsAt"] == "2026-12-01T00:00:00+00:00" and team["warnings"] == []
    alice = _get(client, "budget/user/alice", queue="root.teams")
    assert alice["scope"] == "user alice in root.teams" and alice["resources"][GPU]["consumed"] == 20
    assert alice["resetsAt"] == "2026-11-02T00:00:00+00:00"          # Nov 1 2026 is a Sunday
    clock.advance(20 * H)
    listed = _get(client, "budgets")["budgets"]
    assert [b["scope"] for b in listed] == ["root.teams.a", "user alice in root.teams"]
    assert listed[0]["resources"][GPU]["consumed"] == 60 and listed[0]["warnings"] == [50]
    # a user the wildcard would charge, not seen yet
    assert _get(client, "budget/user/bob", queue="root.teams")["resources"][GPU]["consumed"] == 0
    assert "no budget on group 'ml' in queue 'root.teams'" in \
        _get(client, "budget/group/ml", 404, queue="root.teams")["message"]
    body = _get(client, "budget", 404, queue="root.teams.b")
    assert "no budget on queue 'root.teams.b'" in body["message"]
    # found as a new user: a queue that does not exist said "no budget on queue …", as though it did;
    # a 404 naming the unknown queue, as the other routes answer
    for path in ("budget", "budget/user/alice", "budget/group/ml"):
        message = _get(client, path, 404, queue="root.nosuch")["message"]
        assert message == "queue 'root.nosuch' not found in partition 'default'", (path, message)
    assert _get(client, "budget", queue="ROOT.Teams.A")["scope"] == "root.teams.a"  # names are case-blind


def test_a_refusal_over_rest_names_the_budget_and_its_reset(served: tuple[TestClient, Clock, Any]) -> None:
    client, clock, _ = served
    clock.advance(40 * H)               # 100 GPU-hours in root.teams.a
    r = client.post("/ws/v1/partition/default/allocations",
                    json={"applicationID": "t", "allocationKey": "k2", "resource": {GPU: 1}})
    body = r.json()
    assert body["allocated"] is False, body
    # alice's weekly budget in root.teams (50) and the team's monthly one (100), each with its reset
    user, team = body["reasons"]
    assert (user["code"], user["path"], team["path"]) == ("budget.exhausted", "root.teams", "root.teams.a")
    assert "budget of user alice in root.teams" in user["message"]
    assert "52 of 50 GPU-hours consumed this week" in user["message"]   # since Monday the 2nd
    assert "resets at 2026-11-09T00:00:00+00:00" in user["message"]
    assert "resets at 2026-12-01T00:00:00+00:00" in team["message"]


def test_put_replaces_the_budgets_as_a_configuration_change(served: tuple[TestClient, Clock, Any]) -> None:
    client, _, s = served
    r = client.put("/ws/v1/partition/default/budgets", content="- {queue: root.teams.a, resourcehours: "
                   "{nvidia.com/gpu: 30}, period: month}\n", headers={"Content-Type": "application/yaml"})
    assert r.status_code == 200, r.text
    assert [b["scope"] for b in r.json()["budgets"]] == ["root.teams.a"]
    assert r.json()["budgets"][0]["resources"][GPU]["consumed"] == 20          # kept across the change
    assert "nvidia.com/gpu: 30\n    period: month" in s.config_text
    bad = client.put("/ws/v1/partition/default/budgets",
                     content="- {queue: root.teams.a, resourcehours: {nvidia.com/gpu: 30}, "
                             "period: fortnight}\n",
                     headers={"Content-Type": "application/yaml"})
    assert bad.status_code == 400 and "budgets[0] (root.teams.a).period" in bad.json()["message"]
    assert "nvidia.com/gpu: 30\n    period: month" in s.config_text


def test_a_partition_without_budgets_is_a_404() -> None:
    s = qp.Scheduler.from_yaml("partitions:\n- name: default\n  queues:\n  - name: root\n")
    with TestClient(create_app(s)) as client:
        assert "has no budgets" in _get(client, "budgets", 404)["message"]
    s.close()
