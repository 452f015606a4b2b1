"""Issue 18 #2: partitions led by several instances (``serve --partitions``).

Two instances share one store (a memory journal with leases on a fake clock, so leases expire without
sleeping): each leads the partition it is given, and a read of the other's catches up first; a write
for a partition led elsewhere is relayed to its leader over real TCP (a 503 with the leader when it
cannot be reached, a 502 when it does not answer); when an instance dies its partition is taken over
with every acknowledged change; when it comes back the partition is handed back; a configuration
change made on one instance reaches the partition the other leads.
"""

from __future__ import annotations

import asyncio
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Awaitable, Callable, Iterator

import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.types import Scope

import quotaplane as qp
from quotaplane.journal import MemoryJournal
from quotaplane.server.app import create_app
from quotaplane.server.ha_partitions import PartitionLeadership
from quotaplane.server.main import journalled_config
from quotaplane.server.write_routing import WriteRouter
from tests.kube.emulator import free_port
from tests.live_server import LiveServer

CONFIG = """
partitions:
- name: default
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
- name: second
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: a
"""

TTL = 5.0


class Clock:
    """The leases' monotonic clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _instance(journal: MemoryJournal, url: str, partitions: list[str], interval: float = 1.0
              ) -> tuple[PartitionLeadership, qp.Scheduler]:
    def build(holder: str, leads: Callable[[str], bool], config_leader: bool) -> qp.Scheduler:
        text = CONFIG if config_leader else journalled_config(journal)
        assert text is not None
        return qp.Scheduler.from_yaml(text, store=journal, holder=holder, leads=leads)

    # the leases' validity is judged by the clock that times them here (moved by hand): the tests
    # never depend on how fast the machine runs
    lead = PartitionLeadership(journal, advertise=url, partitions=partitions, build=build, ttl=TTL,
                               interval=interval, clock=journal._leases._clock)
    return lead, lead.initial()


def _setup() -> tuple[Clock, MemoryJournal, tuple[PartitionLeadership, qp.Scheduler],
                      tuple[PartitionLeadership, qp.Scheduler]]:
    clock = Clock()
    journal = MemoryJournal(clock=clock)
    a = _instance(journal, "http://a:1", ["default"])
    b = _instance(journal, "http://b:2", ["second"])
    a[0].step(a[1])
    b[0].step(b[1])
    return clock, journal, a, b


def _keys(s: qp.Scheduler, partition: str) -> set[str]:
    return {x.allocation_key for x in s.partition(partition).allocations()}


def _seed(s: qp.Scheduler, partition: str, key: str) -> None:
    p = s.partition(partition)
    if not p.nodes():
        p.add_node("n1", {"vcore": 100})
    if p.application("app") is None:
        p.add_application("app", qp.UserGroup("sue", []), queue="root.a")
    assert p.allocate("app", key, {"vcore": 1}).allocated


def test_each_instance_leads_its_partition_and_a_read_elsewhere_catches_up() -> None:
    _clock, _journal, (lead_a, sched_a), (lead_b, sched_b) = _setup()
    assert lead_a.led() == {"default"} and lead_b.led() == {"second"}
    assert lead_a.is_leader(None) and not lead_b.is_leader(None)     # the config: the first one
    _seed(sched_a, "default", "k-a")
    _seed(sched_b, "second", "k-b")
    lead_a.step(sched_a)
    lead_b.step(sched_b)
    # rounds replay nothing led elsewhere: N instances would each redo the work of all the others
    assert "k-a" not in _keys(sched_b, "default")
    assert lead_a.leader_url("second") == "http://b:2"
    with TestClient(create_app(sched_b, leadership=lead_b, timeouts_interval=3600),
                    raise_server_exceptions=False) as c:
        r = c.get("/ws/v1/partition/default/allocation/k-a")        # a read catches up first
        assert r.status_code == 200, r.text
        _seed(sched_a, "default", "k-a2")                              # acknowledged on a …
        assert c.get("/ws/v1/partition/default/allocation/k-a2").status_code == 200   # … seen on b
        assert c.get("/ws/v1/partition/default/allocation/k-none").status_code == 404
    assert _keys(sched_b, "default") == {"k-a", "k-a2"}
    assert _keys(sched_b, "second") == {"k-b"}                         # its own, untouched


def test_a_cluster_wide_read_catches_up_every_partition_led_elsewhere() -> None:
    _clock, _journal, (lead_a, sched_a), (_lead_b, sched_b) = _setup()
    _seed(sched_b, "second", "k-b")
    with TestClient(create_app(sched_a, leadership=lead_a, timeouts_interval=3600),
                    raise_server_exceptions=False) as c:
        r = c.get("/ws/v1/partitions")
        assert r.status_code == 200, r.text
    assert _keys(sched_a, "second") == {"k-b"}


def test_metrics_report_partition_state_only_where_it_is_led() -> None:
    _clock, _journal, (lead_a, sched_a), (_lead_b, sched_b) = _setup()
    _seed(sched_a, "default", "k-a")
    _seed(sched_b, "second", "k-b")
    with TestClient(create_app(sched_a, leadership=lead_a, timeouts_interval=3600),
                    raise_server_exceptions=False) as c:
        text = c.get("/metrics").text
    assert 'quotaplane_partition_used{partition="default",resource="vcore"} 1.0' in text
    assert 'quotaplane_partition_used{partition="second"' not in text      # b reports it
    assert 'quotaplane_leader{partition="second"} 0.0' in text


def test_a_write_for_a_partition_led_elsewhere_is_503_with_its_leader_without_forwarding() -> None:
    _clock, _journal, (lead_a, sched_a), _b = _setup()
    app = create_app(sched_a, leadership=lead_a, timeouts_interval=3600)
    app.state.service.router = None
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.put("/ws/v1/partition/second/node/n9", json={"capacity": {"vcore": 1}})
        assert r.status_code == 503, r.text
        assert r.json()["leader"] == "http://b:2"
        assert c.put("/ws/v1/partition/default/node/n9", json={"capacity": {"vcore": 1}}).status_code == 201
        # reads are served for every partition
        assert c.get("/ws/v1/partition/second/nodes").status_code == 200


def test_a_dead_instance_s_partition_is_taken_over_with_everything_acknowledged_and_handed_back() -> None:
    clock, journal, (lead_a, sched_a), (_lead_b, sched_b) = _setup()
    _seed(sched_b, "second", "k1")
    _seed(sched_b, "second", "k2")
    # b dies (kill -9: no release); its lease and claim expire after the ttl
    clock.now += TTL + 1
    lead_a.step(sched_a)
    assert lead_a.led() == {"default", "second"}
    assert _keys(sched_a, "second") == {"k1", "k2"}
    _seed(sched_a, "second", "k3")
    # b comes back: it claims its partition at its first round (once it serves, not while it
    # starts); a hands it back; b takes it with a's write
    lead_b2, sched_b2 = _instance(journal, "http://b:2", ["second"])
    lead_a.step(sched_a)
    assert lead_a.led() == {"default", "second"}                      # not claimed yet
    lead_b2.step(sched_b2)
    assert lead_b2.successor("second") and not lead_b2.is_leader("second")
    lead_a.step(sched_a)
    assert lead_a.led() == {"default"}
    lead_b2.step(sched_b2)
    assert lead_b2.led() == {"second"}
    assert _keys(sched_b2, "second") == {"k1", "k2", "k3"}
    _seed(sched_b2, "second", "k4")                                   # and writes again


def test_a_hand_back_lets_the_admitted_writes_finish_and_sends_new_ones_to_the_claimant() -> None:
    clock, journal, (lead_a, sched_a), _b = _setup()
    clock.now += TTL + 1                                   # b died: a takes `second` over
    lead_a.step(sched_a)
    assert lead_a.led() == {"default", "second"}
    assert lead_a.enter("second")                          # a write admitted, not answered yet
    lead_b2, sched_b2 = _instance(journal, "http://b:2", ["second"])
    lead_b2.step(sched_b2)                                 # b is back and claims `second`
    lead_a.hold = 5.0
    stepping = threading.Thread(target=lead_a.step, args=(sched_a,))
    stepping.start()
    deadline = time.monotonic() + 5
    while "second" not in lead_a._draining and time.monotonic() < deadline:
        time.sleep(0.005)
    # handing back: still led for the admitted write, but no new write is admitted; they go to b
    assert lead_a.is_leader("second") and not lead_a.enter("second")
    assert lead_a.leader_url("second") == "http://b:2"
    time.sleep(0.1)
    assert stepping.is_alive()                             # waiting for the admitted write
    lead_a.leave("second")
    stepping.join(5)
    assert not stepping.is_alive()
    assert lead_a.led() == {"default"} and lead_a.leader_url("second") == "http://b:2"
    lead_b2.step(sched_b2)
    assert lead_b2.led() == {"second"}


def test_the_healthcheck_says_which_partitions_this_instance_leads_and_who_leads_the_others() -> None:
    _clock, _journal, (lead_a, sched_a), (lead_b, sched_b) = _setup()
    lead_a.step(sched_a)
    assert lead_a.describe() == "leads default and the configuration; second: http://b:2"
    with TestClient(create_app(sched_b, leadership=lead_b, timeouts_interval=3600)) as c:
        checks = c.get("/ws/v1/scheduler/healthcheck").json()["HealthChecks"]
    leadership = next(x for x in checks if x["Name"] == "Leadership")
    assert leadership["DiagnosisMessage"] == ("leads second; default: http://a:1; "
                                              "the configuration: http://a:1")


def test_a_config_change_on_one_instance_reaches_the_partition_another_leads() -> None:
    _clock, journal, (_lead_a, sched_a), (lead_b, sched_b) = _setup()
    sched_a.update_config(CONFIG.replace("    - name: a\n", "    - name: a\n    - name: b\n"))
    lead_b.step(sched_b)
    p = sched_b.partition("second")
    assert p.queues.queue("root.b") is not None
    assert p.config_seq == sched_a.config_seq
    markers = [ev for _, ev in journal.read("second") if ev.get("type") == "config"]
    assert markers[-1]["seq"] == sched_a.config_seq                  # journalled by b, its leader


def test_an_instance_given_no_partition_leads_every_free_one() -> None:
    clock = Clock()
    journal = MemoryJournal(clock=clock)
    lead, sched = _instance(journal, "http://solo:1", [])
    lead.step(sched)
    assert lead.led() == {"default", "second"}
    _seed(sched, "default", "k")
    _seed(sched, "second", "k")


def test_a_failed_round_stops_writing_and_the_next_one_takes_the_partition_again() -> None:
    _clock, _journal, (lead_a, sched_a), _b = _setup()
    assert lead_a.led() == {"default"}
    lead_a._round_failed()                 # what the background loop does when a round raises
    assert lead_a.led() == frozenset() and not lead_a.is_leader("default")
    lead_a.step(sched_a)
    assert lead_a.led() == {"default"}


def test_history_samples_only_the_partitions_led_here() -> None:

    _clock, _journal, (lead_a, sched_a), (_lead_b, sched_b) = _setup()
    _seed(sched_a, "default", "k-a")
    _seed(sched_b, "second", "k-b1")
    _seed(sched_b, "second", "k-b2")
    sched_a.refresh("second")                      # a holds a copy of b's partition, too
    assert _keys(sched_a, "second") == {"k-b1", "k-b2"}
    app = create_app(sched_a, leadership=lead_a, timeouts_interval=3600, history_interval=0.02)
    with TestClient(app, raise_server_exceptions=False) as c:
        deadline = time.monotonic() + 5
        while not app.state.service.history.records() and time.monotonic() < deadline:
            time.sleep(0.02)
        r = c.get("/ws/v1/history/containers")
    assert r.status_code == 200, r.text
    assert r.json() and all(int(x["totalContainers"]) == 1 for x in r.json())   # its own: k-a


class _Raw(socketserver.ThreadingTCPServer):
    """A fake leader answering every request on a connection with ``answer`` (None: closes instead);
    ``reset``: it resets each connection (RST) right after its first answer, as a leader that dies."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, answer: bytes | None, reset: bool = False) -> None:
        self.answer = answer
        self.reset = reset
        self.connections = 0
        self.requests: list[bytes] = []
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer.connections += 1
                data = b""
                while True:
                    chunk = self.request.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                    head, sep, rest = data.partition(b"\r\n\r\n")
                    if not sep:
                        continue
                    length = int(next((line.split(b":", 1)[1] for line in head.split(b"\r\n")
                                       if line.lower().startswith(b"content-length:")), b"0"))
                    if len(rest) < length:
                        continue
                    outer.requests.append(data)
                    data = rest[length:]
                    if outer.answer is None:
                        return                                  # read it, never answer
                    self.request.sendall(outer.answer)
                    if outer.reset:
                        self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                struct.pack("ii", 1, 0))
                        self.request.close()
                        return

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


