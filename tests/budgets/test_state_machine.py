"""Budgets in a hypothesis state machine (issue 34): allocations with and without declared runtimes,
releases, waiting asks, time that crosses periods, timer ticks, snapshots and kill -9 restarts, under
three levels of ``hold`` budgets (root, a team, a user) — no admission ever pushes consumed plus
committed over a budget, and a restart from the journal (and snapshot) holds exactly the live state;
then the same with the team's budget ``besteffort``."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from quotaplane.config.identity import UserGroup
from quotaplane.partition import Partition
from quotaplane.policies.budgets import BudgetPolicy
from quotaplane.scheduler import Scheduler
from tests.partition.helpers import Clock

CONFIG = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: teams
      queues:
      - name: a
      - name: b
  budgets:
  - {queue: root, resourcehours: {nvidia.com/gpu: 60}, period: week}
  - {queue: root.teams.a, resourcehours: {nvidia.com/gpu: 30}, period: day}
  - {queue: root.teams, user: '*', resourcehours: {nvidia.com/gpu: 20}, period: 10h}
"""
H = 3600.0
APPS = {"a1": ("alice", "root.teams.a"), "a2": ("bob", "root.teams.a"), "b1": ("alice", "root.teams.b")}


class BudgetMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.store = f"sqlite:///{self.dir.name}/q.db?compact=true"
        self.clock = Clock(datetime(2026, 11, 30, 20, tzinfo=UTC).timestamp())
        self.s, self.p = self._open()
        for app, (user, queue) in APPS.items():
            self.p.add_application(app, UserGroup(user, ()), queue=queue)
            # an allocation no budget counts keeps the application running (never released here)
            self.p.allocate(app, f"keep-{app}", {"vcore": 1})
        self.n = 0
        self.admitted: set[str] = set()

    config = CONFIG

    def _open(self) -> tuple[Scheduler, Partition]:
        s = Scheduler.from_yaml(self.config, store=self.store, clock=self.clock)
        p = s.partition("default")
        if not p.nodes():
            p.add_node("n1", {"nvidia.com/gpu": 16, "vcore": 100})
        return s, p

    def _policy(self) -> BudgetPolicy:
        return next(pol for _, pol in self.p.extensions() if isinstance(pol, BudgetPolicy))

    def _check_new_admissions(self) -> None:
        """Every allocation admitted since the last step, at this instant: within every budget."""
        now = {a.allocation_key for a in self.p.allocations()}
        new = now - self.admitted
        self.admitted = now
        if not new:
            return
        ledger = self._policy().ledger
        ms = round(self.clock() * 1000)
        for scope in ledger.scopes.values():
            for r, cell in scope.cells.items():
                used = scope.consumed(cell, ms) + ledger.committed(scope, r, ms)
                charged = any(scope in ledger.entries[k].scopes for k in new if k in ledger.entries)
                if charged and scope.spec.mode == "hold":
                    assert used <= scope.spec.limits[r], (scope.label, used, scope.spec.limits[r])

    @rule(app=st.sampled_from(sorted(APPS)), gpus=st.integers(1, 4),
          runtime=st.one_of(st.none(), st.sampled_from([0.5 * H, 2 * H, 8 * H])))
    def allocate(self, app: str, gpus: int, runtime: float | None) -> None:
        self.n += 1
        self.p.allocate(app, f"k{self.n}", {"nvidia.com/gpu": gpus}, max_runtime=runtime)
        self._check_new_admissions()

    @rule(app=st.sampled_from(sorted(APPS)), gpus=st.integers(1, 4),
          runtime=st.one_of(st.none(), st.sampled_from([1 * H, 4 * H])))
    def ask(self, app: str, gpus: int, runtime: float | None) -> None:
        self.n += 1
        self.p.add_ask(app, f"q{self.n}", {"nvidia.com/gpu": gpus}, max_runtime=runtime)
        self._check_new_admissions()

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        keys = sorted(k for a in self.p.allocations() if not (k := a.allocation_key).startswith("keep"))
        if keys:
            self.p.release(data.draw(st.sampled_from(keys)))
            self.admitted &= {a.allocation_key for a in self.p.allocations()}
            self._check_new_admissions()

    @rule(hours=st.sampled_from([0.25, 1.0, 3.0, 7.0, 26.0]))
    def advance(self, hours: float) -> None:
        self.clock.advance(hours * H)

    @rule()
    def tick(self) -> None:
        self.p.check_timeouts()
        self._check_new_admissions()

    @rule()
    def snapshot(self) -> None:
        self.p.take_snapshot()

    @rule()
    def kill9_and_restart(self) -> None:
        live = self.p.dump_state()
        self.s.close(snapshot=False)
        self.s, self.p = self._open()
        assert self.p.dump_state() == live

    @invariant()
    def replay_state_is_json(self) -> None:
        state: Any = self._policy().dump_state()
        assert state is not None

    def teardown(self) -> None:
        self.s.close(snapshot=False)
        self.dir.cleanup()


TestBudgetMachine = BudgetMachine.TestCase
TestBudgetMachine.settings = settings(max_examples=25, stateful_step_count=30, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])


class BestEffortMachine(BudgetMachine):
    """The same with team a's budget ``besteffort``: it runs past its budget on idle capacity and is
    taken back for the others' waiting asks — the ``hold`` budgets still hold, and a restart from the
    journal still holds exactly the live state (the take-backs replay)."""

    config = CONFIG.replace("period: day}", "period: day, exhausted: besteffort}")


TestBestEffortMachine = BestEffortMachine.TestCase
TestBestEffortMachine.settings = settings(max_examples=20, stateful_step_count=30, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
