"""Time windows (issue 34 item 4, docs/windows.md): cron and absolute schedules in a zone, overrides
opened and closed at each edge as a journalled configuration change, overlapping windows refused
naming both — and the scenario of a window that raises then lowers a max, with quota preemption at its
end, replayed identically after a restart."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from quotaplane.config.identity import UserGroup
from quotaplane.config.loader import load_config
from quotaplane.config.windows import WindowSpecError, parse_cron, parse_windows
from quotaplane.errors import ConfigError
from quotaplane.scheduler import Scheduler
from quotaplane.windows import edges, tick
from tests.partition.helpers import Clock

H = 3600.0
#: Friday 2026-11-27, 00:00 UTC
FRI = datetime(2026, 11, 27, tzinfo=UTC).timestamp()

CONFIG = """
partitions:
- name: default
  preemption: {quotapreemptionenabled: true}
  queues:
  - name: root
    submitacl: '*'
    queues:
    - name: finance
      resources: {max: {nvidia.com/gpu: 2}}   # outside the window
      properties: {quota.preemption.delay: 60s}
    - name: research
  budgets:
  - {queue: root.finance, resourcehours: {nvidia.com/gpu: 10}, period: day}
  windows:
  - name: evening
    queue: root.finance
    cron: "0 18 * * 1-5"        # weekdays 18:00 in Zurich
    duration: 5h
    timezone: Europe/Zurich
    max: {nvidia.com/gpu: 6}
    resourcehours: {nvidia.com/gpu: 40}