Instance = tuple[PartitionLeadership, qp.Scheduler]


def _two(b_url: str) -> tuple[Instance, Instance]:
    clock = Clock()
    journal = MemoryJournal(clock=clock)
    a = _instance(journal, "http://a:1", ["default"])
    b = _instance(journal, b_url, ["second"])
    a[0].step(a[1])
    b[0].step(b[1])
    return a, b


@pytest.fixture
def live_b() -> Iterator[tuple[Instance, Instance]]:
    port = free_port()
    a, b = _two(f"http://127.0.0.1:{port}")
    server = LiveServer(create_app(b[1], leadership=b[0], timeouts_interval=3600), port, lifespan="off")
    yield a, b
    server.stop()


def test_a_write_to_an_instance_that_does_not_lead_the_partition_is_relayed_to_its_leader(
        live_b: tuple[Instance, Instance]) -> None:
    (lead_a, sched_a), (_lead_b, sched_b) = live_b
    app = create_app(sched_a, leadership=lead_a, timeouts_interval=3600)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.put("/ws/v1/partition/second/node/n1", json={"capacity": {"vcore": 10}})
        assert r.status_code == 201, r.text
        assert r.json()["nodeID"] == "n1"
        assert r.headers["content-type"] == "application/json"
        r = c.post("/ws/v1/partition/second/applications",
                   json={"applicationID": "app", "user": "sue", "queue": "root.a"})
        assert r.status_code == 201, r.text
        r = c.post("/ws/v1/partition/second/allocations",        # the hot path is relayed too
                   json={"applicationID": "app", "allocationKey": "k1", "resource": {"vcore": 4}})
        assert r.status_code == 201 and r.json()["allocated"] is True, r.text
        r = c.post("/ws/v1/partition/second/allocations",        # the leader's refusal, as it is
                   json={"applicationID": "app", "allocationKey": "k2", "resource": {"vcore": 40}})
        assert r.status_code == 409 and r.json()["allocated"] is False, r.text
        assert c.get("/ws/v1/partition/second/allocation/k1").status_code == 200   # read here
        forwarder = app.state.service.router.forwarder
        assert forwarder.forwarded == 4
        # its own partition is written here, not relayed
        assert c.put("/ws/v1/partition/default/node/n9", json={"capacity": {"vcore": 1}}).status_code == 201
        assert forwarder.forwarded == 4
    assert _keys(sched_b, "second") == {"k1"}
    assert list(sched_a.partition("default").nodes()) == ["n9"]


