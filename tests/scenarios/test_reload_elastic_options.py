"""Config reloads and the elastic extension as a whole (review findings; contract: update_config is
all-or-nothing and raises qp.ConfigError; S1: a restart replays to the same state).

1. A reload dropping the whole ``elasticquotas`` extension while elastic quotas hold allocations threw the
   elastic state away (added back later, live allocations were not counted again). It is now refused
   before it is journalled, like dropping ``quotatrees`` in use; accepted once nothing is allocated.
2. The options ``scaleMin`` (E3), ``revokeDelay`` (E5) and ``checkParent`` (§2.9) were ignored on reload.
"""

from __future__ import annotations

import pytest

import quotaplane as qp
from quotaplane.policies.elastic import ElasticPolicy
from tests.scenarios.world import BOB, CONFIG, canon, tags

_NO_ELASTIC = "partitions:\n- name: default\n" + CONFIG[CONFIG.index("  quotatrees:"):]
_OPTIONS = CONFIG.replace("    revokeDelay: 10\n",
                          "    revokeDelay: 30\n    scaleMin: false\n    checkParent: true\n")


def _elastic(p: qp.Partition) -> ElasticPolicy | None:
    found = [x for x in p.policies() if isinstance(x, ElasticPolicy)]
    return found[0] if found else None


def _runtimes(pol: ElasticPolicy) -> dict[str, dict[str, int]]:
    quotas = pol.manager.dump_state()["quotas"]
    return {name: quotas[name]["runtime"] for name in ("dept", "team-a", "team-b")}


def _assert_incremental_equals_full(pol: ElasticPolicy) -> None:
    """Decision E2: the cached runtimes equal a from-scratch computation."""
    full = pol.manager.full_recompute()
    quotas = pol.manager.dump_state()["quotas"]
    for name in ("dept", "team-a", "team-b", "team-c"):
        assert quotas[name]["runtime"] == dict(full[name]), name


def test_dropping_elasticquotas_in_use_is_refused_then_accepted_when_empty(store: str) -> None:
    s = qp.Scheduler.from_yaml(CONFIG, store=store)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 10000}))
    p.add_application("bo", BOB, queue="root.b", tags=tags("team-b"))
    assert p.allocate("bo", "b1", qp.Resource({"vcore": 1000})).allocated
    before = canon(s)
    with pytest.raises(qp.ConfigError, match=r"elasticquotas.*team-b"):
        s.update_config(_NO_ELASTIC)
    assert canon(s) == before and s.config_text == CONFIG
    pol = _elastic(p)
    assert pol is not None and pol.manager.used("team-b") == qp.Resource({"vcore": 1000})
    s.close()
    again = qp.Scheduler.from_yaml(CONFIG, store=store)      # nothing of the refused reload was journalled
    try:
        assert canon(again) == before
        q = again.partition("default")
        q.release("b1")
        again.update_config(_NO_ELASTIC)                      # no elastic allocation left: accepted
        assert _elastic(q) is None
        again.update_config(CONFIG)                           # added back: a fresh, empty elastic state
        back = _elastic(q)
        assert back is not None and back.manager.quotas_in_use() == []
        assert q.allocate("bo", "b2", qp.Resource({"vcore": 1000})).allocated
        assert back.manager.used("team-b") == qp.Resource({"vcore": 1000})
        state = canon(again)
    finally:
        again.close()
    third = qp.Scheduler.from_yaml(CONFIG, store=store)
    try:
        assert canon(third) == state
    finally:
        third.close()


def test_dropping_elasticquotas_refused_for_allocations_in_the_default_quota(store: str) -> None:
    """An application mapped to no quota is counted in the default quota (reference §1.1): in use too."""
    s = qp.Scheduler.from_yaml(CONFIG, store=store)
    try:
        p = s.partition("default")
        p.add_node("n1", qp.Resource({"vcore": 10000}))
        p.add_application("bo", BOB, queue="root.b", tags={"namespace": "elsewhere"})
        assert p.allocate("bo", "b1", qp.Resource({"vcore": 1000})).allocated
        with pytest.raises(qp.ConfigError, match="default"):
            s.update_config(_NO_ELASTIC)
        assert s.config_text == CONFIG and _elastic(p) is not None
    finally:
        s.close()


