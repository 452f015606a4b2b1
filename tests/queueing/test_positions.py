"""Positions without a global sort (issue 39): :func:`quotaplane.scheduling.positions.positions` of any set
of asks equals their index in the global order (:func:`~quotaplane.scheduling.order.candidates` over
every pending ask, its slow twin), on random histories over a tree with fifo, fair and stateaware
leaves, several levels, guaranteed and maxima, priorities, applications that cannot take allocations
(also with asks still waiting: a gang failed by its hard timeout), and fair share with memory on or off;
and standing reports those positions (read from the queues' ask counts)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotaplane import Resource
from quotaplane.application import ACTIVE_STATES
from quotaplane.config.identity import UserGroup
from quotaplane.partition import Partition
from quotaplane.scheduler import Scheduler
from quotaplane.scheduling.order import candidates
from quotaplane.scheduling.positions import positions
from tests.partition.helpers import Clock

CONFIG = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: d
      resources: {guaranteed: {vcore: 6}}
      queues:
      - name: f
        resources: {max: {vcore: 4}}
      - name: fair
        resources: {guaranteed: {vcore: 2}}
        properties: {application.sort.policy: fair}
      - name: p
        queues:
        - name: s
          properties: {application.sort.policy: stateaware}
        - name: g
          resources: {guaranteed: {vcore: 1}, max: {vcore: 3}}
    - name: e
      resources: {max: {vcore: 5}}
"""
LEAVES = ["d.f", "d.fair", "d.p.s", "d.p.g", "e"]
USERS = [UserGroup("alice", ["dev"]), UserGroup("bob", ["ops"]), UserGroup("carol", ["dev"])]


def _global(p: Partition) -> dict[str, int]:
    state = p._core.state
    root = state.queues.queue("root")
    assert root is not None
    return {ask.allocation_key: i + 1 for i, (_, ask) in
            enumerate(candidates(state.waiting.asks, root, state.apps, rank=state.history.rank()))}


_STEP = st.tuples(st.sampled_from(["ask", "ask", "ask", "allocate", "release", "withdraw", "remove_app",
                                   "tick", "gang", "config"]),
                  st.integers(0, len(LEAVES) - 1), st.integers(0, len(USERS) - 1), st.integers(1, 3),
                  st.integers(0, 2))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_STEP, min_size=1, max_size=40), st.booleans(), st.integers(0, 3), st.data())
def test_positions_equal_the_global_order(steps: list[tuple[str, int, int, int, int]], fair: bool,
                                          apps_per_user: int, data: Any) -> None:
    text = CONFIG if not fair else CONFIG.replace(
        "- name: default\n", "- name: default\n  history: {fairshare: {enabled: true, halflife: 30m}}\n", 1)
    clock = Clock()
    base = text
    sched = Scheduler.from_yaml(text, clock=clock)
    p = sched.partition("default")
    p.add_node("n", Resource({"vcore": 9000}))
    for i, (op, leaf, user, size, prio) in enumerate(steps):
        clock.advance(7)
        u = USERS[user]
        app = f"{LEAVES[leaf]}-{u.user}-{i % (apps_per_user + 1)}"
        if op in ("ask", "allocate") and p.application(app) is None:
            p.add_application(app, u, queue=f"root.{LEAVES[leaf]}")
        if op in ("ask", "allocate") and p.application(app).state not in ACTIVE_STATES:
            pass                        # a completed application takes nothing (a refusal, tested elsewhere)
        elif op == "ask":
            p.add_ask(app, f"k{i}", Resource({"vcore": size * 1000}), priority=prio)
        elif op == "allocate":
            p.allocate(app, f"k{i}", Resource({"vcore": size * 1000}))
        elif op == "release" and (allocs := p.allocations()):
            p.release(allocs[size * 7 % len(allocs)].allocation_key)
        elif op == "withdraw" and (pending := p.pending()):
            p.remove_ask(pending[size * 5 % len(pending)].allocation_key)
        elif op == "remove_app" and p.application(app) is not None:
            p.remove_application(app)
        elif op == "tick":
            p.check_timeouts()
        elif op == "config":
            # a leaf turns stateaware, or stops being so: the leaves a position counts one by one are
            # found again
            f_stateaware = base.replace("resources: {max: {vcore: 4}}\n", "resources: {max: {vcore: 4}}\n"
                                        "        properties: {application.sort.policy: stateaware}\n", 1)
            s_fifo = base.replace("policy: stateaware}", "policy: fifo}")
            sched.update_config((base, f_stateaware, s_fifo)[size - 1])
        elif op == "gang":
            # a hard gang whose placeholder times out (10 s: two steps and a tick) fails with its ask
            # still waiting, too big to fit anywhere: the cycle yields it no more
            gang = f"gang{i}"
            p.add_application(gang, u, queue=f"root.{LEAVES[leaf]}", gang_style="hard",
                              placeholder_timeout=10)
            p.allocate(gang, f"ph{i}", Resource({"vcore": 1000}), placeholder=True, task_group="tg")
            p.add_ask(gang, f"k{i}", Resource({"vcore": 50_000}), priority=prio)
        expected = _global(p)
        state = p._core.state
        root = state.queues.queue("root")
        assert root is not None
        pending = state.waiting.asks.unsorted()
        wanted = data.draw(st.lists(st.sampled_from(pending), unique_by=lambda a: a.allocation_key)) \
            if pending else []
        got = positions(state.waiting.asks, root, state.apps, wanted, rank=state.history.rank())
        assert got == {a.allocation_key: expected[a.allocation_key] for a in wanted
                       if a.allocation_key in expected}
        for u in USERS:
            if not any(a.user.user == u.user for a in state.apps.values()):
                continue
            st_user = p.standing("user", u.user)
            if st_user is not None:
                assert {w["allocationKey"]: w["position"] for w in st_user["waiting"]} == \
                    {a.allocation_key: expected.get(a.allocation_key) for a in pending
                     if (ap := p.application(a.application_id)) is not None and ap.user.user == u.user}
        for q in ("root", "root.d", "root.d.p", "root.e"):
            st_queue = p.standing("queue", q)
            assert st_queue is not None
            assert {w["allocationKey"]: w["position"] for w in st_queue["waiting"]} == \
                {a.allocation_key: expected.get(a.allocation_key) for a in pending
                 if (ap := p.application(a.application_id)) is not None
                 and (ap.queue_path == q or ap.queue_path.startswith(q + "."))}