def test_a_request_is_relayed_at_most_twice_with_the_instances_it_passed_through() -> None:
    leader = _Raw(b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\n"
                  b"content-length: 2\r\n\r\n{}")
    (lead_a, sched_a), (lead_b, _sched_b) = _two(leader.url)
    app = create_app(sched_a, leadership=lead_a, timeouts_interval=3600)
    with TestClient(app, raise_server_exceptions=False) as c:
        # relayed once already (a hand-over: the old leader passes it on): relayed a second time
        r = c.put("/ws/v1/partition/second/node/n1", json={"capacity": {"vcore": 10}},
                  headers={"X-Quotaplane-Forwarded": "http://c:3"})
        assert r.status_code == 201, r.text
        assert b"x-quotaplane-forwarded: http://c:3, http://a:1\r\n" in leader.requests[-1]
        # relayed twice: answered here, never sent on
        r = c.put("/ws/v1/partition/second/node/n2", json={"capacity": {"vcore": 10}},
                  headers={"X-Quotaplane-Forwarded": "http://c:3, http://d:4"})
        assert r.status_code == 503, r.text
        assert r.json()["leader"] == lead_b.advertise
        assert len(leader.requests) == 1 and app.state.service.router.forwarder.forwarded == 1


def test_a_write_during_a_hand_back_waits_for_the_new_leader_instead_of_failing() -> None:
    """a leads `second` (b was not up) and is written through; b starts and claims it; a hands it
    back while writes for it arrive through both instances. Between a's release and b's take-over
    nobody leads it: every write waits or is relayed, none fails, all are on the new leader."""
    journal = MemoryJournal(clock=Clock())
    port_a, port_b = free_port(), free_port()
    lead_a, sched_a = _instance(journal, f"http://127.0.0.1:{port_a}", ["default"], interval=0.3)
    lead_a.step(sched_a)
    assert lead_a.led() == {"default", "second"}                 # b is not up: a took `second` too
    p = sched_a.partition("second")
    p.add_node("n1", {"vcore": 10**6})
    p.add_application("app", qp.UserGroup("sue", []), queue="root.a")
    server_a = LiveServer(create_app(sched_a, leadership=lead_a, timeouts_interval=3600), port_a)
    servers = [server_a]
    answers: list[tuple[str, int, str]] = []
    before_b: list[str] = []                                       # answered while a still led

    def write(url: str, tag: str) -> None:
        after = 0
        with httpx.Client(base_url=url, timeout=10) as c:
            for i in range(3000):
                body = {"applicationID": "app", "allocationKey": f"{tag}{i}", "resource": {"vcore": 1}}
                r = c.post("/ws/v1/partition/second/allocations", json=body)
                answers.append((f"{tag}{i}", r.status_code, r.text))
                if lead_a.is_leader("second"):
                    before_b.append(f"{tag}{i}")
                elif not lead_a.is_leader("second") and lead_b_box and lead_b_box[0].is_leader("second"):
                    after += 1
                    if after > 40:
                        return

    lead_b_box: list[PartitionLeadership] = []
    try:
        threads = [threading.Thread(target=write, args=(server_a.url, "a"))]
        threads[0].start()
        deadline = time.monotonic() + 10
        while len(answers) < 20 and time.monotonic() < deadline:
            time.sleep(0.005)
        lead_b, sched_b = _instance(journal, f"http://127.0.0.1:{port_b}", ["second"], interval=0.3)
        assert not lead_b.is_leader("second")            # it claims `second` at its first round
        lead_b_box.append(lead_b)
        servers.append(LiveServer(create_app(sched_b, leadership=lead_b, timeouts_interval=3600), port_b))
        threads.append(threading.Thread(target=write, args=(servers[1].url, "b")))
        threads[1].start()
        for t in threads:
            t.join(30)
        led = lead_a.led(), lead_b.led()
    finally:
        for server in servers:
            server.stop()
    failed = [x for x in answers if x[1] != 201]
    assert not failed, failed[:5]
    assert led == ({"default"}, {"second"})                             # the hand-back happened
    assert len(before_b) >= 20 and len(answers) > len(before_b) + 40    # … while writes went on
    assert _keys(sched_b, "second") == {key for key, _, _ in answers}   # all there, on the leader


