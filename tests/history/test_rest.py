"""The history over REST: the fake-clock month (two teams, one borrowing) with hand-computed GPU-hours,
borrowed share and bill; CSV; bad parameters are a 400 naming what is wrong."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.history.store import MemoryHistoryStore
from quotaplane.server import routes_history
from quotaplane.server.app import create_app
from tests.partition.helpers import Clock

GPU = "nvidia.com/gpu"

MONTH = """
partitions:
- name: default
  history:
    timezone: Europe/Zurich
    currency: CHF
    prices: {nvidia.com/gpu: 2.5}
    borrowedprices: {nvidia.com/gpu: 4}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: teams
      queues:
      - name: vision
        resources:
          guaranteed: {nvidia.com/gpu: 4}
      - name: speech
        resources:
          guaranteed: {nvidia.com/gpu: 4}
"""

#: 2026-11-01T00:00 in Zurich (UTC+1)
NOV_1 = 1_793_487_600.0
DAY = 86_400.0


def november(monkeypatch: pytest.MonkeyPatch) -> tuple[qp.Scheduler, Clock]:
    """November 2026 on a fake clock:

    * vision holds 4 GPUs from Nov 1 00:00 to Dec 1 00:00 (30 days: 2,880 GPU-hours, within its 4);
    * speech holds 2 GPUs the whole month (1,440 GPU-hours), and from Nov 11 00:00 to Nov 21 00:00
      6 more (10 days × 24 h × 6 = 1,440 GPU-hours) — 8 in all, 4 above its guarantee for those ten
      days: 960 borrowed GPU-hours, lent by nobody (vision uses all of its 4).
    """
    clock = Clock(NOV_1)
    s = qp.Scheduler.from_yaml(MONTH, clock=clock)
    p = s.partition("default")
    p.add_node("n", {GPU: 16})
    p.add_application("v", qp.UserGroup("vera", ["vision"]), queue="root.teams.vision")
    p.add_application("s", qp.UserGroup("sam", ["speech"]), queue="root.teams.speech")
    p.allocate("v", "v1", {GPU: 4})
    p.allocate("s", "s1", {GPU: 2})
    clock.advance(10 * DAY)
    p.allocate("s", "s2", {GPU: 6})
    clock.advance(10 * DAY)
    p.release("s2")
    clock.advance(10 * DAY)
    p.release("v1")
    p.release("s1")
    clock.advance(DAY / 2)
    monkeypatch.setattr(routes_history.time, "time", clock)
    store = MemoryHistoryStore()
    monkeypatch.setattr(routes_history, "history_store", lambda service: store)
    return s, clock


@pytest.fixture
def month(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Clock]]:
    """:func:`november` served in process."""
    s, clock = november(monkeypatch)
    with TestClient(create_app(s)) as client:
        yield client, clock
    s.close()


def _get(client: TestClient, path: str, **params: Any) -> Any:
    r = client.get(f"/ws/v1/partition/default/history/{path}", params=params)
    assert r.status_code == 200, r.text
    return r.json() if "json" in r.headers["content-type"] else r.text


def test_gpu_hours_per_team_last_month_and_how_much_was_borrowed(month: tuple[TestClient, Clock]) -> None:
    client, _ = month
    out = _get(client, "usage", period="last-month", step="month", resource=GPU)
    assert out["start"] == "2026-11-01T00:00:00+01:00" and out["end"] == "2026-12-01T00:00:00+01:00"
    by = {s["name"]: s["points"] for s in out["series"]}
    hour = 3_600_000
    assert by["root.teams.vision"][0]["used"] == {GPU: 2880 * hour}
    assert by["root.teams.vision"][0]["borrowed"] == {}
    assert by["root.teams.speech"][0]["used"] == {GPU: 2880 * hour}
    assert by["root.teams.speech"][0]["borrowed"] == {GPU: 960 * hour}     # a third of its use
    assert by["root.teams"][0]["used"] == {GPU: 5760 * hour}
    per_day = _get(client, "usage", period="last-month", step="day", resource=GPU, name="root.teams.speech")
    points = per_day["series"][0]["points"]
    assert len(points) == 30
    assert [p["used"][GPU] // hour for p in points] == [48] * 10 + [192] * 10 + [48] * 10


def test_the_bill_prices_guaranteed_and_borrowed_use_apart(month: tuple[TestClient, Clock]) -> None:
    client, _ = month
    out = _get(client, "cost", period="last-month")
    assert out["currency"] == "CHF"
    lines = {ln["name"]: ln for ln in out["lines"]}
    # vision: 2,880 GPU-hours within its guarantee at 2.50
    assert lines["root.teams.vision"]["total"] == "7200.00"
    # speech: 1,920 within at 2.50 (4,800.00) + 960 borrowed at 4.00 (3,840.00)
    assert lines["root.teams.speech"]["guaranteedCost"] == "4800.00"
    assert lines["root.teams.speech"]["borrowedCost"] == "3840.00"
    assert out["totals"]["root.teams.speech"] == "8640.00"
    users = _get(client, "cost", period="last-month", groupBy="user")
    # users have no guarantee: every GPU-hour at the base price
    assert {ln["name"]: ln["total"] for ln in users["lines"]} == {"sam": "7200.00", "vera": "7200.00"}


def test_csv_has_a_row_per_scope_step_and_resource(month: tuple[TestClient, Clock]) -> None:
    client, _ = month
    hour = 3_600_000
    text = _get(client, "usage", period="last-month", step="month", format="csv", groupBy="user")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {r["user"]: int(r["used_ms"]) for r in rows} == {"sam": 2880 * hour, "vera": 2880 * hour}
    assert {r["start"] for r in rows} == {"2026-11-01T00:00:00+01:00"}
    cost = list(csv.DictReader(io.StringIO(_get(client, "cost", period="last-month", format="csv"))))
    assert {(r["queue"], r["total"], r["currency"]) for r in cost if r["queue"] == "root.teams.speech"} == \
        {("root.teams.speech", "8640.00", "CHF")}


@pytest.mark.parametrize(("params", "says"), [
    ({"period": "last-year"}, "period"),
    ({"start": "yesterday-ish"}, "start"),
    ({"end": "2026-11-31"}, "end"),
    ({"step": "fortnight"}, "step"),
    ({"groupBy": "team"}, "groupBy"),
])
def test_bad_parameters_are_a_400_naming_them(month: tuple[TestClient, Clock], params: dict[str, Any],
                                             says: str) -> None:
    client, _ = month
    r = client.get("/ws/v1/partition/default/history/usage", params=params)
    assert r.status_code == 400, r.text
    assert says in r.json()["message"]


def test_ranges_that_hold_nothing_are_empty_and_period_with_start_is_their_overlap(
        month: tuple[TestClient, Clock]) -> None:
    client, _ = month
    assert _get(client, "usage", start="2026-11-02", end="2026-11-01")["series"] == []
    assert _get(client, "usage", start="2027-01-01")["series"] == []           # the future
    part = _get(client, "usage", period="last-month", start="2026-11-11", step="total", resource=GPU)
    assert part["start"] == "2026-11-11T00:00:00+01:00"
    speech = next(s for s in part["series"] if s["name"] == "root.teams.speech")
    assert speech["points"][0]["used"] == {GPU: 2400 * 3_600_000}      # 20 days × 2 + 10 days × 6
    top = _get(client, "usage", period="last-month", step="total", top=1, groupBy="user")
    assert len(top["series"]) == 1


def test_an_unknown_partition_is_a_404(month: tuple[TestClient, Clock]) -> None:
    client, _ = month
    assert client.get("/ws/v1/partition/nope/history/usage").status_code == 404


def test_prometheus_counts_resource_seconds_per_queue(month: tuple[TestClient, Clock]) -> None:
    client, _ = month
    text = client.get("/metrics").text
    want = ('quotaplane_queue_resource_seconds_total{metric="borrowed",partition="default",'
            'queue="root.teams.speech",resource="nvidia.com/gpu"} 3.456e+06')        # 960 GPU-hours
    assert want in text
    assert ('quotaplane_queue_resource_seconds_total{metric="used",partition="default",queue="root",'
            'resource="nvidia.com/gpu"} 2.0736e+07') in text                        # 5,760 GPU-hours


def test_an_unknown_resource_is_a_404_naming_the_known_ones(month: tuple[TestClient, Clock]) -> None:
    """Found as a new user: ``report --resource gpu`` (not the resource's name) answered an empty
    table, as if nothing had used it."""
    client, _ = month
    r = client.get("/ws/v1/partition/default/history/usage",
                   params={"period": "last-month", "resource": "gpu"})
    assert r.status_code == 404, r.text
    body = r.text
    assert "'gpu'" in body and "nvidia.com/gpu" in body


def test_the_last_days_of_a_month_are_times_and_a_bad_time_is_said_plainly(
        month: tuple[TestClient, Clock]) -> None:
    """Found trying the product as a new user: ``report --start 2026-10-31`` was a 400 quoting a
    regular expression (the query pattern allowed days 01-28 only), and so was any bad time."""
    client, _ = month
    for start in ("2026-10-29", "2026-10-30", "2026-10-31T08:00", "2026-10-31T08:00+01:00"):
        assert _get(client, "usage", start=start, end="2026-11-02")["start"].startswith("2026-10-"), start
    for bad in ("notadate", "2026-02-30", "2026-11-31"):
        r = client.get("/ws/v1/partition/default/history/usage", params={"start": bad})
        assert r.status_code == 400, r.text
        message = r.json()["message"]
        assert f"start: {bad!r} is not a time" in message and "pattern" not in message, message


@pytest.mark.parametrize(("params", "which"), [
    ({"start": "99999999999999999"}, "start"),          # was a 500: OSError from fromtimestamp
    ({"start": "9" * 400}, "start"),                    # a float overflow
    ({"start": "9999999999999"}, "start"),              # year 318857
    ({"start": "0001-01-01"}, "start"),                 # year 0 once in the history's zone
    ({"end": "1969-12-31T23:00Z"}, "end"),
    ({"start": "2026-11-01", "end": "99999999999999999"}, "end"),
])
def test_a_time_out_of_range_is_a_400_naming_the_parameter(month: tuple[TestClient, Clock],
                                                            params: dict[str, str], which: str) -> None:
    """Found trying the product as a new user: ``start=99999999999999999`` was a 500 (an OSError from
    the clock conversion), and nearby values a 400 saying only "year 318857 is out of range"."""
    client, _ = month
    r = client.get("/ws/v1/partition/default/history/usage", params={"groupBy": "queue", **params})
    assert r.status_code == 400, r.text
    message = r.json()["message"]
    assert message.startswith(f"{which}: ") and "between 1970-01-01 and 9999" in message, message
