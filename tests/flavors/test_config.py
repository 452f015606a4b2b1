"""Resource flavors, fungibility and fair sharing in the queue configuration (docs/flavors.md, rules FL-1 …
FL-9, KQ-O1 … KQ-O3): each rule refuses what it should, names it and its line, and accepts the rest."""

from __future__ import annotations

import textwrap

import pytest

from quotaplane.config import load_config
from quotaplane.errors import ConfigError
from quotaplane.resources import Resource

GOOD = """
partitions:
  - name: default
    resourceflavors:
      - name: a100
        resources: [nvidia.com/gpu]
        nodelabels: {nvidia.com/gpu.product: A100}
      - name: h100
        resources: [nvidia.com/gpu]
        nodelabels: {nvidia.com/gpu.product: H100}
        nodetaints: [{key: gpu, value: h100, effect: NoSchedule}]
        tolerations: [{key: gpu, operator: Exists}]
      - name: spot
        resources: [vcore, memory]
        nodelabels: {lifecycle: spot}
    fairsharing:
      preemptionstrategies: [LessThanInitialShare]
    queues:
      - name: root
        flavors: [h100, a100, spot]
        queues:
          - name: team-a
            flavors: [a100, h100]
            flavorfungibility:
              whencanborrow: TryNextFlavor
              whencanpreempt: TryNextFlavor
              preference: PreemptionOverBorrowing
            properties: {fairsharing.weight: "0.5"}
            resources:
              guaranteed: {nvidia.com/gpu@a100: 4, vcore@spot: 2}
              max: {nvidia.com/gpu@a100: 8, nvidia.com/gpu: 12}
              borrowinglimit: {nvidia.com/gpu@a100: 2}
              lendinglimit: {nvidia.com/gpu@a100: 1}
"""


def _problems(text: str) -> list[tuple[int | None, str]]:
    with pytest.raises(ConfigError) as info:
        load_config(textwrap.dedent(text))
    return info.value.problems


def test_a_full_configuration_is_read_into_the_model() -> None:
    p = load_config(GOOD).partition("default")
    assert [f.name for f in p.resource_flavors] == ["a100", "h100", "spot"]
    h100 = p.resource_flavors[1]
    assert dict(h100.node_labels) == {"nvidia.com/gpu.product": "H100"}
    assert h100.node_taints[0].effect == "NoSchedule" and h100.tolerations[0].operator == "Exists"
    assert p.fair_sharing is not None and p.fair_sharing.preemption_strategies == ("LessThanInitialShare",)
    a = p.queue("root.team-a")
    assert a is not None and a.flavors == ("a100", "h100")
    assert a.flavor_fungibility is not None and a.flavor_fungibility.preference == "PreemptionOverBorrowing"
    # a flavored vcore is counted in milli-cores, like vcore
    assert a.guaranteed == Resource({"nvidia.com/gpu@a100": 4, "vcore@spot": 2000})
    assert a.borrowing_limit == Resource({"nvidia.com/gpu@a100": 2})
    assert a.lending_limit == Resource({"nvidia.com/gpu@a100": 1})
    assert p.root.flavors == ("h100", "a100", "spot")


def test_fungibility_defaults_and_deprecated_aliases() -> None:
    text = GOOD.replace("""              whencanborrow: TryNextFlavor
              whencanpreempt: TryNextFlavor
              preference: PreemptionOverBorrowing""", """              whencanborrow: Borrow
              whencanpreempt: Preempt""")
    f = load_config(text).partition("default").queue("root.team-a").flavor_fungibility  # type: ignore[union-attr]
    assert f is not None and (f.when_can_borrow, f.when_can_preempt, f.preference) == \
        ("MayStopSearch", "MayStopSearch", "")


