"""Budgets in the write path (issue 34): the month scenario with a fake clock — team-a has 100 GPU-hours
a month and borrows idle GPUs, reaches 80 % then 100 % (held, with the reset date), survives a kill -9
with its consumption unchanged, and its waiting asks are admitted on the 1st — the same with
``preempt``, replay and snapshots equal to the live state."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from quotaplane.config.identity import UserGroup
from quotaplane.partition import Partition
from quotaplane.policies.budgets import BudgetPolicy
from quotaplane.scheduler import Scheduler
from tests.partition.helpers import Clock

NOV1 = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
DEC1 = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
H = 3600.0


def config(mode: str = "hold", extra: str = "") -> str:
    return f"""
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: teams
      queues:
      - name: a
        resources: {{guaranteed: {{nvidia.com/gpu: 2}}}}
      - name: b
        resources: {{guaranteed: {{nvidia.com/gpu: 6}}}}
  budgets:
  - queue: root.teams.a
    resourcehours: {{nvidia.com/gpu: 100}}
    period: month
    exhausted: {mode}
{extra}
"""


def _policy(p: Partition) -> BudgetPolicy:
    found = next(pol for _, pol in p.extensions() if isinstance(pol, BudgetPolicy))
    assert isinstance(found, BudgetPolicy)
    return found


def _status(p: Partition, now: float) -> dict[str, Any]:
    [st] = [s for s in _policy(p).statuses(now) if s["scope"] == "root.teams.a"]
    return st


def _start(store: str | None, clock: Clock, mode: str = "hold") -> tuple[Scheduler, Partition]:
    s = Scheduler.from_yaml(config(mode), store=store, clock=clock)
    p = s.partition("default")
    if not p.nodes():
        p.add_node("n1", {"nvidia.com/gpu": 8})
        p.add_application("train", UserGroup("alice", ("ml",)), queue="root.teams.a")
    return s, p


def test_the_month_scenario_hold_kill9_and_the_first_of_the_month(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/q.db"
    clock = Clock(NOV1 + 8 * H)
    s, p = _start(store, clock)
    # 4 GPUs: 2 guaranteed, 2 borrowed from b's idle guarantee — all charged to a's budget
    assert p.allocate("train", "k1", {"nvidia.com/gpu": 4}).allocated
    clock.advance(20 * H)                           # 80 GPU-hours: 80 %
    st = _status(p, clock())
    assert st["resources"]["nvidia.com/gpu"]["consumed"] == 80 and st["warnings"] == [50, 80]
    # standing shows what is left, the burn rate and when it runs out at that rate
    [standing] = p.standing("queue", "root.teams.a")["budgets"]
    gpu = standing["resources"]["nvidia.com/gpu"]
    assert (gpu["left"], gpu["burnRate"], gpu["runsOutAt"]) == (20, 4, "2026-11-02T09:00:00+00:00")
    assert "budgets" not in p.standing("queue", "root.teams.b")
    assert st["resetsAt"] == "2026-12-01T00:00:00+00:00"
    # the timer's tick tells subscribers once per threshold reached (50 and 80 at once: the highest)
    seq = p.last_seq
    p.check_timeouts()
    warned = [n for n in p.notices_after(seq) if n["type"] == "budget_warning"]
    assert [(n["scope"], n["threshold"], n["usedPercent"]) for n in warned] == [("root.teams.a", 80, 80.0)]
    assert warned[0]["resetsAt"] == "2026-12-01T00:00:00+00:00"
    # kill -9: nothing but the journal survives
    s.close(snapshot=False)
    s, p = _start(store, clock)
    assert _status(p, clock())["resources"]["nvidia.com/gpu"]["consumed"] == 80
    seq = p.last_seq
    p.check_timeouts()                  # the replay knows 80 % was told: not again
    assert not [n for n in p.notices_after(seq) if n["type"] == "budget_warning"]
    clock.advance(5 * H)                            # 100 GPU-hours
    seq = p.last_seq
    p.check_timeouts()
    assert [n["threshold"] for n in p.notices_after(seq) if n["type"] == "budget_warning"] == [100]
    p.release("k1")
    decision = p.allocate("train", "k2", {"nvidia.com/gpu": 1})
    assert not decision.allocated
    [reason] = decision.reasons
    assert reason.code == "budget.exhausted" and reason.path == "root.teams.a"
    assert "100 of 100 GPU-hours" in reason.message and "0 left" in reason.message
    assert "resets at 2026-12-01T00:00:00+00:00" in reason.message
    # an ask waits with the same reason
    p.add_ask("train", "ask1", {"nvidia.com/gpu": 2})
    assert [v.code for v in p.pending_reasons("ask1") or []] == ["budget.exhausted"]
    # other teams are not held
    p.add_application("web", UserGroup("bob", ()), queue="root.teams.b")
    assert p.allocate("web", "w1", {"nvidia.com/gpu": 1}).allocated
    # on the 1st the budget resets: the timer's tick admits the waiting ask
    clock.now = DEC1 + 1
    p.check_timeouts()
    assert p.allocation("ask1") is not None and not p.pending()
    st = _status(p, DEC1 + H)
    assert st["resources"]["nvidia.com/gpu"]["consumed"] == round(2 * (H - 1) / H, 4)
    s.close(snapshot=False)


def _replayed(store: str, clock: Clock, mode: str) -> dict[str, Any]:
    s = Scheduler.from_yaml(config(mode), store=store, clock=clock)
    try:
        return s.partition("default").dump_state()
    finally:
        s.close(snapshot=False)


def test_replay_and_a_snapshot_restore_equal_the_live_state(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/q.db?compact=true"
    clock = Clock(NOV1)
    s, p = _start(store, clock)
    p.add_application("other", UserGroup("carol", ()), queue="root.teams.a")
    for i in range(12):
        clock.advance(7 * H)
        p.allocate("train" if i % 2 else "other", f"k{i}", {"nvidia.com/gpu": 1 + i % 3})
        if i % 3 == 2 and p.allocation(f"k{i - 1}") is not None:
            p.release(f"k{i - 1}")
        if i == 6:
            p.take_snapshot()
    p.check_timeouts()
    live = p.dump_state()
    budgets = _policy(p).dump_state()
    assert budgets is not None and budgets["scopes"]
    s.close(snapshot=False)
    assert _replayed(store, clock, "hold") == live


def test_preempt_takes_back_the_exhausted_scope_after_its_grace_lowest_priority_first() -> None:
    clock = Clock(NOV1)
    s = Scheduler.from_yaml(config("preempt").replace("exhausted: preempt",
                                                       "exhausted: preempt\n    grace: 1h"), clock=clock)
    p = s.partition("default")
    p.add_node("n1", {"nvidia.com/gpu": 8})
    p.add_application("train", UserGroup("alice", ()), queue="root.teams.a")
    assert p.allocate("train", "hi", {"nvidia.com/gpu": 2}, priority=10).allocated
    assert p.allocate("train", "lo", {"nvidia.com/gpu": 2}, priority=1).allocated
    clock.advance(25 * H)                               # 100 GPU-hours: exhausted
    assert p.check_timeouts() == []                      # the grace starts
    clock.advance(0.5 * H)
    assert p.check_timeouts() == []
    clock.advance(0.5 * H)
    events = p.check_timeouts()
    assert events == ["lo: preempted by budget (root.teams.a)", "hi: preempted by budget (root.teams.a)"]
    assert not p.allocations()


def test_the_month_scenario_with_preempt_kill9_and_the_first_of_the_month(tmp_path: Path) -> None:
    """As the hold scenario, with ``exhausted: preempt`` and a grace of an hour: at 100 % (after a kill -9
    at 80 %) the waiting ask is held, and an hour later the team's running work is preempted, lowest
    priority first, reported as ``preempted`` with reason ``budget.exhausted``; on the 1st the ask runs."""
    store = f"sqlite:///{tmp_path}/q.db"
    clock = Clock(NOV1 + 8 * H)
    text = config("preempt").replace("exhausted: preempt", "exhausted: preempt\n    grace: 1h")
    s = Scheduler.from_yaml(text, store=store, clock=clock)
    p = s.partition("default")
    p.add_node("n1", {"nvidia.com/gpu": 8})
    p.add_application("train", UserGroup("alice", ("ml",)), queue="root.teams.a")
    p.allocate("train", "low", {"nvidia.com/gpu": 2}, priority=1)
    p.allocate("train", "high", {"nvidia.com/gpu": 2}, priority=5)      # 4 GPUs: 2 of them borrowed
    clock.advance(20 * H)
    assert _status(p, clock())["warnings"] == [50, 80]
    s.close(snapshot=False)                                             # kill -9 at 80 %
    s = Scheduler.from_yaml(text, store=store, clock=clock)
    p = s.partition("default")
    assert _status(p, clock())["resources"]["nvidia.com/gpu"]["consumed"] == 80
    clock.advance(5 * H)                                                # 100 %
    p.add_ask("train", "ask1", {"nvidia.com/gpu": 1})
    assert [v.code for v in p.pending_reasons("ask1") or []] == ["budget.exhausted"]
    seq = p.last_seq
    assert p.check_timeouts() == []                                     # exhausted: the grace starts
    clock.advance(H)
    assert p.check_timeouts() == ["low: preempted by budget (root.teams.a)",
                                  "high: preempted by budget (root.teams.a)"]
    [notice] = [n for n in p.notices_after(seq) if n["type"] == "preempted"]
    assert notice["reason"]["code"] == "budget.exhausted"
    assert [a["allocationKey"] for a in notice["allocations"]] == ["low", "high"]
    assert p.pending() and not p.allocations()
    # the Kubernetes front writes the reason into the waiting pod's condition
    from quotaplane.kube.controller import waiting_message
    message = waiting_message(p.pending_reasons("ask1") or [])
    assert message.startswith("budget.exhausted at root.teams.a, short of {'nvidia.com/gpu': 1}: "
                              "budget of root.teams.a for nvidia.com/gpu")
    assert "resets at 2026-12-01T00:00:00+00:00" in message
    clock.now = DEC1 + 1
    p.check_timeouts()
    assert p.allocation("ask1") is not None
    s.close(snapshot=False)


def test_a_declared_runtime_commits_its_whole_length_at_admission() -> None:
    clock = Clock(NOV1)
    s = Scheduler.from_yaml(config(), clock=clock)
    p = s.partition("default")
    p.add_node("n1", {"nvidia.com/gpu": 8})
    p.add_application("long", UserGroup("alice", ()), queue="root.teams.a",
                      tags={"quotaplane.io/max-runtime": "20h"})
    assert p.allocate("long", "k1", {"nvidia.com/gpu": 4}).allocated        # commits 80 GPU-hours
    refused = p.allocate("long", "k2", {"nvidia.com/gpu": 2})               # 40 more: over 100
    assert not refused.allocated and "would commit 40" in refused.reasons[0].message
    assert "80 committed by running work" in refused.reasons[0].message
    assert p.allocate("long", "k3", {"nvidia.com/gpu": 1}).allocated        # 20 more: exactly 100
    p.add_application("bad", UserGroup("alice", ()), queue="root.teams.a",
                      tags={"quotaplane.io/max-runtime": "soon"})
    bad = p.allocate("bad", "k4", {"nvidia.com/gpu": 1})
    assert [v.code for v in bad.reasons] == ["budget.runtime"] and "'soon'" in bad.reasons[0].message


def test_an_allocation_or_an_ask_declares_its_own_runtime_and_replay_commits_it_again(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/q.db"
    clock = Clock(NOV1)
    s, p = _start(store, clock)
    assert p.allocate("train", "k1", {"nvidia.com/gpu": 4}, max_runtime=20 * H).allocated     # 80 committed
    assert not p.allocate("train", "k2", {"nvidia.com/gpu": 3}, max_runtime=10 * H).allocated  # 30 more: over
    p.add_ask("train", "a1", {"nvidia.com/gpu": 3}, max_runtime=10 * H)
    assert [v.code for v in p.pending_reasons("a1") or []] == ["budget.exhausted"]
    clock.advance(5 * H)                       # 20 consumed + 60 committed: still 80
    assert p.pending()
    p.release("k1")                            # ends early: its 60 committed hours are free again
    assert p.allocation("a1") is not None
    live = _policy(p).dump_state()
    s.close(snapshot=False)
    s, p = _start(store, clock)
    assert _policy(p).dump_state() == live
    s.close(snapshot=False)


def test_what_if_answers_with_the_budget_and_changes_nothing() -> None:
    clock = Clock(NOV1)
    s = Scheduler.from_yaml(config(), clock=clock)
    p = s.partition("default")
    p.add_node("n1", {"nvidia.com/gpu": 8})
    p.add_application("train", UserGroup("alice", ()), queue="root.teams.a")
    p.allocate("train", "k1", {"nvidia.com/gpu": 5})
    clock.advance(20 * H)
    before = _policy(p).dump_state()
    assert [v.code for v in p.what_if("train", {"nvidia.com/gpu": 1}).reasons] == ["budget.exhausted"]
    assert _policy(p).dump_state() == before


def test_a_reload_keeps_what_was_consumed_and_applies_the_new_amount() -> None:
    clock = Clock(NOV1)
    s = Scheduler.from_yaml(config(), clock=clock)
    p = s.partition("default")
    p.add_node("n1", {"nvidia.com/gpu": 8})
    p.add_application("train", UserGroup("alice", ()), queue="root.teams.a")
    p.allocate("train", "k1", {"nvidia.com/gpu": 5})
    clock.advance(20 * H)
    assert not p.allocate("train", "k2", {"nvidia.com/gpu": 1}).allocated
    s.update_config(config().replace("nvidia.com/gpu: 100}", "nvidia.com/gpu: 200}"))
    assert p.allocate("train", "k2", {"nvidia.com/gpu": 1}).allocated
    assert _status(p, clock())["resources"]["nvidia.com/gpu"]["consumed"] == 100


def test_a_configured_budget_is_listed_before_anything_charged_it() -> None:
    """A new user configures a budget and asks for the list: it is there, nothing consumed, all of it
    left (before, only the scopes something had charged were listed, so a fresh service listed none).
    A wildcard budget per user lists the users it has seen, none yet."""
    extra = "  - queue: root.teams\n    user: '*'\n    resourcehours: {nvidia.com/gpu: 5}\n"
    p = Scheduler.from_yaml(config(extra=extra), clock=Clock()).partition("default")
    listed = _policy(p).statuses()
    assert [st["scope"] for st in listed] == ["root.teams.a"]
    gpu = listed[0]["resources"]["nvidia.com/gpu"]
    assert (gpu["limit"], gpu["consumed"], gpu["committed"], gpu["left"]) == (100.0, 0.0, 0.0, 100.0)
    assert p.dump_state()["policies"] == Scheduler.from_yaml(config(extra=extra), clock=Clock()
                                                             ).partition("default").dump_state()["policies"]


def test_a_budget_refusal_names_the_resource_it_is_short_of() -> None:
    """Defect: the ``budget.exhausted`` reason carried no resource (``"resource": {}``), so what-if
    printed "SHORT OF -": it names what of the request the budget cannot take — every resource the
    budget is short of, in the request's amounts."""
    from quotaplane import Resource
    from tests.eta.test_explain_timed import _over_budget

    _, p, _ = _over_budget(8)
    decision = p.what_if("train", {"nvidia.com/gpu": 2})
    [reason] = decision.reasons
    assert reason.code == "budget.exhausted"
    assert reason.resource == Resource({"nvidia.com/gpu": 2})
    assert reason.to_dict()["resource"] == {"nvidia.com/gpu": 2}