"""


def _ms(*args: int) -> int:
    return round(datetime(*args, tzinfo=UTC).timestamp() * 1000)  # type: ignore[arg-type, misc]


def test_cron_fields_ranges_steps_names_and_either_day() -> None:
    c = parse_cron("*/15 9-17/4 1,15 jan-mar mon")
    assert c.minutes == (0, 15, 30, 45) and c.hours == (9, 13, 17)
    assert c.months == frozenset({1, 2, 3}) and c.weekdays == frozenset({1})
    # both days restricted: the 1st, the 15th or a Monday (Vixie cron)
    from zoneinfo import ZoneInfo
    lo, hi = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 6, tzinfo=UTC)
    starts = list(c.starts(lo, hi, ZoneInfo("UTC")))
    assert {s.day for s in starts} == {1, 5}
    for bad, what in [("* * *", "five fields"), ("60 * * * *", "minute: '60' is not in 0..59"),
                      ("* * * * 8", "day of week"), ("5-1 * * * *", "goes backwards"),
                      ("*/0 * * * *", "bad step")]:
        with pytest.raises(ValueError, match=what):
            parse_cron(bad)


def test_a_cron_window_holds_its_occurrences_in_its_zone_and_an_absolute_one_its_range() -> None:
    [w, x] = parse_windows([
        {"name": "e", "queue": "root.f", "cron": "0 18 * * 1-5", "duration": "5h",
         "timezone": "Europe/Zurich", "max": {"gpu": 6}},
        {"name": "x", "queue": "root.f", "from": "2026-12-24", "to": "2026-12-27", "guaranteed": {"gpu": 1}}])
    assert [w.active_at(_ms(2026, 11, 27, h)) for h in (16, 17, 21, 22)] == [False, True, True, False]
    assert not w.active_at(_ms(2026, 11, 28, 18))                  # Saturday
    assert x.active_at(_ms(2026, 12, 26, 23)) and not x.active_at(_ms(2026, 12, 27))


@pytest.mark.parametrize(("raw", "message"), [
    ([{"name": "a", "queue": "root.f", "cron": "0 18 * * *", "duration": "5h", "max": {"gpu": 1}},
      {"name": "b", "queue": "root.f", "cron": "0 22 * * *", "duration": "1h", "max": {"gpu": 2}}],
     "windows[0] (a): overlaps windows[1] (b) on max of root.f"),
    ([{"name": "a", "queue": "root.f", "cron": "0 * * * *", "duration": "2h", "max": {"gpu": 1}}],
     "windows[0] (a): its occurrences overlap each other on max of root.f"),
    ([{"name": "a", "queue": "root.f", "cron": "0 18 * * *", "duration": "5h", "max": {"gpu": 1}},
      {"name": "x", "queue": "root.f", "from": "2026-12-24T19:00", "to": "2026-12-24T20:00",
       "max": {"gpu": 2}}],
     "windows[0] (a): overlaps windows[1] (x)"),
    ([{"name": "a", "queue": "root.f", "cron": "0 18 * * *", "max": {"gpu": 1}}], "needs a duration"),
    ([{"name": "a", "queue": "root.f", "cron": "0 18 * * *", "duration": "1h"}], "overrides at least one"),
    ([{"name": "a", "queue": "root.f", "from": "2026-12-24", "to": "2026-12-23", "max": {"gpu": 1}}],
     "to must be after from"),
    ([{"name": "a", "queue": "root.f", "cron": "0 18 * * *", "duration": "1h", "minimum": {"gpu": 1}}],
     "unknown key 'minimum'"),
])
def test_a_wrong_window_is_one_sentence_naming_it(raw: object, message: str) -> None:
    with pytest.raises(WindowSpecError) as err:
        parse_windows(raw)
    assert message in str(err.value)


def test_windows_on_different_settings_or_queues_may_overlap() -> None:
    assert len(parse_windows([
        {"name": "a", "queue": "root.f", "cron": "0 18 * * *", "duration": "5h", "max": {"gpu": 1}},
        {"name": "b", "queue": "root.f", "cron": "0 18 * * *", "duration": "5h", "guaranteed": {"gpu": 1}},
        {"name": "c", "queue": "root.g", "cron": "0 18 * * *", "duration": "5h", "max": {"gpu": 1}}])) == 3


def test_validate_names_the_line_the_missing_queue_and_the_missing_budget() -> None:
    text = CONFIG.replace("queue: root.finance\n    cron", "queue: root.nowhere\n    cron")
    with pytest.raises(ConfigError) as err:
        load_config(text)
    assert "line 15" in str(err.value) and "no queue root.nowhere" in str(err.value)
    text = CONFIG.replace("  - {queue: root.finance, resourcehours: {nvidia.com/gpu: 10}, period: day}\n", "")
    with pytest.raises(ConfigError, match=r"queue root\.finance has no budget of its own"):
        load_config(text.replace("  budgets:\n", ""))


def test_edges_open_and_close_as_configuration_text() -> None:
    assert edges(CONFIG, FRI + 16 * H) is None                     # 17:00 in Zurich: closed, as written
    opened, what = edges(CONFIG, FRI + 17 * H) or ("", [])
    assert what == ["window evening opened on root.finance (partition default)"]
    assert "max: {nvidia.com/gpu: 6}" in opened and "active: true" in opened
    assert "resourcehours: {nvidia.com/gpu: 40}" in opened and "saved:" in opened
    cfg = load_config(opened).partitions[0]
    assert cfg.extensions["windows"][0]["saved"] == {"max": {"nvidia.com/gpu": 2},
                                                      "resourcehours": {"nvidia.com/gpu": 10}}
    assert edges(opened, FRI + 18 * H) is None                     # still open: nothing to do
    closed, what = edges(opened, FRI + 22 * H) or ("", [])
    assert what == ["window evening closed on root.finance (partition default)"]
    assert load_config(closed).partitions[0].extensions == load_config(CONFIG).partitions[0].extensions
    assert "max: {nvidia.com/gpu: 2}" in closed and "active" not in closed


def test_a_window_raises_then_lowers_a_max_and_quota_preemption_enforces_it(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/q.db"
    clock = Clock(FRI + 16 * H)
    s = Scheduler.from_yaml(CONFIG, store=store, clock=clock)
    p = s.partition("default")
    p.add_node("n", {"nvidia.com/gpu": 8})
    p.add_application("risk", UserGroup("fin", ()), queue="root.finance")
    assert p.allocate("risk", "base", {"nvidia.com/gpu": 2}, priority=10).allocated
    assert not p.allocate("risk", "k1", {"nvidia.com/gpu": 2}).allocated          # max 2
    clock.now = FRI + 17 * H                                                         # 18:00 in Zurich
    assert tick(s.config_text, s.update_config, clock()) == \
        ["window evening opened on root.finance (partition default)"]
    assert p.allocate("risk", "k1", {"nvidia.com/gpu": 2}).allocated
    assert p.allocate("risk", "k2", {"nvidia.com/gpu": 2}).allocated               # 6 of the window's 6
    clock.now = FRI + 22 * H                                                         # 23:00: it closes
    assert tick(s.config_text, s.update_config, clock()) == \
        ["window evening closed on root.finance (partition default)"]
    assert dict(p.queues.queue("root.finance").max or {}) == {"nvidia.com/gpu": 2}
    p.check_timeouts()                                       # over its max: preempted after 60 s
    clock.advance(60)
    out = p.check_timeouts()
    assert sorted(out) == ["k1: preempted by queue (root.finance)", "k2: preempted by queue (root.finance)"]
    live = p.dump_state()
    s.close(snapshot=False)
    again = Scheduler.from_yaml(CONFIG, store=store, clock=clock)
    assert again.partition("default").dump_state() == live and again.config_text == s.config_text
    again.close(snapshot=False)


def test_rest_reads_windows_adds_a_one_off_override_and_removes_it() -> None:
    from fastapi.testclient import TestClient

    from quotaplane.server.app import create_app, open_and_close_windows

    clock = Clock(FRI + 10 * H)
    s = Scheduler.from_yaml(CONFIG, clock=clock)
    p = s.partition("default")
    with TestClient(create_app(s)) as client:
        service = client.app.state.service       # type: ignore[attr-defined]
        [w] = client.get("/ws/v1/partition/default/windows").json()["windows"]
        assert (w["name"], w["active"], w["due"]) == ("evening", False, False)
        assert w["schedule"] == {"cron": "0 18 * * 1-5", "duration": 18000.0}
        # a one-off override already due: it opens at once
        r = client.post("/ws/v1/partition/default/windows", json={
            "name": "audit", "queue": "root.research", "from": "2026-11-27T09:00", "to": "2026-11-27T12:00",
            "max": {"vcore": 4000}})
        assert r.status_code == 200, r.text
        audit = next(x for x in r.json()["windows"] if x["name"] == "audit")
        assert audit["active"] and dict(p.queues.queue("root.research").max or {}) == {"vcore": 4_000_000}
        bad = client.post("/ws/v1/partition/default/windows", json={
            "name": "late", "queue": "root.finance", "from": "2026-11-27T18:30", "to": "2026-11-27T19:00",
            "timezone": "Europe/Zurich", "max": {"nvidia.com/gpu": 1}})
        assert bad.status_code == 400
        assert "(evening): overlaps windows[2] (late) on max" in bad.json()["message"]
        clock.now = FRI + 17 * H                 # the service's loop opens the evening
        assert open_and_close_windows(service) == [
            "window evening opened on root.finance (partition default)",
            "window audit closed on root.research (partition default)"]
        assert client.delete("/ws/v1/partition/default/window/evening").status_code == 200
        assert dict(p.queues.queue("root.finance").max or {}) == {"nvidia.com/gpu": 2}   # put back
        assert client.delete("/ws/v1/partition/default/window/evening").status_code == 404
    s.close()


def test_a_posted_window_with_an_unknown_key_lists_only_the_keys_a_request_may_set() -> None:
    """``active`` and ``saved`` are written by quotaplane (GET's output), so the 400 of a POST does not
    offer them; ``overrides`` (GET's shape) says where the fields go (found trying it as a new user)."""
    from fastapi.testclient import TestClient

    from quotaplane.server.app import create_app

    s = Scheduler.from_yaml(CONFIG, clock=Clock(FRI + 10 * H))
    before = s.config_text
    with TestClient(create_app(s)) as client:
        body = {"name": "audit", "queue": "root.research", "from": "2026-11-28T09:00",
                "to": "2026-11-28T12:00", "overrides": {"max": {"vcore": 4000}}}
        r = client.post("/ws/v1/partition/default/windows", json=body)
        assert r.status_code == 400
        message = r.json()["message"]
        assert message.startswith("windows[1] (audit): unknown key 'overrides' (the overridden settings "
                                  "— max, guaranteed, … — are keys of the window itself); allowed keys: "
                                  "name, queue, elasticquota, user, group, cron, duration, from, to, "
                                  "timezone, max, guaranteed, resourcehours, min, maxresources, "
                                  "maxapplications"), message
        assert "active" not in message and "saved" not in message
        body["minimum"] = body.pop("overrides")
        message = client.post("/ws/v1/partition/default/windows", json=body).json()["message"]
        assert "unknown key 'minimum'; allowed keys: name," in message and "saved" not in message
        body = {"name": "audit", "queue": "root.research", "max": {"vcore": 4},
                "schedule": {"from": "2026-11-28T09:00", "to": "2026-11-28T12:00"}}
        message = client.post("/ws/v1/partition/default/windows", json=body).json()["message"]
        assert "unknown key 'schedule' (write from and to, or cron and duration); allowed" in message
    assert s.config_text == before
    s.close()


def test_the_example_of_docs_windows_is_a_valid_configuration() -> None:
    """Found as a new user: the page's first example failed validation (year-end's guaranteed of
    root.finance overlapped evening-risk's on the weekdays it covers)."""
    import re

    from quotaplane.policies.registry import check_extensions

    text = (Path(__file__).resolve().parents[2] / "docs" / "windows.md").read_text()
    example = re.search(r"```yaml\n(partitions:.*?)```", text, re.S)
    assert example is not None
    assert check_extensions(load_config(example.group(1))) == []


@pytest.mark.parametrize(("body", "says"), [
    ({"name": "z", "queue": "root.finance", "from": "2026-12-28T00:00", "to": "2026-12-30T00:00",
      "guaranteed": {"nvidia.com/gpu": 8}}, "guaranteed"),
    ({"name": "z", "queue": "root.finance", "from": "2026-11-27T09:00", "to": "2026-11-27T12:00",
      "guaranteed": {"nvidia.com/gpu": 8}}, "guaranteed"),        # due now: it would open at once
])
def test_a_posted_window_that_would_open_to_an_invalid_configuration_is_refused(
        body: dict[str, object], says: str) -> None:
    """Found trying the product as a new user: a one-off window raising a guarantee above the queue's
    max was accepted; at its opening the configuration it makes was refused, so it never opened and
    the service logged a traceback at every tick."""
    from fastapi.testclient import TestClient

    from quotaplane.server.app import create_app

    s = Scheduler.from_yaml(CONFIG, clock=Clock(FRI + 10 * H))
    before = s.config_text
    with TestClient(create_app(s)) as client:
        r = client.post("/ws/v1/partition/default/windows", json=body)
        assert r.status_code == 400, r.text
        message = r.json()["message"]
        assert message.startswith("windows[1] (z): the configuration with it open is invalid: "), message
        assert says in message, message
    assert s.config_text == before
    s.close()


_OPENS_INVALID = ("partitions:\n- name: default\n  queues:\n  - name: root\n    queues:\n"
                  "    - name: a\n      resources: {max: {vcore: 2}}\n"
                  "  windows:\n  - {name: z, queue: root.a, from: '2026-12-28T00:00', "
                  "to: '2026-12-30T00:00', guaranteed: {vcore: 8}}\n")


def test_validate_refuses_a_window_that_would_open_to_an_invalid_configuration(tmp_path: Path) -> None:
    """``serve`` refused such a file at start, but ``quotaplane validate`` said "ok": the check a user
    runs before applying a configuration must refuse what the service would."""
    import subprocess
    import sys

    from quotaplane.config.files import validate_file

    config = tmp_path / "q.yaml"
    config.write_text(_OPENS_INVALID)
    problems = validate_file(config)
    assert len(problems) == 1 and problems[0][0] == 0, problems
    assert problems[0][1].startswith("windows[0] (z): the configuration with it open is invalid: ")
    assert "guaranteed" in problems[0][1]
    exe = str(Path(sys.executable).with_name("quotaplane"))
    out = subprocess.run([exe, "validate", str(config)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stderr.startswith(f"{config}: windows[0] (z): "), out
    # config apply checks the file before it asks the service (which is not reached here)
    out = subprocess.run([exe, "config", "apply", str(config), "--yes", "--server", "http://127.0.0.1:9"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stderr.startswith(f"{config}: windows[0] (z): "), out
    assert "nothing applied" in out.stderr
    config.write_text(_OPENS_INVALID.replace("guaranteed: {vcore: 8}", "guaranteed: {vcore: 2}"))
    assert validate_file(config) == []


def test_config_apply_refuses_a_window_that_would_open_to_an_invalid_configuration() -> None:
    """``PUT /ws/v1/config`` (``quotaplane config apply``) took such a configuration; at the window's
    edge the change it makes was refused at every tick and the window never opened."""
    from fastapi.testclient import TestClient

    from quotaplane.server.app import create_app

    s = Scheduler.from_yaml(CONFIG, clock=Clock(FRI + 10 * H))
    before = s.config_text
    with TestClient(create_app(s)) as client:
        r = client.put("/ws/v1/config", content=_OPENS_INVALID.encode())
        assert r.status_code == 400, r.text
        message = r.json()["message"]
        assert "windows[0] (z): the configuration with it open is invalid: " in message, message
        assert "guaranteed" in message
        # validate-conf (YuniKorn's) answered "allowed" for it (found by a review)
        v = client.post("/ws/v1/validate-conf", content=_OPENS_INVALID.encode())
        assert v.status_code == 200 and v.json()["allowed"] is False, v.text
        assert v.json()["reason"].startswith("windows[0] (z): the configuration with it open is invalid: ")
        ok = client.put("/ws/v1/config", content=_OPENS_INVALID.replace("vcore: 8", "vcore: 2").encode())
        assert ok.status_code == 200, ok.text
    assert s.config_text != before
    s.close()
