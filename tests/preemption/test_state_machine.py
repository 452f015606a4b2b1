"""A hypothesis state machine with every kind of preemption on (docs/preemption.md "Why preemption does
not loop"): random allocations, asks, withdrawals, releases, cycles and timer ticks, checking after every
step the invariants of the quality bar and the safety rules PR-S1…PR-S3."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.journal import MemoryJournal
from tests.partition.helpers import Clock
from tests.preemption.helpers import ALICE, cpu, elastic_quota

CONFIG = f"""
partitions:
- name: default
  preemption: {{enabled: true, quotapreemptionenabled: true}}
  elasticquotas:
    revokeDelay: 5
    quotas: |
{elastic_quota("team-a", 2, 6)}{elastic_quota("team-b", 3, 6)}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: org
      resources: {{max: {{vcore: 8}}}}
      queues:
      - name: x
        resources: {{guaranteed: {{vcore: 4}}}}
        properties: {{preemption.delay: 2s}}
      - name: y
        resources: {{guaranteed: {{vcore: 3}}, max: {{vcore: 6}}}}
        properties: {{preemption.delay: 2s, quota.preemption.delay: 3s}}
"""

#: application -> (queue, elastic quota)
APPS = {"ax": ("root.org.x", "team-a"), "bx": ("root.org.x", "team-b"), "ay": ("root.org.y", "team-a"),
        "by": ("root.org.y", "team-b")}
GUARANTEED = {"root.org.x": 4000, "root.org.y": 3000}
MAX = {"root.org": 8000, "root.org.y": 6000}

_STEPS = int(os.environ.get("QP_SCENARIO_STEPS", "30"))
requests = st.tuples(st.sampled_from(sorted(APPS)), st.sampled_from([1000, 1000, 2000, 3000]),
                     st.integers(0, 3), st.sampled_from([True, True, True, False]))


class PreemptionMachine(RuleBasedStateMachine):
    """Every step through the public partition API; the invariants read the state after it."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.journal = MemoryJournal()
        self.s = Scheduler.from_yaml(CONFIG, store=self.journal, clock=self.clock)
        self.p = self.s.partition("default")
        self.p.add_node("n1", cpu(9))
        for app, (queue, quota) in APPS.items():
            self.p.add_application(app, ALICE, queue=queue, tags={"namespace": quota})
        self.n = 0
        self.y_max = 6000
        self.config = CONFIG
        self.attrs: dict[str, tuple[str, int, bool]] = {}     # key -> (app, priority, preemptible)
        self.released_by_test: set[str] = set()
        self.problems: list[str] = []
        self.p.subscribe(self._on_notice)

    def _on_notice(self, notice: dict[str, Any]) -> None:
        """Runs under the partition lock, right after the change was journalled."""
        if notice["type"] != "preempted":
            return
        reason, victims = notice["reason"], [a["allocationKey"] for a in notice["allocations"]]
        for key in victims:
            if not self.attrs.get(key, ("", 0, True))[2]:
                self.problems.append(f"non-preemptible {key} was preempted ({reason['code']})")
        preemptor = notice.get("preemptor")
        if reason["code"] == "elastic.preempted" and preemptor is not None:
            mine = self.attrs[preemptor][1]
            if any(self.attrs[k][1] >= mine for k in victims):
                self.problems.append(f"E6 took a victim of priority >= {mine}")
        if reason["code"] == "queue.guaranteed":
            # PR-S1: the preemptor's queue at or below its guaranteed, every victim queue at or above
            leaf = reason["path"]
            used = self.p.queues.queue(leaf).allocated.get("vcore", 0)
            if used > GUARANTEED[leaf]:
                self.problems.append(f"preemptor queue {leaf} above its guaranteed: {used}")
            for key in victims:
                vq = APPS[self.attrs[key][0]][0]
                vused = self.p.queues.queue(vq).allocated.get("vcore", 0)
                if vused < GUARANTEED[vq]:
                    self.problems.append(f"victim queue {vq} below its guaranteed: {vused}")

    def _key(self) -> str:
        self.n += 1
        return f"k{self.n}"

    @rule(req=requests)
    def allocate(self, req: tuple[str, int, int, bool]) -> None:
        app, vcore, prio, pre = req
        key = self._key()
        self.attrs[key] = (app, prio, pre)
        before = json.dumps(self.s.dump_state(), sort_keys=True)
        d = self.p.allocate(app, key, Resource({"vcore": vcore}), priority=prio, preemptible=pre)
        if not d.allocated:
            assert json.dumps(self.s.dump_state(), sort_keys=True) == before   # a refusal changes nothing

    @rule(req=requests)
    def add_ask(self, req: tuple[str, int, int, bool]) -> None:
        app, vcore, prio, pre = req
        key = self._key()
        self.attrs[key] = (app, prio, pre)
        self.p.add_ask(app, key, Resource({"vcore": vcore}), priority=prio, preemptible=pre)

    @rule(req=requests)
    def add_another_ask(self, req: tuple[str, int, int, bool]) -> None:
        self.add_ask(req)

    @rule(data=st.data())
    def withdraw_ask(self, data: st.DataObject) -> None:
        asks = [a.allocation_key for a in self.p.pending()]
        if asks:
            self.p.remove_ask(data.draw(st.sampled_from(asks)))

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        keys = sorted(a.allocation_key for a in self.p.allocations())
        if keys:
            key = data.draw(st.sampled_from(keys))
            self.released_by_test.add(key)
            self.p.release(key)

    @rule(seconds=st.sampled_from([0.5, 1, 2, 3, 6]))
    def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.p.check_timeouts()

    @rule()
    def cycle(self) -> None:
        self.p.schedule()

    @rule()
    def node_comes_or_goes(self) -> None:
        """A second node comes or goes: the elastic total moves, so quotas go over their runtime (E5)."""
        if "n2" in self.p.nodes():
            self.p.remove_node("n2")
        else:
            self.p.add_node("n2", cpu(3))

    @rule(y_max=st.sampled_from([6, 4, 3]))
    def reload(self, y_max: int) -> None:
        """A reload that lowers (or restores) root.org.y's max: quota preemption's trigger (PR-Q)."""
        self.config = CONFIG.replace("max: {vcore: 6}", f"max: {{vcore: {y_max}}}")
        self.s.update_config(self.config)
        self.y_max = y_max * 1000

    @invariant()
    def safety_rules_hold(self) -> None:
        assert self.problems == []

    @invariant()
    def usage_is_the_sum_of_the_live_allocations_and_within_every_max(self) -> None:
        live = self.p.allocations()
        for path in ("root", "root.org", "root.org.x", "root.org.y"):
            total = sum(a.resource.get("vcore", 0) for a in live
                        if APPS[a.application_id][0].startswith(path))
            assert self.p.queues.queue(path).allocated.get("vcore", 0) == total
            limit = self.y_max if path == "root.org.y" else MAX.get(path)
            # a lowered max may be exceeded until quota preemption cuts the queue back, never by admission
            if limit is not None and path != "root.org.y":
                assert total <= limit
        m = self.p.policies()[2].manager            # type: ignore[attr-defined]
        for quota in ("team-a", "team-b"):
            total = sum(a.resource.get("vcore", 0) for a in live if APPS[a.application_id][1] == quota)
            assert m.used(quota).get("vcore", 0) == total <= 6000

    @invariant()
    def non_preemptible_allocations_go_only_when_released(self) -> None:
        live = {a.allocation_key for a in self.p.allocations()}
        for key, (_app, _prio, pre) in self.attrs.items():
            if not pre and key not in self.released_by_test and key not in live:
                assert self.p.get_ask(key) is not None or not any(
                    ev.get("key") == key for _, ev in self.journal.read(self.p.stream, after=0)
                    if ev["type"] == "allocated"), f"non-preemptible {key} disappeared"

    def teardown(self) -> None:
        replayed = Scheduler.from_yaml(self.config, store=self.journal, clock=self.clock)
        assert json.dumps(replayed.dump_state(), sort_keys=True) == json.dumps(self.s.dump_state(),
                                                                               sort_keys=True)


TestPreemptionMachine = PreemptionMachine.TestCase
TestPreemptionMachine.settings = settings(max_examples=int(os.environ.get("QP_SCENARIO_EXAMPLES", "25")),
                                          stateful_step_count=_STEPS, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
