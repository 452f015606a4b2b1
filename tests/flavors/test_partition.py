"""Resource flavors through the partition (docs/flavors.md): nodes count per flavor, the search picks a
flavor before admission, and the choice is part of the decision, the journal, the allocation and the
reasons; every engine sees only flavored names."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.scheduler import Scheduler
from tests.partition.helpers import Clock

GPU = "nvidia.com/gpu"
U = UserGroup("alice", ["dev"])

CONFIG = """
partitions:
  - name: default
    resourceflavors:
      - {name: a100, resources: [nvidia.com/gpu], nodelabels: {gpu: a100}}
      - name: h100
        resources: [nvidia.com/gpu]
        nodelabels: {gpu: h100}
        nodetaints: [{key: dedicated, value: h100, effect: NoSchedule}]
        tolerations: [{key: dedicated, operator: Exists}]
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            flavors: [a100, h100]
            resources:
              guaranteed: {nvidia.com/gpu@a100: 4}
              max: {nvidia.com/gpu@a100: 6, nvidia.com/gpu: 10}
            limits:
              - limit: per user
                users: [alice]
                maxresources: {nvidia.com/gpu@h100: 2}
          - name: b
            flavors: [h100]
"""


def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True)


def _world(config: str = CONFIG, journal: Any = None) -> tuple[Scheduler, Clock]:
    clock = Clock()
    store = journal if journal is not None else MemoryJournal()
    s = Scheduler.from_yaml(textwrap.dedent(config), store=store, clock=clock)
    p = s.partition("default")
    p.add_node("n1", {GPU: 8, "vcore": 64000}, labels={"gpu": "a100"})
    p.add_node("n2", {GPU: 8, "vcore": 64000}, labels={"gpu": "h100"})
    p.add_node("n3", {"vcore": 8000})
    p.add_application("app", U, queue="root.a")
    return s, clock


def test_nodes_count_per_flavor_for_the_root() -> None:
    s, _ = _world()
    p = s.partition("default")
    assert p.total_capacity() == Resource({GPU: 16, f"{GPU}@a100": 8, f"{GPU}@h100": 8, "vcore": 136000})
    assert p.node_flavors("n1") == ["a100"] and p.node_flavors("n3") == []
    assert p.nodes()["n1"] == Resource({GPU: 8, f"{GPU}@a100": 8, "vcore": 64000})
    # relabelling a node moves its capacity to the other flavor
    p.update_node("n1", labels={"gpu": "h100"})
    assert p.total_capacity()[f"{GPU}@h100"] == 16 and f"{GPU}@a100" not in p.total_capacity()
    assert p.node_labels("n1") == {"gpu": "h100"}


def test_the_first_flavor_that_fits_is_charged_and_recorded_everywhere() -> None:
    j = MemoryJournal()
    s, clock = _world(journal=j)
    p = s.partition("default")
    d = p.allocate("app", "k1", {GPU: 4, "vcore": 1000})
    assert d.allocated and d.flavors == {GPU: "a100"}
    assert [a.summary() for a in d.flavor_attempts] == ["a100 fits"]
    alloc = p.allocation("k1")
    assert alloc is not None and alloc.flavors == {GPU: "a100"}
    assert alloc.resource == Resource({GPU: 4, f"{GPU}@a100": 4, "vcore": 1000})
    assert alloc.to_dict()["flavors"] == {GPU: "a100"}
    assert p.queues.queue("root.a").allocated[f"{GPU}@a100"] == 4
    # a100 is at its max of 6 for a request of 4: h100 is next (the queue has no h100 guarantee: borrowing)
    d = p.allocate("app", "k2", {GPU: 2})
    assert d.flavors == {GPU: "a100"}
    d = p.allocate("app", "k3", {GPU: 2})
    assert d.allocated and d.flavors == {GPU: "h100"}
    assert [a.summary() for a in d.flavor_attempts] == [
        "no a100 quota left (queue.max at root.a)", "h100 needs to borrow"]
    body = d.to_dict()
    assert body["flavors"] == {GPU: "h100"} and body["flavorAttempts"][0]["mode"] == "NoFit"
    # the user's per-flavor limit (UGM sees the flavored name): no more h100 for alice
    d = p.allocate("app", "k4", {GPU: 1})
    assert not d.allocated
    assert {(v.code, v.message.split(":")[0]) for v in d.reasons} == {
        ("queue.max", "flavor a100"), ("user.maxresources", "flavor h100")}
    # the journal holds the choice; a replay rebuilds the same state
    again = Scheduler.from_yaml(textwrap.dedent(CONFIG), store=j, clock=clock)
    assert _canon(again.dump_state()) == _canon(s.dump_state())
    assert again.partition("default").allocation("k3").flavors == {GPU: "h100"}  # type: ignore[union-attr]


def test_the_allocated_event_carries_the_flavors() -> None:
    s, _ = _world()
    p = s.partition("default")
    seen: list[dict[str, Any]] = []
    p.hooks.after_commit(lambda events, seq: seen.extend(e.to_json() for e in events))
    p.allocate("app", "k1", {GPU: 1})
    (ev,) = [e for e in seen if e["type"] == "allocated"]
    assert ev["flavors"] == {GPU: "a100"} and ev["resource"] == {GPU: 1, f"{GPU}@a100": 1}


def test_a_node_selector_or_a_flavored_name_pins_the_flavor() -> None:
    s, _ = _world()
    p = s.partition("default")
    d = p.allocate("app", "k1", {GPU: 1}, node_selector={"gpu": "h100"})
    assert d.flavors == {GPU: "h100"}
    assert d.flavor_attempts[0].ineligible and d.flavor_attempts[0].flavor == "a100"
    d = p.allocate("app", "k2", {f"{GPU}@h100": 1})
    assert d.allocated and d.flavors == {GPU: "h100"}
    assert p.allocation("k2").resource == Resource({GPU: 1, f"{GPU}@h100": 1})  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="not a declared resource flavor"):
        p.allocate("app", "k3", {f"{GPU}@b200": 1})


def test_a_queue_may_use_only_its_flavors_and_taints_need_tolerations() -> None:
    text = CONFIG.replace("""        tolerations: [{key: dedicated, operator: Exists}]
