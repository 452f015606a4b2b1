"""A ``budget.exhausted`` reason names what of the request the budget cannot hold (found trying the
product as a new user: the reason carried ``"resource": {}``, so ``whatif`` printed ``SHORT OF -``)."""

from __future__ import annotations

from quotaplane.cli_remote import whatif_text
from quotaplane.config.identity import UserGroup
from quotaplane.scheduler import Scheduler
from tests.budgets.test_admission import NOV1, H, config
from tests.partition.helpers import Clock


def test_a_budget_refusal_names_the_resource_and_amount_it_is_short_of() -> None:
    clock = Clock(NOV1)
    s = Scheduler.from_yaml(config(), clock=clock)
    p = s.partition("default")
    p.add_node("n1", {"nvidia.com/gpu": 8, "vcore": 64000})
    p.add_application("train", UserGroup("alice", ("ml",)), queue="root.teams.a")
    # 100 GPU-hours: 3 GPUs for 40 hours would commit 120 of them; the vcore it asks for is not budgeted
    d = p.what_if("train", {"nvidia.com/gpu": 3, "vcore": 2000}, max_runtime=40 * H)
    [reason] = d.reasons
    assert reason.code == "budget.exhausted"
    assert reason.to_dict()["resource"] == {"nvidia.com/gpu": 3}
    assert "this allocation would commit 120" in reason.message, reason.message
    table = whatif_text({"allocated": False, "reasons": [reason.to_dict()]}, wide=False)
    row = table.splitlines()[-1].split()
    assert row[1:3] == ["budget.exhausted", "root.teams.a"] and row[3:] == ["3", "GPUs"], table
    # spent: a request with no declared runtime is short of what it asks for, by name
    assert p.allocate("train", "k1", {"nvidia.com/gpu": 4}).allocated
    clock.advance(25 * H)
    [spent] = p.what_if("train", {"nvidia.com/gpu": 1}).reasons
    assert spent.to_dict()["resource"] == {"nvidia.com/gpu": 1}
    s.close()
