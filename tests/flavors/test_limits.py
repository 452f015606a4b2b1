"""Borrowing and lending limits (docs/config.md "Borrowing and lending limits"; KQ-L1 … KQ-L6) with the
documented outcomes of Kueue's examples (docs ``cluster_queue.md`` §Borrowing, §BorrowingLimit,
§LendingLimit; ``flavorassigner_test.go`` ``TestAssignFlavors``; ``resource_node_test.go``), written as
YuniKorn queue trees: a Kueue cohort is a parent queue whose max is its subtree's total quota, a
ClusterQueue is a leaf whose guaranteed is its nominal quota."""

from __future__ import annotations

import textwrap

import pytest

from quotaplane import Resource
from quotaplane.config import load_config
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.partition import Partition
from quotaplane.queues import QueueTree
from quotaplane.scheduler import Scheduler
from tests.partition.helpers import Clock

U = UserGroup("u")


def cores(n: int) -> Resource:
    return Resource({"vcore": n * 1000})


def _team_ab(a: str = "", b: str = "") -> Partition:
    text = textwrap.dedent(f"""
    partitions:
      - name: default
        queues:
          - name: root
            submitacl: "*"
            queues:
              - name: team-ab                  # the cohort: its total nominal quota is its max
                resources: {{max: {{vcore: 21}}}}
                queues:
                  - name: team-a
                    resources: {{guaranteed: {{vcore: 9}}{a}}}
                  - name: team-b
                    resources: {{guaranteed: {{vcore: 12}}{b}}}
    """)
    s = Scheduler.from_yaml(text, store=MemoryJournal(), clock=Clock())
    p = s.partition("default")
    p.add_node("n", cores(100))
    p.add_application("a", U, queue="root.team-ab.team-a")
    p.add_application("b", U, queue="root.team-ab.team-b")
    return p


def _most(p: Partition, app: str) -> int:
    """The most cores ``app`` can take now, in whole cores (what_if; changes nothing)."""
    n = 0
    while p.what_if(app, cores(n + 1)).allocated:
        n += 1
    return n


def test_borrowing_example_without_limits() -> None:
    """L-ex1: with team-b idle, team-a admits up to 12 + 9 = 21 cores."""
    p = _team_ab()
    assert _most(p, "a") == 21 and _most(p, "b") == 21


def test_borrowing_limit_example() -> None:
    """L-ex2: team-a's borrowingLimit 1 → it admits up to 9 + 1 = 10; team-b still 12 + 9."""
    p = _team_ab(a=", borrowinglimit: {vcore: 1}")
    assert _most(p, "a") == 10 and _most(p, "b") == 21
    assert p.allocate("a", "a1", cores(10))
    d = p.allocate("a", "a2", cores(1))
    assert [(v.code, v.path, dict(v.resource or {})) for v in d.reasons] == [
        ("queue.borrowinglimit", "root.team-ab.team-a", {"vcore": 1000})]
    assert "beyond its borrowing limit (1000)" in d.reasons[0].message


def test_lending_limit_example() -> None:
    """L-ex3: team-b lends at most 1: while team-b uses at most 11, team-a admits up to 9 + 1 = 10;
    team-b itself still admits up to 12 + 9 = 21; once team-b uses 12, team-a gets 9."""
    p = _team_ab(b=", lendinglimit: {vcore: 1}")
    assert _most(p, "a") == 10 and _most(p, "b") == 21
    assert p.allocate("b", "b1", cores(11))
    assert _most(p, "a") == 10
    assert p.allocate("b", "b2", cores(1))
    assert _most(p, "a") == 9
    p.release("b2")
    p.release("b1")
    assert p.allocate("a", "a1", cores(10))
    d = p.allocate("a", "a2", cores(1))
    (v,) = d.reasons
    assert (v.code, v.path, dict(v.resource or {})) == ("queue.lendinglimit", "root.team-ab.team-b",
                                                        {"vcore": 1000})
    assert "which lends at most 1000" in v.message
    # team-b's private part is its own: it takes all 11 of it and borrows back what team-a left
    assert _most(p, "b") == 11