def test_a_leaf_turned_stateaware_by_a_configuration_holds_its_asks_back_in_the_positions() -> None:
    """The stateaware leaves are found again after a configuration: in d.f turned stateaware no
    application may start while one is Starting, so its waiting asks have no position and e's ask comes
    first (the tree's cache of those leaves, QueueTree.stateaware_leaves)."""
    clock = Clock()
    sched = Scheduler.from_yaml(CONFIG, clock=clock)
    p = sched.partition("default")
    p.add_node("n", Resource({"vcore": 9000}))
    for app, user, leaf in (("a0", 0, "d.f"), ("a1", 0, "d.f"), ("a2", 1, "d.f"), ("b", 2, "e")):
        p.add_application(app, USERS[user], queue=f"root.{leaf}")
    p.allocate("a0", "r0", Resource({"vcore": 4000}))       # d.f full, a0 Starting
    p.allocate("b", "r1", Resource({"vcore": 5000}))        # e full
    for app, key in (("a1", "k1"), ("a2", "k2"), ("b", "k3")):
        clock.advance(1)
        p.add_ask(app, key, Resource({"vcore": 1000}))
    before = {w["allocationKey"]: w["position"] for w in p.standing("queue", "root")["waiting"]}
    assert before == _global(p) and set(before) == {"k1", "k2", "k3"}
    sched.update_config(CONFIG.replace("resources: {max: {vcore: 4}}\n", "resources: {max: {vcore: 4}}\n"
                                       "        properties: {application.sort.policy: stateaware}\n", 1))
    after = {w["allocationKey"]: w["position"] for w in p.standing("queue", "root")["waiting"]}
    assert after == {"k1": None, "k2": None, "k3": 1} and _global(p) == {"k3": 1}


def test_applications_that_complete_are_not_kept_for_the_positions() -> None:
    """Only an application that takes no allocation and still has asks is noted for the positions (a
    gang failed by its hard timeout); those that complete, and those that leave, are not kept."""
    clock = Clock()
    p = Scheduler.from_yaml(CONFIG, clock=clock).partition("default")
    p.add_node("n", Resource({"vcore": 9000}))
    for i in range(20):
        p.add_application(f"a{i}", USERS[0], queue="root.e")
        p.allocate(f"a{i}", f"r{i}", Resource({"vcore": 100}))
        p.release(f"r{i}")
    clock.advance(p.options.completing_timeout + 1)
    p.check_timeouts()
    assert {p.application(f"a{i}").state for i in range(20)} == {"Completed"}
    waiting = p._core.state.waiting
    assert waiting.quiet == {}
    p.add_application("gang", USERS[1], queue="root.e", gang_style="hard", placeholder_timeout=10)
    p.allocate("gang", "ph", Resource({"vcore": 1000}), placeholder=True, task_group="tg")
    p.add_ask("gang", "big", Resource({"vcore": 50_000}))
    clock.advance(11)
    p.check_timeouts()
    assert p.application("gang").state == "Failed" and list(waiting.quiet) == ["gang"]
    p.remove_application("gang")
    assert waiting.quiet == {}


def test_a_failed_gang_restored_from_a_snapshot_keeps_its_asks_out_of_the_positions(tmp_path: Any) -> None:
    """A snapshot restores the application's state before its asks: it is noted all the same, so the
    positions after the restart are still the cycle's order."""
    store = f"sqlite:///{tmp_path}/s.db"
    clock = Clock()
    s = Scheduler.from_yaml(CONFIG, clock=clock, store=store)
    p = s.partition("default")
    p.add_node("n", Resource({"vcore": 9000}))
    p.add_application("gang", USERS[1], queue="root.d.f", gang_style="hard", placeholder_timeout=10)
    p.allocate("gang", "ph", Resource({"vcore": 1000}), placeholder=True, task_group="tg")
    p.add_ask("gang", "big", Resource({"vcore": 50_000}))
    p.add_application("b", USERS[0], queue="root.e")
    p.allocate("b", "r", Resource({"vcore": 5000}))
    p.add_ask("b", "k", Resource({"vcore": 1000}))
    clock.advance(11)
    p.check_timeouts()
    assert p.application("gang").state == "Failed"
    p.take_snapshot()
    s.close()
    s2 = Scheduler.from_yaml(CONFIG, clock=clock, store=store)
    assert s2.restored_from["default"] == "snapshot"
    p2 = s2.partition("default")
    positions_now = {w["allocationKey"]: w["position"] for w in p2.standing("queue", "root")["waiting"]}
    assert positions_now == {"big": None, "k": 1} and _global(p2) == {"k": 1}
    s2.close()
