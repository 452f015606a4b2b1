"""Allocation tags (YuniKorn's ``allocationTags``: the pod an allocation is, ``kubernetes.io/meta/…``)
are kept with asks and allocations, journalled, restored from the journal and from a snapshot, and
shown where the allocation and the ask are."""

from __future__ import annotations

from pathlib import Path

import pytest

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.scheduler import Scheduler
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
