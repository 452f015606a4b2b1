"""The ETA over REST (docs/rest.md "ETA"): the forecast of every waiting ask, one ask's forecast with what
would have to change, and ``whatif/explain``; unknown names are 404s, bad bodies 400s naming the field,
and nothing changes."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from quotaplane.scheduler import Scheduler
from quotaplane.server.app import create_app
from tests.partition.helpers import CONFIG, Clock

BOB = UserGroup("bob", ["ops"])
BASE = "/ws/v1/partition/default"


def _scheduler() -> Scheduler:
    s = Scheduler.from_yaml(CONFIG, clock=Clock(1000.0))
    p = s.partition("default")
    p.add_node("n1", Resource({"vcore": 100_000}))
    p.add_application("app1", BOB, queue="root.b")          # root.b: max 20 cores
    assert p.allocate("app1", "r1", Resource({"vcore": 10_000}), max_runtime=100)
    assert p.allocate("app1", "r2", Resource({"vcore": 10_000}), max_runtime=300, priority=3)
    p.add_ask("app1", "w1", Resource({"vcore": 15_000}), max_runtime=50)
    p.add_ask("app1", "w2", Resource({"vcore": 10_000}), max_runtime=50)
    return s


def test_the_forecast_of_every_waiting_ask_filtered_by_queue_or_application() -> None:
    s = _scheduler()
    before = s.partition("default").dump_state()
    with TestClient(create_app(s)) as c:
        r = c.get(f"{BASE}/eta")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["partition"] == "default"
        asks = {a["allocationKey"]: a for a in body["asks"]}
        assert asks["w2"]["start"] == {"p10": 1100.0, "p50": 1100.0, "p90": 1100.0}
        assert asks["w1"]["start"]["p50"] == 1300.0
        assert asks["w1"]["basis"] == ["declared runtime of r2"]
        assert asks["w1"]["known"] is True
        assert [a["allocationKey"] for a in c.get(f"{BASE}/eta", params={"queue": "root"}).json()["asks"]] \
            == ["w1", "w2"]
        assert c.get(f"{BASE}/eta", params={"queue": "root.a"}).json()["asks"] == []
        # unknown names are 404s naming them, as standing and whatif answer (not an empty list)
        r = c.get(f"{BASE}/eta", params={"applicationID": "nope"})
        assert r.status_code == 404 and "nope" in r.json()["message"], r.text
        r = c.get(f"{BASE}/eta", params={"queue": "root.nope"})
        assert r.status_code == 404 and "root.nope" in r.json()["message"], r.text
        assert c.get("/ws/v1/partition/nope/eta").status_code == 404
    assert s.partition("default").dump_state() == before


def test_the_queue_filter_checks_existence_without_the_standing(monkeypatch: pytest.MonkeyPatch) -> None:
    """``GET …/eta?queue=`` needs only to know the queue exists: it answered by computing the queue's
    whole standing (its usage, waiting asks with their reasons and positions, budgets) and threw it
    away — on a large partition, under the partition's lock, before the forecast even started."""
    from quotaplane.partition.facade import Partition

    def standing(*_args: object, **_kw: object) -> None:
        raise AssertionError("the ETA's queue filter computed a standing")

    monkeypatch.setattr(Partition, "standing", standing)
    s = _scheduler()
    with TestClient(create_app(s)) as c:
        for name in ("root", "root.b", "ROOT.B"):
            r = c.get(f"{BASE}/eta", params={"queue": name})
            assert r.status_code == 200, r.text
        assert [a["allocationKey"] for a in r.json()["asks"]] == ["w1", "w2"]
        r = c.get(f"{BASE}/eta", params={"queue": "root.nope"})
        assert r.status_code == 404 and "root.nope" in r.json()["message"], r.text


