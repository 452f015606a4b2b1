"""Issue 32 #4: a deposed leader neither serves stale state nor forks the journal.

* It stops serving a partition — reads, what-ifs and writes — as soon as its lease *may* have
  expired by its own clock, with a margin (``valid_until = start of the renewal + ttl - margin``),
  without waiting to learn that it lost the lease: the lease is timed by the database's clock, and
  a new leader takes it only after it expired there, so the two never serve together.
* A change it decided while it led, whose append reaches the store only after another instance
  wrote the stream (a slow network, a pause), is refused by the store: a fenced append names the
  sequence number it was decided on (``after``) and is written only on top of exactly that state —
  even when the same instance holds the lease again by then.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.cluster import Scheduler
from quotaplane.errors import NotLeaderError
from quotaplane.journal import MemoryJournal, open_journal
from quotaplane.server.app import create_app
from quotaplane.server.ha_partitions import PartitionLeadership
from quotaplane.server.main import journalled_config
from tests.partition.test_group_commit import HeldOffload

CONFIG = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
      resources: {max: {vcore: 20}}
"""

SUE = qp.UserGroup("sue", [])


class Clock:
    """Seconds, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the store refuses an append decided on a state it no longer holds --------------------------------

@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_a_fenced_append_is_written_only_on_top_of_the_state_it_was_decided_on(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if kind == "memory":
        j: Any = MemoryJournal()
    elif kind == "sqlite":
        j = open_journal(f"sqlite:///{tmp_path / 'q.db'}")
    else:
        j = open_journal(request.getfixturevalue("pg_url"))
    try:
        assert j.acquire_lease("p", "a", 30)
        assert j.append("p", [{"i": 1}], holder="a", after=0) == 1
        assert j.append("p", [{"i": 2}], holder="a", after=1) == 2
        with pytest.raises(NotLeaderError, match="ends at 2"):
            j.append("p", [{"i": "stale"}], holder="a", after=1)
        assert [e["i"] for _, e in j.read("p")] == [1, 2]
        assert j.append("p", [{"i": 3}], holder="a") == 3        # without after: as before
    finally:
        j.close()


# -- a change decided before another instance wrote is never journalled after it ----------------------

def _instance(journal: MemoryJournal, holder: str) -> Scheduler:
    assert journal.acquire_lease("scheduler", holder, 5)
    return Scheduler.from_yaml(CONFIG, store=journal, clock=lambda: 1000.0, holder=holder)


def test_a_change_whose_append_arrives_after_another_leader_wrote_is_refused_even_under_the_same_holder(
        ) -> None:
    # a paused leader admitted 15 of 20 vcores and its append was held up; meanwhile another leader,
    # not seeing it, admitted 15 more; the first one holds the lease again when its append lands.
    # Written, the journal would hold 30 admitted against a maximum of 20.
    clock = Clock()
    j = MemoryJournal(clock=clock)
    assert j.acquire_lease("default", "a", 5)
    a = _instance(j, "a")
    pa = a.partition("default")
    pa.add_node("n1", {"vcore": 100})
    pa.add_application("app", SUE, queue="root.a")
    scheduled: list[Callable[[], None]] = []
    held = HeldOffload()
    group = pa.start_group_commit(schedule=scheduled.append, owner=threading.get_ident(), offload=held)
    assert group is not None
    assert pa.allocate("app", "from-a", {"vcore": 15}).allocated
    scheduled.pop()()                              # handed to a worker … which does not run yet
    clock.now += 6                                 # a's lease expires
    assert j.acquire_lease("default", "b", 5)
    b = _instance(j, "b")
    assert b.partition("default").allocate("app", "from-b", {"vcore": 15}).allocated
    j.release_lease("default", "b")
    assert j.acquire_lease("default", "a", 5)      # a holds the lease again …
    held.run()                                     # … when its append lands
    assert pa.recovering                           # refused: rebuilt from the journal
    assert pa.recover()
    keys = {x.allocation_key for x in pa.allocations()}
    assert keys == {"from-b"}
    journalled = [ev["key"] for _, ev in j.read("default") if ev.get("type") == "allocated"]
    assert journalled == ["from-b"]
    a.stop_group_commit()


# -- a leader whose lease may have expired stops serving at once ---------------------------------------

def _leadership(journal: MemoryJournal, url: str, partitions: list[str], clock: Clock
                ) -> tuple[PartitionLeadership, Scheduler]:
    def build(holder: str, leads: Callable[[str], bool], config_leader: bool) -> Scheduler:
        text = CONFIG if config_leader else journalled_config(journal)
        assert text is not None
        return Scheduler.from_yaml(text, store=journal, holder=holder, leads=leads)

    lead = PartitionLeadership(journal, advertise=url, partitions=partitions, build=build, ttl=5.0,
                               interval=1.0, margin=1.0, clock=clock)
    return lead, lead.initial()


def test_a_leader_stops_serving_once_its_lease_may_have_expired_by_its_own_clock() -> None:
    clock = Clock()
    j = MemoryJournal(clock=clock)
    lead_a, sched_a = _leadership(j, "http://a:1", ["default"], clock)
    lead_a.step(sched_a)
    p = sched_a.partition("default")
    p.add_node("n1", {"vcore": 100})
    p.add_application("app", SUE, queue="root.a")
    assert p.allocate("app", "k1", {"vcore": 5}).allocated
    app = create_app(sched_a, leadership=lead_a, timeouts_interval=3600)
    app.state.service.router = None               # answered here: no relay
    with TestClient(app, raise_server_exceptions=False) as c:
        task = lead_a._task
        assert task is not None
        c.portal.call(task.cancel)                 # its rounds stall (a frozen store) …
        assert c.get("/ws/v1/partition/default/allocation/k1").status_code == 200
        clock.now += 3.9                           # … within ttl - margin: still the leader
        assert c.get("/ws/v1/partition/default/allocation/k1").status_code == 200
        clock.now += 0.2                           # past it: its lease may have expired
        assert not lead_a.is_leader("default")
        for r in (c.get("/ws/v1/partition/default/allocation/k1"),
                  c.get("/ws/v1/partition/default/queues"),
                  c.get("/ws/v1/partitions"),
                  c.post("/ws/v1/partition/default/whatif",
                         json={"applicationID": "app", "allocationKey": "w", "resource": {"vcore": 1}}),
                  c.post("/ws/v1/partition/default/allocations",
                         json={"applicationID": "app", "allocationKey": "k2", "resource": {"vcore": 1}})):
            assert r.status_code == 503, r.text
            assert "nothing was changed" in r.json()["message"] or "lead" in r.json()["message"]
    assert {x.allocation_key for x in p.allocations()} == {"k1"}


def test_a_deposed_leader_serves_again_only_what_the_new_leader_wrote() -> None:
    clock = Clock()
    j = MemoryJournal(clock=clock)
    lead_a, sched_a = _leadership(j, "http://a:1", [], clock)
    lead_a.step(sched_a)
    pa = sched_a.partition("default")
    pa.add_node("n1", {"vcore": 100})
    pa.add_application("app", SUE, queue="root.a")
    assert pa.allocate("app", "k1", {"vcore": 5}).allocated
    clock.now += 6                                 # a paused past its lease; b takes it over
    lead_b, sched_b = _leadership(j, "http://b:2", [], clock)
    lead_b.step(sched_b)
    assert lead_b.is_leader("default") and not lead_a.is_leader("default")
    assert sched_b.partition("default").allocate("app", "k2", {"vcore": 5}).allocated
    with pytest.raises(NotLeaderError):
        pa.allocate("app", "k3", {"vcore": 5})    # fenced, whatever a believes
    lead_a.step(sched_a)                           # a learns it lost the lease and follows
    assert not lead_a.is_leader("default")
    sched_a.refresh("default")
    assert {x.allocation_key for x in sched_a.partition("default").allocations()} == {"k1", "k2"}


def test_a_leader_that_lapsed_and_takes_its_lease_again_catches_up_first() -> None:
    clock = Clock()
    j = MemoryJournal(clock=clock)
    lead_a, sched_a = _leadership(j, "http://a:1", [], clock)
    lead_a.step(sched_a)
    pa = sched_a.partition("default")
    pa.add_node("n1", {"vcore": 100})
    pa.add_application("app", SUE, queue="root.a")
    clock.now += 6                                 # a paused; b took the partition, wrote, died
    lead_b, sched_b = _leadership(j, "http://b:2", [], clock)
    lead_b.step(sched_b)
    assert sched_b.partition("default").allocate("app", "by-b", {"vcore": 5}).allocated
    lead_b.release()
    lead_a.step(sched_a)                           # a takes it again: the same holder
    assert lead_a.is_leader("default")
    assert {x.allocation_key for x in sched_a.partition("default").allocations()} == {"by-b"}
    assert sched_a.partition("default").allocate("app", "by-a", {"vcore": 5}).allocated


# -- a late renewal holds requests instead of refusing them --------------------------------------------

def test_a_leader_whose_renewal_is_late_holds_requests_until_it_renews_instead_of_refusing_them() -> None:
    """One instance alone on its store (``serve --store sqlite:…``) on a loaded machine: its renewal
    round runs late, its own clock stops trusting the lease, and nobody else wants it. Requests then
    wait for the (hurried) renewal — at most a ttl — and are answered by the renewed leader; they
    were refused 503 "the leader is unknown" (seen in CI at load 13). Nothing is served while the
    lease is untrusted: the request is answered after the round."""
    from quotaplane.server.ha import Leadership

    clock = Clock()

    class SharedJournal(MemoryJournal):
        def close(self) -> None:
            """Kept open: the store outlives each scheduler built on it (as a database file does)."""

    j = SharedJournal(clock=clock)

    def build_leader(holder: str) -> Scheduler:
        return Scheduler.from_yaml(journalled_config(j) or CONFIG, store=j, holder=holder)

    lead = Leadership(j, advertise="http://a:1", build_leader=build_leader,
                      build_follower=lambda: Scheduler.from_yaml(CONFIG), streams_hint=lambda: ["default"],
                      ttl=5.0, interval=1.0, margin=1.0, clock=clock)
    sched = lead.initial()
    p = sched.partition("default")
    p.add_node("n1", {"vcore": 100})
    p.add_application("app", SUE, queue="root.a")
    app = create_app(sched, leadership=lead, timeouts_interval=3600)
    with TestClient(app, raise_server_exceptions=False) as c:
        clock.now += 4.5                           # the rounds ran late: past ttl - margin
        assert not lead.is_leader("default")
        r = c.post("/ws/v1/partition/default/allocations",
                   json={"applicationID": "app", "allocationKey": "k1", "resource": {"vcore": 1}})
        assert r.status_code == 201, r.text
        assert lead.is_leader("default")
        assert c.get("/ws/v1/partition/default/allocation/k1").status_code == 200
        clock.now += 4.5
        assert c.get("/ws/v1/partition/default/allocation/k1").status_code == 200
    keys = [ev["key"] for _, ev in j.read("default") if ev.get("type") == "allocated"]
    assert keys == ["k1"]
