"""Allocation tags (YuniKorn's ``allocationTags``: the pod an allocation is, ``kubernetes.io/meta/…``)
are kept with asks and allocations, journalled, restored from the journal and from a snapshot, and
shown where the allocation and the ask are."""

from __future__ import annotations

from pathlib import Path

import pytest

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from tests.partition.helpers import CONFIG, Clock

BOB = UserGroup("bob", ["ops"])

POD = {"kubernetes.io/meta/namespace": "team-a", "kubernetes.io/meta/podName": "train-0",
       "kubernetes.io/label/app": "train"}


def test_tags_follow_the_ask_into_its_allocation_and_survive_a_restart(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    s = Scheduler.from_yaml(CONFIG, store=store, clock=Clock(), snapshot_every=0)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100}))
    p.add_application("app1", BOB, queue="root.b")
    assert p.allocate("app1", "direct", Resource({"vcore": 1}), tags=POD)
    p.add_ask("app1", "asked", Resource({"vcore": 1}), tags={**POD, "kubernetes.io/meta/podName": "train-1"})
    p.schedule()
    assert p.allocation("direct").to_dict()["allocationTags"] == POD
    assert p.allocation("asked").to_dict()["allocationTags"]["kubernetes.io/meta/podName"] == "train-1"
    p.add_ask("app1", "waiting", Resource({"vcore": 1000}), tags={"kubernetes.io/meta/podName": "big"})
    assert p.get_ask("waiting").to_dict()["allocationTags"] == {"kubernetes.io/meta/podName": "big"}
    state = p.dump_state()
    s.close(snapshot=False)
    replayed = Scheduler.from_yaml(CONFIG, store=store, clock=Clock())
    assert replayed.partition("default").dump_state() == state
    replayed.partition("default").take_snapshot()
    replayed.close(snapshot=False)
    restored = Scheduler.from_yaml(CONFIG, store=store, clock=Clock())
    assert restored.restored_from["default"] == "snapshot"
    assert restored.partition("default").dump_state() == state
    restored.close()


@pytest.mark.parametrize("bad", [["a"], {"": "x"}, {"k": 1}])
def test_bad_tags_are_refused_naming_them(bad: object) -> None:
    s = Scheduler.from_yaml(CONFIG, clock=Clock())
    p = s.partition("default")
    p.add_application("app1", BOB, queue="root.b")
    with pytest.raises(ValueError, match="tag"):
        p.allocate("app1", "k", Resource({"vcore": 1}), tags=bad)  # type: ignore[arg-type]
    assert p.allocation("k") is None


def test_a_gangs_real_allocation_is_its_own_pod_and_a_rest_replacement_keeps_the_placeholders(
        tmp_path: Path) -> None:
    """A real ask replacing a placeholder is allocated with its own tags (the pod it is); a replacement
    named over REST, with no ask of its own, keeps the placeholder's. Restored from the journal and
    from a snapshot alike."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    s = Scheduler.from_yaml(CONFIG, store=store, clock=Clock(), snapshot_every=0)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100}))
    p.add_application("gang", BOB, queue="root.b")
    ph_tags = {"kubernetes.io/meta/podName": "tg-gang-workers-0"}
    assert p.allocate("gang", "ph0", Resource({"vcore": 1}), placeholder=True, task_group="w", tags=ph_tags)
    assert p.allocate("gang", "ph1", Resource({"vcore": 1}), placeholder=True, task_group="w", tags=ph_tags)
    p.add_ask("gang", "w0", Resource({"vcore": 1}), task_group="w", tags=POD)
    p.schedule()
    assert p.allocation("w0") is not None and p.allocation("w0").tags == POD
    assert p.replace_placeholder("ph1", "w1", Resource({"vcore": 1}))
    assert p.allocation("w1").tags == ph_tags
    state = p.dump_state()
    s.close(snapshot=False)
    for _ in range(2):          # from the journal, then from the snapshot taken of it
        again = Scheduler.from_yaml(CONFIG, store=store, clock=Clock(), snapshot_every=0)
        assert again.partition("default").dump_state() == state
        assert again.partition("default").allocation("w0").tags == POD
        again.partition("default").take_snapshot()
        again.close(snapshot=False)
