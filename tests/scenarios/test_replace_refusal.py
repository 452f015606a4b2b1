"""A refused placeholder replacement must change nothing (quality.md "Reliability": a refused operation
changes nothing; S1: the journal, which does not record refusals, must reproduce the live state).

The bug this guards: ``Partition._ev_replaced`` released the placeholder from the extension
policies, checked the real allocation, and on refusal re-applied the placeholder. For the quota forest
that re-application appended the consumer at the end of its node's consumer list, so the order (which
decides preemption victims, decision F1) changed, and a restart from the journal — where the refusal
never happened — gave a different state. Fixed by ``ForestPolicy.check_replacement`` (withdraw with an
exact undo log, check, restore: ``QuotaManager.withdraw`` / ``restore``).
"""

from __future__ import annotations

import quotaplane as qp
from quotaplane.journal import MemoryJournal
from tests.partition.helpers import Clock
from tests.scenarios.world import ALICE, CONFIG, canon, tags


def test_refused_replacement_changes_nothing_and_restart_agrees() -> None:
    journal, clock = MemoryJournal(), Clock()
    s = qp.Scheduler.from_yaml(CONFIG, store=journal, clock=clock)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 10000}))
    p.add_application("al", ALICE, queue="root.a", tags=tags("team-a", "A"))
    assert p.allocate("al", "ph", qp.Resource({"vcore": 250}), placeholder=True, task_group="tg").allocated
    assert p.allocate("al", "k2", qp.Resource({"vcore": 250})).allocated
    before = canon(s)
    d = p.replace_placeholder("ph", "real", qp.Resource({"vcore": 3000}))    # over alice's 3000 limit
    assert not d.allocated and [v.code for v in d.reasons] == ["user.maxresources"]
    assert p.policies()[3].manager.node_consumers("T", "A") == ["ph", "k2"]
    assert canon(s) == before
    assert canon(qp.Scheduler.from_yaml(CONFIG, store=journal, clock=clock)) == before


def test_refused_replacement_keeps_the_placeholder_in_its_elastic_quota() -> None:
    """Found by the composed state machine: a placeholder admitted while its namespace had no elastic
    quota counts in the default quota. After a reload brings the namespace's quota back, a refused
    replacement must leave the placeholder where it was; re-applying it after the check mapped it by
    the *current* config and moved it to the namespace's quota."""
    from tests.scenarios.test_properties import CONFIGS

    journal, clock = MemoryJournal(), Clock()
    s = qp.Scheduler.from_yaml(CONFIG, store=journal, clock=clock)
    p = s.partition("default")
    p.add_node("n1", qp.Resource({"vcore": 10000}))
    p.add_application("ca", qp.UserGroup("carol", ["dev"]), queue="root.c", tags=tags("team-c"))
    s.update_config(CONFIGS[2])                      # team-c's ElasticQuota gone
    assert p.allocate("ca", "ph", qp.Resource({"vcore": 250}), preemptible=False, placeholder=True,
                      task_group="tg").allocated
    elastic = p.policies()[2].manager
    assert elastic.pod_quota("ph") == "koordinator-default-quota"
    s.update_config(CONFIG)                          # team-c back (min 1 cpu)
    before = canon(s)
    d = p.replace_placeholder("ph", "real", qp.Resource({"vcore": 1500}))
    assert not d.allocated and [v.code for v in d.reasons] == ["elastic.min"]
    assert elastic.pod_quota("ph") == "koordinator-default-quota"
    assert canon(s) == before
    assert canon(qp.Scheduler.from_yaml(CONFIG, store=journal, clock=clock)) == before
