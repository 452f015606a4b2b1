"""Positions with Kueue's fair sharing on (KQ-S4): an ask's reported position is its index in the
order the cycle tries asks in — the fair-sharing tournament, every queue compared with its head added —
not in an order of the queues' current shares."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.partition import Partition
from quotaplane.scheduler import Scheduler
from quotaplane.scheduling.order import candidates
from quotaplane.scheduling.positions import positions
from tests.fairsharing.helpers import GPU, U, partition
from tests.partition.helpers import Clock

EVEN = f"""
- name: a
  resources: {{guaranteed: {{{GPU}: 2}}}}
- name: b
  resources: {{guaranteed: {{{GPU}: 2}}}}
"""


def _positions(p: Partition) -> dict[str, int]:
    state = p._core.state
    root = state.queues.queue("root")
    assert root is not None
    return positions(state.waiting.asks, root, state.apps, state.waiting.asks.unsorted(),
                     rank=state.history.rank())


def test_the_position_follows_the_head_not_the_current_share() -> None:
    """a borrows 1 now, b nothing; with their heads a would borrow 2 (200 per mille), b 5 (500): the
    cycle tries a's ask first (tests/fairsharing/test_order.py), so a2 stands first although b's
    current share is the lower; the next head of a (a3, 5 GPUs: 600) then comes after b2."""
    p, clock = partition(EVEN, nodes={GPU: 10})
    for app in ("a", "b"):
        p.add_application(app, U, queue=f"root.{app}")
        clock.advance(1)
    assert p.allocate("a", "a1", {GPU: 3}) and p.allocate("b", "b1", {GPU: 2})
    p.auto_schedule = False
    p.add_ask("a", "a2", {GPU: 1})
    p.add_ask("b", "b2", {GPU: 5})
    p.add_ask("a", "a3", {GPU: 5})
    assert _positions(p) == {"a2": 1, "b2": 2, "a3": 3}
    standing = p.standing("queue", "root")
    assert standing is not None
    assert [(w["allocationKey"], w["position"]) for w in standing["waiting"]] == \
        [("a2", 1), ("b2", 2), ("a3", 3)]
    assert [a.allocation_key for a in p.schedule()][:1] == ["a2"]


TREE = """
partitions:
- name: default
  fairsharing: {enabled: true}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: d
      resources: {guaranteed: {vcore: 6}}
      properties: {fairsharing.weight: "2"}
      queues:
      - name: f
        resources: {guaranteed: {vcore: 1}, max: {vcore: 4}}
      - name: fair
        resources: {guaranteed: {vcore: 2}}
        properties: {application.sort.policy: fair, fairsharing.weight: "0.5"}
      - name: p
        queues:
        - name: s
          properties: {application.sort.policy: stateaware}
        - name: g
          resources: {guaranteed: {vcore: 1}, max: {vcore: 3}}
    - name: e
      resources: {guaranteed: {vcore: 1}, max: {vcore: 5}}
"""
LEAVES = ["d.f", "d.fair", "d.p.s", "d.p.g", "e"]
USERS = [UserGroup("alice", ["dev"]), UserGroup("bob", ["ops"])]
_STEP = st.tuples(st.sampled_from(["ask", "ask", "ask", "allocate", "allocate", "release", "withdraw"]),
                  st.integers(0, len(LEAVES) - 1), st.integers(0, len(USERS) - 1), st.integers(1, 3),
                  st.integers(0, 2))


def _cycle_order(p: Partition) -> dict[str, int]:
    """The cycle's own order now (its iterator, :func:`~quotaplane.scheduling.order.candidates`, the
    fair-sharing tournament here), nothing allocated: the slow twin of positions."""
    state = p._core.state
    root = state.queues.queue("root")
    assert root is not None and root.fair is not None
    return {ask.allocation_key: i + 1 for i, (_, ask) in
            enumerate(candidates(state.waiting.asks, root, state.apps, rank=state.history.rank()))}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_STEP, min_size=1, max_size=30), st.booleans(), st.integers(0, 2), st.data())
def test_positions_equal_the_fair_sharing_order(steps: list[tuple[str, int, int, int, int]],
                                               memory: bool, apps_per_user: int, data: Any) -> None:
    """The positions of any set of asks, and standing's, equal their index in the cycle's order with
    fair sharing on, on random histories: queues within and beyond their guaranteed at two levels,
    weights, heads of every size, priorities, fifo, fair and stateaware leaves, fair share with memory
    on or off."""
    text = TREE if not memory else TREE.replace(
        "- name: default\n", "- name: default\n  history: {fairshare: {enabled: true, halflife: 30m}}\n", 1)
    clock = Clock()
    p = Scheduler.from_yaml(text, clock=clock).partition("default")
    p.add_node("n", Resource({"vcore": 12000}))
    p.auto_schedule = False
    for i, (op, leaf, user, size, prio) in enumerate(steps):
        clock.advance(7)
        u = USERS[user]
        app = f"{LEAVES[leaf]}-{u.user}-{i % (apps_per_user + 1)}"
        if op in ("ask", "allocate") and p.application(app) is None:
            p.add_application(app, u, queue=f"root.{LEAVES[leaf]}")
        if op == "ask":
            p.add_ask(app, f"k{i}", Resource({"vcore": size * 1000}), priority=prio)
        elif op == "allocate":
            p.allocate(app, f"k{i}", Resource({"vcore": size * 1000}))
        elif op == "release" and (allocs := p.allocations()):
            p.release(allocs[size * 7 % len(allocs)].allocation_key)
        elif op == "withdraw" and (pending := p.pending()):
            p.remove_ask(pending[size * 5 % len(pending)].allocation_key)
        expected = _cycle_order(p)
        state = p._core.state
        root = state.queues.queue("root")
        assert root is not None
        pending = state.waiting.asks.unsorted()
        wanted = data.draw(st.lists(st.sampled_from(pending), unique_by=lambda a: a.allocation_key)) \
            if pending else []
        got = positions(state.waiting.asks, root, state.apps, wanted, rank=state.history.rank())
        assert got == {a.allocation_key: expected[a.allocation_key] for a in wanted
                       if a.allocation_key in expected}
        for q in ("root", "root.d", "root.e"):
            standing = p.standing("queue", q)
            assert standing is not None
            assert {w["allocationKey"]: w["position"] for w in standing["waiting"]} == \
                {a.allocation_key: expected.get(a.allocation_key) for a in pending
                 if (ap := p.application(a.application_id)) is not None
                 and (ap.queue_path == q or ap.queue_path.startswith(q + "."))}