def test_a_lending_limit_of_zero_keeps_the_whole_guarantee() -> None:
    """``lendinglimit: 0`` is Koordinator's ``allow-lent-resource: false`` on a queue."""
    p = _team_ab(b=", lendinglimit: {vcore: 0}")
    assert _most(p, "a") == 9 and _most(p, "b") == 21


def test_lending_is_kept_against_the_cluster_size_too() -> None:
    """The root's max is the cluster: a queue lending nothing keeps its guarantee there as well."""
    text = textwrap.dedent("""
    partitions:
      - name: default
        queues:
          - name: root
            submitacl: "*"
            queues:
              - {name: a, resources: {guaranteed: {vcore: 40}, lendinglimit: {vcore: 0}}}
              - {name: b}
    """)
    s = Scheduler.from_yaml(text, store=MemoryJournal(), clock=Clock())
    p = s.partition("default")
    p.add_node("n", cores(100))
    p.add_application("b", U, queue="root.b")
    assert _most(p, "b") == 60


def test_cohort_lendable() -> None:
    """L-ex4 (``TestCohortLendable``): cq1 cpu 8 lending 8, gpu 3 lending 3; cq2 cpu 2 lending 2 — the
    cohort's subtree quota is cpu 10, gpu 3."""
    cfg = load_config(textwrap.dedent("""
    partitions:
      - name: default
        queues:
          - name: root
            queues:
              - name: cohort
                queues:
                  - name: cq1
                    resources:
                      guaranteed: {vcore: 8, nvidia.com/gpu: 3}
                      lendinglimit: {vcore: 8, nvidia.com/gpu: 3}
                  - name: cq2
                    resources: {guaranteed: {vcore: 2}, lendinglimit: {vcore: 2}}
    """)).partition("default")
    tree = QueueTree(cfg)
    cohort = tree.queue("root.cohort")
    assert cohort is not None
    assert tree.limits.node(cohort, "vcore")[0] == 10_000
    assert tree.limits.node(cohort, "nvidia.com/gpu")[0] == 3


FLAVORS = """
partitions:
  - name: default
    resourceflavors:
      - {{name: one, resources: [vcore], nodelabels: {{f: one}}}}
      - {{name: two, resources: [vcore], nodelabels: {{f: two}}}}
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: cohort
            resources: {{max: {{vcore@one: 11, vcore@two: {two}}}}}
            queues:
              - name: test
                flavors: [one, two]
{fungibility}                resources:
                  guaranteed: {{vcore@one: 10, vcore@two: {two}}}
                  borrowinglimit: {{vcore@one: 1}}
              - name: other                   # lends its 1 cpu of flavor one to the cohort
                resources: {{guaranteed: {{vcore@one: 1}}}}
"""


def _flavor_world(two: int = 10, fungibility: str = "") -> Partition:
    text = textwrap.dedent(FLAVORS.format(two=two, fungibility=fungibility))
    s = Scheduler.from_yaml(text, store=MemoryJournal(), clock=Clock())
    p = s.partition("default")
    p.add_node("n1", cores(64), labels={"f": "one"})
    p.add_node("n2", cores(64), labels={"f": "two"})
    p.add_application("t", U, queue="root.cohort.test")
    assert p.allocate("t", "used", cores(2), node_selector={"f": "one"}).flavors == {"vcore": "one"}
    return p


TRY_NEXT = """                flavorfungibility: {whencanborrow: TryNextFlavor, whencanpreempt: TryNextFlavor}
"""