def test_a_relayed_write_at_the_claimant_waits_out_the_old_leaders_round_not_only_the_hold() -> None:
    """The old leader hands a claimed partition back at its *next round*, after draining the writes
    it admitted (up to ``hold``), and the claimant then replays the stream: together longer than
    ``hold`` whenever the round comes late or the machine is busy. A write relayed to the claimant
    meanwhile waits for the hand-over (bounded by the lease's ttl, after which a dead leader's lease
    has lapsed), instead of a 503 once ``hold`` has passed."""
    journal = MemoryJournal(clock=Clock())
    port_b = free_port()
    lead_a, sched_a = _instance(journal, "http://a:1", ["default"], interval=0.3)
    lead_a.step(sched_a)
    assert lead_a.led() == {"default", "second"}                 # b is not up: a took `second` too
    lead_b, sched_b = _instance(journal, f"http://127.0.0.1:{port_b}", ["second"], interval=0.3)
    lead_b.hold = 0.05
    server_b = LiveServer(create_app(sched_b, leadership=lead_b, timeouts_interval=3600), port_b)
    answers: list[httpx.Response] = []
    try:
        deadline = time.monotonic() + 10
        while not lead_b.successor("second") and time.monotonic() < deadline:
            time.sleep(0.01)                                       # b's first round claims it
        assert lead_b.successor("second")

        def write() -> None:
            answers.append(httpx.put(f"{server_b.url}/ws/v1/partition/second/node/n1",
                                     json={"capacity": {"vcore": 10}}, timeout=30,
                                     headers={"X-Quotaplane-Forwarded": "http://a:1"}))

        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(0.3)                                  # a's round comes later than b's hold
        assert not answers                                # still waiting for the hand-over
        lead_a.step(sched_a)                                   # a's next round: hands it back
        writer.join(30)
        led = lead_a.led(), lead_b.led()
    finally:
        server_b.stop()
    assert led == ({"default"}, {"second"})                             # the hand-back happened
    assert [r.status_code for r in answers] == [201], [r.text for r in answers]
    assert list(sched_b.partition("second").nodes()) == ["n1"]