def test_one_ask_its_forecast_and_what_would_have_to_change() -> None:
    s = _scheduler()
    with TestClient(create_app(s)) as c:
        r = c.get(f"{BASE}/eta/w1")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["eta"]["inSeconds"]["p50"] == 300.0
        e = body["explain"]
        assert e["admitted"] is False
        assert [x["allocationKey"] for x in e["releases"]] == ["r1", "r2"]   # 15 of 20 missing: both
        assert e["limits"][0]["code"] == "queue.max" and e["limits"][0]["by"] == {"vcore": 15000}
        assert e["releases"][1] == {"allocationKey": "r2", "applicationID": "app1", "queue": "root.b",
                                    "user": "bob", "priority": 3, "resource": {"vcore": 10000}}
        assert body["top"] == "starts if r1, r2 ended"
        r = c.get(f"{BASE}/eta/nope")
        assert r.status_code == 404 and "nope" in r.json()["message"]


def test_whatif_explain_and_its_errors() -> None:
    s = _scheduler()
    before = s.partition("default").dump_state()
    with TestClient(create_app(s)) as c:
        r = c.post(f"{BASE}/whatif/explain", json={"applicationID": "app1", "resource": {"vcore": 5000}})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["admitted"] is False and body["reasons"][0]["code"] == "queue.max"
        assert body["largest"] is None
        assert body["top"] is not None and body["top"].startswith("starts if")
        r = c.post(f"{BASE}/whatif/explain", json={"applicationID": "nope", "resource": {"vcore": 1}})
        assert r.status_code == 404
        r = c.post(f"{BASE}/whatif/explain", json={"applicationID": "app1", "resource": {"vcore": -1}})
        assert r.status_code == 400 and "resource" in r.json()["message"]
        r = c.post(f"{BASE}/whatif/explain", json={"applicationID": "app1"})
        assert r.status_code == 400 and "resource" in r.json()["message"]
    assert s.partition("default").dump_state() == before


def test_the_waiting_page_says_when_each_ask_starts() -> None:
    s = _scheduler()
    s.partition("default").add_ask("app1", "w3", Resource({"vcore": 30_000}))   # over the queue's max
    with TestClient(create_app(s)) as c:
        r = c.get("/ui/waiting")
        assert r.status_code == 200, r.text
        page = r.text
        assert "<th>starts</th>" in page
        assert "in 5m 00s" in page and "declared runtime of r2" in page      # w1: 300 s from now
        assert "in 1m 40s" in page                                             # w2: r1 ends at 1100
        assert ">unknown<" in page                                             # w3 never fits


def test_the_ask_lists_and_standing_carry_the_eta_when_asked() -> None:
    """``GET …/asks?eta=true``, ``…/application/{app}/asks?eta=true`` and ``standing?eta=true``:
    each waiting ask with ``eta`` (known, start and inSeconds p10/p50/p90, basis, asOf); without the
    query no forecast is made; a bad value is a 400 naming it."""
    s = _scheduler()
    with TestClient(create_app(s)) as c:
        plain = c.get(f"{BASE}/asks").json()
        assert plain and all("eta" not in a for a in plain)
        asks = {a["allocationKey"]: a for a in c.get(f"{BASE}/asks", params={"eta": "true"}).json()}
        assert asks["w2"]["eta"]["start"] == {"p10": 1100.0, "p50": 1100.0, "p90": 1100.0}
        assert asks["w1"]["eta"]["basis"] == ["declared runtime of r2"]
        assert asks["w1"]["eta"]["asOf"] == 1000.0 and asks["w1"]["reasons"]
        mine = c.get(f"{BASE}/application/app1/asks", params={"eta": "true"}).json()
        assert {a["allocationKey"]: a["eta"]["inSeconds"]["p50"] for a in mine} == {"w1": 300.0, "w2": 100.0}
        st = c.get(f"{BASE}/standing", params={"kind": "queue", "name": "root.b", "eta": "true"}).json()
        assert {w["allocationKey"]: w["eta"]["start"]["p50"] for w in st["waiting"]} == \
            {"w1": 1300.0, "w2": 1100.0}
        st = c.get(f"{BASE}/standing", params={"kind": "user", "name": "bob"}).json()
        assert all("eta" not in w for w in st["waiting"])
        bad = c.get(f"{BASE}/asks", params={"eta": "soon"})
        assert bad.status_code == 400 and "eta" in bad.text