def test_borrow_before_trying_the_next_flavor() -> None:
    """F-ex1: 2 + 9 = 11 fits flavor one by borrowing 1 (its limit); the default MayStopSearch takes it."""
    p = _flavor_world()
    d = p.allocate("t", "w", cores(9))
    assert d.allocated and d.flavors == {"vcore": "one"}
    (attempt,) = d.flavor_attempts
    assert (attempt.mode, attempt.borrowing, attempt.borrows_from) == ("Fit", 1, "root.cohort")


def test_borrow_try_next_flavor_finds_the_second_flavor() -> None:
    """F-ex2: with TryNextFlavor, flavor two fits without borrowing and is taken."""
    p = _flavor_world(fungibility=TRY_NEXT)
    d = p.allocate("t", "w", cores(9))
    assert d.flavors == {"vcore": "two"}
    assert [(a.flavor, a.mode, a.borrowing) for a in d.flavor_attempts] == [("one", "Fit", 1),
                                                                           ("two", "Fit", 0)]


def test_borrow_try_next_flavor_falls_back_to_the_first_flavor() -> None:
    """F-ex3: flavor two has 1 cpu only (9 > 1: NoFit), so the remembered flavor one is taken."""
    p = _flavor_world(two=1, fungibility=TRY_NEXT)
    d = p.allocate("t", "w", cores(9))
    assert d.flavors == {"vcore": "one"}
    assert [(a.flavor, a.mode) for a in d.flavor_attempts] == [("one", "Fit"), ("two", "NoFit")]


def test_the_borrowing_limit_holds_per_flavor() -> None:
    p = _flavor_world(two=1)
    assert not p.allocate("t", "w", cores(10), node_selector={"f": "one"})     # 2 + 10 = 12 > 10 + 1


HIERARCHY = """
partitions:
  - name: default
    resourceflavors:
      - {name: one, resources: [vcore], nodelabels: {f: one}}
      - {name: two, resources: [vcore], nodelabels: {f: two}}
      - {name: three, resources: [vcore], nodelabels: {f: three}}
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: three                # root cohort: flavor three 4 of its own
            resources:
              guaranteed: {vcore@one: 4, vcore@two: 4, vcore@three: 4}
              max: {vcore@one: 4, vcore@two: 4, vcore@three: 4}
            queues:
              - name: two              # flavor two 4 of its own
                resources: {guaranteed: {vcore@one: 4, vcore@two: 4}}
                queues:
                  - name: one          # flavor one 4 of its own
                    resources: {guaranteed: {vcore@one: 4}}
                    queues:
                      - name: test
                        flavors: [one, two, three]
                  - name: other
"""


def test_hierarchical_cohorts_select_the_top_flavor() -> None:
    """L-ex5 (``TestHierarchical`` "Select the top flavor"): one and two are used up below, so the
    request gets flavor three, borrowed from the root cohort."""
    s = Scheduler.from_yaml(textwrap.dedent(HIERARCHY), store=MemoryJournal(), clock=Clock())
    p = s.partition("default")
    for f in ("one", "two", "three"):
        p.add_node(f, cores(64), labels={"f": f})
    p.add_application("t", U, queue="root.three.two.one.test")
    p.add_application("o", U, queue="root.three.two.other")
    assert p.allocate("t", "t1", cores(4), node_selector={"f": "one"})
    assert p.allocate("o", "o1", cores(4), node_selector={"f": "two"})
    d = p.allocate("t", "w", cores(4))
    assert d.allocated and d.flavors == {"vcore": "three"}
    assert [(a.flavor, a.mode) for a in d.flavor_attempts] == [("one", "NoFit"), ("two", "NoFit"),
                                                              ("three", "Fit")]
    assert d.flavor_attempts[2].borrows_from == "root.three"