def test_an_unreachable_leader_is_a_503_naming_it_and_nothing_changes() -> None:
    url = f"http://127.0.0.1:{free_port()}"                  # nobody listens there
    (lead_a, sched_a), (_lead_b, sched_b) = _two(url)
    lead_a.hold = 0.3                                          # tried again for 0.3 s, then 503
    with TestClient(create_app(sched_a, leadership=lead_a, timeouts_interval=3600),
                    raise_server_exceptions=False) as c:
        r = c.put("/ws/v1/partition/second/node/n1", json={"capacity": {"vcore": 10}})
    assert r.status_code == 503, r.text
    assert r.json()["leader"] == url
    assert not sched_b.partition("second").nodes()


def test_a_leader_that_does_not_answer_is_a_502_that_does_not_claim_nothing_changed() -> None:
    silent = _Raw(None)
    (lead_a, sched_a), _b = _two(silent.url)
    with TestClient(create_app(sched_a, leadership=lead_a, timeouts_interval=3600),
                    raise_server_exceptions=False) as c:
        r = c.post("/ws/v1/partition/second/allocations",
                   json={"applicationID": "app", "allocationKey": "k1", "resource": {"vcore": 4}})
    silent.shutdown()
    assert r.status_code == 502, r.text
    assert "may or may not have been applied" in r.json()["message"]
    sent = silent.requests[0]
    assert sent.startswith(b"POST /ws/v1/partition/second/allocations HTTP/1.1\r\n")
    assert b"x-quotaplane-forwarded: http://a:1\r\n" in sent
    assert b'"allocationKey":"k1"' in sent