""", "")
    s, _ = _world(text)
    p = s.partition("default")
    p.add_application("bapp", U, queue="root.b")
    d = p.allocate("bapp", "k1", {GPU: 1})
    assert not d.allocated
    assert [v.code for v in d.reasons] == ["flavor.nomatch"]
    assert "does not tolerate taint dedicated=h100:NoSchedule" in d.reasons[0].message
    d = p.allocate("bapp", "k1", {GPU: 1}, tolerations=[{"key": "dedicated", "operator": "Exists"}])
    assert d.allocated and d.flavors == {GPU: "h100"}
    # a request for nothing counted per flavor is not flavored
    d = p.allocate("bapp", "k2", {"vcore": 500})
    assert d.allocated and d.flavors == {} and d.flavor_attempts == ()


def test_a_waiting_ask_gets_its_flavor_when_a_cycle_allocates_it() -> None:
    j = MemoryJournal()
    s, clock = _world(journal=j)
    p = s.partition("default")
    assert p.allocate("app", "k1", {GPU: 6}, node_selector={"gpu": "a100"})
    p.add_ask("app", "ask", {GPU: 2}, node_selector={"gpu": "a100"})
    assert p.allocation("ask") is None
    reason, other = p.pending_reasons("ask") or []
    assert reason.code == "queue.max" and reason.message.startswith("flavor a100:")
    assert other.code == "flavor.nomatch"
    p.release("k1")
    alloc = p.allocation("ask")
    assert alloc is not None and alloc.flavors == {GPU: "a100"}
    again = Scheduler.from_yaml(textwrap.dedent(CONFIG), store=j, clock=clock)
    assert _canon(again.dump_state()) == _canon(s.dump_state())


def test_the_constraints_of_a_waiting_ask_survive_a_restart() -> None:
    j = MemoryJournal()
    s, clock = _world(journal=j)
    p = s.partition("default")
    p.allocate("app", "k1", {GPU: 6}, node_selector={"gpu": "a100"})
    p.add_ask("app", "ask", {GPU: 2}, node_selector={"gpu": "a100"})
    again = Scheduler.from_yaml(textwrap.dedent(CONFIG), store=j, clock=clock)
    q = again.partition("default")
    ask = q.get_ask("ask")
    assert ask is not None and ask.constraints is not None
    assert dict(ask.constraints.node_selector) == {"gpu": "a100"}
    q.release("k1")
    assert q.allocation("ask").flavors == {GPU: "a100"}  # type: ignore[union-attr]


def test_what_if_names_the_flavors_and_changes_nothing() -> None:
    s, _ = _world()
    p = s.partition("default")
    before = _canon(p.dump_state())
    d = p.what_if("app", {GPU: 8})
    assert not d.allocated and len(d.flavor_attempts) == 2
    d = p.what_if("app", {GPU: 2}, node_selector={"gpu": "h100"})
    assert d.allocated and d.flavors == {GPU: "h100"}
    assert _canon(p.dump_state()) == before


def test_a_real_allocation_takes_its_placeholders_flavor() -> None:
    s, _ = _world()
    p = s.partition("default")
    d = p.allocate("app", "ph", {GPU: 2}, placeholder=True, task_group="tg", node_selector={"gpu": "h100"})
    assert d.flavors == {GPU: "h100"}
    d = p.replace_placeholder("ph", "real", Resource({GPU: 2}))
    assert d.allocated
    real = p.allocation("real")
    assert real is not None and real.flavors == {GPU: "h100"}
    assert real.resource == Resource({GPU: 2, f"{GPU}@h100": 2})
    assert p.queues.queue("root.a").allocated == Resource({GPU: 2, f"{GPU}@h100": 2})


def test_a_config_reload_recounts_the_nodes() -> None:
    s, _ = _world()
    p = s.partition("default")
    s.update_config(textwrap.dedent(CONFIG).replace("{gpu: a100}", "{gpu: h100}"))
    assert p.node_flavors("n2") == ["a100", "h100"] and p.node_flavors("n1") == []
    assert p.total_capacity()[f"{GPU}@a100"] == 8 == p.total_capacity()[f"{GPU}@h100"]
    plain = textwrap.dedent("""
    partitions:
      - name: default
        queues:
          - name: root
            submitacl: "*"
            queues: [{name: a}, {name: b}]
    """)
    s.update_config(plain)
    assert p.total_capacity() == Resource({GPU: 16, "vcore": 136000})


def test_guaranteed_is_restored_per_flavor_by_preemption() -> None:
    """PR-Y with flavored names: b uses every a100 GPU; a's waiting a100 ask preempts once it waited."""
    text = CONFIG.replace("          - name: b\n            flavors: [h100]\n",
                          "          - name: b\n            flavors: [a100]\n")
    s, clock = _world(text)
    p = s.partition("default")
    p.add_application("bapp", U, queue="root.b")
    for i in range(4):
        assert p.allocate("bapp", f"b{i}", {GPU: 2}).flavors == {GPU: "a100"}
        clock.advance(1)
    p.add_ask("app", "ask", {GPU: 2}, node_selector={"gpu": "a100"})
    assert p.allocation("ask") is None
    clock.advance(31)
    p.check_timeouts()
    alloc = p.allocation("ask")
    assert alloc is not None and alloc.flavors == {GPU: "a100"}
    assert p.allocation("b3") is None and p.allocation("b2") is not None      # the newest went


