"""A hypothesis state machine with flavors, borrowing and lending limits and fair sharing on
(docs/fair-sharing.md, docs/flavors.md): random allocations, asks, releases, cycles and timer ticks on a
two-level tree with two GPU flavors; after every step the invariants of the quality bar — usage is the
sum of the live allocations, no queue over its max, no subtree beyond its borrowing limit, every share
well defined — and, at the end, the journal replays to the same state. Every step returns: fair-sharing
preemption terminates."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.scheduler import Scheduler
from tests.partition.helpers import Clock

GPU = "nvidia.com/gpu"
U = UserGroup("u")
POLICIES = ("preemption.withinclusterqueue: LowerPriority, preemption.reclaimwithincohort: Any, "
            "preemption.delay: 1s")
CONFIG = f"""
partitions:
- name: default
  fairsharing: {{enabled: true}}
  resourceflavors:
    - {{name: a100, resources: [{GPU}], nodelabels: {{gpu: a100}}}}
    - {{name: h100, resources: [{GPU}], nodelabels: {{gpu: h100}}}}
  queues:
  - name: root
    submitacl: '*'
    properties: {{{POLICIES}}}
    queues:
    - name: research
      properties: {{fairsharing.weight: "2"}}
      resources: {{borrowinglimit: {{{GPU}@a100: 2}}}}
      queues:
      - name: x
        flavors: [a100, h100]
        resources: {{guaranteed: {{{GPU}@a100: 2, {GPU}@h100: 1}}}}
      - name: y
        flavors: [h100, a100]
        resources: {{guaranteed: {{{GPU}@h100: 2}}, lendinglimit: {{{GPU}@h100: 1}}}}
    - name: prod
      flavors: [a100, h100]
      resources: {{guaranteed: {{{GPU}@a100: 3, {GPU}@h100: 2}}, max: {{{GPU}: 8}}}}
"""
LEAVES = {"x": "root.research.x", "y": "root.research.y", "p": "root.prod"}
QUEUES = ("root", "root.research", "root.research.x", "root.research.y", "root.prod")

_STEPS = int(os.environ.get("QP_SCENARIO_STEPS", "30"))
requests = st.tuples(st.sampled_from(sorted(LEAVES)), st.sampled_from([1, 1, 2, 3]), st.integers(0, 2),
                     st.sampled_from([None, "a100", "h100"]))


class FairMachine(RuleBasedStateMachine):
    """Every step through the public partition API; the invariants read the state after it."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.journal = MemoryJournal()
        self.s = Scheduler.from_yaml(CONFIG, store=self.journal, clock=self.clock)
        self.p = self.s.partition("default")
        self.p.add_node("a", {GPU: 6}, labels={"gpu": "a100"})
        self.p.add_node("h", {GPU: 5}, labels={"gpu": "h100"})
        for app, path in LEAVES.items():
            self.p.add_application(app, U, queue=path)
        self.n = 0

    def _spec(self, req: tuple[str, int, int, str | None]) -> tuple[str, str, dict[str, int], int, Any]:
        app, gpus, prio, flavor = req
        self.n += 1
        selector = {"gpu": flavor} if flavor else None
        return app, f"k{self.n}", {GPU: gpus}, prio, selector

    @rule(req=requests)
    def allocate(self, req: tuple[str, int, int, str | None]) -> None:
        app, key, res, prio, selector = self._spec(req)
        before = json.dumps(self.s.dump_state(), sort_keys=True)
        d = self.p.allocate(app, key, res, priority=prio, node_selector=selector)
        if not d.allocated and not d.preempted:
            assert json.dumps(self.s.dump_state(), sort_keys=True) == before   # a refusal changes nothing

    @rule(req=requests)
    def add_ask(self, req: tuple[str, int, int, str | None]) -> None:
        app, key, res, prio, selector = self._spec(req)
        self.p.add_ask(app, key, res, priority=prio, node_selector=selector)

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        keys = sorted(a.allocation_key for a in self.p.allocations())
        if keys:
            self.p.release(data.draw(st.sampled_from(keys)))

    @rule(seconds=st.sampled_from([0.5, 1, 2]))
    def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.p.check_timeouts()
        self.p.schedule()

    @invariant()
    def usage_is_the_sum_of_the_live_allocations_within_every_max(self) -> None:
        live = self.p.allocations()
        for path in QUEUES:
            q = self.p.queues.queue(path)
            assert q is not None
            for name in (GPU, f"{GPU}@a100", f"{GPU}@h100"):
                total = sum(a.resource.get(name, 0) for a in live
                            if (path == "root" or LEAVES[a.application_id].startswith(path)))
                assert q.allocated.get(name, 0) == total
        prod = self.p.queues.queue("root.prod")
        assert prod is not None and prod.allocated.get(GPU, 0) <= 8
        root = self.p.queues.queue("root")
        assert root is not None
        assert root.allocated.get(f"{GPU}@a100", 0) <= 6 and root.allocated.get(f"{GPU}@h100", 0) <= 5

    @invariant()
    def no_subtree_beyond_its_borrowing_limit(self) -> None:
        research = self.p.queues.queue("root.research")
        assert research is not None
        sq, local, used = self.p.queues.limits.node(research, f"{GPU}@a100")
        assert max(0, used - local) - (sq - local) <= 2

    @invariant()
    def every_share_is_well_defined(self) -> None:
        fair = self.p.queues.fair
        assert fair is not None
        for path in QUEUES:
            q = self.p.queues.queue(path)
            assert q is not None
            s = fair.share(q)
            assert s.ratio >= 0 and (s.borrowing or s.ratio == 0)

    def teardown(self) -> None:
        replayed = Scheduler.from_yaml(CONFIG, store=self.journal, clock=self.clock)
        assert json.dumps(replayed.dump_state(), sort_keys=True) == json.dumps(self.s.dump_state(),
                                                                               sort_keys=True)


TestFairMachine = FairMachine.TestCase
TestFairMachine.settings = settings(max_examples=int(os.environ.get("QP_SCENARIO_EXAMPLES", "25")),
                                    stateful_step_count=_STEPS, deadline=None,
                                    suppress_health_check=[HealthCheck.too_slow])