def test_reload_applies_scale_min_and_revoke_delay_and_restart_is_identical(store: str) -> None:
    s = qp.Scheduler.from_yaml(CONFIG, store=store)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 4000}))
    p.add_node("n2", qp.Resource({"vcore": 4000}))
    p.add_application("bo", BOB, queue="root.b", tags=tags("team-b"))
    p.add_application("ba", BOB, queue="root.b", tags=tags("team-a"))
    assert p.allocate("bo", "b1", qp.Resource({"vcore": 3000})).allocated
    assert p.allocate("ba", "a1", qp.Resource({"vcore": 4000})).allocated
    p.remove_node("n2")               # total 4000 < Σ min 6000: min scaling matters (E3)
    pol = _elastic(p)
    assert pol is not None
    scaled = _runtimes(pol)
    assert scaled == {"dept": {"vcore": 2666}, "team-a": {"vcore": 2666}, "team-b": {"vcore": 1334}}
    assert pol.manager.revoke_delay == 10.0 and not pol.manager.check_parent
    s.update_config(_OPTIONS)
    assert not pol.manager.scale_min and pol.manager.revoke_delay == 30.0 and pol.manager.check_parent
    # E3 off: the original mins are handed out
    assert _runtimes(pol) == {"dept": {"vcore": 4000}, "team-a": {"vcore": 4000}, "team-b": {"vcore": 2000}}
    _assert_incremental_equals_full(pol)
    state = canon(s)
    s.close()
    again = qp.Scheduler.from_yaml(_OPTIONS, store=store)       # restart on the config in force
    try:
        assert canon(again) == state
        q = again.partition("default")
        back = _elastic(q)
        assert back is not None and not back.manager.scale_min and back.manager.check_parent
        # reloading the defaults back switches every option back (absent = default)
        again.update_config(CONFIG)
        assert back.manager.scale_min and back.manager.revoke_delay == 10.0 and not back.manager.check_parent
        assert _runtimes(back) == scaled
        _assert_incremental_equals_full(back)
        state = canon(again)
    finally:
        again.close()
    third = qp.Scheduler.from_yaml(CONFIG, store=store)
    try:
        assert canon(third) == state
    finally:
        third.close()


def test_reload_switches_check_parent_on_and_off(store: str) -> None:
    """§2.9 EnableCheckParentQuota follows the reload: team-c's request fits its own runtime but not
    its parent dept's (used 5000 of runtime 5000) — refused only while checkParent is on."""
    s = qp.Scheduler.from_yaml(CONFIG, store=store)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 10000}))
    p.add_application("ba", BOB, queue="root.b", tags=tags("team-a"))
    p.add_application("bc", BOB, queue="root.b", tags=tags("team-c"))
    assert p.allocate("ba", "a1", qp.Resource({"vcore": 5000})).allocated
    s.update_config(_OPTIONS)
    refused = p.allocate("bc", "c1", qp.Resource({"vcore": 500}))
    assert not refused.allocated
    assert [(v.code, v.path) for v in refused.reasons] == [("elastic.runtime", "dept")]
    state = canon(s)
    s.close()
    again = qp.Scheduler.from_yaml(_OPTIONS, store=store)
    try:
        assert canon(again) == state
        q = again.partition("default")
        assert not q.allocate("bc", "c1", qp.Resource({"vcore": 500})).allocated
        again.update_config(CONFIG)                                   # checkParent absent: off
        assert q.allocate("bc", "c1", qp.Resource({"vcore": 500})).allocated
        state = canon(again)
    finally:
        again.close()
    third = qp.Scheduler.from_yaml(CONFIG, store=store)
    try:
        assert canon(third) == state
    finally:
        third.close()


def test_refused_reload_keeps_the_old_options() -> None:
    """All-or-nothing: a reload whose quotas are refused changes no option either."""
    s = qp.Scheduler.from_yaml(CONFIG)
    try:
        p = s.partition("default")
        p.add_node("n1", qp.Resource({"vcore": 10000}))
        p.add_application("bo", BOB, queue="root.b", tags=tags("team-b"))
        assert p.allocate("bo", "b1", qp.Resource({"vcore": 1000})).allocated
        team_b = ("    - apiVersion: scheduling.sigs.k8s.io/v1alpha1\n      kind: ElasticQuota\n"
                  "      metadata: {name: team-b")
        head = _OPTIONS.partition(team_b)[0]
        assert head != _OPTIONS
        without_b = head + _OPTIONS[_OPTIONS.index("  quotatrees:"):]
        with pytest.raises(qp.ConfigError, match="team-b"):
            s.update_config(without_b)
        pol = _elastic(p)
        assert pol is not None
        assert pol.manager.scale_min and pol.manager.revoke_delay == 10.0 and not pol.manager.check_parent
    finally:
        s.close()