ELASTIC = """
partitions:
  - name: default
    resourceflavors:
      - {name: a100, resources: [nvidia.com/gpu], nodelabels: {gpu: a100}}
      - {name: h100, resources: [nvidia.com/gpu], nodelabels: {gpu: h100}}
    elasticquotas:
      quotas: |
        apiVersion: scheduling.sigs.k8s.io/v1alpha1
        kind: ElasticQuota
        metadata: {name: team, namespace: team}
        spec:
          min: {nvidia.com/gpu@a100: 2, nvidia.com/gpu@h100: 0}
          max: {nvidia.com/gpu@a100: 2, nvidia.com/gpu@h100: 4}
    queues:
      - name: root
        submitacl: "*"
        queues: [{name: team}]
"""


def test_elastic_quotas_count_per_flavor() -> None:
    clock = Clock()
    s = Scheduler.from_yaml(textwrap.dedent(ELASTIC), store=MemoryJournal(), clock=clock)
    p = s.partition("default")
    p.add_node("n1", {GPU: 8}, labels={"gpu": "a100"})
    p.add_node("n2", {GPU: 8}, labels={"gpu": "h100"})
    p.add_application("app", U, queue="root.team", tags={"namespace": "team"})
    assert p.allocate("app", "k1", {GPU: 2}).flavors == {GPU: "a100"}
    d = p.allocate("app", "k2", {GPU: 2})
    assert d.allocated and d.flavors == {GPU: "h100"}
    assert d.flavor_attempts[0].reasons[0].code == "elastic.runtime"
    # a waiting ask counted as demand, then charged under its flavor
    p.add_ask("app", "ask", {GPU: 1})
    alloc = p.allocation("ask")
    assert alloc is not None and alloc.flavors == {GPU: "h100"}