def test_nested_lending_limits_keep_each_private_part() -> None:
    """A parent lending 4 of 10 whose child keeps 8 of its 10 private: the child's 8 stays private
    inside the parent, and the parent offers at most 2 (what the child lends) to the rest."""
    text = textwrap.dedent("""
    partitions:
      - name: default
        queues:
          - name: root
            submitacl: "*"
            queues:
              - name: top
                resources: {max: {vcore: 30}}
                queues:
                  - name: c
                    resources: {guaranteed: {vcore: 10}, lendinglimit: {vcore: 4}}
                    queues:
                      - {name: d, resources: {guaranteed: {vcore: 10}, lendinglimit: {vcore: 2}}}
                      - {name: e}
                  - {name: x}
    """)
    s = Scheduler.from_yaml(text, store=MemoryJournal(), clock=Clock())
    p = s.partition("default")
    p.add_node("n", cores(100))
    for app, q in (("d", "root.top.c.d"), ("e", "root.top.c.e"), ("x", "root.top.x")):
        p.add_application(app, U, queue=q)
    assert _most(p, "x") == 22          # 30 − d's private 8
    assert _most(p, "e") == 22          # e is outside d: d's 8 is not its either
    assert _most(p, "d") == 30


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_limits_survive_replay(store: str, tmp_path: object) -> None:
    from pathlib import Path
    url = MemoryJournal() if store == "memory" else f"sqlite:///{Path(str(tmp_path)) / 'j.db'}"
    text = textwrap.dedent("""
    partitions:
      - name: default
        queues:
          - name: root
            submitacl: "*"
            queues:
              - {name: a, resources: {guaranteed: {vcore: 4}, borrowinglimit: {vcore: 2}}}
    """)
    clock = Clock()
    s = Scheduler.from_yaml(text, store=url, clock=clock)
    p = s.partition("default")
    p.add_node("n", cores(10))
    p.add_application("a", U, queue="root.a")
    assert p.allocate("a", "k1", cores(6)) and not p.allocate("a", "k2", cores(1))
    state = s.dump_state()
    if store == "sqlite":
        s.close()
    again = Scheduler.from_yaml(text, store=url, clock=clock)
    assert again.dump_state() == state
    assert not again.partition("default").allocate("a", "k2", cores(1))


PREEMPT = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - {name: a, resources: {guaranteed: {vcore: 40}, lendinglimit: {vcore: 0}}}
          - {name: b, resources: {guaranteed: {vcore: 60}, borrowinglimit: {vcore: 0}}}
          - {name: c}
"""


def _preempt_world() -> tuple[Partition, Clock]:
    clock = Clock()
    s = Scheduler.from_yaml(textwrap.dedent(PREEMPT), store=MemoryJournal(), clock=clock)
    p = s.partition("default")
    p.add_node("n", cores(100))
    for q in "abc":
        p.add_application(q, U, queue=f"root.{q}")
    for i in range(3):
        assert p.allocate("c", f"c{i}", cores(10))
        clock.advance(1)
    return p, clock


def test_preemption_restores_a_guarantee_that_a_lending_limit_leaves_short() -> None:
    """b (guaranteed 60) wants 40: 30 used by c + 40 kept for a + 40 > 100, refused by a's lending
    limit; after preemption.delay, c's newest allocation goes (PR-Y with the lending limit counted)."""
    p, clock = _preempt_world()
    p.add_ask("b", "ask", cores(40))
    assert [v.code for v in p.pending_reasons("ask") or []] == ["queue.lendinglimit"]
    clock.advance(31)
    p.check_timeouts()
    assert p.allocation("ask") is not None
    assert p.allocation("c2") is None and p.allocation("c1") is not None


def test_preemption_never_takes_a_queue_beyond_its_borrowing_limit() -> None:
    """b may not borrow at all: an ask over its guarantee is refused by its borrowing limit and never
    preempts, however long it waits."""
    p, clock = _preempt_world()
    assert p.allocate("b", "b1", cores(30))
    p.add_ask("b", "ask", cores(31))
    assert {v.code for v in p.pending_reasons("ask") or []} >= {"queue.borrowinglimit"}
    clock.advance(100)
    p.check_timeouts()
    assert p.allocation("ask") is None and len(p.allocations()) == 4
