"""Budgets on elastic quotas (issue 34): a ``budgets`` entry with ``elasticquota`` charges every
allocation of the quota's pods (Koordinator's pod rules: the quota label, else the namespace) and its
parent quotas' budgets too; refusals name the quota; replay equals state; a window may override an
elastic quota's budget."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from quotaplane.config.budgets import BudgetSpecError, parse_budgets
from quotaplane.config.identity import UserGroup
from quotaplane.scheduler import Scheduler
from tests.partition.helpers import Clock

NOV1 = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
H = 3600.0


def _quota(name: str, min_cpu: int, max_cpu: int, parent: str = "", is_parent: bool = False) -> str:
    labels = ""
    if parent or is_parent:
        labels = "\n        labels:"
        if parent:
            labels += f"\n          quota.scheduling.koordinator.sh/parent: {parent}"
        if is_parent:
            labels += '\n          quota.scheduling.koordinator.sh/is-parent: "true"'
    return f"""      ---
      apiVersion: scheduling.sigs.k8s.io/v1alpha1
      kind: ElasticQuota
      metadata:
        name: {name}
        namespace: {name}{labels}
      spec:
        min: {{cpu: {min_cpu}}}
        max: {{cpu: {max_cpu}}}
"""


CONFIG = f"""
partitions:
- name: default
  elasticquotas:
    quotas: |
{_quota("org", 8, 16, is_parent=True)}{_quota("team-a", 4, 16, parent="org")}\
{_quota("team-b", 4, 16, parent="org")}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: q
  budgets:
  - elasticquota: team-a
    resourcehours: {{vcore: 10}}
    period: month
  - elasticquota: org
    resourcehours: {{vcore: 30}}
    period: month
"""


def _start(store: str | None, clock: Clock) -> tuple[Scheduler, Any]:
    s = Scheduler.from_yaml(CONFIG, store=store, clock=clock)
    p = s.partition("default")
    if not p.nodes():
        p.add_node("n", {"vcore": 32000})
        p.add_application("a", UserGroup("u", ()), queue="root.q", tags={"namespace": "team-a"})
        p.add_application("b", UserGroup("v", ()), queue="root.q", tags={"namespace": "team-b"})
    return s, p


def _statuses(p: Any, now: float) -> dict[str, dict[str, Any]]:
    from quotaplane.policies.budgets import BudgetPolicy
    [policy] = [pol for _, pol in p.extensions() if isinstance(pol, BudgetPolicy)]
    return {st["scope"]: st for st in policy.statuses(now)}


def test_an_elastic_quotas_budget_and_its_parents_charge_its_pods(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/q.db"
    clock = Clock(NOV1)
    s, p = _start(store, clock)
    assert p.allocate("a", "a1", {"vcore": 2000}).allocated
    assert p.allocate("b", "b1", {"vcore": 2000}).allocated
    clock.advance(5 * H)                                          # team-a 10 core-hours, org 20
    st = _statuses(p, clock())
    assert st["elastic quota team-a"]["resources"]["vcore"]["consumed"] == 10
    assert st["elastic quota org"]["resources"]["vcore"]["consumed"] == 20
    assert st["elastic quota team-a"]["kind"] == "elasticquota"
    assert st["elastic quota team-a"]["elasticQuota"] == "team-a"
    refused = p.allocate("a", "a2", {"vcore": 1000})
    [reason] = refused.reasons
    assert (reason.code, reason.path) == ("budget.exhausted", "team-a")
    assert reason.message.startswith("budget of elastic quota team-a for vcore is exhausted: 10 of 10")
    assert p.allocate("b", "b2", {"vcore": 1000}).allocated         # team-b has no budget of its own
    s.close(snapshot=False)                                         # kill -9
    s, p = _start(store, clock)
    assert _statuses(p, clock())["elastic quota org"]["resources"]["vcore"]["consumed"] == 20
    clock.advance(2 * H)                                            # org: 20 + 2 h × 5 cores = 30
    refused = p.allocate("b", "b3", {"vcore": 1000})
    assert [(v.code, v.path) for v in refused.reasons] == [("budget.exhausted", "org")]
    live = p.dump_state()
    s.close(snapshot=False)
    s, p = _start(store, clock)
    assert p.dump_state() == live
    s.close(snapshot=False)


def test_an_elastic_budget_entry_is_validated() -> None:
    [spec] = parse_budgets([{"elasticquota": "team-a", "resourcehours": {"vcore": 1}}])
    assert (spec.kind, spec.elastic, spec.name, spec.path) == ("elasticquota", "team-a",
                                                                "elastic quota team-a", "team-a")
    with pytest.raises(BudgetSpecError, match="a budget is on a queue or on an elastic quota"):
        parse_budgets([{"elasticquota": "t", "queue": "root.a", "resourcehours": {"vcore": 1}}])
    with pytest.raises(BudgetSpecError, match="user or group budgets are set in a queue"):
        parse_budgets([{"elasticquota": "t", "user": "u", "resourcehours": {"vcore": 1}}])
    with pytest.raises(BudgetSpecError, match=r"budgets\[1\] \(elastic quota t\): the same scope"):
        parse_budgets([{"elasticquota": "t", "resourcehours": {"vcore": 1}},
                       {"elasticquota": "t", "resourcehours": {"vcore": 2}}])


def test_rest_reads_an_elastic_quotas_budget() -> None:
    from fastapi.testclient import TestClient

    from quotaplane.server import create_app
    clock = Clock(NOV1)
    s, p = _start(None, clock)
    p.allocate("a", "a1", {"vcore": 2000})
    clock.advance(H)
    with TestClient(create_app(s)) as client:
        r = client.get("/ws/v1/partition/default/budget/elasticquota/team-a")
        assert r.status_code == 200, r.text
        body = r.json()
        assert (body["scope"], body["kind"], body["elasticQuota"]) == ("elastic quota team-a", "elasticquota",
                                                                        "team-a")
        assert body["resources"]["vcore"]["consumed"] == 2
        r = client.get("/ws/v1/partition/default/budget/elasticquota/team-b")
        assert r.status_code == 404 and "no budget on elastic quota 'team-b'" in r.json()["message"]
    s.close()


def test_a_window_overrides_an_elastic_quotas_budget() -> None:
    from quotaplane.config.loader import load_config
    from quotaplane.errors import ConfigError
    from quotaplane.windows import edges
    text = CONFIG + """  windows:
  - name: crunch
    elasticquota: team-a
    from: "2026-11-10T00:00"
    to: "2026-11-12T00:00"
    resourcehours: {vcore: 50}
"""
    found = edges(text, datetime(2026, 11, 10, 1, tzinfo=UTC).timestamp())
    assert found is not None
    budgets = load_config(found[0]).partitions[0].extensions["budgets"]
    assert budgets[0] == {"elasticquota": "team-a", "resourcehours": {"vcore": 50}, "period": "month"}
    with pytest.raises(ConfigError, match=r"elastic quota team-b has no budget to override"):
        load_config(text.replace("elasticquota: team-a\n    from", "elasticquota: team-b\n    from"))
