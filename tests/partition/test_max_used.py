"""``maxUsedResource`` (issue 30): the component-wise maximum an application's allocations ever reached.

YuniKorn (``objects/application.go``, ``addAllocationInternal``) keeps ``maxAllocatedResource``: after
each allocation the component-wise maximum of itself and the application's running total — its real
allocations' total or, for a gang placeholder, its placeholders' total, each on its own. Releases never
lower it. The REST application DAO serves it as ``maxUsedResource`` (``omitempty``: absent while empty).
Here it is state: journalled writes rebuild it, a snapshot keeps it, a refused write leaves it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from quotaplane import Resource
from quotaplane.cluster import Scheduler
from quotaplane.config.identity import UserGroup
from quotaplane.journal import MemoryJournal
from quotaplane.partition import Partition
from quotaplane.server.app import create_app
from tests.partition.helpers import CONFIG, Clock

BOB = UserGroup("bob", ["ops"])
GI = 1 << 30


def _partition(s: Scheduler) -> Partition:
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 64000, "memory": 256 * GI}))
    return p


def _max(s: Scheduler, app: str) -> dict[str, int]:
    a = s.partition("default").application(app)
    assert a is not None
    return dict(a.max_used)


def test_the_maximum_is_per_resource_and_never_lowered_by_a_release() -> None:
    s = Scheduler.from_yaml(CONFIG, clock=Clock())
    p = _partition(s)
    p.add_application("app1", BOB, queue="root.b")
    assert _max(s, "app1") == {}
    p.allocate("app1", "k1", Resource({"vcore": 1000, "memory": GI}))
    p.allocate("app1", "k2", Resource({"vcore": 2000}))
    assert _max(s, "app1") == {"vcore": 3000, "memory": GI}
    p.release("k1")                                   # 2000 vcore, no memory: the maximum stays
    p.allocate("app1", "k3", Resource({"memory": 4 * GI}))
    assert _max(s, "app1") == {"vcore": 3000, "memory": 4 * GI}
    p.release("k2")
    p.release("k3")
    assert _max(s, "app1") == {"vcore": 3000, "memory": 4 * GI}
    s.close()


def test_placeholders_and_real_allocations_are_totalled_apart() -> None:
    s = Scheduler.from_yaml(CONFIG, clock=Clock())
    p = _partition(s)
    p.add_application("gang", BOB, queue="root.b")
    p.allocate("gang", "ph1", Resource({"vcore": 1000}), placeholder=True, task_group="tg")
    p.allocate("gang", "ph2", Resource({"vcore": 1000}), placeholder=True, task_group="tg")
    assert _max(s, "gang") == {"vcore": 2000}
    # one placeholder and one real allocation held together make 2,500, but neither total does:
    # YuniKorn compares each total with the maximum, never their sum
    p.replace_placeholder("ph1", "r1", Resource({"vcore": 1500}))
    assert _max(s, "gang") == {"vcore": 2000}
    p.replace_placeholder("ph2", "r2", Resource({"vcore": 1500}))
    assert _max(s, "gang") == {"vcore": 3000}
    s.close()


def test_a_refused_write_leaves_the_maximum() -> None:
    class Refusing(MemoryJournal):
        refuse = False

        def append(self, stream, events, *, holder=None):  # type: ignore[no-untyped-def]
            if self.refuse:
                raise OSError("disk full")
            return super().append(stream, events, holder=holder)

    journal = Refusing()
    s = Scheduler.from_yaml(CONFIG, store=journal, clock=Clock())
    p = _partition(s)
    p.add_application("app1", BOB, queue="root.b")
    p.allocate("app1", "k1", Resource({"vcore": 1000}))
    journal.refuse = True
    with pytest.raises(Exception):  # noqa: B017 - whichever error the journal's failure becomes
        p.allocate("app1", "k2", Resource({"vcore": 2000, "memory": GI}))
    journal.refuse = False
    assert _max(s, "app1") == {"vcore": 1000}
    s.close()


@pytest.mark.parametrize("snapshot", [False, True])
def test_the_maximum_survives_a_restart(tmp_path: Path, snapshot: bool) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    s = Scheduler.from_yaml(CONFIG, store=store, clock=Clock(), snapshot_every=0)
    p = _partition(s)
    p.add_application("app1", BOB, queue="root.b")
    p.allocate("app1", "k1", Resource({"vcore": 1000, "memory": GI}))
    p.allocate("app1", "k2", Resource({"vcore": 2000}))
    p.release("k1")
    p.release("k2")
    p.allocate("app1", "k3", Resource({"vcore": 500}))
    if snapshot:           # the snapshot holds only k3: the maximum must come from the snapshot itself
        p.take_snapshot()
    s.close(snapshot=False)
    again = Scheduler.from_yaml(CONFIG, store=store, clock=Clock())
    assert again.restored_from["default"] == ("snapshot" if snapshot else "replay")
    assert _max(again, "app1") == {"vcore": 3000, "memory": GI}
    again.close()


def test_the_yunikorn_application_dao_serves_it() -> None:
    s = Scheduler.from_yaml(CONFIG, clock=Clock())
    p = _partition(s)
    p.add_application("app1", BOB, queue="root.b")
    p.add_application("idle", BOB, queue="root.b")
    p.allocate("app1", "k1", Resource({"vcore": 1000, "memory": GI}))
    p.allocate("app1", "k2", Resource({"vcore": 2000}))
    p.release("k1")
    with TestClient(create_app(s, history_interval=3600)) as c:
        one = c.get("/ws/v1/partition/default/application/app1").json()
        assert one["maxUsedResource"] == {"memory": GI, "vcore": 3000}
        assert one["usedResource"] == {"vcore": 2000}
        apps = c.get("/ws/v1/partition/default/queue/root.b/applications").json()
        listed = {a["applicationID"]: a for a in apps}
        assert listed["app1"]["maxUsedResource"] == one["maxUsedResource"]
        # Go's omitempty: an application that never held anything has no maxUsedResource
        assert "maxUsedResource" not in listed["idle"]
    s.close()


def test_the_dao_s_used_resource_is_the_real_allocations_as_in_yunikorn() -> None:
    # YuniKorn's usedResource is allocatedResource: placeholders are totalled apart (allocatedPlaceholder)
    s = Scheduler.from_yaml(CONFIG, clock=Clock())
    p = _partition(s)
    p.add_application("gang", BOB, queue="root.b")
    p.allocate("gang", "ph1", Resource({"vcore": 1000}), placeholder=True, task_group="tg")
    p.allocate("gang", "ph2", Resource({"vcore": 1000}), placeholder=True, task_group="tg")
    with TestClient(create_app(s, history_interval=3600)) as c:
        one = c.get("/ws/v1/partition/default/application/gang").json()
        assert "usedResource" not in one                        # only placeholders: nothing real held
        assert one["maxUsedResource"] == {"vcore": 2000}
        assert [a["allocationKey"] for a in one["allocations"]] == ["ph1", "ph2"]
        p.replace_placeholder("ph1", "r1", Resource({"vcore": 1500}))
        one = c.get("/ws/v1/partition/default/application/gang").json()
        assert one["usedResource"] == {"vcore": 1500}
        assert one["maxUsedResource"] == {"vcore": 2000}
    s.close()
