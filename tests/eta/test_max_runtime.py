"""The declared runtime (``max_runtime`` in Python and the journal, ``maxRuntime`` in REST) is kept with
asks and allocations, journalled, restored from the journal and from a snapshot, and refused when it
is not a positive number of seconds — naming it, changing nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import quotaplane.events as E
from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.scheduler import Scheduler
from quotaplane.server.app import create_app
from tests.partition.helpers import CONFIG, Clock

BOB = UserGroup("bob", ["ops"])


def test_declared_runtime_follows_the_ask_into_its_allocation_and_survives_a_restart(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    s = Scheduler.from_yaml(CONFIG, store=store, clock=Clock(), snapshot_every=0)
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100}))
    p.add_application("app1", BOB, queue="root.b")
    assert p.allocate("app1", "direct", Resource({"vcore": 1}), max_runtime=3600)
    p.add_ask("app1", "asked", Resource({"vcore": 1}), max_runtime=90.5)
    p.add_ask("app1", "waiting", Resource({"vcore": 1000}), max_runtime=7200)
    assert p.allocation("direct").max_runtime == 3600.0
    assert p.allocation("direct").to_dict()["maxRuntime"] == 3600.0
    assert p.allocation("asked").max_runtime == 90.5
    assert p.get_ask("waiting").to_dict()["maxRuntime"] == 7200.0
    assert p.allocate("app1", "undeclared", Resource({"vcore": 1}))
    assert "maxRuntime" not in p.allocation("undeclared").to_dict()
    state = p.dump_state()
    s.close(snapshot=False)
    replayed = Scheduler.from_yaml(CONFIG, store=store, clock=Clock())
    assert replayed.partition("default").dump_state() == state
    replayed.partition("default").take_snapshot()
    replayed.close(snapshot=False)
    restored = Scheduler.from_yaml(CONFIG, store=store, clock=Clock())
    assert restored.restored_from["default"] == "snapshot"
    assert restored.partition("default").dump_state() == state
    assert restored.partition("default").get_ask("waiting").max_runtime == 7200.0
    restored.close()


def test_an_event_without_a_declared_runtime_is_written_as_before() -> None:
    ev = E.Allocated(app="a", key="k", resource=Resource({"vcore": 1}), t=1.0)
    assert "max_runtime" not in ev.to_json()
    assert E.decode(ev.to_json()) == ev
    declared = E.Allocated(app="a", key="k", resource=Resource({"vcore": 1}), t=1.0, max_runtime=60.0)
    assert declared.to_json()["max_runtime"] == 60.0
    assert E.decode(declared.to_json()) == declared
    ask = E.AskAdded(key="k", app="a", resource=Resource({"vcore": 1}), max_runtime=5.0)
    assert E.decode(ask.to_json()) == ask


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "60", True])
def test_a_journalled_bad_runtime_names_the_field(bad: object) -> None:
    data = {**E.Allocated(app="a", key="k", resource=Resource({"vcore": 1}), t=1.0).to_json(),
            "max_runtime": bad}
    with pytest.raises(E.EventFormatError, match="max_runtime"):
        E.decode(data)


@pytest.mark.parametrize("bad", [0, -5, float("nan"), float("inf"), "1h", True])
def test_a_bad_runtime_is_refused_naming_it_and_nothing_changes(bad: object) -> None:
    s = Scheduler.from_yaml(CONFIG, clock=Clock())
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100}))
    p.add_application("app1", BOB, queue="root.b")
    before = p.dump_state()
    with pytest.raises(ValueError, match="max runtime"):
        p.allocate("app1", "k", Resource({"vcore": 1}), max_runtime=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max runtime"):
        p.add_ask("app1", "k", Resource({"vcore": 1}), max_runtime=bad)  # type: ignore[arg-type]
    assert p.dump_state() == before


def test_rest_takes_max_runtime_on_allocations_asks_and_batches() -> None:
    s = Scheduler.from_yaml(CONFIG, clock=Clock())
    with TestClient(create_app(s)) as c:
        assert c.put("/ws/v1/partition/default/node/n1", json={"capacity": {"vcore": 100}}).status_code == 201
        assert c.post("/ws/v1/partition/default/applications",
                      json={"applicationID": "app1", "user": "bob", "queue": "root.b"}).status_code == 201
        r = c.post("/ws/v1/partition/default/allocations",
                   json={"applicationID": "app1", "allocationKey": "k1", "resource": {"vcore": 1},
                         "maxRuntime": 600})
        assert r.status_code == 201, r.text
        r = c.post("/ws/v1/partition/default/allocations/batch",
                   json={"allocations": [{"applicationID": "app1", "allocationKey": "k2",
                                          "resource": {"vcore": 1}, "maxRuntime": 1.5}]})
        assert r.status_code == 200, r.text
        r = c.post("/ws/v1/partition/default/application/app1/asks",
                   json={"allocationKey": "k3", "resource": {"vcore": 1000}, "maxRuntime": 60})
        assert r.status_code == 201, r.text
        assert r.json()["maxRuntime"] == 60.0
        p = s.partition("default")
        assert p.allocation("k1").max_runtime == 600.0
        assert p.allocation("k2").max_runtime == 1.5
        # docs/rest.md: the declared runtime is shown with the allocation
        got = c.get("/ws/v1/partition/default/allocation/k1")
        assert got.status_code == 200 and got.json()["maxRuntime"] == 600.0, got.text
        for bad in ("600", 0, -1, True):
            r = c.post("/ws/v1/partition/default/allocations",
                       json={"applicationID": "app1", "allocationKey": "k9", "resource": {"vcore": 1},
                             "maxRuntime": bad})
            assert r.status_code == 400, (bad, r.text)
            assert "maxRuntime" in r.json()["message"]
        assert p.allocation("k9") is None