def test_a_configuration_change_sent_to_another_instance_is_relayed_to_the_configuration_s_leader(
        ) -> None:
    leader = _Raw(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
    journal = MemoryJournal(clock=Clock())
    lead_a, sched_a = _instance(journal, leader.url, ["default"])         # the first: the config
    lead_b, sched_b = _instance(journal, "http://b:2", ["second"])
    lead_a.step(sched_a)
    lead_b.step(sched_b)
    assert lead_a.is_leader(None) and not lead_b.is_leader(None)
    with TestClient(create_app(sched_b, leadership=lead_b, timeouts_interval=3600),
                    raise_server_exceptions=False) as c:
        r = c.put("/ws/v1/config", content=CONFIG, headers={"content-type": "application/x-yaml"})
    assert r.status_code == 200, r.text
    assert leader.requests and leader.requests[-1].startswith(b"PUT /ws/v1/config HTTP/1.1")


def test_a_pooled_connection_the_leader_reset_is_not_reused_and_not_a_500() -> None:
    """Under uvloop (as `serve` runs) a write on a connection the peer reset raises RuntimeError; a
    reset is not an end of stream for the reader, so the pool kept such a connection and the next
    relayed write answered 500. A connection the leader reset is dropped; the write goes through."""
    leader = _Raw(b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\n"
                  b"content-length: 2\r\n\r\n{}", reset=True)
    (lead_a, sched_a), _b = _two(leader.url)
    server = LiveServer(create_app(sched_a, leadership=lead_a, timeouts_interval=3600), lifespan="off")
    try:
        with httpx.Client(base_url=server.url, timeout=10) as c:
            for i in range(3):
                r = c.put(f"/ws/v1/partition/second/node/n{i}", json={"capacity": {"vcore": 1}})
                assert r.status_code == 201, r.text
                time.sleep(0.2)                    # the reset reaches the relay's connection
    finally:
        server.stop()
    assert leader.connections == 3 and len(leader.requests) == 3


def test_the_relay_reuses_its_connection_and_reads_chunked_answers() -> None:
    body = b'{"allocated":true}'
    chunked = (b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\nretry-after: 7\r\n"
               b"x-leader-only: 1\r\ntransfer-encoding: chunked\r\n\r\n"
               + b"%x\r\n" % 5 + body[:5] + b"\r\n"
               + b"%x\r\n" % (len(body) - 5) + body[5:] + b"\r\n0\r\n\r\n")
    leader = _Raw(chunked)
    (lead_a, sched_a), _b = _two(leader.url)
    with TestClient(create_app(sched_a, leadership=lead_a, timeouts_interval=3600),
                    raise_server_exceptions=False) as c:
        answers = [c.post("/ws/v1/partition/second/allocations",
                          json={"applicationID": "app", "allocationKey": f"k{i}", "resource": {"vcore": 1}})
                   for i in range(3)]
    leader.shutdown()
    for r in answers:
        assert r.status_code == 201 and r.content == body
        assert r.headers["retry-after"] == "7" and "x-leader-only" not in r.headers
    assert len(leader.requests) == 3 and leader.connections == 1      # one kept-alive connection


def test_a_write_for_a_leader_that_is_not_listening_yet_waits_for_it(monkeypatch: pytest.MonkeyPatch
                                                                      ) -> None:
    """The leader holds the lease but does not listen yet (it is starting: the claim and the lease
    come before the port is bound). Nothing was sent, so the relay tries again after the next
    rounds, within ``hold``, and the write lands there.

    The order is made, not timed (issue 32 #13: a 0.4 s timer raced ``hold`` on a loaded machine):
    the leader starts listening once the relay found nobody there, and ``hold`` only bounds the
    wait."""
    port = free_port()
    (lead_a, sched_a), (lead_b, sched_b) = _two(f"http://127.0.0.1:{port}")
    lead_a.hold = 120.0
    servers: list[LiveServer] = []
    refused: list[str] = []

    def start_b() -> None:
        server = LiveServer(create_app(sched_b, leadership=lead_b, timeouts_interval=3600), port,
                            lifespan="off")
        servers.append(server)
        while not server.server.started:
            time.sleep(0.01)

    rerouter = WriteRouter.rerouter

    def starting_on_refusal(self: WriteRouter, scope: Scope) -> Callable[[str], Awaitable[str | None]]:
        reroute = rerouter(self, scope)

        async def refused_then_listening(unreachable: str) -> str | None:
            refused.append(unreachable)
            if not servers:
                await asyncio.to_thread(start_b)
            return await reroute(unreachable)

        return refused_then_listening

    monkeypatch.setattr(WriteRouter, "rerouter", starting_on_refusal)
    try:
        with TestClient(create_app(sched_a, leadership=lead_a, timeouts_interval=3600),
                        raise_server_exceptions=False) as c:
            r = c.put("/ws/v1/partition/second/node/n1", json={"capacity": {"vcore": 10}})
    finally:
        for server in servers:
            server.stop()
    assert refused == [f"http://127.0.0.1:{port}"]          # the first try found nobody listening
    assert r.status_code == 201, r.text
    assert list(sched_b.partition("second").nodes()) == ["n1"]


def test_a_round_asked_for_comes_before_its_interval_and_none_without_the_rounds() -> None:
    clock = Clock()
    journal = MemoryJournal(clock=clock)
    lead, sched = _instance(journal, "http://a:1", ["default"], interval=3.0)
    with TestClient(create_app(sched, leadership=lead, timeouts_interval=3600)) as c:
        start = lead._rounds_started
        assert c.portal.call(lead.next_round, 2.0)                  # hurried: not 3 s away
        assert lead._rounds_started > start
    lead2, _ = _instance(journal, "http://b:2", ["second"])
    assert asyncio.run(lead2.next_round(0.5)) is False              # its rounds are not running


def test_a_write_is_not_relayed_to_this_instance_itself() -> None:
    (lead_a, sched_a), _b = _two("http://a:1")                # the store names a as b's leader too
    lead_a.hold = 0.3                                          # waits 0.3 s for another, then 503
    app = create_app(sched_a, leadership=lead_a, timeouts_interval=3600)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.put("/ws/v1/partition/second/node/n1", json={"capacity": {"vcore": 10}})
    assert r.status_code == 503, r.text
    assert "could not reach" not in r.json()["message"]             # no attempt to send it anywhere
    assert r.json()["message"].startswith("this instance does not lead partition 'second'")


class _SlowReads(MemoryJournal):
    """A memory journal whose reads of partition ``second`` wait for ``go`` once ``hold`` is set."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.hold = False
        self.go = threading.Event()
        self.waiting = threading.Event()

    def read(self, stream: str, after: int = 0):  # type: ignore[no-untyped-def]
        if self.hold and stream == "second":
            self.waiting.set()
            assert self.go.wait(10)
        return super().read(stream, after)


def test_a_long_catch_up_does_not_hold_the_scheduler_and_runs_once_per_partition() -> None:
    clock = Clock()
    journal = _SlowReads(clock)
    lead_a, sched_a = _instance(journal, "http://a:1", ["default"])
    lead_b, sched_b = _instance(journal, "http://b:2", ["second"])
    lead_a.step(sched_a)
    lead_b.step(sched_b)
    for i in range(5):
        _seed(sched_b, "second", f"k{i}")
    journal.hold = True
    results: list[int] = []
    refreshers = [threading.Thread(target=lambda: results.append(sched_a.refresh("second")))
                  for _ in range(2)]
    for t in refreshers:
        t.start()
    assert journal.waiting.wait(5)                   # one refresh is inside its (slow) read
    listed: list[object] = []
    lister = threading.Thread(target=lambda: listed.append(sched_a.partitions()))
    lister.start()
    lister.join(2)
    assert listed, "listing the partitions waited for the catch-up"
    journal.go.set()
    for t in refreshers:
        t.join(10)
    assert sorted(results) == [0, sum(results)] and sum(results) > 0     # applied once, not twice
    assert _keys(sched_a, "second") == {f"k{i}" for i in range(5)}
    assert sched_a.partition("second").last_seq == journal.last_seq("second")


def test_a_leader_advertised_at_an_unusable_url_is_a_503_naming_it() -> None:
    (lead_a, sched_a), (_lead_b, sched_b) = _two("http://b:notaport")
    lead_a.hold = 0.3
    with TestClient(create_app(sched_a, leadership=lead_a, timeouts_interval=3600),
                    raise_server_exceptions=False) as c:
        r = c.put("/ws/v1/partition/second/node/n1", json={"capacity": {"vcore": 10}})
    assert r.status_code == 503, r.text
    assert r.json()["leader"] == "http://b:notaport"
    assert not sched_b.partition("second").nodes()