@pytest.mark.parametrize(("old", "new", "line", "words"), [
    # KQ-O3 rule 8 (O-ex3): a preference needs both TryNextFlavor
    ("whencanborrow: TryNextFlavor", "whencanborrow: MayStopSearch", 27, "may be set only when"),
    ("whencanpreempt: TryNextFlavor", "whencanpreempt: Sometimes", 26, "must be one of MayStopSearch"),
    # FL-1
    ("- name: spot", "- name: Spot_Nodes", 13, "invalid resource flavor name 'Spot_Nodes'"),
    ("- name: spot", "- name: a100", 13, "duplicate resource flavor name 'a100'"),
    # FL-2
    ("resources: [vcore, memory]", "resources: []", 14, "counts no resources"),
    ("resources: [vcore, memory]", "resources: [vcore, vcore@x]", 14, "without '@'"),
    # FL-3: a resource in one group only
    ("resources: [vcore, memory]", "resources: [vcore, nvidia.com/gpu]", 14, "must count the same ones"),
    # FL-5
    ("flavors: [a100, h100]", "flavors: [a100, b200]", 23, "flavor 'b200', which is not a declared"),
    ("flavors: [a100, h100]", "flavors: [a100, a100]", 23, "listed twice"),
    # FL-6
    ("max: {nvidia.com/gpu@a100: 8", "max: {nvidia.com/gpu@b200: 8", 31, "names flavor 'b200'"),
    ("vcore@spot: 2", "vcore@a100: 2", 30, "flavor 'a100' does not count 'vcore'"),
    # FL-8: a leaf lends only what it is guaranteed (KQ-O3 rule 6)
    ("lendinglimit: {nvidia.com/gpu@a100: 1}", "lendinglimit: {nvidia.com/gpu@a100: 5}", 33,
     "must be less than or equal to its guaranteed"),
    # FL-9
    ('fairsharing.weight: "0.5"', 'fairsharing.weight: "-1"', 28, "fairsharing.weight"),
    ('fairsharing.weight: "0.5"', 'fairsharing.weight: "1e-12"', 28, "at least 0.000000001"),
    # FL-10
    ('fairsharing.weight: "0.5"', 'fairsharing.weight: "0.5", preemption.withinclusterqueue: Always', 28,
     "preemption.withinclusterqueue of queue root.team-a: 'Always' is not one of Never, LowerPriority"),
    ('fairsharing.weight: "0.5"', 'fairsharing.weight: "0.5", preemption.reclaimwithincohort: Sometimes', 28,
     "'Sometimes' is not one of Never, LowerPriority, Any"),
    # Kueue's three strategy lists only
    ("preemptionstrategies: [LessThanInitialShare]",
     "preemptionstrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]", 17, "must be one of"),
    ("effect: NoSchedule}]", "effect: Sometimes}]", 11, "'effect' of taint 1"),
    ("operator: Exists}]", "operator: Maybe}]", 12, "must be Equal or Exists"),
])
def test_each_rule_names_the_problem_and_its_line(old: str, new: str, line: int, words: str) -> None:
    assert old in GOOD
    found = _problems(GOOD.replace(old, new))
    assert any(words in reason and ln == line for ln, reason in found), found


def test_queue_flavors_need_declared_flavors() -> None:
    found = _problems("""
    partitions:
      - name: default
        queues:
          - name: root
            queues:
              - name: a
                flavors: [a100]
    """)
    assert found == [(8, "queue root.a lists flavors but partition 'default' declares no resourceflavors")]


def test_the_root_takes_no_limits() -> None:
    found = _problems("""
    partitions:
      - name: default
        queues:
          - name: root
            resources:
              borrowinglimit: {vcore: 1}
    """)
    assert (7, "root queue must not have resource limits set") in found


def test_too_many_labels_on_a_flavor() -> None:
    labels = ", ".join(f"k{i}: v" for i in range(9))
    found = _problems(GOOD.replace("nodelabels: {lifecycle: spot}", f"nodelabels: {{{labels}}}"))
    assert any("9 node labels: at most 8" in r for _, r in found)