def test_the_example_file_works_as_documented() -> None:
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "examples" / "gpu-flavors.yaml").read_text()
    s = Scheduler.from_yaml(text, store=MemoryJournal(), clock=Clock())
    p = s.partition("default")
    p.add_node("a-1", {GPU: 8}, labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    p.add_node("a-2", {GPU: 8}, labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    p.add_node("h-1", {GPU: 8}, labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    for app, q in (("t", "root.training"), ("i", "root.inference"), ("r", "root.research")):
        p.add_application(app, U, queue=q)
    assert p.allocate("t", "t1", {GPU: 8}).flavors == {GPU: "a100"}
    d = p.allocate("t", "t2", {GPU: 4})            # a100 borrows: TryNextFlavor looks at h100 (borrows too)
    assert d.flavors == {GPU: "a100"} and [a.borrowing for a in d.flavor_attempts] == [1, 1]
    assert p.allocate("t", "t3", {GPU: 2}).flavors == {GPU: "h100"}    # a100 at its max of 12
    assert p.allocate("i", "i1", {GPU: 4}).flavors == {GPU: "h100"}
    d = p.allocate("t", "t4", {GPU: 1})            # 14 in all: the plain-name max
    assert not d.allocated


@pytest.mark.parametrize("snapshot", [False, True])
def test_node_labels_and_the_capacity_per_flavor_survive_a_restart(tmp_path: Any, snapshot: bool) -> None:
    """A partition restored from a snapshot registered its nodes without their labels, so every
    flavored capacity was gone (the root's max then refused any flavored ask) — found by the
    forecast's copy, which had to put the labels back itself."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    s = Scheduler.from_yaml(textwrap.dedent(CONFIG), store=store, clock=Clock(), snapshot_every=0)
    p = s.partition("default")
    p.add_node("n1", {GPU: 8, "vcore": 64000}, labels={"gpu": "a100"})
    p.add_node("n2", {GPU: 8, "vcore": 64000}, labels={"gpu": "h100"})
    p.add_node("n3", {"vcore": 8000})
    p.add_application("app", U, queue="root.a")
    assert p.allocate("app", "k1", {GPU: 2}).allocated
    before = (p.total_capacity(), {n: p.node_labels(n) for n in ("n1", "n2", "n3")})
    if snapshot:
        p.take_snapshot()
    s.close(snapshot=False)
    again = Scheduler.from_yaml(textwrap.dedent(CONFIG), store=store, clock=Clock())
    q = again.partition("default")
    assert again.restored_from["default"] == ("snapshot" if snapshot else "replay")
    assert (q.total_capacity(), {n: q.node_labels(n) for n in ("n1", "n2", "n3")}) == before
    assert q.allocate("app", "k2", {GPU: 2}).allocated
    again.close()
