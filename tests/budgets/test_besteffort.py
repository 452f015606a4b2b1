"""``exhausted: besteffort`` (issue 34): once a scope has spent its budget its work continues, but only on
otherwise-idle capacity — capacity no allocation holds and no waiting ask of another scope asks for —
and it is the first taken back when other work waits (reason ``budget.exhausted``). The month scenario
with a kill -9 in between, and the 1st, when the budget resets."""

from __future__ import annotations

from pathlib import Path

from quotaplane.config.identity import UserGroup
from quotaplane.scheduler import Scheduler
from tests.budgets.test_admission import DEC1, NOV1, H, _status, config
from tests.partition.helpers import Clock


def _start(store: str | None, clock: Clock) -> tuple[Scheduler, object]:
    s = Scheduler.from_yaml(config("besteffort"), store=store, clock=clock)
    p = s.partition("default")
    if not p.nodes():
        p.add_node("n1", {"nvidia.com/gpu": 8})
        p.add_application("train", UserGroup("alice", ("ml",)), queue="root.teams.a")
        p.add_application("web", UserGroup("bob", ()), queue="root.teams.b")
    return s, p


def test_an_exhausted_besteffort_scope_runs_on_idle_capacity_only(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/q.db"
    clock = Clock(NOV1 + 8 * H)
    s, p = _start(store, clock)
    assert p.allocate("train", "a1", {"nvidia.com/gpu": 4}, priority=5).allocated
    clock.advance(20 * H)                                   # 80 %: told once, as with hold
    seq = p.last_seq
    p.check_timeouts()
    assert [n["threshold"] for n in p.notices_after(seq) if n["type"] == "budget_warning"] == [80]
    s.close(snapshot=False)                                 # kill -9
    s, p = _start(store, clock)
    assert _status(p, clock())["resources"]["nvidia.com/gpu"]["consumed"] == 80
    clock.advance(5 * H)                                    # 100 %: exhausted, but best effort
    assert _status(p, clock())["onExhausted"] == "besteffort"
    # nothing else wants the idle GPUs: the work continues
    assert p.allocate("train", "a2", {"nvidia.com/gpu": 2}, priority=1).allocated
    # b asks for 4: 2 are idle, but b wants them, so they are not idle for a
    assert p.allocate("web", "b1", {"nvidia.com/gpu": 1}).allocated
    p.add_ask("web", "b2", {"nvidia.com/gpu": 3})
    assert p.allocation("b2") is None
    refused = p.allocate("train", "a3", {"nvidia.com/gpu": 1})
    assert [v.code for v in refused.reasons] == ["budget.exhausted"]
    assert "otherwise-idle" in refused.reasons[0].message
    assert "resets at 2026-12-01T00:00:00+00:00" in refused.reasons[0].message
    # the timer takes back a's best-effort work first, lowest priority first, until b's ask fits
    seq = p.last_seq
    assert p.check_timeouts() == ["a2: preempted by budget (root.teams.a)"]
    [notice] = [n for n in p.notices_after(seq) if n["type"] == "preempted"]
    assert notice["reason"]["code"] == "budget.exhausted"
    assert "best effort" in notice["reason"]["message"]
    assert p.allocation("b2") is not None                   # b's ask got the room
    assert p.allocation("a1") is not None                   # what b does not need keeps running
    assert p.check_timeouts() == []                         # nothing waits: nothing more taken
    p.add_ask("train", "a4", {"nvidia.com/gpu": 1})         # the cluster is full: a waits
    assert p.allocation("a4") is None
    p.release("b2")                                         # idle again, nobody else wants it
    assert p.allocation("a4") is not None                   # best effort runs on it
    live = p.dump_state()
    s.close(snapshot=False)
    s, p = _start(store, clock)
    assert p.dump_state() == live                           # replay equals state
    # on the 1st the budget resets: a's work is ordinary work again
    clock.now = DEC1 + 1
    p.check_timeouts()
    assert _status(p, clock())["resources"]["nvidia.com/gpu"]["consumed"] < 1
    p.add_ask("web", "b3", {"nvidia.com/gpu": 2})           # waits for a full cluster
    assert p.check_timeouts() == []                         # a is not best effort now: not taken
    assert p.allocation("a1") is not None
    s.close(snapshot=False)


def test_a_hold_budget_elsewhere_still_holds_and_besteffort_is_validated() -> None:
    from quotaplane.config.budgets import parse_budgets
    [spec] = parse_budgets([{"queue": "root.a", "resourcehours": {"vcore": 1}, "exhausted": "besteffort"}])
    assert spec.mode == "besteffort"
    import pytest

    from quotaplane.config.budgets import BudgetSpecError
    with pytest.raises(BudgetSpecError, match="hold, preempt, besteffort"):
        parse_budgets([{"queue": "root.a", "resourcehours": {"vcore": 1}, "exhausted": "never"}])
    with pytest.raises(BudgetSpecError, match="grace"):
        parse_budgets([{"queue": "root.a", "resourcehours": {"vcore": 1}, "exhausted": "besteffort",
                        "grace": "1h"}])
