"""A reload the elastic policy cannot take is refused before it is journalled (contract: update_config is
all-or-nothing; quality.md "a reload that fails leaves the running config and all usage untouched"; S1).

Found by this review: a reload dropping an ElasticQuota that still holds allocations was journalled
first, then failed half-way through ``Partition.apply_config`` (queues and limits already changed), and
every later restart failed replaying it. The scheduler's pre-journal ``validate_update`` hook now has an
elastic implementation (``ElasticQuotaManager.check_sync``: every check of ``sync_specs``, no change).
"""

from __future__ import annotations

import pytest

import quotaplane as qp
from tests.scenarios.world import BOB, CONFIG, canon, tags

_TEAM_B = ("    - apiVersion: scheduling.sigs.k8s.io/v1alpha1\n      kind: ElasticQuota\n"
           "      metadata: {name: team-b")


def _without_team_b() -> str:
    head = CONFIG.split(_TEAM_B)[0]
    text = head + CONFIG[CONFIG.index("  quotatrees:"):]
    assert "team-b" not in text
    return text.replace("    - name: c\n", "    - name: c\n      resources:\n        max: {vcore: 7}\n")


def test_reload_deleting_an_elastic_quota_in_use_is_refused_unchanged_and_restart_works(store: str) -> None:
    s = qp.Scheduler.from_yaml(CONFIG, store=store)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 10000}))
    p.add_application("bo", BOB, queue="root.b", tags=tags("team-b"))
    assert p.allocate("bo", "b1", qp.Resource({"vcore": 1000})).allocated
    before = canon(s)
    with pytest.raises(qp.ConfigError, match="team-b"):           # contract: update_config raises ConfigError
        s.update_config(_without_team_b())
    assert canon(s) == before and s.config_text == CONFIG
    s.close()
    again = qp.Scheduler.from_yaml(CONFIG, store=store)
    try:
        assert canon(again) == before
        # once the quota is empty the same reload is accepted
        again.partition("default").release("b1")
        again.update_config(_without_team_b())
        assert "team-b" not in again.partition("default").policies()[2].manager.quota_names()
    finally:
        again.close()


def test_elastic_check_sync_changes_nothing_and_agrees_with_sync_specs() -> None:
    """check_sync raises exactly when sync_specs would, and never changes the manager."""
    from quotaplane.elastic import ElasticQuotaManager, QuotaValidationError
    from quotaplane.elastic.model import parse_elastic_quotas

    m = ElasticQuotaManager({"vcore": 10000})
    m.upsert("a", min={"vcore": 1000}, max={"vcore": 5000})
    m.upsert("b", min={"vcore": 1000}, max={"vcore": 5000})
    m.add_pod("a", "p1", {"vcore": 500}, assigned=True)
    state = m.dump_state()
    only_b = parse_elastic_quotas("apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: ElasticQuota\n"
                                  "metadata: {name: b}\nspec: {max: {cpu: 4}, min: {cpu: 5}}\n")
    with pytest.raises(QuotaValidationError):           # a loses its pods, and b's min > max
        m.check_sync(only_b)
    assert m.dump_state() == state
    only_a = parse_elastic_quotas("apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: ElasticQuota\n"
                                  "metadata: {name: a}\nspec: {max: {cpu: 4}, min: {cpu: 1}}\n")
    m.check_sync(only_a)
    assert m.dump_state() == state
    m.sync_specs(only_a)
    assert "a" in m.quota_names() and "b" not in m.quota_names()
